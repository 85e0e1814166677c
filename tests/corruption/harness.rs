//! The campaign's tools: a seeded RNG, a fixture of real sessions and their
//! export, a tally that turns every damaged input into a verdict, and the
//! binary run with a time limit.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::common::copy_dir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_journal::{
    Durability, Envelope, Event, Journal, JournalConfig, Outcome, SALVAGE_GAP_KIND, SessionId,
    ToolCallRecord,
};
use tempfile::TempDir;

/// xorshift64: tiny, seeded, the same sequence everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so that nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// A byte that changes what it is XORed into.
    pub fn mask(&mut self) -> u8 {
        self.between(1, 255) as u8
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Cases per damage kind: `AJ_CORRUPT_CASES`, else `default`.
pub fn cases(default: usize) -> usize {
    std::env::var("AJ_CORRUPT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The campaign's seed: `AJ_CORRUPT_SEED`, else a constant.
pub fn seed() -> u64 {
    std::env::var("AJ_CORRUPT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00A6_E47C_0FFE)
}

/// Every session's events, as recorded.
pub type Truth = BTreeMap<SessionId, Vec<Envelope>>;

/// One record of the exported file: its bytes `start..end`, whose event it is.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub start: usize,
    pub end: usize,
    pub session: SessionId,
    pub seq: u64,
}

/// A database of demo-like sessions (closed), its export, and what they hold.
pub struct Fixture {
    pub dir: TempDir,
    pub db: PathBuf,
    pub bytes: Vec<u8>,
    pub records: Vec<Record>,
    /// Every session of the database.
    pub truth: Truth,
    /// The sessions of the exported file.
    pub exported: Truth,
    /// The seq of each session's snapshot (opening replays only after it).
    pub snapshots: BTreeMap<SessionId, u64>,
}

const SYSTEM: &str =
    "You are a careful file assistant. Use the tools to work in the sandbox folder.";

/// One run of the demo's shape, recorded with the `Evaluation` recorder:
/// two turns of two tool calls each, then the answer. `crash` stops it with
/// a tool call in doubt instead; `snapshot_at` writes a snapshot when the
/// stream reaches that length.
fn record_run(
    journal: &Journal,
    n: usize,
    crash: bool,
    snapshot_at: Option<u64>,
    long_result: usize,
) -> agent_journal::Result<()> {
    let s = journal.create_session_with_labels(vec![
        ("agent".into(), "demo".into()),
        ("run".into(), n.to_string()),
    ])?;
    let eval = s.start_evaluation("demo", "file-assistant")?;
    let taken = std::cell::Cell::new(false);
    let snap = || -> agent_journal::Result<()> {
        if snapshot_at.is_some_and(|at| s.head() >= at) && !taken.get() {
            s.snapshot()?;
            taken.set(true);
        }
        Ok(())
    };
    eval.system(SYSTEM)?;
    eval.user(format!(
        "Run {n}: write a short todo list to notes.txt, then count its words and list the folder."
    ))?;
    let call = |id: &str, name: &str, args: serde_json::Value| {
        ToolCallRecord::new(format!("call_{n}_{id}"), name, args.to_string())
    };
    eval.assistant(
        "I'll write the todo list first.",
        vec![
            call(
                "w1",
                "write_file",
                serde_json::json!({"path": "notes.txt", "content": "buy milk\nfix the flaky test\n"}),
            ),
            call(
                "w2",
                "write_file",
                serde_json::json!({"path": "README.txt", "content": "sandbox\n"}),
            ),
        ],
    )?;
    for id in ["w1", "w2"] {
        eval.tool_started(format!("call_{n}_{id}"))?;
        snap()?;
        eval.tool_result(format!("call_{n}_{id}"), format!("wrote {} bytes", 20 + n))?;
    }
    eval.assistant(
        "Now I'll count the words and list the folder.",
        vec![
            call("c", "word_count", serde_json::json!({"path": "notes.txt"})),
            call("l", "list_dir", serde_json::json!({"path": "."})),
        ],
    )?;
    eval.tool_started(format!("call_{n}_c"))?;
    eval.tool_result(format!("call_{n}_c"), "6 words")?;
    snap()?;
    eval.tool_started(format!("call_{n}_l"))?;
    if crash {
        // The process "dies" here: list_dir is in doubt.
        return Ok(());
    }
    eval.tool_result(format!("call_{n}_l"), "x".repeat(long_result.max(20)))?;
    eval.assistant("Done: notes.txt has 6 words.", vec![])?;
    eval.finish(Outcome::Succeeded)?;
    snap()
}

impl Fixture {
    /// Four sessions: finished; finished with a snapshot mid-stream; crashed
    /// with a tool call in doubt; finished with a 2 KiB tool result. The
    /// export holds all of them.
    pub fn new() -> Fixture {
        Self::exporting(4)
    }

    /// The same, with only the first `n` sessions in the export.
    pub fn exporting(n: usize) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("fixture.db");
        let file = dir.path().join("fixture.ajournal");
        // One process per run, as an agent's database lives: sled writes a
        // snapshot of its own when it reopens, so the file has a part that
        // snapshot covers and a log tail after it (the last run).
        let config = || JournalConfig {
            durability: Durability::Buffered,
            ..JournalConfig::default()
        };
        let runs: [(bool, Option<u64>, usize); 4] = [
            (false, None, 0),
            (false, Some(9), 0),
            (true, None, 0),
            (false, None, 2048),
        ];
        let mut truth = Truth::new();
        let mut exported = Truth::new();
        let mut snapshots = BTreeMap::new();
        for (run, (crash, snapshot_at, long)) in runs.into_iter().enumerate() {
            let j = Journal::open_with(&db, config()).expect("open fixture");
            record_run(&j, run, crash, snapshot_at, long).expect("record a run");
            j.flush().expect("flush");
            if run + 1 < runs.len() {
                continue;
            }
            for id in j.sessions().expect("sessions") {
                let s = j.session(id).expect("session");
                truth.insert(id, s.events(..).expect("events"));
                // Loaded in this process (earlier runs) or created by it.
                if let Some(seq) = s.load_stats().snapshot_seq {
                    snapshots.insert(id, seq);
                }
            }
            assert!(
                truth.len() == 4 && truth.values().all(|t| t.len() >= 12),
                "demo-like sessions"
            );
            assert_eq!(snapshots.len(), 1, "run 1 has a snapshot: {snapshots:?}");
            exported = truth.iter().take(n).map(|(k, v)| (*k, v.clone())).collect();
            let ids: Vec<SessionId> = exported.keys().copied().collect();
            let n = j.export_journal(&ids, &file, |_| {}).expect("export");
            assert_eq!(n as usize, exported.values().map(Vec::len).sum::<usize>());
        }
        let bytes = std::fs::read(&file).expect("read export");
        let order: Vec<(SessionId, u64)> = exported
            .iter()
            .flat_map(|(id, evs)| evs.iter().map(move |e| (*id, e.seq)))
            .collect();
        let ranges = crate::common::ajournal_records(&bytes);
        assert_eq!(ranges.len(), order.len(), "a record per exported event");
        let records = ranges
            .into_iter()
            .zip(order)
            .map(|((start, end), (session, seq))| Record {
                start,
                end,
                session,
                seq,
            })
            .collect();
        Fixture {
            dir,
            db,
            bytes,
            records,
            truth,
            exported,
            snapshots,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn total(&self) -> usize {
        self.records.len()
    }

    /// Start of the original record holding byte `pos`: 0 in the magic,
    /// the file's length past its end.
    pub fn record_start(&self, pos: usize) -> usize {
        if pos < agent_journal::format::ajournal::MAGIC.len() {
            return 0;
        }
        self.records
            .iter()
            .rev()
            .find(|r| r.start <= pos)
            .map(|r| r.start)
            .unwrap_or(self.bytes.len())
            .min(self.bytes.len())
    }

    /// Records that end before the record holding byte `pos` starts.
    pub fn records_before(&self, pos: usize) -> Vec<(SessionId, u64)> {
        let start = self.record_start(pos);
        self.records
            .iter()
            .filter(|r| r.end <= start)
            .map(|r| (r.session, r.seq))
            .collect()
    }

    /// Records whose bytes are unchanged at the same place in `damaged`.
    pub fn intact_in_place(&self, damaged: &[u8]) -> Vec<(SessionId, u64)> {
        self.records
            .iter()
            .filter(|r| damaged.get(r.start..r.end) == Some(&self.bytes[r.start..r.end]))
            .map(|r| (r.session, r.seq))
            .collect()
    }

    /// A copy of the fixture database at `name`.
    pub fn copy_db(&self, name: &str) -> PathBuf {
        let to = self.path(name);
        copy_dir(&self.db, &to);
        to
    }
}

/// First byte where `a` and `b` differ (the shorter length if one is a
/// prefix of the other), `None` if equal.
pub fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        return None;
    }
    Some(
        a.iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len())),
    )
}

/// Compares what a journal returned for a session with the original: it must
/// be a prefix, event for event. `Err` describes the first difference.
pub fn check_prefix(truth: &Truth, id: SessionId, got: &[Envelope]) -> Result<(), String> {
    let Some(t) = truth.get(&id) else {
        return Err(format!("session {id} is not in the original"));
    };
    if got.len() > t.len() {
        return Err(format!(
            "session {id}: {} events returned, the original has {}",
            got.len(),
            t.len()
        ));
    }
    for (g, o) in got.iter().zip(t) {
        if g != o {
            return Err(format!(
                "session {id} seq {}: returned {:?}, the original is {:?}",
                o.seq, g, o
            ));
        }
    }
    Ok(())
}

/// What a salvaged database holds, mapped back to the original: every
/// `(session, original seq)` it contains. Markers of lost records and the
/// stand-in `SessionOpened` are skipped; any other event that is not the
/// original's, in the original's order, is wrong data.
pub fn salvaged_records(dest: &Path, truth: &Truth) -> Result<BTreeSet<(SessionId, u64)>, Verdict> {
    let j = Journal::open(dest).map_err(|e| Verdict::Fail(format!("salvaged db: {e}")))?;
    let report = j
        .verify(None, |_| {})
        .map_err(|e| Verdict::Fail(format!("verify of the salvaged db: {e}")))?;
    if !report.is_clean() {
        return Err(Verdict::Fail(format!(
            "the salvaged db does not verify clean: {:?}",
            report.problems
        )));
    }
    let mut present = BTreeSet::new();
    for id in j.sessions().map_err(|e| Verdict::Fail(e.to_string()))? {
        let Some(t) = truth.get(&id) else {
            return Err(Verdict::Wrong(format!("salvage made up session {id}")));
        };
        let events = j
            .session(id)
            .and_then(|s| s.events(..))
            .map_err(|e| Verdict::Fail(format!("salvaged session {id}: {e}")))?;
        let mut cursor = 0usize;
        for env in events {
            let marker =
                matches!(&env.event, Event::Custom { kind, .. } if kind == SALVAGE_GAP_KIND);
            let stand_in = env.seq == 0
                && matches!(&env.event, Event::SessionOpened { labels }
                    if labels.iter().any(|(k, _)| k == "salvaged"));
            if marker || stand_in {
                continue;
            }
            let Some(k) = t[cursor..]
                .iter()
                .position(|o| o.at == env.at && o.event == env.event)
            else {
                return Err(Verdict::Wrong(format!(
                    "salvaged session {id} seq {} holds {:?}, which is not the original's next event",
                    env.seq, env.event
                )));
            };
            present.insert((id, t[cursor + k].seq));
            cursor += k + 1;
        }
    }
    Ok(present)
}

/// How one damaged input ended.
#[derive(Debug)]
pub enum Verdict {
    /// Opened; the damage was reported with its place; what was returned is
    /// the original's prefix.
    Recovered,
    /// Refused with `Corruption` carrying a location (or, damage to the
    /// magic, as not a journal).
    Detected,
    /// The bytes changed but not the content (records of two sessions
    /// reordered, which the format allows).
    Harmless,
    /// Cannot be detected by design (sled rolling its own log back).
    Undetectable(&'static str),
    /// Data returned that is not the original's: the worst outcome.
    Wrong(String),
    /// Any other failure of the promise (damage not located, lost records
    /// without a report, a wrong exit code, ...).
    Fail(String),
}

/// Counts verdicts of one damage kind and asserts the promise at the end.
pub struct Tally {
    pub kind: String,
    pub tried: usize,
    pub recovered: usize,
    pub detected: usize,
    pub harmless: usize,
    /// Cases nothing can detect, by reason.
    pub undetectable: BTreeMap<&'static str, usize>,
    pub panics: usize,
    pub wrong: usize,
    pub failures: Vec<String>,
    /// Findings that are known bugs with their own ignored tests, by name.
    pub soft: BTreeMap<String, usize>,
    /// Observations about sled itself (not our code), by name.
    pub sled: BTreeMap<String, usize>,
}

impl Tally {
    pub fn new(kind: &str) -> Tally {
        Tally {
            kind: kind.to_owned(),
            tried: 0,
            recovered: 0,
            detected: 0,
            harmless: 0,
            undetectable: BTreeMap::new(),
            panics: 0,
            wrong: 0,
            failures: Vec::new(),
            soft: BTreeMap::new(),
            sled: BTreeMap::new(),
        }
    }

    /// Runs one case under `catch_unwind`. `f` gets a list to note soft
    /// findings in.
    pub fn case(&mut self, what: impl FnOnce() -> String, f: impl FnOnce(&mut Notes) -> Verdict) {
        self.tried += 1;
        let mut notes = Notes::default();
        let r = catch_unwind(AssertUnwindSafe(|| f(&mut notes)));
        for s in notes.soft {
            *self.soft.entry(s).or_default() += 1;
        }
        for s in notes.sled {
            *self.sled.entry(s).or_default() += 1;
        }
        match r {
            Ok(Verdict::Recovered) => self.recovered += 1,
            Ok(Verdict::Detected) => self.detected += 1,
            Ok(Verdict::Harmless) => self.harmless += 1,
            Ok(Verdict::Undetectable(why)) => *self.undetectable.entry(why).or_default() += 1,
            Ok(Verdict::Wrong(m)) => {
                self.wrong += 1;
                self.failures
                    .push(format!("{}: SILENT WRONG DATA: {m}", what()));
            }
            Ok(Verdict::Fail(m)) => self.failures.push(format!("{}: {m}", what())),
            Err(p) => {
                self.panics += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                self.failures.push(format!("{}: PANIC: {msg}", what()));
            }
        }
    }

    pub fn add(&mut self, other: Tally) {
        self.tried += other.tried;
        self.recovered += other.recovered;
        self.detected += other.detected;
        self.harmless += other.harmless;
        for (k, v) in other.undetectable {
            *self.undetectable.entry(k).or_default() += v;
        }
        self.panics += other.panics;
        self.wrong += other.wrong;
        self.failures.extend(other.failures);
        for (k, v) in other.soft {
            *self.soft.entry(k).or_default() += v;
        }
        for (k, v) in other.sled {
            *self.sled.entry(k).or_default() += v;
        }
    }

    pub fn summary(&self) -> String {
        let mut s = format!(
            "[{}] damaged inputs tried: {}, detected or recovered: {}, panics: {}, silent wrong data: {} \
             (recovered {}, detected {}, harmless reorder {}, undetectable {} {:?})",
            self.kind,
            self.tried,
            self.recovered + self.detected,
            self.panics,
            self.wrong,
            self.recovered,
            self.detected,
            self.harmless,
            self.undetectable.values().sum::<usize>(),
            self.undetectable
        );
        if !self.soft.is_empty() {
            s.push_str(&format!("; known bugs hit: {:?}", self.soft));
        }
        if !self.sled.is_empty() {
            s.push_str(&format!("; sled: {:?}", self.sled));
        }
        s
    }

    /// Prints the summary and fails on any panic, wrong data or failure.
    pub fn finish(self) {
        eprintln!("{}", self.summary());
        let shown: Vec<&String> = self.failures.iter().take(20).collect();
        assert!(
            self.panics == 0 && self.wrong == 0 && self.failures.is_empty(),
            "{}\n{} failure(s), first ones:\n{}",
            self.summary(),
            self.failures.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Findings noted while a case runs.
#[derive(Default)]
pub struct Notes {
    pub soft: Vec<String>,
    pub sled: Vec<String>,
}

/// A run of the binary (or of a child test process).
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn panicked(&self) -> bool {
        self.code == Some(101) || self.stderr.contains("panicked at")
    }
}

/// Runs `cmd` with stdout and stderr in files under `scratch`, killing it
/// after `limit`.
pub fn run_limited(mut cmd: Command, limit: Duration, scratch: &Path) -> Out {
    use std::os::unix::process::ExitStatusExt;
    std::fs::create_dir_all(scratch).expect("scratch");
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait after kill");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        stdout: String::from_utf8_lossy(&std::fs::read(&out_path).unwrap_or_default()).into(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap_or_default()).into(),
    }
}

/// `agent-journal --db DB ARGS...`, limited to 60 s.
pub fn aj(db: &Path, args: &[&str], scratch: &Path) -> Out {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agent-journal"));
    c.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("AGENT_JOURNAL_DB");
    run_limited(c, Duration::from_secs(60), scratch)
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
