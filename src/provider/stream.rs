//! Reading a conversation file without holding it: its messages one at a
//! time, in as little memory as a turn of them takes.
//!
//! A JSON request is read in passes over the file, none of which keeps
//! more than one message of it: the first keeps the request without its
//! message list (the *skeleton*: the system prompt, the other fields) and
//! checks the whole text is JSON; each later one parses the list's elements
//! one at a time on a thread of its own, hands them over a short channel to
//! the format's converter (`from_parts`), and the converter hands each
//! message on through a [`Window`] once no later element can change it.
//! JSON Lines are read a line at a time.
//!
//! Standard input given as `/dev/stdin` (a pipe) cannot be read twice: it
//! is read into memory first, up to the size limit. Any other path that is
//! not a regular file is refused unread
//! ([`check_input`](super::input::check_input)).
//!
//! No record is read past [`MAX_RECORD_BYTES`]: each element of the
//! message list, and each other member of the request, is parsed through a
//! reader that counts its bytes and fails past the limit, so an element of
//! any size costs at most the limit (and its parse) in memory.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

mod source;
mod survey;
pub(crate) use source::{Budget, Source, capped, json_error};
pub use survey::{survey, survey_text};

use super::conversation_format::ConversationFormat;
use super::input::MAX_RECORD_BYTES;
use super::window::{Sink, Window};
use super::{anthropic, gemini, ollama, openai, responses};
use crate::error::{Error, Result};
use crate::model::{EvaluationId, InnerMessage};

/// The scalar visits of a visitor whose value is a `serde_json::Value`.
macro_rules! scalars {
    () => {
        fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_none<E: de::Error>(self) -> std::result::Result<Value, E> {
            Ok(Value::Null)
        }
    };
}

pub(crate) use scalars;

/// Elements parsed ahead of the converter.
const AHEAD: usize = 16;

/// A conversation file, checked whole and ready to be read message by
/// message ([`StreamedConversation::messages`]).
pub(crate) struct StreamedConversation {
    format: ConversationFormat,
    source: Source,
    /// The request without the elements of its message list.
    skeleton: Value,
    /// JSON Lines: the evaluations, in order, and whether their messages
    /// come in that order, each evaluation's together.
    evaluations: Vec<EvaluationId>,
    in_order: bool,
    /// How many members of the request are named as its message list: JSON
    /// keeps the last, and so does the read.
    lists: usize,
    /// Opaque items are refused (`Error::Unmodeled`), not kept.
    strict: bool,
}

impl ConversationFormat {
    /// Opens the conversation in `path` for a streaming read: checks that
    /// it is no larger than `limit` bytes and that it is JSON (or, for
    /// JSON Lines, that every line is a message), reading it once without
    /// keeping it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] past the limit or for invalid JSON (with its
    /// line and column); [`Error::Io`] if the file cannot be read.
    pub(crate) fn open_file(self, path: &Path, limit: u64) -> Result<StreamedConversation> {
        self.open_source(Source::of(path, limit)?)
    }

    /// [`open_file`](Self::open_file) over text already read (standard
    /// input, read once by the caller within its limit).
    ///
    /// # Errors
    /// As `open_file`, but for the limit and reading.
    pub(crate) fn open_bytes(self, bytes: Vec<u8>) -> Result<StreamedConversation> {
        self.open_source(Source::Bytes(bytes.into()))
    }

    fn open_source(self, source: Source) -> Result<StreamedConversation> {
        let mut file = StreamedConversation {
            format: self,
            source,
            skeleton: Value::Null,
            evaluations: Vec::new(),
            in_order: true,
            lists: 0,
            strict: false,
        };
        if self == ConversationFormat::Jsonl {
            // The evaluations in the order they first appear, and whether
            // each one's messages come together.
            let mut order: Vec<EvaluationId> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let (mut last, mut together) = (None, true);
            file.jsonl(|m| {
                let e = m.evaluation_id;
                if last != Some(e) {
                    if seen.insert(e) {
                        order.push(e);
                    } else {
                        together = false;
                    }
                    last = Some(e);
                }
                Ok(())
            })?;
            let mut sorted = order.clone();
            sorted.sort_unstable();
            // An import groups them by id: one pass if that is their order.
            file.in_order = together && sorted == order;
            file.evaluations = sorted;
        } else {
            let (mut de, budget) = capped(&file.source)?;
            let lists = std::cell::Cell::new(0);
            file.skeleton = Top {
                list: list_key(self),
                each: None,
                take: usize::MAX,
                lists: &lists,
                budget: &budget,
            }
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| budget.error(&e, list_key(self)))?;
            file.lists = lists.get();
        }
        Ok(file)
    }
}

/// Runs `format`'s converter (`from_parts`) over `items`, the elements of
/// the message list of the request `skeleton` (the request itself, or the
/// request without them when they are read one at a time). JSON Lines has
/// no converter: nothing to do. Under `strict`, an element holding an
/// [opaque item](super::opaque) stops it with `Error::Unmodeled`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert<V: std::borrow::Borrow<Value>>(
    format: ConversationFormat,
    skeleton: &Value,
    items: impl IntoIterator<Item = Result<V>>,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    strict: bool,
    out: &mut Window<'_>,
) -> Result<()> {
    let (s, e, ns, key) = (skeleton, evaluation_id, prompt_ns, prompt_key);
    let items = items.into_iter().enumerate().map(move |(i, item)| {
        let item = item?;
        if strict {
            super::opaque::refuse(format, i, item.borrow())?;
        }
        Ok(item)
    });
    match format {
        ConversationFormat::OpenAi => openai::from_parts(s, items, e, ns, key, out),
        ConversationFormat::Anthropic => anthropic::from_parts(s, items, e, ns, key, out),
        ConversationFormat::OpenAiResponses => responses::from_parts(s, items, e, ns, key, out),
        ConversationFormat::Ollama => ollama::from_parts(s, items, e, ns, key, out),
        ConversationFormat::Gemini => gemini::from_parts(s, items, e, ns, key, out),
        ConversationFormat::Jsonl => Ok(()),
    }
}

/// The messages of a whole request `value` in `format` (not JSON Lines):
/// [`convert`] over the elements of its message list, refusing opaque items
/// under `strict`. The converter checks the request's shape itself, so a
/// list that is missing or not an array gives no elements here and its
/// error there.
pub(crate) fn convert_whole_with(
    format: ConversationFormat,
    value: &Value,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    strict: bool,
) -> Result<Vec<InnerMessage>> {
    let items: &[Value] = match value {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get(list_key(format))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
        _ => &[],
    };
    super::window::collect(|out| {
        convert(
            format,
            value,
            items.iter().map(Ok),
            evaluation_id,
            prompt_ns,
            prompt_key,
            strict,
            out,
        )
    })
}

/// The member of a request that holds the message list.
fn list_key(format: ConversationFormat) -> &'static str {
    match format {
        ConversationFormat::OpenAiResponses => "input",
        ConversationFormat::Gemini => "contents",
        _ => "messages",
    }
}

impl StreamedConversation {
    /// The request's other fields, as [`ConversationFormat::request_fields`]
    /// reads them from the text.
    /// The format it is read in.
    pub(crate) fn format(&self) -> ConversationFormat {
        self.format
    }

    /// Refuse opaque items from now on (a `strict` import).
    pub(crate) fn set_strict(&mut self) {
        self.strict = true;
    }

    pub(crate) fn request_fields(&self) -> Option<Map<String, Value>> {
        if self.format == ConversationFormat::Jsonl {
            return None;
        }
        let Value::Object(mut o) = self.skeleton.clone() else {
            return None;
        };
        for key in self.format.message_keys() {
            o.remove(*key);
        }
        Some(o)
    }

    /// Reads the messages, as [`ConversationFormat::parse`] would, handing
    /// each to `sink` once no later element can change it: grouped by
    /// evaluation in id order (JSON Lines; the others have one).
    ///
    /// # Errors
    /// What `parse` reports for the same text; what `sink` returns.
    pub(crate) fn messages(
        &self,
        evaluation_id: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        if self.format == ConversationFormat::Jsonl {
            if self.in_order {
                return self.jsonl(sink);
            }
            // One pass per evaluation, in id order.
            for e in &self.evaluations {
                self.jsonl(|m| {
                    if m.evaluation_id == *e {
                        sink(m)?;
                    }
                    Ok(())
                })?;
            }
            return Ok(());
        }
        let (tx, rx): (SyncSender<Result<Value>>, Receiver<Result<Value>>) = sync_channel(AHEAD);
        let mut rx = Some(rx);
        let source = self.source.clone();
        let list = list_key(self.format);
        let take = self.lists.saturating_sub(1);
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("agent-journal-import-parse".into())
                .spawn_scoped(scope, move || {
                    let parsed = capped(&source).and_then(|(mut de, budget)| {
                        // Err: the converter stopped.
                        let mut send = |v| tx.send(Ok(v)).is_ok();
                        Top {
                            list,
                            each: Some(&mut send),
                            take,
                            lists: &std::cell::Cell::new(0),
                            budget: &budget,
                        }
                        .deserialize(&mut de)
                        .map(|_| ())
                        .map_err(|e| budget.error(&e, list))
                    });
                    if let Err(e) = parsed {
                        // Nobody listens once the converter stopped.
                        let _ = tx.send(Err(e));
                    }
                })
                .map_err(|e| Error::io("starting the import's parse thread", e))?;
            let mut out = Window::new(sink);
            // Owned by the converter: dropped when it stops, which stops
            // the parse thread at its next element.
            let items = rx.take().into_iter().flatten();
            let converted = convert(
                self.format,
                &self.skeleton,
                items,
                evaluation_id,
                prompt_ns,
                prompt_key,
                self.strict,
                &mut out,
            );
            let finished = converted.and_then(|()| out.finish());
            // (Dropping the receiver stops the parse thread.)
            drop(out);
            finished
        })
    }

    /// Calls `each` with the message of every non-blank line; a line is
    /// read no further than [`MAX_RECORD_BYTES`].
    fn jsonl(&self, mut each: impl FnMut(InnerMessage) -> Result<()>) -> Result<()> {
        let mut lines = BufReader::new(self.source.open()?);
        let mut line = Vec::new();
        for n in 1.. {
            line.clear();
            let read = (&mut lines)
                .take(MAX_RECORD_BYTES + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| Error::InvalidInput(format!("line {n}: {e}")))?;
            if read == 0 {
                break;
            }
            if read as u64 > MAX_RECORD_BYTES {
                return Err(Error::InvalidInput(format!(
                    "line {n}: longer than the limit of {MAX_RECORD_BYTES} bytes for one record (an event holds at most 16 MiB); nothing was imported"
                )));
            }
            // As `str::lines` gives it: without its `\n` or `\r\n`.
            let text = match line.strip_suffix(b"\n") {
                Some(l) => l.strip_suffix(b"\r").unwrap_or(l),
                None => &line,
            };
            let text = std::str::from_utf8(text).map_err(|e| {
                Error::InvalidInput(format!(
                    "line {n}: stream did not contain valid UTF-8 ({e})"
                ))
            })?;
            if text.trim().is_empty() {
                continue;
            }
            let m = serde_json::from_str(text)
                .map_err(|e| Error::InvalidInput(format!("line {n}: {e}")))?;
            each(m)?;
        }
        Ok(())
    }
}

/// What is done with each element of a message list as it is parsed:
/// `false` stops the parse.
type Each<'b, 'a> = &'b mut (dyn FnMut(Value) -> bool + 'a);

/// The top level of a request: the skeleton (the request without the
/// elements of its message list), and each element handed to `each` as it
/// is parsed (skipped without it). A top-level array is the message list.
struct Top<'b, 'a> {
    list: &'static str,
    each: Option<Each<'b, 'a>>,
    /// The member named `list` whose elements go to `each` (0 for the
    /// first; the others are skipped).
    take: usize,
    /// Counts the members named `list`.
    lists: &'b std::cell::Cell<usize>,
    /// Told where each record (member, element) starts.
    budget: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for Top<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Value, A::Error> {
        elements(self.each, seq, self.budget)
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<Value, A::Error> {
        let mut o = Map::new();
        loop {
            self.budget.start(usize::MAX);
            let Some(k) = map.next_key::<String>()? else {
                break;
            };
            let v = if k == self.list {
                let at = self.lists.get();
                self.lists.set(at + 1);
                let each = if at == self.take || self.take == usize::MAX {
                    self.each.as_deref_mut()
                } else {
                    None
                };
                map.next_value_seed(List(each, self.budget))?
            } else {
                map.next_value::<Value>()?
            };
            o.insert(k, v);
        }
        Ok(Value::Object(o))
    }

    scalars!();
}

/// A message list's value: its elements handed on (or skipped), and an
/// empty array in their place; any other value as it is.
struct List<'b, 'a>(Option<Each<'b, 'a>>, &'b Budget);

impl<'de> DeserializeSeed<'de> for List<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Value, A::Error> {
        elements(self.0, seq, self.1)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Value, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    scalars!();
}

/// The elements of a message list, each handed to `each` (or dropped);
/// an empty array.
fn elements<'de, A: SeqAccess<'de>>(
    mut each: Option<Each<'_, '_>>,
    mut seq: A,
    budget: &Budget,
) -> std::result::Result<Value, A::Error> {
    for i in 0.. {
        budget.start(i);
        // Parsed as the text import parses them (`IgnoredAny` reports some
        // syntax errors in other words), and dropped if nobody takes them.
        let Some(v) = seq.next_element::<Value>()? else {
            break;
        };
        if let Some(f) = each.as_deref_mut()
            && !f(v)
        {
            return Err(de::Error::custom("stopped"));
        }
    }
    // The list's end and what follows it count towards the next record.
    budget.start(usize::MAX);
    Ok(Value::Array(Vec::new()))
}
