//! Every command's `--json` output checked against `docs/cli-json.md`: the
//! key lists of the document are parsed here, and each object a command
//! prints must have exactly the documented keys (streams: each line; `log`:
//! the keys of each event's `type`). A key added to the output and not to
//! the document, or the other way round, fails.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::common::{json_lines, path_str, run_cli};

const DOC: &str = include_str!("../docs/cli-json.md");

/// The keys the document lists for the row named `name` (the first
/// `` `{...}` `` after it); `stats provider call` and the like name the
/// later lists of a row (`each provider call `{...}``).
fn documented(name: &str) -> BTreeSet<String> {
    if let Some((cmd, part)) = name.split_once(' ').filter(|(c, _)| *c == "stats") {
        let row = DOC
            .lines()
            .find(|l| l.starts_with(&format!("| `{cmd}` | ")))
            .expect("the stats row");
        let lead = if part == "failures" {
            "`failures` is `{".to_owned()
        } else {
            format!("each {part} `{{")
        };
        let start = row.find(&lead).unwrap_or_else(|| panic!("{lead} in {row}")) + lead.len();
        let end = start + row[start..].find("}`").expect("the end of the key list");
        return row[start..end]
            .split(',')
            .map(|k| k.trim().to_owned())
            .collect();
    }
    // A row named with its own backquotes (`` `resume` with nothing to do ``).
    let lead = if name.contains('`') {
        format!("| {name} | ")
    } else {
        format!("| `{name}` | ")
    };
    let row = DOC
        .lines()
        .find(|l| l.starts_with(&lead))
        .unwrap_or_else(|| panic!("docs/cli-json.md has no row for `{name}`"));
    let start = row.find("`{").expect("a key list") + 2;
    let end = start + row[start..].find("}`").expect("the end of the key list");
    row[start..end]
        .split(',')
        .map(|k| k.trim().to_owned())
        .filter(|k| k != "...")
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn check(v: &Value, row: &str) {
    assert_eq!(keys(v), documented(row), "`{row}` printed {v}");
}

/// Runs `--json ARGS` and returns stdout, asserting success and a quiet
/// stderr (or only JSON lines on it).
fn run(db: &Path, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = run_cli(db, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn object(db: &Path, args: &[&str]) -> Value {
    serde_json::from_slice(&run(db, args))
        .unwrap_or_else(|e| panic!("{args:?}: not one JSON object: {e}"))
}

/// Checks every line of `log --json` of `id`; returns the types seen.
fn check_log(db: &Path, id: &str) -> BTreeSet<String> {
    let base = ["session", "seq", "at", "type"].map(String::from);
    let mut seen = BTreeSet::new();
    for e in json_lines(&run(db, &["log", id])).as_array().unwrap() {
        let ty = e["type"].as_str().expect("a type");
        let mut expected = documented(ty);
        expected.extend(base.iter().cloned());
        assert_eq!(keys(e), expected, "event of type `{ty}`: {e}");
        seen.insert(ty.to_owned());
    }
    seen
}

#[test]
fn every_commands_json_output_has_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let p = |name: &str| dir.path().join(name);

    check(&object(&db, &["demo", "--sandbox", path_str(&sb)]), "demo");
    // A crashed run, for `pending` and `resume`.
    let crashed = run_cli(
        &db,
        &[
            "demo",
            "--sandbox",
            path_str(&p("sb2")),
            "--crash-after",
            "9",
        ],
    );
    assert!(!crashed.status.success());
    let sessions = json_lines(&run(&db, &["sessions"]));
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    for s in sessions {
        check(s, "sessions");
    }
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    let crashed = sessions[1]["id"].as_str().unwrap().to_owned();
    check(&object(&db, &["pending", &crashed]), "pending");
    check(&object(&db, &["diff", &id, "3", "9"]), "diff");
    check(&object(&db, &["diff", &id, &crashed]), "diff A B");
    check(&object(&db, &["verify"]), "verify");
    check(&object(&db, &["show", &id]), "show");
    let stats = object(&db, &["stats", &id]);
    check(&stats, "stats");
    check(&stats["provider_calls"][0], "stats provider call");
    check(&stats["models"][0], "stats model");
    check(&stats["tools"][0], "stats tool");
    check(&stats["failures"], "stats failures");
    let fork = object(&db, &["fork", &id, "--at", "5"]);
    check(&fork, "fork");
    let fork_id = fork["session"].as_str().unwrap().to_owned();
    let listed = json_lines(&run(&db, &["sessions"]));
    let forked = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == fork_id.as_str())
        .expect("the fork is listed");
    assert_eq!(forked["parent"]["id"], id.as_str());
    assert_eq!(forked["parent"]["at"], 5);
    let export = p("run.ajournal");
    check(
        &object(
            &db,
            &[
                "export",
                &id,
                "--format",
                "journal",
                "-o",
                path_str(&export),
            ],
        ),
        "export",
    );
    check(
        &object(
            &p("db-imported"),
            &["import", path_str(&export), "--format", "journal"],
        ),
        "import",
    );
    check(
        &object(&db, &["view", &id, "-o", path_str(&p("run.html"))]),
        "view",
    );
    check(
        &object(&db, &["compact", "--to", path_str(&p("db-compact"))]),
        "compact",
    );
    check(
        &object(&db, &["salvage", "--to", path_str(&p("db-salvage"))]),
        "salvage",
    );
    check(
        &object(
            &db,
            &[
                "copy",
                "--from",
                path_str(&db),
                "--to",
                path_str(&p("db-copy")),
            ],
        ),
        "copy",
    );
    check(
        &object(&db, &["resume", &crashed, "--sandbox", path_str(&p("sb3"))]),
        "resume",
    );
    // Again: nothing left to do.
    check(
        &object(&db, &["resume", &crashed, "--sandbox", path_str(&p("sb3"))]),
        "`resume` with nothing to do",
    );

    // The conversation engine's commands.
    check(
        &object(
            &db,
            &["demo", "--conversation", "--sandbox", path_str(&p("sb4"))],
        ),
        "demo --conversation",
    );
    // Every list command streams JSON Lines.
    let conversations = json_lines(&run(&db, &["conversations"]));
    for c in conversations.as_array().unwrap() {
        check(c, "conversations");
    }
    let conversation = conversations[0]["id"].as_str().unwrap().to_owned();
    let turns = json_lines(&run(&db, &["turns", &conversation]));
    assert!(turns.as_array().unwrap().len() > 1);
    for t in turns.as_array().unwrap() {
        check(t, "turns");
    }
    let turn = turns[0]["id"].as_str().unwrap().to_owned();
    check(
        &object(&db, &["show", &conversation, "--turn", &turn]),
        "show --turn TURN",
    );
    check(
        &object(&db, &["compact-history", &conversation, "--messages", "4"]),
        "compact-history",
    );
    // A conversation killed inside a turn, for `cancel-turn`.
    let killed = run_cli(
        &db,
        &[
            "demo",
            "--conversation",
            "--sandbox",
            path_str(&p("sb4")),
            "--crash-after",
            "9",
        ],
    );
    assert!(!killed.status.success());
    let all = json_lines(&run(&db, &["sessions"]));
    let killed = all.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pending = object(&db, &["pending", &killed]);
    let turn = pending["interrupted_turns"][0]["turn"].as_str().unwrap();
    check(&object(&db, &["cancel-turn", &killed, turn]), "cancel-turn");

    // Every event of every session.
    let mut seen = BTreeSet::new();
    for s in json_lines(&run(&db, &["sessions"])).as_array().unwrap() {
        seen.extend(check_log(&db, s["id"].as_str().unwrap()));
    }
    for ty in [
        "session_opened",
        "evaluation_started",
        "message",
        "tool_status",
        "provider_call",
        "evaluation_finished",
        "forked",
        "conversation_created",
        "conversation_message",
        "turn",
        "conversation_provider_call",
        "history_compacted",
    ] {
        assert!(seen.contains(ty), "no `{ty}` event was checked: {seen:?}");
    }

    check(
        &object(&db, &["sessions", "--delete", &fork_id]),
        "sessions --delete",
    );
    std::fs::write(p("edit.txt"), "edited").unwrap();
    let edit = format!("call_1_1={}", path_str(&p("edit.txt")));
    check(
        &object(&db, &["fork", &id, "--at", "5", "--replace-result", &edit]),
        "fork --replace-result",
    );
}

#[test]
fn errors_and_usage_mistakes_are_json_on_stderr_with_their_code() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    assert!(
        run_cli(&db, &["demo", "--sandbox", path_str(&sb)])
            .status
            .success()
    );
    let cases: [(&[&str], i32, &str); 4] = [
        (&["--json", "show", "ffffffff"], 1, "invalid_input"),
        (&["--json", "log"], 2, "usage"),
        (&["--json", "sessions", "--delete", " "], 2, "usage"),
        (&["--json", "frobnicate"], 2, "usage"),
    ];
    for (args, code, kind) in cases {
        let out = run_cli(&db, args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        let v: Value = serde_json::from_str(lines[0]).expect("a JSON error line");
        assert_eq!(keys(&v), BTreeSet::from(["error".to_owned()]));
        assert_eq!(
            keys(&v["error"]),
            ["code", "kind", "message"].map(String::from).into()
        );
        assert_eq!(v["error"]["code"], code, "{args:?}");
        assert_eq!(v["error"]["kind"], kind, "{args:?}");
    }
    // Without --json, the same mistakes are text.
    let out = run_cli(&db, &["show", "ffffffff"]);
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    // Help is still help.
    let out = run_cli(&db, &["--json", "--help"]);
    assert!(out.status.success());
}
