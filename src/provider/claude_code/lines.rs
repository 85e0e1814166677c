//! A Claude Code log's lines read again by their places ([`Lines`]), and a
//! thread's messages made from them one record at a time ([`Messages`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use serde_json::{Value, json};

use super::record::at;
use super::{ClaudeCodeFile, Place};
use crate::error::{Error, Result};
use crate::model::EvaluationId;
use crate::provider::anthropic;
use crate::provider::window::{Sink, Window};

/// A log's lines, open to read its records by their places.
pub(crate) struct Lines<'a> {
    pub(super) log: &'a ClaudeCodeFile,
    pub(super) text: Option<&'a str>,
    pub(super) file: Option<std::fs::File>,
}

impl Lines<'_> {
    /// The text of the line at `p`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if the line is no longer what the first pass
    /// read; [`Error::Io`].
    fn line(&self, p: &Place) -> Result<Cow<'_, str>> {
        let changed = || at(p.line, "the line changed since the log was first read");
        let start = usize::try_from(p.offset).map_err(|_| changed())?;
        if let Some(text) = self.text {
            let line = text.get(start..start + p.len).ok_or_else(changed)?;
            return Ok(Cow::Borrowed(line));
        }
        let mut buf = vec![0; p.len];
        if let Some(f) = &self.file {
            f.read_exact_at(&mut buf, p.offset).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    changed()
                } else {
                    Error::io(format!("reading {} (line {})", self.log.name, p.line), e)
                }
            })?;
        }
        if crc32fast::hash(&buf) != p.crc {
            return Err(changed());
        }
        String::from_utf8(buf)
            .map(Cow::Owned)
            .map_err(|_| changed())
    }

    /// Hands each `system` record's text, as the log has it, to `each`.
    pub(crate) fn system_records(&self, each: &mut dyn FnMut(String) -> Result<()>) -> Result<()> {
        for p in &self.log.system {
            each(self.line(p)?.into_owned())?;
        }
        Ok(())
    }

    /// Converts thread `i` into messages of `evaluation_id`, handing each
    /// to `sink` once no later record can change it.
    ///
    /// # Errors
    /// As [`parse`]; what `sink` returns.
    pub(crate) fn thread(
        &self,
        i: usize,
        evaluation_id: EvaluationId,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let plan = &self.log.threads[i];
        let mut items = Messages {
            lines: self,
            path: plan.path.iter(),
            uses: HashMap::new(),
            held: None,
            failed: false,
        };
        let mut out = Window::new(sink);
        let converted = anthropic::from_parts(
            &Value::Array(Vec::new()),
            &mut items,
            evaluation_id,
            "claude-code",
            plan.kind.key(),
            &mut out,
        )
        .and_then(|()| out.finish());
        converted.map_err(|e| match e {
            Error::InvalidInput(m) if !items.failed => Error::InvalidInput(format!(
                "the thread of lines {}-{}: {m}",
                plan.lines.0, plan.lines.1
            )),
            other => other,
        })
    }
}

impl ClaudeCodeFile {
    /// The log's lines, read from its file again.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::InvalidInput`] for a log given as text.
    pub(crate) fn file_lines(&self) -> Result<Lines<'_>> {
        let Some(path) = &self.path else {
            return Err(Error::InvalidInput(format!(
                "{}: the log was given as text, not read from a file",
                self.name
            )));
        };
        let file = std::fs::File::open(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        Ok(Lines {
            log: self,
            text: None,
            file: Some(file),
        })
    }

    /// The log's lines, from `text`, the text it was read from.
    pub(crate) fn text_lines<'a>(&'a self, text: &'a str) -> Lines<'a> {
        Lines {
            log: self,
            text: Some(text),
            file: None,
        }
    }

    /// Converts every thread, keeping nothing: the messages they make.
    pub(super) fn count(&self, lines: Lines<'_>) -> Result<u64> {
        let mut messages = 0u64;
        for i in 0..self.threads.len() {
            lines.thread(i, EvaluationId::new(), &mut |_| {
                messages += 1;
                Ok(())
            })?;
        }
        Ok(messages)
    }
}

/// A thread's messages, read record by record: the records of one
/// streamed reply joined, tool ids checked against the thread's earlier
/// calls.
struct Messages<'l, 'a> {
    lines: &'l Lines<'a>,
    path: std::slice::Iter<'a, usize>,
    /// Each `tool_use` id of the thread, and its line.
    uses: HashMap<String, usize>,
    /// The message read last, with its id if it is an assistant's reply
    /// (more records of it may follow).
    held: Option<(Value, Option<String>)>,
    /// A record could not be read: the error names its line.
    failed: bool,
}

impl Messages<'_, '_> {
    /// Record `i`: whether it is an assistant's, its message id, its content.
    fn read(&mut self, i: usize) -> Result<(bool, Option<String>, Value)> {
        let r = &self.lines.log.records[i];
        let line = r.at.line;
        // Only the message is parsed; the rest of the record (a tool's
        // whole output, say) is skipped, and the line goes before the
        // message is converted.
        #[derive(serde::Deserialize)]
        struct Record<'a> {
            #[serde(borrow, default)]
            message: Option<&'a serde_json::value::RawValue>,
        }
        let mut m: Value = {
            let text = self.lines.line(&r.at)?;
            let record: Record<'_> =
                serde_json::from_str(&text).map_err(|e| at(line, format!("invalid JSON: {e}")))?;
            match record.message {
                Some(raw) => serde_json::from_str(raw.get())
                    .map_err(|e| at(line, format!("invalid JSON: {e}")))?,
                None => Value::Null,
            }
        };
        let content = m.get_mut("content").map(Value::take).unwrap_or_default();
        for b in content.as_array().into_iter().flatten() {
            match b.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                    if let Some(first) = self.uses.insert(id.to_owned(), line) {
                        return Err(at(
                            line,
                            format!("tool_use id {id:?} used twice (first at line {first})"),
                        ));
                    }
                }
                Some("tool_result") => {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if !self.uses.contains_key(id) {
                        return Err(at(
                            line,
                            format!(
                                "tool_result for {id:?}, which no earlier tool_use of this thread made"
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
        let id = m.get("id").and_then(Value::as_str).map(str::to_owned);
        Ok((r.assistant == Some(true), id, content))
    }
}

impl Iterator for Messages<'_, '_> {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        if self.failed {
            return None;
        }
        loop {
            let Some(&i) = self.path.next() else {
                return self.held.take().map(|(m, _)| Ok(m));
            };
            let (assistant, id, blocks) = match self.read(i) {
                Ok(r) => r,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            // One streamed reply: several records, one message id.
            if let Some((prev, Some(held))) = &mut self.held
                && assistant
                && id.as_ref() == Some(held)
                && let Some(Value::Array(list)) = prev.get_mut("content")
            {
                match blocks {
                    Value::Array(more) => list.extend(more),
                    Value::String(s) => list.push(json!({"type": "text", "text": s})),
                    _ => {}
                }
                continue;
            }
            let (role, content) = match (assistant, blocks) {
                // An assistant reply as blocks, so that a later record of
                // the same reply can join it.
                (true, Value::String(s)) => ("assistant", json!([{"type": "text", "text": s}])),
                (true, b) => ("assistant", b),
                (false, b) => ("user", b),
            };
            let next = (
                json!({"role": role, "content": content}),
                id.filter(|_| assistant),
            );
            if let Some((prev, _)) = self.held.replace(next) {
                return Some(Ok(prev));
            }
        }
    }
}
