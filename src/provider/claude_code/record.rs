//! One record of a Claude Code log, as the first pass reads it: the fields
//! it needs, each borrowed as JSON text from the line (the rest skipped,
//! never held), and the checks of a message record within
//! [`MAX_RECORD_BYTES`].

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::provider::input::MAX_RECORD_BYTES;

pub(super) fn at(line: usize, what: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("line {line}: {what}"))
}

/// The fields of a record the first pass reads, each as its JSON text,
/// borrowed from the line: the rest of the record (a tool's whole output,
/// a file history) is skipped, never held.
#[derive(Deserialize)]
struct RawFields<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uuid: Option<&'a RawValue>,
    #[serde(rename = "parentUuid", borrow, default)]
    parent: Option<&'a RawValue>,
    #[serde(rename = "sessionId", borrow, default)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cwd: Option<&'a RawValue>,
    #[serde(borrow, default)]
    version: Option<&'a RawValue>,
    #[serde(rename = "isSidechain", borrow, default)]
    sidechain: Option<&'a RawValue>,
    #[serde(borrow, default)]
    summary: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(rename = "logicalParentUuid", borrow, default)]
    logical_parent: Option<&'a RawValue>,
}

/// [`RawFields`] with its strings read (a field that is not a string is
/// `None`, as if absent).
pub(super) struct Fields<'a> {
    pub(super) kind: Option<String>,
    pub(super) uuid: Option<String>,
    pub(super) parent: Option<&'a RawValue>,
    pub(super) session_id: Option<String>,
    pub(super) cwd: Option<String>,
    pub(super) version: Option<String>,
    pub(super) sidechain: Option<&'a RawValue>,
    pub(super) summary: Option<&'a RawValue>,
    pub(super) message: Option<&'a RawValue>,
    /// `logicalParentUuid`: the record a compaction boundary continues.
    pub(super) logical_parent: Option<String>,
}

/// A string field's text.
pub(super) fn text(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|r| serde_json::from_str::<String>(r.get()).ok())
}

/// The fields of the record on a line: "invalid JSON" or "expected a
/// JSON object" when it is not one.
pub(super) fn fields(raw: &str) -> std::result::Result<Fields<'_>, String> {
    if !raw.trim_start().starts_with('{') {
        return Err(match serde_json::from_str::<serde::de::IgnoredAny>(raw) {
            Err(e) => format!("invalid JSON: {e}"),
            Ok(_) => "expected a JSON object".to_owned(),
        });
    }
    let r: RawFields<'_> = serde_json::from_str(raw).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(Fields {
        kind: text(r.kind),
        uuid: text(r.uuid),
        parent: r.parent,
        session_id: text(r.session_id),
        cwd: text(r.cwd),
        version: text(r.version),
        sidechain: r.sidechain,
        summary: r.summary,
        message: r.message,
        logical_parent: text(r.logical_parent),
    })
}

/// The error of a record part over [`MAX_RECORD_BYTES`].
pub(super) fn over(line: usize, what: &str, len: usize) -> Error {
    at(
        line,
        format!(
            "{what} of {len} bytes is over the limit of {MAX_RECORD_BYTES} bytes for one record (an event holds at most 16 MiB); nothing was imported"
        ),
    )
}

/// Checks the `message` of a `user` or `assistant` record: an object whose
/// `content` is a string or an array, within [`MAX_RECORD_BYTES`].
pub(super) fn check_message(message: Option<&RawValue>, kind: &str, line: usize) -> Result<()> {
    #[derive(Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
    }
    let missing = || {
        at(
            line,
            format!("a {kind} record without a \"message\" object"),
        )
    };
    let message = message.ok_or_else(missing)?;
    if !message.get().starts_with('{') {
        return Err(missing());
    }
    if message.get().len() as u64 > MAX_RECORD_BYTES {
        return Err(over(line, "a message", message.get().len()));
    }
    let shape: Shape<'_> =
        serde_json::from_str(message.get()).map_err(|e| at(line, format!("invalid JSON: {e}")))?;
    match shape.content.and_then(|c| c.get().bytes().next()) {
        Some(b'"' | b'[') => Ok(()),
        _ => Err(at(
            line,
            "\"message.content\" must be a string or an array of blocks",
        )),
    }
}
