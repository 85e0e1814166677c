//! Snapshots under the specs' names: what WINK reads, and what WINK writes.
//! `interop` runs WINK 0.27 itself (see `.ci/wink.sh`).

mod interop;

use agent_journal::agent::SdkSessionState;
use agent_journal::format::now;
use agent_journal::state::{JsonOptions, SessionState, SliceNames, SliceRegistry};
use agent_journal::{Journal, ToolStatus};
use serde_json::Value;

use crate::common::run_cli;
use crate::resume::crashed_session;

fn wink(include_logs: bool, module: Option<&str>) -> JsonOptions {
    JsonOptions {
        names: SliceNames::Wink {
            module: module.map(str::to_owned),
        },
        include_logs,
        ..JsonOptions::default()
    }
}

fn slice_types(doc: &Value) -> Vec<String> {
    doc["slices"]
        .as_array()
        .expect("slices")
        .iter()
        .map(|s| s["slice_type"].as_str().expect("type").to_owned())
        .collect()
}

fn items<'a>(doc: &'a Value, suffix: &str) -> &'a Vec<Value> {
    doc["slices"]
        .as_array()
        .expect("slices")
        .iter()
        .find(|s| s["slice_type"].as_str().expect("type").ends_with(suffix))
        .and_then(|s| s["items"].as_array())
        .unwrap_or_else(|| panic!("no slice {suffix}"))
}

/// A crashed run with a call in doubt (`started`), a completed one and a
/// pending one, and an adapter state.
fn crashed() -> (Journal, agent_journal::Session) {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let eval = s
        .state()
        .evaluations()
        .latest()
        .expect("eval")
        .evaluation_id;
    s.evaluation(eval)
        .expect("eval")
        .capture_adapter_state(&SdkSessionState {
            session_id: "sdk-1".into(),
            created_at: now(),
            last_activity_at: now(),
            workspace_path: Some("/work".into()),
            prompt_name: "ns:key".into(),
            message_count: 4,
            is_complete: false,
        })
        .expect("capture");
    (j, s)
}

#[test]
fn a_wink_export_has_only_the_specs_types_and_reads_back_whole() {
    let (_j, s) = crashed();
    let state = s.state_cloned();
    let text = state.to_json(&wink(true, None));
    let doc: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        slice_types(&doc),
        [
            "weakincentives.runtime.adapter_state:AdapterStateSnapshot",
            "weakincentives.runtime.conversation:ConversationState",
            "weakincentives.runtime.inner_messages:InnerMessage",
        ],
        "WINK resolves every slice type it reads: no crate type may appear"
    );
    assert_eq!(doc["policies"].as_object().expect("policies").len(), 3);
    // `started` is not a WINK status: written `pending`, kept aside.
    let calls = &items(&doc, ":InnerMessage")[2]["tool_calls"];
    assert_eq!(calls[0]["status"], "completed");
    assert_eq!(calls[1]["status"], "pending");
    assert_eq!(calls[1]["journal_status"], "started");
    assert_eq!(calls[2]["status"], "pending");
    // The conversation-state spec's items carry the messages themselves.
    let conv = &items(&doc, ":ConversationState")[0];
    assert_eq!(conv["system_message"]["content"], "sys");
    assert_eq!(conv["prompt_ns"], "ns");
    assert_eq!(conv["prompt_key"], "key");
    assert_eq!(conv["turns"][0]["assistant_message"]["content"], "working");
    assert_eq!(
        conv["turns"][0]["tool_messages"][0]["content"],
        "safe ran with {}"
    );
    // The adapter state as an object, as WINK's dataclass holds it.
    let adapter = &items(&doc, ":AdapterStateSnapshot")[0];
    assert_eq!(adapter["state"]["session_id"], "sdk-1");

    let back = SessionState::from_json(&text, &SliceRegistry::new()).expect("read back");
    let journal_names = JsonOptions {
        include_logs: true,
        created_at: Some(now()),
        ..JsonOptions::default()
    };
    assert_eq!(
        back.to_json(&journal_names),
        state.to_json(&journal_names),
        "the whole state comes back, `started` included"
    );
    assert_eq!(
        back.tool_calls()
            .iter()
            .map(|c| c.status)
            .collect::<Vec<_>>(),
        [
            ToolStatus::Completed,
            ToolStatus::Started,
            ToolStatus::Pending
        ]
    );
}

#[test]
fn the_type_module_replaces_every_spec_module() {
    let (_j, s) = crashed();
    let text = s.state().to_json(&wink(true, Some("my_app.state")));
    let doc: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        slice_types(&doc),
        [
            "my_app.state:AdapterStateSnapshot",
            "my_app.state:ConversationState",
            "my_app.state:InnerMessage",
        ]
    );
    let back = SessionState::from_json(&text, &SliceRegistry::new()).expect("read back");
    assert_eq!(back.messages().len(), 4);
}

/// `tests/wink/fixtures/wink_written.json` is what WINK 0.27 wrote of the
/// spec's items (`interop.py`, mode `write`); `wink_items.json` the items
/// as WINK's serde dumps them.
fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/wink/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every field of WINK's items equals the journal's export of them
/// (timestamps compared as instants: WINK writes `+00:00`, the crate `Z`).
pub(crate) fn assert_same_items(wink_items: &[Value], exported: &[Value]) {
    assert_eq!(wink_items.len(), exported.len());
    let instant = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().expect("timestamp")).expect("rfc3339")
    };
    for (w, e) in wink_items.iter().zip(exported) {
        for (k, v) in w.as_object().expect("item") {
            if k == "created_at" {
                assert_eq!(instant(v), instant(&e[k]), "{k} of {w}");
            } else {
                assert_eq!(v, &e[k], "{k} of {w}");
            }
        }
    }
}

#[test]
fn a_snapshot_wink_wrote_imports_with_every_field_and_resumes() {
    let j = Journal::memory();
    let s = j
        .import_snapshot(&fixture("wink_written.json"))
        .expect("import");
    let plan = s.resume_plan().expect("plan");
    let pending: Vec<&str> = plan.pending.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(
        pending,
        ["call_b"],
        "the spec's pending call is the crash point"
    );
    assert!(plan.in_doubt.is_empty());
    let sdk = &s
        .state()
        .adapter_states()
        .iter()
        .next()
        .cloned()
        .expect("adapter state");
    assert_eq!(sdk.adapter_type, "claude_agent_sdk");
    assert!(sdk.resumable);

    let exported: Value =
        serde_json::from_str(&s.state().to_json(&wink(true, None))).expect("json");
    let wink_items: Vec<Value> = serde_json::from_str(&fixture("wink_items.json")).expect("items");
    assert_same_items(&wink_items, items(&exported, ":InnerMessage"));
    assert_eq!(
        items(&exported, ":AdapterStateSnapshot")[0]["evaluation_id"],
        "eval-1",
        "the original evaluation id goes back out"
    );
}

#[test]
fn slices_wink_has_and_the_specs_do_not_are_kept_and_written_back() {
    let mut doc: Value = serde_json::from_str(&fixture("wink_written.json")).expect("json");
    let plan = serde_json::json!({
        "slice_type": "my_app.plans:Plan",
        "item_type": "my_app.plans:Plan",
        "items": [{"steps": ["read a", "read b"], "active": true}],
    });
    doc["slices"]
        .as_array_mut()
        .expect("slices")
        .push(plan.clone());
    doc["policies"]["my_app.plans:Plan"] = "state".into();
    let j = Journal::memory();
    let s = j.import_snapshot(&doc.to_string()).expect("import");
    let out: Value = serde_json::from_str(&s.state().to_json(&wink(false, None))).expect("json");
    let kept = out["slices"]
        .as_array()
        .expect("slices")
        .iter()
        .find(|e| e["slice_type"] == "my_app.plans:Plan")
        .expect("the application's slice comes back");
    assert_eq!(kept, &plan);
    assert_eq!(out["policies"]["my_app.plans:Plan"], "state");
}

#[test]
fn a_bad_wink_document_names_the_item_and_writes_nothing() {
    let mut doc: Value = serde_json::from_str(&fixture("wink_written.json")).expect("json");
    let messages = doc["slices"]
        .as_array_mut()
        .expect("slices")
        .iter_mut()
        .find(|e| {
            e["slice_type"]
                .as_str()
                .is_some_and(|t| t.ends_with(":InnerMessage"))
        })
        .expect("messages");
    messages["items"][2]["sequence"] = "two".into();
    let j = Journal::memory();
    let e = j.import_snapshot(&doc.to_string()).expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("items[2]") && msg.contains("sequence"),
        "{msg}"
    );
    assert!(
        j.sessions().expect("sessions").is_empty(),
        "nothing written"
    );
}

#[test]
fn cli_export_wink_takes_a_type_module_and_import_reads_it_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = run_cli(&db, &["demo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_cli(&db, &["sessions", "--json"]);
    let listed = crate::common::json_lines(&out.stdout);
    let id = listed[0]["id"].as_str().expect("id").to_owned();
    let file = dir.path().join("w.json");
    let out = run_cli(
        &db,
        &[
            "export",
            &id,
            "--format",
            "wink",
            "--type-module",
            "my_app.state",
            "-o",
            file.to_str().expect("utf-8"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert_eq!(
        slice_types(&doc),
        [
            "my_app.state:ConversationState",
            "my_app.state:InnerMessage"
        ]
    );
    let out = run_cli(
        &db,
        &["import", file.to_str().expect("utf-8"), "--format", "wink"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
