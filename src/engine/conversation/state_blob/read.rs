//! Decoding a blob: whole, from bytes in memory ([`StateBlob::decode`]),
//! or streamed from a file a message at a time ([`StateBlob::read`]).
//!
//! serde_json writes members in key order, so a blob's `messages` come
//! before the `provider` that says how to read them: the streamed read
//! makes two passes over the file. The first keeps every member but the
//! messages (whose elements it skips unparsed, counting them) and checks
//! the whole text is JSON; the second reads the messages one element at a
//! time, skipping the rest. No element, and no other member, is read past
//! [`MAX_RECORD_BYTES`](crate::provider::input::MAX_RECORD_BYTES).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::wire::{self, Dialect};
use super::{Degradation, SIDE_MEMBER, STATE_BLOB_VERSION, StateBlob, clip, is_record};
use crate::error::Result;
use crate::provider::stream::{Budget, Source, capped, scalars};

/// The member holding the messages.
const MESSAGES: &str = "messages";

fn invalid(reason: impl Into<String>) -> Degradation {
    Degradation::InvalidJson {
        reason: reason.into(),
    }
}

/// A blob being decoded: its members but the messages checked, the
/// messages pushed one at a time.
struct Decoding {
    blob: StateBlob,
    dialect: Dialect,
    processed: u64,
    /// The side records, one per message (else none).
    side: Vec<Value>,
}

impl Decoding {
    /// Checks the members of `top` but `messages` (`count` of them), as
    /// [`StateBlob::decode`] does and in its order: version, provider,
    /// `processed_length`; keeps the side records when there is one per
    /// message, and the members this version does not know.
    fn start(
        mut top: Map<String, Value>,
        provider: Option<&str>,
        count: impl FnOnce(Value) -> Option<usize>,
    ) -> Result<Self, Degradation> {
        match top.remove("version") {
            Some(v) if v.as_u64() == Some(STATE_BLOB_VERSION) => {}
            found => {
                return Err(Degradation::UnsupportedVersion {
                    found: found.map_or("missing".into(), |v| clip(&v.to_string(), 64)),
                });
            }
        }
        let Some(Value::String(found)) = top.remove("provider") else {
            return Err(invalid("`provider` is missing or not a string"));
        };
        if let Some(expected) = provider.filter(|p| *p != found) {
            return Err(Degradation::ProviderMismatch {
                expected: expected.to_owned(),
                found: clip(&found, 64),
            });
        }
        let Some(processed) = top.remove("processed_length").and_then(|v| v.as_u64()) else {
            return Err(invalid(
                "`processed_length` is missing or not a non-negative integer",
            ));
        };
        let Some(n) = top.remove(MESSAGES).and_then(count) else {
            return Err(invalid("`messages` is missing or not an array"));
        };
        let side = match top.remove(SIDE_MEMBER) {
            Some(Value::Object(mut o)) => match o.remove(MESSAGES) {
                Some(Value::Array(records)) if records.len() == n => records,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let dialect = Dialect::of(&found);
        let mut blob = StateBlob::new(found);
        blob.unknown = top;
        blob.messages.reserve(n);
        Ok(Decoding {
            blob,
            dialect,
            processed,
            side,
        })
    }

    /// Reads message `index`, `v`.
    fn push(&mut self, index: usize, v: Value) -> Result<(), Degradation> {
        let corrupted = |reason: String| Degradation::CorruptedMessage { index, reason };
        let Value::Object(o) = v else {
            return Err(corrupted("not a JSON object".into()));
        };
        let blob = &mut self.blob;
        if is_record(&o) {
            // Refused, not misread as a wire message.
            return Err(corrupted(
                "a message record (`id`, `conversation_id`, `created_at`), not a wire message"
                    .into(),
            ));
        }
        let original = (!wire::exact(self.dialect, &o)).then(|| Value::Object(o.clone()));
        let read = wire::from_wire(self.dialect, o).map_err(corrupted)?;
        let mut m = read.message;
        if let Some(r) = self.side.get(index) {
            wire::apply_side(&mut m, r);
        }
        if let Some(v) = original {
            blob.raw.insert(m.id, v);
        }
        if !read.unknown.is_empty() {
            blob.unknown_in.insert(m.id, read.unknown);
        }
        blob.messages.push(m);
        Ok(())
    }

    fn finish(self) -> StateBlob {
        let mut blob = self.blob;
        blob.processed_length = usize::try_from(self.processed)
            .unwrap_or(usize::MAX)
            .min(blob.messages.len());
        blob
    }
}

impl StateBlob {
    /// Decodes `bytes`, checking the provider when `provider` names one,
    /// refusing more than `max_bytes` before parsing. Never panics.
    ///
    /// Each message is read as a wire message of the blob's provider (see
    /// [the format](super)); a `ConversationMessage` record (it has `id`,
    /// `conversation_id` and `created_at` members) is not one, and
    /// degrades the blob. A message without a side record (a blob of
    /// goaitools, or of a writer that dropped `agent_journal`) gets a
    /// fresh id and is dated now.
    ///
    /// The bytes are parsed whole (about four times their size in memory
    /// for a blob of one long message); [`read`](Self::read) reads a file
    /// a message at a time.
    ///
    /// # Errors
    /// The [`Degradation`] that discards it.
    pub fn decode(
        bytes: &[u8],
        provider: Option<&str>,
        max_bytes: usize,
    ) -> Result<Self, Degradation> {
        if bytes.len() > max_bytes {
            return Err(Degradation::TooLarge {
                size: bytes.len() as u64,
                limit: max_bytes as u64,
            });
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(clip(&e.to_string(), 200)))?;
        let Value::Object(mut top) = value else {
            return Err(invalid("not a JSON object"));
        };
        let raw = top.remove(MESSAGES);
        let len = match &raw {
            Some(Value::Array(a)) => Some(a.len()),
            _ => None,
        };
        if let Some(n) = len {
            top.insert(MESSAGES.into(), Value::from(n));
        }
        let mut d = Decoding::start(top, provider, |v| {
            v.as_u64().and_then(|n| usize::try_from(n).ok())
        })?;
        if let Some(Value::Array(raw)) = raw {
            for (index, v) in raw.into_iter().enumerate() {
                d.push(index, v)?;
            }
        }
        Ok(d.finish())
    }

    /// Reads the blob in the file `path` as [`decode`](Self::decode) reads
    /// its bytes, holding one message of it at a time while it parses: a
    /// blob of one message of `n` bytes costs about `n` (the message
    /// itself) and its parse, where `decode` costs about four times the
    /// blob. Two passes over the file: the first skips the messages, the
    /// second reads them one by one; standard input named `/dev/stdin` (a
    /// pipe) is read into memory first.
    ///
    /// Returns `Ok(Err(degradation))` for a blob `decode` would discard.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a file over
    /// `max_bytes`, a path that is not a regular file (a FIFO, a device:
    /// not read), or a message (or another member) over
    /// [`MAX_RECORD_BYTES`](crate::provider::input::MAX_RECORD_BYTES): `messages[3]: over the limit of 33554432
    /// bytes for one record ...`, found before more than that of it is
    /// read; [`Error::Io`](crate::Error::Io) if the file cannot be read.
    pub fn read(
        path: &Path,
        provider: Option<&str>,
        max_bytes: u64,
    ) -> Result<Result<Self, Degradation>> {
        let source = Source::of(path, max_bytes)?;
        // The first pass: every member but the messages, and their count.
        let (mut de, budget) = capped(&source)?;
        let list = Cell::new(MESSAGES);
        let counts = RefCell::new(Vec::new());
        let top = Top::Skeleton {
            budget: &budget,
            list: &list,
            counts: &counts,
        }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
        let top = match top {
            Ok(v) => v,
            Err(e) if budget.is_over() => return Err(budget.error(&e, list.get())),
            Err(e) => return Ok(Err(invalid(clip(&e.to_string(), 200)))),
        };
        drop(de);
        let Value::Object(top) = top else {
            return Ok(Err(invalid("not a JSON object")));
        };
        // The last member named `messages` is the one JSON keeps.
        let counts = counts.into_inner();
        let take = counts.len().saturating_sub(1);
        let count = counts.last().copied();
        let mut d = match Decoding::start(top, provider, |v| count.filter(|_| v.is_array())) {
            Ok(d) => d,
            Err(degraded) => return Ok(Err(degraded)),
        };
        // The second pass: the messages, one at a time.
        let (mut de, budget) = capped(&source)?;
        let failed = RefCell::new(None);
        let mut each = |index: usize, v: Value| match d.push(index, v) {
            Ok(()) => true,
            Err(degraded) => {
                *failed.borrow_mut() = Some(degraded);
                false
            }
        };
        let read = Top::Messages {
            budget: &budget,
            take,
            seen: &Cell::new(0),
            each: &mut each,
        }
        .deserialize(&mut de);
        drop(de);
        if let Some(degraded) = failed.into_inner() {
            return Ok(Err(degraded));
        }
        if let Err(e) = read {
            return Err(budget.error(&e, MESSAGES));
        }
        Ok(Ok(d.finish()))
    }
}

/// What is done with each message as it is parsed: `false` stops.
type Each<'b> = &'b mut dyn FnMut(usize, Value) -> bool;

/// A pass over a blob's top-level object.
enum Top<'b> {
    /// The first: the object with an empty array in place of each array
    /// of messages (whose elements are skipped, counted in `counts`), and
    /// each side record read as a record of its own; `list` names the
    /// list being read, for the error of a record over the limit.
    Skeleton {
        budget: &'b Budget,
        list: &'b Cell<&'static str>,
        counts: &'b RefCell<Vec<usize>>,
    },
    /// The second: the elements of the `take`-th member named `messages`
    /// handed to `each`, all else skipped; `seen` counts those members.
    Messages {
        budget: &'b Budget,
        take: usize,
        seen: &'b Cell<usize>,
        each: Each<'b>,
    },
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        // Not a blob: checked as JSON and dropped.
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut o = Map::new();
        match self {
            Top::Skeleton {
                budget,
                list,
                counts,
            } => loop {
                budget.start(usize::MAX);
                let Some(k) = map.next_key::<String>()? else {
                    break;
                };
                let v = if k == MESSAGES {
                    list.set(MESSAGES);
                    counts.borrow_mut().push(0);
                    map.next_value_seed(List::Count(budget, counts))?
                } else if k == SIDE_MEMBER {
                    list.set("agent_journal.messages");
                    map.next_value_seed(Side(budget))?
                } else {
                    map.next_value::<Value>()?
                };
                o.insert(k, v);
            },
            Top::Messages {
                budget,
                take,
                seen,
                each,
            } => loop {
                budget.start(usize::MAX);
                let Some(k) = map.next_key::<String>()? else {
                    break;
                };
                if k == MESSAGES {
                    let at = seen.get();
                    seen.set(at + 1);
                    if at == take {
                        map.next_value_seed(List::Each(budget, &mut *each))?;
                        continue;
                    }
                }
                map.next_value::<IgnoredAny>()?;
            },
        }
        Ok(Value::Object(o))
    }

    scalars!();
}

/// The value of a member named `messages`: its elements counted (and
/// skipped) or handed on; any other value as it is.
enum List<'b, 'a> {
    Count(&'b Budget, &'b RefCell<Vec<usize>>),
    Each(&'b Budget, &'b mut (dyn FnMut(usize, Value) -> bool + 'a)),
}

impl<'de> DeserializeSeed<'de> for List<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let budget = match self {
            List::Count(budget, counts) => {
                let mut n = 0;
                loop {
                    budget.start(n);
                    if seq.next_element::<IgnoredAny>()?.is_none() {
                        break;
                    }
                    n += 1;
                }
                if let Some(last) = counts.borrow_mut().last_mut() {
                    *last = n;
                }
                budget
            }
            List::Each(budget, each) => {
                for i in 0.. {
                    budget.start(i);
                    let Some(v) = seq.next_element::<Value>()? else {
                        break;
                    };
                    if !each(i, v) {
                        return Err(de::Error::custom("stopped"));
                    }
                }
                budget
            }
        };
        // The list's end and what follows count towards the next record.
        budget.start(usize::MAX);
        Ok(Value::Array(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    scalars!();
}

/// The side member ([`SIDE_MEMBER`]): each element of its `messages` read
/// as a record of its own; anything else as it is.
struct Side<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Side<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Side<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut o = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = if k == MESSAGES {
                map.next_value_seed(Records(self.0))?
            } else {
                map.next_value::<Value>()?
            };
            o.insert(k, v);
        }
        Ok(Value::Object(o))
    }

    scalars!();
}

/// The side records: an array read an element at a time (each a record
/// of its own); anything else as it is.
struct Records<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Records<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Records<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut records = Vec::new();
        loop {
            self.0.start(records.len());
            let Some(v) = seq.next_element::<Value>()? else {
                break;
            };
            records.push(v);
        }
        Ok(Value::Array(records))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    scalars!();
}
