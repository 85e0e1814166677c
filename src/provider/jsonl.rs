//! Messages as JSON Lines: one [`InnerMessage`] JSON object per line (the
//! serde form: timestamps as RFC 3339 text, ids as hyphenated UUIDs).

use crate::error::{Error, Result};
use crate::model::InnerMessage;

/// One JSON object per message, each line ended by `\n`.
pub(crate) fn to_jsonl(messages: &[InnerMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        // An InnerMessage has only string keys and plain values:
        // serializing it cannot fail.
        out.push_str(&serde_json::to_string(m).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// A message's JSON object (its serde form).
pub(crate) fn to_value(m: &InnerMessage) -> serde_json::Value {
    // An InnerMessage has only string keys and plain values: serializing
    // it cannot fail.
    serde_json::to_value(m).unwrap_or_default()
}

/// Parses JSON Lines of messages; blank lines are skipped.
///
/// # Errors
/// [`Error::InvalidInput`] with the 1-based line number (`line 3: ...`).
pub(crate) fn from_jsonl(text: &str) -> Result<Vec<InnerMessage>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map_err(|e| Error::InvalidInput(format!("line {}: {e}", i + 1)))
        })
        .collect()
}
