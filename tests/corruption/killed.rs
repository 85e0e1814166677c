//! The second fixture: a database whose writer was killed (SIGKILL) in the
//! middle of `Synced` appends, as a crash leaves it, never opened since.
//!
//! A child process (this test binary, re-run on the ignored test
//! `corruption::child_records_until_killed`) records demo-like runs (the
//! fixture's [`record_run`], run `n` shaped as `RUNS[n % 4]`) from two
//! threads, one session per run, and writes every acknowledged append to a
//! file it syncs (`<session> <first seq> <last seq>`, from the journal's
//! `after_append` hook, which runs once the append is durable). It closes
//! and reopens the journal every few runs, so that older events are only in
//! sled (and their heads in the acknowledgement log) while the newest are in the
//! write-ahead log as well. The parent kills it once a few hundred events
//! are acknowledged.
//!
//! The truth of the fixture is what was acknowledged ([`Killed::acked`]);
//! a stream may hold a few more events at its end, unacknowledged. Opening
//! an undamaged copy reads [`Killed::truth`]: it must hold every
//! acknowledged event, and every event in it must have the shape of the
//! child's deterministic content (the same run recorded in memory, ids and
//! timestamps aside), so a damaged copy is judged against it event for
//! event. It is built once per test run (the kill's timing differs from
//! run to run: what it was is printed) in cargo's temporary directory for
//! integration tests, where the next run removes it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agent_journal::{AfterAppend, Durability, Envelope, Event, Journal, JournalConfig, SessionId};
use serde_json::Value;

use super::fixture::{RUNS, Truth, record_run};
use crate::common::{Rng, copy_dir, raw_sled};

pub const CHILD_DB: &str = "AJ_CORRUPT_KILLED_DB";
pub const CHILD_ACKS: &str = "AJ_CORRUPT_KILLED_ACKS";
pub const CHILD_TEST: &str = "corruption::child_records_until_killed";

/// Threads of the child, each recording runs.
const THREADS: usize = 2;
/// Runs each thread records between two opens of the journal.
const RUNS_PER_OPEN: usize = 4;
/// The line the child writes to the acks file each time it has opened the
/// journal.
const OPENED: &str = "opened";

/// A record of the write-ahead log's current generation, as the kill left
/// it: its bytes `start..end` in `<db>/wal`, and the frames it holds. Each
/// record is in the file twice (once in each half, the second
/// copy 2 MiB after the first); this is one copy.
#[derive(Clone, Copy, Debug)]
pub struct WalRecord {
    pub start: usize,
    pub end: usize,
    pub session: SessionId,
    pub first_seq: u64,
    pub count: u64,
}

/// The killed database and what it holds.
pub struct Killed {
    /// The database as the kill left it (copy it before using it).
    pub db: PathBuf,
    /// Every session's stream, as opening an undamaged copy reads it.
    pub truth: Truth,
    /// Events acknowledged per session (`seq`s `0..n`).
    pub acked: BTreeMap<SessionId, u64>,
    /// Events sled itself held per session after the kill, before the log's
    /// replay (read with raw sled from a copy).
    pub held: BTreeMap<SessionId, u64>,
    /// The records of the log's current generation, in file order.
    pub wal: Vec<WalRecord>,
    /// What the kill left, for the output.
    pub about: String,
}

impl Killed {
    /// The fixture, built by the first caller of this test run.
    pub fn get() -> &'static Killed {
        static KILLED: OnceLock<Killed> = OnceLock::new();
        KILLED.get_or_init(build)
    }

    /// A copy of the killed database at `to`.
    pub fn copy_db(&self, to: &Path) {
        copy_dir(&self.db, to);
    }

    /// Whether sled held the frames of `r` (or the log alone had them).
    pub fn in_sled(&self, r: &WalRecord) -> bool {
        self.held.get(&r.session).copied().unwrap_or(0) >= r.first_seq + r.count
    }

    /// Whether the log's current generation holds `seq` of `id`.
    pub fn in_log(&self, id: SessionId, seq: u64) -> bool {
        self.wal
            .iter()
            .any(|r| r.session == id && r.first_seq <= seq && seq < r.first_seq + r.count)
    }

    /// Sessions and how many events sled holds of each, those with at
    /// least `min`: where raw damage to sled's frames can go.
    pub fn stored(&self, min: u64) -> Vec<(SessionId, u64)> {
        self.held
            .iter()
            .filter(|(_, h)| **h >= min)
            .map(|(id, h)| (*id, *h))
            .collect()
    }
}

/// The child: records runs with `Synced` appends until it is killed,
/// appending each acknowledged append to `acks` and syncing it.
pub fn child(db: &Path, acks: &Path) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(acks)
        .expect("child: the acks file");
    let file = Arc::new(Mutex::new(file));
    // One write per line: a kill cuts no line but the last.
    let line = move |l: String| {
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(l.as_bytes()).expect("child: write an ack");
        f.sync_data().expect("child: sync the acks");
    };
    let ack = line.clone();
    let hook: AfterAppend = Arc::new(move |id, first, last| ack(format!("{id} {first} {last}\n")));
    let next = AtomicUsize::new(0);
    // The parent kills the child long before this.
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let config = JournalConfig {
            durability: Durability::Synced,
            after_append: Some(hook.clone()),
            ..JournalConfig::default()
        };
        let j = Journal::open_with(db, config).expect("child: open");
        line(format!("{OPENED}\n"));
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    for _ in 0..RUNS_PER_OPEN {
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        let (crash, snapshot_at, long) = RUNS[n % RUNS.len()];
                        record_run(&j, n, crash, snapshot_at, long).expect("child: record a run");
                    }
                });
            }
        });
    }
}

/// Where this test run keeps the fixture: cargo's temporary directory for
/// integration tests, one folder per process. Folders of processes that
/// have ended are removed first.
fn root() -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corruption-killed");
    let me = std::process::id();
    if Path::new("/proc/self").exists()
        && let Ok(entries) = std::fs::read_dir(&base)
    {
        for e in entries.flatten() {
            let pid = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok());
            if pid.is_some_and(|p| p != me && !Path::new("/proc").join(p.to_string()).exists()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(me.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the killed fixture's folder");
    dir
}

fn build() -> Killed {
    let dir = root();
    let mut rng = Rng::new(super::seed() ^ 0x4B11_1ED0);
    let mut retried = Vec::new();
    for attempt in 0..4 {
        let at = dir.join(format!("kill-{attempt}"));
        let threshold = rng.between(250, 400) as u64;
        let since_open = rng.between(40, 90) as u64;
        let (db, acks) = run_and_kill(&at, threshold, since_open);
        match analyse(&at, db, &acks) {
            Ok(k) => {
                eprintln!("{}", k.about);
                return k;
            }
            Err(why) => retried.push(why),
        }
    }
    panic!("no kill left a usable fixture: {retried:?}");
}

/// An acknowledged append: session, first seq, last seq.
type Ack = (SessionId, u64, u64);

/// The acknowledged appends of the acks file (its whole lines), and how
/// many events were acknowledged since the journal was last opened.
fn read_acks(path: &Path) -> (Vec<Ack>, u64) {
    let bytes = std::fs::read(path).unwrap_or_default();
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(&bytes[..whole]);
    let since_open = text
        .lines()
        .rev()
        .take_while(|l| *l != OPENED)
        .map(|l| {
            let mut p = l.split(' ').skip(1).map(|n| n.parse::<u64>().unwrap_or(0));
            let (first, last) = (p.next().unwrap_or(0), p.next().unwrap_or(0));
            last - first + 1
        })
        .sum();
    let acks = text
        .lines()
        .filter(|l| *l != OPENED)
        .map(|l| {
            let mut p = l.split(' ');
            let (Some(id), Some(first), Some(last), None) =
                (p.next(), p.next(), p.next(), p.next())
            else {
                panic!("a malformed ack line {l:?}");
            };
            (
                id.parse().expect("ack: session id"),
                first.parse().expect("ack: first seq"),
                last.parse().expect("ack: last seq"),
            )
        })
        .collect();
    (acks, since_open)
}

/// Runs the child until it has acknowledged `threshold` events, at least
/// `since_open` of them since it last opened the journal (so that the log
/// holds that many), then kills it.
fn run_and_kill(dir: &Path, threshold: u64, since_open: u64) -> (PathBuf, Vec<Ack>) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let db = dir.join("killed.db");
    let acks = dir.join("acks");
    let out = std::fs::File::create(dir.join("child.stdout")).expect("stdout file");
    let err = std::fs::File::create(dir.join("child.stderr")).expect("stderr file");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--ignored",
            "--exact",
            CHILD_TEST,
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DB, &db)
        .env(CHILD_ACKS, &acks)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn the child");
    let stderr = || std::fs::read_to_string(dir.join("child.stderr")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (so_far, recent) = read_acks(&acks);
        let acked: u64 = so_far.iter().map(|(_, f, l)| l - f + 1).sum();
        if acked >= threshold && recent >= since_open {
            break;
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "the child ended on its own ({status}); its stderr:\n{}",
                stderr()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the child acknowledged {acked} events in 120 s; its stderr:\n{}",
                stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "the child must die by SIGKILL ({status}); its stderr:\n{}",
            stderr()
        );
    }
    (db, read_acks(&acks).0)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The record at `at` if it checks (`docs/format.md`), with its
/// generation.
fn wal_record_at(b: &[u8], at: usize) -> Option<(u64, WalRecord)> {
    if b.get(at..at + 4)? != b"AJW1" {
        return None;
    }
    let len = u32_at(b, at + 4)? as usize;
    let crc = u32_at(b, at + 8)?;
    let body = b.get(at + 12..(at + 12).checked_add(len)?)?;
    if len < 36 || crc32fast::hash(body) != crc {
        return None;
    }
    let session = SessionId::from_bytes(body[8..24].try_into().ok()?);
    Some((
        u64_at(body, 0)?,
        WalRecord {
            start: at,
            end: at + 12 + len,
            session,
            first_seq: u64_at(body, 24)?,
            count: u32_at(body, 32)? as u64,
        },
    ))
}

/// The records of the log's highest generation that hold frames, read as
/// the format describes (a record that does not check is skipped, reading
/// goes on at the next magic), both copies, in file order: the first
/// copies, then the second ones. The last records of the file are the
/// second copies of the last appends.
pub fn wal_current_generation(b: &[u8]) -> Vec<WalRecord> {
    let mut all = Vec::new();
    let mut at = 0;
    while at + 12 <= b.len() {
        match wal_record_at(b, at) {
            Some((g, r)) => {
                at = r.end;
                all.push((g, r));
            }
            None => match b[at + 1..].windows(4).position(|w| w == b"AJW1") {
                Some(i) => at += 1 + i,
                None => break,
            },
        }
    }
    let current = all.iter().map(|(g, _)| *g).max().unwrap_or(0);
    all.into_iter()
        .filter(|(g, r)| *g == current && r.count > 0)
        .map(|(_, r)| r)
        .collect()
}

/// An event with what differs from one recording to the next (ids,
/// timestamps) blanked.
fn shape(e: &Envelope) -> Value {
    fn blank(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if ["at", "created_at", "message_id", "evaluation_id", "session"]
                        .contains(&k.as_str())
                    {
                        *x = Value::Null;
                    } else {
                        blank(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(blank),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(e).expect("json");
    blank(&mut v);
    v
}

/// Run `n` of the child, recorded in memory: what the child writes.
fn reference(n: usize) -> Vec<Envelope> {
    let j = Journal::memory();
    let (crash, snapshot_at, long) = RUNS[n % RUNS.len()];
    record_run(&j, n, crash, snapshot_at, long).expect("record a reference run");
    let id = j.sessions().expect("sessions")[0];
    j.session(id).expect("session").events(..).expect("events")
}

/// Checks that `events` are a prefix of the child's run, ids and
/// timestamps aside.
fn check_shape(id: SessionId, events: &[Envelope]) {
    let n: usize = match events.first().map(|e| &e.event) {
        Some(Event::SessionOpened { labels }) => labels
            .iter()
            .find(|(k, _)| k == "run")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("session {id} has no run label: {labels:?}")),
        other => panic!("session {id} starts with {other:?}"),
    };
    let r = reference(n);
    assert!(
        events.len() <= r.len(),
        "session {id} (run {n}) holds {} events, the run has {}",
        events.len(),
        r.len()
    );
    for (e, o) in events.iter().zip(&r) {
        assert_eq!(
            shape(e),
            shape(o),
            "session {id} (run {n}) seq {}: not the child's event",
            e.seq
        );
    }
}

/// Reads what the kill left. `Err` if the log holds fewer than two records
/// of its generation (the kill came as the journal was closed or opened):
/// another kill is needed.
fn analyse(dir: &Path, db: PathBuf, acks: &[Ack]) -> Result<Killed, String> {
    let mut acked: BTreeMap<SessionId, u64> = BTreeMap::new();
    for &(id, first, last) in acks {
        let next = acked.entry(id).or_default();
        assert_eq!(first, *next, "acks of {id} follow each other");
        *next = last + 1;
    }
    let wal_bytes = std::fs::read(db.join("wal")).expect("the log");
    let wal = wal_current_generation(&wal_bytes);
    if wal.len() < 4 {
        return Err(format!(
            "{}: the log holds {} records of its generation",
            dir.display(),
            wal.len() / 2
        ));
    }
    // The same records, in the same order, in each half.
    let (firsts, seconds) = wal.split_at(wal.len() / 2);
    assert!(
        wal.len() % 2 == 0
            && firsts.iter().zip(seconds).all(
                |(a, b)| (a.session, a.first_seq, a.count) == (b.session, b.first_seq, b.count)
            ),
        "the log's two copies differ: {wal:?}"
    );

    // What an undamaged copy opens with: every acknowledged event, and no
    // damage.
    let opened = dir.join("opened.db");
    copy_dir(&db, &opened);
    let j = Journal::open_with(
        &opened,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
    .expect("open the killed database");
    assert_eq!(j.losses(), vec![], "the killed database, undamaged");
    let mut truth = Truth::new();
    for id in j.sessions().expect("sessions") {
        let s = j.session(id).expect("an undamaged session opens");
        assert_eq!(s.torn_tail(), None, "session {id} of the undamaged copy");
        let events = s.events(..).expect("events");
        check_shape(id, &events);
        truth.insert(id, events);
    }
    drop(j);
    for (id, a) in &acked {
        let held = truth.get(id).map_or(0, |t| t.len() as u64);
        assert!(
            held >= *a,
            "the kill alone lost acknowledged events: session {id} holds {held} of {a}"
        );
    }

    // What sled itself held, before the log's replay.
    let raw = dir.join("raw.db");
    copy_dir(&db, &raw);
    let mut held = BTreeMap::new();
    {
        let sled = raw_sled(&raw);
        let events = sled.open_tree("events").expect("tree events");
        for id in truth.keys() {
            // Each value holds the events from its key's seq on.
            let spans = crate::common::event_spans(&events, *id);
            let mut n = 0;
            for &(seq, count) in &spans {
                assert_eq!(
                    seq, n,
                    "sled holds session {id} with a gap after the kill: {spans:?}"
                );
                n += count;
            }
            held.insert(*id, n);
        }
    }
    let _ = std::fs::remove_dir_all(&raw);
    let _ = std::fs::remove_dir_all(&opened);

    let acknowledged: u64 = acked.values().sum();
    let stored: usize = truth.values().map(Vec::len).sum();
    let in_sled: u64 = held.values().sum();
    // Both copies of each record.
    let logged: u64 = wal.iter().map(|r| r.count).sum::<u64>() / 2;
    let last_two: Vec<&str> = wal[wal.len() - 2..]
        .iter()
        .map(|r| {
            if held.get(&r.session).copied().unwrap_or(0) >= r.first_seq + r.count {
                "in sled"
            } else {
                "only in the log"
            }
        })
        .collect();
    let about = format!(
        "[killed database fixture] {} sessions, {acknowledged} events acknowledged, {stored} in the \
         streams ({} unacknowledged at their ends); sled held {in_sled} before the log's replay; \
         the log's current generation holds {} records ({logged} events), the second-to-last and \
         last ones {last_two:?} ({})",
        truth.len(),
        stored as u64 - acknowledged,
        wal.len() / 2,
        db.display()
    );
    Ok(Killed {
        db,
        truth,
        acked,
        held,
        wal,
        about,
    })
}
