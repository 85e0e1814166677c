//! `fork SESSION --at SEQ --replace-result CALL_ID=FILE` (or
//! `--replace-message N=FILE`, see [`fork_with_message`]): a what-if branch
//! with an edited tool result, as LangGraph Studio's state edit and
//! Temporal's reset give one.
//!
//! Nothing is rewritten: the parent keeps every event; the fork records the
//! edit as its own events after its fork point, exactly those the library's
//! recorder appends for a tool result (the tool message and the call's
//! `Completed` status, in one batch, through
//! [`Evaluation::tool_result`](agent_journal::Evaluation::tool_result)),
//! preceded by a `Custom` event of kind [`EDIT`](crate::cli::render::EDIT) saying where the result
//! came from. `resume FORK` then runs on from the edited state: the call is
//! finished there, so its tool is not run, and the next provider request
//! carries the edited result.
//!
//! Only a call without a result at `SEQ` (pending, or started and in
//! doubt) can be given one: a result already recorded cannot be taken back
//! by appending (a second tool message for one call would be sent beside
//! the first), so that edit is refused, naming the seq to fork at instead.
//! Every refusal comes before anything is written.

use agent_journal::{CallId, Error, EvaluationId, Event, Journal, Session, SessionId};
use serde_json::json;

use crate::cli::render::EDIT;

/// The largest replacement result read from a file (16 MiB): an edit is a
/// tool result, not a bulk import.
const MAX_RESULT: u64 = 16 << 20;

/// One `--replace-result CALL_ID=FILE`, its file read.
#[derive(Debug)]
pub(crate) struct Replacement {
    call_id: CallId,
    file: String,
    content: String,
}

/// Splits `KEY=FILE` at the first `=` (neither side empty) and reads FILE
/// as UTF-8 text: `(key, file, text)`.
fn read_edit<'a>(flag: &str, what: &str, arg: &'a str) -> Result<(&'a str, String, String), Error> {
    let (key, file) = arg
        .split_once('=')
        .filter(|(c, f)| !c.trim().is_empty() && !f.is_empty())
        .ok_or_else(|| Error::InvalidInput(format!("{flag} wants {what}=FILE (got {arg:?})")))?;
    let io = |source| Error::Io {
        context: format!("reading the replacement {file}"),
        source,
    };
    let len = std::fs::metadata(file).map_err(io)?.len();
    if len > MAX_RESULT {
        return Err(Error::InvalidInput(format!(
            "replacement {file} is {len} bytes; at most {MAX_RESULT} are taken"
        )));
    }
    let bytes = std::fs::read(file).map_err(io)?;
    let content = String::from_utf8(bytes)
        .map_err(|_| Error::InvalidInput(format!("replacement {file} is not UTF-8")))?;
    Ok((key.trim(), file.to_owned(), content))
}

/// Parses `CALL_ID=FILE` (split at the first `=`; neither side empty) and
/// reads FILE as UTF-8 text.
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed argument, a file over 16 MiB or
/// not UTF-8; [`Error::Io`] when the file cannot be read.
pub(crate) fn read_replacement(arg: &str) -> Result<Replacement, Error> {
    let (call, file, content) = read_edit("--replace-result", "CALL_ID", arg)?;
    Ok(Replacement {
        call_id: CallId::from(call),
        file,
        content,
    })
}

/// Where a replacement goes: the evaluation of its call.
struct Target {
    evaluation: EvaluationId,
    replacement: Replacement,
}

/// Checks every replacement against the parent's state at `at`: the call
/// exists there (in exactly one evaluation), has no result yet, and is
/// named once.
fn check(parent: &Session, at: u64, edits: Vec<Replacement>) -> Result<Vec<Target>, Error> {
    let state = parent.state_at(at)?;
    let mut out: Vec<Target> = Vec::new();
    for r in edits {
        if out.iter().any(|t| t.replacement.call_id == r.call_id) {
            return Err(Error::InvalidInput(format!(
                "tool call {} is named twice in --replace-result",
                r.call_id
            )));
        }
        let found: Vec<_> = state
            .tool_calls()
            .iter()
            .filter(|c| c.call_id == r.call_id && !c.name.is_empty())
            .collect();
        let call = match found.as_slice() {
            [one] => *one,
            [] => {
                return Err(Error::InvalidInput(format!(
                    "no tool call {} in session {} at seq {at}",
                    r.call_id,
                    parent.id()
                )));
            }
            _ => {
                return Err(Error::InvalidInput(format!(
                    "tool call id {} is used by {} evaluations of session {}; \
                     an edit cannot tell which is meant",
                    r.call_id,
                    found.len(),
                    parent.id()
                )));
            }
        };
        if call.status.is_terminal() {
            let seq = result_seq(parent, at, call.evaluation_id, &r.call_id)?;
            let hint = match seq {
                Some(s) if s > 0 => format!("; fork at --at {} to replace it", s - 1),
                _ => String::new(),
            };
            return Err(Error::InvalidInput(format!(
                "tool call {} ({}) already has its result ({}) at seq {at}{}; a fork \
                 adds events and cannot take a result back",
                r.call_id, call.name, call.status, hint
            )));
        }
        out.push(Target {
            evaluation: call.evaluation_id,
            replacement: r,
        });
    }
    Ok(out)
}

/// The seq of the event that gave call `call_id` its result, among `0..=at`.
fn result_seq(
    s: &Session,
    at: u64,
    evaluation: EvaluationId,
    call_id: &CallId,
) -> Result<Option<u64>, Error> {
    let mut first = None;
    s.for_each_event(0..=at, |e| {
        if first.is_none() {
            let hit = match &e.event {
                Event::ToolStatus {
                    evaluation_id,
                    call_id: c,
                    status,
                    ..
                } => *evaluation_id == evaluation && c == call_id && status.is_terminal(),
                Event::Message(m) => {
                    m.evaluation_id == evaluation && m.tool_call_id.as_ref() == Some(call_id)
                }
                _ => false,
            };
            if hit {
                first = Some(e.seq);
            }
        }
        Ok(())
    })?;
    Ok(first)
}

/// Forks `parent` after its event `at` and records each replacement in the
/// fork (the edit's marker, then the tool result); returns the fork's id.
/// The fork is admitted to the parent's recorded sandbox, when it has one,
/// so that `resume FORK` finds its tools' folder.
///
/// # Errors
/// Every refusal of [`check`] before anything is written; then the
/// journal's.
pub(crate) fn fork_with_edits(
    journal: &Journal,
    parent: SessionId,
    at: u64,
    edits: Vec<Replacement>,
) -> Result<(SessionId, Vec<serde_json::Value>), Error> {
    let p = journal.session(parent)?;
    let targets = check(&p, at, edits)?;
    let fork = fork_admitted(journal, &p, at)?;
    let mut done = Vec::new();
    for t in targets {
        let r = t.replacement;
        let payload = json!({
            "replace_result": r.call_id.as_str(),
            "file": r.file,
            "bytes": r.content.len(),
        });
        fork.append(Event::Custom {
            kind: EDIT.into(),
            payload: payload.to_string().into_bytes(),
        })?;
        let eval = fork.evaluation(t.evaluation)?;
        eval.tool_result(r.call_id.clone(), r.content)?;
        done.push(payload);
    }
    Ok((fork.id(), done))
}

/// A `--replace-message N=FILE`, its file read.
#[derive(Debug)]
pub(crate) struct MessageEdit {
    sequence: u64,
    file: String,
    content: String,
}

/// Parses `N=FILE` (N a message sequence, `msg=N` as the CLI prints it)
/// and reads FILE as UTF-8 text.
///
/// # Errors
/// As [`read_replacement`], and [`Error::InvalidInput`] when N is not a
/// number.
pub(crate) fn read_message_edit(arg: &str) -> Result<MessageEdit, Error> {
    let (n, file, content) = read_edit("--replace-message", "N", arg)?;
    let sequence = n.parse().map_err(|_| {
        Error::InvalidInput(format!(
            "--replace-message wants N=FILE with N a message number, msg=N as `log` prints it (got {n:?})"
        ))
    })?;
    Ok(MessageEdit {
        sequence,
        file,
        content,
    })
}

/// The seq of the event that recorded message `id`, among `0..=last`.
fn message_seq(s: &Session, last: u64, id: agent_journal::MessageId) -> Result<Option<u64>, Error> {
    let mut found = None;
    s.for_each_event(0..=last, |e| {
        if found.is_none() && matches!(&e.event, Event::Message(m) if m.message_id == id) {
            found = Some(e.seq);
        }
        Ok(())
    })?;
    Ok(found)
}

/// Forks `parent` after its event `at`, where message `N` of an evaluation
/// is the next one, and records in the fork a message `N` of the parent's
/// role with the text of the file, after an [`EDIT`](crate::cli::render::EDIT) marker; returns the
/// fork's id and the edit. An assistant message keeps the parent's tool
/// calls (pending in the fork, so `resume` runs them); a tool result is
/// `--replace-result`'s. The fork holds none of the parent's messages from
/// `N` on: it branches before them, so the history `resume` sends is the
/// edited one.
///
/// # Errors
/// [`Error::InvalidInput`], before anything is written, when no single
/// evaluation of the parent has a message `N`, it is a tool result, or `N`
/// is not the next message at `at` (naming the seq to fork at); then the
/// journal's.
pub(crate) fn fork_with_message(
    journal: &Journal,
    parent: SessionId,
    at: u64,
    edit: MessageEdit,
) -> Result<(SessionId, serde_json::Value), Error> {
    let p = journal.session(parent)?;
    let n = edit.sequence;
    let original = {
        let state = p.state();
        let found: Vec<_> = state
            .evaluations()
            .iter()
            .filter_map(|e| {
                state
                    .messages()
                    .for_evaluation(e.evaluation_id)
                    .find(|m| m.sequence == n)
                    .cloned()
            })
            .collect();
        match found.len() {
            1 => found.into_iter().next(),
            0 => None,
            k => {
                return Err(Error::InvalidInput(format!(
                    "{k} evaluations of session {parent} have a message {n}; an edit cannot tell which is meant"
                )));
            }
        }
    }
    .ok_or_else(|| Error::InvalidInput(format!("no message {n} in session {parent}")))?;
    if original.role == agent_journal::Role::Tool {
        let call = original
            .tool_call_id
            .as_ref()
            .map_or_else(String::new, |c| c.to_string());
        return Err(Error::InvalidInput(format!(
            "message {n} is the result of tool call {call}: replace it with --replace-result {call}=FILE"
        )));
    }
    let eval_id = original.evaluation_id;
    let before = p.state_at(at)?;
    let next = before.evaluations().get(eval_id).map(|_| {
        before
            .messages()
            .last_for(eval_id)
            .map_or(0, |m| m.sequence + 1)
    });
    if next != Some(n) {
        let hint = match message_seq(&p, p.head().saturating_sub(1), original.message_id)? {
            Some(s) if s > 0 => format!("; fork at --at {} to replace it", s - 1),
            _ => String::new(),
        };
        let what = match next {
            Some(k) if k > n => format!("message {n} is already recorded at seq {at}"),
            Some(k) => format!("at seq {at} the next message is {k}, not {n}"),
            None => format!("evaluation {eval_id} has not started at seq {at}"),
        };
        return Err(Error::InvalidInput(format!(
            "{what}{hint}; a fork adds events and cannot take a message back"
        )));
    }
    let fork = fork_admitted(journal, &p, at)?;
    let payload = json!({
        "replace_message": n,
        "file": edit.file,
        "bytes": edit.content.len(),
    });
    fork.append(Event::Custom {
        kind: EDIT.into(),
        payload: payload.to_string().into_bytes(),
    })?;
    let eval = fork.evaluation(eval_id)?;
    if original.role == agent_journal::Role::Assistant {
        eval.assistant(edit.content, original.tool_calls)?;
    } else {
        let mut m = agent_journal::InnerMessage::new(original.role, edit.content, eval_id, n);
        m.prompt_ns = original.prompt_ns;
        m.prompt_key = original.prompt_key;
        eval.record_message(m)?;
    }
    Ok((fork.id(), payload))
}

/// Forks `parent` at `at` and admits the fork to the sandbox recorded for
/// the parent, if it has one, so that `resume FORK` finds it without
/// `--sandbox` (a session with no recorded sandbox is forked all the same).
fn fork_admitted(journal: &Journal, parent: &Session, at: u64) -> Result<Session, Error> {
    let fork = parent.fork(at)?;
    if let Ok(sandbox) = crate::cli::sandbox::Sandbox::recorded(
        journal,
        parent.id(),
        crate::cli::demo::label_of(parent).as_deref(),
    ) {
        sandbox.admit(journal, fork.id())?;
    }
    Ok(fork)
}
