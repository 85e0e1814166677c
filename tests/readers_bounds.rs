//! The read service (`readers.sock`) is bounded: whatever readers send, the
//! writing process answers a bounded number of them (64), reads a bounded
//! request line (4 KiB), closes a connection after bad requests or 30 s
//! without a whole line, gives back every descriptor when readers go, and
//! lets connect only users who may read the database's files.
//!
//! `load.rs` holds the 1,000-connection test, with the writer in a child
//! process (so its descriptors and memory are its own).

mod load;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_journal::{Error, Journal};

use crate::common::custom;

/// One item of an answer, as the protocol tags it: (tag, text of an `E`).
fn read_item(c: &mut UnixStream) -> Option<(u8, String)> {
    let mut tag = [0u8; 1];
    c.read_exact(&mut tag).ok()?;
    let mut text = String::new();
    match tag[0] {
        b'E' => {
            let mut n = [0u8; 8];
            c.read_exact(&mut n).ok()?;
            let mut b = vec![0u8; u64::from_le_bytes(n) as usize];
            c.read_exact(&mut b).ok()?;
            text = String::from_utf8_lossy(&b).into_owned();
        }
        b'S' => c.read_exact(&mut [0u8; 16]).ok()?,
        b'L' => c.read_exact(&mut [0u8; 8]).ok()?,
        _ => {}
    }
    Some((tag[0], text))
}

/// Whether the service closed `c` (end of stream, or a reset).
fn closed(c: &mut UnixStream) -> bool {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    matches!(c.read(&mut [0u8; 1]), Ok(0) | Err(_))
}

fn connect(db: &Path) -> UnixStream {
    let c = UnixStream::connect(db.join("readers.sock")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

#[test]
fn a_long_line_and_garbage_get_an_error_and_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let journal = Journal::open(&db).unwrap();
    journal.create_session().unwrap().append(custom(1)).unwrap();

    // 8 MiB without a newline: the service reads 4 KiB, answers, closes.
    let mut c = connect(&db);
    let chunk = vec![b'x'; 64 << 10];
    for _ in 0..128 {
        if c.write_all(&chunk).is_err() {
            break;
        }
    }
    let (tag, text) = read_item(&mut c).expect("an answer");
    assert_eq!(tag, b'E');
    assert!(text.contains("longer than 4096 bytes"), "{text}");
    assert!(closed(&mut c));

    // Bad requests are answered, and the third one closes the connection.
    let mut c = connect(&db);
    c.write_all(b"sessions\n").unwrap();
    assert_eq!(read_item(&mut c).unwrap().0, b'S');
    assert_eq!(read_item(&mut c).unwrap().0, b'D');
    for bad in [&b"nonsense\n"[..], b"\xff\xfe\x00\n", b"scan x y z\n"] {
        c.write_all(bad).unwrap();
        let (tag, text) = read_item(&mut c).expect("an answer");
        assert_eq!(tag, b'E', "{text}");
    }
    assert!(closed(&mut c), "closed after three bad requests");

    // A good reader still reads.
    let reader = Journal::attach(&db).unwrap();
    assert_eq!(reader.sessions().unwrap().len(), 1);
}

#[test]
fn readers_beyond_64_are_refused_at_once_and_attach_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    let mut held: Vec<UnixStream> = (0..64).map(|_| connect(&db)).collect();
    // Every one of those is served (a thread each) ...
    for c in &mut held {
        c.write_all(b"size\n").unwrap();
        assert_eq!(read_item(c).unwrap().0, b'L');
        assert_eq!(read_item(c).unwrap().0, b'D');
    }
    // ... and the 65th is told so and closed, without reading a request.
    let t = Instant::now();
    let mut extra = connect(&db);
    let (tag, text) = read_item(&mut extra).expect("a refusal");
    assert_eq!(tag, b'E');
    assert!(text.contains("busy"), "{text}");
    assert!(closed(&mut extra));
    assert!(t.elapsed() < Duration::from_secs(5));
    match Journal::attach(&db) {
        Err(Error::Unsupported(m)) => assert!(m.contains("busy"), "{m}"),
        other => panic!("attach while busy: {:?}", other.map(|_| ())),
    }
    // Readers that leave give their places back.
    held.truncate(10);
    let deadline = Instant::now() + Duration::from_secs(10);
    let reader = loop {
        match Journal::attach(&db) {
            Ok(r) => break r,
            Err(e) if Instant::now() > deadline => panic!("never admitted: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert_eq!(reader.sessions().unwrap(), vec![s.id()]);
}

/// The service closes a connection on which no whole line arrived within
/// 30 s (even one trickling a byte a second), and an attached journal
/// idle for longer than that reads on (it connects again).
#[test]
fn idle_and_slow_readers_are_closed_after_30_s_and_attach_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    let reader = Journal::attach(&db).unwrap();
    assert_eq!(reader.sessions().unwrap(), vec![s.id()]);
    let mut idle = connect(&db);
    let slow = std::thread::spawn({
        let mut c = connect(&db);
        move || {
            let t = Instant::now();
            for b in b"sessions".iter().cycle().take(60) {
                if c.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            assert!(closed(&mut c));
            t.elapsed()
        }
    });
    let t = Instant::now();
    idle.set_read_timeout(Some(Duration::from_secs(40)))
        .unwrap();
    assert!(matches!(idle.read(&mut [0u8; 1]), Ok(0) | Err(_)));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(29) && waited < Duration::from_secs(38),
        "closed after {waited:?}"
    );
    let slow = slow.join().unwrap();
    assert!(
        slow < Duration::from_secs(38),
        "the trickle lasted {slow:?}"
    );
    s.append(custom(1)).unwrap();
    // The reader's connection was closed too: it connects again.
    let r = reader.session(s.id()).unwrap();
    assert_eq!(r.head(), 2);
}

use crate::common::cli_as_nobody as as_nobody;

fn chmod(mode: &str, path: &Path) {
    let ok = std::process::Command::new("chmod")
        .args(["-R", mode])
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn socket_mode(db: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(db.join("readers.sock"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_socket_lets_connect_only_who_may_read_the_database() {
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
    // Files 0600, folders 0700: the owner's alone.
    chmod("go-rwx", &db);
    let journal = Journal::open(&db).unwrap();
    assert_eq!(socket_mode(&db), 0o600, "the socket follows the db file");
    // No other name appeared in the folder meanwhile.
    let names: Vec<_> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".r"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    if let Some(out) = as_nobody(&db, &["--json", "sessions"]) {
        assert!(!out.status.success());
        assert!(!String::from_utf8_lossy(&out.stdout).contains(&id));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ermission denied"), "{err}");
    }
    // The folder alone opened to others: the files, and so the socket,
    // still are not.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o755)).unwrap();
    if let Some(out) = as_nobody(&db, &["--json", "sessions"]) {
        assert!(!out.status.success());
        assert!(!String::from_utf8_lossy(&out.stdout).contains(&id));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ermission denied"), "{err}");
    }
    drop(journal);

    // Readable by all: the socket lets all connect, and the other user
    // reads through it what is appended while the writer has it open.
    chmod("a+rX", &db);
    let journal = Journal::open(&db).unwrap();
    assert_eq!(socket_mode(&db), 0o666);
    journal
        .session(id.parse().unwrap())
        .unwrap()
        .append(custom(8))
        .unwrap();
    if let Some(out) = as_nobody(&db, &["--json", "sessions"]) {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = crate::common::json_lines(&out.stdout);
        assert_eq!(listed[0]["id"], id.as_str());
        assert_eq!(listed[0]["events"], 3);
    }
}
