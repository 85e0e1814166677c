//! `import` of the same bytes twice: each imported file's SHA-256 (of what
//! was read, for standard input) is a label of the session it made
//! ([`LABEL`]; for a state blob, a member of its conversation's metadata),
//! and a second import of a file with the same hash says which session
//! holds it and writes nothing, unless `--again`. An exported journal
//! keeps its sessions' ids and events as they are (no label can be added):
//! it is there already when all its sessions are, with the same events.

use std::io::Read;
use std::path::Path;

use agent_journal::{Error, Journal, Session, SessionId};
use sha2::{Digest, Sha256};

/// The label holding the SHA-256 (hex) of the file a session was imported
/// from.
pub(crate) const LABEL: &str = "import.sha256";

/// The SHA-256 of `file`'s bytes, in hex, read in blocks (a file of any
/// size costs a block of memory); `None` for anything but a regular file
/// (a pipe is read once, by the import).
pub(crate) fn file_hash(file: &Path) -> Result<Option<String>, Error> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() => {}
        _ => return Ok(None),
    }
    let io = |e| Error::Io {
        context: format!("reading {}", file.display()),
        source: e,
    };
    let mut f = std::fs::File::open(file).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(Some(hex(&hasher.finalize())))
}

/// The SHA-256 of `bytes` (text read from standard input), in hex.
pub(crate) fn bytes_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sessions of `journal` imported from a file of each hash in
/// `hashes`: for each hash, the first session labelled with it.
pub(crate) fn imported_as(
    journal: &Journal,
    hashes: &[&str],
) -> Result<Vec<Option<SessionId>>, Error> {
    let mut found = vec![None; hashes.len()];
    if hashes.is_empty() {
        return Ok(found);
    }
    for id in journal.sessions()? {
        // A session that cannot be read is not one this file made.
        let Ok(s) = journal.session(id) else { continue };
        let state = s.state();
        let labelled = state
            .labels()
            .iter()
            .filter(|(k, _)| k == LABEL)
            .map(|(_, v)| v.as_str());
        let in_metadata = state
            .conversation_log()
            .info()
            .and_then(|c| c.metadata.get(LABEL))
            .and_then(serde_json::Value::as_str);
        for v in labelled.chain(in_metadata) {
            for (slot, h) in found.iter_mut().zip(hashes) {
                if slot.is_none() && v == *h {
                    *slot = Some(id);
                }
            }
        }
    }
    Ok(found)
}

/// The sessions of the exported journal `file` when every one of them is
/// in `journal` already with the same events (the same number, the last
/// one equal, time included: an import keeps ids and events); `None` when
/// one is missing or differs, or the file cannot be read.
pub(crate) fn journal_already_in(journal: &Journal, file: &Path) -> Option<Vec<SessionId>> {
    let from = crate::cli::open::open_quietly(file).ok()?;
    let ids = from.sessions().ok()?;
    let last = |s: &Session| {
        let head = s.head().checked_sub(1)?;
        let mut events = s.events(head..).ok()?;
        events.pop().map(|e| (e.at, e.event))
    };
    for id in &ids {
        // A session not here (the usual case) is told from the store
        // alone, before any session's state is loaded.
        journal.stream_len(*id).ok()??;
        let (theirs, ours) = (from.session(*id).ok()?, journal.session(*id).ok()?);
        let end = last(&theirs)?;
        if theirs.head() != ours.head() || last(&ours)? != end {
            return None;
        }
    }
    (!ids.is_empty()).then_some(ids)
}

/// What `say_already` adds for a file recognised by its SHA-256.
pub(crate) const SAME_BYTES: &str = "(same SHA-256); nothing written (--again imports it again)";

/// What `say_already` adds for an exported journal whose sessions are here.
pub(crate) const SAME_SESSIONS: &str = "(same sessions, same events); nothing written";

/// Says that `file` is in the journal already, as `sessions`; `note` says
/// how it was recognised ([`SAME_BYTES`], [`SAME_SESSIONS`]).
pub(crate) fn say_already(
    json: bool,
    file: &Path,
    sessions: &[SessionId],
    note: &str,
) -> Result<(), Error> {
    let name = file.display().to_string();
    if json {
        let already: Vec<_> = sessions
            .iter()
            .map(|s| serde_json::json!({"file": name, "session": s.to_string()}))
            .collect();
        crate::cli::output::print_json(&serde_json::json!({
            "sessions": [], "events": 0, "already_imported": already,
        }))?;
    } else {
        let ids: Vec<String> = sessions.iter().map(SessionId::to_string).collect();
        outln!("{name}: already imported as {} {note}", ids.join(", "));
    }
    Ok(())
}
