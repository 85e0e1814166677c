//! Failure injection: a store whose appends or flushes fail, a real full
//! disk (a 2 MiB tmpfs), a read-only filesystem. Errors must be typed and
//! say what failed, nothing may panic, and what was acknowledged before the
//! failure must survive it.

use std::collections::{BTreeMap, HashMap};
use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{Rng, copy_dir, custom, run_cli, tree};

use agent_journal::store::{Store, Visit};
use agent_journal::{
    Durability, Error, Event, Journal, JournalConfig, Result, SessionId, ToolCallRecord,
};

// ---------------------------------------------------------------------------
// A store with injected faults.

/// Frames in memory, with a "durable" length per session that only a
/// successful flush advances, so a crash image can be taken at any time.
struct FaultyStore {
    streams: Mutex<BTreeMap<SessionId, Vec<Vec<u8>>>>,
    durable: Mutex<BTreeMap<SessionId, usize>>,
    snapshots: Mutex<HashMap<SessionId, (u64, agent_journal::format::SharedBytes)>>,
    /// Appends fail while set.
    fail_appends: AtomicBool,
    /// Flush calls made so far.
    flushes: AtomicU64,
    /// Flush calls numbered in `fail_from..fail_to` fail.
    fail_from: AtomicU64,
    fail_to: AtomicU64,
    /// Every flush passes through it: a test holding it holds flushes.
    flush_gate: Mutex<()>,
    /// Scans end before this seq, as sled's did when a power cut lost part
    /// of its tree while the stream's last key stayed.
    scan_end: AtomicU64,
}

fn injected(context: &str, kind: ErrorKind) -> Error {
    Error::Io {
        context: context.to_owned(),
        source: std::io::Error::new(kind, "injected fault: no space left on device"),
    }
}

impl FaultyStore {
    fn new() -> FaultyStore {
        FaultyStore {
            streams: Mutex::default(),
            durable: Mutex::default(),
            snapshots: Mutex::default(),
            fail_appends: AtomicBool::new(false),
            flushes: AtomicU64::new(0),
            fail_from: AtomicU64::new(u64::MAX),
            fail_to: AtomicU64::new(u64::MAX),
            flush_gate: Mutex::new(()),
            scan_end: AtomicU64::new(u64::MAX),
        }
    }

    /// The next `n` flushes fail (`u64::MAX`: all of them from now on).
    fn fail_next_flushes(&self, n: u64) {
        let now = self.flushes.load(Ordering::SeqCst);
        self.fail_from.store(now, Ordering::SeqCst);
        self.fail_to.store(now.saturating_add(n), Ordering::SeqCst);
    }

    /// What a crash right now would leave: only what was flushed.
    fn crash_image(&self) -> FaultyStore {
        let streams = self.streams.lock().expect("lock");
        let durable = self.durable.lock().expect("lock");
        let image = FaultyStore::new();
        {
            let mut s = image.streams.lock().expect("lock");
            for (id, frames) in streams.iter() {
                let n = durable.get(id).copied().unwrap_or(0);
                if n > 0 {
                    s.insert(*id, frames[..n].to_vec());
                }
            }
            *image.durable.lock().expect("lock") = s.iter().map(|(id, f)| (*id, f.len())).collect();
        }
        image
    }
}

impl Store for FaultyStore {
    fn kind(&self) -> &'static str {
        "faulty"
    }

    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        if self.fail_appends.load(Ordering::SeqCst) {
            return Err(injected(
                "appending to the faulty store",
                ErrorKind::StorageFull,
            ));
        }
        let mut streams = self.streams.lock().expect("lock");
        let found = streams.get(&session).map_or(0, Vec::len) as u64;
        if found != expected {
            return Err(Error::Conflict {
                session,
                expected,
                found,
            });
        }
        if !frames.is_empty() {
            streams
                .entry(session)
                .or_default()
                .extend(frames.iter().cloned());
        }
        Ok(())
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let streams = self.streams.lock().expect("lock");
        Ok(streams.get(&session).map(|s| s.len() as u64))
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let frames: Vec<Vec<u8>> = {
            let streams = self.streams.lock().expect("lock");
            let Some(s) = streams.get(&session) else {
                return Ok(());
            };
            let end = (to.min(self.scan_end.load(Ordering::SeqCst)) as usize).min(s.len());
            s.get(from as usize..end)
                .map(<[_]>::to_vec)
                .unwrap_or_default()
        };
        for (i, f) in frames.iter().enumerate() {
            if visit(from + i as u64, f)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.streams.lock().expect("lock").keys().copied().collect())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.snapshots.lock().expect("lock").insert(
            session,
            (seq, agent_journal::format::SharedBytes::from(frame)),
        );
        Ok(())
    }

    fn latest_snapshot(
        &self,
        session: SessionId,
    ) -> Result<Option<(u64, agent_journal::format::SharedBytes)>> {
        Ok(self.snapshots.lock().expect("lock").get(&session).cloned())
    }

    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        let mut streams = self.streams.lock().expect("lock");
        if let Some(s) = streams.get_mut(&session) {
            s.truncate(from as usize);
            if s.is_empty() {
                streams.remove(&session);
            }
        }
        Ok(())
    }

    fn delete_session(&self, session: SessionId) -> Result<()> {
        self.streams.lock().expect("lock").remove(&session);
        self.snapshots.lock().expect("lock").remove(&session);
        Ok(())
    }

    fn drop_snapshots(&self, session: SessionId) -> Result<()> {
        self.snapshots.lock().expect("lock").remove(&session);
        Ok(())
    }

    fn flush(&self, _level: Durability) -> Result<()> {
        let n = self.flushes.fetch_add(1, Ordering::SeqCst);
        let _gate = self.flush_gate.lock().expect("lock");
        if (self.fail_from.load(Ordering::SeqCst)..self.fail_to.load(Ordering::SeqCst)).contains(&n)
        {
            return Err(injected("flushing the faulty store", ErrorKind::Other));
        }
        let lens: BTreeMap<SessionId, usize> = self
            .streams
            .lock()
            .expect("lock")
            .iter()
            .map(|(id, s)| (*id, s.len()))
            .collect();
        *self.durable.lock().expect("lock") = lens;
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        Ok(0)
    }
}

fn faulty() -> (Arc<FaultyStore>, Journal) {
    let store = Arc::new(FaultyStore::new());
    let journal = Journal::with_store(store.clone(), JournalConfig::default());
    (store, journal)
}

fn is_injected_io(e: &Error, kind: ErrorKind, context: &str) -> bool {
    matches!(e, Error::Io { context: c, source } if source.kind() == kind && c.contains(context))
        && e.to_string().contains("no space left")
}

#[test]
fn a_failed_append_changes_nothing_and_poisons_the_writer() {
    let (store, j) = faulty();
    let s = j.create_session().expect("create");
    let eval = s.start_evaluation("support", "triage").expect("start");
    eval.system("You are terse.").expect("system");
    eval.user("List /tmp.").expect("user");
    let (head, state, events) = (s.head(), s.state_cloned(), s.events(..).expect("events"));

    store.fail_appends.store(true, Ordering::SeqCst);
    let call = ToolCallRecord::new("call_1", "list_dir", "{}");
    let e = eval
        .assistant("Looking.", vec![call.clone()])
        .expect_err("the store is full");
    assert!(
        is_injected_io(&e, ErrorKind::StorageFull, "appending"),
        "{e:?}"
    );
    let e = s
        .append_batch(vec![custom(1), custom(2)])
        .expect_err("the writer is poisoned");
    assert!(
        matches!(&e, Error::Poisoned(reason) if reason.contains("no space left")),
        "{e}"
    );
    assert_eq!(s.head(), head, "the head did not move");
    assert_eq!(s.state_cloned(), state, "the state has none of it");
    assert_eq!(s.events(..).expect("events"), events, "nothing stored");
    assert_eq!(eval.next_sequence(), 2, "the recorder did not count it");

    // The write failed: the journal is poisoned and says why, even once
    // the disk has room again (reopen to go on), and nothing was written.
    store.fail_appends.store(false, Ordering::SeqCst);
    let e = eval
        .assistant("Looking.", vec![call])
        .expect_err("poisoned");
    assert!(
        matches!(&e, Error::Poisoned(reason) if reason.contains("no space left")),
        "{e}"
    );
    assert_eq!(s.head(), head);

    // What a crash now leaves is exactly what was acknowledged.
    let after = Journal::with_store(Arc::new(store.crash_image()), JournalConfig::default());
    let reopened = after.session(s.id()).expect("session");
    assert_eq!(
        reopened.events(..).expect("events"),
        s.events(..).expect("events")
    );
    assert!(after.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_failed_flush_is_an_error_and_everything_acknowledged_before_survives() {
    let (store, j) = faulty();
    let s = j.create_session().expect("create");
    let mut acknowledged = vec![s.events(..).expect("events")[0].clone()];
    for i in 0..10 {
        let seq = s.append(custom(i)).expect("append");
        acknowledged.push(s.events(seq..=seq).expect("event")[0].clone());
    }
    let (head, state) = (s.head(), s.state_cloned());
    store.fail_next_flushes(u64::MAX);
    let e = s.append(custom(10)).expect_err("the flush fails");
    assert!(is_injected_io(&e, ErrorKind::Other, "flushing"), "{e:?}");
    assert!(
        e.to_string().contains("flushing the faulty store"),
        "says what failed: {e}"
    );
    // Never acknowledged: not in the head, the state or the events read.
    assert_eq!(s.head(), head, "the head did not move");
    assert_eq!(s.state_cloned(), state, "the state has none of it");
    assert_eq!(s.events(..).expect("events"), acknowledged);
    // Every later write is refused, a flush, a deletion and an import too:
    // the journal is poisoned.
    let e = j.flush().expect_err("poisoned");
    assert!(
        matches!(&e, Error::Poisoned(reason) if reason.contains("flushing")),
        "{e:?}"
    );
    let e = j.delete_session(s.id(), true).expect_err("poisoned");
    assert!(matches!(&e, Error::Poisoned(_)), "{e:?}");
    let other = Journal::memory();
    other.create_session().expect("create");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("other.ajournal");
    other.export_journal(&[], &file, |_| {}).expect("export");
    let e = j.import_journal(&file).expect_err("poisoned");
    assert!(matches!(&e, Error::Poisoned(_)), "{e:?}");

    // A crash now: every acknowledged event is there, gap-free; the one
    // whose append failed is not (it was never made durable).
    let after = Journal::with_store(Arc::new(store.crash_image()), JournalConfig::default());
    let events = after
        .session(s.id())
        .expect("session")
        .events(..)
        .expect("events");
    assert_eq!(events, acknowledged);
}

#[test]
fn readers_never_see_an_event_before_its_append_returns() {
    // An event enters the head and the state only once it is durable: a
    // reader in another thread waits for the sync or sees the head before.
    let (store, j) = faulty();
    let s = j.create_session().expect("create");
    let head = s.append(custom(0)).expect("append") + 1;
    let released = Arc::new(AtomicBool::new(false));
    let gate = store.flush_gate.lock().expect("hold the flushes");
    let flushes = store.flushes.load(Ordering::SeqCst);
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || s.append(custom(1)).expect("append"))
    };
    while store.flushes.load(Ordering::SeqCst) == flushes {
        std::thread::yield_now(); // the writer is in its flush
    }
    let reader = {
        let (s, released) = (s.clone(), released.clone());
        std::thread::spawn(move || {
            let seen = (s.head(), s.events(..).expect("events").len() as u64);
            (seen, released.load(Ordering::SeqCst))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    released.store(true, Ordering::SeqCst);
    drop(gate);
    assert_eq!(writer.join().expect("writer"), head);
    let ((seen_head, seen_events), after_release) = reader.join().expect("reader");
    assert!(
        seen_head == head || after_release,
        "the reader saw head {seen_head} while the event was not durable"
    );
    assert_eq!(seen_events, seen_head, "events() agree with head()");
}

/// The convention: "a failed flush poisons the writer: further appends are
/// refused", whatever the store. Were the retry accepted, its flush would
/// make durable the event the caller was told had failed, and a recorder
/// retrying the message would write a second one with the same `sequence`.
#[test]
fn after_a_failed_flush_every_store_refuses_appends() {
    let (store, j) = faulty();
    let s = j.create_session().expect("create");
    let eval = s.start_evaluation("support", "triage").expect("start");
    eval.system("You are terse.").expect("system");
    store.fail_next_flushes(1);
    let e = eval.user("first try").expect_err("the flush fails");
    assert!(is_injected_io(&e, ErrorKind::Other, "flushing"), "{e:?}");
    // The flush works again; the caller retries.
    let r = eval.user("second try");
    let sequences: Vec<u64> = s
        .state()
        .messages()
        .for_evaluation(eval.id())
        .map(|m| m.sequence)
        .collect();
    assert!(
        matches!(&r, Err(Error::Poisoned(reason)) if reason.contains("injected")),
        "expected Poisoned, got {r:?}; the evaluation's message sequences are now {sequences:?}"
    );
}

// ---------------------------------------------------------------------------
// Real filesystems: a full tmpfs, a read-only one. Needs root (mount).

/// A tmpfs mounted for one test, unmounted when dropped.
struct Mount {
    dir: PathBuf,
}

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> std::result::Result<Mount, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount {
            dir: dir.to_owned(),
        })
    }

    fn remount_read_only(&self) -> std::result::Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.dir)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // sled's threads may hold the files for a few more milliseconds.
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// 4 KiB of incompressible bytes, different for each `i`.
fn noise(i: u64) -> Vec<u8> {
    Rng::from_state(i | 1).bytes(4096)
}

#[test]
fn a_full_disk_is_a_typed_error_and_every_acknowledged_event_survives() {
    let base = tempfile::tempdir().expect("tempdir");
    let mount = match Mount::tmpfs(&base.path().join("small"), "2m") {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a 2 MiB tmpfs ({why})");
            return;
        }
    };
    let db = mount.dir.join("db");
    let copy = base.path().join("copy");
    let (id, acknowledged, failure, after) = {
        let j = Journal::open(&db).expect("open on the tmpfs");
        let s = j.create_session().expect("create");
        // (seq, event) of every append that returned Ok.
        let mut acknowledged: Vec<(u64, Event)> = vec![];
        let r = catch_unwind(AssertUnwindSafe(|| {
            for i in 0..2_000u64 {
                let event = Event::Custom {
                    kind: "blob".into(),
                    payload: noise(i),
                };
                match s.append(event.clone()) {
                    Ok(seq) => acknowledged.push((seq, event)),
                    Err(e) => return Some(e),
                }
            }
            None
        }));
        let failure = r
            .expect("no panic while the disk fills up")
            .expect("2 MiB cannot hold 8 MiB of events");
        let after = s.append(custom(0)).map(|_| ());
        // The disk as a crash would leave it, while the journal is open.
        copy_dir(&db, &copy);
        let id = s.id();
        let dropped = catch_unwind(AssertUnwindSafe(move || drop((s, j))));
        assert!(
            dropped.is_ok(),
            "dropping the journal on a full disk panicked"
        );
        (id, acknowledged, failure, after)
    };
    // The process restarts while the disk is still full.
    let reopened = catch_unwind(AssertUnwindSafe(|| {
        Journal::open(&db).and_then(|j| j.session(id)?.events(..))
    }))
    .expect("no panic reopening on a full disk");
    eprintln!(
        "reopened on the still-full disk: {:?}",
        reopened.as_ref().map(Vec::len)
    );
    match &reopened {
        Ok(events) => assert!(events.len() >= acknowledged.len()),
        Err(e) => assert!(matches!(e, Error::Io { .. } | Error::Storage(_)), "{e:?}"),
    }
    drop(mount);
    eprintln!(
        "full disk: {} events acknowledged, then: {failure}; the next append: {after:?}",
        acknowledged.len()
    );
    let enospc = |e: &Error| {
        matches!(e, Error::Io { source, .. } if source.kind() == ErrorKind::StorageFull)
            || e.to_string().contains("No space left on device")
    };
    assert!(
        matches!(
            failure,
            Error::Io { .. } | Error::Poisoned(_) | Error::Storage(_)
        ) && enospc(&failure),
        "a typed error that says the disk is full: {failure:?}"
    );
    // (The write-ahead log takes most of the 2 MiB as it is preallocated;
    // the first events fit beside it: 4 to 6 of them, as sled's own
    // background writes take more or less of what is left.)
    assert!(acknowledged.len() >= 2, "some events fit");
    assert!(
        matches!(&after, Err(e @ (Error::Io { .. } | Error::Poisoned(_))) if enospc(e)),
        "the writer refuses to go on after a failed write, saying why: {after:?}"
    );

    let j = Journal::open(&copy).expect("the copy opens");
    let s = j.session(id).expect("session");
    let events = s.events(..).expect("events");
    let lost: Vec<u64> = acknowledged
        .iter()
        .filter(|(seq, ev)| events.get(*seq as usize).map(|e| &e.event) != Some(ev))
        .map(|(seq, _)| *seq)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged events lost: seqs {lost:?} (the copy holds {} events)",
        lost.len(),
        acknowledged.len(),
        events.len()
    );
    assert!(!j.verify(None, |_| {}).expect("verify").has_damage());
}

/// While the disk is full, the reading commands still read the database
/// (`sessions`, `log` and `verify`: those that cannot open it for writing
/// read a private copy made in the temporary folder, elsewhere; `verify`
/// always does, and changes nothing).
#[test]
fn a_full_disk_still_lets_sessions_log_and_verify_read() {
    let base = tempfile::tempdir().expect("tempdir");
    let mount = match Mount::tmpfs(&base.path().join("small"), "2m") {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a 2 MiB tmpfs ({why})");
            return;
        }
    };
    let db = mount.dir.join("db");
    let id = {
        let j = Journal::open(&db).expect("open on the tmpfs");
        let s = j.create_session().expect("create");
        for i in 0..10 {
            s.append(custom(i)).expect("append");
        }
        s.id().to_string()
    };
    // Fill the disk to its last byte.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(mount.dir.join("filler")).expect("filler");
        let block = vec![0x5au8; 64 << 10];
        let mut size = block.len();
        while size > 0 {
            if f.write_all(&block[..size]).is_err() {
                size /= 2;
            }
        }
        let _ = f.sync_all();
    }
    for args in [
        vec!["--json", "sessions"],
        vec!["log", id.as_str()],
        vec!["verify"],
    ] {
        let before = tree(&db);
        let out = run_cli(&db, &args);
        assert!(
            out.status.success(),
            "{args:?} on a full disk: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        match args[args.len() - 1] {
            "sessions" => assert!(stdout.contains(&id), "{stdout}"),
            "verify" => assert!(stdout.contains("11 events"), "{stdout}"),
            _ => assert_eq!(stdout.lines().count(), 11, "{stdout}"),
        }
        if args == ["verify"] {
            assert!(tree(&db) == before, "verify changed the database");
        }
    }
    drop(mount);
}

#[test]
fn a_read_only_filesystem_is_a_clear_error_and_changes_nothing() {
    let base = tempfile::tempdir().expect("tempdir");
    // As root, permission bits do not stop writes: check, then use a
    // read-only remount instead.
    let probe = base.path().join("probe");
    std::fs::create_dir(&probe).expect("mkdir");
    let mut perms = std::fs::metadata(&probe).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
    std::fs::set_permissions(&probe, perms).expect("chmod");
    if std::fs::write(probe.join("x"), b"x").is_ok() {
        eprintln!("chmod 0555 does not stop this user (root): using a read-only tmpfs");
    }
    let mount = match Mount::tmpfs(&base.path().join("ro"), "8m") {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a tmpfs ({why})");
            return;
        }
    };
    let db = mount.dir.join("db");
    let file = mount.dir.join("run.ajournal");
    let (id, events) = {
        let j = Journal::open(&db).expect("open");
        let s = j.create_session().expect("create");
        for i in 0..3 {
            s.append(custom(i)).expect("append");
        }
        j.export_journal(&[], &file, |_| {}).expect("export");
        (s.id(), s.events(..).expect("events"))
    };
    // sled's threads may hold the files a few more milliseconds.
    let mut remounted = mount.remount_read_only();
    for _ in 0..50 {
        if remounted.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        remounted = mount.remount_read_only();
    }
    if let Err(why) = remounted {
        eprintln!("skipped: cannot remount read-only ({why})");
        return;
    }
    let before = tree(&mount.dir);

    let e = Journal::open(&db).expect_err("sled cannot open a database on a read-only filesystem");
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(30)),
        "{e:?}"
    );
    assert!(
        msg.contains(&db.display().to_string()) && msg.contains("Read-only file system"),
        "names the path and the cause: {msg}"
    );

    // The binary: read commands read a private copy (`verify` always
    // does; `sessions` says why it did); a write command is one line,
    // exit 1.
    for args in [&["verify"][..], &["sessions"]] {
        let out = run_cli(&db, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(if args[0] == "verify" {
                "4 events"
            } else {
                "events"
            }),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = run_cli(&db, &["demo"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "demo: {stderr}");
    assert!(
        stderr.lines().count() == 1 && stderr.contains("Read-only file system"),
        "demo: {stderr}"
    );

    // An exported file needs no write: it still reads.
    let j = Journal::open(&file).expect("an export opens read-only");
    assert_eq!(
        j.session(id).expect("session").events(..).expect("events"),
        events
    );
    drop(j);

    assert!(tree(&mount.dir) == before, "nothing changed");
}

/// A power cut once made sled lose part of its tree while the stream's last
/// key stayed: a scan of the stream ended early, and the session opened
/// shorter than acknowledged, `verify` saying ok. The open now refuses it
/// at the first missing seq, and `verify` names the missing range.
#[test]
fn a_scan_that_ends_before_the_last_key_is_a_gap_not_a_shorter_stream() {
    let (store, journal) = faulty();
    let s = journal.create_session().expect("create");
    for i in 0..49 {
        s.append(custom(i)).expect("append");
    }
    let id = s.id();
    drop(s);
    drop(journal);
    store.scan_end.store(30, Ordering::SeqCst);
    let journal = Journal::with_store(store.clone(), JournalConfig::default());
    match journal.session(id) {
        Err(Error::Corruption { seq: Some(30), .. }) => {}
        other => panic!("expected a gap at 30, got {:?}", other.map(|s| s.head())),
    }
    let report = journal.verify(Some(id), |_| {}).expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.seq == Some(30) && p.message.contains("30..50 are missing")),
        "{:?}",
        report.problems
    );
}
