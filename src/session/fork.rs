//! Forks that share their parent's prefix instead of copying it.
//!
//! A fork of session P after event `at` is a stream whose first stored
//! frame (seq 0 in the store) is `ForkPoint { parent: P, at }`, followed by the
//! fork's own events. Read as a session, its events `0..=at` are P's own
//! (same seqs, times and session id: nothing is copied), the marker is
//! event `at + 1`, and the fork's own events follow: stored seq `s` is seq
//! `s + at + 1` (the offset). Making a fork writes one frame, whatever the
//! length of the prefix.
//!
//! A fork's state folds P's state at `at` (itself bounded by P's
//! snapshots), then the marker and its own events; its snapshots are kept
//! under their (offset) seqs. P cannot be deleted while a fork refers to it.

use crate::error::{Error, Result};
use crate::event::{Envelope, Event};
use crate::format;
use crate::journal::Journal;
use crate::model::{SessionId, now};
use crate::store::Visit;

/// Where a fork's stream starts: its parent and the last seq of the
/// parent's it includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Base {
    pub(crate) parent: SessionId,
    pub(crate) at: u64,
}

impl Base {
    /// The seq of the fork's stored seq 0 (its marker).
    pub(crate) fn offset(self) -> u64 {
        self.at + 1
    }
}

/// The base of session `id` when it is a fork that refers to its parent
/// (its stored seq 0 is `ForkPoint`); `None` for any other stream.
pub(crate) fn base_of(journal: &Journal, id: SessionId) -> Result<Option<Base>> {
    let limit = journal.inner.config.max_event_bytes;
    let mut base = None;
    // A first event the store cannot hand over (its block damaged) is no
    // fork point: whoever reads the stream meets the damage at seq 0.
    let scanned = journal.scan_frames(id, 0, 1, &mut |seq, frame| {
        // A damaged first frame is reported by whoever reads the stream.
        if let Ok(env) = format::decode_frame::<Envelope>(frame, limit)
            && seq == 0
            && env.seq == 0
            && env.session == id
            && let Event::ForkPoint { parent, at } = env.event
        {
            base = Some(Base { parent, at });
        }
        Ok(Visit::Break(()))
    });
    match scanned {
        Err(e) if e.is_corruption() => Ok(None),
        other => other.map(|()| base),
    }
}

impl Journal {
    /// Makes a fork of session `parent` after its event `at`, and returns
    /// its id: one frame is written (the `ForkPoint` marker), however long the
    /// prefix, which the fork reads from its parent. Open it with
    /// [`Journal::session`]; [`Session::fork`](crate::Session::fork) does
    /// both.
    ///
    /// # Errors
    /// [`Error::SessionNotFound`]; [`Error::SeqOutOfRange`] if `at` is past
    /// the parent's head.
    pub fn fork_session(&self, parent: SessionId, at: u64) -> Result<SessionId> {
        let head = self
            .logical_len(parent)?
            .ok_or(Error::SessionNotFound(parent))?;
        if at >= head {
            return Err(Error::SeqOutOfRange {
                session: parent,
                seq: at,
                len: head,
            });
        }
        let id = SessionId::new();
        let marker = Envelope {
            session: id,
            seq: 0,
            at: now(),
            event: Event::ForkPoint { parent, at },
        };
        let frame = format::encode_frame(&marker, self.inner.config.max_event_bytes)?;
        self.inner.write(|store| store.append(id, 0, &[frame]))?;
        self.inner.flush_configured()?;
        Ok(id)
    }

    /// The number of events of session `id` as read (a fork's prefix
    /// included), without opening it.
    pub(crate) fn logical_len(&self, id: SessionId) -> Result<Option<u64>> {
        let Some(len) = self.inner.store.len(id)? else {
            return Ok(None);
        };
        Ok(Some(match base_of(self, id)? {
            Some(b) => len + b.offset(),
            None => len,
        }))
    }

    /// The sessions a self-contained copy of `id` needs: its ancestors
    /// (the parents whose prefixes it reads, oldest first), then `id`.
    ///
    /// # Errors
    /// [`Error::Corruption`] when a parent is missing or the chain loops.
    pub fn lineage(&self, id: SessionId) -> Result<Vec<SessionId>> {
        let mut chain = vec![id];
        let mut cur = id;
        while let Some(b) = base_of(self, cur)? {
            if chain.contains(&b.parent) || self.inner.store.len(b.parent)?.is_none() {
                return Err(missing_parent(cur, b.parent));
            }
            chain.push(b.parent);
            cur = b.parent;
        }
        chain.reverse();
        Ok(chain)
    }

    /// The forks that read `id`'s prefix (those made by this version).
    pub fn forks_of(&self, id: SessionId) -> Result<Vec<(SessionId, u64)>> {
        let mut out = Vec::new();
        for other in self.sessions()? {
            if let Some(b) = base_of(self, other)?.filter(|b| b.parent == id) {
                out.push((other, b.at));
            }
        }
        Ok(out)
    }
}

/// The error of a fork whose parent is gone.
pub(crate) fn missing_parent(fork: SessionId, parent: SessionId) -> Error {
    Error::corruption(
        Some(fork),
        Some(0),
        None,
        format!("this fork reads its first events from session {parent}, which is missing"),
    )
}
