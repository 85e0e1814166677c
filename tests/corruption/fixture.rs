//! The campaign's fixture: a database of demo-like sessions recorded as an
//! agent records them, its export, and where each record of the export
//! lies, so that a damaged copy can be judged record by record.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_journal::{
    Durability, Envelope, Journal, JournalConfig, Outcome, SessionId, ToolCallRecord,
};
use tempfile::TempDir;

use crate::common::{ajournal_records, copy_dir};

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
    /// The temporary directory that holds everything, cases included.
    pub dir: TempDir,
    /// The database (copy it before damaging it: [`Fixture::copy_db`]).
    pub db: PathBuf,
    /// The exported file's bytes.
    pub bytes: Vec<u8>,
    /// Where each record of the export lies, in file order.
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

/// The runs of the fixture, in order, and of the killed database's child
/// (run `n` has the shape `RUNS[n % 4]`): whether it crashes with a tool
/// call in doubt, the stream length at which it writes a snapshot, the
/// length of its long tool result.
pub const RUNS: [(bool, Option<u64>, usize); 4] = [
    (false, None, 0),
    (false, Some(9), 0),
    (true, None, 0),
    (false, None, 2048),
];

/// One run of the demo's shape, recorded with the `Evaluation` recorder:
/// two turns of two tool calls each, then the answer. `crash` stops it with
/// a tool call in doubt instead; `snapshot_at` writes a snapshot when the
/// stream reaches that length. The session is labelled `run` = `n`.
pub fn record_run(
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
        Self::build(n, false)
    }

    /// [`Fixture::new`] in a database whose pages are compressed
    /// (`JournalConfig::compress`).
    pub fn compressed() -> Fixture {
        Self::build(4, true)
    }

    fn build(n: usize, compress: bool) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("fixture.db");
        let file = dir.path().join("fixture.ajournal");
        // One process per run, as an agent's database lives: sled writes a
        // snapshot of its own when it reopens, so the file has a part that
        // snapshot covers and a log tail after it (the last run).
        let config = || JournalConfig {
            durability: Durability::Buffered,
            compress,
            // Small blocks: the fixture's events live in runs and blocks.
            block_bytes: 4 << 10,
            ..JournalConfig::default()
        };
        let runs = RUNS;
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
        let ranges = ajournal_records(&bytes);
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

    /// A path in the fixture's temporary directory, for a case's files.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Records in the export.
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
