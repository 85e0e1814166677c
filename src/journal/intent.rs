//! The import intent: the file `agent-journal.importing` in a database
//! directory names the sessions an import of an exported journal is
//! writing. It is durable before the first session is written and removed
//! once the last is durable; an import that finds it deletes the sessions
//! it names first (they are what an interrupted import left), so an import
//! of several sessions is all or nothing.
//!
//! The file is written whole under a temporary name and renamed
//! ([`atomic::replace_file`]), so it is there whole or not at all:
//!
//! ```text
//! agent-journal import 1
//! <session id, hyphenated>      one line per session
//! end <number of sessions>
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::model::SessionId;
use crate::store::Durability;
use crate::store::atomic;
use crate::store::fs::sync_dir;

/// The intent file's name in the database directory.
pub(crate) const INTENT: &str = "agent-journal.importing";

const HEADER: &str = "agent-journal import 1";

/// Held by an import, and by a rollback: in one process, two imports would
/// write one intent file, and a rollback would delete the sessions of an
/// import that is still running.
static IMPORTS: Mutex<()> = Mutex::new(());

/// Waits for the imports and rollbacks of this process to finish.
pub(crate) fn one_import_at_a_time() -> MutexGuard<'static, ()> {
    IMPORTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The intent file of `journal`, if it is a database directory (memory
/// journals and exported files have none).
pub(crate) fn intent_path(journal: &Journal) -> Option<PathBuf> {
    journal
        .path()
        .filter(|p| p.is_dir() && !journal.is_read_only())
        .map(|p| p.join(INTENT))
}

fn encode(ids: &[SessionId]) -> String {
    let mut text = format!("{HEADER}\n");
    for id in ids {
        text.push_str(&format!("{id}\n"));
    }
    text.push_str(&format!("end {}\n", ids.len()));
    text
}

fn decode(text: &str) -> std::result::Result<Vec<SessionId>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("it does not start with {HEADER:?}"));
    }
    let mut ids = Vec::new();
    for line in lines.by_ref() {
        if let Some(n) = line.strip_prefix("end ") {
            return match (n.parse::<usize>(), lines.next()) {
                (Ok(n), None) if n == ids.len() => Ok(ids),
                _ => Err(format!(
                    "its last line {line:?} does not count its {} ids",
                    ids.len()
                )),
            };
        }
        ids.push(
            line.parse::<SessionId>()
                .map_err(|e| format!("{line:?} is not a session id: {e}"))?,
        );
    }
    Err("it has no end line".into())
}

/// The sessions an unfinished import at `path` was writing, if its intent
/// file is there.
///
/// # Errors
/// [`Error::Corruption`] naming the file if it is there but unreadable.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<SessionId>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(unreadable(path, "it is not UTF-8"));
        }
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    decode(&text)
        .map(Some)
        .map_err(|why| unreadable(path, &why))
}

fn unreadable(path: &Path, why: &str) -> Error {
    Error::corruption(
        None,
        None,
        None,
        format!(
            "{}: the record of an interrupted import is unreadable ({why}); the sessions it \
             named may be partly imported: delete them, then remove the file",
            path.display()
        ),
    )
}

/// Writes the intent to import `ids`, durably (file and directory synced).
pub(crate) fn write(path: &Path, ids: &[SessionId]) -> Result<()> {
    let text = encode(ids);
    atomic::replace_file(path, |f, tmp| atomic::write_bytes(f, tmp, text.as_bytes()))
}

/// Removes the intent file, durably.
pub(crate) fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("removing {}", path.display()), e)),
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

impl Journal {
    /// At open: an import of an exported journal that a crash interrupted
    /// is rolled back before anything reads the database. An intent file
    /// that does not read whole is left as it is, for the next import to
    /// report (the database still opens for reading).
    pub(crate) fn roll_back_interrupted_import_at_open(&self) -> Result<()> {
        let _one_at_a_time = one_import_at_a_time();
        match self.roll_back_interrupted_import() {
            Err(e) if e.is_corruption() => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Deletes sessions `ids` (those an import wrote before it failed),
    /// durably: they survive neither a crash nor power loss after this.
    pub(crate) fn remove_imported(&self, ids: &[SessionId]) -> Result<()> {
        self.inner.write(|store| {
            for &id in ids {
                store.delete_session(id)?;
            }
            store.flush(Durability::Synced)
        })
    }

    /// Rolls back an import that a crash interrupted: if the intent file is
    /// there, deletes the sessions it names, then removes it. Returns the
    /// sessions it names (empty if there was nothing to roll back). The
    /// caller holds [`one_import_at_a_time`].
    ///
    /// # Errors
    /// [`Error::Corruption`] if the intent file is unreadable; errors of the
    /// store. The intent file stays until the rollback is durable, so an
    /// interrupted rollback is done again by the next one.
    pub(crate) fn roll_back_interrupted_import(&self) -> Result<Vec<SessionId>> {
        let Some(path) = intent_path(self) else {
            return Ok(Vec::new());
        };
        let Some(ids) = read(&path)? else {
            return Ok(Vec::new());
        };
        self.remove_imported(&ids)?;
        remove(&path)?;
        Ok(ids)
    }

    /// The sessions of an import that a crash interrupted (they are rolled
    /// back by the next import): copies leave them out.
    pub(crate) fn unfinished_import(&self) -> Result<Vec<SessionId>> {
        match intent_path(self) {
            Some(path) => Ok(read(&path)?.unwrap_or_default()),
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_reads_back_and_any_cut_or_change_is_refused() {
        let ids = vec![SessionId::new(), SessionId::new(), SessionId::new()];
        let text = encode(&ids);
        assert_eq!(decode(&text), Ok(ids.clone()));
        assert_eq!(decode(&encode(&[])), Ok(vec![]));
        for cut in 0..text.len() {
            // A cut before the end line's newline can still read whole only
            // if it keeps every id and the complete count.
            if let Ok(got) = decode(&text[..cut]) {
                assert_eq!(got, ids, "cut at {cut}");
            }
        }
        assert!(decode(&text.replace("end 3", "end 2")).is_err());
        assert!(decode(&format!("{text}more\n")).is_err());
        assert!(decode(&text.replace(HEADER, "agent-journal import 2")).is_err());
    }
}
