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
//! `queue-operation` records are bookkeeping and skipped. Any other record
//! type is refused.
//!
//! A thread runs from a root record (no parent: the start of the session,
//! the start after a compaction, or a sub-agent's `isSidechain` start) to
//! its latest leaf; records of other branches under the same root (left by
//! an edit or a retry) are counted, not imported. Each thread's messages go
//! through [`anthropic::from_request`](super::anthropic), so tool calls are
//! `Completed` when a result follows, `Failed` when the result says
//! `is_error`, and `Pending` when the log ends before one: a crashed run
//! imports with its crash point.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::anthropic;
use crate::error::{Error, Result};
use crate::model::{EvaluationId, InnerMessage};

/// What a thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadKind {
    /// The session's own conversation (one per compaction span).
    Main,
    /// A sub-agent's conversation (`isSidechain`).
    Sidechain,
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

/// A Claude Code session log, read.
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
    /// Message records on no imported thread (other branches).
    pub off_thread: usize,
}

/// One linked record.
struct Record {
    line: usize,
    parent: Option<String>,
    sidechain: bool,
    /// `None` for a `system` record.
    message: Option<Value>,
    assistant: bool,
}

fn at(line: usize, what: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("line {line}: {what}"))
}

fn text_field<'a>(o: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

/// Reads a Claude Code session log.
///
/// # Errors
/// [`Error::InvalidInput`] naming the line: not JSON, not an object, no or
/// an unknown `type`, a message record without `uuid` or `message`, a
/// `uuid` used twice, a `parentUuid` that names no record, links that loop,
/// a `tool_use` id used twice or a `tool_result` that answers no earlier
/// `tool_use` of its thread; and a log with no message.
pub fn parse(text: &str) -> Result<ClaudeCodeLog> {
    let mut log = ClaudeCodeLog::default();
    let mut records: Vec<(String, Record)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(raw).map_err(|e| at(line, format!("invalid JSON: {e}")))?;
        let o = v
            .as_object()
            .ok_or_else(|| at(line, "expected a JSON object"))?;
        let kind = text_field(o, "type").ok_or_else(|| at(line, "no \"type\""))?;
        for (key, slot) in [
            ("sessionId", &mut log.session_id),
            ("cwd", &mut log.cwd),
            ("version", &mut log.version),
        ] {
            if slot.is_none() {
                *slot = text_field(o, key).map(str::to_owned);
            }
        }
        let message = match kind {
            "user" | "assistant" => {
                let m = o.get("message").filter(|m| m.is_object()).ok_or_else(|| {
                    at(
                        line,
                        format!("a {kind} record without a \"message\" object"),
                    )
                })?;
                match m.get("content") {
                    Some(Value::String(_) | Value::Array(_)) => {}
                    _ => {
                        return Err(at(
                            line,
                            "\"message.content\" must be a string or an array of blocks",
                        ));
                    }
                }
                Some(m.clone())
            }
            "system" => {
                log.system.push((line, raw.to_owned()));
                None
            }
            "summary" => {
                if let Some(s) = text_field(o, "summary") {
                    log.summaries.push(s.to_owned());
                }
                continue;
            }
            "file-history-snapshot" | "queue-operation" => continue,
            other => return Err(at(line, format!("unknown record type {other:?}"))),
        };
        // A system record without a uuid links nothing.
        let Some(uuid) = text_field(o, "uuid") else {
            if message.is_some() {
                return Err(at(line, "a message record without a \"uuid\""));
            }
            continue;
        };
        let parent = match o.get("parentUuid") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => return Err(at(line, "\"parentUuid\" must be a string or null")),
        };
        if let Some(&first) = index.get(uuid) {
            return Err(at(
                line,
                format!(
                    "uuid {uuid:?} used twice (first at line {})",
                    records[first].1.line
                ),
            ));
        }
        index.insert(uuid.to_owned(), records.len());
        records.push((
            uuid.to_owned(),
            Record {
                line,
                parent,
                sidechain: o
                    .get("isSidechain")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                assistant: kind == "assistant",
                message,
            },
        ));
    }
    // Parents must exist; then each root's latest leaf.
    let mut parent_of: Vec<Option<usize>> = Vec::with_capacity(records.len());
    let mut has_child = vec![false; records.len()];
    for (_, r) in &records {
        let p = match &r.parent {
            None => None,
            Some(p) => Some(*index.get(p).ok_or_else(|| {
                at(
                    r.line,
                    format!("parentUuid {p:?} names no record of the file"),
                )
            })?),
        };
        if let Some(p) = p {
            has_child[p] = true;
        }
        parent_of.push(p);
    }
    let root_of = |mut i: usize| -> Result<usize> {
        for _ in 0..=records.len() {
            match parent_of[i] {
                Some(p) => i = p,
                None => return Ok(i),
            }
        }
        Err(at(records[i].1.line, "parentUuid links loop"))
    };
    // root -> its latest leaf (records are in line order).
    let mut leaf_of_root: Vec<(usize, usize)> = Vec::new();
    for (i, _) in records.iter().enumerate() {
        if has_child[i] {
            continue;
        }
        let root = root_of(i)?;
        match leaf_of_root.iter_mut().find(|(r, _)| *r == root) {
            Some(entry) => entry.1 = i,
            None => leaf_of_root.push((root, i)),
        }
    }
    leaf_of_root.sort_by_key(|(root, _)| *root);
    let mut on_thread = 0usize;
    let messages_total = records.iter().filter(|(_, r)| r.message.is_some()).count();
    for (root, leaf) in leaf_of_root {
        let mut path = vec![leaf];
        while let Some(p) = parent_of[*path.last().expect("a record")] {
            path.push(p);
        }
        path.reverse();
        let path: Vec<&Record> = path.iter().map(|&i| &records[i].1).collect();
        on_thread += path.iter().filter(|r| r.message.is_some()).count();
        let kind = if records[root].1.sidechain {
            ThreadKind::Sidechain
        } else {
            ThreadKind::Main
        };
        if let Some(t) = thread(&path, kind)? {
            log.threads.push(t);
        }
    }
    log.off_thread = messages_total - on_thread;
    if log.threads.is_empty() {
        return Err(Error::InvalidInput(
            "the log holds no user or assistant message".into(),
        ));
    }
    Ok(log)
}

/// The messages of one thread (a root-to-leaf path); `None` when it holds
/// no message (system records only).
fn thread(path: &[&Record], kind: ThreadKind) -> Result<Option<Thread>> {
    let mut messages: Vec<Value> = Vec::new();
    let mut last_id: Option<String> = None;
    let mut uses: HashMap<String, usize> = HashMap::new();
    let mut lines = (0, 0);
    for r in path {
        let Some(m) = &r.message else { continue };
        if lines.0 == 0 {
            lines.0 = r.line;
        }
        lines.1 = r.line;
        let blocks = m.get("content").cloned().unwrap_or(Value::Null);
        if let Value::Array(list) = &blocks {
            for b in list {
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                        if let Some(first) = uses.insert(id.to_owned(), r.line) {
                            return Err(at(
                                r.line,
                                format!("tool_use id {id:?} used twice (first at line {first})"),
                            ));
                        }
                    }
                    Some("tool_result") => {
                        let id = b
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if !uses.contains_key(id) {
                            return Err(at(
                                r.line,
                                format!(
                                    "tool_result for {id:?}, which no earlier tool_use of this thread made"
                                ),
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
        let role = if r.assistant { "assistant" } else { "user" };
        let id = m.get("id").and_then(Value::as_str).map(str::to_owned);
        // One streamed reply: several records, one message id.
        if r.assistant
            && id.is_some()
            && id == last_id
            && let Some(Value::Array(prev)) = messages.last_mut().and_then(|p| p.get_mut("content"))
        {
            match blocks {
                Value::Array(more) => prev.extend(more),
                Value::String(s) => prev.push(json!({"type": "text", "text": s})),
                _ => {}
            }
            continue;
        }
        let content = match (r.assistant, blocks) {
            // An assistant reply as blocks, so that a later record of the
            // same reply can join it.
            (true, Value::String(s)) => json!([{"type": "text", "text": s}]),
            (_, b) => b,
        };
        last_id = if r.assistant { id } else { None };
        messages.push(json!({"role": role, "content": content}));
    }
    if messages.is_empty() {
        return Ok(None);
    }
    let evaluation_id = EvaluationId::new();
    let key = match kind {
        ThreadKind::Main => "main",
        ThreadKind::Sidechain => "sidechain",
    };
    let messages = anthropic::from_request(
        &json!({ "messages": messages }),
        evaluation_id,
        "claude-code",
        key,
    )
    .map_err(|e| {
        Error::InvalidInput(format!("the thread of lines {}-{}: {e}", lines.0, lines.1))
    })?;
    Ok(Some(Thread {
        kind,
        messages,
        lines,
        evaluation_id,
    }))
}
