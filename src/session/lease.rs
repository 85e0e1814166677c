//! Sessions on a shared store (PostgreSQL): leases (one worker drives a
//! session at a time, and a worker whose lease was taken over is fenced
//! out), and following the events other processes append.

use std::time::Duration;

use super::{Session, replay};
use crate::error::Result;
use crate::journal::Journal;
use crate::model::SessionId;
use crate::store::Lease;

impl Session {
    /// Takes the session's lease for `owner` (the worker's name, shown to
    /// people) for `ttl`: a new lease, a renewal of the one this handle
    /// holds, or the takeover of an expired one (its epoch + 1). From then
    /// on every append of this handle (and its clones) is made under the
    /// lease, checked in the same transaction as the insert. The handle
    /// then catches up with events the previous holder appended after it
    /// was loaded.
    ///
    /// A lease is held by a worker *instance* ([`Lease::instance`]), not a
    /// name: a handle that holds none takes it as a new instance, so a
    /// second process started with the same `owner` while the first one's
    /// lease is live is refused here, before it runs anything, rather than
    /// failing later with a conflict after its tool ran.
    ///
    /// # Errors
    /// [`Error::LeaseHeld`](crate::Error::LeaseHeld) while another
    /// instance's lease is live, whatever its name;
    /// [`Error::Unsupported`](crate::Error::Unsupported) on a store only one
    /// process opens (sled, memory), which needs none.
    pub fn acquire_lease(&self, owner: &str, ttl: Duration) -> Result<Lease> {
        let store = self.journal.inner.store.clone();
        let instance = match self.core().lease.as_ref() {
            Some(held) if held.owner == owner => held.instance,
            _ => uuid::Uuid::now_v7(),
        };
        let lease = store.acquire_lease(self.id(), owner, instance, ttl)?;
        self.core().lease = Some(lease.clone());
        self.refresh()?;
        Ok(lease)
    }

    /// Extends the lease this handle holds by `ttl` from now.
    ///
    /// # Errors
    /// [`Error::Fenced`](crate::Error::Fenced) if another worker took it
    /// over: the handle keeps the stale lease, so that its every later
    /// append is refused as fenced too (never made without a lease);
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) if it holds none.
    pub fn renew_lease(&self, ttl: Duration) -> Result<Lease> {
        let held = self.held()?;
        let renewed = self.journal.inner.store.renew_lease(&held, ttl)?;
        self.core().lease = Some(renewed.clone());
        Ok(renewed)
    }

    /// Gives up the lease this handle holds (if it still is the session's);
    /// later appends are made under none.
    pub fn release_lease(&self) -> Result<()> {
        let held = self.core().lease.take();
        match held {
            Some(l) => self.journal.inner.store.release_lease(&l),
            None => Ok(()),
        }
    }

    /// The lease this handle's appends are made under, if any.
    pub fn lease(&self) -> Option<Lease> {
        self.core().lease.clone()
    }

    /// Catches up with the events other processes appended to the session
    /// since this handle last saw its stream (a shared store); returns the
    /// new head. Cheap when there is nothing new.
    pub fn refresh(&self) -> Result<u64> {
        let offset = self.offset();
        let len = self.journal.inner.store.len(self.id())?.unwrap_or(0);
        let mut core = self.core();
        if len + offset > core.head {
            let from = core.head - offset;
            let state = std::sync::Arc::make_mut(&mut core.state);
            let (head, _) = replay(&self.journal, self.id(), from, len, state, &mut 0, offset)?;
            core.head = head + offset;
        }
        Ok(core.head)
    }

    fn held(&self) -> Result<Lease> {
        self.core().lease.clone().ok_or_else(|| {
            crate::error::Error::InvalidInput(format!("session {} holds no lease", self.id()))
        })
    }
}

impl Journal {
    /// Waits until session `id` holds more than `len` events or `timeout`
    /// passed; returns its length then (a fork's counts its parent's
    /// prefix, as its seqs do). On PostgreSQL an append in any process
    /// wakes the wait at once (`LISTEN`/`NOTIFY`); elsewhere it polls.
    /// Follow a session with it and [`Session::refresh`].
    pub fn wait_for_events(&self, id: SessionId, len: u64, timeout: Duration) -> Result<u64> {
        let store = &self.inner.store;
        // The store counts a fork's own events only.
        let offset = crate::session::base_of(self, id)?.map_or(0, |b| b.offset());
        let now = store.len(id)?.unwrap_or(0) + offset;
        if now > len {
            return Ok(now);
        }
        store.wait_for_append(id, len.saturating_sub(offset), timeout)?;
        Ok(store.len(id)?.unwrap_or(0) + offset)
    }

    /// The live lease of session `id`, whoever holds it (`None` on a store
    /// without leases).
    pub fn lease_of(&self, id: SessionId) -> Result<Option<Lease>> {
        self.inner.store.lease(id)
    }
}
