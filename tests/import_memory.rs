//! Issue 33, item 8: every import holds at most a record's worth of one
//! record (a JSON Lines line, an element of a message list, a Claude Code
//! record's message) and refuses one past `MAX_RECORD_BYTES` before it has
//! read more than that; a FIFO or a device is never read.
//!
//! Before: a 50 MB message peaked at 241-243 MiB (4.8x) in every format
//! and was refused only when its event was encoded; `/dev/zero` in a
//! Claude Code folder was read to the 1 GiB cap.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_journal::Journal;
use agent_journal::provider::input::MAX_RECORD_BYTES;
use serde_json::json;

use crate::common::{cli_command, path_str, peak_memory};

/// What a record of `n` bytes may cost an import: 1.5 times the record,
/// plus 64 MiB for the binary, its buffers and sled's cache (a debug build
/// importing a two-message request peaks at about 46 MiB).
fn allowed(n: usize) -> u64 {
    n as u64 * 3 / 2 + (64 << 20)
}

/// `n` letters (from a seeded generator, compressible no further than
/// text is).
fn letters(n: usize) -> String {
    let mut rng = crate::common::Rng::new(n as u64);
    rng.bytes(n)
        .iter()
        .map(|b| char::from(b'a' + b % 26))
        .collect()
}

/// The size of the big record of the normal suite, and of the long test
/// (`BIG_RECORD_MB=300 cargo test ... records_of_300_mb -- --ignored`).
fn big() -> usize {
    std::env::var("BIG_RECORD_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(48)
        << 20
}

/// A file in `dir` named `name` holding `format`'s request whose one
/// big message holds `text`.
fn request(dir: &Path, format: &str, text: &str) -> std::path::PathBuf {
    let big = json!(text);
    let v = match format {
        "openai" | "ollama" => json!({"model": "m", "messages": [
            {"role": "user", "content": big}, {"role": "assistant", "content": "ok"}]}),
        "anthropic" => json!({"model": "m", "max_tokens": 9, "messages": [
            {"role": "user", "content": [{"type": "text", "text": big}]},
            {"role": "assistant", "content": "ok"}]}),
        "openai-responses" => json!({"model": "m", "input": [
            {"role": "user", "content": big},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}),
        "gemini" => json!({"contents": [
            {"role": "user", "parts": [{"text": big}]}, {"role": "model", "parts": [{"text": "ok"}]}]}),
        other => panic!("no request for {other}"),
    };
    let file = dir.join(format!("{format}.json"));
    std::fs::write(&file, v.to_string()).expect("write");
    file
}

/// Imports `file` as `format`: refused (exit 1) naming the limit, within
/// [`allowed`] memory, and no database made.
fn refused_in_bounded_memory(dir: &Path, file: &Path, format: &str, record: usize) {
    let db = dir.join(format!("db-{format}"));
    let args = ["import", path_str(file), "--format", format];
    let started = Instant::now();
    let (code, peak) = peak_memory(&db, &args);
    eprintln!(
        "{format}: a {} MiB record refused in {:?}, peak {} MiB (allowed {} MiB)",
        record >> 20,
        started.elapsed(),
        peak >> 20,
        allowed(record) >> 20
    );
    assert_eq!(code, Some(1), "{format}");
    assert!(peak < allowed(record), "{format}: peak {} MiB", peak >> 20);
    let out = crate::common::run_cli(&db, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("over the limit of {MAX_RECORD_BYTES} bytes"))
            || err.contains(&format!(
                "longer than the limit of {MAX_RECORD_BYTES} bytes"
            )),
        "{format}: {err}"
    );
    assert!(!db.exists(), "{format}: refused input created the database");
}

fn request_refused(format: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = letters(big());
    let file = request(dir.path(), format, &text);
    drop(text);
    refused_in_bounded_memory(dir.path(), &file, format, big());
}

#[test]
fn an_openai_message_over_the_record_limit_is_refused_in_bounded_memory() {
    request_refused("openai");
}

#[test]
fn an_anthropic_message_over_the_record_limit_is_refused_in_bounded_memory() {
    request_refused("anthropic");
}

#[test]
fn a_responses_item_over_the_record_limit_is_refused_in_bounded_memory() {
    request_refused("openai-responses");
}

#[test]
fn a_gemini_content_over_the_record_limit_is_refused_in_bounded_memory() {
    request_refused("gemini");
}

#[test]
fn an_ollama_message_over_the_record_limit_is_refused_in_bounded_memory() {
    request_refused("ollama");
}

#[test]
fn a_json_lines_line_over_the_record_limit_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = agent_journal::InnerMessage::new(
        agent_journal::Role::User,
        letters(big()),
        agent_journal::EvaluationId::new(),
        0,
    );
    let file = dir.path().join("m.jsonl");
    std::fs::write(&file, serde_json::to_string(&m).expect("json") + "\n").expect("write");
    drop(m);
    refused_in_bounded_memory(dir.path(), &file, "jsonl", big());
}

/// A state blob (`import --format state-blob`) whose one message is past
/// the record limit is refused, by its element, before more of it is read
/// (it was parsed whole: a 40 MiB message peaked at 243 MiB, 5.9x).
#[test]
fn a_state_blob_message_over_the_record_limit_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("blob.json");
    let blob = json!({"version": 1, "provider": "openai", "processed_length": 2,
        "messages": [{"role": "user", "content": letters(big())},
            {"role": "assistant", "content": "ok"}]});
    std::fs::write(&file, blob.to_string()).expect("write");
    drop(blob);
    refused_in_bounded_memory(dir.path(), &file, "state-blob", big());
    // Named by its place, as the other formats name theirs.
    let out = crate::common::run_cli(
        &dir.path().join("db"),
        &["import", path_str(&file), "--format", "state-blob"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "blob.json: messages[0]: over the limit of {MAX_RECORD_BYTES} bytes"
        )),
        "{err}"
    );
}

/// The size of an accepted big record: under the event limit of 16 MiB
/// with the raw provider payload its event also holds (below).
const ACCEPTED: usize = 12 << 20;

/// Imports `file` as `format` into a new database in `dir`: it succeeds
/// within [`allowed`] memory for one record of [`ACCEPTED`] bytes, and the
/// session holds the big message.
fn accepted_in_bounded_memory(dir: &Path, file: &Path, format: &str) {
    let db = dir.join(format!("db-{format}"));
    let (code, peak) = peak_memory(&db, &["import", path_str(file), "--format", format]);
    eprintln!(
        "{format}: a {} MiB record imported, peak {} MiB (allowed {} MiB)",
        ACCEPTED >> 20,
        peak >> 20,
        allowed(ACCEPTED) >> 20
    );
    assert_eq!(code, Some(0), "{format}");
    assert!(
        peak < allowed(ACCEPTED),
        "{format}: peak {} MiB",
        peak >> 20
    );
    let j = Journal::open(&db).expect("open");
    let id = j.sessions().expect("sessions")[0];
    let session = j.session(id).expect("session");
    let state = session.state();
    assert!(
        state.messages().iter().any(|m| m.content.len() == ACCEPTED),
        "{format}: the big message is there"
    );
}

/// An OpenAI request whose message is 12 MiB (its event holds it twice:
/// the text and the raw provider payload) should import within 1.5 times
/// the record plus the constant. The payload's text and the event's frame
/// are now made once, at their size (the value was cloned and the buffers
/// grown by doubling), but the peak (debug: 130 MiB before and after) is
/// the event held twice over and the store's copies of its frame (issue
/// 36): ignored until then.
#[test]
#[ignore = "open: the store's copies of a big event (issue 36) keep it past allowed(): 130 MiB"]
fn an_accepted_big_openai_message_imports_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = request(dir.path(), "openai", &letters(ACCEPTED));
    accepted_in_bounded_memory(dir.path(), &file, "openai");
}

/// A WINK snapshot whose one message is 12 MiB (in two slices: the
/// messages and the conversation) should import within 1.5 times the
/// record plus the constant. The document is now parsed once, from the
/// file, and each item's JSON dropped once parsed (it was read as text,
/// parsed twice, and cloned): debug 130 -> 118 MiB; the rest is the state's
/// and the events' copies of the message and the store's (issue 36):
/// ignored until then.
#[test]
#[ignore = "open: the store's copies of a big event (issue 36) keep it past allowed(): 118 MiB"]
fn an_accepted_big_wink_message_imports_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source");
    let id = {
        let j = Journal::open(&source).expect("open");
        let s = j.create_session().expect("session");
        let e = s.start_evaluation("ns", "key").expect("evaluation");
        e.user(letters(ACCEPTED)).expect("user");
        e.assistant("ok", vec![]).expect("assistant");
        s.id()
    };
    let file = dir.path().join("snap.json");
    let out = crate::common::run_cli(
        &source,
        &[
            "export",
            &id.to_string(),
            "--format",
            "wink",
            "-o",
            path_str(&file),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    accepted_in_bounded_memory(dir.path(), &file, "wink");
}

/// A Claude Code log of a question, a `Read` call, its result record
/// carrying the tool's whole output (`toolUseResult`, `tool_output` bytes,
/// not imported) and a file history snapshot as large (skipped), then the
/// answer.
fn claude_code_log(tool_output: &str) -> String {
    let record = |v: serde_json::Value| v.to_string() + "\n";
    [
        record(
            json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s",
            "message": {"role": "user", "content": "read it"}}),
        ),
        record(
            json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1",
            "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "x"}}]}}),
        ),
        record(
            json!({"type": "user", "uuid": "u2", "parentUuid": "a1",
            "toolUseResult": {"file": {"content": tool_output}},
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "(cut)"}]}}),
        ),
        record(json!({"type": "file-history-snapshot", "snapshot": {"x": tool_output}})),
        record(
            json!({"type": "assistant", "uuid": "a2", "parentUuid": "u2", "message": {"id": "m2",
            "role": "assistant", "content": [{"type": "text", "text": "done"}]}}),
        ),
    ]
    .concat()
}

/// The bulk of a Claude Code record that is not imported (a tool's whole
/// output, a file history snapshot) is skipped, never parsed into memory:
/// a log with two such 48 MB lines imports within 1.5 times one line
/// (each line was parsed whole into a `serde_json::Value`: 4x).
#[test]
fn a_claude_code_log_with_huge_tool_output_imports_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let projects = dir.path().join("projects");
    std::fs::create_dir(&projects).expect("mkdir");
    let file = projects.join("s.jsonl");
    std::fs::write(&file, claude_code_log(&letters(big()))).expect("write");
    let db = dir.path().join("db");
    let (code, peak) = peak_memory(
        &db,
        &["import", path_str(&projects), "--format", "claude-code"],
    );
    eprintln!(
        "claude-code: 2 lines of {} MiB, peak {} MiB",
        big() >> 20,
        peak >> 20
    );
    assert_eq!(code, Some(0));
    assert!(peak < allowed(big()), "peak {} MiB", peak >> 20);
    let j = Journal::open(&db).expect("open");
    let id = j.sessions().expect("sessions")[0];
    assert_eq!(j.session(id).expect("session").state().messages().len(), 4);
}

/// A Claude Code message past the record limit is refused by its line
/// before any of it is parsed.
#[test]
fn a_claude_code_message_over_the_record_limit_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.jsonl");
    let log = claude_code_log("small").replace("read it", &letters(big()));
    std::fs::write(&file, log).expect("write");
    refused_in_bounded_memory(dir.path(), &file, "claude-code", big());
}

/// The long version: 300 MB records in every streamed format.
#[test]
#[ignore = "long: BIG_RECORD_MB=300 cargo test --test integration import_memory::records_of_300_mb -- --ignored"]
fn records_of_300_mb_are_refused_or_skipped_in_bounded_memory() {
    if std::env::var("BIG_RECORD_MB").is_err() {
        eprintln!("set BIG_RECORD_MB=300 for the long run");
    }
    for format in [
        "openai",
        "anthropic",
        "openai-responses",
        "gemini",
        "ollama",
    ] {
        request_refused(format);
    }
    a_json_lines_line_over_the_record_limit_is_refused_in_bounded_memory();
    a_state_blob_message_over_the_record_limit_is_refused_in_bounded_memory();
    a_claude_code_log_with_huge_tool_output_imports_in_bounded_memory();
    a_claude_code_message_over_the_record_limit_is_refused_in_bounded_memory();
}

/// Runs `cmd` for at most `limit`; killed and failed past it.
fn run_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}: it reads what it should skip");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// In a Claude Code folder, a FIFO, a link to /dev/zero and a link to a
/// log outside the folder are each skipped with a warning naming them,
/// unread; the logs in the folder are imported, promptly.
#[test]
fn special_files_in_a_claude_code_folder_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let projects = dir.path().join("projects");
    std::fs::create_dir_all(projects.join("p")).expect("mkdir");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/crashed.jsonl");
    std::fs::copy(&fixture, projects.join("p/good.jsonl")).expect("copy");
    std::fs::copy(&fixture, dir.path().join("outside.jsonl")).expect("copy");
    mkfifo(&projects.join("p/pipe.jsonl"));
    std::os::unix::fs::symlink("/dev/zero", projects.join("p/zero.jsonl")).expect("link");
    std::os::unix::fs::symlink(dir.path().join("outside.jsonl"), projects.join("out.jsonl"))
        .expect("link");
    // A link to a log inside the folder: read once, not twice.
    std::os::unix::fs::symlink(projects.join("p/good.jsonl"), projects.join("again.jsonl"))
        .expect("link");
    let db = dir.path().join("db");
    let mut cmd = cli_command(&db);
    cmd.args(["import", path_str(&projects), "--format", "claude-code"]);
    let out = run_within(cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    for (name, why) in [
        ("p/pipe.jsonl", "not a regular file (a FIFO)"),
        ("p/zero.jsonl", "a link out of"),
        ("out.jsonl", "a link out of"),
    ] {
        let line = format!("{}: skipped: {why}", projects.join(name).display());
        assert!(err.contains(&line), "no warning {line:?} in {err}");
    }
    let j = Journal::open(&db).expect("open");
    assert_eq!(j.sessions().expect("sessions").len(), 1, "{err}");
}

/// `/dev/zero`, a FIFO or a character device given directly is refused at
/// once (exit 1, "not a regular file"), whatever the format, and no
/// database is made; a pipe on /dev/stdin is still read (see
/// `streamed_import::a_conversation_piped_in_is_detected_and_imported`).
#[test]
fn a_device_or_fifo_given_directly_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    let db = dir.path().join("db");
    for path in ["/dev/zero", "/dev/null", path_str(&fifo)] {
        for format in [
            "auto",
            "claude-code",
            "openai",
            "jsonl",
            "wink",
            "state-blob",
            "journal",
        ] {
            let mut cmd = cli_command(&db);
            cmd.args(["import", path, "--format", format]);
            let started = Instant::now();
            let out = run_within(cmd, Duration::from_secs(20));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{path} {format}: {err}");
            assert!(
                err.contains(&format!("{path}: not a regular file (")),
                "{path} {format}: {err}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{path} {format}"
            );
            assert!(!db.exists(), "{path} {format}: created the database");
        }
    }
    // Through the library too.
    let e = agent_journal::transfer::read_claude_code(Path::new("/dev/zero"), 1 << 30)
        .expect_err("zero");
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let e = agent_journal::transfer::ConversationFile::open(
        &fifo,
        agent_journal::provider::ConversationFormat::OpenAi,
        1 << 30,
    )
    .expect_err("fifo");
    assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
}

#[test]
fn a_record_may_be_twice_the_default_event_limit() {
    assert_eq!(
        agent_journal::provider::input::MAX_RECORD_BYTES,
        2 * agent_journal::format::DEFAULT_MAX_EVENT_BYTES
    );
}
