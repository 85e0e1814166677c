//! Keeping a journal sound: verifying it, deleting sessions, compacting it
//! into a new database, salvaging what is readable from a damaged one.
//!
//! ```
//! use agent_journal::Journal;
//! use agent_journal::maintenance::VerifyReport;
//!
//! # fn main() -> agent_journal::Result<()> {
//! # let dir = tempfile::tempdir().expect("tempdir");
//! let journal = Journal::open(dir.path().join("journal.db"))?;
//! let session = journal.create_session()?;
//! session.start_evaluation("agent", "task")?.user("hello")?;
//!
//! let report: VerifyReport = journal.verify(None, |_| {})?;
//! assert!(report.is_clean());
//! let compacted = journal.compact_to(&dir.path().join("compacted.db"), |_| {})?;
//! assert_eq!(compacted.sessions, 1);
//! # Ok(())
//! # }
//! ```
//!
//! Every database and file written here is written whole or not at all: into
//! a temporary name, synced, then renamed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format;
use crate::journal::Journal;
use crate::journal::records::COPYING;
use crate::model::SessionId;
use crate::store::Durability;
use crate::store::Visit;
use crate::store::atomic;
use crate::store::sled::raw;

mod salvage;
pub use crate::verify::{Problem, ProblemKind, VerifyReport};
use salvage::{CHUNK, group, open_new, problem, whole_database_problem, write_salvaged};
pub use salvage::{
    SALVAGE_GAP_KIND, SalvageReport, salvage_database, salvage_database_with, salvage_file,
    salvage_file_with,
};

/// What `compact_to` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactReport {
    /// Sessions copied.
    pub sessions: u64,
    /// Events copied.
    pub events: u64,
    /// Bytes on disk of the source.
    pub bytes_before: u64,
    /// Bytes on disk of the new database.
    pub bytes_after: u64,
    /// Whether the new database compresses its pages.
    pub compressed: bool,
}

impl Journal {
    /// Deletes a session: its events and snapshots.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if an evaluation of it has a tool call in
    /// doubt (started, never finished) and `force` is false: deleting it
    /// would lose the only record that the tool may have had its effect;
    /// [`Error::InvalidInput`] (even with `force`) while forks read its
    /// events ([`Journal::forks_of`]): delete them first. A session that a
    /// copy left in part ([`Error::IncompleteSession`]) is deleted whatever
    /// it holds.
    pub fn delete_session(&self, id: SessionId, force: bool) -> Result<()> {
        if self.incomplete_copies()?.contains(&id) {
            // Left in part by a copy: not a session of this journal yet.
            self.forget(id);
            self.inner.write(|store| {
                store.delete_session(id)?;
                store.flush(Durability::Synced)
            })?;
            return self.write_records(&[(COPYING.into(), id.to_string(), None)]);
        }
        let session = self.session(id)?;
        // Forks read this session's first events: it stays while they do.
        let forks = self.forks_of(id)?;
        if !forks.is_empty() {
            let list: Vec<String> = forks
                .iter()
                .map(|(f, at)| format!("{f} (at seq {at})"))
                .collect();
            return Err(Error::InvalidInput(format!(
                "session {id} has forks that read its events: {}; delete them first",
                list.join(", ")
            )));
        }
        if !force {
            let state = session.state();
            let in_doubt: Vec<String> = state
                .evaluations()
                .iter()
                .flat_map(|e| state.tool_calls().in_doubt(e.evaluation_id))
                .map(|c| format!("{} ({})", c.call_id, c.name))
                .collect();
            if !in_doubt.is_empty() {
                return Err(Error::InvalidInput(format!(
                    "session {id} has tool calls in doubt: {}; resume it first, or force the deletion",
                    in_doubt.join(", ")
                )));
            }
        }
        self.forget(id);
        self.inner.write(|store| {
            store.delete_session(id)?;
            store.flush(self.inner.config.durability)
        })
    }

    /// Rewrites every session (verified frames, and their latest snapshot)
    /// into a new database at `dest`, which reclaims the space sled never
    /// gives back. The source is not changed.
    ///
    /// The new database is built in a temporary directory beside `dest`,
    /// synced, and renamed to `dest` only when it is whole: a compaction
    /// that fails or is killed leaves no `dest` (a temporary directory left
    /// by a kill is removed by the next compaction to `dest`). The sessions
    /// of an import that a crash interrupted are left out: the next import
    /// rolls them back.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if `dest` exists (an empty directory is
    /// taken); [`Error::Corruption`] if a frame is damaged (use
    /// [`Journal::salvage_to`]).
    pub fn compact_to(&self, dest: &Path, progress: impl FnMut(u64)) -> Result<CompactReport> {
        self.compact_to_with(dest, None, progress)
    }

    /// Whether this journal's database compresses its pages
    /// ([`JournalConfig::compress`](crate::JournalConfig::compress)): `false` for an exported file or a
    /// PostgreSQL database, which sled does not hold.
    pub fn compressed(&self) -> bool {
        self.path()
            .filter(|p| p.is_dir())
            .and_then(crate::store::sled::compressed)
            .unwrap_or(false)
    }

    /// [`Journal::compact_to`], the new database's pages compressed if
    /// `compress` says so, else as the source's are: so a database made
    /// without compression is rewritten compressed with `Some(true)`, and
    /// back with `Some(false)`.
    ///
    /// # Errors
    /// As [`Journal::compact_to`].
    pub fn compact_to_with(
        &self,
        dest: &Path,
        compress: Option<bool>,
        mut progress: impl FnMut(u64),
    ) -> Result<CompactReport> {
        atomic::check_new_dir(dest)?;
        let skip = self.unfinished_import()?;
        let bytes_before = self.size_on_disk()?;
        let compress = compress.unwrap_or_else(|| self.compressed());
        atomic::build_dir(dest, |tmp| {
            let out = open_new(tmp, compress)?;
            let mut report = CompactReport {
                sessions: 0,
                events: 0,
                bytes_before,
                bytes_after: 0,
                compressed: compress,
            };
            for id in self.sessions()? {
                if skip.contains(&id) {
                    continue;
                }
                report.events += self.copy_session(&out, id, &mut progress)?;
                report.sessions += 1;
            }
            out.inner.write(|store| store.flush(Durability::Synced))?;
            // The records kept beside the sessions (the demo's sandbox
            // registry) go along; copy intents do not (their sessions were
            // left out).
            let carried = self.carried_records()?;
            if !carried.is_empty() {
                out.write_records(&carried)?;
            }
            report.bytes_after = out.size_on_disk()?;
            Ok(report)
        })
    }

    /// Copies session `id`'s verified frames, and its latest snapshot, into
    /// `out`; returns the number of events. Frames are copied as they are.
    pub(crate) fn copy_session(
        &self,
        out: &Journal,
        id: SessionId,
        progress: &mut impl FnMut(u64),
    ) -> Result<u64> {
        let limit = self.inner.config.max_event_bytes;
        let len = self.inner.store.len(id)?.unwrap_or(0);
        let mut chunk: Vec<Vec<u8>> = Vec::with_capacity(CHUNK);
        let mut written = 0u64;
        let mut failure: Option<Error> = None;
        self.inner.store.scan(id, 0, len, &mut |seq, frame| {
            let env: Envelope = format::decode_frame(frame, limit)
                .map_err(|e| Error::corruption(Some(id), Some(seq), None, e.to_string()))?;
            if env.seq != seq || env.session != id || seq != written + chunk.len() as u64 {
                return Err(Error::corruption(
                    Some(id),
                    Some(seq),
                    None,
                    "record out of place",
                ));
            }
            chunk.push(frame.to_vec());
            if chunk.len() == CHUNK {
                if let Err(e) = out.inner.write(|store| store.append(id, written, &chunk)) {
                    failure = Some(e);
                    return Ok(Visit::Break(()));
                }
                written += chunk.len() as u64;
                progress(chunk.len() as u64);
                chunk.clear();
            }
            Ok(Visit::Continue(()))
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        out.inner.write(|store| store.append(id, written, &chunk))?;
        written += chunk.len() as u64;
        progress(chunk.len() as u64);
        // The latest snapshot's chain, whole snapshot first, as far as its
        // links are good (a store that keeps no chain takes the whole one).
        let links = crate::session::chain::latest_links(self, id).unwrap_or_default();
        for (i, (seq, frame)) in links.into_iter().enumerate() {
            if format::verify_frame(&frame).is_err() || seq >= written {
                break;
            }
            let chains = out.inner.store.keeps_snapshot_chains();
            out.inner.write(|store| match i {
                0 => store.put_snapshot(id, seq, frame.to_vec()),
                _ if chains => store.add_snapshot(id, seq, frame.to_vec()),
                _ => Ok(()),
            })?;
        }
        Ok(written)
    }

    /// Copies every readable record into a new database at `dest` and
    /// reports what it dropped. Each session stays gap-free: after a lost
    /// record, a `Custom` event of kind [`SALVAGE_GAP_KIND`] marks the place
    /// and the following records get new seqs. The source is not changed.
    ///
    /// The new database is built in a temporary directory beside `dest` and
    /// renamed to `dest` only when it is whole, as by
    /// [`compact_to`](Journal::compact_to). The sessions of an import that a
    /// crash interrupted are left out, and reported as dropped.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if `dest` exists (an empty directory is
    /// taken).
    pub fn salvage_to(&self, dest: &Path) -> Result<SalvageReport> {
        self.salvage_with(dest, None, &mut |_, _| {})
    }

    /// [`Journal::salvage_to`]. Events the store does not give back (a
    /// gap, a damaged frame, a scan that ends before the stream's last key,
    /// acknowledged events sled lost) may still be whole in the bytes of its
    /// files (an older page, a segment, the log): `raw`, or a raw scan of
    /// the database's files made then, fills those places, and only those.
    fn salvage_with(
        &self,
        dest: &Path,
        raw: Option<raw::RawScan>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SalvageReport> {
        atomic::check_new_dir(dest)?;
        let limit = self.inner.config.max_event_bytes;
        let mut records: Vec<(Option<u64>, Envelope)> = Vec::new();
        // Per session: the events it should have (its stream's length, or
        // what was acknowledged if sled lost some).
        let mut wanted: BTreeMap<SessionId, u64> = BTreeMap::new();
        for loss in self.losses() {
            wanted.insert(loss.session, loss.acknowledged);
        }
        let mut dropped = Vec::new();
        // A damaged intent file leaves the decision to the user: everything
        // readable is copied, and the problem reported.
        let skip = self.unfinished_import().unwrap_or_else(|e| {
            dropped.push(whole_database_problem(e.to_string()));
            Vec::new()
        });
        for id in self.sessions()? {
            if skip.contains(&id) {
                dropped.push(problem(
                    id,
                    None,
                    None,
                    "left by an interrupted import, which the next import rolls back".into(),
                ));
                continue;
            }
            let len = self.inner.store.len(id)?.unwrap_or(0);
            let want = wanted.entry(id).or_insert(len);
            *want = (*want).max(len);
            self.inner
                .store
                .scan_past_damage(id, 0, len, &mut |seq, frame| {
                    // A readable record goes back where it says it belongs, even
                    // if it was stored under another key.
                    match frame.map_err(|e| e.to_string()).and_then(|f| {
                        format::decode_frame::<Envelope>(f, limit).map_err(|e| e.to_string())
                    }) {
                        Ok(env) => records.push((None, env)),
                        Err(e) => dropped.push(problem(id, Some(seq), None, e.to_string())),
                    }
                    Ok(Visit::Continue(()))
                })?;
        }
        let have: std::collections::HashSet<(SessionId, u64)> =
            records.iter().map(|(_, e)| (e.session, e.seq)).collect();
        let missing = |session: &SessionId, seq: &u64| {
            wanted.get(session).is_some_and(|w| seq < w) && !have.contains(&(*session, *seq))
        };
        let short = wanted
            .iter()
            .any(|(id, w)| (0..*w).any(|seq| !have.contains(&(*id, seq))));
        let raw = match raw {
            Some(r) => Some(r),
            None if short => match self.path().filter(|p| p.is_dir()) {
                Some(dir) => Some(raw::scan_dir(dir, limit)?),
                None => None,
            },
            None => None,
        };
        let mut from_files = 0;
        if let Some(raw) = raw {
            // A place found with two different records (a cut tail written
            // over) is not filled: which one is current is not known.
            let conflicts: std::collections::HashSet<(SessionId, u64)> =
                raw.conflicts.iter().copied().collect();
            let found: Vec<Envelope> = raw
                .events
                .into_iter()
                .filter(|(place, _)| missing(&place.0, &place.1) && !conflicts.contains(place))
                .map(|(_, env)| env)
                .collect();
            // A damaged frame whose whole copy was found is not lost.
            dropped.retain(|p: &Problem| {
                !found
                    .iter()
                    .any(|e| Some(e.seq) == p.seq && e.session == p.session)
            });
            from_files = found.len() as u64;
            records.extend(found.into_iter().map(|env| (None, env)));
        }
        let (sessions, duplicates) = group(records);
        dropped.extend(duplicates);
        // Sessions a copy left in part: not listed above, named here.
        for id in self.incomplete_copies().unwrap_or_default() {
            if self.inner.store.len(id).ok().flatten().is_some() {
                dropped.push(salvage::left_by_a_copy(id));
            }
        }
        let carried = self.carried_records().unwrap_or_else(|e| {
            dropped.push(whole_database_problem(e.to_string()));
            Vec::new()
        });
        let mut report = write_salvaged(
            dest,
            sessions,
            dropped,
            true,
            self.compressed(),
            &carried,
            progress,
        )?;
        report.from_files = from_files;
        Ok(report)
    }
}

/// Writes `bytes` to the file `path` whole or not at all, as the journal
/// writes its own exports: into a new temporary file beside it (made
/// exclusively, without following a link, under an unpredictable name),
/// synced, renamed over `path`, the folder synced. A kill leaves the old
/// file or the new one, never a mix. An existing file keeps its
/// permissions; a symbolic link at `path` is followed only if it is this
/// user's own; a special file (`/dev/stdout`, a pipe) is written directly
/// only if it is this user's or root's. So another user of the machine
/// cannot make the write land anywhere but `path`, even in `/tmp`.
///
/// # Errors
/// [`Error::UnsafePath`] for another user's link or special file at
/// `path`; [`Error::Io`] if it cannot be written, or its folder does not
/// exist (it is not made).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    // A folder that is not there is a mistake to name, not one to make.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return Err(Error::io(
            format!("writing {}", path.display()),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    atomic::replace_file(path, |f, tmp| atomic::write_bytes(f, tmp, bytes))
}
