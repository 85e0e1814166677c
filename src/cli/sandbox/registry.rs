//! `<db>/demo-sandboxes`: the folder `demo` (or a resume of one) gave each
//! session of a database, kept outside the sessions' events so that no
//! journal can write it. One line per record, `v1 <session id> <path as
//! hex bytes>`; the last line of a session wins, and a line that does not
//! parse (one torn by a crash) is skipped.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use agent_journal::{Error, SessionId};

use super::sys;

/// The registry's file name in a database directory.
pub(super) const REGISTRY: &str = "demo-sandboxes";

/// The sandbox recorded for session `id` in the database at `db` (the last
/// record wins); `None` if there is none, or `db` is not a directory.
pub(super) fn lookup(db: &Path, id: SessionId) -> Result<Option<PathBuf>, Error> {
    if is_url(db) {
        return Ok(None);
    }
    let file = db.join(REGISTRY);
    let text = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || e.kind() == io::ErrorKind::NotADirectory
                || !db.is_dir() =>
        {
            return Ok(None);
        }
        Err(e) => {
            return Err(Error::Io {
                context: format!("reading {}", file.display()),
                source: e,
            });
        }
    };
    let id = id.to_string();
    let text = String::from_utf8_lossy(&text);
    // A torn last line (a crash while adding it) does not parse and is skipped.
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            match (f.next(), f.next(), f.next(), f.next()) {
                (Some("v1"), Some(s), Some(hex), None) if s == id => sys::path_from(&unhex(hex)?),
                _ => None,
            }
        })
        .next_back())
}

/// Adds "session `id` runs its tools in `sandbox`" to the database's
/// registry, durably.
pub(super) fn add(db: &Path, id: SessionId, sandbox: &Path) -> Result<(), Error> {
    if is_url(db) {
        // A database on a server has no folder to keep the registry in: a
        // resume of its sessions always names its folder (`--sandbox`).
        return Ok(());
    }
    let file = db.join(REGISTRY);
    let io = |e: io::Error| Error::Io {
        context: format!(
            "recording the sandbox of session {id} in {}",
            file.display()
        ),
        source: e,
    };
    let bytes = sys::path_bytes(sandbox).ok_or_else(|| {
        Error::InvalidInput(format!(
            "sandbox path {} cannot be recorded (not UTF-8)",
            sandbox.display()
        ))
    })?;
    let existed = file.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .map_err(io)?;
    f.write_all(format!("v1 {id} {}\n", hex(&bytes)).as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(io)?;
    if !existed {
        sys::sync_dir(db).map_err(io)?;
    }
    Ok(())
}

/// Copies the registry of the database at `from` into the new database at
/// `to` (after `compact` or `salvage`: the sessions keep their ids, so
/// their sandboxes stay theirs), written whole: a temporary file, synced,
/// renamed. Nothing to copy when `from` has none.
pub(crate) fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    let source = from.join(REGISTRY);
    let target = to.join(REGISTRY);
    let io = |e: io::Error| Error::Io {
        context: format!("copying {} to {}", source.display(), target.display()),
        source: e,
    };
    let bytes = match std::fs::read(&source) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let tmp = to.join(format!("{REGISTRY}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(&bytes)
        .and_then(|()| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&tmp, &target).map_err(io)?;
    sys::sync_dir(to).map_err(io)
}

/// True for a database given as a URL (`postgres://...`), not a folder.
fn is_url(db: &Path) -> bool {
    db.to_str().is_some_and(|s| s.contains("://"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lines_round_trip_and_torn_ones_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (SessionId::new(), SessionId::new());
        add(dir.path(), a, Path::new("/x y/\n z")).expect("add");
        add(dir.path(), b, Path::new("/b")).expect("add");
        add(dir.path(), a, Path::new("/a2")).expect("add");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(REGISTRY))
            .expect("open");
        f.write_all(format!("v1 {b} 2f6").as_bytes()).expect("torn");
        assert_eq!(
            lookup(dir.path(), a).expect("lookup"),
            Some(PathBuf::from("/a2"))
        );
        assert_eq!(
            lookup(dir.path(), b).expect("lookup"),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(lookup(dir.path(), SessionId::new()).expect("lookup"), None);
    }
}
