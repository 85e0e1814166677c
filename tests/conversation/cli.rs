//! The conversation commands as a user runs them: `demo --conversation`,
//! `conversations`, `turns`, `show` (and `--turn`), `log`, `pending`.

use crate::common::{json_lines, path_str, run_cli};

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).expect("JSON")
}

#[test]
fn the_conversation_commands_show_what_the_demo_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, sb) = (dir.path().join("db"), dir.path().join("sb"));
    let out = run_cli(&db, &["demo", "--conversation", "--sandbox", path_str(&sb)]);
    let text = ok(&out);
    assert!(text.contains("recorded conversation"), "{text}");
    let hooks = String::from_utf8_lossy(&out.stderr);
    assert_eq!(hooks.matches("hook: turn").count(), 8, "{hooks}");
    assert!(hooks.contains("failed: turn"), "{hooks}");

    let list = json_lines(&run_cli(&db, &["--json", "conversations"]).stdout);
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["turns"], 4);
    assert_eq!(list[0]["interrupted"], 0);
    let id = list[0]["id"].as_str().expect("id").to_owned();
    assert!(ok(&run_cli(&db, &["conversations"])).contains(&id));

    let turns = json_lines(&run_cli(&db, &["--json", "turns", &id]).stdout);
    let turns = turns.as_array().expect("array");
    let statuses: Vec<&str> = turns
        .iter()
        .map(|t| t["status"].as_str().expect("status"))
        .collect();
    assert_eq!(statuses, ["succeeded", "succeeded", "failed", "succeeded"]);
    assert!(turns[0]["tokens"].as_u64().expect("tokens") > 0);
    assert_eq!(turns[0]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(turns[2]["error"]["code"], "overloaded");
    assert_eq!(turns[0]["provider_calls"][0]["provider"], "scripted");
    let table = ok(&run_cli(&db, &["turns", &id]));
    assert!(table.contains("the model is overloaded"), "{table}");

    let show = ok(&run_cli(&db, &["show", &id]));
    assert!(
        show.contains("Acheter du lait, réparer le test instable, appeler la banque."),
        "{show}"
    );
    assert!(show.contains("[tool write_file]"), "{show}");
    let failed = turns[2]["id"].as_str().expect("id");
    let detail = ok(&run_cli(
        &db,
        &["show", &id, "--turn", &failed[failed.len() - 8..]],
    ));
    assert!(detail.contains("failed"), "{detail}");
    assert!(detail.contains("code overloaded"), "{detail}");
    let one = json(&run_cli(&db, &["--json", "show", &id, "--turn", failed]));
    assert_eq!(one["status"], "failed");
    let missing = run_cli(&db, &["show", &id, "--turn", "zzzz"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no turn matches"));

    // Time travel: at seq 4 the first turn was pending (created, no
    // provider call yet); at seq 6 (its first call and header) running.
    let early = ok(&run_cli(&db, &["show", &id, "--at", "4"]));
    assert!(early.contains("pending!"), "{early}");
    let early = ok(&run_cli(&db, &["show", &id, "--at", "6"]));
    assert!(early.contains("running!"), "{early}");
    let log = ok(&run_cli(&db, &["log", &id]));
    // The word of `log --json`'s `type`, in the text too.
    assert!(log.contains(" turn "), "{log}");
    assert!(log.contains("conversation_provider_call"), "{log}");
    assert!(!log.contains("TurnChanged"), "{log}");
    let pending = ok(&run_cli(&db, &["pending", &id]));
    assert!(pending.contains("no interrupted turn"), "{pending}");
    assert_eq!(run_cli(&db, &["verify"]).status.code(), Some(0));
    let sessions = crate::common::json_lines(&run_cli(&db, &["--json", "sessions"]).stdout);
    assert_eq!(sessions[0]["status"], "finished", "{sessions}");

    // Exported in a provider's format, the conversation is a valid request.
    let openai = json(&run_cli(&db, &["export", &id, "--format", "openai"]));
    let messages = openai.as_array().expect("array");
    agent_journal::provider::validate::openai(messages).expect("valid OpenAI messages");
    assert_eq!(messages.len(), 14);
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
    let anthropic = json(&run_cli(&db, &["export", &id, "--format", "anthropic"]));
    agent_journal::provider::validate::anthropic(&anthropic).expect("valid Anthropic request");

    // Compaction by hand: a dry run records nothing; then it is recorded,
    // shown, and every message is still there.
    let head = |db| {
        crate::common::json_lines(&run_cli(db, &["--json", "sessions"]).stdout)[0]["events"]
            .as_u64()
            .expect("events")
    };
    let events = head(&db);
    let dry = ok(&run_cli(
        &db,
        &["compact-history", &id, "--messages", "5", "--dry-run"],
    ));
    assert!(dry.contains("would compact 13 -> 3 messages sent"), "{dry}");
    assert_eq!(head(&db), events);
    let done = json(&run_cli(
        &db,
        &["--json", "compact-history", &id, "--messages", "5"],
    ));
    assert_eq!(done["recorded"], true);
    assert_eq!(done["messages_after"], 3);
    assert_eq!(head(&db), events + 1);
    let show = ok(&run_cli(&db, &["show", &id]));
    assert!(
        show.contains("the 10 messages below are compacted"),
        "{show}"
    );
    assert!(
        show.contains("Write a short todo list"),
        "the journal keeps every message"
    );
    let diff = ok(&run_cli(
        &db,
        &["diff", &id, &(events - 1).to_string(), &events.to_string()],
    ));
    assert!(diff.contains("history_compacted"), "{diff}");
    let nothing = json(&run_cli(
        &db,
        &["--json", "compact-history", &id, "--messages", "50"],
    ));
    assert_eq!(nothing["recorded"], false);
    let tokens = run_cli(
        &db,
        &["compact-history", &id, "--tokens", "10", "--dry-run"],
    );
    assert!(
        tokens.status.success(),
        "{}",
        String::from_utf8_lossy(&tokens.stderr)
    );

    // An inner-loop run is a conversation too: its evaluation is a turn.
    let demo = json(&run_cli(
        &db,
        &["--json", "demo", "--sandbox", path_str(&sb)],
    ));
    let plain = demo["session"].as_str().expect("session");
    let out = run_cli(&db, &["turns", plain]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
