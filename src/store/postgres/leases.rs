//! Leases on the PostgreSQL store: acquired, renewed and released in
//! transactions that lock the lease row, timed by the server's clock, and
//! checked in the same transaction as every append made under one.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::{PostgresStore, db, is_unique_violation};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::lease::Lease;

pub(super) fn at(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros).single().unwrap_or_default()
}

/// The columns read of a lease row: owner, epoch, expiry (µs), live,
/// instance.
const COLUMNS: &str = "owner, epoch, (extract(epoch FROM expires_at) * 1000000)::bigint, \
     expires_at > now(), instance";

struct Row {
    owner: String,
    epoch: u64,
    expires_at: DateTime<Utc>,
    live: bool,
    /// `nil` for a row written before instances were recorded.
    instance: Uuid,
}

fn row(r: &postgres::Row) -> Row {
    Row {
        owner: r.get(0),
        epoch: r.get::<_, i64>(1) as u64,
        expires_at: at(r.get(2)),
        live: r.get(3),
        instance: r.get::<_, Option<Uuid>>(4).unwrap_or_else(Uuid::nil),
    }
}

fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PostgresStore {
    /// See [`acquire`].
    pub(super) fn take_lease(
        &self,
        session: SessionId,
        owner: &str,
        instance: Uuid,
        ttl: Duration,
    ) -> Result<Lease> {
        acquire(self, session, owner, instance, ttl)
    }

    /// See [`renew`].
    pub(super) fn extend_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        renew(self, lease, ttl)
    }

    /// See [`release`].
    pub(super) fn give_up_lease(&self, lease: &Lease) -> Result<()> {
        release(self, lease)
    }

    /// See [`current`].
    pub(super) fn live_lease(&self, session: SessionId) -> Result<Option<Lease>> {
        current(self, session)
    }
}

/// Takes the session's lease for `owner`'s `instance` for `ttl`: a new
/// lease (epoch 1), a renewal of that instance's own live lease (same
/// epoch), or the takeover of an expired one (epoch + 1). A live lease of
/// another instance, even one of the same name, is [`Error::LeaseHeld`].
fn acquire(
    store: &PostgresStore,
    session: SessionId,
    owner: &str,
    instance: Uuid,
    ttl: Duration,
) -> Result<Lease> {
    let what = || format!("taking the lease of session {session}");
    let mut c = store.client()?;
    let mut tx = c.transaction().map_err(|e| db(e, &what()))?;
    let found = tx
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM {} WHERE session = $1 FOR UPDATE",
                store.t("leases")
            ),
            &[&session.0],
        )
        .map_err(|e| db(e, &what()))?
        .map(|r| row(&r));
    let secs = seconds(ttl);
    let (sql, epoch): (String, i64) = match found {
        None => (
            format!(
                "INSERT INTO {} (session, owner, epoch, expires_at, instance)
                 VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5)",
                store.t("leases")
            ),
            1,
        ),
        Some(r) if r.live && (r.owner != owner || r.instance != instance) => {
            let owner = if r.owner == owner {
                format!("{} (another process started with that name)", r.owner)
            } else {
                r.owner
            };
            return Err(Error::LeaseHeld {
                session,
                owner,
                expires_at: r.expires_at,
            });
        }
        Some(r) => {
            let epoch = if r.live { r.epoch } else { r.epoch + 1 };
            (
                format!(
                    "UPDATE {} SET owner = $2, epoch = $3,
                         expires_at = now() + make_interval(secs => $4), instance = $5
                     WHERE session = $1",
                    store.t("leases")
                ),
                epoch as i64,
            )
        }
    };
    if let Err(e) = tx.execute(&sql, &[&session.0, &owner, &epoch, &secs, &instance]) {
        drop(tx);
        if is_unique_violation(&e) {
            // Another worker took it between our read and our insert.
            drop(c);
            return match current(store, session)? {
                Some(l) => Err(Error::LeaseHeld {
                    session,
                    owner: l.owner,
                    expires_at: l.expires_at,
                }),
                None => acquire(store, session, owner, instance, ttl),
            };
        }
        return Err(db(e, &what()));
    }
    let expiry = tx
        .query_one(
            &format!(
                "SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM {} WHERE session = $1",
                store.t("leases")
            ),
            &[&session.0],
        )
        .map_err(|e| db(e, &what()))?;
    tx.commit().map_err(|e| db(e, &what()))?;
    Ok(Lease {
        session,
        owner: owner.to_owned(),
        instance,
        epoch: epoch as u64,
        expires_at: at(expiry.get(0)),
    })
}

/// Extends `lease` by `ttl` from now, if it is still the session's.
fn renew(store: &PostgresStore, lease: &Lease, ttl: Duration) -> Result<Lease> {
    let session = lease.session;
    let mut c = store.client()?;
    let row = c
        .query_opt(
            &format!(
                "UPDATE {} SET expires_at = now() + make_interval(secs => $4)
                 WHERE session = $1 AND owner = $2 AND epoch = $3 AND instance = $5
                 RETURNING (extract(epoch FROM expires_at) * 1000000)::bigint",
                store.t("leases")
            ),
            &[
                &session.0,
                &lease.owner,
                &(lease.epoch as i64),
                &seconds(ttl),
                &lease.instance,
            ],
        )
        .map_err(|e| db(e, &format!("renewing the lease of session {session}")))?;
    match row {
        Some(r) => Ok(Lease {
            expires_at: at(r.get(0)),
            ..lease.clone()
        }),
        None => {
            drop(c);
            let holder = current_any(store, session)?.map(|l| (l.owner, l.epoch));
            Err(Error::Fenced {
                session,
                epoch: lease.epoch,
                holder,
            })
        }
    }
}

/// Gives `lease` up (nothing happens if it is no longer the session's).
fn release(store: &PostgresStore, lease: &Lease) -> Result<()> {
    let mut c = store.client()?;
    c.execute(
        &format!(
            "DELETE FROM {} WHERE session = $1 AND owner = $2 AND epoch = $3 AND instance = $4",
            store.t("leases")
        ),
        &[
            &lease.session.0,
            &lease.owner,
            &(lease.epoch as i64),
            &lease.instance,
        ],
    )
    .map_err(|e| {
        db(
            e,
            &format!("releasing the lease of session {}", lease.session),
        )
    })?;
    Ok(())
}

/// The session's live lease (by the server's clock), if any.
fn current(store: &PostgresStore, session: SessionId) -> Result<Option<Lease>> {
    read(store, session, "AND expires_at > now()")
}

/// The session's lease row, live or not.
fn current_any(store: &PostgresStore, session: SessionId) -> Result<Option<Lease>> {
    read(store, session, "")
}

fn read(store: &PostgresStore, session: SessionId, condition: &str) -> Result<Option<Lease>> {
    let mut c = store.client()?;
    let found = c
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM {} WHERE session = $1 {condition}",
                store.t("leases")
            ),
            &[&session.0],
        )
        .map_err(|e| db(e, &format!("reading the lease of session {session}")))?;
    Ok(found.map(|r| {
        let r = row(&r);
        Lease {
            session,
            owner: r.owner,
            instance: r.instance,
            epoch: r.epoch,
            expires_at: r.expires_at,
        }
    }))
}
