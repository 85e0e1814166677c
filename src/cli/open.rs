//! Opening the database and finding sessions in it by id or unique prefix.

use std::path::Path;

use agent_journal::{Error, Journal, JournalConfig, Session, SessionId};

/// Opens the database at `db`, refusing to create one.
pub(crate) fn open_existing(db: &Path) -> Result<Journal, Error> {
    Journal::open_with(
        db,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
}

/// Finds a session by full id or unique prefix.
pub(crate) fn find_session(journal: &Journal, text: &str) -> Result<Session, Error> {
    if let Ok(id) = text.parse::<SessionId>() {
        return journal.session(id);
    }
    let needle = text.to_ascii_lowercase();
    let matches: Vec<SessionId> = journal
        .sessions()?
        .into_iter()
        .filter(|id| id.to_string().starts_with(&needle))
        .collect();
    match matches.as_slice() {
        [one] => journal.session(*one),
        [] => Err(Error::InvalidInput(format!("no session matches {text:?}"))),
        many => Err(Error::InvalidInput(format!(
            "{text:?} matches {} sessions; give more of the id",
            many.len()
        ))),
    }
}

/// The id of a session given by full id or unique prefix; a full id is
/// returned as is, without looking the session up.
pub(crate) fn find_session_id(journal: &Journal, text: &str) -> Result<SessionId, Error> {
    if let Ok(id) = text.parse::<SessionId>() {
        return Ok(id);
    }
    find_session(journal, text).map(|s| s.id())
}

/// `at`, or the session's last seq when it is not given.
pub(crate) fn at_or_last(s: &Session, at: Option<u64>) -> u64 {
    at.unwrap_or(s.head().saturating_sub(1))
}
