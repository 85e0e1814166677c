//! Call ids as file names: where `write_file` records the result of each
//! call it served, so a keyed re-run returns it.

use agent_journal::EvaluationId;

/// The longest call id that gets a record (in bytes); a longer one is refused.
const MAX_CALL_ID: usize = 4096;
/// Encoded call ids are cut into pieces of this many bytes, one folder level
/// each, so every file name stays far below the usual 255-byte limit.
const PIECE: usize = 128;

/// Where the result of one call is recorded: `.calls/<evaluation id>/`,
/// then the call id, percent-encoded (every byte outside `[A-Za-z0-9_-]`
/// becomes `%XX`) and cut into pieces of 128 bytes; every piece but the last
/// is a folder named `<piece>.d`, the last is the file `<piece>.r`. An
/// encoded id holds no `.` and no `/`, so no name is `.`, `..` or a path, a
/// folder and a file never share a name, and two different calls never
/// share a record. A fork keeps its parent's evaluation id, so a call that
/// was in doubt in the parent finds its record in the fork.
pub(crate) struct CallRecord {
    /// The folders below `.calls`, outermost first.
    pub(super) dirs: Vec<String>,
    /// The record's file name in the last of them.
    pub(super) file: String,
}

impl CallRecord {
    /// The record of call `id` of the evaluation `evaluation`.
    ///
    /// # Errors
    /// An id over 4,096 bytes is refused.
    pub(crate) fn of(evaluation: EvaluationId, id: &str) -> Result<CallRecord, String> {
        if id.len() > MAX_CALL_ID {
            let head: String = id.chars().take(40).collect();
            return Err(format!(
                "refused call id {head:?}... ({} bytes): longer than the {MAX_CALL_ID} bytes the sandbox records",
                id.len()
            ));
        }
        let encoded = encode(id);
        let mut pieces: Vec<&str> = encoded
            .as_bytes()
            .chunks(PIECE)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        let last = pieces.pop().unwrap_or_default();
        let evaluation = encode(&evaluation.to_string());
        Ok(CallRecord {
            dirs: std::iter::once(evaluation)
                .chain(pieces.iter().map(|p| format!("{p}.d")))
                .collect(),
            file: format!("{last}.r"),
        })
    }

    /// The temporary name the record is written under before its rename.
    pub(super) fn temporary(&self) -> String {
        format!("{}.t", self.file.trim_end_matches(".r"))
    }

    /// The record's path inside `.calls`, for tests and messages.
    #[cfg(test)]
    fn relative(&self) -> String {
        let mut parts = self.dirs.clone();
        parts.push(self.file.clone());
        parts.join("/")
    }
}

/// Percent-encodes every byte of `id` outside `[A-Za-z0-9_-]` (ASCII only,
/// so the result can be cut anywhere).
pub(crate) fn encode(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_become_distinct_plain_names() {
        let ids = [
            "",
            ".",
            "..",
            "../..",
            "/etc/hostname",
            "a/b",
            "a%2Fb",
            "call_1_1",
            "%",
            "é",
        ];
        let long = "x".repeat(300);
        let mut seen = std::collections::BTreeSet::new();
        let e = EvaluationId::new();
        for id in ids.iter().copied().chain([long.as_str()]) {
            let r = CallRecord::of(e, id).expect("record");
            assert_eq!(r.dirs[0], e.to_string());
            for name in r.dirs[1..].iter().chain([&r.file]) {
                assert!(name.len() <= PIECE + 2, "{name}");
                assert!(!name.contains('/') && name != "." && name != "..", "{name}");
                assert!(name.ends_with(".r") || name.ends_with(".d"), "{name}");
            }
            assert!(seen.insert(r.relative()), "{id:?} shares a record");
        }
        let of = |id: &str| CallRecord::of(e, id).expect("id").relative();
        assert_eq!(of("call_1_1"), format!("{e}/call_1_1.r"));
        assert_eq!(of("../.."), format!("{e}/%2E%2E%2F%2E%2E.r"));
        assert_ne!(
            CallRecord::of(EvaluationId::new(), "call_1_1")
                .expect("id")
                .relative(),
            of("call_1_1"),
            "another evaluation, another record"
        );
        assert!(CallRecord::of(e, &"x".repeat(MAX_CALL_ID + 1)).is_err());
    }
}
