//! A child's run under the shim ([`record`]): its operation log replayed
//! into a [`Timeline`], the states built from it checked
//! ([`Recorded::check`]), and a failing state explained by the files that
//! make it fail ([`Recorded::explain`]).

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_journal::SessionId;

use super::check::{Outcome, check};
use super::model::{Entry, Image, Policy, Timeline, read_image, write_image};
use super::oplog::{self, OpLog};
use crate::common::Rng;

/// The database's name inside the recorded directory.
pub const DB: &str = "db";

/// What part of the database a path is, for [`Recorded::explain`].
pub fn class_of(path: &str) -> &'static str {
    let rel = path.strip_prefix("db/").unwrap_or(path);
    match rel {
        "db" => "sled log",
        "conf" => "conf",
        "wal" => "write-ahead log",
        "acks" | "acks.tmp" => "acknowledgement log",
        "agent-journal.creating" => "creation marker",
        _ if rel.starts_with("blobs/") => "blobs",
        _ if rel.starts_with("frames/") => "frame segments",
        _ if rel.starts_with("snap.") => "sled snapshot",
        _ if rel.starts_with("snapshots/") => "snapshot files",
        _ => "directories and others",
    }
}

/// How one child runs.
#[derive(Clone, Copy)]
pub struct ChildRun {
    /// How long it appends (at most), then it closes the journal.
    pub ms: u64,
    /// A snapshot every this many events.
    pub snapshot_every: u64,
    /// Stop (and close the journal) once the database holds `"frames"`:
    /// half a MiB of large frames in segment files, or `"snapshot"`: a
    /// snapshot file.
    pub until: Option<&'static str>,
    /// SIGKILL it at a random moment (else it runs to its end).
    pub may_kill: bool,
    /// A database it creates compresses its pages (`JournalConfig::compress`).
    pub compress: bool,
}

/// A child's run: the directory before it, its operation log replayed,
/// and what it acknowledged.
pub struct Recorded {
    pub before: Image,
    pub log: OpLog,
    pub timeline: Timeline,
    /// `(record index, session, events acknowledged)` per acknowledgement.
    pub acks: Vec<(usize, SessionId, u64)>,
    /// The heads of the database before the child (all of it durable).
    pub known: HashMap<SessionId, u64>,
    pub killed: bool,
    /// Where states are built.
    work: PathBuf,
}

/// Compiles the shim into `dir`; prints one line and returns `None` if
/// there is no C compiler.
pub fn shim(dir: &Path) -> Option<PathBuf> {
    let shim = oplog::build_shim(dir);
    if shim.is_none() {
        println!("power loss: skipped: no C compiler found (cc, gcc or clang; or set CC)");
    }
    shim
}

/// Runs a child with the shim over a copy of `before` (a database whose
/// heads are `known`) in a new directory under `work`, and replays its log.
pub fn record(
    shim: &Path,
    work: &Path,
    before: Image,
    known: HashMap<SessionId, u64>,
    run: ChildRun,
    rng: &mut Rng,
) -> Recorded {
    let dir = tempfile::tempdir_in(work).expect("round dir");
    let root = dir.path().join("root");
    write_image(&before, &root);
    let log_path = dir.path().join("ops.log");
    let mark = dir.path().join("marks");
    let killed = run_child(shim, &root, &log_path, &mark, rng, run);
    let log = oplog::read(&log_path, &root);
    let timeline = Timeline::new(&before, &log, DB);
    // The model's check of itself: with everything kept, the end of the
    // log is what the child left in the page cache (unless a write was
    // cut short by the kill: its bytes are not in the log).
    if timeline.unfinished == 0 {
        let modelled = timeline.state(&log, log.ops.len(), Policy::Completed, rng);
        assert_model_matches(&modelled, &read_image(&root));
    }
    let acks = parse_marks(&timeline);
    Recorded {
        before,
        log,
        timeline,
        acks,
        known,
        killed,
        work: work.to_owned(),
    }
}

impl Recorded {
    /// Records in the log.
    pub fn len(&self) -> usize {
        self.log.ops.len()
    }

    /// The record of the child's `READY` mark (the end if none).
    pub fn ready(&self) -> usize {
        self.timeline
            .marks
            .iter()
            .find(|(_, m)| m.trim() == "READY")
            .map_or(self.len(), |(i, _)| *i)
    }

    /// What is acknowledged at a cut at `cut`: what the database held
    /// before the child, and every append acknowledged before the cut.
    pub fn acked_at(&self, cut: usize) -> HashMap<SessionId, u64> {
        let mut acked = self.known.clone();
        for (at, id, n) in &self.acks {
            if *at < cut {
                let e = acked.entry(*id).or_insert(0);
                *e = (*e).max(*n);
            }
        }
        acked
    }

    /// Whether a cut at `cut` comes before the database was durably created.
    pub fn before_creation(&self, cut: usize) -> bool {
        self.timeline.created_at.is_none_or(|c| cut < c)
    }

    /// Checks `image` as the state of a cut at `cut`, in a new directory
    /// (returned: it holds the database as the check left it, recovered).
    pub fn check_image(&self, image: &Image, cut: usize) -> (tempfile::TempDir, Outcome) {
        let dir = tempfile::tempdir_in(&self.work).expect("state dir");
        let root = dir.path().join("root");
        write_image(image, &root);
        let outcome = check(
            &root.join(DB),
            &self.acked_at(cut),
            self.before_creation(cut),
        );
        (dir, outcome)
    }

    /// Builds the state of a cut at `cut` under `policy` and checks it.
    pub fn check(
        &self,
        cut: usize,
        policy: Policy,
        rng: &mut Rng,
    ) -> (Image, tempfile::TempDir, Outcome) {
        let image = self.timeline.state(&self.log, cut, policy, rng);
        let (dir, outcome) = self.check_image(&image, cut);
        (image, dir, outcome)
    }

    /// Explains a failing `state` of a cut at `cut`: the smallest set of
    /// classes of files ([`class_of`]) that, put back as the page cache had
    /// them at the cut (everything else as the cut left it), make the state
    /// pass; `Err` if even the page cache's state fails.
    pub fn explain(&self, cut: usize, state: &Image) -> Result<BTreeSet<&'static str>, String> {
        let mut rng = Rng::new(1);
        let reference = self
            .timeline
            .state(&self.log, cut, Policy::Completed, &mut rng);
        let passes = |restore: &BTreeSet<&'static str>| {
            let mut img = state.clone();
            for (p, e) in &reference {
                if restore.contains(class_of(p)) {
                    img.insert(p.clone(), e.clone());
                }
            }
            img.retain(|p, _| !restore.contains(class_of(p)) || reference.contains_key(p));
            // Every file needs its directories.
            let dirs: Vec<String> = img
                .keys()
                .flat_map(|p| {
                    let parts: Vec<&str> = p.split('/').collect();
                    (1..parts.len())
                        .map(|n| parts[..n].join("/"))
                        .collect::<Vec<_>>()
                })
                .collect();
            for d in dirs {
                img.entry(d).or_insert(Entry::Dir);
            }
            let outcome = self.check_image(&img, cut).1;
            outcome.problems.is_empty()
                && (outcome.snapshot_problems == 0 || snapshots_explained(&img))
        };
        let differ: BTreeSet<&'static str> = reference
            .keys()
            .chain(state.keys())
            .filter(|p| reference.get(*p) != state.get(*p))
            .map(|p| class_of(p))
            .collect();
        if !passes(&differ) {
            return Err("the page cache's own state at the cut fails".into());
        }
        // Most often one class is enough: try each alone first, sled's
        // files first (they are the likeliest).
        let mut singles: Vec<&'static str> = differ.iter().copied().collect();
        singles.sort_by_key(|c| !["blobs", "conf", "sled log"].contains(c));
        for class in singles {
            let one = BTreeSet::from([class]);
            if passes(&one) {
                return Ok(one);
            }
        }
        let mut need = differ.clone();
        for class in differ {
            let mut without = need.clone();
            without.remove(class);
            if passes(&without) {
                need = without;
            }
        }
        Ok(need)
    }
}

/// Whether rejected snapshots in `image` are the known bug: the whole
/// `snapshots/` directory is missing.
pub fn snapshots_explained(image: &Image) -> bool {
    !image.contains_key("db/snapshots")
}

/// The problem of a state whose snapshots `verify` rejected.
pub fn snapshot_problem(outcome: &Outcome) -> String {
    format!(
        "verify rejected {} snapshots: {}",
        outcome.snapshot_problems,
        outcome.snapshot_messages.join("; ")
    )
}

/// Panics unless the model's final state is the directory the child left.
fn assert_model_matches(modelled: &Image, real: &Image) {
    let mut diffs = Vec::new();
    for (path, entry) in real {
        match (modelled.get(path), entry) {
            (Some(m), _) if m == entry => {}
            (Some(Entry::File(m)), Entry::File(r)) => {
                let first = m.iter().zip(r.iter()).position(|(a, b)| a != b);
                diffs.push(format!(
                    "{path}: {} bytes, modelled {} (first difference at {first:?})",
                    r.len(),
                    m.len()
                ));
            }
            (other, _) => diffs.push(format!("{path}: modelled as {other:?}")),
        }
    }
    for path in modelled.keys() {
        if !real.contains_key(path) {
            diffs.push(format!("{path}: modelled, not there"));
        }
    }
    assert!(
        diffs.is_empty(),
        "the model of the child's I/O does not match what it left on disk:\n{}",
        diffs.join("\n")
    );
}

/// The acknowledgements of the marks: `(record index, session, events
/// acknowledged)`.
fn parse_marks(timeline: &Timeline) -> Vec<(usize, SessionId, u64)> {
    let mut out = Vec::new();
    for (at, text) in &timeline.marks {
        for line in text.lines() {
            let mut parts = line.split(' ');
            if parts.next() != Some("ACK") {
                continue;
            }
            let (Some(id), Some(_first), Some(last)) = (parts.next(), parts.next(), parts.next())
            else {
                panic!("a malformed mark: {line:?}");
            };
            let id: SessionId = id.parse().expect("a session id in a mark");
            let last: u64 = last.parse().expect("a seq in a mark");
            out.push((*at, id, last + 1));
        }
    }
    out
}

/// Runs one child with the shim over `root`; returns whether it was killed
/// (else it closed the journal and exited on its own).
fn run_child(
    shim: &Path,
    root: &Path,
    log: &Path,
    mark: &Path,
    rng: &mut Rng,
    run: ChildRun,
) -> bool {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args([
            "powerloss::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AJ_PL_CHILD_DB", root.join(DB))
        .env("AJ_PL_CHILD_MARK", mark)
        .env("AJ_PL_CHILD_SEED", rng.next_u64().to_string())
        .env("AJ_PL_CHILD_MS", run.ms.to_string())
        .env("AJ_PL_CHILD_SNAPSHOT_EVERY", run.snapshot_every.to_string())
        .env("AJ_PL_CHILD_UNTIL", run.until.unwrap_or(""))
        .env("AJ_PL_CHILD_COMPRESS", if run.compress { "1" } else { "0" })
        .env("LD_PRELOAD", shim)
        .env("AJ_PL_DIR", root)
        .env("AJ_PL_LOG", log)
        .env("AJ_PL_MARK", mark)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "READY" {
                let _ = tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let ready = rx.recv_timeout(Duration::from_secs(120)).is_ok();
    let mut killed = false;
    // Three runs in four are killed at a random moment of their run; the
    // others close the journal and exit on their own.
    if ready && run.may_kill && rng.below(4) != 0 {
        let until = Instant::now() + Duration::from_millis(rng.below(run.ms as usize) as u64);
        while Instant::now() < until && child.try_wait().expect("try_wait").is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if child.try_wait().expect("try_wait").is_none() {
            child.kill().expect("SIGKILL the child");
            killed = true;
        }
    }
    let status = child.wait().expect("wait for the child");
    let out = reader.join().expect("stdout reader");
    let err = err_reader.join().expect("stderr reader");
    assert!(
        ready && (killed || status.success()),
        "the child failed ({status}, ready: {ready}); its stdout:\n{}\nits stderr:\n{err}",
        out.join("\n")
    );
    killed
}
