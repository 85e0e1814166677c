//! WINK 0.27 itself, both directions: it reads the journal's export with
//! `Snapshot.from_json` and restores it into a session; what it writes of
//! the spec's `InnerMessage` items imports into the journal with every
//! field kept. WINK needs CPython 3.12 or newer; it runs in Pyodide (CPython
//! 3.12 in WebAssembly) under Node.js, both prepared by `.ci/wink.sh` in
//! `target/wink-env` (or `AGENT_JOURNAL_WINK_ENV`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{assert_same_items, items};
use crate::common::run_cli;

/// The prepared environment, or `None` (with a notice) when it is missing
/// outside CI. In CI (`CI` set) a missing environment fails the test.
fn wink_env() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::var_os("AGENT_JOURNAL_WINK_ENV")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("target/wink-env"));
    let ready = dir.join("node_modules/pyodide/pyodide.mjs").is_file()
        && dir.join("wink/weakincentives/__init__.py").is_file()
        && Command::new("node").arg("--version").output().is_ok();
    if ready {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run the WINK interoperability test: run .ci/wink.sh first ({} is not ready)",
        dir.display()
    );
    eprintln!(
        "note: WINK interoperability test skipped: run .ci/wink.sh to prepare {}",
        dir.display()
    );
    None
}

/// Runs `interop.py` in WINK with `request`, in `io`; returns its report.
fn run_wink(env: &Path, io: &Path, request: Value) -> Value {
    std::fs::write(io.join("request.json"), request.to_string()).expect("request");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wink");
    let out = Command::new("node")
        .arg(spec.join("interop.mjs"))
        .arg(env.join("node_modules/pyodide"))
        .arg(env.join("wink"))
        .arg(&spec)
        .arg(io)
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "WINK failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("3.12"),
        "WINK runs on CPython 3.12"
    );
    let report = std::fs::read_to_string(io.join("report.json")).expect("report");
    serde_json::from_str(&report).expect("report json")
}

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn only_session(db: &Path) -> String {
    let out = run_cli(db, &["sessions", "--json"]);
    ok(&out);
    let listed = crate::common::json_lines(&out.stdout);
    let all = listed.as_array().expect("sessions");
    all.last().expect("a session")["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

fn export(db: &Path, id: &str, file: &Path) -> Value {
    let out = run_cli(
        db,
        &[
            "export",
            id,
            "--format",
            "wink",
            "--include-logs",
            "-o",
            file.to_str().expect("utf-8"),
        ],
    );
    ok(&out);
    serde_json::from_str(&std::fs::read_to_string(file).expect("export")).expect("json")
}

#[test]
fn wink_reads_and_restores_an_export_and_its_own_snapshot_imports_back() {
    let Some(env) = wink_env() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, io) = (dir.path().join("db"), dir.path().join("io"));
    std::fs::create_dir(&io).expect("io");
    // A run crashed after 15 events: tool calls done, one answer missing.
    let crashed = run_cli(&db, &["demo", "--crash-after", "15"]);
    assert!(!crashed.status.success(), "the demo crashes as asked");
    let id = only_session(&db);
    let ours = export(&db, &id, &io.join("export.json"));
    let messages = items(&ours, ":InnerMessage");

    let report = run_wink(&env, &io, serde_json::json!({"mode": "restore"}));
    assert_eq!(report["messages"], messages.len(), "{report}");
    let roles: Vec<&Value> = messages.iter().map(|m| &m["role"]).collect();
    assert_eq!(
        report["roles"]
            .as_array()
            .expect("roles")
            .iter()
            .collect::<Vec<_>>(),
        roles
    );
    let conv = &report["conversation_states"][0];
    assert_eq!(
        conv["system"],
        items(&ours, ":ConversationState")[0]["system_message"]["content"]
    );
    assert_eq!(conv["payload_kinds"][0], "NoneType");
    assert!(
        report["tags"]
            .as_array()
            .expect("tags")
            .contains(&"agent_journal.slices".into())
    );

    // WINK's own snapshot of the restored session (its tags are the
    // session's, so only the specs' items carry the state).
    ok(&run_cli(
        &db,
        &[
            "import",
            io.join("rewritten.json").to_str().expect("utf-8"),
            "--format",
            "wink",
        ],
    ));
    let again = only_session(&db);
    assert_ne!(again, id);
    let back = export(&db, &again, &io.join("back.json"));
    assert_same_items(
        items(
            &serde_json::from_str(
                &std::fs::read_to_string(io.join("rewritten.json")).expect("read"),
            )
            .expect("json"),
            ":InnerMessage",
        ),
        items(&back, ":InnerMessage"),
    );
    assert_same_items(messages, items(&back, ":InnerMessage"));
}

#[test]
fn what_wink_writes_of_the_spec_items_imports_with_every_field() {
    let Some(env) = wink_env() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, io) = (dir.path().join("db"), dir.path().join("io"));
    std::fs::create_dir(&io).expect("io");
    let report = run_wink(&env, &io, serde_json::json!({"mode": "write"}));
    assert_eq!(report["pending"], serde_json::json!(["call_b"]));
    let written = io.join("wink_written.json");
    ok(&run_cli(
        &db,
        &[
            "import",
            written.to_str().expect("utf-8"),
            "--format",
            "wink",
        ],
    ));
    let id = only_session(&db);
    let out = run_cli(&db, &["pending", &id]);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("call_b") && !text.contains("call_a "),
        "{text}"
    );
    let back = export(&db, &id, &io.join("back.json"));
    let wink_items: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(io.join("wink_items.json")).expect("items"))
            .expect("json");
    assert_same_items(&wink_items, items(&back, ":InnerMessage"));
    // And WINK reads the journal's export of it again.
    std::fs::copy(io.join("back.json"), io.join("export.json")).expect("copy");
    let report = run_wink(&env, &io, serde_json::json!({"mode": "restore"}));
    assert_eq!(report["pending"]["eval-1"], serde_json::json!(["call_b"]));
    assert_eq!(report["adapter_states"][0]["session_id"], "sdk-123");
    assert_eq!(report["adapter_states"][0]["resumable"], true);
}
