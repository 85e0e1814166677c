//! A Claude Code log's lines read again by their places ([`Lines`]), and a
//! thread's messages made from them one record at a time ([`Messages`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::FileExt;
use std::rc::Rc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::record::at;
use super::{ClaudeCodeFile, Place};
use crate::error::{Error, Result};
use crate::model::{EvaluationId, InnerMessage};
use crate::provider::anthropic;
use crate::provider::opaque::anthropic_block_unmodeled;
use crate::provider::read::tool_result_text;
use crate::provider::window::Window;

/// What a message's records say beyond the message: their times, the
/// model and token usage of a reply, and each record's own fields.
#[derive(Clone, Debug, Default)]
pub struct RecordMeta {
    /// The `timestamp` of the record before the message's first on its
    /// thread (the prompt a reply answers), if it has one.
    pub prompted_at: Option<DateTime<Utc>>,
    /// Its first record's `timestamp`.
    pub first_at: Option<DateTime<Utc>>,
    /// Its last record's `timestamp` (a streamed reply has several).
    pub last_at: Option<DateTime<Utc>>,
    /// `message.model` (of its last record that names one).
    pub model: Option<String>,
    /// `message.usage` of its last record that has one (Anthropic's
    /// object: `input_tokens`, `output_tokens`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`).
    pub usage: Option<Value>,
    /// Each record's `line`, and its `uuid`, `timestamp`, `requestId`,
    /// `costUSD` and `durationMs` where it has them, as the log has them.
    pub records: Vec<Value>,
}

/// Where a thread's messages go, with what their records say.
pub(crate) type MetaSink<'a> = dyn FnMut(InnerMessage, Option<&RecordMeta>) -> Result<()> + 'a;

fn timestamp(v: Option<&Value>) -> Option<DateTime<Utc>> {
    v.and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A log's lines, open to read its records by their places.
pub(crate) struct Lines<'a> {
    pub(super) log: &'a ClaudeCodeFile,
    pub(super) text: Option<&'a str>,
    pub(super) file: Option<std::fs::File>,
    /// Content blocks of a type not modeled are refused (`check_strict`).
    pub(super) strict: bool,
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

    /// Hands each record of a type not modeled, as the log has it, to
    /// `each`.
    pub(crate) fn other_records(&self, each: &mut dyn FnMut(String) -> Result<()>) -> Result<()> {
        for (p, _) in &self.log.other {
            each(self.line(p)?.into_owned())?;
        }
        Ok(())
    }

    /// Converts thread `i` into messages of `evaluation_id`, handing each
    /// to `sink` once no later record can change it, with what its records
    /// say (`created_at` is set from its first record's time). Returns the
    /// warnings of the conversion (results whose calls the file does not
    /// hold).
    ///
    /// # Errors
    /// As [`parse`](super::parse); what `sink` returns.
    pub(crate) fn thread(
        &self,
        i: usize,
        evaluation_id: EvaluationId,
        sink: &mut MetaSink<'_>,
    ) -> Result<Vec<String>> {
        let plan = &self.log.threads[i];
        let metas: Rc<RefCell<VecDeque<RecordMeta>>> = Rc::default();
        let mut items = Messages {
            lines: self,
            path: plan.path.iter(),
            uses: HashMap::new(),
            held: None,
            failed: false,
            continues: plan.continues,
            warnings: Vec::new(),
            last_at: None,
            metas: metas.clone(),
        };
        // The k-th message the converter makes that is not part of another
        // (an Anthropic user message split into results) is the k-th the
        // records made: its meta is the k-th queued.
        let mut current: Option<RecordMeta> = None;
        let mut with_meta = |mut m: InnerMessage| {
            let part = m
                .provider_payload
                .as_deref()
                .is_some_and(|p| p.starts_with("{\"part_of\""));
            if !part {
                current = metas.borrow_mut().pop_front();
            }
            if let Some(t) = current.as_ref().and_then(|c| c.first_at) {
                m.created_at = t;
            }
            sink(m, current.as_ref())
        };
        let mut out = Window::new(&mut with_meta);
        let converted = anthropic::from_parts(
            &Value::Array(Vec::new()),
            &mut items,
            evaluation_id,
            "claude-code",
            plan.kind.key(),
            &mut out,
        )
        .and_then(|()| out.finish());
        drop(out);
        converted
            .map_err(|e| match e {
                Error::InvalidInput(m) if !items.failed => Error::InvalidInput(format!(
                    "the thread of lines {}-{}: {m}",
                    plan.lines.0, plan.lines.1
                )),
                other => other,
            })
            .map(|()| items.warnings)
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
            strict: false,
        })
    }

    /// The log's lines, from `text`, the text it was read from.
    pub(crate) fn text_lines<'a>(&'a self, text: &'a str) -> Lines<'a> {
        Lines {
            log: self,
            text: Some(text),
            file: None,
            strict: false,
        }
    }

    /// Converts every thread, keeping nothing: the messages they make,
    /// and the conversion's warnings.
    pub(super) fn count(&self, lines: Lines<'_>) -> Result<(u64, Vec<String>)> {
        let (mut messages, mut warnings) = (0u64, Vec::new());
        for i in 0..self.threads.len() {
            warnings.extend(lines.thread(i, EvaluationId::new(), &mut |_, _| {
                messages += 1;
                Ok(())
            })?);
        }
        Ok((messages, warnings))
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
    /// (more records of it may follow), and what its records say.
    held: Option<(Value, Option<String>, RecordMeta)>,
    /// A record could not be read: the error names its line.
    failed: bool,
    /// The thread continues a conversation the file does not hold: a
    /// result whose call is not in it becomes text.
    continues: bool,
    warnings: Vec<String>,
    /// The time of the record read last.
    last_at: Option<DateTime<Utc>>,
    /// What the records of each message handed on say, in order.
    metas: Rc<RefCell<VecDeque<RecordMeta>>>,
}

/// A record as [`Messages::read`] reads it.
struct Read {
    assistant: bool,
    id: Option<String>,
    content: Value,
    at: Option<DateTime<Utc>>,
    model: Option<String>,
    usage: Option<Value>,
    fields: Value,
}

impl Messages<'_, '_> {
    /// Record `i`: whether it is an assistant's, its message id, its
    /// content, and what else it says.
    fn read(&mut self, i: usize) -> Result<Read> {
        let r = &self.lines.log.records[i];
        let line = r.at.line;
        // Only the message and a few small fields are parsed; the rest of
        // the record (a tool's whole output, say) is skipped, and the line
        // goes before the message is converted.
        #[derive(serde::Deserialize)]
        struct Record<'a> {
            #[serde(borrow, default)]
            message: Option<&'a serde_json::value::RawValue>,
            #[serde(default)]
            uuid: Option<Value>,
            #[serde(default)]
            timestamp: Option<Value>,
            #[serde(rename = "requestId", default)]
            request_id: Option<Value>,
            #[serde(rename = "costUSD", default)]
            cost: Option<Value>,
            #[serde(rename = "durationMs", default)]
            duration: Option<Value>,
        }
        let mut fields = Map::new();
        fields.insert("line".into(), json!(line));
        let (mut m, when): (Value, _) = {
            let text = self.lines.line(&r.at)?;
            let record: Record<'_> =
                serde_json::from_str(&text).map_err(|e| at(line, format!("invalid JSON: {e}")))?;
            let when = timestamp(record.timestamp.as_ref());
            for (key, v) in [
                ("uuid", record.uuid),
                ("timestamp", record.timestamp),
                ("requestId", record.request_id),
                ("costUSD", record.cost),
                ("durationMs", record.duration),
            ] {
                if let Some(v) = v.filter(|v| !v.is_null()) {
                    fields.insert(key.into(), v);
                }
            }
            let m = match record.message {
                Some(raw) => serde_json::from_str(raw.get())
                    .map_err(|e| at(line, format!("invalid JSON: {e}")))?,
                None => Value::Null,
            };
            (m, when)
        };
        let mut content = m.get_mut("content").map(Value::take).unwrap_or_default();
        for (j, b) in content.as_array_mut().into_iter().flatten().enumerate() {
            let ty = b.get("type").and_then(Value::as_str).unwrap_or_default();
            if self.lines.strict
                && let Some((below, kind)) = anthropic_block_unmodeled(b)
                && !kind.is_empty()
            {
                return Err(Error::Unmodeled {
                    at: format!("line {line}: message.content[{j}]{below}"),
                    kind,
                });
            }
            match ty {
                "tool_use" => {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                    if let Some(first) = self.uses.insert(id.to_owned(), line) {
                        return Err(at(
                            line,
                            format!("tool_use id {id:?} used twice (first at line {first})"),
                        ));
                    }
                }
                "tool_result" => {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if self.uses.contains_key(id) {
                        continue;
                    }
                    if !self.continues {
                        return Err(at(
                            line,
                            format!(
                                "tool_result for {id:?}, which no earlier tool_use of this thread made"
                            ),
                        ));
                    }
                    // The call was made before what the file holds.
                    self.warnings.push(format!(
                        "line {line}: the tool_result for {id:?} answers a call the file does not hold; kept as text"
                    ));
                    let text = format!(
                        "[the result of {id}, a call made before this log]\n{}",
                        tool_result_text(b.get("content"))
                    );
                    *b = json!({"type": "text", "text": text});
                }
                _ => {}
            }
        }
        let id = m.get("id").and_then(Value::as_str).map(str::to_owned);
        let model = m.get("model").and_then(Value::as_str).map(str::to_owned);
        let usage = m.get_mut("usage").map(Value::take).filter(Value::is_object);
        Ok(Read {
            assistant: r.assistant == Some(true),
            id,
            content,
            at: when,
            model,
            usage,
            fields: Value::Object(fields),
        })
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
                return self.held.take().map(|(m, _, meta)| {
                    self.metas.borrow_mut().push_back(meta);
                    Ok(m)
                });
            };
            let r = match self.read(i) {
                Ok(r) => r,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            let prompted_at = self.last_at;
            if r.at.is_some() {
                self.last_at = r.at;
            }
            // One streamed reply: several records, one message id.
            if let Some((prev, Some(held), meta)) = &mut self.held
                && r.assistant
                && r.id.as_ref() == Some(held)
                && let Some(Value::Array(list)) = prev.get_mut("content")
            {
                match r.content {
                    Value::Array(more) => list.extend(more),
                    Value::String(s) => list.push(json!({"type": "text", "text": s})),
                    _ => {}
                }
                meta.last_at = r.at.or(meta.last_at);
                meta.model = r.model.or(meta.model.take());
                meta.usage = r.usage.or(meta.usage.take());
                meta.records.push(r.fields);
                continue;
            }
            let (role, content) = match (r.assistant, r.content) {
                // An assistant reply as blocks, so that a later record of
                // the same reply can join it.
                (true, Value::String(s)) => ("assistant", json!([{"type": "text", "text": s}])),
                (true, b) => ("assistant", b),
                (false, b) => ("user", b),
            };
            let meta = RecordMeta {
                prompted_at,
                first_at: r.at,
                last_at: r.at,
                model: r.model,
                usage: r.usage,
                records: vec![r.fields],
            };
            let next = (
                json!({"role": role, "content": content}),
                r.id.filter(|_| r.assistant),
                meta,
            );
            if let Some((prev, _, meta)) = self.held.replace(next) {
                self.metas.borrow_mut().push_back(meta);
                return Some(Ok(prev));
            }
        }
    }
}
