//! Copying every session of one journal into another, whatever their
//! stores: sled to PostgreSQL and back, an exported `.ajournal` to either.

use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::journal::records::COPYING;
use crate::model::SessionId;

/// What [`Journal::copy_to`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyReport {
    /// The sessions copied, in id order.
    pub sessions: Vec<SessionId>,
    /// The events copied, in all.
    pub events: u64,
}

impl Journal {
    /// Copies every session of this journal into `dest`, each frame
    /// verified (checksum, session and seq in place) before it is written,
    /// with each session's latest snapshot. `progress` gets the number of
    /// events written as they are. The sessions of an import that a crash
    /// interrupted, and those a copy into this journal left in part, are
    /// left out. The records kept beside the sessions
    /// ([`Journal::record`]: the demo's sandbox registry) are not copied:
    /// they belong to the journal, not to its sessions.
    ///
    /// **All or nothing per session, on every store.** Before it writes the
    /// first event, the copy records in `dest`'s record area, durably, the
    /// sessions it is about to write (a copy intent); it removes that record
    /// only once every event copied is durable. Until then `dest` does not
    /// show those sessions as sessions: [`Journal::sessions`] leaves them
    /// out, [`Journal::session`] refuses them
    /// ([`Error::IncompleteSession`]), [`Journal::verify`] reports them
    /// ([`ProblemKind::Incomplete`](crate::maintenance::ProblemKind::Incomplete), CLI exit
    /// 3). So a copy killed at any moment leaves each session absent,
    /// hidden, or whole; and the next copy into `dest` replaces each session
    /// an unfinished copy left (deletes it, then copies it whole). A session
    /// whose copy fails is removed from `dest` again and the error names it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if a session already exists whole in `dest`
    /// (nothing is copied then); [`Error::Corruption`] for a damaged frame
    /// of the source; [`Error::Unsupported`] if `dest` keeps no records (a
    /// custom [`Store`](crate::store::Store) without them); the destination's
    /// errors.
    pub fn copy_to(&self, dest: &Journal, mut progress: impl FnMut(u64)) -> Result<CopyReport> {
        let skip = self.unfinished_import()?;
        let mut ids = self.sessions()?;
        ids.retain(|id| !skip.contains(id));
        let partial = dest.incomplete_copies()?;
        let there = dest.inner.store.sessions()?;
        if let Some(id) = ids
            .iter()
            .find(|id| there.contains(id) && !partial.contains(id))
        {
            return Err(Error::InvalidInput(format!(
                "session {id} already exists in the destination; nothing was copied"
            )));
        }
        let intent = |done: bool| -> Vec<(String, String, Option<Vec<u8>>)> {
            ids.iter()
                .map(|id| {
                    let value = (!done).then(Vec::new);
                    (COPYING.to_owned(), id.to_string(), value)
                })
                .collect()
        };
        // Durable before the first event is written.
        dest.write_records(&intent(false))?;
        // What an earlier copy left of these sessions goes first.
        for id in ids.iter().filter(|id| there.contains(id)) {
            dest.forget(*id);
            dest.inner.write(|store| store.delete_session(*id))?;
        }
        let mut report = CopyReport {
            sessions: Vec::with_capacity(ids.len()),
            events: 0,
        };
        for &id in &ids {
            match self.copy_session_again_on_conflict(dest, id, &mut progress) {
                Ok(n) => {
                    report.events += n;
                    report.sessions.push(id);
                }
                Err(e) => {
                    // All or nothing: what was written of it goes again.
                    // The sessions copied before it stay, once durable; if
                    // anything here fails, the intent stays and the next
                    // copy replaces them all.
                    let _ = dest
                        .inner
                        .write(|store| store.delete_session(id))
                        .and_then(|()| dest.flush())
                        .and_then(|()| dest.write_records(&intent(true)));
                    return Err(e);
                }
            }
        }
        // Every event durable, then the intent gone.
        dest.flush()?;
        dest.write_records(&intent(true))?;
        Ok(report)
    }

    /// [`Journal::copy_session`], started again (the session deleted from
    /// `dest` first) when an append meets a stream it did not write: on a
    /// database server, the last append of a copy killed a moment before
    /// may still be running in the server when the next copy starts, and
    /// commit after it deleted what that copy left. It lands only where it
    /// finds the head it expected, so this copy's next append then
    /// conflicts (nothing written) and the session is copied again from
    /// zero; a server ends such a statement soon after its client died, so
    /// three tries, a little apart, are plenty.
    fn copy_session_again_on_conflict(
        &self,
        dest: &Journal,
        id: SessionId,
        progress: &mut impl FnMut(u64),
    ) -> Result<u64> {
        let mut tries = 0u64;
        loop {
            match self.copy_session(dest, id, progress) {
                Err(Error::Conflict { .. }) if tries < 3 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(100 * tries));
                    dest.forget(id);
                    dest.inner.write(|store| store.delete_session(id))?;
                }
                other => return other,
            }
        }
    }
}
