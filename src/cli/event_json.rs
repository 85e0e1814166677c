//! The JSON of one event, as `log --json` prints it and the timeline view
//! embeds it: flat objects with a snake_case `type` and plain field names,
//! never serde's enum tags (schema in `docs/cli-json.md`, version
//! [`SCHEMA_VERSION`]).

use agent_journal::conversation::ConversationEvent;
use agent_journal::{Envelope, Event, Outcome, ProviderOutcome, ToolCallRecord};
use serde_json::{Map, Value, json};

/// The version of the JSON the CLI prints (`docs/cli-json.md`). Adding a
/// field keeps it; renaming or removing one, or changing a meaning, bumps it.
pub(crate) const SCHEMA_VERSION: u32 = 1;

fn calls(calls: &[ToolCallRecord]) -> Value {
    calls
        .iter()
        .map(|c| json!({"call_id": c.call_id.as_str(), "name": c.name, "arguments": c.arguments}))
        .collect()
}

/// The calls of an inner-loop message with the status each records: the
/// fold counts it (an imported message's answered calls are `completed`
/// there, with no `tool_status` event).
fn calls_with_status(calls: &[ToolCallRecord]) -> Value {
    calls
        .iter()
        .map(|c| json!({"call_id": c.call_id.as_str(), "name": c.name, "arguments": c.arguments, "status": c.status.as_str()}))
        .collect()
}

fn outcome(o: &Outcome) -> (&'static str, Option<&str>) {
    match o {
        Outcome::Succeeded => ("succeeded", None),
        Outcome::Failed { error } => ("failed", Some(error)),
        Outcome::Cancelled => ("cancelled", None),
    }
}

/// The `type` and fields of one event (without `seq` and `at`).
fn body(event: &Event) -> (&'static str, Value) {
    match event {
        Event::SessionOpened { labels } => (
            "session_opened",
            json!({"labels": labels.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()}),
        ),
        Event::EvaluationStarted {
            evaluation_id,
            prompt_ns,
            prompt_key,
            adapter,
        } => (
            "evaluation_started",
            json!({"evaluation": evaluation_id.to_string(), "prompt_ns": prompt_ns,
                   "prompt_key": prompt_key, "adapter": adapter}),
        ),
        Event::Message(m) => (
            "message",
            json!({"evaluation": m.evaluation_id.to_string(), "role": m.role.as_str(),
                   "content": m.content, "sequence": m.sequence, "turn": m.turn,
                   "tool_calls": calls_with_status(&m.tool_calls),
                   "tool_call_id": m.tool_call_id.as_ref().map(|c| c.as_str()),
                   "tool_name": m.tool_name, "message_id": m.message_id.to_string()}),
        ),
        Event::ToolStatus {
            evaluation_id,
            call_id,
            status,
            error,
        } => (
            "tool_status",
            json!({"evaluation": evaluation_id.to_string(), "call_id": call_id.as_str(),
                   "status": status.as_str(), "error": error}),
        ),
        Event::ProviderCall(p) => {
            let error = match &p.outcome {
                ProviderOutcome::Ok => None,
                ProviderOutcome::Error { message } => Some(message),
            };
            (
                "provider_call",
                json!({"evaluation": p.evaluation_id.to_string(), "turn": p.turn,
                       "provider": p.provider, "model": p.model,
                       "input_tokens": p.usage.input_tokens, "output_tokens": p.usage.output_tokens,
                       "started_at": p.started_at.to_rfc3339(),
                       "finished_at": p.finished_at.to_rfc3339(),
                       "ok": error.is_none(), "error": error}),
            )
        }
        Event::AdapterState(a) => (
            "adapter_state",
            json!({"evaluation": a.evaluation_id.map(|e| e.to_string()),
                   "adapter_type": a.adapter_type, "resumable": a.resumable,
                   "bytes": a.state.len()}),
        ),
        Event::Compacted {
            evaluation_id,
            through_sequence,
            summary,
        } => (
            "compacted",
            json!({"evaluation": evaluation_id.to_string(),
                   "through_sequence": through_sequence, "summary": summary}),
        ),
        Event::EvaluationFinished {
            evaluation_id,
            outcome: o,
        } => {
            let (o, error) = outcome(o);
            (
                "evaluation_finished",
                json!({"evaluation": evaluation_id.to_string(), "outcome": o, "error": error}),
            )
        }
        Event::ForkPoint { parent, at } => (
            "forked",
            json!({"parent": parent.to_string(), "parent_seq": at}),
        ),
        Event::Custom { kind, payload } => (
            "custom",
            json!({"kind": kind, "bytes": payload.len(),
                   "text": std::str::from_utf8(payload).ok()}),
        ),
        Event::Conversation(c) => conversation(c),
    }
}

fn conversation(event: &ConversationEvent) -> (&'static str, Value) {
    match event {
        ConversationEvent::Created(c) | ConversationEvent::Updated(c) => (
            if matches!(event, ConversationEvent::Created(_)) {
                "conversation_created"
            } else {
                "conversation_updated"
            },
            json!({"conversation": c.id.to_string(), "agent": c.agent,
                   "subject_id": c.subject_id, "title": c.title}),
        ),
        ConversationEvent::Message(m) => (
            "conversation_message",
            json!({"conversation": m.conversation_id.to_string(),
                   "message_id": m.id.to_string(), "role": m.role.as_str(),
                   "text": m.text(), "content": m.content, "name": m.name,
                   "turn": m.turn_id.map(|t| t.to_string()),
                   "tool_calls": calls(&m.tool_calls),
                   "tool_call_id": m.tool_call_id.as_ref().map(|c| c.as_str())}),
        ),
        ConversationEvent::Turn(t) => (
            "turn",
            json!({"turn": t.id.to_string(), "agent": t.agent, "status": t.status.as_str(),
                   "started_at": t.started_at.to_rfc3339(),
                   "finished_at": t.finished_at.map(|f| f.to_rfc3339()),
                   "error": t.error.as_ref().map(|e| e.message.clone())}),
        ),
        ConversationEvent::ProviderCall(p) => (
            "conversation_provider_call",
            json!({"id": p.id.to_string(), "turn": p.turn_id.to_string(),
                   "provider": p.provider, "model": p.model,
                   "input_tokens": p.usage.as_ref().map(|u| u.tokens.input_tokens),
                   "output_tokens": p.usage.as_ref().map(|u| u.tokens.output_tokens),
                   "started_at": p.started_at.to_rfc3339(),
                   "finished_at": p.finished_at.map(|f| f.to_rfc3339()),
                   "ok": p.outcome.as_ref().map(|o| o.ok),
                   "error": p.outcome.as_ref().and_then(|o| o.error.clone())}),
        ),
        ConversationEvent::Compacted(c) => (
            "history_compacted",
            json!({"turn": c.turn_id.map(|t| t.to_string()), "strategy": c.strategy,
                   "messages_before": c.messages_before, "messages_after": c.messages_after,
                   "summary": c.summary}),
        ),
    }
}

/// The JSON object of one event: `session`, `seq`, `at` (RFC 3339, UTC),
/// `type`, then the fields of its type.
pub(crate) fn event(e: &Envelope) -> Value {
    let (kind, fields) = body(&e.event);
    let mut out = Map::new();
    out.insert("session".into(), json!(e.session.to_string()));
    out.insert("seq".into(), json!(e.seq));
    out.insert("at".into(), json!(e.at.to_rfc3339()));
    out.insert("type".into(), json!(kind));
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}
