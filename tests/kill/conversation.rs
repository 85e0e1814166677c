//! Kills during `import` of a conversation, and of a directory of Claude
//! Code logs, longer than one import chunk (1,024 events): the import
//! appends them in chunks under an import intent, so a kill must leave
//! either no session or every one whole, once the database is opened again
//! (the open rolls back what the intent names).

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
    kill_imports(dir.path(), &file, "openai", 1);
}

/// A directory of Claude Code logs imports as one session each, all or
/// nothing: a kill leaves no session or every log whole.
#[test]
fn a_killed_claude_code_import_leaves_every_log_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = dir.path().join("projects");
    std::fs::create_dir_all(&logs).expect("mkdir");
    for name in ["a.jsonl", "b.jsonl"] {
        std::fs::write(
            logs.join(name),
            crate::claude_code::claude_code_log(1_200, 20, 20),
        )
        .expect("write");
    }
    kill_imports(dir.path(), &logs, "claude-code", 2);
}

/// Runs `import INPUT --format FORMAT` whole (it makes `sessions`
/// sessions, over three import chunks in all), then killed at random
/// moments: each killed run leaves nothing or every session whole, and a
/// re-run imports it all.
fn kill_imports(dir: &Path, input: &Path, format: &str, sessions_made: usize) {
    let command = |db: &Path| {
        let mut c = cli_command(db);
        c.args(["import", path_str(input), "--format", format]);
        c
    };
    let whole = dir.join("whole.db");
    let (out, full) = run_whole(command(&whole));
    assert!(out.status.success(), "{out:?}");
    let mut heads = sessions(&whole).expect("the whole import");
    heads.sort_unstable();
    assert_eq!(heads.len(), sessions_made);
    let events: u64 = heads.iter().sum();
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
        let db = dir.join(format!("round-{round}.db"));
        let ran = run_until(command(&db), kill_delay(&mut rng, full));
        if db.join(super::maintenance::IMPORT_INTENT).exists() {
            mid += 1;
        }
        let mut found = sessions(&db).unwrap_or_else(|e| panic!("round {round}: {e}"));
        found.sort_unstable();
        match ran {
            Ran::Killed => {
                killed += 1;
                if found.is_empty() {
                    none += 1;
                } else if found == heads {
                    all += 1;
                } else {
                    panic!(
                        "round {round}: a killed {format} import left sessions with {found:?} \
                         events (the whole import is {heads:?})"
                    );
                }
            }
            Ran::Finished(out, _) => {
                assert!(out.status.success(), "round {round}: {out:?}");
                assert_eq!(found, heads, "round {round}, finished");
            }
        }
        // The import goes through again after a kill.
        let (out, _) = run_whole(command(&db));
        assert!(out.status.success(), "round {round}, the re-run: {out:?}");
        let mut again = sessions(&db).unwrap_or_else(|e| panic!("round {round}: {e}"));
        again.sort_unstable();
        // Once more if the killed run had finished its import.
        let mut twice: Vec<u64> = heads.iter().cycle().take(again.len()).copied().collect();
        twice.sort_unstable();
        assert!(
            again.len() % heads.len() == 0 && again == twice,
            "round {round}, the re-run: {again:?}"
        );
        let _ = std::fs::remove_dir_all(&db);
    }
    eprintln!(
        "{format} import: {killed} killed ({mid} while writing): {none} left nothing, \
         {all} everything"
    );
    assert!(mid > 0, "no run was killed while it wrote the conversation");
}
