//! `import` of the same bytes twice: each imported file's SHA-256 is a
//! label of the session it made ([`LABEL`]), and a second import of a file
//! with the same hash says which session holds it and writes nothing,
//! unless `--again`.

use std::io::Read;
use std::path::Path;

use agent_journal::{Error, Journal, SessionId};
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
    let digest = hasher.finalize();
    Ok(Some(digest.iter().map(|b| format!("{b:02x}")).collect()))
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
        for (k, v) in state.labels() {
            if k != LABEL {
                continue;
            }
            for (slot, h) in found.iter_mut().zip(hashes) {
                if slot.is_none() && v == h {
                    *slot = Some(id);
                }
            }
        }
    }
    Ok(found)
}

/// Says that `file` is in the journal already, as `session`.
pub(crate) fn say_already(json: bool, file: &Path, session: SessionId) -> Result<(), Error> {
    if json {
        crate::cli::output::print_json(&serde_json::json!({
            "sessions": [], "events": 0,
            "already_imported": [{"file": file.display().to_string(), "session": session.to_string()}],
        }))?;
    } else {
        outln!(
            "{}: already imported as {session} (same SHA-256); nothing written (--again imports it again)",
            file.display()
        );
    }
    Ok(())
}
