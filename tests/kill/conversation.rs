//! Kills during `import` of a conversation longer than one import chunk
//! (1,024 events): the import appends it in chunks under an import intent,
//! so a kill must leave either no session or the whole conversation, once
//! the database is opened again (the open rolls back what the intent
//! names).

use std::path::Path;

use agent_journal::Journal;

use super::maintenance::{Ran, kill_delay, run_until, run_whole};
use crate::common::{Rng, cli_command, path_str};

/// An OpenAI conversation of `rounds` rounds (a question, a tool call, its
/// result): `3 * rounds + 1` messages.
fn conversation(rounds: usize) -> String {
    let mut messages = vec![serde_json::json!({"role": "system", "content": "You are helpful."})];
    for i in 0..rounds {
        let id = format!("call_{i}");
        messages.push(serde_json::json!({"role": "user", "content": format!("question {i}")}));
        messages.push(serde_json::json!({
            "role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function",
                            "function": {"name": "lookup", "arguments": format!("{{\"n\":{i}}}")}}],
        }));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": format!("answer {i}")}));
    }
    serde_json::json!({ "messages": messages }).to_string()
}

/// The sessions of `db` and their heads, as the library opens it (an
/// interrupted import rolled back); empty if the kill came before the
/// database was created.
fn sessions(db: &Path) -> Result<Vec<u64>, String> {
    if !db.exists() {
        return Ok(Vec::new());
    }
    let j = Journal::open(db).map_err(|e| format!("open: {e}"))?;
    if db.join(super::maintenance::IMPORT_INTENT).exists() {
        return Err("the import intent is still there after the open".into());
    }
    j.sessions()
        .map_err(|e| format!("sessions: {e}"))?
        .into_iter()
        .map(|id| {
            j.session(id)
                .map(|s| s.head())
                .map_err(|e| format!("session {id}: {e}"))
        })
        .collect()
}

#[test]
fn a_killed_conversation_import_leaves_the_whole_conversation_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("conversation.json");
    std::fs::write(&file, conversation(1_500)).expect("write");
    let command = |db: &Path| {
        let mut c = cli_command(db);
        c.args(["import", path_str(&file), "--format", "openai"]);
        c
    };
    let whole = dir.path().join("whole.db");
    let (out, full) = run_whole(command(&whole));
    assert!(out.status.success(), "{out:?}");
    let heads = sessions(&whole).expect("the whole import");
    assert_eq!(heads.len(), 1);
    let events = heads[0];
    assert!(
        events > 3 * 1_024,
        "{events} events: more than three chunks"
    );

    let mut rng = Rng::new(std::env::var("AJ_KILL_SEED").map_or(11, |s| s.parse().unwrap_or(11)));
    // Kills after the parse land while the chunks are written: the intent
    // is there then. Rounds go on (up to 40) until 3 such kills.
    let (mut killed, mut none, mut all, mut mid) = (0, 0, 0, 0);
    for round in 0..40 {
        if round >= 8 && mid >= 3 {
            break;
        }
        let db = dir.path().join(format!("round-{round}.db"));
        let ran = run_until(command(&db), kill_delay(&mut rng, full));
        if db.join(super::maintenance::IMPORT_INTENT).exists() {
            mid += 1;
        }
        let found = sessions(&db).unwrap_or_else(|e| panic!("round {round}: {e}"));
        match ran {
            Ran::Killed => {
                killed += 1;
                match found.as_slice() {
                    [] => none += 1,
                    [n] if *n == events => all += 1,
                    other => panic!(
                        "round {round}: a killed import left sessions with {other:?} events \
                         (the whole conversation is {events})"
                    ),
                }
            }
            Ran::Finished(out, _) => {
                assert!(out.status.success(), "round {round}: {out:?}");
                assert_eq!(found, vec![events], "round {round}, finished");
            }
        }
        // The import goes through again after a kill.
        let (out, _) = run_whole(command(&db));
        assert!(out.status.success(), "round {round}, the re-run: {out:?}");
        let again = sessions(&db).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(again.iter().filter(|&&n| n == events).count(), again.len());
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!(
        "conversation import: {killed} killed ({mid} while writing): {none} left nothing, \
         {all} the whole conversation"
    );
    assert!(mid > 0, "no run was killed while it wrote the conversation");
}
