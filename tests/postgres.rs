//! The PostgreSQL store beyond the shared store suite (which runs on it
//! through `backends()`): leases and fencing, a takeover with real
//! processes, racing writer processes, damaged frames, schema versions, and
//! the CLI on `--db postgres://...`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_journal::{Error, Event, Journal, JournalConfig, SessionId};

use crate::common::{cli_command, custom, path_str};
use crate::crash::{conversation, executions, reference};
use crate::pg_server::fresh_url;

fn open(url: &str) -> Journal {
    Journal::open(url).expect("open postgres journal")
}

fn schema_of(url: &str) -> String {
    url.rsplit("schema=").next().expect("schema").to_owned()
}

fn raw(url: &str) -> postgres::Client {
    let conn = url.split("&schema=").next().expect("url");
    postgres::Client::connect(conn, postgres::NoTls).expect("raw connect")
}

fn payload(e: &Event) -> u64 {
    match e {
        Event::Custom { payload, .. } => {
            u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"))
        }
        other => panic!("not a test event: {other:?}"),
    }
}

#[test]
fn a_worker_whose_lease_was_taken_over_is_fenced_and_writes_nothing() {
    let Some(url) = fresh_url() else { return };
    let (ja, jb) = (open(&url), open(&url));
    let a = ja.create_session().expect("session");
    let la = a
        .acquire_lease("worker-a", Duration::from_millis(800))
        .expect("lease");
    assert_eq!(la.epoch, 1);
    a.append(custom(1)).expect("append under the lease");

    let b = jb.session(a.id()).expect("session");
    match b.acquire_lease("worker-b", Duration::from_secs(5)) {
        Err(Error::LeaseHeld { owner, .. }) => assert_eq!(owner, "worker-a"),
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    assert!(
        matches!(b.append(custom(2)), Err(Error::LeaseHeld { .. })),
        "no append without the lease while another worker's is live"
    );
    assert_eq!(
        jb.lease_of(a.id()).expect("lease").map(|l| l.owner),
        Some("worker-a".to_owned())
    );

    std::thread::sleep(Duration::from_millis(1000));
    let lb = b
        .acquire_lease("worker-b", Duration::from_secs(5))
        .expect("takeover after expiry");
    assert_eq!(lb.epoch, 2);
    b.append(custom(3)).expect("append under the new lease");

    // Worker A wakes up late: fenced, whatever it tries.
    match a.append(custom(4)) {
        Err(Error::Fenced { epoch, holder, .. }) => {
            assert_eq!(epoch, 1);
            assert_eq!(holder, Some(("worker-b".to_owned(), 2)));
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(matches!(
        a.renew_lease(Duration::from_secs(5)),
        Err(Error::Fenced { .. })
    ));
    let s = open(&url).session(a.id()).expect("session");
    let got: Vec<u64> = s
        .events(1..)
        .expect("events")
        .iter()
        .map(|e| payload(&e.event))
        .collect();
    assert_eq!(got, [1, 3], "nothing of the fenced worker's late append");

    b.release_lease().expect("release");
    s.append(custom(5))
        .expect("a released session takes plain appends");
}

#[test]
fn a_damaged_frame_is_named_and_a_newer_schema_is_refused() {
    let Some(url) = fresh_url() else { return };
    let id = {
        let j = open(&url);
        let s = j.create_session().expect("session");
        s.append_batch((0..5).map(custom).collect())
            .expect("append");
        s.id()
    };
    let schema = schema_of(&url);
    let mut c = raw(&url);
    c.execute(
        &format!(
            "UPDATE \"{schema}\".events SET frame = set_byte(frame, 12, get_byte(frame, 12) # 90)
             WHERE session = $1 AND seq = 3"
        ),
        &[&id.0],
    )
    .expect("flip a byte");
    let j = open(&url);
    match j.session(id) {
        Err(Error::Corruption { session, seq, .. }) => {
            assert_eq!((session, seq), (Some(id), Some(3)));
        }
        other => panic!("expected Corruption at seq 3, got {other:?}"),
    }
    assert!(!j.verify(None, |_| {}).expect("verify").is_clean());

    c.execute(
        &format!("UPDATE \"{schema}\".meta SET value = '2' WHERE key = 'schema_version'"),
        &[],
    )
    .expect("newer version");
    match Journal::open(&url) {
        Err(Error::Unsupported(m)) => assert!(m.contains("newer"), "{m}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn read_commands_never_create_tables_on_a_mistyped_schema() {
    let Some(url) = fresh_url() else { return };
    let e = Journal::open_with(
        &url,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
    .expect_err("no journal there");
    assert!(matches!(e, Error::NotAJournal { .. }), "{e:?}");
    let out = cli_command(Path::new(&url))
        .arg("sessions")
        .output()
        .expect("cli");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no journal tables"));
}

/// A writer process of `racing_writer_processes_lose_and_double_nothing`:
/// appends 40 events to the session, retrying each on `Conflict`.
#[test]
#[ignore = "a child of racing_writer_processes_lose_and_double_nothing"]
fn child_appender() {
    let (Ok(url), Ok(id), Ok(k)) = (
        std::env::var("AJ_PG_URL"),
        std::env::var("AJ_PG_SESSION"),
        std::env::var("AJ_PG_WRITER"),
    ) else {
        return;
    };
    let k: u64 = k.parse().expect("writer");
    let s = open(&url)
        .session(id.parse().expect("id"))
        .expect("session");
    for i in 0..40 {
        loop {
            match s.append(custom(k * 1000 + i)) {
                Ok(_) => break,
                Err(Error::Conflict { .. }) => continue,
                Err(e) => panic!("writer {k}: {e}"),
            }
        }
    }
}

#[test]
fn racing_writer_processes_lose_and_double_nothing() {
    let Some(url) = fresh_url() else { return };
    let id = open(&url).create_session().expect("session").id();
    let children: Vec<_> = (1..=4u64)
        .map(|k| {
            Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "postgres::child_appender",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                ])
                .env("AJ_PG_URL", &url)
                .env("AJ_PG_SESSION", id.to_string())
                .env("AJ_PG_WRITER", k.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn writer")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("writer");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = open(&url).session(id).expect("session");
    assert_eq!(s.head(), 1 + 160, "every append got its own seq");
    let mut got: Vec<u64> = s
        .events(1..)
        .expect("events")
        .iter()
        .map(|e| payload(&e.event))
        .collect();
    got.sort_unstable();
    let mut want: Vec<u64> = (1..=4)
        .flat_map(|k| (0..40).map(move |i| k * 1000 + i))
        .collect();
    want.sort_unstable();
    assert_eq!(got, want, "no event lost, none doubled");
}

fn only_session(url: &str) -> SessionId {
    let ids = open(url).sessions().expect("sessions");
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0]
}

/// Runs `resume ID --continue --lease-owner B` until the lease of the
/// worker before it lapses; returns whether it was refused at least once
/// (exit 4, the holder named).
fn take_over(url: &str, id: SessionId, sb: &Path, previous: &str) -> bool {
    // The folder `demo` made under `sb` for the session: a database on a
    // server keeps no record of it, so the resume names it.
    let folder = std::fs::read_dir(sb)
        .expect("sandbox root")
        .flatten()
        .find(|e| e.path().is_dir())
        .expect("the demo's folder")
        .path();
    let sb = folder.as_path();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut refused = false;
    loop {
        let out = cli_command(Path::new(url))
            .args([
                "resume",
                &id.to_string(),
                "--continue",
                "--sandbox",
                path_str(sb),
            ])
            .args(["--lease-owner", "worker-b", "--lease-ttl", "30"])
            .output()
            .expect("resume");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match out.status.code() {
            Some(0) => return refused,
            Some(4) => {
                assert!(
                    stderr.contains(&format!("leased by \"{previous}\"")),
                    "{stderr}"
                );
                refused = true;
            }
            other => panic!("resume failed ({other:?}): {stderr}"),
        }
        assert!(
            Instant::now() < deadline,
            "the lease never lapsed: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn check_finished_once(url: &str, id: SessionId, sb: &Path) {
    let (want, _) = reference();
    assert_eq!(conversation(Path::new(url), id), want);
    let ex = executions(sb);
    let mut unique = ex.clone();
    unique.dedup();
    assert_eq!(ex, unique, "a tool ran twice: {ex:?}");
    assert_eq!(
        ex.len(),
        2,
        "both write_file calls ran exactly once: {ex:?}"
    );
}

/// `demo` in a sandbox under `sb`, as worker A holding the lease for `ttl`
/// seconds.
fn demo_as_worker_a(url: &str, sb: &Path, ttl: &str) -> Command {
    let mut c = cli_command(Path::new(url));
    c.args([
        "demo",
        "--sandbox",
        path_str(sb),
        "--lease-owner",
        "worker-a",
    ])
    .args(["--lease-ttl", ttl]);
    c
}

#[test]
fn a_worker_killed_mid_run_is_taken_over_after_its_lease_lapses() {
    for n in [4u64, 9, 15] {
        let Some(url) = fresh_url() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let sb = dir.path().join("sb");
        let out = demo_as_worker_a(&url, &sb, "3")
            .args(["--crash-after", &n.to_string(), "--crash-with", "kill"])
            .output()
            .expect("demo");
        assert!(
            out.status.code().is_none(),
            "killed after event {n}: {out:?}"
        );
        let id = only_session(&url);
        assert!(
            take_over(&url, id, &sb, "worker-a"),
            "a live lease refuses the resume (kill after {n})"
        );
        check_finished_once(&url, id, &sb);
    }
}

#[test]
fn a_paused_worker_that_wakes_after_the_takeover_is_fenced() {
    let Some(url) = fresh_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let sb = dir.path().join("sb");
    let a = demo_as_worker_a(&url, &sb, "1")
        .env("AGENT_JOURNAL_DEMO_DELAY_MS", "700")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo");
    // Paused once its run is under way: its first two tool calls answered
    // (events 6-11), while it waits 700 ms for its next provider call, so
    // that no call is in doubt (a pause between a tool's run and its
    // recorded result would make the take-over re-run it, as it must).
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let ids = open(&url).sessions().expect("sessions");
        if let Some(id) = ids.first()
            && open(&url).session(*id).expect("session").head() == 12
        {
            break *id;
        }
        assert!(Instant::now() < deadline, "the demo never got going");
        std::thread::sleep(Duration::from_millis(20));
    };
    let pid = a.id().to_string();
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    };
    signal("-STOP");
    take_over(&url, id, &sb, "worker-a");
    signal("-CONT");
    let out = a.wait_with_output().expect("demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "fenced: {stderr}");
    assert!(stderr.contains("no longer held"), "{stderr}");
    check_finished_once(&url, id, &sb);
}

#[test]
fn the_cli_records_and_reads_a_session_on_postgres() {
    let Some(url) = fresh_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let sb = dir.path().join("sb");
    let db = Path::new(&url);
    let out = cli_command(db)
        .args(["--json", "demo", "--sandbox", path_str(&sb)])
        .output()
        .expect("demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = only_session(&url).to_string();
    for args in [
        vec!["sessions"],
        vec!["log", id.as_str()],
        vec!["show", id.as_str()],
        vec!["verify"],
    ] {
        let out = cli_command(db).args(&args).output().expect("cli");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cli_command(db).args(["log", &id]).output().expect("log");
    assert!(String::from_utf8_lossy(&out.stdout).contains(" evaluation_finished "));
}

#[test]
fn copy_moves_every_session_from_sled_to_postgres_and_back_verified() {
    let Some(url) = fresh_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (sled, back) = (dir.path().join("db"), dir.path().join("back"));
    let sb = dir.path().join("sb");
    for _ in 0..2 {
        let out = cli_command(&sled)
            .args(["demo", "--sandbox", path_str(&sb)])
            .output()
            .expect("demo");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let copy = |from: &Path, to: &Path| {
        Command::new(env!("CARGO_BIN_EXE_agent-journal"))
            .env_remove("AGENT_JOURNAL_DB")
            .args([
                "--json",
                "copy",
                "--from",
                path_str(from),
                "--to",
                path_str(to),
            ])
            .output()
            .expect("copy")
    };
    let out = copy(&sled, Path::new(&url));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["sessions"].as_array().expect("sessions").len(), 2);
    let out = copy(Path::new(&url), &back);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let frames = |db: &Path| {
        let j = Journal::open(db).expect("open");
        j.sessions()
            .expect("sessions")
            .into_iter()
            .map(|id| {
                let s = j.session(id).expect("session");
                (id, s.events(..).expect("events"))
            })
            .collect::<Vec<_>>()
    };
    let original = frames(&sled);
    assert_eq!(
        frames(Path::new(&url)),
        original,
        "sled to PostgreSQL, exactly"
    );
    assert_eq!(frames(&back), original, "and back, exactly");

    // Again into the same place: refused, nothing written.
    let out = copy(&sled, Path::new(&url));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(frames(Path::new(&url)).len(), 2);
}

#[test]
fn log_follow_sees_events_another_process_appends_within_a_second() {
    use std::io::BufRead;
    let Some(url) = fresh_url() else { return };
    let j = open(&url);
    let s = j.create_session().expect("session");
    s.append(custom(1)).expect("append");
    let mut child = cli_command(Path::new(&url))
        .args(["--json", "log", &s.id().to_string(), "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("log --follow");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx
                .send(serde_json::from_str(&line).expect("a JSON line"))
                .is_err()
            {
                return;
            }
        }
    });
    let next = |within: Duration| rx.recv_timeout(within).expect("an event line in time");
    assert_eq!(next(Duration::from_secs(10))["seq"], 0);
    assert_eq!(next(Duration::from_secs(5))["seq"], 1);
    for n in 2..5u64 {
        std::thread::sleep(Duration::from_millis(300));
        let at = Instant::now();
        s.append(custom(n)).expect("append");
        let line = next(Duration::from_secs(5));
        assert_eq!(line["seq"], n);
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "seen after {:?}",
            at.elapsed()
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_lost_connection_is_reported_poisons_nothing_and_a_retry_is_safe() {
    let Some(url) = fresh_url() else { return };
    let j = open(&url);
    let s = j.create_session().expect("session");
    s.append(custom(1)).expect("append");
    // The server drops every connection of the journal (a restart, a
    // network cut): the pooled one is dead.
    let mut admin = raw(&url);
    let cut = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND application_name = $1",
            &[&schema_of(&url)],
        )
        .expect("terminate");
    assert!(cut >= 1, "the journal's pooled connection was cut");
    match s.append(custom(2)) {
        Err(Error::Database(m)) => assert!(m.contains("appending to session"), "{m}"),
        other => panic!("expected a database error, got {other:?}"),
    }
    // Nothing is poisoned: the next append reconnects; a retry of an
    // append that did commit is a Conflict, never a duplicate.
    let head = s.refresh().expect("refresh");
    s.append(custom(3)).expect("the journal goes on");
    let again = s.append_batch_at(head, vec![custom(3)]);
    assert!(matches!(again, Err(Error::Conflict { .. })), "{again:?}");
    let got: Vec<u64> = open(&url)
        .session(s.id())
        .expect("session")
        .events(1..)
        .expect("events")
        .iter()
        .map(|e| payload(&e.event))
        .collect();
    assert_eq!(got, [1, 3], "the failed append wrote nothing");
}

#[test]
fn the_conversation_engine_runs_under_a_lease_and_a_second_worker_is_refused() {
    use agent_journal::conversation::{
        ConversationEngine, ConversationEngineConfig, ConversationMessage, CreateConversation,
        JournalConversationStore, RunTurn,
    };
    use std::sync::Arc;
    let Some(url) = fresh_url() else { return };
    let worker = |name: &str| {
        let journal = open(&url);
        let store = Arc::new(JournalConversationStore::new(journal.clone()));
        let adapter = crate::conversation::Recording::new("scripted", "ok");
        let engine = ConversationEngine::new(
            ConversationEngineConfig::new(name, store).provider(adapter, "m"),
        );
        (journal, engine)
    };
    let (ja, a) = worker("a");
    let c = a
        .create_conversation(CreateConversation {
            initial_messages: vec![ConversationMessage::user("hi")],
            ..Default::default()
        })
        .expect("create");
    // Worker A takes the conversation's session lease: its engine's
    // appends are made under it (one session handle per process).
    let lease = ja
        .session(c.id)
        .expect("session")
        .acquire_lease("worker-a", Duration::from_secs(30))
        .expect("lease");
    assert_eq!(lease.epoch, 1);
    a.run_turn(c.id, RunTurn::default())
        .expect("turn under the lease");
    let (_jb, b) = worker("b");
    match b.run_turn(c.id, RunTurn::default()) {
        Err(Error::LeaseHeld { owner, .. }) => assert_eq!(owner, "worker-a"),
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
}

/// A lease names a worker instance, not a name: while worker A's lease is
/// live, a second process started with the same `--lease-owner` is refused
/// at start (exit 4, saying so) and runs no tool; through the library, a
/// second handle taking the lease under the same name is `LeaseHeld`, and
/// the holder's own handle renews it.
#[test]
fn a_second_process_with_the_same_lease_owner_is_refused_before_any_tool_runs() {
    let Some(url) = fresh_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let sb = dir.path().join("sb");
    // Worker A is killed after event 9 (a tool call in doubt) holding a
    // lease of 60 s: the lease stays live.
    let out = demo_as_worker_a(&url, &sb, "60")
        .args(["--crash-after", "9", "--crash-with", "kill"])
        .output()
        .expect("demo");
    assert!(out.status.code().is_none(), "killed: {out:?}");
    let id = only_session(&url);
    let ran = executions(&sb);
    let folder = std::fs::read_dir(&sb)
        .expect("sandbox root")
        .flatten()
        .find(|e| e.path().is_dir())
        .expect("the demo's folder")
        .path();
    for continue_it in [true, false] {
        let mut c = cli_command(Path::new(&url));
        c.args(["resume", &id.to_string(), "--sandbox", path_str(&folder)])
            .args(["--lease-owner", "worker-a", "--lease-ttl", "60"]);
        if !continue_it {
            c.arg("--fork");
        }
        let out = c.output().expect("resume");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{stderr}");
        assert!(
            stderr.contains("another process started with that name"),
            "{stderr}"
        );
        assert_eq!(executions(&sb), ran, "no tool ran in the refused process");
    }
    assert_eq!(open(&url).sessions().expect("sessions"), vec![id]);

    // The library: one instance per handle that takes the lease.
    let (j1, j2) = (open(&url), open(&url));
    let s1 = j1.create_session().expect("session");
    let l1 = s1
        .acquire_lease("worker-c", Duration::from_secs(30))
        .expect("lease");
    let s2 = j2.session(s1.id()).expect("session");
    match s2.acquire_lease("worker-c", Duration::from_secs(30)) {
        Err(Error::LeaseHeld { owner, .. }) => {
            assert!(owner.starts_with("worker-c"), "{owner}")
        }
        other => panic!("expected LeaseHeld, got {other:?}"),
    }
    assert!(matches!(s2.append(custom(1)), Err(Error::LeaseHeld { .. })));
    let again = s1
        .acquire_lease("worker-c", Duration::from_secs(30))
        .expect("the holder's own handle renews");
    assert_eq!((again.epoch, again.instance), (l1.epoch, l1.instance));
    s1.append(custom(2)).expect("append under the lease");
    assert_eq!(s1.head(), 2);
}
