//! Claude Code session logs: the JSON Lines file a Claude Code session
//! writes (`~/.claude/projects/<project>/<session>.jsonl`), read into
//! threads of [`InnerMessage`]s.
//!
//! Each line is a record. `user` and `assistant` records hold a message
//! (`message.content` a string or Anthropic content blocks: text, `tool_use`,
//! `tool_result`, `thinking` with its signature, images, documents) and are
//! linked by `uuid` and `parentUuid`; an assistant reply streamed as several
//! records (one per block, one `message.id`) is one message. `system`
//! records (compaction boundaries, notes) are links of the chain too;
//! `summary` records name a thread; `file-history-snapshot` and
//! `queue-operation` records are bookkeeping and skipped. A record of any
//! other type is kept as it is (an opaque record: a link of the chain if it
//! has a `uuid`, imported verbatim), with a warning; a `strict` read
//! refuses it ([`ClaudeCodeFile::check_strict`]).
//!
//! A thread runs from a root record (no parent: the start of the session,
//! the start after a compaction, or a sub-agent's `isSidechain` start) to
//! its latest leaf; records of other branches under the same root (left by
//! an edit or a retry) are counted, not imported. A record whose
//! `parentUuid` names no record of the file (a resumed session, a partial
//! log, a sub-agent's file under `subagents/`) is a root too, with a
//! warning naming its line ([`ClaudeCodeFile::warnings`]); in such a thread,
//! and in one after a compaction boundary (`logicalParentUuid`), a
//! `tool_result` whose call was made before the file's records becomes a
//! text block saying so (with a warning), as the call is not in the
//! thread. Each thread's messages go through the Anthropic converter, so
//! tool calls are `Completed` when a result follows, `Failed` when the
//! result says `is_error`, and `Pending` when the log ends before one: a
//! crashed run imports with its crash point.
//!
//! Each message keeps its records' times: `created_at` is its first
//! record's `timestamp`, and the import records each assistant reply's
//! model, token usage and time (from the record before it to its last
//! record) as a provider call, and its records' `uuid`, `timestamp`,
//! `requestId`, `costUSD` and `durationMs` ([`RecordMeta`]).
//!
//! A log is read without being held: [`ClaudeCodeFile::open`] reads it once
//! keeping each record's links and place (its line's offset, length and
//! checksum), then converts every thread once to find every error; an
//! import reads each thread's records again by their places, one message
//! at a time. A line that changed between the passes is an error; lines
//! appended meanwhile (a log still being written) are not read.

mod lines;
mod record;
mod scan;

use std::io::BufReader;
use std::path::{Path, PathBuf};

pub(crate) use self::lines::Lines;
pub use self::lines::RecordMeta;

use crate::error::{Error, Result};
use crate::model::{EvaluationId, InnerMessage};
use crate::provider::input::check_input;

/// What a thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadKind {
    /// The session's own conversation (one per compaction span).
    Main,
    /// A sub-agent's conversation (`isSidechain`).
    Sidechain,
}

impl ThreadKind {
    /// The prompt key its evaluation is imported under: `main` or
    /// `sidechain`.
    pub fn key(self) -> &'static str {
        match self {
            ThreadKind::Main => "main",
            ThreadKind::Sidechain => "sidechain",
        }
    }
}

/// One conversation of a log, as an evaluation's messages.
#[derive(Clone, Debug)]
pub struct Thread {
    /// Main or sub-agent.
    pub kind: ThreadKind,
    /// Its messages, in order (neutral fields, and the original Anthropic
    /// message in each payload).
    pub messages: Vec<InnerMessage>,
    /// The lines of its first and last records (1-based).
    pub lines: (usize, usize),
    /// Its evaluation id (the messages carry it).
    pub evaluation_id: EvaluationId,
}

/// A Claude Code session log, read whole ([`parse`]).
#[derive(Clone, Debug, Default)]
pub struct ClaudeCodeLog {
    /// Claude Code's `sessionId`.
    pub session_id: Option<String>,
    /// The working directory it ran in (as the log says; never used as a path).
    pub cwd: Option<String>,
    /// The Claude Code version that wrote it.
    pub version: Option<String>,
    /// The threads, in the order their first records appear.
    pub threads: Vec<Thread>,
    /// `summary` records' texts.
    pub summaries: Vec<String>,
    /// `system` records (line, the record's JSON text).
    pub system: Vec<(usize, String)>,
    /// Records of a type not modeled (line, the record's JSON text).
    pub other: Vec<(usize, String)>,
    /// Message records on no imported thread (other branches).
    pub off_thread: usize,
    /// What was read in a way that needs saying (see
    /// [`ClaudeCodeFile::warnings`]).
    pub warnings: Vec<String>,
}

/// Where a record is in the log: its line's number (1-based), byte offset
/// and length (without the line end), and the CRC-32 of its bytes.
#[derive(Clone, Copy, Debug)]
struct Place {
    line: usize,
    offset: u64,
    len: usize,
    crc: u32,
}

/// One linked record: a message (user or assistant) or a `system` record.
#[derive(Debug)]
struct Record {
    at: Place,
    parent: Option<usize>,
    sidechain: bool,
    /// `None` for a `system` record (or one of a type not modeled).
    assistant: Option<bool>,
    /// It continues a conversation the file does not hold: its parent is
    /// not in the file, or it is a compaction boundary.
    continues: bool,
}

/// A thread to import: the message records of a root-to-leaf path.
#[derive(Debug)]
struct Plan {
    kind: ThreadKind,
    /// Its root continues a conversation the file does not hold.
    continues: bool,
    path: Vec<usize>,
    lines: (usize, usize),
}

/// A Claude Code session log, read and checked but not held: each
/// record's links and place, what to import in which order, and the small
/// records (summaries). [`ClaudeCodeFile::open`] reads a file;
/// `Journal::import_claude_code_files` imports it, reading each thread's
/// records again one message at a time.
#[derive(Debug)]
pub struct ClaudeCodeFile {
    name: String,
    /// The file; `None` when the log was given as text.
    path: Option<PathBuf>,
    records: Vec<Record>,
    session_id: Option<String>,
    cwd: Option<String>,
    version: Option<String>,
    summaries: Vec<String>,
    system: Vec<Place>,
    /// Records of a type not modeled, kept as they are, with their type.
    other: Vec<(Place, String)>,
    threads: Vec<Plan>,
    off_thread: usize,
    messages: u64,
    warnings: Vec<String>,
    labels: Vec<(String, String)>,
}

/// Reads a Claude Code session log given whole, into its threads.
///
/// # Errors
/// [`Error::InvalidInput`] naming the line: not JSON, not an object, no or
/// an unknown `type`, a message record without `uuid` or `message`, a
/// `uuid` used twice, a `parentUuid` that names no record, links that loop,
/// a `tool_use` id used twice or a `tool_result` that answers no earlier
/// `tool_use` of its thread; and a log with no message.
pub fn parse(text: &str) -> Result<ClaudeCodeLog> {
    let mut file = ClaudeCodeFile::scan(text.as_bytes(), u64::MAX, String::new(), None)?;
    let (_, warnings) = file.count(file.text_lines(text))?;
    file.add_warnings(warnings);
    let lines = file.text_lines(text);
    let mut log = ClaudeCodeLog {
        session_id: file.session_id.clone(),
        cwd: file.cwd.clone(),
        version: file.version.clone(),
        summaries: file.summaries.clone(),
        off_thread: file.off_thread,
        warnings: file.warnings.clone(),
        ..ClaudeCodeLog::default()
    };
    let mut at = file.system.iter().map(|p| p.line);
    lines.system_records(&mut |record| {
        log.system.push((at.next().unwrap_or_default(), record));
        Ok(())
    })?;
    let mut at = file.other.iter().map(|(p, _)| p.line);
    lines.other_records(&mut |record| {
        log.other.push((at.next().unwrap_or_default(), record));
        Ok(())
    })?;
    for (i, plan) in file.threads.iter().enumerate() {
        let evaluation_id = EvaluationId::new();
        let mut messages = Vec::new();
        lines.thread(i, evaluation_id, &mut |m, _| {
            messages.push(m);
            Ok(())
        })?;
        log.threads.push(Thread {
            kind: plan.kind,
            messages,
            lines: plan.lines,
            evaluation_id,
        });
    }
    Ok(log)
}

impl ClaudeCodeFile {
    /// Reads and checks the log in `path` (at most `max_bytes`) without
    /// keeping it: one pass links its records, a second converts each
    /// thread and finds every error [`parse`] would report.
    ///
    /// # Errors
    /// As [`parse`], naming the file; [`Error::TooLarge`] for a file past
    /// `max_bytes`; [`Error::InvalidInput`] for a path that is not a
    /// regular file (a FIFO, a device: never read) or a message over
    /// [`MAX_RECORD_BYTES`](crate::provider::input::MAX_RECORD_BYTES); [`Error::Io`].
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self> {
        let named = |e: Error| match e {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{}: {m}", path.display())),
            other => other,
        };
        let io = |e| Error::io(format!("reading {}", path.display()), e);
        // A FIFO or a device is refused unread (standard input too: the
        // log is read twice).
        let size = match check_input(path)? {
            crate::provider::input::Input::File { len } => len,
            crate::provider::input::Input::Stdin => {
                return Err(Error::InvalidInput(format!(
                    "{}: not a regular file (a pipe); a Claude Code log is read twice, give its file",
                    path.display()
                )));
            }
        };
        if size > max_bytes {
            return Err(Error::TooLarge {
                size,
                limit: max_bytes,
            });
        }
        let file = std::fs::File::open(path).map_err(io)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut log = Self::scan(
            BufReader::with_capacity(1 << 16, file),
            max_bytes,
            name,
            Some(path.to_owned()),
        )
        .map_err(named)?;
        log.check().map_err(named)?;
        Ok(log)
    }

    /// [`ClaudeCodeFile::open`] of a log given as `text`, named `name`;
    /// it is read from `text` again ([`ClaudeCodeFile::text_lines`]).
    pub(crate) fn read_text(text: &str, name: &str) -> Result<Self> {
        let mut log = Self::scan(text.as_bytes(), u64::MAX, name.to_owned(), None)?;
        let (messages, warnings) = log.count(log.text_lines(text))?;
        log.messages = messages;
        log.add_warnings(warnings);
        Ok(log)
    }

    /// The file's name (the session's `file` label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Claude Code's `sessionId`, the working directory it ran in (as the
    /// log says; never used as a path) and its version.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The working directory the log names (never used as a path).
    pub fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// The Claude Code version that wrote it.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// `summary` records' texts.
    pub fn summaries(&self) -> &[String] {
        &self.summaries
    }

    /// Message records on no imported thread (other branches).
    pub fn off_thread(&self) -> usize {
        self.off_thread
    }

    /// Adds a label to the session its import opens (after those the
    /// import writes), as a caller records where the log came from (the
    /// CLI: `import.sha256`, its content hash).
    pub fn label(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.labels.push((key.into(), value.into()));
    }

    /// The labels [`ClaudeCodeFile::label`] added.
    pub fn labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// The file it was read from (`None` for a log given as text).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// What the read found that needs saying, each naming its line: a
    /// record whose parent is not in the file (it starts a thread), a
    /// result whose call is not in the file (kept as text), a record type
    /// not modeled (kept as it is). The CLI prints them as warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Refuses what a `strict` import refuses: a record of a type the
    /// journal does not model, or a content block of one (an [opaque
    /// item](crate::provider::opaque)). Reads the log again.
    ///
    /// # Errors
    /// [`Error::Unmodeled`] naming the file, the line and the type;
    /// [`Error::Io`]; [`Error::InvalidInput`] for a line that changed.
    pub fn check_strict(&self) -> Result<()> {
        let named = |e: Error| match e {
            Error::Unmodeled { at, kind } => Error::Unmodeled {
                at: format!("{}: {at}", self.name),
                kind,
            },
            other => other,
        };
        if let Some((p, kind)) = self.other.first() {
            return Err(named(Error::Unmodeled {
                at: format!("line {}", p.line),
                kind: kind.clone(),
            }));
        }
        // (A log given as text is imported without `strict`.)
        let mut lines = match &self.path {
            Some(_) => self.file_lines()?,
            None => return Ok(()),
        };
        lines.strict = true;
        self.count(lines).map(|_| ()).map_err(named)
    }

    /// The threads to import, in the order their first records appear.
    pub fn threads(&self) -> impl ExactSizeIterator<Item = ThreadKind> + '_ {
        self.threads.iter().map(|t| t.kind)
    }

    /// The messages the threads convert to.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    fn check(&mut self) -> Result<()> {
        let (messages, warnings) = self.count(self.file_lines()?)?;
        self.messages = messages;
        self.add_warnings(warnings);
        Ok(())
    }

    /// The warnings of the threads' conversion ([`Lines::thread`]), after
    /// those of the first pass.
    pub(super) fn add_warnings(&mut self, more: Vec<String>) {
        self.warnings.extend(more);
    }
}
