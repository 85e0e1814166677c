//! Crashes for real: the demo agent runs in a child process that dies
//! (SIGABRT or SIGKILL) right after event N is durable, for every N of a
//! run; a fresh process resumes it. The final conversation must equal an
//! uncrashed run's, no completed tool may run twice (the sandbox's
//! execution log proves it), and every rebuilt request must be valid for
//! both providers.

use std::path::Path;
use std::process::Output;

use agent_journal::provider::ConversationFormat;
use agent_journal::provider::validate;
use agent_journal::{Journal, JournalConfig, SessionId};

use crate::common::{path_str, run_cli};

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub(crate) type Conversation = Vec<(String, String, u64, u32, Vec<String>, Option<String>)>;

fn open(db: &Path) -> Journal {
    Journal::open_with(
        db,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
    .expect("open")
}

/// The conversation of a session with ids and timestamps left out.
pub(crate) fn conversation(db: &Path, id: SessionId) -> Conversation {
    let j = open(db);
    let s = j.session(id).expect("session");
    let st = s.state();
    st.messages()
        .iter()
        .map(|m| {
            (
                m.role.to_string(),
                m.content.clone(),
                m.sequence,
                m.turn,
                m.tool_calls
                    .iter()
                    .map(|c| format!("{}:{}:{}:{}", c.call_id, c.name, c.arguments, c.status))
                    .collect(),
                m.tool_call_id.as_ref().map(|c| c.to_string()),
            )
        })
        .collect()
}

fn only_session(db: &Path) -> SessionId {
    let j = open(db);
    let ids = j.sessions().expect("sessions");
    assert_eq!(ids.len(), 1);
    ids[0]
}

/// Every real execution of a write_file call, from the sandbox's log.
pub(crate) fn executions(sandbox_root: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for dir in std::fs::read_dir(sandbox_root)
        .expect("sandbox root")
        .flatten()
    {
        if let Ok(text) = std::fs::read_to_string(dir.path().join(".executions.log")) {
            lines.extend(text.lines().map(str::to_owned));
        }
    }
    lines.sort();
    lines
}

fn run_crash_case(reference: &Conversation, n: u64, last: u64, how: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let n_s = n.to_string();
    let out = run_cli(
        &db,
        &[
            "demo",
            "--sandbox",
            path_str(&sb),
            "--crash-after",
            &n_s,
            "--crash-with",
            how,
        ],
    );
    assert!(
        !out.status.success(),
        "the demo crashed after event {n} ({how})"
    );
    assert!(
        out.status.code().is_none(),
        "killed by a signal, not an exit: {:?}",
        out.status
    );
    let crashed = only_session(&db);

    // Every rebuilt request of the crashed run is valid for both providers.
    {
        let j = open(&db);
        let s = j.session(crashed).expect("session");
        // A crash point inside an atomic batch lands at the batch's end.
        assert!(
            s.head() > n,
            "every event up to the crash point is there ({how}, n={n})"
        );
        if let Ok(plan) = s.resume_plan() {
            validate::openai(
                ConversationFormat::OpenAi
                    .to_json(&plan.messages)
                    .as_array()
                    .expect("an array"),
            )
            .unwrap_or_else(|e| panic!("n={n}: invalid OpenAI request: {e}"));
            validate::anthropic(&ConversationFormat::Anthropic.to_json(&plan.messages))
                .unwrap_or_else(|e| panic!("n={n}: invalid Anthropic request: {e}"));
        }
    }

    let id = crashed.to_string();
    let out = run_cli(&db, &["--json", "resume", &id]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if n == 0 {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("no conversation to resume"), "{stderr}");
        return;
    }
    if n >= last {
        // Nothing left to do: said, nothing written, exit 0.
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            json(&out)["nothing_to_do"]
                .as_str()
                .is_some_and(|r| r.contains("finished")),
            "{stderr}"
        );
        assert_eq!(&conversation(&db, crashed), reference);
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume after {n} ({how}) failed: {stderr}"
    );
    let resumed: SessionId = json(&out)["session"]
        .as_str()
        .expect("session")
        .parse()
        .expect("id");
    assert_eq!(resumed, crashed, "resume continues the session itself");
    assert_eq!(
        &conversation(&db, resumed),
        reference,
        "crash after event {n} ({how})"
    );
    // A second resume finds nothing to do and writes nothing.
    let head = open(&db).session(crashed).expect("session").head();
    let again = run_cli(&db, &["--json", "resume", &id]);
    assert_eq!(again.status.code(), Some(0), "n={n} ({how})");
    assert!(json(&again)["nothing_to_do"].is_string(), "n={n} ({how})");
    assert_eq!(
        open(&db).session(crashed).expect("session").head(),
        head,
        "n={n} ({how}): the second resume wrote nothing"
    );
    let ex = executions(&sb);
    let mut unique = ex.clone();
    unique.dedup();
    assert_eq!(
        ex, unique,
        "a tool ran twice after a crash at {n} ({how}): {ex:?}"
    );
    assert_eq!(
        ex.len(),
        2,
        "both write_file calls ran exactly once: {ex:?}"
    );
    let verify = run_cli(&db, &["verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

pub(crate) fn reference() -> (Conversation, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let out = run_cli(&db, &["--json", "demo", "--sandbox", path_str(&sb)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let id: SessionId = v["session"].as_str().expect("session").parse().expect("id");
    let events = v["events"].as_u64().expect("events");
    assert_eq!(executions(&sb).len(), 2);
    (conversation(&db, id), events - 1)
}

#[test]
fn the_demo_killed_with_abort_after_every_event_resumes_to_the_same_conversation() {
    let (reference, last) = reference();
    for n in 0..=last {
        run_crash_case(&reference, n, last, "abort");
    }
}

#[test]
fn the_demo_killed_with_sigkill_after_every_event_resumes_to_the_same_conversation() {
    let (reference, last) = reference();
    for n in 0..=last {
        run_crash_case(&reference, n, last, "kill");
    }
}
