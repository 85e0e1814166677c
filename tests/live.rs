//! Live reads: while this process appends to a sled database (and so holds
//! its lock), other processes read it through the read service
//! (`readers.sock` in the database folder): `log --follow`, `show`,
//! `verify` and `sessions` see every event, in order, and the writer is
//! never blocked or refused.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_journal::{Error, Journal};

use crate::common::{cli_command, custom, run_cli};

#[test]
fn another_process_follows_shows_and_verifies_while_this_one_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let journal = Journal::open(&db).unwrap();
    assert!(db.join("readers.sock").exists(), "the read service is up");
    let s = journal.create_session().unwrap();
    let id = s.id().to_string();
    const EVENTS: u64 = 400;

    // The follower: JSON lines on stdout, read by a thread.
    let mut follower = cli_command(&db)
        .args(["--json", "log", &id, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, seen) = mpsc::channel::<u64>();
    let stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
            if tx.send(v["seq"].as_u64().expect("seq")).is_err() {
                return;
            }
        }
    });

    // The writer: this process, timing every append.
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut slowest = Duration::ZERO;
            for n in 0..EVENTS {
                let t = Instant::now();
                s.append(custom(n)).expect("the writer is never refused");
                slowest = slowest.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(2));
            }
            slowest
        })
    };
    // Meanwhile: one-shot readers, each a process of its own.
    let mut reads = 0;
    while !writer.is_finished() {
        for args in [
            vec!["show", id.as_str()],
            vec!["verify"],
            vec!["--json", "sessions"],
        ] {
            let out = run_cli(&db, &args);
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            if args == ["verify"] {
                assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
            }
            reads += 1;
        }
    }
    let slowest = writer.join().unwrap();
    let head = s.head();
    assert_eq!(head, EVENTS + 1);
    assert!(reads >= 3, "the readers ran while the writer appended");
    assert!(
        slowest < Duration::from_secs(1),
        "an append waited {slowest:?}"
    );

    // Every event, in order, reached the follower.
    let mut expected = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while expected < head {
        let left = deadline.saturating_duration_since(Instant::now());
        let seq = seen
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the follower stopped at seq {expected} of {head}"));
        assert_eq!(seq, expected, "events in order, none skipped");
        expected += 1;
    }
    let _ = follower.kill();
    let _ = follower.wait();
    drop(seen);
    let _ = reader.join();

    // The state a reader folds through the service is this one's.
    let out = run_cli(&db, &["--json", "show", &id]);
    assert!(out.status.success());
    drop((s, journal));
    assert!(
        !db.join("readers.sock").exists(),
        "closing removes the socket"
    );
}

#[test]
fn attach_reads_what_the_writer_has_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    for n in 0..10_000 {
        s.append(custom(n)).unwrap();
    }
    // Attached from this same process here; other processes above.
    let reader = Journal::attach(&db).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.sessions().unwrap(), vec![s.id()]);
    let r = reader.session(s.id()).unwrap();
    assert_eq!(r.head(), 10_001);
    // More than one chunk of the protocol, in order.
    let events = r.events(..).unwrap();
    assert_eq!(events.len(), 10_001);
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    s.append(custom(10_000)).unwrap();
    assert_eq!(r.refresh().unwrap(), 10_002);
    assert!(matches!(
        r.append(custom(1)),
        Err(Error::Unsupported(_) | Error::Poisoned { .. })
    ));
    assert_eq!(s.head(), 10_002, "nothing written through the reader");
    drop((r, reader));
    // Once the writer closes, nothing serves the folder: attach says Locked
    // no more; it says there is nothing to attach to.
    drop((s, journal));
    assert!(matches!(Journal::attach(&db), Err(Error::Locked { .. })));
    assert!(Journal::open(&db).is_ok());
}

#[test]
fn a_socket_left_by_a_killed_writer_is_replaced_and_a_reader_is_not_fooled() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    drop(Journal::open(&db).unwrap());
    // What a killed writer leaves: a socket nobody listens on.
    let stale = std::os::unix::net::UnixListener::bind(db.join("readers.sock")).unwrap();
    drop(stale);
    assert!(db.join("readers.sock").exists());
    assert!(matches!(Journal::attach(&db), Err(Error::Locked { .. })));
    // A reading command opens the database itself.
    let out = run_cli(&db, &["sessions"]);
    assert!(out.status.success());
    // A writer replaces the socket with its own.
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    let reader = Journal::attach(&db).unwrap();
    assert_eq!(reader.sessions().unwrap(), vec![s.id()]);
}

use crate::common::cli_as_nobody as as_nobody;

#[test]
fn a_user_who_may_only_read_the_folder_reads_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("db");
    let id = {
        let journal = Journal::open(&db).unwrap();
        let s = journal.create_session().unwrap();
        s.append(custom(7)).unwrap();
        s.id().to_string()
    };
    // Readable by all, writable by its owner only.
    let chmod = std::process::Command::new("chmod")
        .args(["-R", "a+rX,go-w"])
        .arg(&db)
        .status()
        .unwrap();
    assert!(chmod.success());
    let before = crate::common::tree(&db);
    let Some(out) = as_nobody(&db, &["--json", "sessions"]) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = crate::common::json_lines(&out.stdout);
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["events"], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading a private copy"));
    assert_eq!(crate::common::tree(&db), before, "nothing written");
    // While its owner has it open, the reader goes through the read service
    // (and sees what is appended meanwhile).
    let journal = Journal::open(&db).unwrap();
    journal
        .session(id.parse().unwrap())
        .unwrap()
        .append(custom(8))
        .unwrap();
    let out = as_nobody(&db, &["--json", "sessions"]).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = crate::common::json_lines(&out.stdout);
    assert_eq!(listed[0]["events"], 3);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn log_follow_reads_an_exported_file_as_it_is_replaced_by_a_longer_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("run.ajournal");
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    s.append(custom(0)).unwrap();
    journal.export_journal(&[s.id()], &file, |_| {}).unwrap();
    let mut follower = crate::common::cli_command(&file)
        .args(["--json", "log", &s.id().to_string(), "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, seen) = mpsc::channel::<u64>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if tx.send(v["seq"].as_u64().unwrap()).is_err() {
                return;
            }
        }
    });
    let next = |seen: &mpsc::Receiver<u64>| seen.recv_timeout(Duration::from_secs(20)).ok();
    assert_eq!((next(&seen), next(&seen)), (Some(0), Some(1)));
    // The file is exported again, longer (written whole, then renamed).
    for n in 1..4 {
        s.append(custom(n)).unwrap();
    }
    journal.export_journal(&[s.id()], &file, |_| {}).unwrap();
    for want in 2..5 {
        assert_eq!(next(&seen), Some(want), "the new events, in order");
    }
    let _ = follower.kill();
    let _ = follower.wait();
}
