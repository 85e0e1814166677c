//! The example programs (`examples/*.rs`) run to success and print what they
//! claim. Each test runs the already-built example binary and checks its exit
//! status and a key line of its output; the examples assert their own claims,
//! so a broken one exits with a failure here.
//!
//! Each example records into a database the CLI can open: the test passes
//! it a temporary `--db` (so the examples run in parallel and leave nothing
//! in the checkout) and runs the `agent-journal ... log SESSION` command the
//! example prints at its end.
//!
//! A plain `cargo test` builds the examples before it runs the tests;
//! `cargo test --test integration` does not, so a binary older than a source
//! file it was built from fails its test, asking for `cargo build --examples`.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longer than any example needs, even on a loaded 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `target/<profile>/examples/NAME ARGS...` in `cwd` and returns its
/// stdout; panics with the output if it fails or runs past [`TIMEOUT`]
/// (then it is killed).
fn run_example_in(cwd: &Path, name: &str, args: &[&OsStr]) -> String {
    // The test binary is target/<profile>/deps/integration-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let mut path: PathBuf = profile_dir.join("examples").join(name);
    path.set_extension(std::env::consts::EXE_EXTENSION);
    assert!(
        path.is_file(),
        "example binary {} is missing: run `cargo test` (which builds the examples) \
         or `cargo build --examples` first",
        path.display()
    );
    assert_fresh(&path, name);
    let mut child = Command::new(&path)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    // Read both pipes on threads, so a chatty example cannot block on a full pipe.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the example") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    match status {
        None => panic!(
            "example {name} ran longer than {TIMEOUT:?} and was killed:\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        ),
        Some(status) => assert!(
            status.success(),
            "example {name} failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        ),
    }
    stdout
}

/// Fails if a source file the binary was built from is newer than it, as
/// listed by the dep-info file cargo writes beside it (`NAME.d`).
fn assert_fresh(binary: &Path, name: &str) {
    let mtime = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let Ok(dep_info) = std::fs::read_to_string(binary.with_file_name(format!("{name}.d"))) else {
        return; // no dep-info: nothing to compare with
    };
    let built = mtime(binary).expect("the binary's mtime");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // "binary: dep dep ...", spaces inside paths escaped as "\ ".
    let deps = dep_info.lines().next().unwrap_or("").replace("\\ ", "\0");
    let deps = deps.split_once(": ").map_or("", |(_, d)| d);
    for dep in deps
        .split_whitespace()
        .map(|d| root.join(d.replace('\0', " ")))
    {
        let newer = mtime(&dep).is_some_and(|t| t > built);
        assert!(
            !newer,
            "example binary {} is older than {}: run `cargo build --examples` (a plain \
             `cargo test` builds the examples; `cargo test --test integration` does not)",
            binary.display(),
            dep.display()
        );
    }
}

/// Runs example NAME with a temporary `--db`, then each
/// `look at it: agent-journal --db DB log SESSION` line it printed with the
/// CLI binary: the database opens and the session has events. Returns the
/// example's stdout.
fn run_example(name: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("recorded.db");
    let out = run_example_in(dir.path(), name, &[OsStr::new("--db"), db.as_os_str()]);
    let prefix = format!("look at it: agent-journal --db {} log ", db.display());
    let sessions: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    assert!(!sessions.is_empty(), "no `{prefix}SESSION` line in:\n{out}");
    for session in sessions {
        let log = Command::new(env!("CARGO_BIN_EXE_agent-journal"))
            .arg("--db")
            .arg(&db)
            .args(["log", session, "--no-pager"])
            .env_remove("AGENT_JOURNAL_DB")
            .stdin(Stdio::null())
            .output()
            .expect("run agent-journal");
        let stdout = String::from_utf8_lossy(&log.stdout);
        assert!(
            log.status.success() && stdout.lines().count() >= 3,
            "agent-journal log {session} on what {name} recorded: {log:?}"
        );
    }
    out
}

fn assert_line(stdout: &str, needle: &str) {
    assert!(
        stdout.lines().any(|l| l.contains(needle)),
        "no line contains {needle:?} in:\n{stdout}"
    );
}

#[test]
fn record_reads_back_what_it_recorded() {
    let out = run_example("record");
    assert_line(
        &out,
        "summary: 10 events, 5 messages, 1 tool call(s), outcome Succeeded",
    );
}

#[test]
fn crash_and_resume_runs_completed_tools_once() {
    let out = run_example("crash_and_resume");
    assert_line(&out, "in doubt [\"call_3 send_receipt\"]");
    assert_line(&out, "charge_card ran once: the card was not charged twice");
}

#[test]
fn time_travel_diffs_and_forks() {
    let out = run_example("time_travel");
    assert_line(&out, "~ tool call call_2 book_flight: (new) -> completed");
    assert_line(&out, "Booked FR456 (ref QM4), 95 EUR.");
}

#[test]
fn custom_slice_survives_reopen() {
    let out = run_example("custom_slice");
    assert_line(&out, "replaying 1 event(s)");
    assert_line(&out, "after reopen: 3 ratings, average 4.0");
}

#[test]
fn an_example_records_into_agent_journal_db_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_example_in(dir.path(), "record", &[]);
    assert_line(&out, "look at it: agent-journal --db agent-journal.db log ");
    assert!(dir.path().join("agent-journal.db").is_dir(), "{out}");
    // A second run adds its session to the same database.
    let again = run_example_in(dir.path(), "record", &[]);
    assert_line(
        &again,
        "summary: 10 events, 5 messages, 1 tool call(s), outcome Succeeded",
    );
}
