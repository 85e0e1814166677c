//! Leases: which worker drives a session on a shared store, and the epoch
//! that fences out a worker whose lease was taken over.

use chrono::{DateTime, Utc};

use crate::model::SessionId;

/// A worker's right to append to a session until `expires_at`, on a store
/// shared between processes (PostgreSQL). Each takeover of an expired
/// lease increments the `epoch`; an append made under a lease carries it,
/// and the store refuses it ([`Error::Fenced`](crate::Error::Fenced)) once
/// another worker holds a later epoch, in the same transaction as the
/// insert, so a worker that wakes up late can never write after its
/// successor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The session.
    pub session: SessionId,
    /// Who holds it (a worker's name, chosen by the application).
    pub owner: String,
    /// Which holder of that name: made new each time a handle takes the
    /// lease (not when it renews it). A lease names a worker instance, not
    /// a name: a second process started with the same `owner` is another
    /// instance, and is refused
    /// ([`Error::LeaseHeld`](crate::Error::LeaseHeld)) while this lease is
    /// live, before it can run anything.
    pub instance: uuid::Uuid,
    /// Increments at each takeover; starts at 1.
    pub epoch: u64,
    /// When it lapses unless renewed (the database server's clock).
    pub expires_at: DateTime<Utc>,
}
