//! The strict reading's pieces shared by both dialects: its error, the
//! kind of a JSON value, the microsecond check of a timestamp, and a slice
//! found in the document ([`Found`]), its items parsed one at a time.

use chrono::{DateTime, Timelike, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

pub(super) fn err(reason: impl Into<String>) -> Error {
    Error::SnapshotRestore(reason.into())
}

/// Deserializes `v`, naming the field at fault when `v` is an object.
pub(super) fn parse<T: DeserializeOwned>(v: &Value, loc: &str) -> Result<T> {
    T::deserialize(v).map_err(|e| match culprit::<T>(v) {
        Some(field) => err(format!("{loc}.{field}: {e}")),
        None => err(format!("{loc}: {e}")),
    })
}

/// The field of an object that makes it fail to deserialize as `T`: the one
/// whose removal lets it succeed or turns the error into "missing field".
/// Only runs on the error path, and only on objects of up to 64 keys.
fn culprit<T: DeserializeOwned>(v: &Value) -> Option<&str> {
    let obj = v.as_object().filter(|o| o.len() <= 64)?;
    obj.keys().map(String::as_str).find(|k| {
        let mut rest = obj.clone();
        rest.remove(*k);
        match T::deserialize(&Value::Object(rest)) {
            Ok(_) => true,
            Err(e) => e.to_string().contains(&format!("missing field `{k}`")),
        }
    })
}

pub(super) fn micros(t: &DateTime<Utc>, loc: &str, field: &str) -> Result<()> {
    if t.nanosecond() % 1_000 != 0 {
        return Err(err(format!(
            "{loc}: {field} {t} has sub-microsecond precision (timestamps are stored in microseconds)"
        )));
    }
    Ok(())
}

/// One slice of the document: its index and its items (each replaced by
/// `null` once parsed, so the document shrinks as it is read).
pub(super) struct Found<'a> {
    pub(super) index: usize,
    pub(super) items: &'a mut [Value],
}

impl Found<'_> {
    pub(super) fn loc(&self, i: usize) -> String {
        format!("slices[{}].items[{i}]", self.index)
    }

    /// Each item as a `T`, its JSON dropped as soon as it is parsed.
    pub(super) fn parse_all<T: DeserializeOwned>(&mut self) -> Result<Vec<T>> {
        let index = self.index;
        let mut parsed = Vec::with_capacity(self.items.len());
        for (i, v) in self.items.iter_mut().enumerate() {
            parsed.push(parse(v, &format!("slices[{index}].items[{i}]"))?);
            *v = Value::Null;
        }
        Ok(parsed)
    }

    /// The one item of a slice that holds exactly one.
    pub(super) fn one(&self) -> Result<&Value> {
        match &*self.items {
            [one] => Ok(one),
            _ => Err(err(format!(
                "slices[{}].items: expected exactly one item, found {}",
                self.index,
                self.items.len()
            ))),
        }
    }

    /// Maps an `(item index, reason)` error of a slice builder.
    pub(super) fn at(&self) -> impl Fn((usize, String)) -> Error + '_ {
        move |(i, e)| err(format!("{}: {e}", self.loc(i)))
    }
}
