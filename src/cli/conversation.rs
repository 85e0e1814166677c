//! `conversations`, `turns`, and the conversation views of `show` and
//! `pending`: the conversation a session holds, whichever door its messages
//! came in by ([`conversation_log`]).

use std::borrow::Cow;
use std::process::ExitCode;

use agent_journal::conversation::http::{anthropic_request_body, openai_request_body};
use agent_journal::conversation::{
    ConversationStore, JournalConversationStore, ProviderCallRecord, TurnRecord, TurnStatus,
    rebuild_request,
};
use agent_journal::state::{ConversationLog, SessionState};
use agent_journal::{Error, Session, ToolStatus};
use clap::Args;
use serde_json::{Value, json};

use crate::cli::global::Global;
use crate::cli::open::{open_for_reading, read_session};
use crate::cli::output::{json_time, print_json};
use crate::cli::render::{clip, short};
use crate::cli::{resumed, style};

/// The arguments of `turns`.
#[derive(Args, Debug)]
pub(crate) struct TurnsArgs {
    #[command(flatten)]
    conversation: crate::cli::find::SessionRef,
}

/// The conversation session `s` holds right after event `at` (`state` is
/// its state there), whichever door its messages came in by: the engine's
/// own log, or an inner-loop session's evaluations read as turns.
///
/// # Errors
/// [`Error::NotAConversation`] when the session holds no message.
pub(crate) fn conversation_log<'a>(
    s: &Session,
    state: &'a SessionState,
    at: u64,
) -> Result<Cow<'a, ConversationLog>, Error> {
    let own = state.conversation_log();
    if own.is_conversation() {
        return Ok(Cow::Borrowed(own));
    }
    s.conversation_at(at)?
        .map(Cow::Owned)
        .ok_or(Error::NotAConversation(s.id()))
}

/// The calls of `turn` in `log`, the last one's provider and model, and
/// the turn's tokens.
fn call_summary(log: &ConversationLog, turn: &TurnRecord) -> (String, u64, usize) {
    let calls: Vec<&ProviderCallRecord> = log.calls_of(turn.id).collect();
    let who = calls
        .last()
        .map(|c| format!("{}/{}", c.provider, c.model))
        .unwrap_or_else(|| "-".into());
    let tokens = calls
        .iter()
        .filter_map(|c| c.usage.as_ref())
        .map(|u| u.total())
        .sum();
    (who, tokens, calls.len())
}

fn duration_ms(turn: &TurnRecord) -> Option<i64> {
    turn.finished_at
        .map(|f| (f - turn.started_at).num_milliseconds())
}

/// One turn as JSON (the `turns` and `show --turn` schema).
fn turn_json(state: &SessionState, log: &ConversationLog, turn: &TurnRecord) -> Value {
    let (_, tokens, _) = call_summary(log, turn);
    let tools: Vec<Value> = state
        .tool_calls()
        .for_evaluation(turn.id.as_evaluation())
        .map(|c| json!({"call_id": c.call_id.as_str(), "name": c.name, "arguments": c.arguments, "status": c.status.to_string(), "error": c.error}))
        .collect();
    json!({
        "id": turn.id.to_string(),
        "status": turn.status.as_str(),
        "agent": turn.agent,
        "trigger_type": turn.trigger_type,
        "started_at": json_time(turn.started_at),
        "finished_at": turn.finished_at.map(json_time),
        "duration_ms": duration_ms(turn),
        "tokens": tokens,
        "error": turn.error,
        "metadata": turn.metadata,
        "input_messages": turn.input_messages.iter().filter_map(|m| log.message(*m)).collect::<Vec<_>>(),
        "output_messages": turn.output_messages.iter().filter_map(|m| log.message(*m)).collect::<Vec<_>>(),
        "provider_calls": log.calls_of(turn.id).collect::<Vec<_>>(),
        "tool_calls": tools,
    })
}

/// `conversations`: every conversation of the database; under `--json`
/// one object a line, each written as its conversation is read.
pub(crate) fn conversations(cli: &Global) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let store = JournalConversationStore::new(journal);
    let mut any = false;
    for id in store.list_conversations()? {
        let session = store.session(id)?;
        let state = session.state();
        let log = state.conversation_log();
        let Some(info) = log.info() else { continue };
        let last = log.turns().last().map(|t| t.status.as_str()).unwrap_or("-");
        let interrupted = log.unfinished().count();
        if cli.json {
            outln!(
                "{}",
                json!({
                    "id": id.to_string(),
                    "title": info.title,
                    "agent": info.agent,
                    "subject_id": info.subject_id,
                    "messages": log.messages().len(),
                    "turns": log.turns().len(),
                    "interrupted": interrupted,
                    "last_turn": last,
                    "created_at": json_time(info.created_at),
                    "updated_at": json_time(info.updated_at),
                })
            );
            continue;
        }
        if !any {
            outln!(
                "{:<36}  {:<18} {:>5} {:>8} {:<13} {:<29} title",
                "conversation",
                "agent",
                "turns",
                "messages",
                "last turn",
                "updated"
            );
        }
        any = true;
        let last = match interrupted {
            0 => last.to_owned(),
            n => format!("{n} interrupted"),
        };
        outln!(
            "{:<36}  {:<18} {:>5} {:>8} {:<13} {:<29} {}",
            id,
            clip(&info.agent, 18),
            log.turns().len(),
            log.messages().len(),
            last,
            style::time(info.updated_at),
            info.title.as_deref().unwrap_or("")
        );
    }
    if !cli.json && !any {
        outln!("no conversations");
    }
    Ok(ExitCode::SUCCESS)
}

/// `turns CONVERSATION`: one line per turn; under `--json` one object a
/// line (the `show --turn` document).
pub(crate) fn turns(cli: &Global, args: &TurnsArgs) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.conversation)?;
    let state = s.state_cloned();
    let log = conversation_log(&s, &state, s.head().saturating_sub(1))?;
    if cli.json {
        for t in log.turns() {
            outln!("{}", turn_json(&state, &log, t));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let elsewhere = if log.unfinished().next().is_some() {
        resumed::resumed_elsewhere(&s)?
    } else {
        None
    };
    print_turns(&log, elsewhere.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// The turns table; `elsewhere`, the session that already resumed this
/// one's interrupted turns, if one did.
pub(crate) fn print_turns(log: &ConversationLog, elsewhere: Option<&resumed::Elsewhere>) {
    outln!(
        "{:<8}  {:<10} {:<18} {:<24} {:>7} {:>8} {:>5}  error",
        "turn",
        "status",
        "agent",
        "provider/model",
        "tokens",
        "ms",
        "calls"
    );
    for t in log.turns() {
        let (who, tokens, calls) = call_summary(log, t);
        let status = match t.status {
            TurnStatus::Running | TurnStatus::Pending => format!("{}!", t.status.as_str()),
            s => s.as_str().to_owned(),
        };
        outln!(
            "{:<8}  {:<10} {:<18} {:<24} {:>7} {:>8} {:>5}  {}",
            short(t.id),
            status,
            clip(&t.agent, 18),
            clip(&who, 24),
            tokens,
            duration_ms(t)
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
            calls,
            t.error
                .as_ref()
                .map(|e| clip(&e.message, 60))
                .unwrap_or_default()
        );
    }
    if log.unfinished().next().is_some() {
        match elsewhere {
            Some(e) => outln!(
                "(! = interrupted: left running by a process that stopped; {})",
                e.sentence()
            ),
            None => outln!(
                "(! = interrupted: left running by a process that stopped; `resume` finishes it)"
            ),
        }
    }
}

/// `show` of a conversation: its messages in full, then its turns.
pub(crate) fn print_conversation(s: &Session, at: u64, state: &SessionState) {
    let log = state.conversation_log();
    let Some(info) = log.info() else { return };
    outln!(
        "conversation {} at seq {at} of {}: {:?}, agent {}",
        s.id(),
        s.head().saturating_sub(1),
        info.title.as_deref().unwrap_or(""),
        info.agent
    );
    outln!();
    let leading = log.leading_system().len();
    let compacted = log.messages().len() - log.sendable().len() - leading;
    for (i, m) in log.messages().iter().enumerate() {
        if compacted > 0 && i == leading {
            outln!("--- the {compacted} messages below are compacted: kept, no longer sent ---");
        }
        if compacted > 0 && i == leading + compacted {
            let by = log.compactions().last().map(|c| c.strategy.as_str());
            outln!(
                "--- sent from here on (compacted by {}) ---",
                by.unwrap_or("-")
            );
            if let Some(summary) = log.summary() {
                outln!("[summary, sent in place of the compacted messages]");
                outln!("{summary}");
            }
        }
        let turn = m
            .turn_id
            .map(|t| format!(" (turn {})", short(t)))
            .unwrap_or_default();
        outln!(
            "[{}{}]{turn}",
            m.role.as_str(),
            m.name
                .as_deref()
                .map(|n| format!(" {n}"))
                .unwrap_or_default()
        );
        outln!("{}", m.text());
        for c in &m.tool_calls {
            outln!("  -> {} {}({})", c.call_id, c.name, c.arguments);
        }
    }
    outln!();
    let elsewhere = if log.unfinished().next().is_some() && at + 1 == s.head() {
        resumed::resumed_elsewhere(s).ok().flatten()
    } else {
        None
    };
    print_turns(log, elsewhere.as_ref());
}

/// `show --turn TURN`: one turn in detail.
pub(crate) fn print_turn(
    state: &SessionState,
    log: &ConversationLog,
    prefix: &str,
) -> Result<(), Error> {
    let turn = find_turn(log, prefix)?;
    outln!(
        "turn {} {} (agent {})",
        turn.id,
        turn.status.as_str(),
        turn.agent
    );
    outln!(
        "  trigger {}, started {}, {}",
        turn.trigger_type.as_deref().unwrap_or("-"),
        style::time(turn.started_at),
        duration_ms(turn)
            .map(|d| format!("took {d} ms"))
            .unwrap_or_else(|| "not finished".into())
    );
    if let Some(e) = &turn.error {
        outln!(
            "  error: {} (code {})",
            e.message,
            e.code.as_deref().unwrap_or("-")
        );
        if let raw @ (Value::Object(_) | Value::Array(_) | Value::String(_)) = &e.raw {
            outln!("  provider said: {raw}");
        }
    }
    for (what, ids) in [
        ("input", &turn.input_messages),
        ("output", &turn.output_messages),
    ] {
        for m in ids.iter().filter_map(|id| log.message(*id)) {
            outln!("  {what} [{}] {}", m.role.as_str(), m.text());
        }
    }
    for c in log.calls_of(turn.id) {
        let outcome = match &c.outcome {
            None => "in flight".to_owned(),
            Some(o) if o.ok => "ok".to_owned(),
            Some(o) => format!("failed: {}", o.error.as_deref().unwrap_or("")),
        };
        let tokens = c.usage.as_ref().map(|u| u.total()).unwrap_or(0);
        let ms = c.finished_at.map(|f| (f - c.started_at).num_milliseconds());
        outln!(
            "  call {} {}/{}: {outcome}, {tokens} tokens, {} ms, correlation {}",
            short(c.id),
            c.provider,
            c.model,
            ms.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
            c.correlation_id.as_deref().unwrap_or("-")
        );
    }
    for c in state.tool_calls().for_evaluation(turn.id.as_evaluation()) {
        outln!(
            "  tool {} {}({}) {}",
            c.call_id,
            c.name,
            clip(&c.arguments, 60),
            c.status
        );
    }
    Ok(())
}

/// `show --turn TURN --request`: the body of the turn's last provider call,
/// rebuilt in the wire format of its provider (`openai`, `anthropic`), or
/// as the neutral request for another provider.
pub(crate) fn request_body(log: &ConversationLog, prefix: &str) -> Result<Value, Error> {
    let turn = find_turn(log, prefix)?;
    let call = log
        .calls_of(turn.id)
        .last()
        .ok_or_else(|| Error::InvalidInput(format!("turn {} made no provider call", turn.id)))?;
    let request = rebuild_request(log, call.id)
        .ok_or_else(|| Error::InvalidInput(format!("no provider call {}", call.id)))?;
    Ok(match call.provider.as_str() {
        "openai" => openai_request_body(&request, false),
        "anthropic" => anthropic_request_body(&request, false),
        _ => json!({
            "model": request.model,
            "parameters": request.parameters,
            "tools": request.tools,
            "messages": request.messages.iter().map(|m| json!({
                "role": m.role.as_str(), "content": m.content, "name": m.name,
                "tool_calls": m.tool_calls, "tool_call_id": m.tool_call_id.as_ref().map(|c| c.as_str()),
            })).collect::<Vec<_>>(),
        }),
    })
}

/// `show --turn TURN --json`.
pub(crate) fn turn_value(
    state: &SessionState,
    log: &ConversationLog,
    prefix: &str,
) -> Result<Value, Error> {
    Ok(turn_json(state, log, find_turn(log, prefix)?))
}

/// The turn of `log` whose id starts or ends with `prefix`.
pub(crate) fn find_turn<'a>(
    log: &'a ConversationLog,
    prefix: &str,
) -> Result<&'a TurnRecord, Error> {
    let needle = prefix.trim().to_ascii_lowercase();
    let found: Vec<&TurnRecord> = log
        .turns()
        .iter()
        .filter(|t| {
            let id = t.id.to_string();
            !needle.is_empty() && (id.starts_with(&needle) || id.ends_with(&needle))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::InvalidInput(format!("no turn matches {prefix:?}"))),
        many => Err(Error::InvalidInput(format!(
            "{prefix:?} matches {} turns; give more of the id",
            many.len()
        ))),
    }
}

/// `pending` of a conversation: its interrupted turns, with their calls in
/// flight and their tool calls pending or in doubt.
pub(crate) fn pending(cli: &Global, s: &Session) -> Result<ExitCode, Error> {
    let state = s.state_cloned();
    let log = state.conversation_log();
    let rows: Vec<Value> = log
        .unfinished()
        .map(|t| {
            let open: Vec<Value> = state
                .tool_calls()
                .for_evaluation(t.id.as_evaluation())
                .filter(|c| !c.status.is_terminal())
                .map(|c| json!({"call_id": c.call_id.as_str(), "name": c.name, "arguments": c.arguments, "status": if c.status == ToolStatus::Started { "in_doubt" } else { "pending" }}))
                .collect();
            let in_flight = log.calls_of(t.id).filter(|c| c.finished_at.is_none()).count();
            json!({"turn": t.id.to_string(), "status": t.status.as_str(), "agent": t.agent, "provider_calls_in_flight": in_flight, "tool_calls": open})
        })
        .collect();
    let crash_point = s.head().saturating_sub(1);
    let open: Vec<String> = rows
        .iter()
        .filter_map(|r| r["turn"].as_str().map(str::to_owned))
        .collect();
    // The forks, and which of the turns interrupted here each finished.
    let forks = resumed::forks_json(s, |f| {
        let fs = f.state();
        let done = fs.conversation_log();
        open.iter()
            .filter(|id| {
                done.turns()
                    .iter()
                    .any(|t| t.id.to_string() == **id && t.status.is_finished())
            })
            .cloned()
            .collect()
    })?;
    let elsewhere = if rows.is_empty() {
        None
    } else {
        resumed::resumed_elsewhere(s)?
    };
    if cli.json {
        let v = json!({"conversation": s.id().to_string(), "crash_point": crash_point,
            "interrupted_turns": rows, "forks": forks,
            "resumed_in": elsewhere.as_ref().map(|e| e.session.to_string())});
        return print_json(&v).map(|()| ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        outln!(
            "conversation {}: no interrupted turn (last seq {crash_point})",
            s.id()
        );
        resumed::print_forks(&forks);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "conversation {} stopped at seq {crash_point}; interrupted turns:",
        s.id()
    );
    for r in &rows {
        outln!(
            "  turn {} ({}, agent {}): {} provider call(s) in flight",
            r["turn"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            r["agent"].as_str().unwrap_or(""),
            r["provider_calls_in_flight"]
        );
        for c in r["tool_calls"].as_array().into_iter().flatten() {
            outln!(
                "    {} {} {}({})",
                c["status"].as_str().unwrap_or(""),
                c["call_id"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or(""),
                clip(c["arguments"].as_str().unwrap_or(""), 60)
            );
        }
    }
    resumed::print_forks(&forks);
    match &elsewhere {
        Some(e) => outln!("{}: `resume {}` has nothing to do", e.sentence(), s.id()),
        None => outln!(
            "resume with: {} resume {}   (or --fork, to try it in a new branch)",
            crate::cli::hint::command(&cli.db),
            s.id()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
