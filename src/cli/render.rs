//! Text rendering of timelines, states and session lists.

use agent_journal::conversation::ConversationEvent;

use crate::cli::event_json;
use crate::cli::filter::Filter;
use crate::cli::output::json_time;
use crate::cli::style::{self, Paint};
use agent_journal::state::SessionState;
use agent_journal::{
    Envelope, Error, Event, InnerMessage, Outcome, Session, SessionInfo, SessionStatus,
};

/// At most `n` characters of `s` on one line, with an ellipsis if cut;
/// under `--full`, all of it (on one line).
pub(crate) fn clip(s: &str, n: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if style::full() || one_line.chars().count() <= n {
        one_line
    } else {
        let mut out: String = one_line.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// A message content for `{:?}`: [`clip`]ped, or under `--full` exactly as
/// it is (its line breaks then show as `\n`).
pub(crate) fn clip_exact(s: &str, n: usize) -> String {
    if style::full() {
        s.to_owned()
    } else {
        clip(s, n)
    }
}

/// The last 8 digits of an id: UUIDv7 ids made in the same minute share
/// their first ones (their time), never their random last ones.
pub(crate) fn short(id: impl std::fmt::Display) -> String {
    let s = id.to_string();
    s[s.len().saturating_sub(8)..].to_owned()
}

pub(crate) fn outcome(o: &Outcome) -> String {
    match o {
        Outcome::Succeeded => "succeeded".into(),
        Outcome::Failed { error } => format!("failed: {}", clip(error, 60)),
        Outcome::Cancelled => "cancelled".into(),
    }
}

/// The word of a resume state, snake_case as every state the CLI names
/// (`pending_tools`, `in_doubt`, ...).
pub(crate) fn state_name(s: &agent_journal::resume::ResumeState) -> String {
    s.name().replace('-', "_")
}

/// The word of an outcome: `succeeded`, `failed` or `cancelled`.
pub(crate) fn outcome_word(o: &Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed { .. } => "failed",
        Outcome::Cancelled => "cancelled",
    }
}

/// A message's line: its role, its place in its evaluation (`msg N`: the
/// message index, `sequence` in JSON; `seq` is always an event number),
/// its turn and content, its tool calls or the call it answers.
fn message_line(m: &InnerMessage) -> String {
    let mut line = format!(
        "{:<9} msg={} turn={} {:?}",
        m.role.as_str(),
        m.sequence,
        m.turn,
        clip_exact(&m.content, 70)
    );
    for c in &m.tool_calls {
        line.push_str(&format!(
            " -> {}({}) [{}]",
            c.name,
            clip(&c.arguments, 40),
            c.call_id
        ));
    }
    if let Some(id) = &m.tool_call_id {
        line.push_str(&format!(" <- {id}"));
    }
    for t in agent_journal::provider::opaque::opaque_types(m) {
        line.push_str(&format!(" [opaque {t}]"));
    }
    line
}

fn conversation_line(c: &ConversationEvent) -> String {
    match c {
        ConversationEvent::Created(c) | ConversationEvent::Updated(c) => format!(
            "conversation {:?} agent={}{}",
            c.title.as_deref().unwrap_or(""),
            c.agent,
            c.subject_id
                .as_deref()
                .map(|s| format!(" subject={s}"))
                .unwrap_or_default()
        ),
        ConversationEvent::Message(m) => {
            let mut line = format!("{:<9} {:?}", m.role.as_str(), clip_exact(&m.text(), 70));
            for c in &m.tool_calls {
                line.push_str(&format!(
                    " -> {}({}) [{}]",
                    c.name,
                    clip(&c.arguments, 40),
                    c.call_id
                ));
            }
            if let Some(id) = &m.tool_call_id {
                line.push_str(&format!(" <- {id}"));
            }
            if let Some(t) = m.turn_id {
                line.push_str(&format!(" (turn {})", short(t)));
            }
            line
        }
        ConversationEvent::Turn(t) => {
            let mut line = format!(
                "turn {} {} agent={}",
                short(t.id),
                t.status.as_str(),
                t.agent
            );
            if let Some(e) = &t.error {
                line.push_str(&format!(": {}", clip(&e.message, 60)));
            }
            line
        }
        ConversationEvent::Compacted(c) => format!(
            "history compacted by {}: {} -> {} messages sent{}",
            c.strategy,
            c.messages_before,
            c.messages_after,
            if c.summary.is_some() {
                ", with a summary"
            } else {
                ""
            }
        ),
        ConversationEvent::ProviderCall(p) => {
            let state = match &p.outcome {
                None => "started".to_owned(),
                Some(o) if o.ok => "ok".to_owned(),
                Some(o) => format!("failed: {}", clip(o.error.as_deref().unwrap_or(""), 50)),
            };
            let tokens = p
                .usage
                .as_ref()
                .map(|u| format!(", {} in / {} out tokens", u.input_tokens, u.output_tokens))
                .unwrap_or_default();
            format!(
                "provider call {} {}/{} (turn {}) {state}{tokens}",
                short(p.id),
                p.provider,
                p.model,
                short(p.turn_id)
            )
        }
    }
}

/// One line describing an event.
pub(crate) fn event_line(e: &Envelope) -> String {
    let what = match &e.event {
        Event::SessionOpened { labels } => {
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("session opened {}", l.join(" "))
        }
        Event::EvaluationStarted {
            evaluation_id,
            prompt_ns,
            prompt_key,
            adapter,
        } => format!(
            "evaluation {} started: prompt {prompt_ns}/{prompt_key} via {adapter}",
            short(evaluation_id)
        ),
        Event::Message(m) => message_line(m),
        Event::ToolStatus {
            call_id,
            status,
            error,
            ..
        } => match error {
            Some(err) => format!("tool {call_id} {status}: {}", clip(err, 60)),
            None => format!("tool {call_id} {status}"),
        },
        Event::ProviderCall(p) => format!(
            "provider {} {} turn {}: {} in / {} out tokens, {} ms",
            p.provider,
            p.model,
            p.turn,
            p.usage.input_tokens,
            p.usage.output_tokens,
            (p.finished_at - p.started_at).num_milliseconds()
        ),
        Event::AdapterState(a) => format!(
            "adapter state {} (resumable: {})",
            a.adapter_type, a.resumable
        ),
        Event::Compacted {
            through_sequence,
            summary,
            ..
        } => format!(
            "compacted through msg {through_sequence}{}",
            if summary.is_some() {
                " with summary"
            } else {
                ""
            }
        ),
        Event::EvaluationFinished {
            evaluation_id,
            outcome: o,
        } => {
            format!(
                "evaluation {} finished: {}",
                short(evaluation_id),
                outcome(o)
            )
        }
        Event::ForkPoint { parent, at } => {
            format!("forked from {parent} at seq {at}")
        }
        Event::Custom { kind, payload } => match match kind.as_str() {
            crate::cli::resumed::RESUMED => crate::cli::resumed::describe(payload),
            EDIT => describe_edit(payload),
            _ => None,
        } {
            Some(text) => format!("{kind}: {text}"),
            None => format!("{kind} ({} bytes)", payload.len()),
        },
        Event::Conversation(c) => conversation_line(c),
    };
    format!(
        "{:>5}  {}  {} {}",
        e.seq,
        style::paint(Paint::Dim, &style::time(e.at)),
        style::paint(Paint::Kind, &format!("{:<20}", event_json::kind(&e.event))),
        what
    )
}

/// Prints events `from..to`, streaming.
pub(crate) fn print_log(s: &Session, from: u64, to: u64) -> Result<(), Error> {
    s.for_each_event(from..to, |e| {
        outln!("{}", event_line(&e));
        Ok(())
    })
}

pub(crate) fn status(s: SessionStatus) -> &'static str {
    match s {
        SessionStatus::Idle => "idle",
        SessionStatus::Unfinished => "unfinished",
        SessionStatus::Finished => "finished",
    }
}

/// Prints the session table.
pub(crate) fn print_sessions(
    infos: &[SessionInfo],
    costs: &std::collections::HashMap<agent_journal::SessionId, Option<f64>>,
) {
    if infos.is_empty() {
        outln!("no sessions");
        return;
    }
    outln!(
        "{:<36}  {:<29}  {:>7}  {:<10}  {:<29}  {:>10}  labels",
        "session",
        "created",
        "events",
        "status",
        "last activity",
        "cost"
    );
    for i in infos {
        let mut labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some((parent, at)) = i.forked_from {
            labels.push(format!("(fork of {} at seq {at})", short(parent)));
        }
        outln!(
            "{:<36}  {:<29}  {:>7}  {}  {:<29}  {:>10}  {}",
            i.id,
            style::time(i.created),
            i.events,
            style::paint(
                style::status_paint(status(i.status)),
                &format!("{:<10}", status(i.status))
            ),
            style::time(i.last_activity),
            crate::cli::price::usd(costs.get(&i.id).copied().flatten()),
            labels.join(" ")
        );
    }
}

/// The JSON of one session summary, with its cost in US dollars (`null`
/// when a model it called has no price).
pub(crate) fn info_json(i: &SessionInfo, cost_usd: Option<f64>) -> serde_json::Value {
    serde_json::json!({
        "id": i.id.to_string(),
        "created": json_time(i.created),
        "last_activity": json_time(i.last_activity),
        "events": i.events,
        "status": status(i.status),
        "labels": i.labels.iter().map(|(k, v)| serde_json::json!([k, v])).collect::<Vec<_>>(),
        "parent": i.forked_from.map(|(p, at)| serde_json::json!({"id": p.to_string(), "at": at})),
        "cost_usd": cost_usd,
    })
}

/// Prints the state after event `at`: the evaluations, messages and tool
/// calls that `filter` lets through.
pub(crate) fn print_state(s: &Session, at: u64, state: &SessionState, filter: &Filter) {
    outln!(
        "session {} at seq {at} (of {})",
        s.id(),
        s.head().saturating_sub(1)
    );
    if let Some((parent, pat)) = state.forked_from() {
        outln!("forked from {parent} at seq {pat}");
    }
    for e in state.evaluations().iter() {
        if !filter.evaluation(&e.evaluation_id.to_string()) {
            continue;
        }
        let st = match &e.outcome {
            Some(o) => outcome(o),
            None => "unfinished".into(),
        };
        let word = st.split(':').next().unwrap_or_default().to_owned();
        outln!();
        outln!(
            "evaluation {}  prompt {}/{}  turns {}  messages {}  {}",
            e.evaluation_id,
            e.prompt_ns,
            e.prompt_key,
            e.turns,
            e.message_count,
            style::paint(style::status_paint(&word), &st)
        );
        for m in state.messages().for_evaluation(e.evaluation_id) {
            let tools: Vec<&str> = m
                .tool_calls
                .iter()
                .map(|c| c.name.as_str())
                .chain(m.tool_name.as_deref())
                .collect();
            if filter.message(m.role.as_str(), &m.content, &tools) {
                outln!("  {}", message_line(m));
            }
        }
        let calls: Vec<_> = state
            .tool_calls()
            .for_evaluation(e.evaluation_id)
            .filter(|c| {
                let text = format!("{} {} {}", c.call_id.as_str(), c.name, c.arguments);
                filter.call(&c.name, &text)
            })
            .collect();
        if !calls.is_empty() {
            outln!("  tool calls:");
            for c in calls {
                let err = c
                    .error
                    .as_deref()
                    .map(|e| format!(" ({})", clip(e, 50)))
                    .unwrap_or_default();
                let args = if style::full() {
                    format!(" {}", c.arguments)
                } else {
                    String::new()
                };
                let status = c.status.to_string();
                outln!(
                    "    {:<24} {:<12} {}{err}{args}",
                    c.call_id.as_str(),
                    c.name,
                    style::paint(style::status_paint(&status), &status)
                );
            }
        }
    }
    let u = state.usage().total();
    if u.provider_calls > 0 {
        outln!();
        outln!(
            "usage: {} provider calls, {} input + {} output tokens",
            u.provider_calls,
            u.usage.input_tokens,
            u.usage.output_tokens
        );
    }
}

fn call_json(c: &agent_journal::state::ToolCallInfo) -> serde_json::Value {
    serde_json::json!({
        "call_id": c.call_id.as_str(),
        "name": c.name,
        "arguments": c.arguments,
        "status": c.status.as_str(),
        "requested_at": c.requested_at.map(json_time),
        "started_at": c.started_at.map(json_time),
    })
}

/// The JSON of a resume plan (without the messages).
pub(crate) fn plan_json(p: &agent_journal::resume::ResumePlan) -> serde_json::Value {
    serde_json::json!({
        "session": p.session.to_string(),
        "evaluation": p.evaluation_id.to_string(),
        "prompt": format!("{}/{}", p.prompt_ns, p.prompt_key),
        "crash_point": p.crash_point,
        "state": state_name(&p.state),
        "messages": p.messages.len(),
        "next_sequence": p.next_sequence,
        "turn": p.turn,
        "pending": p.pending.iter().map(call_json).collect::<Vec<_>>(),
        "in_doubt": p.in_doubt.iter().map(call_json).collect::<Vec<_>>(),
    })
}

/// Prints where an evaluation stopped and what is left to do.
pub(crate) fn print_plan(p: &agent_journal::resume::ResumePlan) {
    outln!(
        "session {}  evaluation {}  prompt {}/{}",
        p.session,
        p.evaluation_id,
        p.prompt_ns,
        p.prompt_key
    );
    outln!(
        "crash point: seq {}   state: {}   messages: {}   turn: {}   next msg: {}",
        p.crash_point,
        state_name(&p.state),
        p.messages.len(),
        p.turn,
        p.next_sequence
    );
    let what = match &p.state {
        agent_journal::resume::ResumeState::Finished(o) => format!("finished ({}); nothing to resume", outcome(o)),
        agent_journal::resume::ResumeState::InDoubt(_) => {
            "tool calls were running when the process stopped: resume re-runs safe and keyed tools, and stops for tools that must never run twice".into()
        }
        agent_journal::resume::ResumeState::PendingTools(_) => "tool calls never started: resume runs them".into(),
        agent_journal::resume::ResumeState::AwaitingProvider => "the next step is a provider call".into(),
        agent_journal::resume::ResumeState::Answered => "the answer is recorded; resume only records the finish".into(),
        agent_journal::resume::ResumeState::NotStarted => "the evaluation recorded no message yet".into(),
    };
    outln!("{what}");
    for (label, calls) in [("in doubt", &p.in_doubt), ("pending", &p.pending)] {
        if calls.is_empty() {
            continue;
        }
        outln!("{label}:");
        for c in calls {
            outln!(
                "  {:<24} {:<12} {:<10} {}",
                c.call_id.as_str(),
                c.name,
                c.status,
                clip(&c.arguments, 60)
            );
        }
    }
}

/// The kind of the `Custom` event that precedes an edit in a fork: its
/// payload is the JSON `{"replace_result", "file", "bytes"}` (the call id,
/// the file the new result was read from, its length), or
/// `{"replace_message", "file", "bytes"}` (the message's sequence).
pub(crate) const EDIT: &str = "agent_journal.edit";

/// The text of an edit marker's payload, as `log` prints it.
fn describe_edit(payload: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let what = match (v["replace_result"].as_str(), v["replace_message"].as_u64()) {
        (Some(call), _) => format!("result of {call}"),
        (None, Some(n)) => format!("message {n}"),
        _ => return None,
    };
    Some(format!(
        "{what} replaced from {} ({} bytes)",
        v["file"].as_str().unwrap_or("-"),
        v["bytes"]
    ))
}
