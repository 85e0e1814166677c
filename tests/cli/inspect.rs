//! Reading a session with the binary: `sessions`, `log`, `show`, `diff`
//! and `pending`, in text and in `--json`, on the demo's session.

use super::{Demo, aj, kind, line_seq};
use crate::common::path_str;

#[test]
fn demo_records_a_finished_session_that_sessions_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let out = aj(&db, &["demo", "--sandbox", path_str(&sb)]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");

    let listed = aj(&db, &["sessions", "--json"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let all = listed.json_lines();
    let v = serde_json::Value::Array(all.clone());
    assert_eq!(all.len(), 1, "{v}");
    let s = &all[0];
    let id = s["id"].as_str().expect("id");
    assert!(
        out.stdout.contains(&format!("recorded session {id}")),
        "{out:?}"
    );
    assert_eq!(s["events"], 23);
    assert_eq!(s["status"], "finished");
    assert_eq!(s["labels"][0], serde_json::json!(["agent", "demo"]));
    assert_eq!(s["labels"][1][0], "sandbox");
    for field in ["created", "last_activity"] {
        let t = s[field].as_str().expect(field);
        assert!(
            chrono::DateTime::parse_from_rfc3339(t).is_ok(),
            "{field}: {t}"
        );
    }

    // The tools really ran, in the sandbox given.
    let sandbox = s["labels"][1][1].as_str().expect("sandbox label");
    assert!(
        std::path::Path::new(sandbox).starts_with(sb.canonicalize().expect("sb")),
        "{sandbox}"
    );
    let notes = std::path::Path::new(sandbox).join("notes.txt");
    let text = std::fs::read_to_string(&notes).expect("notes.txt written by the demo's tool");
    assert!(text.contains("buy milk"), "{text}");

    let table = aj(&db, &["sessions"]);
    assert_eq!(table.code, 0, "{table:?}");
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} not listed: {table:?}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols.contains(&"23") && cols.contains(&"finished"), "{row}");
}

#[test]
fn log_shows_one_line_per_event_and_from_to_restrict_it() {
    let d = Demo::new();
    let out = d.run(&["log", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out.lines().iter().map(|l| line_seq(l)).collect();
    assert_eq!(seqs, (0..23).collect::<Vec<_>>(), "{}", out.stdout);

    let out = d.run(&["log", &d.id, "--from", "5", "--to", "9"]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out.lines().iter().map(|l| line_seq(l)).collect();
    assert_eq!(seqs, vec![5, 6, 7, 8, 9]);

    let out = d.run(&["log", &d.id, "--from", "15"]);
    assert_eq!(out.lines().len(), 8, "{out:?}");

    let all = d.events(&d.db, &d.id);
    assert_eq!(all.len(), 23);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
        assert_eq!(e["session"], d.id.as_str());
    }
    assert_eq!(kind(&all[0]), "session_opened");
    assert_eq!(kind(&all[22]), "evaluation_finished");

    let out = d.run(&["log", &d.id, "--json", "--from", "5", "--to", "9"]);
    assert_eq!(out.code, 0, "{out:?}");
    let part = out.json_lines();
    assert_eq!(part.len(), 5);
    assert_eq!(part[..], all[5..10]);

    // A `--to` past the head means the end; a `--from` past it is an error,
    // not an empty timeline.
    let out = d.run(&["log", &d.id, "--from", "5", "--to", "25"]);
    assert_eq!(out.lines().len(), 18, "{out:?}");
    d.run(&["log", &d.id, "--from", "25"]).assert_error(1);
}

#[test]
fn sessions_are_found_by_unique_prefix_and_bad_prefixes_are_one_line_errors() {
    let d = Demo::new();
    let fork = d.run(&["fork", &d.id, "--at", "3", "--json"]);
    assert_eq!(fork.code, 0, "{fork:?}");
    let other = fork.json()["session"].as_str().expect("id").to_owned();
    let common =
        d.id.chars()
            .zip(other.chars())
            .take_while(|(a, b)| a == b)
            .count();

    let unique = &d.id[..common + 1];
    let out = d.run(&["log", unique]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.lines().len(), 23);
    let upper = unique.to_ascii_uppercase();
    assert_eq!(d.run(&["log", &upper]).lines().len(), 23);

    let ambiguous = &d.id[..common];
    let line = d.run(&["log", ambiguous]).assert_error(1).to_owned();
    assert!(line.contains("matches 2 sessions"), "{line}");

    let line = d.run(&["log", "zz"]).assert_error(1).to_owned();
    assert!(line.contains("no session matches \"zz\""), "{line}");

    let unknown = agent_journal::SessionId::new().to_string();
    let line = d.run(&["show", &unknown]).assert_error(1).to_owned();
    assert!(
        line.contains(&unknown) && line.contains("not found"),
        "{line}"
    );
}

#[test]
fn show_at_a_seq_shows_the_state_right_after_it() {
    let d = Demo::new();
    let events = d.events(&d.db, &d.id);
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_status" && e["status"] == "started")
        .expect("a tool started");
    let at = started["seq"].as_u64().expect("seq");
    let call = started["call_id"].as_str().expect("call id");

    let status_at = |at: Option<u64>| -> String {
        let at_text = at.map(|a| a.to_string());
        let mut args = vec!["show", d.id.as_str()];
        if let Some(a) = &at_text {
            args.extend(["--at", a.as_str()]);
        }
        let out = d.run(&args);
        assert_eq!(out.code, 0, "{out:?}");
        let row = out
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(call))
            .unwrap_or_else(|| panic!("no row for {call}: {}", out.stdout));
        row.split_whitespace().nth(2).expect("status").to_owned()
    };
    assert_eq!(status_at(Some(at - 1)), "pending");
    assert_eq!(status_at(Some(at)), "started");
    assert_eq!(status_at(None), "completed");
    assert_eq!(status_at(Some(22)), "completed");

    let out = d.run(&["show", &d.id, "--at", "3"]);
    assert!(out.stdout.contains("at seq 3 (of 22)"), "{out:?}");

    let out = d.run(&["show", &d.id, "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "children_ids",
            "created_at",
            "parent_id",
            "policies",
            "slices",
            "tags",
            "version"
        ]
    );
    assert!(!v["slices"].as_array().expect("slices").is_empty());

    let line = d
        .run(&["show", &d.id, "--at", "23"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("seq 23") && line.contains(&d.id), "{line}");
}

#[test]
fn diff_shows_what_happened_between_two_seqs() {
    let d = Demo::new();
    // Events 4..=10: a provider call, the assistant's two calls, the first
    // call started, its result, completed, the second started, its result.
    let v = d.run(&["diff", &d.id, "3", "10", "--json"]).json();
    assert_eq!((v["from"].as_u64(), v["to"].as_u64()), (Some(3), Some(10)));
    assert_eq!(v["events"], 7, "{v}");
    let new: Vec<(String, u64)> = v["new_messages"]
        .as_array()
        .expect("array")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["sequence"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [("assistant", 2), ("tool", 3), ("tool", 4)]
        .iter()
        .map(|(r, q)| ((*r).to_owned(), *q))
        .collect();
    assert_eq!(new, want, "{v}");
    let calls = v["tool_calls"].as_array().expect("array");
    let call = |id: &str| {
        calls
            .iter()
            .find(|c| c["call_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {v}"))
    };
    assert_eq!(
        (
            call("call_1_1")["from"].is_null(),
            call("call_1_1")["to"].as_str()
        ),
        (true, Some("completed"))
    );
    assert_eq!(call("call_1_2")["to"], "started");
    assert_eq!(calls.len(), 2, "{v}");
    assert_eq!(
        (
            v["tokens"]["input"].as_u64(),
            v["tokens"]["output"].as_u64()
        ),
        (Some(53), Some(8))
    );

    // The end of the run: the final answer and the evaluation's finish.
    let text = d.run(&["diff", &d.id, "20", "22"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("from seq 20 to seq 22: 2 events"),
        "{text:?}"
    );
    assert!(text.stdout.contains("+ assistant msg=8"), "{text:?}");
    let v = d.run(&["diff", &d.id, "20", "22", "--json"]).json();
    let evals = v["evaluations"].as_array().expect("array");
    assert_eq!(evals.len(), 1, "{v}");
    assert!(
        evals[0]
            .as_str()
            .is_some_and(|e| e.ends_with(" finished: succeeded")),
        "{v}"
    );

    // A message appended again (same id) is not new; one appended twice
    // within the range is listed once.
    {
        let j = agent_journal::Journal::open(&d.db).expect("open");
        let s = j
            .sessions()
            .expect("sessions")
            .into_iter()
            .next()
            .expect("one");
        let s = j.session(s).expect("session");
        let events = s.events(7..8).expect("event 7");
        s.append(events[0].event.clone()).expect("duplicate");
        let eval = match &events[0].event {
            agent_journal::Event::Message(m) => m.evaluation_id,
            other => panic!("event 7 is {other:?}"),
        };
        let fresh = agent_journal::InnerMessage::new(agent_journal::Role::User, "again?", eval, 9);
        for _ in 0..2 {
            s.append(agent_journal::Event::Message(fresh.clone()))
                .expect("append");
        }
    }
    let v = d.run(&["diff", &d.id, "22", "25", "--json"]).json();
    assert_eq!(v["events"], 3, "{v}");
    let new = v["new_messages"].as_array().expect("array");
    assert_eq!(new.len(), 1, "{v}");
    assert_eq!(new[0]["content"], "again?");

    let line = d
        .run(&["diff", &d.id, "10", "3"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("A <= B"), "{line}");
    let line = d
        .run(&["diff", &d.id, "3", "99"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("99"), "{line}");
}

#[test]
fn pending_shows_the_crash_point_and_the_unfinished_tool_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    // Event 6 is the first call's `Started`: the process aborts right
    // after it, with that call in doubt and the second one pending.
    let out = aj(
        &db,
        &["demo", "--sandbox", path_str(&sb), "--crash-after", "6"],
    );
    assert_ne!(out.code, 0, "{out:?}");
    let sessions = aj(&db, &["sessions", "--json"]).json_lines();
    let id = sessions[0]["id"].as_str().expect("id").to_owned();

    let v = aj(&db, &["pending", &id, "--json"]).json();
    assert_eq!(v["session"], id.as_str());
    assert_eq!(
        (v["crash_point"].as_u64(), v["state"].as_str()),
        (Some(6), Some("in_doubt"))
    );
    assert_eq!(
        (v["messages"].as_u64(), v["next_sequence"].as_u64()),
        (Some(3), Some(3))
    );
    let ids = |k: &str| -> Vec<String> {
        v[k].as_array()
            .expect("array")
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["call_id"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(ids("in_doubt"), ["call_1_1 started"], "{v}");
    assert_eq!(ids("pending"), ["call_1_2 pending"], "{v}");

    let text = aj(&db, &["pending", &id]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.contains("crash point: seq 6"), "{text:?}");
    assert!(
        text.stdout.contains("in doubt:") && text.stdout.contains("call_1_1"),
        "{text:?}"
    );

    // A finished session has nothing pending.
    let d = Demo::new();
    let v = d.run(&["pending", &d.id, "--json"]).json();
    assert_eq!(v["state"], "finished", "{v}");
    assert_eq!(
        (
            v["in_doubt"].as_array().map(Vec::len),
            v["pending"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{v}"
    );
    let line = aj(&db, &["pending", "ffff"]).assert_error(1).to_owned();
    assert!(line.contains("no session matches"), "{line}");
}

#[test]
fn log_tells_apart_evaluations_started_in_the_same_minute() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let id = {
        let j = agent_journal::Journal::open(&db).expect("open");
        let s = j.create_session().expect("session");
        for _ in 0..3 {
            let e = s.start_evaluation("ns", "key").expect("start");
            e.finish(agent_journal::Outcome::Succeeded).expect("finish");
        }
        s.id().to_string()
    };
    let out = aj(&db, &["log", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    let shown: std::collections::BTreeSet<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split("evaluation ").nth(1)?.split(' ').next())
        .collect();
    // UUIDv7 ids of one minute share their first digits: the log shows
    // their random last ones.
    assert_eq!(shown.len(), 3, "{}", out.stdout);
}

#[test]
fn log_names_the_seq_asked_for_and_a_to_past_the_head_clamps() {
    let d = Demo::new();
    let out = d.run(&["log", &d.id, "--from", "500"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("seq 500 is past the head"), "{out:?}");
    let out = d.run(&["log", &d.id, "--from", "20", "--to", "900"]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out.stdout.lines().map(line_seq).collect();
    assert_eq!(seqs, [20, 21, 22], "to the end of the 23 events");
}

#[test]
fn a_crash_inside_an_atomic_batch_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    // Events 15 and 16 of the demo are one batch (a tool result and its
    // status).
    let out = aj(
        &db,
        &["demo", "--sandbox", path_str(&sb), "--crash-after", "15"],
    );
    assert!(
        out.stderr.contains("after event 15")
            && out
                .stderr
                .contains("one atomic batch with the events up to 16"),
        "{out:?}"
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_command_definitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    for shell in ["bash", "zsh", "fish"] {
        let out = aj(&db, &["completions", shell]);
        assert_eq!(out.code, 0, "{out:?}");
        for sub in ["demo", "resume", "copy", "verify"] {
            assert!(out.stdout.contains(sub), "{shell} lacks {sub}");
        }
    }
    let out = aj(&db, &["man"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(".TH agent-journal 1"), "{}", out.stdout);
    assert!(!db.exists(), "neither creates a database");
}
