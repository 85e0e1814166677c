//! Copying every session of one journal into another, whatever their
//! stores: sled to PostgreSQL and back, an exported `.ajournal` to either.

use crate::error::{Error, Result};
use crate::journal::Journal;
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
    /// with each session's latest snapshot. Each session is all or nothing:
    /// one whose copy fails is removed from `dest` again, and the error
    /// names it. `progress` gets the number of events written as they are.
    /// The sessions of an import that a crash interrupted are left out.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if a session already exists in `dest`
    /// (nothing is copied then); [`Error::Corruption`] for a damaged frame
    /// of the source; the destination's errors.
    pub fn copy_to(&self, dest: &Journal, mut progress: impl FnMut(u64)) -> Result<CopyReport> {
        let skip = self.unfinished_import()?;
        let mut ids = self.sessions()?;
        ids.retain(|id| !skip.contains(id));
        let there = dest.sessions()?;
        if let Some(id) = ids.iter().find(|id| there.contains(id)) {
            return Err(Error::InvalidInput(format!(
                "session {id} already exists in the destination; nothing was copied"
            )));
        }
        let mut report = CopyReport {
            sessions: Vec::with_capacity(ids.len()),
            events: 0,
        };
        for id in ids {
            match self.copy_session(dest, id, &mut progress) {
                Ok(n) => {
                    report.events += n;
                    report.sessions.push(id);
                }
                Err(e) => {
                    // All or nothing: what was written of it goes again.
                    let _ = dest.inner.write(|store| store.delete_session(id));
                    return Err(e);
                }
            }
        }
        dest.flush()?;
        Ok(report)
    }
}
