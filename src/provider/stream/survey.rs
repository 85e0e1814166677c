//! What a format detector (`import --format auto`) reads of a file: its
//! first value's keys and its request without the message list, in passes
//! that keep none of it.

use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Source, Top, capped};
use crate::error::{Error, Result};

/// What a format detector (`import --format auto`) looks at, read from the
/// file at `path` in two passes that keep none of it: the top-level keys of
/// its first JSON value (of a JSON Lines file, its first line), and, if the
/// file is one JSON value, that value without the elements of its
/// `messages` member (or of the array it is), each of which is handed to
/// `each` as it is parsed.
///
/// # Errors
/// [`Error::Io`] if the file cannot be read. The second value is the text
/// of the JSON error (with its line and column) if the file is not one
/// JSON value.
pub fn survey(
    path: &Path,
    each: &mut dyn FnMut(&Value),
) -> Result<(Vec<String>, std::result::Result<Value, String>)> {
    survey_source(&Source::File(path.to_owned()), each)
}

/// [`survey`] of text already in memory (read from a pipe).
///
/// # Errors
/// As [`survey`].
pub fn survey_text(
    text: &str,
    each: &mut dyn FnMut(&Value),
) -> Result<(Vec<String>, std::result::Result<Value, String>)> {
    survey_source(&Source::Bytes(text.as_bytes().into()), each)
}

fn survey_source(
    source: &Source,
    each: &mut dyn FnMut(&Value),
) -> Result<(Vec<String>, std::result::Result<Value, String>)> {
    let mut first = serde_json::Deserializer::from_reader(source.open()?);
    let keys = FirstKeys.deserialize(&mut first).unwrap_or_default();
    let (mut de, budget) = capped(source)?;
    let mut look = |v: Value| {
        each(&v);
        true
    };
    let skeleton = Top {
        list: "messages",
        each: Some(&mut look),
        take: usize::MAX,
        lists: &std::cell::Cell::new(0),
        budget: &budget,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| match budget.error(&e, "messages") {
        Error::InvalidInput(over) if budget.is_over() => over,
        _ => format!("not JSON at line {} column {}: {e}", e.line(), e.column()),
    });
    Ok((keys, skeleton))
}

/// The keys of a JSON object, its values skipped (none for another value).
struct FirstKeys;

impl<'de> DeserializeSeed<'de> for FirstKeys {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstKeys {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut keys = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            keys.push(k);
        }
        Ok(keys)
    }

    fn visit_seq<A: SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Vec::new())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(Vec::new())
    }
}
