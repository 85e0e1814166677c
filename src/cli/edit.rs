//! `fork SESSION --at SEQ --replace-result CALL_ID=FILE`: a what-if branch
//! with an edited tool result, as LangGraph Studio's state edit and
//! Temporal's reset give one.
//!
//! Nothing is rewritten: the parent keeps every event; the fork records the
//! edit as its own events after its fork point, exactly those the library's
//! recorder appends for a tool result (the tool message and the call's
//! `Completed` status, in one batch, through
//! [`Evaluation::tool_result`](agent_journal::Evaluation::tool_result)),
//! preceded by a `Custom` event of kind [`EDIT`] saying where the result
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

/// The kind of the `Custom` event that precedes an edit in a fork: its
/// payload is the JSON `{"replace_result", "file", "bytes"}` (the call id,
/// the file the new result was read from, its length).
pub(crate) const EDIT: &str = "agent_journal.edit";

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

/// Parses `CALL_ID=FILE` (split at the first `=`; neither side empty) and
/// reads FILE as UTF-8 text.
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed argument, a file over 16 MiB or
/// not UTF-8; [`Error::Io`] when the file cannot be read.
pub(crate) fn read_replacement(arg: &str) -> Result<Replacement, Error> {
    let (call, file) = arg
        .split_once('=')
        .filter(|(c, f)| !c.trim().is_empty() && !f.is_empty())
        .ok_or_else(|| {
            Error::InvalidInput(format!("--replace-result wants CALL_ID=FILE (got {arg:?})"))
        })?;
    let io = |source| Error::Io {
        context: format!("reading the replacement result {file}"),
        source,
    };
    let len = std::fs::metadata(file).map_err(io)?.len();
    if len > MAX_RESULT {
        return Err(Error::InvalidInput(format!(
            "replacement result {file} is {len} bytes; at most {MAX_RESULT} are taken"
        )));
    }
    let bytes = std::fs::read(file).map_err(io)?;
    let content = String::from_utf8(bytes)
        .map_err(|_| Error::InvalidInput(format!("replacement result {file} is not UTF-8")))?;
    Ok(Replacement {
        call_id: CallId::from(call.trim()),
        file: file.to_owned(),
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
    let fork = p.fork(at)?;
    if let Ok(sandbox) = crate::cli::sandbox::Sandbox::recorded(
        journal,
        parent,
        crate::cli::demo::label_of(&p).as_deref(),
    ) {
        sandbox.admit(journal, fork.id())?;
    }
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

/// The text of an edit marker's payload, as `log` prints it.
pub(crate) fn describe(payload: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    Some(format!(
        "result of {} replaced from {} ({} bytes)",
        v["replace_result"].as_str()?,
        v["file"].as_str().unwrap_or("-"),
        v["bytes"]
    ))
}
