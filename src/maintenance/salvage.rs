//! Salvage of a damaged database or `.ajournal` file: every readable
//! record into a new database, gaps marked (`Journal::salvage_to` is the
//! same for a database that opens).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{Envelope, Event};
use crate::format;
use crate::format::ajournal as file;
use crate::journal::records::{COPYING, RESERVED};
use crate::journal::{Journal, JournalConfig};
use crate::model::SessionId;
use crate::store::Durability;
use crate::store::atomic;
use crate::store::records::RecordWrite;
use crate::store::sled::raw;
use crate::verify::{Problem, ProblemKind};

/// What `salvage_to` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Sessions written to the new database.
    pub sessions: u64,
    /// Records copied.
    pub copied: u64,
    /// Records copied under a new seq because records before them were lost.
    pub renumbered: u64,
    /// Of the records copied, those the store did not give back (a gap, a
    /// damaged frame, a scan that ended early, a loss, or a database sled
    /// refuses) that were found whole in the bytes of the database's files
    /// (an older page, a segment file, the write-ahead log).
    pub from_files: u64,
    /// What was dropped, and where.
    pub dropped: Vec<Problem>,
}

/// Kind of the marker event salvage puts where records were lost.
pub const SALVAGE_GAP_KIND: &str = "agent_journal.salvage_gap";

/// Opens the new database being built in the temporary directory `dir`,
/// its pages compressed if `compress`.
pub(super) fn open_new(dir: &Path, compress: bool) -> Result<Journal> {
    Journal::open_with(
        dir,
        JournalConfig {
            durability: Durability::Buffered,
            serve_readers: false,
            compress,
            ..JournalConfig::default()
        },
    )
}

/// Records copied per append.
pub(super) const CHUNK: usize = 4096;

/// Salvages the sled database at `path`: every readable record into a new
/// database at `dest`, as [`Journal::salvage_to`] does, also when the
/// database cannot be opened. The files are copied first into a private
/// folder (only this user's, removed at the end: the original is never
/// changed, so the evidence of damage stays) and read there, first without
/// sled (which rewrites a damaged log when it opens one): every event whose frame is
/// still whole in sled's `db` file or blob files, and every record of the
/// write-ahead log that checks (`store/sled/raw.rs`). If the database then
/// opens, that fills in what it lost below its acknowledged heads; if sled
/// refuses it, or fails on its damaged pages, the files alone give the
/// copy. The new database is written whole or not at all, gaps marked.
///
/// # Errors
/// [`Error::InvalidInput`] if `dest` exists (an empty directory is taken);
/// [`Error::Io`] if `path` or its `db` file cannot be read, or the private
/// copy cannot be made; [`Error::Locked`] if another process has the
/// database open.
pub fn salvage_database(path: &Path, dest: &Path, limit: u64) -> Result<SalvageReport> {
    salvage_database_with(path, dest, limit, |_, _| {})
}

/// [`salvage_database`], calling `progress(written, total)` as it writes
/// the salvaged events.
///
/// # Errors
/// As [`salvage_database`].
pub fn salvage_database_with(
    path: &Path,
    dest: &Path,
    limit: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<SalvageReport> {
    atomic::check_new_dir(dest)?;
    // Everything below reads a private copy: sled repairs a damaged log
    // when it opens one (zeroing what follows the damage), and the
    // original must stay as it was, evidence included.
    let copy = crate::store::private::copy_database(path)?;
    let path = copy.path();
    let raw = raw::scan_dir(path, limit)?;
    let config = JournalConfig {
        create_if_missing: false,
        max_event_bytes: limit,
        ..JournalConfig::default()
    };
    match Journal::open_with(path, config) {
        // sled opens it, yet its tree may be damaged past listing its
        // sessions (a key that is not one of ours, after sled lost a write
        // of its log): then the files are read as when sled refuses it.
        Ok(journal) => match journal.sessions() {
            Err(e) if e.is_corruption() => {
                drop(journal);
                from_files(path, dest, raw, &e, &mut progress)
            }
            _ => journal.salvage_with(dest, Some(raw), &mut progress),
        },
        Err(e) if e.is_corruption() => from_files(path, dest, raw, &e, &mut progress),
        Err(e) => Err(e),
    }
}

/// A salvage of the database at `path` from the bytes of its files alone
/// (`raw`), when sled cannot give them (`e` says why).
pub(super) fn from_files(
    path: &Path,
    dest: &Path,
    raw: raw::RawScan,
    e: &Error,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SalvageReport> {
    let mut dropped: Vec<Problem> = raw
        .conflicts
        .iter()
        .map(|(session, seq)| {
            problem(
                *session,
                Some(*seq),
                None,
                "another copy of this event was found with other contents; the first was kept"
                    .into(),
            )
        })
        .chain(std::iter::once(whole_database_problem(format!(
            "the database cannot be read ({e}): copied from the bytes of its files"
        ))))
        .collect();
    let (partial, carried) = records_of_dir(path, &mut dropped);
    let records = raw
        .events
        .into_values()
        .filter(|e| !partial.contains(&e.session))
        .map(|e| (None, e))
        .collect();
    let (sessions, _) = group(records);
    dropped.extend(partial.iter().map(|id| left_by_a_copy(*id)));
    // What the acknowledgement log says was acknowledged and no file holds:
    // named, never dropped silently.
    let acked = std::fs::read(path.join(crate::store::sled::acks::FILE))
        .map(|b| crate::store::sled::acks::parse(&b))
        .unwrap_or_default();
    let mut acked: Vec<(SessionId, u64)> = acked.into_iter().collect();
    acked.sort_unstable();
    for (id, head) in acked {
        let found = sessions
            .get(&id)
            .and_then(|events| events.last())
            .map_or(0, |e| e.seq + 1);
        if found < head {
            dropped.push(problem(
                id,
                Some(found),
                None,
                format!(
                    "events {found}..{head} were acknowledged and are missing \
                     (no whole copy of them is left in the files)"
                ),
            ));
        }
    }
    let compress = crate::store::sled::compressed(path).unwrap_or(false);
    write_salvaged(dest, sessions, dropped, true, compress, &carried, progress).map(|mut r| {
        r.from_files = r.copied;
        r
    })
}

/// Groups readable records by their own session and seq, in order; a second
/// record claiming the same place is dropped as a duplicate.
pub(super) fn group(
    records: Vec<(Option<u64>, Envelope)>,
) -> (BTreeMap<SessionId, Vec<Envelope>>, Vec<Problem>) {
    let mut sessions: BTreeMap<SessionId, BTreeMap<u64, Envelope>> = BTreeMap::new();
    let mut dropped = Vec::new();
    for (offset, env) in records {
        let (session, seq) = (env.session, env.seq);
        match sessions.entry(session).or_default().entry(seq) {
            std::collections::btree_map::Entry::Occupied(_) => {
                dropped.push(problem(
                    session,
                    Some(seq),
                    offset,
                    "duplicate of an earlier record".into(),
                ));
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(env);
            }
        }
    }
    let sessions = sessions
        .into_iter()
        .map(|(id, m)| (id, m.into_values().collect()))
        .collect();
    (sessions, dropped)
}

/// Salvages an exported journal file that may be damaged anywhere.
///
/// The new database is built in a temporary directory beside `dest` and
/// renamed to `dest` only when it is whole, as by
/// [`Journal::compact_to`].
///
/// # Errors
/// [`Error::InvalidInput`] if `dest` exists (an empty directory is taken);
/// [`Error::Io`] if the file cannot be read.
pub fn salvage_file(path: &Path, dest: &Path, limit: u64) -> Result<SalvageReport> {
    salvage_file_with(path, dest, limit, |_, _| {})
}

/// [`salvage_file`], calling `progress(written, total)` as it writes the
/// salvaged events.
///
/// # Errors
/// As [`salvage_file`].
pub fn salvage_file_with(
    path: &Path,
    dest: &Path,
    limit: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<SalvageReport> {
    atomic::check_new_dir(dest)?;
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let (records, skipped) = file::parse_lenient(&bytes, limit)?;
    // A skipped span's session is unknown: its bytes were unreadable.
    let unknown = SessionId::from_bytes([0; 16]);
    let mut dropped: Vec<Problem> = skipped
        .into_iter()
        .map(|s| problem(unknown, None, Some(s.offset), s.message))
        .collect();
    let (sessions, duplicates) = group(records.into_iter().map(|(o, e)| (Some(o), e)).collect());
    dropped.extend(duplicates);
    // Each gap of a file is already listed with the offset of its record.
    write_salvaged(dest, sessions, dropped, false, false, &[], &mut progress)
}

/// A problem of no one session (the nil id): a file of the database that
/// does not read, the database itself.
pub(super) fn whole_database_problem(message: String) -> Problem {
    problem(SessionId::from_bytes([0; 16]), None, None, message)
}

pub(super) fn problem(
    session: SessionId,
    seq: Option<u64>,
    offset: Option<u64>,
    message: String,
) -> Problem {
    Problem {
        session,
        seq,
        offset,
        kind: ProblemKind::Damage,
        message,
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn write_salvaged(
    dest: &Path,
    sessions: BTreeMap<SessionId, Vec<Envelope>>,
    dropped: Vec<Problem>,
    list_gaps: bool,
    compress: bool,
    records: &[RecordWrite],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SalvageReport> {
    atomic::build_dir(dest, |tmp| {
        let out = open_new(tmp, compress)?;
        let report = SalvageReport {
            dropped,
            ..SalvageReport::default()
        };
        let report = fill_salvaged(&out, sessions, report, list_gaps, progress)?;
        // The records the source kept beside its sessions (the demo's
        // sandbox registry), in the new database before it is renamed.
        if !records.is_empty() {
            out.write_records(records)?;
        }
        Ok(report)
    })
}

/// What the record file of the database folder `path` says, read without
/// sled: the sessions a copy left in part (left out of a salvage, and
/// reported), and the records a salvage carries over. An unreadable file
/// is reported, and nothing is carried.
pub(super) fn records_of_dir(
    path: &Path,
    dropped: &mut Vec<Problem>,
) -> (std::collections::BTreeSet<SessionId>, Vec<RecordWrite>) {
    let all = match crate::store::records::read(&path.join(crate::store::records::FILE)) {
        Ok(map) => crate::store::records::list(&map),
        Err(e) => {
            dropped.push(whole_database_problem(e.to_string()));
            Vec::new()
        }
    };
    let partial = all
        .iter()
        .filter(|(n, _, _)| n == COPYING)
        .filter_map(|(_, k, _)| k.parse().ok())
        .collect();
    let carried = all
        .into_iter()
        .filter(|(n, _, _)| !n.starts_with(RESERVED))
        .map(|(n, k, v)| (n, k, Some(v)))
        .collect();
    (partial, carried)
}

/// The problem reported for a session a copy left in part.
pub(super) fn left_by_a_copy(id: SessionId) -> Problem {
    problem(
        id,
        None,
        None,
        "left in part by a copy that stopped (run the copy again to finish it)".into(),
    )
}

/// Writes the salvaged sessions into `out`, a new database.
pub(super) fn fill_salvaged(
    out: &Journal,
    sessions: BTreeMap<SessionId, Vec<Envelope>>,
    mut report: SalvageReport,
    list_gaps: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SalvageReport> {
    let limit = out.inner.config.max_event_bytes;
    let total: u64 = sessions.values().map(|e| e.len() as u64).sum();
    let mut done = 0u64;
    progress(0, total);
    for (id, envs) in sessions {
        if envs.is_empty() {
            continue;
        }
        let mut frames = Vec::with_capacity(envs.len());
        let mut next = 0u64;
        for env in envs {
            if next == 0 && env.seq != 0 {
                let opened = Envelope {
                    session: id,
                    seq: 0,
                    at: env.at,
                    event: Event::SessionOpened {
                        labels: vec![(
                            "salvaged".into(),
                            "the original SessionOpened was lost".into(),
                        )],
                    },
                };
                frames.push(format::encode_frame(&opened, limit)?);
                next = 1;
            }
            if env.seq != next && list_gaps {
                report.dropped.push(problem(
                    id,
                    Some(next),
                    None,
                    format!("records {next}..{} are missing (a gap); a {SALVAGE_GAP_KIND} event marks the place", env.seq),
                ));
            }
            if env.seq != next {
                let gap = Envelope {
                    session: id,
                    seq: next,
                    at: env.at,
                    event: Event::Custom {
                        kind: SALVAGE_GAP_KIND.into(),
                        payload: format!("records {next}..{} of the original were lost", env.seq)
                            .into_bytes(),
                    },
                };
                frames.push(format::encode_frame(&gap, limit)?);
                next += 1;
            }
            let renumbered = env.seq != next;
            let env = Envelope { seq: next, ..env };
            frames.push(format::encode_frame(&env, limit)?);
            report.copied += 1;
            report.renumbered += u64::from(renumbered);
            next += 1;
        }
        // In chunks, for the progress (the new database is written whole
        // or not at all anyway).
        let mut at = 0u64;
        for chunk in frames.chunks(CHUNK) {
            out.inner.write(|store| store.append(id, at, chunk))?;
            at += chunk.len() as u64;
            done += chunk.len() as u64;
            progress(done.min(total), total);
        }
        report.sessions += 1;
    }
    out.inner.write(|store| store.flush(Durability::Synced))?;
    Ok(report)
}
