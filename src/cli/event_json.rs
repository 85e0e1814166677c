//! The JSON of one event, as `log --json` prints it and the timeline view
//! embeds it: flat objects with a snake_case `type` and plain field names,
//! never serde's enum tags (schema in `docs/cli-json.md`, version
//! [`SCHEMA_VERSION`]).

use agent_journal::conversation::ConversationEvent;
use agent_journal::{Envelope, Event, Outcome, ProviderOutcome, ToolCallRecord};
use serde_json::{Map, Value, json};

use crate::cli::output::json_time;

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

/// The type of an event, one word everywhere: the `type` of `log --json`
/// and of the page of `view`, the second column of `log`, and what
/// `log --type` takes (snake_case).
pub(crate) fn kind(event: &Event) -> &'static str {
    match event {
        Event::SessionOpened { .. } => "session_opened",
        Event::EvaluationStarted { .. } => "evaluation_started",
        Event::Message(_) => "message",
        Event::ToolStatus { .. } => "tool_status",
        Event::ProviderCall(_) => "provider_call",
        Event::AdapterState(_) => "adapter_state",
        Event::Compacted { .. } => "compacted",
        Event::EvaluationFinished { .. } => "evaluation_finished",
        Event::ForkPoint { .. } => "forked",
        Event::Custom { .. } => "custom",
        Event::Conversation(c) => match &**c {
            ConversationEvent::Created(_) => "conversation_created",
            ConversationEvent::Updated(_) => "conversation_updated",
            ConversationEvent::Message(_) => "conversation_message",
            ConversationEvent::Turn(_) => "turn",
            ConversationEvent::ProviderCall(_) => "conversation_provider_call",
            ConversationEvent::Compacted(_) => "history_compacted",
        },
    }
}

/// Every type [`kind`] names, with the spelling the text of `log` used
/// before (the library's `Event::kind`), which `--type` still takes.
pub(crate) const KINDS: &[(&str, &str)] = &[
    ("session_opened", "SessionOpened"),
    ("evaluation_started", "EvaluationStarted"),
    ("message", "Message"),
    ("tool_status", "ToolStatus"),
    ("provider_call", "ProviderCall"),
    ("adapter_state", "AdapterState"),
    ("compacted", "Compacted"),
    ("evaluation_finished", "EvaluationFinished"),
    ("forked", "ForkPoint"),
    ("custom", "Custom"),
    ("conversation_created", "ConversationCreated"),
    ("conversation_updated", "ConversationUpdated"),
    ("conversation_message", "ConversationMessage"),
    ("turn", "TurnChanged"),
    ("conversation_provider_call", "ProviderCallChanged"),
    ("history_compacted", "HistoryCompacted"),
];

/// The fields of one event (without `session`, `seq`, `at` and `type`).
fn body(event: &Event) -> Value {
    match event {
        Event::SessionOpened { labels } => {
            json!({"labels": labels.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()})
        }
        Event::EvaluationStarted {
            evaluation_id,
            prompt_ns,
            prompt_key,
            adapter,
        } => json!({"evaluation": evaluation_id.to_string(), "prompt_ns": prompt_ns,
                   "prompt_key": prompt_key, "adapter": adapter}),
        Event::Message(m) => json!({"evaluation": m.evaluation_id.to_string(),
                   "role": m.role.as_str(), "content": m.content, "sequence": m.sequence,
                   "turn": m.turn, "tool_calls": calls_with_status(&m.tool_calls),
                   "tool_call_id": m.tool_call_id.as_ref().map(|c| c.as_str()),
                   "tool_name": m.tool_name, "message_id": m.message_id.to_string()}),
        Event::ToolStatus {
            evaluation_id,
            call_id,
            status,
            error,
        } => json!({"evaluation": evaluation_id.to_string(), "call_id": call_id.as_str(),
                   "status": status.as_str(), "error": error}),
        Event::ProviderCall(p) => {
            let error = match &p.outcome {
                ProviderOutcome::Ok => None,
                ProviderOutcome::Error { message } => Some(message),
            };
            json!({"evaluation": p.evaluation_id.to_string(), "turn": p.turn,
                   "provider": p.provider, "model": p.model,
                   "input_tokens": p.usage.input_tokens, "output_tokens": p.usage.output_tokens,
                   "started_at": json_time(p.started_at), "finished_at": json_time(p.finished_at),
                   "ok": error.is_none(), "error": error})
        }
        Event::AdapterState(a) => json!({"evaluation": a.evaluation_id.map(|e| e.to_string()),
                   "adapter_type": a.adapter_type, "resumable": a.resumable,
                   "bytes": a.state.len()}),
        Event::Compacted {
            evaluation_id,
            through_sequence,
            summary,
        } => json!({"evaluation": evaluation_id.to_string(),
                   "through_sequence": through_sequence, "summary": summary}),
        Event::EvaluationFinished {
            evaluation_id,
            outcome: o,
        } => {
            let (o, error) = outcome(o);
            json!({"evaluation": evaluation_id.to_string(), "outcome": o, "error": error})
        }
        Event::ForkPoint { parent, at } => {
            json!({"parent": parent.to_string(), "parent_seq": at})
        }
        Event::Custom { kind, payload } => json!({"kind": kind, "bytes": payload.len(),
                   "text": std::str::from_utf8(payload).ok()}),
        Event::Conversation(c) => conversation(c),
    }
}

fn conversation(event: &ConversationEvent) -> Value {
    match event {
        ConversationEvent::Created(c) | ConversationEvent::Updated(c) => {
            json!({"conversation": c.id.to_string(), "agent": c.agent,
                   "subject_id": c.subject_id, "title": c.title})
        }
        ConversationEvent::Message(m) => json!({"conversation": m.conversation_id.to_string(),
                   "message_id": m.id.to_string(), "role": m.role.as_str(),
                   "text": m.text(), "content": m.content, "name": m.name,
                   "turn": m.turn_id.map(|t| t.to_string()),
                   "tool_calls": calls(&m.tool_calls),
                   "tool_call_id": m.tool_call_id.as_ref().map(|c| c.as_str())}),
        ConversationEvent::Turn(t) => json!({"turn": t.id.to_string(), "agent": t.agent,
                   "status": t.status.as_str(), "started_at": json_time(t.started_at),
                   "finished_at": t.finished_at.map(json_time),
                   "error": t.error.as_ref().map(|e| e.message.clone())}),
        ConversationEvent::ProviderCall(p) => json!({"id": p.id.to_string(),
                   "turn": p.turn_id.to_string(), "provider": p.provider, "model": p.model,
                   "input_tokens": p.usage.as_ref().map(|u| u.input_tokens),
                   "output_tokens": p.usage.as_ref().map(|u| u.output_tokens),
                   "started_at": json_time(p.started_at), "finished_at": p.finished_at.map(json_time),
                   "ok": p.outcome.as_ref().map(|o| o.ok),
                   "sent_messages": p.sent_messages.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
                   "parameters": p.parameters,
                   "error": p.outcome.as_ref().and_then(|o| o.error.clone())}),
        ConversationEvent::Compacted(c) => json!({"turn": c.turn_id.map(|t| t.to_string()),
                   "strategy": c.strategy, "messages_before": c.messages_before,
                   "messages_after": c.messages_after, "summary": c.summary}),
    }
}

/// The JSON object of one event: `session`, `seq`, `at` (RFC 3339, UTC),
/// `type`, then the fields of its type.
pub(crate) fn event(e: &Envelope) -> Value {
    let fields = body(&e.event);
    let mut out = Map::new();
    out.insert("session".into(), json!(e.session.to_string()));
    out.insert("seq".into(), json!(e.seq));
    out.insert("at".into(), json!(json_time(e.at)));
    out.insert("type".into(), json!(kind(&e.event)));
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}
