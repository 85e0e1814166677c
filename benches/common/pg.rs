//! Row 11: the PostgreSQL store against raw statements on the same server
//! (a throwaway cluster with `fsync = on`, as the tests start it).

#[path = "../../tests/pg_server.rs"]
#[allow(dead_code)]
mod pg_server;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use agent_journal::{
    CheckpointStrategy, Envelope, EvaluationId, Journal, JournalConfig, SessionId,
};

use super::events::{cloned_messages, frame_of, message_200};
use super::report::{Report, Row, Verdict, fmt_dur, fmt_rate, fmt_ratio, rate, thousands};
use super::timing::{Contestant, interleave};
use crate::Sizes;

const CHUNK: u64 = 25;

fn raw_table(url: &str) -> (postgres::Client, String) {
    let conn = url.split("&schema=").next().expect("url").to_owned();
    let mut c = postgres::Client::connect(&conn, postgres::NoTls).expect("connect");
    let table = format!("raw_{}", uuid::Uuid::now_v7().simple());
    c.batch_execute(&format!(
        "CREATE TABLE {table} (session uuid, seq bigint, frame bytea, PRIMARY KEY (session, seq))"
    ))
    .expect("raw table");
    (c, table)
}

pub fn section_postgres(s: &Sizes, rep: &mut Report) {
    // SAFETY: set before any thread of this process reads the environment.
    unsafe { std::env::set_var("AGENT_JOURNAL_PG_FSYNC", "on") };
    let Some(_) = pg_server::server_url() else {
        rep.note("row 11 skipped: no PostgreSQL server binaries (run .ci/postgres.sh)".into());
        return;
    };
    let fresh = || pg_server::fresh_url().expect("server");
    let template = message_200(EvaluationId::new());

    // 11a: one Synced writer vs INSERT + commit per row.
    let n = s.synced;
    eprintln!(
        "[11a] PostgreSQL Synced append, one writer, {} events",
        thousands(n)
    );
    let journal = Journal::open(fresh()).expect("open");
    let session = journal.create_session().expect("session");
    let frame = frame_of(
        SessionId::new(),
        1,
        agent_journal::Event::Message(template.clone()),
    );
    let (mut raw, table) = raw_table(&fresh());
    let raw_session = uuid::Uuid::now_v7();
    let insert = format!("INSERT INTO {table} (session, seq, frame) VALUES ($1, $2, $3)");
    {
        let mut contestants: Vec<Contestant<'_>> = vec![
            Box::new(|first, count| {
                let events = cloned_messages(&template, first, count);
                let t = Instant::now();
                for e in events {
                    session.append(e).expect("append");
                }
                t.elapsed()
            }),
            Box::new(|first, count| {
                let t = Instant::now();
                for seq in first..first + count {
                    raw.execute(&insert, &[&raw_session, &(seq as i64), &frame])
                        .expect("insert");
                }
                t.elapsed()
            }),
        ];
        let times = interleave(n, CHUNK, &mut contestants);
        let (ours, base) = (rate(n, times[0]), rate(n, times[1]));
        rep.row(Row {
            id: "11a",
            what: format!(
                "PostgreSQL `Synced` append, one writer, {} events ({}-byte frame), same server",
                thousands(n),
                frame.len()
            ),
            ours: format!(
                "{} ({} / append)",
                fmt_rate(ours),
                fmt_dur(times[0] / n as u32)
            ),
            baseline: format!(
                "single-row INSERT + commit: {} ({} / row)",
                fmt_rate(base),
                fmt_dur(times[1] / n as u32)
            ),
            ratio: fmt_ratio(ours / base),
            target: "n/a".into(),
            verdict: Verdict::Info,
        });
    }

    // 11b: 16 writers on sessions of their own vs 16 raw connections.
    let (threads, per) = (s.threads, s.per_thread / 2);
    eprintln!("[11b] PostgreSQL Synced append, {threads} threads x {per} events");
    let journal = Journal::open(fresh()).expect("open");
    let sessions: Vec<_> = (0..threads)
        .map(|_| journal.create_session().expect("session"))
        .collect();
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = sessions
        .iter()
        .map(|s| {
            let (s, b) = (s.clone(), barrier.clone());
            let events = cloned_messages(&template, 1, per);
            std::thread::spawn(move || {
                b.wait();
                for e in events {
                    s.append(e).expect("append");
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    handles.into_iter().for_each(|h| h.join().expect("join"));
    let ours = t.elapsed();
    let barrier = Arc::new(Barrier::new(threads + 1));
    let url = fresh();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (b, frame, url) = (barrier.clone(), frame.clone(), url.clone());
            let (mut c, table) = raw_table(&url);
            std::thread::spawn(move || {
                let insert =
                    format!("INSERT INTO {table} (session, seq, frame) VALUES ($1, $2, $3)");
                let me = uuid::Uuid::now_v7();
                b.wait();
                for seq in 0..per {
                    c.execute(&insert, &[&me, &(seq as i64), &frame])
                        .expect("insert");
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    handles.into_iter().for_each(|h| h.join().expect("join"));
    let base = t.elapsed();
    let total = threads as u64 * per;
    rep.row(Row {
        id: "11b",
        what: format!(
            "PostgreSQL `Synced` append, {threads} threads x {} events, sessions of their own",
            thousands(per)
        ),
        ours: format!("{} total", fmt_rate(rate(total, ours))),
        baseline: format!(
            "{threads} connections, single-row INSERT + commit each: {} total",
            fmt_rate(rate(total, base))
        ),
        ratio: fmt_ratio(rate(total, ours) / rate(total, base)),
        target: "n/a".into(),
        verdict: Verdict::Info,
    });

    // 11c: cold open + fold vs SELECT + checksum + decode.
    let big = (s.big / 10).max(10_000);
    eprintln!(
        "[11c] PostgreSQL cold open + fold of {} events",
        thousands(big)
    );
    let url = fresh();
    let config = || JournalConfig {
        checkpoint: CheckpointStrategy::OnDemand,
        durability: agent_journal::Durability::Buffered,
        ..JournalConfig::default()
    };
    let id = {
        let j = Journal::open_with(&url, config()).expect("open");
        let s = j.create_session().expect("session");
        let mut next = 1;
        while next < big {
            let k = 1_000.min(big - next);
            s.append_batch(cloned_messages(&template, next, k))
                .expect("batch");
            next += k;
        }
        j.flush().expect("flush");
        s.id()
    };
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..s.rounds.max(2) {
        let t = Instant::now();
        let j = Journal::open_with(&url, config()).expect("open");
        let session = j.session(id).expect("session");
        assert_eq!(session.load_stats().events_replayed, big);
        best.0 = best.0.min(t.elapsed());
        let t = Instant::now();
        let conn = url.split("&schema=").next().expect("url");
        let schema = url.rsplit("schema=").next().expect("schema");
        let mut c = postgres::Client::connect(conn, postgres::NoTls).expect("connect");
        let rows = c
            .query(
                &format!(
                    "SELECT seq, frame FROM \"{schema}\".events WHERE session = $1 ORDER BY seq"
                ),
                &[&id.0],
            )
            .expect("select");
        let mut n = 0u64;
        for r in rows {
            let frame: &[u8] = r.get(1);
            let env: Envelope = agent_journal::format::decode_frame(
                frame,
                agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
            )
            .expect("decode");
            std::hint::black_box(env);
            n += 1;
        }
        assert_eq!(n, big);
        best.1 = best.1.min(t.elapsed());
    }
    rep.row(Row {
        id: "11c",
        what: format!(
            "PostgreSQL cold open + fold of a {}-event session, no snapshot (`Journal::open` + `session`)",
            thousands(big)
        ),
        ours: format!("{} ({})", fmt_dur(best.0), fmt_rate(rate(big, best.0))),
        baseline: format!(
            "connect + SELECT ... ORDER BY seq + crc + decode `Envelope`: {}",
            fmt_dur(best.1)
        ),
        ratio: fmt_ratio(best.1.as_secs_f64() / best.0.as_secs_f64()),
        target: "n/a".into(),
        verdict: Verdict::Info,
    });
}
