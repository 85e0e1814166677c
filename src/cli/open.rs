//! Opening the database and finding sessions in it by id or unique prefix;
//! the warnings about what was cut off while reading them.

use std::fmt::Display;
use std::path::Path;

use agent_journal::{Error, Journal, JournalConfig, Session, SessionId};

use crate::cli::find::{BLANK_SESSION, Pick, ambiguous, last_session};

/// Opens the database at `db`, refusing to create one: every command but
/// `demo` and `import` opens this way, so a mistyped `--db` is an error
/// naming the path and leaves nothing on disk.
pub(crate) fn open_existing(db: &Path) -> Result<Journal, Error> {
    Journal::open_with(
        db,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
    .map(said_if_rebuilt)
}

/// Opens the database at `db`, creating it if missing (`demo`, `import`,
/// `chat`, `copy`), its pages compressed if `compress` and it is new.
pub(crate) fn open_creating(db: &Path, compress: bool) -> Result<Journal, Error> {
    Journal::open_with(
        db,
        JournalConfig {
            compress,
            ..JournalConfig::default()
        },
    )
    .map(said_if_rebuilt)
}

/// Warns (on stderr) when the open rebuilt a database sled could not read
/// from the journal's own records, naming where the damaged one was kept.
fn said_if_rebuilt(journal: Journal) -> Journal {
    if let (Some(kept), Some(path)) = (journal.rebuilt_from(), journal.path()) {
        warn(format_args!(
            "{}: sled could not read its files (a power cut?); rebuilt from the journal's own \
             records, which held every acknowledged event; the damaged database is kept as {}",
            path.display(),
            kept.display()
        ));
    }
    journal
}

/// sled's page cache for an import: what it inserts stays in the cache (up
/// to its size), so a large import would grow to the default 512 MiB;
/// written once and not read back, it needs little.
pub(crate) const IMPORT_CACHE_BYTES: u64 = 8 << 20;

/// [`open_creating`] for an import: a small page cache
/// ([`IMPORT_CACHE_BYTES`]).
pub(crate) fn open_for_import(db: &Path, compress: bool) -> Result<Journal, Error> {
    Journal::open_with(
        db,
        JournalConfig {
            compress,
            cache_bytes: IMPORT_CACHE_BYTES,
            ..JournalConfig::default()
        },
    )
    .map(said_if_rebuilt)
}

/// The configuration of a reading command: it does not create a database,
/// and it offers no read service (it holds the database for a moment only).
fn reading() -> JournalConfig {
    JournalConfig {
        create_if_missing: false,
        serve_readers: false,
        ..JournalConfig::default()
    }
}

/// [`open_existing`] for a command that reads: a database that another
/// process has open (an agent appending to it) is read through that
/// process's read service ([`Journal::attach`]), without stopping it. Warns
/// (on stderr) when an exported journal file was cut short or damaged at
/// its end, since what it prints then lacks the records after the damage.
pub(crate) fn open_for_reading(db: &Path) -> Result<Journal, Error> {
    let journal = open_quietly(db)?;
    if let Some(d) = journal.file_damage() {
        warn(format_args!("{}: {d}", db.display()));
    }
    Ok(journal)
}

/// [`open_for_reading`] without its warning (for `log --follow`, which
/// opens again at every poll).
///
/// A database this user may read and not open for writing (a folder it may
/// not write, one of another user's or that other users may write into, a
/// full disk, a read-only file system) is read through the read service of
/// a process that has it open, else through a private copy
/// ([`Journal::open_private_copy`]).
pub(crate) fn open_quietly(db: &Path) -> Result<Journal, Error> {
    match Journal::open_with(db, reading()) {
        Err(Error::Locked { .. }) => Journal::attach_with(db, reading()),
        Err(e) if needs_a_copy(&e) && db.is_dir() => {
            Journal::attach_with(db, reading()).or_else(|_| read_private_copy(db, e))
        }
        other => other.map(said_if_rebuilt),
    }
}

/// [`open_quietly`] for a command that must not change what it looks at
/// (`verify`): through the read service of a process that has the
/// database open, else a private copy of its files, so that sled's repair
/// of a damaged log at open never destroys evidence. A file or a URL is
/// read as it is.
pub(crate) fn open_untouched(db: &Path) -> Result<Journal, Error> {
    if !db.is_dir() {
        return open_quietly(db);
    }
    match Journal::open_private_copy(db, reading()) {
        Err(Error::Locked { .. }) => Journal::attach_with(db, reading()),
        other => other,
    }
}

/// Whether opening a database for writing failed for a reason that a
/// private copy of it avoids.
fn needs_a_copy(e: &Error) -> bool {
    use std::io::ErrorKind;
    match e {
        Error::UnsafePath { .. } => true,
        Error::Io { source, .. } => matches!(
            source.kind(),
            ErrorKind::PermissionDenied | ErrorKind::StorageFull | ErrorKind::ReadOnlyFilesystem
        ),
        _ => false,
    }
}

/// Opens a private copy of the database folder `db`, which this process
/// may not open for writing (`denied` says why), and says so on stderr.
/// `denied` is the error returned when not even a copy can be made.
fn read_private_copy(db: &Path, denied: Error) -> Result<Journal, Error> {
    let journal = match Journal::open_private_copy(db, reading()) {
        Ok(j) => j,
        // Not even readable: that is the error to report, unless the open
        // failed for want of permission already.
        Err(e @ Error::Io { .. }) if !permission_denied(&denied) && permission_denied(&e) => {
            return Err(e);
        }
        Err(Error::Io { .. }) => return Err(denied),
        Err(e) => return Err(e),
    };
    warn(format_args!(
        "{}: not opened for writing ({}); reading a private copy of it (what is appended meanwhile is not seen)",
        db.display(),
        short_reason(&denied)
    ));
    Ok(journal)
}

/// Whether `e` is a refusal of the file system's permissions.
fn permission_denied(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Why a database was not opened for writing, in a few words.
fn short_reason(e: &Error) -> String {
    match e {
        Error::UnsafePath { reason, .. } => reason.clone(),
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            "no write permission".into()
        }
        Error::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// One warning on stderr (`warning: ...`, or a JSON line under `--json`):
/// stdout holds only the data, so that it can be parsed.
pub(crate) fn warn(text: impl Display) {
    crate::cli::output::report_warning(&text.to_string());
}

/// Warns when the session's stream ends in a torn tail (cut off, not shown).
pub(crate) fn warn_torn_tail(s: &Session) {
    if let Some(t) = s.torn_tail() {
        warn(format_args!("session {}: {t}", s.id()));
    }
}

/// Finds a session by full id, or a unique prefix or suffix of one (the
/// text mode prints the last 8 digits, which UUIDv7 ids made in the same
/// minute never share), or the latest active one ([`Pick::Last`]).
///
/// # Errors
///
/// [`Error::InvalidInput`] when no session matches, or when several do
/// (naming each candidate: id, created, status); the errors of opening it.
pub(crate) fn find_session<'a>(
    journal: &Journal,
    which: impl Into<Pick<'a>>,
) -> Result<Session, Error> {
    let text = match which.into() {
        Pick::Last => return journal.session(last_session(journal)?),
        Pick::Id(text) => text,
    };
    if let Ok(id) = text.parse::<SessionId>() {
        return journal.session(id);
    }
    // The arguments refuse it already (`session_arg`); never match every
    // session whatever the caller.
    if text.trim().is_empty() {
        return Err(Error::InvalidInput(BLANK_SESSION.into()));
    }
    let needle = text.to_ascii_lowercase();
    let matches: Vec<SessionId> = journal
        .sessions()?
        .into_iter()
        .filter(|id| crate::cli::filter::names(&id.to_string(), &needle))
        .collect();
    match matches.as_slice() {
        [one] => journal.session(*one),
        [] => Err(Error::InvalidInput(format!("no session matches {text:?}"))),
        many => Err(ambiguous(journal, text, many)),
    }
}

/// [`find_session`] for a command that reads the session: warns of its
/// torn tail.
pub(crate) fn read_session<'a>(
    journal: &Journal,
    which: impl Into<Pick<'a>>,
) -> Result<Session, Error> {
    let s = find_session(journal, which)?;
    warn_torn_tail(&s);
    Ok(s)
}

/// The id of a session given by full id or unique prefix (or `--last`); a
/// full id is returned as is, without looking the session up.
pub(crate) fn find_session_id<'a>(
    journal: &Journal,
    which: impl Into<Pick<'a>>,
) -> Result<SessionId, Error> {
    let which = which.into();
    if let Pick::Id(text) = which {
        if let Ok(id) = text.parse::<SessionId>() {
            return Ok(id);
        }
    }
    find_session(journal, which).map(|s| s.id())
}

/// `at`, or the session's last seq when it is not given.
pub(crate) fn at_or_last(s: &Session, at: Option<u64>) -> u64 {
    at.unwrap_or(s.head().saturating_sub(1))
}
