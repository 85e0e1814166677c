//! The journal's record area: a few small durable key-value records kept
//! beside the sessions, never in their events (the store keeps them:
//! `store/records.rs`), and the copy intents kept there.
//!
//! **Copy intents.** [`Journal::copy_to`](crate::Journal::copy_to) puts a
//! record in namespace [`COPYING`] for every session it is about to write
//! into a journal, durably, before the first event; it removes them once
//! the last event of the copy is durable. A session named by such a record
//! is one a copy may have left in part: [`Journal::sessions`] leaves it out,
//! [`Journal::session`](crate::Journal::session) refuses it
//! ([`Error::IncompleteSession`]), `verify` reports it, and the next copy
//! replaces it.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::model::SessionId;
use crate::store::records::RecordWrite;

/// The namespaces of the crate's own records start with this; the public
/// writes refuse them.
pub(crate) const RESERVED: &str = "agent_journal.";

/// The namespace of copy intents: key = a session id, value = empty.
pub(crate) const COPYING: &str = "agent_journal.copying";

fn check_namespace(namespace: &str) -> Result<()> {
    if namespace.starts_with(RESERVED) {
        return Err(Error::InvalidInput(format!(
            "record namespace {namespace:?}: namespaces starting with {RESERVED:?} are the \
             journal's own"
        )));
    }
    Ok(())
}

impl Journal {
    /// The value of record `key` in `namespace` of the journal's record
    /// area, if there is one.
    ///
    /// The record area holds a few small records beside the sessions: what
    /// an application keeps about a journal that must not come from the
    /// sessions' events (the CLI's `demo` keeps there the folder each
    /// session's tools may use). Nothing a session appends, no import and no
    /// copy of sessions between journals writes it; only
    /// [`Journal::put_record`] and [`Journal::remove_record`] do, and
    /// `compact`/`salvage` carry it into the new database. A sled database
    /// keeps it in the file `records` of its folder, a PostgreSQL journal in
    /// its table `records`, a memory journal in memory; an exported file has
    /// none.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the store's record area is unreadable; the
    /// store's errors.
    pub fn record(&self, namespace: &str, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .inner
            .store
            .records()?
            .into_iter()
            .find(|(n, k, _)| n == namespace && k == key)
            .map(|(_, _, v)| v))
    }

    /// Every record of `namespace`, as `(key, value)` in key order. See
    /// [`Journal::record`].
    ///
    /// # Errors
    /// As [`Journal::record`].
    pub fn records(&self, namespace: &str) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(self
            .inner
            .store
            .records()?
            .into_iter()
            .filter(|(n, _, _)| n == namespace)
            .map(|(_, k, v)| (k, v))
            .collect())
    }

    /// Puts record `key` of `namespace` (replacing its value), durably: it
    /// survives a crash and power loss as soon as this returns, whatever the
    /// journal's [`Durability`](crate::Durability). Meant for a few small
    /// records (each write of a sled database's record area rewrites it
    /// whole): a namespace or key holds at most 1,024 bytes, a value at most
    /// 1 MiB. See [`Journal::record`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] past those limits, or for a namespace
    /// starting with `agent_journal.` (the journal's own);
    /// [`Error::Unsupported`] for an exported file or a database read
    /// through another process; the store's errors (a failed write poisons
    /// the journal, as a failed append does).
    pub fn put_record(&self, namespace: &str, key: &str, value: &[u8]) -> Result<()> {
        check_namespace(namespace)?;
        self.write_records(&[(namespace.into(), key.into(), Some(value.to_vec()))])
    }

    /// Removes record `key` of `namespace` (nothing to do if it is not
    /// there), durably. See [`Journal::put_record`].
    ///
    /// # Errors
    /// As [`Journal::put_record`].
    pub fn remove_record(&self, namespace: &str, key: &str) -> Result<()> {
        check_namespace(namespace)?;
        self.write_records(&[(namespace.into(), key.into(), None)])
    }

    /// Applies `writes` to the record area, all or none, durably (any
    /// namespace).
    pub(crate) fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        self.inner.write(|store| store.write_records(writes))
    }

    /// The sessions named by an unfinished copy into this journal (they
    /// may hold only part of their events). Keys that are not session ids
    /// are ignored.
    pub(crate) fn incomplete_copies(&self) -> Result<BTreeSet<SessionId>> {
        Ok(self
            .inner
            .store
            .records()?
            .into_iter()
            .filter(|(n, _, _)| n == COPYING)
            .filter_map(|(_, k, _)| k.parse().ok())
            .collect())
    }

    /// The records `compact` and `salvage` carry into the new database:
    /// all but the journal's own (copy intents name sessions they leave
    /// out).
    pub(crate) fn carried_records(&self) -> Result<Vec<RecordWrite>> {
        Ok(self
            .inner
            .store
            .records()?
            .into_iter()
            .filter(|(n, _, _)| !n.starts_with(RESERVED))
            .map(|(n, k, v)| (n, k, Some(v)))
            .collect())
    }
}
