//! Space: sled never shrinks its file, so deleting sessions frees nothing on
//! disk; `compact --to` writes the live sessions into a new database that is
//! about as large as they are.

use std::path::Path;

use agent_journal::{
    Durability, Envelope, Error, Event, Journal, JournalConfig, SessionId, ToolCallRecord,
};

use crate::common::{Rng, path_str, run_cli};

const SESSIONS: u64 = 20;
const PAYLOAD: usize = 1_024;

/// Events per session: `AJ_SPACE_EVENTS` (a multiple of 100), default 500
/// to keep a debug run short; 2000 (40 MiB of payloads) takes ~40 s.
fn events_per_session() -> u64 {
    std::env::var("AJ_SPACE_EVENTS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|n| n.max(100) / 100 * 100)
        .unwrap_or(500)
}

/// Sum of the sizes of the files under `dir`.
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        total += if meta.is_dir() {
            dir_size(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Incompressible bytes (sled 0.34 does not compress by default, but a
/// payload of zeros would flatter any store that does).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    Rng::from_state(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).bytes(n)
}

/// Runs the binary: its exit code, stdout and stderr.
fn aj(db: &Path, args: &[&str]) -> (i32, String, String) {
    let o = run_cli(db, args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Writes the sessions; returns the big ones and the one with a tool call in doubt.
fn fill(db: &Path, events: u64) -> (Vec<SessionId>, SessionId) {
    let j = Journal::open_with(
        db,
        JournalConfig {
            durability: Durability::Buffered,
            ..JournalConfig::default()
        },
    )
    .expect("open");
    let mut ids = Vec::new();
    for k in 0..SESSIONS {
        let s = j
            .create_session_with_labels(vec![("bulk".into(), k.to_string())])
            .expect("create");
        for b in 0..events / 100 {
            let batch = (0..100)
                .map(|i| Event::Custom {
                    kind: "bulk".into(),
                    payload: noise(k << 32 | b << 8 | i, PAYLOAD),
                })
                .collect();
            s.append_batch(batch).expect("append");
        }
        ids.push(s.id());
    }
    // A run that stopped while its tool was running.
    let s = j.create_session().expect("create");
    let eval = s.start_evaluation("ops", "deploy").expect("start");
    eval.system("You deploy things.").expect("system");
    eval.user("Deploy v2.").expect("user");
    eval.assistant(
        "Deploying.",
        vec![ToolCallRecord::new(
            "call_deploy",
            "deploy",
            r#"{"version":"v2"}"#,
        )],
    )
    .expect("assistant");
    eval.tool_started("call_deploy").expect("started");
    j.flush().expect("flush");
    (ids, s.id())
}

/// Frame bytes of the live sessions: the export's size without its magic
/// and length prefixes.
fn live_frame_bytes(j: &Journal, ids: &[SessionId], scratch: &Path) -> u64 {
    let file = scratch.join("live.ajournal");
    let records = j.export_journal(ids, &file, |_| {}).expect("export");
    let bytes = std::fs::metadata(&file).expect("meta").len();
    bytes - agent_journal::format::ajournal::MAGIC.len() as u64 - 4 * records
}

fn check_copy(path: &Path, keep: SessionId, expected: &[Envelope]) -> u64 {
    let (code, out, err) = aj(path, &["verify"]);
    assert_eq!(code, 0, "{out}{err}");
    let j = Journal::open(path).expect("open the compacted db");
    assert_eq!(j.sessions().expect("sessions"), vec![keep]);
    assert_eq!(
        j.session(keep)
            .expect("session")
            .events(..)
            .expect("events"),
        expected
    );
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
    j.size_on_disk().expect("size")
}

#[test]
fn deleting_sessions_then_compacting_gives_the_space_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let events = events_per_session();
    let (ids, doubt) = fill(&db, events);
    let keep = ids[7];
    let by_cli = ids[11];

    let j = Journal::open(&db).expect("open");
    let expected = j
        .session(keep)
        .expect("session")
        .events(..)
        .expect("events");
    assert_eq!(expected.len() as u64, events + 1);
    let live = live_frame_bytes(&j, &[keep], dir.path());
    let (size0, dir0) = (j.size_on_disk().expect("size"), dir_size(&db));
    for id in ids.iter().filter(|id| ![keep, by_cli].contains(id)) {
        j.delete_session(*id, false).expect("delete");
    }
    let e = j
        .delete_session(doubt, false)
        .expect_err("a tool call is in doubt");
    assert!(
        matches!(&e, Error::InvalidInput(m) if m.contains("call_deploy") && m.contains("in doubt")),
        "{e:?}"
    );
    assert_eq!(j.sessions().expect("sessions").len(), 3);
    drop(j);

    // The binary: a plain session goes; the one in doubt only with --force.
    let (code, out, err) = aj(&db, &["sessions", "--delete", &by_cli.to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("deleted session {by_cli}")), "{out}");
    let (code, out, err) = aj(&db, &["sessions", "--delete", &doubt.to_string()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.starts_with("error: ") && err.contains("call_deploy") && err.contains("in doubt"),
        "{err}"
    );
    let (_, listed, _) = aj(&db, &["sessions", "--json"]);
    assert!(
        listed.contains(&doubt.to_string()),
        "refused means kept: {listed}"
    );
    let (code, out, err) = aj(
        &db,
        &["sessions", "--delete", &doubt.to_string(), "--force"],
    );
    assert_eq!(code, 0, "{out}{err}");

    let j = Journal::open(&db).expect("reopen");
    assert_eq!(j.sessions().expect("sessions"), vec![keep]);
    let (size1, dir1) = (j.size_on_disk().expect("size"), dir_size(&db));

    // Compact, with the library and with the binary.
    let by_lib = dir.path().join("compacted-lib");
    let r = j.compact_to(&by_lib, |_| {}).expect("compact");
    assert_eq!((r.sessions, r.events), (1, events + 1));
    drop(j);
    let by_bin = dir.path().join("compacted-cli");
    let (code, out, err) = aj(&db, &["compact", "--to", path_str(&by_bin)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("copied 1 sessions ({} events)", events + 1)),
        "{out}"
    );

    let mut sizes = Vec::new();
    for path in [by_lib, by_bin] {
        let size = check_copy(&path, keep, &expected);
        let on_disk = dir_size(&path);
        sizes.push((path, size, on_disk));
    }
    eprintln!(
        "space: {SESSIONS} sessions x {events} events x {PAYLOAD} B: size_on_disk {} (dir {}); \
         after deleting {} sessions: {} (dir {}); live frames {}",
        mib(size0),
        mib(dir0),
        SESSIONS - 1,
        mib(size1),
        mib(dir1),
        mib(live)
    );
    for (path, size, on_disk) in &sizes {
        eprintln!(
            "space: compacted {}: size_on_disk {} (dir {}) = {:.1}% of the original, {:.2}x the live frames",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            mib(*size),
            mib(*on_disk),
            100.0 * *on_disk as f64 / dir0 as f64,
            *on_disk as f64 / live as f64
        );
        // Measured: 2.7x the live frames at 2000 events a session, more at
        // fewer because sled allocates 512 KiB segments; plus the 4 MiB of
        // the write-ahead log a `Synced` journal preallocates.
        assert!(
            *on_disk <= dir0 / 4 && *on_disk <= 3 * live + (2 << 20) + (4 << 20),
            "{}: {on_disk} bytes for {live} bytes of live frames (the original took {dir0})",
            path.display()
        );
    }
}

/// Agent-like messages: compressible text, as a real conversation is.
fn chatter(s: &agent_journal::Session, n: u64) {
    let eval = s.start_evaluation("support", "orders").expect("start");
    for i in 0..n {
        eval.user(format!(
            "Order #{:06} has not arrived; the tracking page still says 'label created'. \
             Where is it, and will it arrive this week?",
            100_000 + i
        ))
        .expect("user");
    }
}

/// `JournalConfig::compress` applies to the database an open creates and
/// stays with it; `compact_to_with` rewrites it either way, with the same
/// events; the CLI's `--compress` and `compact --no-compress` do the same.
#[test]
fn a_compressed_database_keeps_its_setting_and_compact_rewrites_it_either_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, packed) = (dir.path().join("plain"), dir.path().join("packed"));
    let mut events = Vec::new();
    for (db, compress) in [(&plain, false), (&packed, true)] {
        let j = Journal::open_with(
            db,
            JournalConfig {
                compress,
                checkpoint: agent_journal::CheckpointStrategy::Geometric {
                    first: 1024,
                    factor: 2,
                },
                ..JournalConfig::default()
            },
        )
        .expect("open");
        let s = j.create_session().expect("session");
        chatter(&s, 3_000);
        events.push(s.events(..).expect("events"));
        assert_eq!(j.compressed(), compress);
    }
    // A later open asking otherwise reads each as it was made.
    for (db, compress) in [(&plain, false), (&packed, true)] {
        let j = Journal::open_with(
            db,
            JournalConfig {
                compress: !compress,
                ..JournalConfig::default()
            },
        )
        .expect("reopen");
        assert_eq!(j.compressed(), compress);
        let id = j.sessions().expect("sessions")[0];
        let s = j.session(id).expect("session");
        // From its snapshot (a file, compressed in the compressed one).
        let stats = s.load_stats();
        assert!(stats.snapshot_seq.is_some(), "{stats:?}");
        assert!(stats.events_replayed < 1_000, "{stats:?}");
        let snapshots = std::fs::read_dir(db.join("snapshots")).expect("snapshot files");
        assert_eq!(snapshots.count(), 1);
        let all = s.events(..).expect("events");
        assert_eq!(all, events[usize::from(compress)]);
        let mut folded = agent_journal::state::SessionState::new();
        all.iter().for_each(|e| folded.apply(e));
        assert!(*s.state() == folded);
        assert!(j.verify(None, |_| {}).expect("verify").is_clean());
    }
    let (plain_size, packed_size) = (dir_size(&plain), dir_size(&packed));
    assert!(
        packed_size * 3 < plain_size * 2,
        "compressed {} against {}",
        mib(packed_size),
        mib(plain_size)
    );
    // Rewritten compressed, and back.
    let j = Journal::open(&plain).expect("open");
    let to = dir.path().join("to-packed");
    let r = j.compact_to_with(&to, Some(true), |_| {}).expect("compact");
    assert!(r.compressed);
    drop(j);
    let back = dir.path().join("back");
    let (code, out, err) = aj(
        &to,
        &[
            "compact",
            "--no-compress",
            "--to",
            path_str(&back),
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["compressed"], false, "{out}");
    for (db, compress) in [(&to, true), (&back, false)] {
        let j = Journal::open(db).expect("open the copy");
        assert_eq!(j.compressed(), compress);
        let id = j.sessions().expect("sessions")[0];
        assert_eq!(
            j.session(id).expect("session").events(..).expect("events"),
            events[0]
        );
    }
    // The CLI creates a compressed database when asked.
    let cli_db = dir.path().join("cli");
    let sandbox = dir.path().join("sandbox");
    let (code, out, err) = aj(
        &cli_db,
        &["demo", "--compress", "--sandbox", path_str(&sandbox)],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(Journal::open(&cli_db).expect("open").compressed());
}

/// A cleanly closed database keeps no empty write-ahead log: the log's
/// preallocated 4 MiB are given back at close, and taken again by the next
/// open that appends.
#[test]
fn a_closed_database_keeps_no_preallocated_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    for round in 0..2 {
        let j = Journal::open(&db).expect("open");
        assert!(std::fs::metadata(db.join("wal")).expect("wal").len() >= 4 << 20);
        let s = j.create_session().expect("session");
        chatter(&s, 10);
        drop(s);
        drop(j);
        assert_eq!(
            std::fs::metadata(db.join("wal")).expect("wal").len(),
            0,
            "round {round}"
        );
    }
    let j = Journal::open(&db).expect("open");
    assert_eq!(j.sessions().expect("sessions").len(), 2);
}
