//! Helpers shared by the test modules. Look here before writing a helper of
//! your own:
//!
//! - journals on every store ([`backends`]);
//! - the `Custom` event most tests append ([`custom`]);
//! - the `agent-journal` binary, run as a user runs it ([`cli_command`],
//!   [`run_cli`]);
//! - a seeded random generator ([`Rng`]), so a failing case can be replayed
//!   from its seed;
//! - files and raw sled, for the tests that damage a database or an export
//!   ([`copy_dir`], [`tree`], [`raw_sled`], [`event_key`], [`unpack_event`],
//!   [`event_spans`], [`ajournal_records`]);
//! - whether a history is one OpenAI and Anthropic accept
//!   ([`sendable_to_both`]).
//!
//! Every database a test creates lives in a `tempfile::tempdir()`: take the
//! directory from there and keep the `TempDir` alive while the test runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agent_journal::{Durability, Event, Journal, JournalConfig, SessionId};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Journals.

/// A journal under test, with the directory that keeps it alive.
pub struct Backend {
    /// The store's name, for assertion messages: `"sled"`, `"memory"` or
    /// `"postgres"`.
    pub name: &'static str,
    /// The journal.
    pub journal: Journal,
    /// The temporary directory of an on-disk journal (`None` in memory).
    pub _dir: Option<TempDir>,
}

/// The same journal contract on every store: sled (on disk), memory, and
/// PostgreSQL (a schema of its own on the test server, when there is one:
/// see `pg_server.rs`).
pub fn backends() -> Vec<Backend> {
    backends_with(JournalConfig::default)
}

/// [`backends`] with a configuration of the test's own; the sled journal
/// always uses `Durability::Buffered`, which keeps the suite fast
/// (durability has tests of its own).
pub fn backends_with(config: impl Fn() -> JournalConfig) -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config();
    c.durability = Durability::Buffered;
    let sled = Journal::open_with(dir.path().join("db"), c).expect("open sled");
    #[allow(unused_mut)]
    let mut all = vec![
        Backend {
            name: "sled",
            journal: sled,
            _dir: Some(dir),
        },
        Backend {
            name: "memory",
            journal: Journal::memory_with(config()),
            _dir: None,
        },
    ];
    #[cfg(feature = "postgres")]
    if let Some(url) = crate::pg_server::fresh_url() {
        let mut c = config();
        c.durability = Durability::Buffered;
        all.push(Backend {
            name: "postgres",
            journal: Journal::open_with(url, c).expect("open postgres"),
            _dir: None,
        });
    }
    all
}

// ---------------------------------------------------------------------------
// Events.

/// The plain event of the tests: `Custom` of kind `"test"` whose payload is
/// `n` in 8 little-endian bytes, so a test can tell events apart and read
/// `n` back from a stored one.
pub fn custom(n: u64) -> Event {
    Event::Custom {
        kind: "test".into(),
        payload: n.to_le_bytes().to_vec(),
    }
}

// ---------------------------------------------------------------------------
// The binary.

/// `agent-journal --db DB`, ready for more arguments: the binary cargo built
/// for this test run, with stdin closed and `AGENT_JOURNAL_DB` unset (so
/// that only `--db` names the database). Add arguments, then run it with
/// `output()`, `spawn()` or a runner of your own (the corruption campaign
/// adds a time limit).
pub fn cli_command(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agent-journal"));
    c.arg("--db")
        .arg(db)
        .env_remove("AGENT_JOURNAL_DB")
        .stdin(Stdio::null());
    c
}

/// Runs `agent-journal --db DB ARGS...` to completion (see [`cli_command`]).
pub fn run_cli(db: &Path, args: &[&str]) -> Output {
    cli_command(db)
        .args(args)
        .output()
        .expect("run agent-journal")
}

// ---------------------------------------------------------------------------
// Randomness.

/// splitmix64: a strong mix of 64 bits. Turns nearby seeds (0, 1, 2...) and
/// structured values into unrelated ones.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A tiny seeded random generator (xorshift64): the same sequence from the
/// same seed on every machine, and no dependency. Tests that draw random
/// cases take their seed from an environment variable (`AJ_KILL_SEED`,
/// `AJ_CORRUPT_SEED`) and print it, so a failure can be replayed.
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`; nearby seeds give
    /// unrelated sequences (the seed goes through [`splitmix64`] first).
    pub fn new(seed: u64) -> Rng {
        Rng(splitmix64(seed) | 1)
    }

    /// A generator that starts from `state` as it is (no mixing). `state`
    /// must not be 0, the one state xorshift never leaves.
    pub fn from_state(state: u64) -> Rng {
        assert_ne!(state, 0, "xorshift64 needs a non-zero state");
        Rng(state)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (`n > 0`), close enough for tests.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// A byte that changes what it is XORed into (never 0).
    pub fn mask(&mut self) -> u8 {
        self.between(1, 255) as u8
    }

    /// `n` random bytes (the low byte of each draw): incompressible
    /// payloads, garbage to append to a file.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

// ---------------------------------------------------------------------------
// Files, and databases opened with raw sled.

/// A path as `&str`, for the binary's arguments (test paths are UTF-8).
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Copies a directory tree (a database, for a crash image or a pristine
/// copy to damage): its directories and regular files (not the read
/// service's socket of a database that is open).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("type");
        if kind.is_dir() {
            copy_dir(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Every file under `dir` with its bytes: compare two of them to show that
/// something changed nothing on disk.
pub fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.insert(p.clone(), std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

/// Opens a database with raw sled, as the tests that damage one do. A
/// journal of this process that was just dropped may still hold sled's file
/// lock for a few milliseconds (its thread-pool tasks finish first), so the
/// lock is retried for up to 2 s, as the library's own open does.
pub fn raw_sled(path: &Path) -> sled::Db {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let conf = std::fs::read(path.join("conf")).unwrap_or_default();
        let conf = String::from_utf8_lossy(&conf);
        let compressed = conf
            .lines()
            .any(|l| l.replace(' ', "") == "use_compression:true");
        match sled::Config::new()
            .path(path)
            .use_compression(compressed)
            .open()
        {
            Ok(db) => return db,
            Err(e) if std::time::Instant::now() < deadline && e.to_string().contains("lock") => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("raw sled open of {}: {e}", path.display()),
        }
    }
}

/// The key of event `seq` of session `id` in the `events` tree (and of its
/// snapshot in `snapshots`): the session's 16 bytes, then `seq` big-endian.
/// The journal keeps several events under one key (runs and blocks): a test
/// that changes one event's value calls [`unpack_event`] first.
pub fn event_key(id: SessionId, seq: u64) -> Vec<u8> {
    let mut k = id.as_bytes().to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// A run's event count, or a block pointer's count and `[segment, offset,
/// stored, raw]`, read as `docs/format.md` ("Runs and blocks") says: only
/// when the CRC checks. `None` for a value that holds one event.
pub fn run_or_block(v: &[u8]) -> Option<(u32, Option<[u64; 4]>)> {
    let u32_at = |at: usize| u32::from_le_bytes(v[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"));
    match v.first() {
        Some(0xF9) if v.len() >= 9 && crc32fast::hash(&v[..5]) == u32_at(5) => {
            Some((u32_at(1), None))
        }
        Some(0xFA) if v.len() == 41 && crc32fast::hash(&v[..37]) == u32_at(37) => Some((
            u32_at(1),
            Some([u64_at(5), u64_at(13), u64_at(21), u64_at(29)]),
        )),
        _ => None,
    }
}

/// The values of session `id` in tree `events`, in key order: the first
/// seq of each and the number of events it holds.
pub fn event_spans(events: &sled::Tree, id: SessionId) -> Vec<(u64, u64)> {
    events
        .scan_prefix(id.as_bytes())
        .map(|item| {
            let (k, v) = item.expect("item");
            let seq = u64::from_be_bytes(k[16..24].try_into().expect("seq"));
            (seq, run_or_block(&v).map_or(1, |(n, _)| u64::from(n)))
        })
        .collect()
}

/// Rewrites the run or block of session `id` that holds event `seq` (in
/// the closed database at `db`, whose tree `events` is `events`) as one
/// value per event, a layout the journal reads as well: then the event's
/// value can be changed, removed or swapped alone. Returns whether `seq`
/// has a value of its own now.
pub fn unpack_event(db: &Path, events: &sled::Tree, id: SessionId, seq: u64) -> bool {
    let Some(item) = events
        .range(event_key(id, 0)..=event_key(id, seq))
        .next_back()
    else {
        return false;
    };
    let (k, v) = item.expect("item");
    let at = u64::from_be_bytes(k[16..24].try_into().expect("seq"));
    let Some((count, block)) = run_or_block(&v) else {
        return at == seq;
    };
    if seq >= at + u64::from(count) {
        return false;
    }
    let body = match block {
        None => v[9..].to_vec(),
        Some([segment, offset, stored, raw]) => {
            let file = db.join("frames").join(format!("{segment:020}.seg"));
            let bytes = std::fs::read(&file).expect("segment");
            let stored = &bytes[offset as usize..(offset + stored) as usize];
            zstd::block::decompress(stored, raw as usize).expect("a block decompresses")
        }
    };
    events.remove(&k).expect("remove");
    let mut pos = 0;
    for i in 0..u64::from(count) {
        let len = u32::from_le_bytes(body[pos..pos + 4].try_into().expect("len")) as usize;
        let element = &body[pos + 4..pos + 4 + len];
        events
            .insert(event_key(id, at + i), element)
            .expect("insert");
        pos += 4 + len;
    }
    true
}

/// The records of an exported journal file as written: the
/// `(start, end)` byte range of each, length prefix included. Panics unless
/// the records run end to end from the magic to the trailer.
pub fn ajournal_records(bytes: &[u8]) -> Vec<(usize, usize)> {
    use agent_journal::format::ajournal::{MAGIC, TRAILER_LEN, TRAILER_MARK};
    assert_eq!(&bytes[..MAGIC.len()], MAGIC, "the current format");
    let mut pos = MAGIC.len();
    let mut out = Vec::new();
    loop {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes"));
        if len == TRAILER_MARK {
            break;
        }
        out.push((pos, pos + 4 + len as usize));
        pos += 4 + len as usize;
    }
    assert_eq!(pos + TRAILER_LEN, bytes.len(), "records, then the trailer");
    out
}

/// Byte offsets of the records of an exported journal file.
pub fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    ajournal_records(bytes)
        .into_iter()
        .map(|(start, _)| start)
        .collect()
}

/// Keeps the messages of sled's own panics (which the library contains and
/// reports as corruption) off stderr, as the command line does; any other
/// panic is printed as usual.
pub fn quiet_sled_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_sled = info
            .location()
            .is_some_and(|l| l.file().contains("sled-0.34"));
        if !in_sled {
            default(info);
        }
    }));
}

/// Output in JSON Lines (`sessions` and `log` under `--json`) as one JSON
/// array of its lines.
pub fn json_lines(bytes: &[u8]) -> serde_json::Value {
    let text = std::str::from_utf8(bytes).expect("utf-8 output");
    serde_json::Value::Array(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
            })
            .collect(),
    )
}

/// Runs `agent-journal --db DB ARGS...` and returns its exit code and its
/// peak resident memory in bytes, as its `VmHWM` read every 2 ms while it
/// runs (the largest reading: a lower bound that catches any large
/// allocation the process keeps for more than a moment). `wait4`'s
/// `ru_maxrss` cannot tell: it counts the memory of the test process that
/// spawned the child.
pub fn peak_memory(db: &std::path::Path, args: &[&str]) -> (Option<i32>, u64) {
    let mut child = cli_command(db)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        // Only once the child runs the binary (before its exec, the
        // status is the test process's).
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && status.starts_with("Name:\tagent-journal")
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb * 1024);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            return (status.code(), peak);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Two imports' `(input bytes, peak memory)`, the second of the longer
/// input: the memory it added must be less than the input it added (an
/// import that holds a message at a time, not the input).
pub fn assert_memory_grows_less_than_input(runs: &[(u64, u64)]) {
    let (added, grew) = (runs[1].0 - runs[0].0, runs[1].1.saturating_sub(runs[0].1));
    assert!(
        grew < added,
        "{} MiB more input took {} MiB more memory",
        added >> 20,
        grew >> 20
    );
}

/// Whether this runs as root with `runuser` (as in CI): the tests that need
/// a second Unix user run then, and say that they skip otherwise.
pub fn can_switch_user() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let ok = root && Path::new("/usr/sbin/runuser").exists();
    if !ok {
        eprintln!("notice: not root (or no runuser): skipping a second-user test");
    }
    ok
}

/// `program args` as the user `nobody`, with `env` set (call
/// [`can_switch_user`] first).
pub fn run_as_nobody(program: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new("/usr/sbin/runuser");
    c.args(["-u", "nobody", "--", program]).args(args);
    c.env_remove("AGENT_JOURNAL_DB");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runuser")
}

/// `agent-journal --db DB ARGS` as the user `nobody`; `None` when this
/// cannot switch users ([`can_switch_user`]).
pub fn cli_as_nobody(db: &Path, args: &[&str]) -> Option<Output> {
    if !can_switch_user() {
        return None;
    }
    let mut all = vec!["--db", path_str(db)];
    all.extend_from_slice(args);
    Some(run_as_nobody(
        env!("CARGO_BIN_EXE_agent-journal"),
        &all,
        &[],
    ))
}

// ---------------------------------------------------------------------------
// Provider histories.

/// `Ok` when `messages`, sent as they are, pass the OpenAI and the Anthropic
/// checks of `agent_journal::provider::validate` (every tool call answered
/// right after it, no result without its call); else which check failed.
pub fn sendable_to_both(
    messages: &[agent_journal::conversation::ChatInputMessage],
) -> Result<(), String> {
    use agent_journal::EvaluationId;
    use agent_journal::conversation::ConversationMessage;
    use agent_journal::provider::ConversationFormat;
    use agent_journal::provider::validate;
    let eval = EvaluationId::new();
    let inner: Vec<_> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut c = ConversationMessage::new(m.role, m.text());
            c.tool_calls = m.tool_calls.clone();
            c.tool_call_id = m.tool_call_id.clone();
            c.to_inner(eval, i as u64)
        })
        .collect();
    let openai = ConversationFormat::OpenAi.to_json(&inner);
    let openai = openai.as_array().ok_or("OpenAI: not an array")?;
    validate::openai(openai).map_err(|e| format!("OpenAI: {e}"))?;
    validate::anthropic(&ConversationFormat::Anthropic.to_json(&inner))
        .map_err(|e| format!("Anthropic: {e}"))
}

/// One field set of a captured `tracing` event.
pub type Fields = std::collections::BTreeMap<String, String>;

/// A `tracing` subscriber that keeps every event's level and fields.
#[derive(Clone, Default)]
pub struct Capture(pub std::sync::Arc<std::sync::Mutex<Vec<(tracing::Level, Fields)>>>);

struct Visitor<'a>(&'a mut Fields);

impl tracing::field::Visit for Visitor<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Capture {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::always()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        self.0
            .lock()
            .expect("lock")
            .push((*event.metadata().level(), fields));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl Capture {
    /// The fields of the captured events at `level` whose message is `message`.
    pub fn events(&self, level: tracing::Level, message: &str) -> Vec<Fields> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(l, f)| *l == level && f.get("message").map(String::as_str) == Some(message))
            .map(|(_, f)| f.clone())
            .collect()
    }
}
