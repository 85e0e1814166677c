//! The append of the PostgreSQL store: a server-side function that checks
//! and writes in one statement, and the registration of followers whose
//! presence makes appends announce themselves.

use postgres::Client;

use super::{PostgresStore, db, is_unique_violation, leases};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::Store;
use crate::store::lease::Lease;

impl PostgresStore {
    /// The server-side append: the checks and the writes of an append in
    /// one statement (one round trip, one implicit transaction). It locks
    /// the lease row for share and the session row for update, and answers
    /// `ok`, `fenced`, `held` or `conflict` with what the caller reports.
    /// It announces the append (`NOTIFY`) only while someone follows the
    /// session: a notifying commit takes a lock every other notifying
    /// commit waits for, which would undo the server's group commit.
    pub(super) fn append_function(&self) -> String {
        format!(
            "CREATE OR REPLACE FUNCTION {f}(p_session uuid, p_expected bigint, p_frames bytea[],
                 p_owner text, p_epoch bigint, p_channel text)
             RETURNS TABLE (status text, found bigint, holder text, holder_epoch bigint,
                 expires_micros bigint)
             LANGUAGE plpgsql AS $fn$
             DECLARE
                 l_owner text; l_epoch bigint; l_expires timestamptz; h bigint;
                 n bigint := coalesce(array_length(p_frames, 1), 0);
             BEGIN
                 SELECT owner, epoch, expires_at INTO l_owner, l_epoch, l_expires
                     FROM {leases} WHERE session = p_session FOR SHARE;
                 IF p_owner IS NOT NULL THEN
                     IF l_owner IS NULL OR l_epoch <> p_epoch OR l_owner <> p_owner THEN
                         RETURN QUERY SELECT 'fenced'::text, 0::bigint, l_owner, l_epoch, 0::bigint;
                         RETURN;
                     END IF;
                 ELSIF l_owner IS NOT NULL AND l_expires > now() THEN
                     RETURN QUERY SELECT 'held'::text, 0::bigint, l_owner, l_epoch,
                         (extract(epoch FROM l_expires) * 1000000)::bigint;
                     RETURN;
                 END IF;
                 SELECT head INTO h FROM {sessions} WHERE session = p_session FOR UPDATE;
                 IF coalesce(h, 0) <> p_expected THEN
                     RETURN QUERY SELECT 'conflict'::text, coalesce(h, 0), NULL::text, NULL::bigint,
                         NULL::bigint;
                     RETURN;
                 END IF;
                 IF n > 0 THEN
                     IF h IS NULL THEN
                         INSERT INTO {sessions} (session, head) VALUES (p_session, p_expected + n);
                     ELSE
                         UPDATE {sessions} SET head = p_expected + n WHERE session = p_session;
                     END IF;
                     INSERT INTO {events} (session, seq, frame)
                         SELECT p_session, p_expected + i - 1, p_frames[i]
                         FROM generate_subscripts(p_frames, 1) AS i;
                     IF EXISTS (SELECT 1 FROM {followers}
                                WHERE session = p_session AND until > now()) THEN
                         PERFORM pg_notify(p_channel, p_session::text);
                     END IF;
                 END IF;
                 RETURN QUERY SELECT 'ok'::text, p_expected + n, NULL::text, NULL::bigint,
                     NULL::bigint;
             END
             $fn$;",
            f = self.t("append"),
            leases = self.t("leases"),
            sessions = self.t("sessions"),
            events = self.t("events"),
            followers = self.t("followers"),
        )
    }

    /// Appends `frames` under `lease` (see [`Store::append_leased`]): one
    /// call of the server-side append.
    pub(super) fn append_in_tx(
        &self,
        session: SessionId,
        expected: u64,
        frames: &[Vec<u8>],
        lease: Option<&Lease>,
    ) -> Result<()> {
        let what = || format!("appending to session {session}");
        let mut c = self.client()?;
        let bodies: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let owner = lease.map(|l| l.owner.as_str());
        let epoch = lease.map(|l| l.epoch as i64);
        let row = c.query_one(
            &format!("SELECT * FROM {}($1, $2, $3, $4, $5, $6)", self.t("append")),
            &[
                &session.0,
                &(expected as i64),
                &bodies,
                &owner,
                &epoch,
                &self.channel(),
            ],
        );
        let row = match row {
            Ok(r) => r,
            Err(e) if is_unique_violation(&e) => {
                // Another writer created the session or wrote these seqs
                // between our look and our insert.
                drop(c);
                return Err(Error::Conflict {
                    session,
                    expected,
                    found: self.len(session)?.unwrap_or(expected + 1),
                });
            }
            Err(e) => return Err(db(e, &what())),
        };
        let status: &str = row.get(0);
        let found: i64 = row.get(1);
        let holder: Option<String> = row.get(2);
        let holder_epoch: Option<i64> = row.get(3);
        match status {
            "ok" => Ok(()),
            "conflict" => Err(Error::Conflict {
                session,
                expected,
                found: found as u64,
            }),
            "fenced" => Err(Error::Fenced {
                session,
                epoch: lease.map_or(0, |l| l.epoch),
                holder: holder.zip(holder_epoch.map(|e| e as u64)),
            }),
            "held" => Err(Error::LeaseHeld {
                session,
                owner: holder.unwrap_or_default(),
                expires_at: leases::at(row.get::<_, Option<i64>>(4).unwrap_or(0)),
            }),
            other => Err(Error::Database(format!(
                "{}: the server answered {other:?}",
                what()
            ))),
        }
    }

    /// Registers this process as a follower of `session` for a minute (the
    /// appends announce themselves while one is registered).
    pub(super) fn follow(&self, c: &mut Client, session: SessionId) -> Result<()> {
        c.execute(
            &format!(
                "INSERT INTO {} (session, follower, until) VALUES ($1, $2, now() + interval '60 seconds')
                 ON CONFLICT (session, follower) DO UPDATE SET until = EXCLUDED.until",
                self.t("followers")
            ),
            &[&session.0, &format!("pid {}", std::process::id())],
        )
        .map_err(|e| db(e, &format!("following session {session}")))?;
        Ok(())
    }
}
