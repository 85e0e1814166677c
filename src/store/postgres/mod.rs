//! The PostgreSQL store: the same frames as sled, in tables of one schema,
//! for sessions read and resumed from several machines.
//!
//! ```sql
//! meta      (key text primary key, value text)          -- schema_version
//! sessions  (session uuid primary key, head bigint)     -- next seq
//! events    (session uuid, seq bigint, frame bytea, primary key (session, seq))
//! snapshots (session uuid primary key, seq bigint, frame bytea)
//! leases    (session uuid primary key, owner text, epoch bigint, expires_at timestamptz,
//!            instance uuid)
//! records   (namespace text, key text, value bytea, primary key (namespace, key))
//! ```
//!
//! `records` is the record area (`store/records.rs`): written in its own
//! transactions, each committed with `synchronous_commit = on` whatever the
//! journal's durability.
//!
//! An append is one transaction: it locks the session's row, checks the
//! head it expects (a mismatch is `Conflict`, never an overwrite) and, under
//! a lease, the lease's epoch, inserts the frames and moves the head. With
//! `Durability::Synced` (and `Flushed`) it commits with `synchronous_commit
//! = on`: durable when it returns; concurrent appenders on their own
//! connections share the server's WAL flushes (PostgreSQL's group commit).
//! `Buffered` commits with `synchronous_commit = off` (a server crash may
//! lose the last commits, never half of one); `flush` then forces the WAL
//! out. A lost connection poisons nothing: the failed append is reported
//! ([`Error::Database`]) and the connection dropped; a retry with the same
//! expected head is safe (`Conflict` if the first attempt did commit).

mod append;
mod leases;
pub(crate) mod url;

use std::sync::{Mutex, MutexGuard};

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, NoTls};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::lease::Lease;
use crate::store::{Durability, SharedBytes, Store, Visit};

/// The version of the tables this build writes and reads.
const SCHEMA_VERSION: i64 = 1;

/// Connections kept open for reuse.
const POOL: usize = 16;

/// A PostgreSQL error as the crate's, with what was being done.
pub(crate) fn db(e: postgres::Error, what: &str) -> Error {
    Error::Database(format!("{what}: {}", describe(&e)))
}

fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} ({})", d.message(), d.code().code()),
        None => e.to_string(),
    }
}

fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// The journal's tables in one schema of one database.
pub(crate) struct PostgresStore {
    conn: String,
    /// The URL without password, for messages.
    shown: String,
    schema: String,
    synced: bool,
    pool: Mutex<Vec<Client>>,
    /// The connection that `LISTEN`s for appends, made at the first wait.
    listener: Mutex<Option<Client>>,
    /// The sessions this process follows, with when it last said so.
    followed: Mutex<std::collections::HashMap<SessionId, std::time::Instant>>,
}

/// A connection taken from the pool; back to it when dropped, unless it
/// broke.
struct Conn<'a> {
    store: &'a PostgresStore,
    client: Option<Client>,
}

impl std::ops::Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("present until drop")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.client.take()
            && !c.is_closed()
        {
            let mut pool = self.store.pool();
            if pool.len() < POOL {
                pool.push(c);
            }
        }
    }
}

impl PostgresStore {
    /// Connects to `url` (see `url.rs`), creates or checks the tables.
    ///
    /// # Errors
    /// [`Error::Database`] if the server cannot be reached or refuses;
    /// [`Error::Unsupported`] for tables of a newer schema version;
    /// [`Error::InvalidInput`] for a bad `schema` parameter.
    pub(crate) fn open(url: &str, durability: Durability, create: bool) -> Result<Self> {
        let (conn, schema) = url::split(url)?;
        let store = Self {
            conn,
            shown: url::redacted(url),
            schema,
            synced: durability != Durability::Buffered,
            pool: Mutex::new(Vec::new()),
            listener: Mutex::new(None),
            followed: Mutex::new(std::collections::HashMap::new()),
        };
        store.migrate(create)?;
        Ok(store)
    }

    fn pool(&self) -> MutexGuard<'_, Vec<Client>> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn client(&self) -> Result<Conn<'_>> {
        let pooled = self.pool().pop();
        let client = match pooled {
            Some(c) => c,
            None => {
                let mut c = Client::connect(&self.conn, NoTls)
                    .map_err(|e| db(e, &format!("connecting to {}", self.shown)))?;
                if !self.synced {
                    c.batch_execute("SET synchronous_commit = off")
                        .map_err(|e| db(e, "setting synchronous_commit"))?;
                }
                c
            }
        };
        Ok(Conn {
            store: self,
            client: Some(client),
        })
    }

    /// The channel appends are announced on (`NOTIFY`), one per schema.
    fn channel(&self) -> String {
        let mut c = format!("aj_{}", self.schema);
        c.truncate(63);
        c
    }

    /// `name` qualified with the journal's schema (an identifier checked
    /// by `url::split`).
    fn t(&self, name: &str) -> String {
        format!("\"{}\".{name}", self.schema)
    }

    /// Creates the schema and tables, or checks their version; concurrent
    /// openers are serialized by an advisory lock.
    fn migrate(&self, create: bool) -> Result<()> {
        let mut c = self.client()?;
        let mut tx = c
            .transaction()
            .map_err(|e| db(e, "starting the schema check"))?;
        let lock_key = i64::from(crc32fast::hash(self.schema.as_bytes()));
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key])
            .map_err(|e| db(e, "locking the schema"))?;
        let s = &self.schema;
        let exists: bool = tx
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&self.t("meta")])
            .map_err(|e| db(e, "looking for the journal tables"))?
            .get(0);
        if !exists && !create {
            return Err(Error::NotAJournal {
                path: self.shown.clone().into(),
                reason: format!(
                    "schema {s} holds no journal tables (only `demo` and `import` create them)"
                ),
            });
        }
        let ddl = format!(
            "CREATE SCHEMA IF NOT EXISTS \"{s}\";
             CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL);
             CREATE TABLE IF NOT EXISTS {sessions} (session uuid PRIMARY KEY, head bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS {events} (session uuid NOT NULL, seq bigint NOT NULL,
                 frame bytea NOT NULL, PRIMARY KEY (session, seq));
             CREATE TABLE IF NOT EXISTS {snapshots} (session uuid PRIMARY KEY, seq bigint NOT NULL,
                 frame bytea NOT NULL);
             CREATE TABLE IF NOT EXISTS {leases} (session uuid PRIMARY KEY, owner text NOT NULL,
                 epoch bigint NOT NULL, expires_at timestamptz NOT NULL, instance uuid);
             ALTER TABLE {leases} ADD COLUMN IF NOT EXISTS instance uuid;
             CREATE TABLE IF NOT EXISTS {followers} (session uuid NOT NULL, follower text NOT NULL,
                 until timestamptz NOT NULL, PRIMARY KEY (session, follower));
             CREATE TABLE IF NOT EXISTS {records} (namespace text NOT NULL, key text NOT NULL,
                 value bytea NOT NULL, PRIMARY KEY (namespace, key));
             {append}",
            meta = self.t("meta"),
            sessions = self.t("sessions"),
            events = self.t("events"),
            snapshots = self.t("snapshots"),
            leases = self.t("leases"),
            followers = self.t("followers"),
            records = self.t("records"),
            append = self.append_function(),
        );
        tx.batch_execute(&ddl)
            .map_err(|e| db(e, &format!("creating the tables in schema {s}")))?;
        let found = tx
            .query_opt(
                &format!(
                    "SELECT value FROM {} WHERE key = 'schema_version'",
                    self.t("meta")
                ),
                &[],
            )
            .map_err(|e| db(e, "reading the schema version"))?;
        match found {
            None => {
                tx.execute(
                    &format!(
                        "INSERT INTO {} (key, value) VALUES ('schema_version', $1)",
                        self.t("meta")
                    ),
                    &[&SCHEMA_VERSION.to_string()],
                )
                .map_err(|e| db(e, "writing the schema version"))?;
            }
            Some(row) => {
                let v: String = row.get(0);
                let version: i64 = v.parse().unwrap_or(i64::MAX);
                if version > SCHEMA_VERSION {
                    return Err(Error::Unsupported(format!(
                        "the journal tables in schema {s} of {} are version {v}, newer than \
                         this build reads ({SCHEMA_VERSION}); upgrade agent-journal",
                        self.shown
                    )));
                }
            }
        }
        tx.commit().map_err(|e| db(e, "committing the schema"))
    }
}

impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        self.append_in_tx(session, expected, frames, None)
    }

    fn append_leased(
        &self,
        session: SessionId,
        expected: u64,
        frames: &[Vec<u8>],
        lease: Option<&Lease>,
    ) -> Result<()> {
        self.append_in_tx(session, expected, frames, lease)
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let mut c = self.client()?;
        let row = c
            .query_opt(
                &format!("SELECT head FROM {} WHERE session = $1", self.t("sessions")),
                &[&session.0],
            )
            .map_err(|e| db(e, &format!("reading the head of session {session}")))?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let to = to.min(i64::MAX as u64) as i64;
        let from = from.min(i64::MAX as u64) as i64;
        let mut c = self.client()?;
        let sql = format!(
            "SELECT seq, frame FROM {} WHERE session = $1 AND seq >= $2 AND seq < $3 ORDER BY seq",
            self.t("events")
        );
        let params: [&(dyn ToSql + Sync); 3] = [&session.0, &from, &to];
        let what = || format!("reading the events of session {session}");
        let mut rows = c
            .query_raw(&sql, params.iter().copied())
            .map_err(|e| db(e, &what()))?;
        while let Some(row) = rows.next().map_err(|e| db(e, &what()))? {
            let seq: i64 = row.get(0);
            let frame: &[u8] = row.get(1);
            if visit(seq as u64, frame)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        let mut c = self.client()?;
        let rows = c
            .query(
                &format!(
                    "SELECT session FROM {} ORDER BY session",
                    self.t("sessions")
                ),
                &[],
            )
            .map_err(|e| db(e, "listing sessions"))?;
        Ok(rows.iter().map(|r| SessionId(r.get(0))).collect())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        let mut c = self.client()?;
        c.execute(
            &format!(
                "INSERT INTO {} (session, seq, frame) VALUES ($1, $2, $3)
                 ON CONFLICT (session) DO UPDATE SET seq = EXCLUDED.seq, frame = EXCLUDED.frame",
                self.t("snapshots")
            ),
            &[&session.0, &(seq as i64), &frame],
        )
        .map_err(|e| db(e, &format!("writing a snapshot of session {session}")))?;
        Ok(())
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        let mut c = self.client()?;
        let row = c
            .query_opt(
                &format!(
                    "SELECT seq, frame FROM {} WHERE session = $1",
                    self.t("snapshots")
                ),
                &[&session.0],
            )
            .map_err(|e| db(e, &format!("reading the snapshot of session {session}")))?;
        Ok(row.map(|r| {
            let seq: i64 = r.get(0);
            let frame: Vec<u8> = r.get(1);
            (seq as u64, SharedBytes::from(frame))
        }))
    }

    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        let mut c = self.client()?;
        let mut tx = c
            .transaction()
            .map_err(|e| db(e, &format!("cutting session {session}")))?;
        let from = from.min(i64::MAX as u64) as i64;
        let what = || format!("cutting session {session} at seq {from}");
        // A snapshot after the cut is not of the stream any more.
        for table in ["events", "snapshots"] {
            tx.execute(
                &format!(
                    "DELETE FROM {} WHERE session = $1 AND seq >= $2",
                    self.t(table)
                ),
                &[&session.0, &from],
            )
            .map_err(|e| db(e, &what()))?;
        }
        let sql = if from == 0 {
            format!(
                "DELETE FROM {} WHERE session = $1 AND $2 = 0",
                self.t("sessions")
            )
        } else {
            format!(
                "UPDATE {} SET head = LEAST(head, $2) WHERE session = $1",
                self.t("sessions")
            )
        };
        tx.execute(&sql, &[&session.0, &from])
            .map_err(|e| db(e, &what()))?;
        tx.commit().map_err(|e| db(e, &what()))
    }

    fn delete_session(&self, session: SessionId) -> Result<()> {
        let mut c = self.client()?;
        let mut tx = c
            .transaction()
            .map_err(|e| db(e, &format!("deleting session {session}")))?;
        for table in ["events", "snapshots", "leases", "followers", "sessions"] {
            tx.execute(
                &format!("DELETE FROM {} WHERE session = $1", self.t(table)),
                &[&session.0],
            )
            .map_err(|e| db(e, &format!("deleting session {session}")))?;
        }
        tx.commit()
            .map_err(|e| db(e, &format!("deleting session {session}")))
    }

    fn drop_snapshots(&self, session: SessionId) -> Result<()> {
        let mut c = self.client()?;
        c.execute(
            &format!("DELETE FROM {} WHERE session = $1", self.t("snapshots")),
            &[&session.0],
        )
        .map_err(|e| db(e, &format!("dropping the snapshots of session {session}")))?;
        Ok(())
    }

    fn flush(&self, level: Durability) -> Result<()> {
        if self.synced || level == Durability::Buffered {
            // Every commit was durable when it returned.
            return Ok(());
        }
        // A synchronous commit flushes the WAL up to its own record, which
        // covers every asynchronous commit before it.
        let mut c = self.client()?;
        c.batch_execute("BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT;")
            .map_err(|e| db(e, "flushing the server's write-ahead log"))
    }

    fn size_on_disk(&self) -> Result<u64> {
        let mut c = self.client()?;
        let row = c
            .query_one(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = $1 AND c.relkind = 'r'",
                &[&self.schema],
            )
            .map_err(|e| db(e, "measuring the tables"))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn wait_for_append(
        &self,
        session: SessionId,
        len: u64,
        timeout: std::time::Duration,
    ) -> Result<()> {
        let mut guard = self.listener.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let mut c = Client::connect(&self.conn, NoTls)
                .map_err(|e| db(e, &format!("connecting to {}", self.shown)))?;
            c.batch_execute(&format!("LISTEN \"{}\"", self.channel()))
                .map_err(|e| db(e, "listening for appends"))?;
            *guard = Some(c);
        }
        let due = {
            let mut f = self.followed.lock().unwrap_or_else(|p| p.into_inner());
            let due = f
                .get(&session)
                .is_none_or(|t| t.elapsed() > std::time::Duration::from_secs(20));
            if due {
                f.insert(session, std::time::Instant::now());
            }
            due
        };
        if due && let Some(c) = guard.as_mut() {
            self.follow(c, session)?;
        }
        // An append between the caller's look and the LISTEN (or the
        // registration) is not missed.
        if self.len(session)?.unwrap_or(0) > len {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + timeout;
        let wanted = session.to_string();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let Some(c) = guard.as_mut() else {
                return Ok(());
            };
            let next = c
                .notifications()
                .timeout_iter(left)
                .next()
                .map(|n| n.map(|n| n.payload() == wanted));
            match next {
                Ok(Some(true)) | Ok(None) => return Ok(()),
                Ok(Some(false)) => continue,
                Err(e) => {
                    *guard = None;
                    return Err(db(e, "waiting for appends"));
                }
            }
        }
    }

    fn acquire_lease(
        &self,
        session: SessionId,
        owner: &str,
        instance: uuid::Uuid,
        ttl: std::time::Duration,
    ) -> Result<Lease> {
        self.take_lease(session, owner, instance, ttl)
    }

    fn renew_lease(&self, lease: &Lease, ttl: std::time::Duration) -> Result<Lease> {
        self.extend_lease(lease, ttl)
    }

    fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.give_up_lease(lease)
    }

    fn lease(&self, session: SessionId) -> Result<Option<Lease>> {
        self.live_lease(session)
    }

    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        let mut c = self.client()?;
        let rows = c
            .query(
                &format!(
                    "SELECT namespace, key, value FROM {} ORDER BY namespace, key",
                    self.t("records")
                ),
                &[],
            )
            .map_err(|e| db(e, "reading the journal's records"))?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get::<_, Vec<u8>>(2)))
            .collect())
    }

    fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        crate::store::records::check(writes)?;
        let what = "writing the journal's records";
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(|e| db(e, what))?;
        // Durable when the commit returns, even on a `Buffered` journal.
        tx.batch_execute("SET LOCAL synchronous_commit = on")
            .map_err(|e| db(e, what))?;
        for (ns, key, value) in writes {
            match value {
                Some(v) => tx.execute(
                    &format!(
                        "INSERT INTO {} (namespace, key, value) VALUES ($1, $2, $3)
                         ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value",
                        self.t("records")
                    ),
                    &[ns, key, v],
                ),
                None => tx.execute(
                    &format!(
                        "DELETE FROM {} WHERE namespace = $1 AND key = $2",
                        self.t("records")
                    ),
                    &[ns, key],
                ),
            }
            .map_err(|e| db(e, what))?;
        }
        tx.commit().map_err(|e| db(e, what))
    }
}
