//! Claude Code session logs in: each log becomes a session, each of its
//! threads an evaluation (`provider/claude_code.rs` reads the log).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{Event, Outcome};
use crate::journal::Journal;
use crate::model::Role;
use crate::provider::claude_code::{self, ClaudeCodeLog, ThreadKind};
use crate::session::Session;

/// Kind of the `Custom` event holding a log's `summary` record.
pub const CLAUDE_CODE_SUMMARY: &str = "claude_code.summary";
/// Kind of the `Custom` event holding a log's `system` record (a
/// compaction boundary, a note), as the log had it.
pub const CLAUDE_CODE_SYSTEM: &str = "claude_code.system";

/// The events of a session holding `log`, read from `name`.
fn events_of(log: ClaudeCodeLog, name: &str) -> Vec<Event> {
    let mut labels = vec![
        ("imported".to_owned(), "claude-code".to_owned()),
        ("file".to_owned(), name.to_owned()),
    ];
    for (key, value) in [
        ("claude_code.session", &log.session_id),
        ("claude_code.cwd", &log.cwd),
        ("claude_code.version", &log.version),
    ] {
        if let Some(v) = value {
            labels.push((key.to_owned(), v.clone()));
        }
    }
    if log.off_thread > 0 {
        labels.push((
            "claude_code.off_thread_records".to_owned(),
            log.off_thread.to_string(),
        ));
    }
    let mut events = vec![Event::SessionOpened { labels }];
    for s in log.summaries {
        events.push(Event::Custom {
            kind: CLAUDE_CODE_SUMMARY.into(),
            payload: s.into_bytes(),
        });
    }
    for (_, record) in log.system {
        events.push(Event::Custom {
            kind: CLAUDE_CODE_SYSTEM.into(),
            payload: record.into_bytes(),
        });
    }
    for t in log.threads {
        events.push(Event::EvaluationStarted {
            evaluation_id: t.evaluation_id,
            prompt_ns: "claude-code".into(),
            prompt_key: match t.kind {
                ThreadKind::Main => "main".into(),
                ThreadKind::Sidechain => "sidechain".into(),
            },
            adapter: "claude-code".into(),
        });
        // Finished when it ends on an answer; else (a question waiting, a
        // tool call never answered) it is where the run stopped.
        let finished = t
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty());
        events.extend(t.messages.into_iter().map(Event::Message));
        if finished {
            events.push(Event::EvaluationFinished {
                evaluation_id: t.evaluation_id,
                outcome: Outcome::Succeeded,
            });
        }
    }
    events
}

/// The `.jsonl` files under `dir` (and its folders), sorted.
fn logs_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(format!("reading {}", entry.path().display()), e))?;
        let path = entry.path();
        if kind.is_dir() {
            logs_under(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

impl Journal {
    /// Imports one Claude Code session log (its text; `name` labels the
    /// session) as a new session, in one atomic append: an evaluation per
    /// thread (the main conversation, one per compaction span, and each
    /// sub-agent's), its `summary` and `system` records as `Custom` events
    /// ([`CLAUDE_CODE_SUMMARY`], [`CLAUDE_CODE_SYSTEM`]), the log's
    /// session id, working directory and version as labels. A run that
    /// stopped on an unanswered tool call imports with that call pending.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the line (see
    /// [`claude_code::parse`](crate::provider::claude_code::parse));
    /// nothing is written then.
    pub fn import_claude_code_text(&self, text: &str, name: &str) -> Result<Session> {
        let log = claude_code::parse(text)?;
        let mut made = self.create_imported(std::iter::once(events_of(log, name)))?;
        Ok(made.remove(0))
    }

    /// Imports a Claude Code session log file, or every `.jsonl` file under
    /// a directory (`~/.claude/projects/...`), each as its own session
    /// ([`read_claude_code`], then [`Journal::import_claude_code_logs`]).
    ///
    /// # Errors
    /// As those two.
    pub fn import_claude_code(
        &self,
        path: impl AsRef<Path>,
        max_bytes: u64,
    ) -> Result<Vec<Session>> {
        let logs = read_claude_code(path.as_ref(), max_bytes)?;
        self.import_claude_code_logs(logs)
    }

    /// Imports logs [`read_claude_code`] read, each as a new session (see
    /// [`Journal::import_claude_code_text`]). All or nothing, even across a
    /// crash: in a database, an import intent names the new sessions until
    /// they are all durable, and the next open rolls back an import a crash
    /// interrupted.
    ///
    /// # Errors
    /// What writing a session can fail with.
    pub fn import_claude_code_logs(
        &self,
        logs: Vec<(String, ClaudeCodeLog)>,
    ) -> Result<Vec<Session>> {
        self.create_imported(logs.into_iter().map(|(name, log)| events_of(log, &name)))
    }
}

/// Reads and checks a Claude Code session log file, or every `.jsonl` file
/// under a directory, sorted by path: (file name, log) each. Nothing is
/// written; a journal imports them with [`Journal::import_claude_code_logs`].
///
/// # Errors
/// [`Error::InvalidInput`] naming the file and line; [`Error::Io`];
/// [`Error::TooLarge`] for a file over `max_bytes`.
pub fn read_claude_code(path: &Path, max_bytes: u64) -> Result<Vec<(String, ClaudeCodeLog)>> {
    let files = if path.is_dir() {
        let mut files = Vec::new();
        logs_under(path, &mut files)?;
        if files.is_empty() {
            return Err(Error::InvalidInput(format!(
                "{}: no .jsonl file in this directory",
                path.display()
            )));
        }
        files
    } else {
        vec![path.to_owned()]
    };
    let mut logs = Vec::with_capacity(files.len());
    for f in &files {
        let size = std::fs::metadata(f)
            .map_err(|e| Error::io(format!("reading {}", f.display()), e))?
            .len();
        if size > max_bytes {
            return Err(Error::TooLarge {
                size,
                limit: max_bytes,
            });
        }
        let text = std::fs::read_to_string(f)
            .map_err(|e| Error::io(format!("reading {}", f.display()), e))?;
        let log = claude_code::parse(&text).map_err(|e| match e {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{}: {m}", f.display())),
            other => other,
        })?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        logs.push((name, log));
    }
    Ok(logs)
}
