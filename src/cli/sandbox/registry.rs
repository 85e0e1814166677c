//! The sandbox registry: the folder `demo` (or a resume of one) gave each
//! session of a journal, kept in the journal's record area
//! ([`Journal::put_record`]), namespace [`NAMESPACE`], key = the session id,
//! value = the folder's path as bytes. The record area is the store's own
//! (a sled database's `records` file, a PostgreSQL journal's `records`
//! table), outside the sessions' events: no session, exported file, import
//! or copy of sessions writes it, so no journal from elsewhere can choose a
//! folder. `compact` and `salvage` carry it into the new database.

use std::path::{Path, PathBuf};

use agent_journal::{Error, Journal, SessionId};

use super::sys;

/// The registry's namespace in the record area.
pub(super) const NAMESPACE: &str = "demo.sandboxes";

/// The sandbox recorded for session `id` in `journal`; `None` if there is
/// none (or its bytes are no path of this system).
pub(super) fn lookup(journal: &Journal, id: SessionId) -> Result<Option<PathBuf>, Error> {
    Ok(journal
        .record(NAMESPACE, &id.to_string())?
        .and_then(|bytes| sys::path_from(&bytes)))
}

/// Records "session `id` runs its tools in `sandbox`" in `journal`,
/// durably.
pub(super) fn add(journal: &Journal, id: SessionId, sandbox: &Path) -> Result<(), Error> {
    let bytes = sys::path_bytes(sandbox).ok_or_else(|| {
        Error::InvalidInput(format!(
            "sandbox path {} cannot be recorded (not UTF-8)",
            sandbox.display()
        ))
    })?;
    journal.put_record(NAMESPACE, &id.to_string(), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_records_round_trip_and_the_last_wins() {
        let journal = Journal::memory();
        let (a, b) = (SessionId::new(), SessionId::new());
        add(&journal, a, Path::new("/x y/\n z")).expect("add");
        add(&journal, b, Path::new("/b")).expect("add");
        add(&journal, a, Path::new("/a2")).expect("add");
        assert_eq!(
            lookup(&journal, a).expect("lookup"),
            Some(PathBuf::from("/a2"))
        );
        assert_eq!(
            lookup(&journal, b).expect("lookup"),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(lookup(&journal, SessionId::new()).expect("lookup"), None);
    }
}
