//! What an open recovers: the write-ahead log replayed into sled, and the
//! acknowledged events sled no longer holds, found against the acknowledgement log.

use std::collections::HashMap;

use super::SledStore;
use super::fault::storage;
use crate::error::Result;
use crate::model::SessionId;
use crate::store::sled::acks::Loss;
use crate::store::sled::frame_files;
use crate::store::sled::keys::key;
use crate::store::sled::snapfiles::INLINE_MAX;
use crate::store::sled::wal;

impl SledStore {
    /// Inserts the frames of the log that sled lost, then empties the log.
    pub(super) fn replay_wal(&self, records: Vec<wal::Record>) -> Result<()> {
        // Per session, the seq after the last event sled holds, advanced by
        // each record replayed; `None` once a record is missing. A record
        // that starts past it follows one the log lost (power loss can keep
        // a later block of the log and not an earlier one): replaying it
        // would leave a gap, so the stream's replay ends there, as at a
        // torn tail.
        let mut next: HashMap<SessionId, Option<u64>> = HashMap::new();
        for r in records {
            let head = match next.get(&r.session) {
                Some(head) => *head,
                None => Some(self.read_head(r.session)?),
            };
            let Some(head) = head.filter(|h| r.first_seq <= *h) else {
                next.insert(r.session, None);
                continue;
            };
            let count = r.frames.len() as u64;
            for (i, frame) in r.frames.into_iter().enumerate() {
                let seq = r.first_seq.saturating_add(i as u64);
                let k = key(r.session, seq);
                let held = self
                    .events
                    .get(k)
                    .map_err(|e| storage(e, "replaying the write-ahead log"))?;
                // A pointer to a segment that lost or damaged the frame is
                // no frame. An event inside a run or a block is held (a
                // block is sealed from runs sled already had, and its bytes
                // were synced before its pointer went in).
                let present = match held {
                    Some(v) => {
                        !frame_files::is_pointer(&v)
                            || self
                                .frame_files
                                .read(r.session, seq, &v)
                                .is_ok_and(|f| f == frame)
                    }
                    None => self.covering(r.session, seq)?.is_some(),
                };
                if !present {
                    self.applier.touch(r.session);
                    let value = if frame.len() > INLINE_MAX {
                        self.frame_files.write(&[&frame])?.remove(0)
                    } else {
                        frame
                    };
                    self.events
                        .insert(k, value)
                        .map_err(|e| storage(e, "replaying the write-ahead log"))?;
                }
            }
            next.insert(r.session, Some(head.max(r.first_seq.saturating_add(count))));
        }
        self.wal.roll_over(&|| self.sled_durable())
    }

    /// Finds the acknowledged events sled no longer holds (after the log
    /// gave back what it could): compares every recorded head with sled's.
    pub(super) fn find_losses(&self) -> Result<()> {
        let mut losses = HashMap::new();
        for (session, acknowledged) in self.acked.acknowledged() {
            if acknowledged == 0 {
                continue;
            }
            let held = self.read_head(session)?;
            if held < acknowledged {
                losses.insert(
                    session,
                    Loss {
                        session,
                        held,
                        acknowledged,
                    },
                );
            }
        }
        *self.losses.lock().unwrap_or_else(|p| p.into_inner()) = losses;
        Ok(())
    }

    pub(super) fn loss(&self, session: SessionId) -> Option<Loss> {
        self.losses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&session)
            .copied()
    }
}
