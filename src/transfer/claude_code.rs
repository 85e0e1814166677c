//! Claude Code session logs in: each log becomes a session, each of its
//! threads an evaluation (`provider/claude_code.rs` reads the log). A log
//! read from a file is imported a message at a time, never held whole.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{Event, Outcome, ProviderCallRecord, ProviderOutcome, TokenUsage};
use crate::journal::Journal;
use crate::model::{EvaluationId, Role, SessionId};
use crate::provider::claude_code::{ClaudeCodeFile, Lines, RecordMeta};
use crate::provider::input::describe;
use crate::session::Session;

/// Kind of the `Custom` event holding a log's `summary` record.
pub const CLAUDE_CODE_SUMMARY: &str = "claude_code.summary";
/// Kind of the `Custom` event holding a log's `system` record (a
/// compaction boundary, a note), as the log had it.
pub const CLAUDE_CODE_SYSTEM: &str = "claude_code.system";
/// Kind of the `Custom` event holding a log's record of a type the journal
/// does not model, as the log had it.
pub const CLAUDE_CODE_RECORD: &str = "claude_code.record";
/// Kind of the `Custom` event, right after an assistant reply's message
/// (and its provider call), holding what its records say beyond the
/// message: `{"message": ID, "model", "usage", "records": [{"line",
/// "uuid", "timestamp", "requestId", "costUSD", "durationMs"}]}` (each
/// member where the log has it).
pub const CLAUDE_CODE_REPLY: &str = "claude_code.reply";

/// Token counts of an Anthropic `usage` object.
fn tokens(usage: Option<&serde_json::Value>) -> TokenUsage {
    let n = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    TokenUsage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        ..TokenUsage::default()
    }
}

/// What [`reply_events`] needs of a reply's message.
struct Reply {
    evaluation_id: EvaluationId,
    turn: u32,
    message_id: crate::model::MessageId,
    at: chrono::DateTime<chrono::Utc>,
}

/// The events after an assistant reply's message: its provider call (the
/// model, the usage, from the prompt's time to the reply's last record)
/// and its records' own fields.
fn reply_events(
    m: &Reply,
    meta: &RecordMeta,
    emit: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<()> {
    let finished_at = meta.last_at.unwrap_or(m.at);
    let started_at = meta
        .prompted_at
        .filter(|p| *p <= finished_at)
        .unwrap_or(finished_at);
    emit(Event::ProviderCall(ProviderCallRecord {
        evaluation_id: m.evaluation_id,
        turn: m.turn,
        provider: "anthropic".into(),
        model: meta.model.clone().unwrap_or_default(),
        usage: tokens(meta.usage.as_ref()),
        started_at,
        finished_at,
        outcome: ProviderOutcome::Ok,
    }))?;
    let mut kept = serde_json::Map::new();
    kept.insert("message".into(), m.message_id.to_string().into());
    if let Some(model) = &meta.model {
        kept.insert("model".into(), model.clone().into());
    }
    if let Some(u) = &meta.usage {
        kept.insert("usage".into(), u.clone());
    }
    kept.insert("records".into(), meta.records.clone().into());
    emit(Event::Custom {
        kind: CLAUDE_CODE_REPLY.into(),
        payload: serde_json::Value::Object(kept).to_string().into_bytes(),
    })
}

/// Emits the events of a session holding `log`, read from `lines`, in
/// order, one message at a time.
fn events(
    log: &ClaudeCodeFile,
    lines: &Lines<'_>,
    emit: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<()> {
    let mut labels = vec![
        ("imported".to_owned(), "claude-code".to_owned()),
        ("file".to_owned(), log.name().to_owned()),
    ];
    for (key, value) in [
        ("claude_code.session", log.session_id()),
        ("claude_code.cwd", log.cwd()),
        ("claude_code.version", log.version()),
    ] {
        if let Some(v) = value {
            labels.push((key.to_owned(), v.to_owned()));
        }
    }
    if log.off_thread() > 0 {
        labels.push((
            "claude_code.off_thread_records".to_owned(),
            log.off_thread().to_string(),
        ));
    }
    labels.extend(log.labels().iter().cloned());
    emit(Event::SessionOpened { labels })?;
    for s in log.summaries() {
        emit(Event::Custom {
            kind: CLAUDE_CODE_SUMMARY.into(),
            payload: s.clone().into_bytes(),
        })?;
    }
    lines.system_records(&mut |record| {
        emit(Event::Custom {
            kind: CLAUDE_CODE_SYSTEM.into(),
            payload: record.into_bytes(),
        })
    })?;
    lines.other_records(&mut |record| {
        emit(Event::Custom {
            kind: CLAUDE_CODE_RECORD.into(),
            payload: record.into_bytes(),
        })
    })?;
    for (i, kind) in log.threads().enumerate() {
        let evaluation_id = EvaluationId::new();
        emit(Event::EvaluationStarted {
            evaluation_id,
            prompt_ns: "claude-code".into(),
            prompt_key: kind.key().into(),
            adapter: "claude-code".into(),
        })?;
        // Finished when it ends on an answer; else (a question waiting, a
        // tool call never answered) it is where the run stopped.
        let mut finished = false;
        lines.thread(i, evaluation_id, &mut |m, meta| {
            finished = m.role == Role::Assistant && m.tool_calls.is_empty();
            // A reply whose records say nothing of its call (no time, no
            // model, no usage) has no call to record.
            let said = |meta: &&RecordMeta| {
                meta.last_at.is_some() || meta.model.is_some() || meta.usage.is_some()
            };
            match meta.filter(|_| m.role == Role::Assistant).filter(said) {
                Some(meta) => {
                    let reply = Reply {
                        evaluation_id: m.evaluation_id,
                        turn: m.turn,
                        message_id: m.message_id,
                        at: m.created_at,
                    };
                    emit(Event::Message(m))?;
                    reply_events(&reply, meta, emit)
                }
                None => emit(Event::Message(m)),
            }
        })?;
        if finished {
            emit(Event::EvaluationFinished {
                evaluation_id,
                outcome: Outcome::Succeeded,
            })?;
        }
    }
    Ok(())
}

/// The `.jsonl` files under `root` (and its folders), sorted; each other
/// entry that is neither a folder nor a regular file (a FIFO, a socket, a
/// device, a link out of `root` or to something other than a file) goes to
/// `skipped`, never opened. A link to a log inside `root` is read, once
/// however many ways lead to it.
fn logs_under(root: &Path, skipped: &mut dyn FnMut(&Path, &str)) -> Result<Vec<PathBuf>> {
    let io = |p: &Path, e| Error::io(format!("reading {}", p.display()), e);
    let real_root = std::fs::canonicalize(root).map_err(|e| io(root, e))?;
    let (mut out, mut links) = (Vec::new(), Vec::new());
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            let path = entry.path();
            // Not followed: a link is looked at below.
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                dirs.push(path);
                continue;
            }
            let is_log = path.extension().is_some_and(|x| x == "jsonl");
            if kind.is_file() {
                if is_log {
                    out.push(path);
                }
                continue;
            }
            if !kind.is_symlink() {
                skipped(&path, &format!("not a regular file ({})", describe(kind)));
                continue;
            }
            // A link: followed only to a regular file inside `root` (a
            // link to a folder is not followed: its logs are read where
            // they are, if they are under `root`).
            let Ok(target) = std::fs::canonicalize(&path) else {
                skipped(&path, "a link to nothing");
                continue;
            };
            if !target.starts_with(&real_root) {
                skipped(
                    &path,
                    &format!(
                        "a link out of {} (to {}), not followed",
                        root.display(),
                        target.display()
                    ),
                );
                continue;
            }
            match std::fs::metadata(&target) {
                Ok(m) if m.is_file() => {
                    if is_log {
                        links.push((target, path));
                    }
                }
                Ok(m) if m.is_dir() => {}
                Ok(m) => skipped(
                    &path,
                    &format!("a link to {}, not a regular file", describe(m.file_type())),
                ),
                Err(e) => return Err(io(&path, e)),
            }
        }
    }
    // A log reached both where it is and through a link is read once.
    if !links.is_empty() {
        let mut seen = std::collections::HashSet::new();
        for p in &out {
            seen.insert(std::fs::canonicalize(p).map_err(|e| io(p, e))?);
        }
        for (target, path) in links {
            if seen.insert(target) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

impl Journal {
    /// Imports one Claude Code session log (its text; `name` labels the
    /// session) as a new session: an evaluation per thread (the main
    /// conversation, one per compaction span, and each sub-agent's), its
    /// `summary` and `system` records as `Custom` events
    /// ([`CLAUDE_CODE_SUMMARY`], [`CLAUDE_CODE_SYSTEM`]), the log's session
    /// id, working directory and version as labels. A run that stopped on
    /// an unanswered tool call imports with that call pending. All or
    /// nothing, as [`Journal::import_claude_code_files`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the line (see
    /// [`claude_code::parse`](crate::provider::claude_code::parse));
    /// nothing is written then.
    pub fn import_claude_code_text(&self, text: &str, name: &str) -> Result<Session> {
        let log = ClaudeCodeFile::read_text(text, name)?;
        let lines = log.text_lines(text);
        let made = self.import_streams(1, |_, emit| events(&log, &lines, emit))?;
        let (id, _) = made
            .first()
            .copied()
            .ok_or_else(|| Error::Storage("the import made no session".into()))?;
        self.session(id)
    }

    /// Imports a Claude Code session log file, or every `.jsonl` file under
    /// a directory (`~/.claude/projects/...`), each as its own session
    /// ([`read_claude_code`], then [`Journal::import_claude_code_files`]).
    ///
    /// # Errors
    /// As those two.
    pub fn import_claude_code(
        &self,
        path: impl AsRef<Path>,
        max_bytes: u64,
    ) -> Result<Vec<(SessionId, u64)>> {
        let logs = read_claude_code(path.as_ref(), max_bytes)?;
        self.import_claude_code_files(&logs)
    }

    /// Imports logs [`read_claude_code`] read, each as a new session (see
    /// [`Journal::import_claude_code_text`]), reading each file again a
    /// message at a time: the events go to the store in chunks as they are
    /// made, so memory holds a message, not the log. All or nothing, even
    /// across a crash: in a database, an import intent names the new
    /// sessions until they are all durable, and the next open rolls back
    /// an import a crash interrupted.
    ///
    /// Returns each session's id and number of events.
    ///
    /// # Errors
    /// What reading a file again (a line that changed since it was read is
    /// [`Error::InvalidInput`]) or writing a session can fail with; nothing
    /// is left of the import then.
    pub fn import_claude_code_files(
        &self,
        logs: &[ClaudeCodeFile],
    ) -> Result<Vec<(SessionId, u64)>> {
        self.import_streams(logs.len(), |i, emit| {
            let log = &logs[i];
            events(log, &log.file_lines()?, emit)
        })
    }
}

/// Reads and checks a Claude Code session log file, or every `.jsonl` file
/// under a directory, sorted by path ([`ClaudeCodeFile::open`] each).
/// Nothing is written and no log is held; a journal imports them with
/// [`Journal::import_claude_code_files`]. Entries of the directory that are
/// not regular files (FIFOs, sockets, devices) and links that lead out of
/// it are skipped unread ([`read_claude_code_with`] says which).
///
/// # Errors
/// [`Error::InvalidInput`] naming the file and line, or a `path` that is
/// not a regular file or a directory; [`Error::Io`]; [`Error::TooLarge`]
/// for a file over `max_bytes`.
pub fn read_claude_code(path: &Path, max_bytes: u64) -> Result<Vec<ClaudeCodeFile>> {
    read_claude_code_with(path, max_bytes, &mut |_, _| {})
}

/// [`read_claude_code`], telling `skipped` of each entry of the directory
/// it did not read, with why ("not a regular file (a FIFO)", "a link out
/// of DIR (to TARGET), not followed").
///
/// # Errors
/// As [`read_claude_code`].
pub fn read_claude_code_with(
    path: &Path,
    max_bytes: u64,
    skipped: &mut dyn FnMut(&Path, &str),
) -> Result<Vec<ClaudeCodeFile>> {
    if !path.is_dir() {
        return Ok(vec![ClaudeCodeFile::open(path, max_bytes)?]);
    }
    let files = logs_under(path, skipped)?;
    if files.is_empty() {
        return Err(Error::InvalidInput(format!(
            "{}: no .jsonl file in this directory",
            path.display()
        )));
    }
    files
        .iter()
        .map(|f| ClaudeCodeFile::open(f, max_bytes))
        .collect()
}
