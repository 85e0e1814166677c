//! Turns killed for real: `demo --conversation` runs in a child process
//! that dies (SIGKILL, and SIGABRT for some) right after event N is
//! durable, for every N of a run; a fresh process runs `pending` and
//! `resume`. Every interrupted turn is reported and finished, no completed
//! tool runs twice (the sandbox's execution log proves it), and the resumed
//! conversation equals an uncrashed run's.

use std::path::Path;

use agent_journal::conversation::TurnStatus;
use agent_journal::{Journal, JournalConfig, SessionId};

use crate::common::{path_str, run_cli};

/// Messages (role, text, calls, answered call) and turn statuses, without
/// ids or times.
type Transcript = (
    Vec<(String, String, Vec<String>, Option<String>)>,
    Vec<TurnStatus>,
);

fn open(db: &Path) -> Journal {
    let config = JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    Journal::open_with(db, config).expect("open")
}

fn transcript(db: &Path, id: SessionId) -> Transcript {
    let j = open(db);
    let s = j.session(id).expect("session");
    let state = s.state();
    let log = state.conversation_log();
    let messages = log
        .messages()
        .iter()
        .map(|m| {
            let calls = m
                .tool_calls
                .iter()
                .map(|c| format!("{}:{}:{}", c.call_id, c.name, c.arguments))
                .collect();
            let answered = m.tool_call_id.as_ref().map(|c| c.to_string());
            (m.role.as_str().to_owned(), m.text(), calls, answered)
        })
        .collect();
    (messages, log.turns().iter().map(|t| t.status).collect())
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every real execution of a write_file call, from the sandboxes' logs.
fn executions(root: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for dir in std::fs::read_dir(root).expect("sandbox root").flatten() {
        if let Ok(text) = std::fs::read_to_string(dir.path().join(".executions.log")) {
            lines.extend(text.lines().map(str::to_owned));
        }
    }
    lines.sort();
    lines
}

fn reference() -> (Transcript, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, sb) = (dir.path().join("db"), dir.path().join("sb"));
    let out = run_cli(
        &db,
        &[
            "--json",
            "demo",
            "--conversation",
            "--sandbox",
            path_str(&sb),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let id: SessionId = v["conversation"].as_str().expect("id").parse().expect("id");
    assert_eq!(v["failed_turns"], 1);
    assert_eq!(executions(&sb).len(), 2);
    (
        transcript(&db, id),
        v["events"].as_u64().expect("events") - 1,
    )
}

fn crash_case(reference: &Transcript, n: u64, last: u64, how: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, sb) = (dir.path().join("db"), dir.path().join("sb"));
    let n_s = n.to_string();
    let args = [
        "demo",
        "--conversation",
        "--sandbox",
        path_str(&sb),
        "--crash-after",
        &n_s,
        "--crash-with",
        how,
    ];
    let out = run_cli(&db, &args);
    assert!(
        out.status.code().is_none(),
        "n={n}: killed by a signal: {:?}",
        out.status
    );
    let ids = open(&db).sessions().expect("sessions");
    assert_eq!(ids.len(), 1, "n={n}");
    let crashed = ids[0];
    let (_, statuses) = transcript(&db, crashed);
    let running = statuses.iter().filter(|s| !s.is_finished()).count();
    assert!(running <= 1, "n={n}: one turn at most runs at a time");

    let pending = json(&run_cli(&db, &["--json", "pending", &crashed.to_string()]));
    let reported = pending["interrupted_turns"]
        .as_array()
        .expect("turns")
        .len();
    assert_eq!(
        reported, running,
        "n={n}: every interrupted turn is reported"
    );

    let out = run_cli(&db, &["--json", "resume", &crashed.to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // Killed after the last turn ended (only the conversation's
    // `updated_at` may be missing): nothing to resume, and nothing lost.
    if out.status.code() == Some(0)
        && json(&out)["nothing_to_do"]
            .as_str()
            .is_some_and(|r| r.contains("the script is done"))
    {
        assert!(n + 2 >= last, "n={n} of {last}: {stderr}");
        assert_eq!(&transcript(&db, crashed), reference, "n={n}");
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "n={n} ({how}): resume failed: {stderr}"
    );
    let v = json(&out);
    assert_eq!(
        v["interrupted_turns"].as_array().expect("turns").len(),
        running,
        "n={n}"
    );
    let resumed: SessionId = v["conversation"].as_str().expect("id").parse().expect("id");
    assert_eq!(resumed, crashed, "resume continues the conversation itself");
    assert_eq!(&transcript(&db, resumed), reference, "n={n} ({how})");
    let ex = executions(&sb);
    let mut unique = ex.clone();
    unique.dedup();
    assert_eq!(
        ex, unique,
        "n={n} ({how}): a completed tool ran twice: {ex:?}"
    );
    assert_eq!(ex.len(), 2, "n={n}: both write_file calls ran once: {ex:?}");
    let again = json(&run_cli(&db, &["--json", "pending", &resumed.to_string()]));
    assert_eq!(
        again["interrupted_turns"].as_array().map(Vec::len),
        Some(0),
        "n={n}"
    );
    // A second resume finds nothing to do and writes nothing.
    let head = open(&db).session(crashed).expect("session").head();
    let twice = run_cli(&db, &["--json", "resume", &crashed.to_string()]);
    assert_eq!(twice.status.code(), Some(0), "n={n} ({how})");
    assert!(json(&twice)["nothing_to_do"].is_string(), "n={n} ({how})");
    assert_eq!(
        open(&db).session(crashed).expect("session").head(),
        head,
        "n={n} ({how}): the second resume wrote nothing"
    );
    let verify = run_cli(&db, &["verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_conversation_killed_after_every_event_resumes_to_the_same_conversation() {
    let (reference, last) = reference();
    for n in 0..=last {
        crash_case(&reference, n, last, "kill");
        if n % 7 == 3 {
            crash_case(&reference, n, last, "abort");
        }
    }
}
