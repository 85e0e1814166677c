//! Sessions out to and in from an exported journal file (`.ajournal`),
//! each whole or not at all: an export is written under a temporary name
//! and renamed over its target; an import of several sessions is recorded
//! in an intent file first, and rolled back if it does not finish.

use std::path::Path;

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format::TailDamage;
use crate::format::{self, ajournal as file};
use crate::journal::Journal;
use crate::journal::intent;
use crate::model::SessionId;
use crate::store::atomic;
use crate::store::{Durability, Visit};

/// An import appends a file's events in chunks of at most this many
/// events...
const IMPORT_CHUNK_EVENTS: usize = 4096;
/// ...or of this many bytes (one event may be larger): its memory.
const IMPORT_CHUNK_BYTES: usize = 8 << 20;

/// What [`Journal::export_journal_mapped`] passes every event through.
type EventMap<'a> = dyn FnMut(&mut crate::event::Event) -> Result<()> + 'a;

impl Journal {
    /// Writes the given sessions (all if empty) to an exported journal file,
    /// verifying every frame on the way. Returns the number of records.
    ///
    /// The file is written whole or not at all: under a temporary name
    /// beside `path`, synced, then renamed over `path`. An export that fails
    /// or is killed leaves a file that was at `path` unchanged (a temporary
    /// left by a kill is removed by the next export to `path`). All
    /// sessions (`sessions` empty) leaves out those of an import that a
    /// crash interrupted: the next import rolls them back.
    ///
    /// # Errors
    /// [`Error::Corruption`] if a frame is damaged: a damaged journal is not
    /// exported as if it were sound (use `salvage`);
    /// [`Error::SessionNotFound`]; [`Error::Io`].
    pub fn export_journal(
        &self,
        sessions: &[SessionId],
        path: impl AsRef<Path>,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.export_journal_inner(sessions, path.as_ref(), progress, None)
    }

    /// [`export_journal`](Self::export_journal), passing every event
    /// through `map` on its way (to redact secrets, say): each event is
    /// decoded and checked as there, changed by `map`, and encoded into a
    /// new frame (same session, seq and time). What `map` does not change
    /// is written as it was. An error of `map` ends the export, and nothing
    /// is written.
    ///
    /// # Errors
    /// As [`export_journal`](Self::export_journal); [`Error::TooLarge`] if
    /// `map` made an event larger than the journal's limit.
    pub fn export_journal_mapped(
        &self,
        sessions: &[SessionId],
        path: impl AsRef<Path>,
        progress: impl FnMut(u64),
        mut map: impl FnMut(&mut crate::event::Event) -> Result<()>,
    ) -> Result<u64> {
        self.export_journal_inner(sessions, path.as_ref(), progress, Some(&mut map))
    }

    fn export_journal_inner(
        &self,
        sessions: &[SessionId],
        path: &Path,
        mut progress: impl FnMut(u64),
        mut map: Option<&mut EventMap<'_>>,
    ) -> Result<u64> {
        let ids = if sessions.is_empty() {
            let skip = self.unfinished_import()?;
            let mut ids = self.sessions()?;
            ids.retain(|id| !skip.contains(id));
            ids
        } else {
            sessions.to_vec()
        };
        let mut lens = Vec::with_capacity(ids.len());
        for id in ids {
            let len = self
                .inner
                .store
                .len(id)?
                .ok_or(Error::SessionNotFound(id))?;
            lens.push((id, len));
        }
        let limit = self.inner.config.max_event_bytes;
        atomic::replace_file(path, |f, tmp| {
            let mut w = file::FileWriter::new(f, tmp)?;
            for &(id, len) in &lens {
                let mut expect = 0u64;
                self.inner.store.scan(id, 0, len, &mut |seq, frame| {
                    let mut env: Envelope = format::decode_frame(frame, limit)
                        .map_err(|e| Error::corruption(Some(id), Some(seq), None, e.to_string()))?;
                    if env.seq != seq || env.session != id || seq != expect {
                        return Err(Error::corruption(
                            Some(id),
                            Some(seq),
                            None,
                            "record out of place",
                        ));
                    }
                    expect += 1;
                    match map.as_mut() {
                        Some(map) => {
                            map(&mut env.event)?;
                            w.write_frame(&format::encode_frame(&env, limit)?)?;
                        }
                        None => w.write_frame(frame)?,
                    }
                    progress(1);
                    Ok(Visit::Continue(()))
                })?;
            }
            w.finish()
        })
    }

    /// Imports every session of an exported journal file, keeping their ids.
    /// Returns the ids, and the damaged tail cut off the file, if any.
    ///
    /// All or nothing: into a database, the sessions are first named in the
    /// intent file `agent-journal.importing` (`docs/format.md`), then
    /// written, then made durable (a `Synced` flush), and only then is the
    /// intent file removed. An import interrupted by a crash leaves the
    /// intent file, and the next import rolls back (deletes) the sessions it
    /// names before anything else; one that fails with an error rolls back
    /// what it wrote itself.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the file is damaged before its end (nothing
    /// is written then); [`Error::InvalidInput`] if a session already exists
    /// here (nothing of the file is written).
    pub fn import_journal(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<(Vec<SessionId>, Option<TailDamage>)> {
        self.import_journal_with(path, |_, _| {})
    }

    /// [`import_journal`](Self::import_journal), calling
    /// `progress(written, total)` as it writes the file's events.
    ///
    /// # Errors
    /// As [`import_journal`](Self::import_journal).
    pub fn import_journal_with(
        &self,
        path: impl AsRef<Path>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<(Vec<SessionId>, Option<TailDamage>)> {
        // A write path: refused at once by a poisoned journal.
        self.inner.poison.check()?;
        let _one_at_a_time = intent::one_import_at_a_time();
        self.roll_back_interrupted_import()?;
        let path = path.as_ref();
        let (f, index) = file::read_file(path, self.inner.config.max_event_bytes)?;
        let tail = index.tail.clone();
        let ids: Vec<SessionId> = index.streams.keys().copied().collect();
        let total: u64 = index.streams.values().map(|f| f.len() as u64).sum();
        let source = crate::store::file::FileStore::new(f, path.to_owned(), index);
        for id in &ids {
            if self.inner.store.len(*id)?.is_some() {
                return Err(Error::InvalidInput(format!(
                    "session {id} already exists in this journal; nothing was imported"
                )));
            }
        }
        if ids.is_empty() {
            return Ok((ids, tail));
        }
        let intent = intent::intent_path(self);
        if let Some(p) = &intent {
            intent::write(p, &ids)?;
        }
        let mut written = Vec::with_capacity(ids.len());
        let mut done = 0u64;
        progress(0, total);
        let result = self.inner.write(|store| {
            for &id in &ids {
                // Marked before the append: a failed append may still have
                // written something.
                written.push(id);
                // In chunks read from the file (memory: one chunk), for the
                // progress too: the intent file makes the whole import all
                // or nothing all the same.
                let mut at = 0u64;
                let mut chunk: Vec<Vec<u8>> = Vec::new();
                let mut bytes = 0usize;
                let mut append = |chunk: &mut Vec<Vec<u8>>, bytes: &mut usize| -> Result<()> {
                    store.append(id, at, chunk)?;
                    at += chunk.len() as u64;
                    done += chunk.len() as u64;
                    progress(done, total);
                    chunk.clear();
                    *bytes = 0;
                    Ok(())
                };
                crate::store::Store::scan(&source, id, 0, u64::MAX, &mut |_, frame| {
                    chunk.push(frame.to_vec());
                    bytes += frame.len();
                    if chunk.len() >= IMPORT_CHUNK_EVENTS || bytes >= IMPORT_CHUNK_BYTES {
                        append(&mut chunk, &mut bytes)?;
                    }
                    Ok(Visit::Continue(()))
                })?;
                if !chunk.is_empty() {
                    append(&mut chunk, &mut bytes)?;
                }
            }
            // Durable before the intent goes, whatever the configuration.
            store.flush(Durability::Synced)
        });
        if let Err(e) = result {
            // Undo what was written; if that fails too (a poisoned journal
            // refuses it), the intent file stays and the next open rolls it
            // back.
            for &id in &written {
                self.forget(id);
            }
            if self.remove_imported(&written).is_ok()
                && let Some(p) = &intent
            {
                let _ = intent::remove(p);
            }
            return Err(e);
        }
        if let Some(p) = &intent {
            intent::remove(p)?;
        }
        Ok((ids, tail))
    }
}
