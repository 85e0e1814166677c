//! Compare and edit (issue 35 item 4): `fork SESSION --at SEQ
//! --replace-result CALL_ID=FILE` records the edited result in the fork
//! (the parent untouched) and `resume FORK` runs on from it: the demo's
//! scripted provider echoes the last turn's tool results in its final
//! answer, so that answer shows what the next provider request carried.

use serde_json::Value;

use super::{Demo, Out};
use crate::common::path_str;

/// The seq of the assistant message making `call`, in `--json log ID`.
fn seq_of_call(d: &Demo, id: &str, call: &str) -> u64 {
    let out = d.run(&["--json", "log", id]);
    assert_eq!(out.code, 0, "{out:?}");
    out.json_lines()
        .iter()
        .find(|e| {
            e["tool_calls"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["call_id"] == call))
        })
        .and_then(|e| e["seq"].as_u64())
        .expect("the assistant message making the call")
}

/// Every event of `id` under `--json log`, times included.
fn events(d: &Demo, id: &str) -> Vec<Value> {
    let out = d.run(&["--json", "log", id]);
    assert_eq!(out.code, 0, "{out:?}");
    out.json_lines()
}

fn session_count(d: &Demo) -> usize {
    d.run(&["--json", "sessions"]).json_lines().len()
}

/// `fork --json ID --at SEQ --replace-result call_2_1=FILE` of the demo,
/// FILE holding "42 words (edited)", SEQ the seq of the message making
/// that call: the seq and the run.
fn fork_with_edited_result(d: &Demo) -> (u64, Out) {
    let at = seq_of_call(d, &d.id, "call_2_1");
    let file = d.dir.path().join("edited.txt");
    std::fs::write(&file, "42 words (edited)").expect("write the edit");
    let edit = format!("call_2_1={}", path_str(&file));
    let out = d.run(&[
        "--json",
        "fork",
        &d.id,
        "--at",
        &at.to_string(),
        "--replace-result",
        &edit,
    ]);
    (at, out)
}

#[test]
fn an_edited_result_is_what_the_resumed_fork_sends_and_the_parent_is_untouched() {
    let d = Demo::new();
    let before = events(&d, &d.id);
    let (at, out) = fork_with_edited_result(&d);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    let fork = v["session"].as_str().expect("the fork's id").to_owned();
    assert_eq!(v["parent"], d.id.as_str(), "{v}");
    assert_eq!(v["edits"][0]["replace_result"], "call_2_1", "{v}");
    assert_eq!(v["edits"][0]["bytes"], 17, "{v}");
    // Nothing rewritten: the parent's events are byte for byte as they were.
    assert_eq!(events(&d, &d.id), before);
    // The fork: its fork point, the edit's marker, then the result and the
    // call's status as the recorder writes them.
    let mine: Vec<Value> = events(&d, &fork)
        .into_iter()
        .filter(|e| e["seq"].as_u64() > Some(at))
        .collect();
    let kinds: Vec<&str> = mine.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["forked", "custom", "message", "tool_status"],
        "{mine:?}"
    );
    assert_eq!(mine[2]["content"], "42 words (edited)", "{mine:?}");
    assert_eq!(mine[2]["tool_call_id"], "call_2_1", "{mine:?}");
    assert_eq!(mine[3]["status"], "completed", "{mine:?}");

    // `resume FORK` goes on from the edited state: word_count does not run
    // again, list_dir (still pending there) runs, and the final answer
    // echoes the edited result.
    let out = d.run(&["--json", "resume", &fork]);
    assert_eq!(out.code, 0, "{out:?}");
    let r = out.json();
    assert_eq!(
        r["answer"], "Done. The tools said: 42 words (edited); README.txt, notes.txt",
        "{r}"
    );
    let after: Vec<Value> = events(&d, &fork)
        .into_iter()
        .filter(|e| e["seq"].as_u64() > Some(at))
        .collect();
    let started: Vec<&Value> = after
        .iter()
        .filter(|e| e["type"] == "tool_status" && e["status"] == "started")
        .map(|e| &e["call_id"])
        .collect();
    assert_eq!(started, ["call_2_2"], "{after:?}");
    assert_eq!(events(&d, &d.id), before, "the parent, after the resume");
}

#[test]
fn a_result_already_recorded_is_refused_naming_the_seq_to_fork_at_and_nothing_is_written() {
    let d = Demo::new();
    let at = seq_of_call(&d, &d.id, "call_2_1");
    let file = d.dir.path().join("edited.txt");
    std::fs::write(&file, "edited").expect("write the edit");
    let edit = format!("call_2_1={}", path_str(&file));
    let n = session_count(&d);
    // At the end of the run call_2_1 has its result: refused, with the seq
    // just before the result's (its `started`, right after the assistant
    // message) to fork at instead.
    let out = d.run(&["fork", &d.id, "--at", "22", "--replace-result", &edit]);
    let line = out.assert_error(1);
    assert!(line.contains("already has its result"), "{line}");
    assert!(
        line.contains(&format!("--at {}", at + 1)),
        "names the seq to fork at: {line}"
    );
    assert_eq!(session_count(&d), n, "no fork made");
    // An unknown call, a malformed argument, a missing file: refused too.
    let unknown = format!("call_9_9={}", path_str(&file));
    let missing = format!("call_2_1={}", path_str(&d.dir.path().join("absent")));
    for bad in [unknown.as_str(), "call_2_1", "=x", missing.as_str()] {
        let out = d.run(&[
            "fork",
            &d.id,
            "--at",
            &at.to_string(),
            "--replace-result",
            bad,
        ]);
        out.assert_error(1);
        assert_eq!(session_count(&d), n, "{bad}: no fork made");
    }
    // The same call named twice.
    let out = d.run(&[
        "fork",
        &d.id,
        "--at",
        &at.to_string(),
        "--replace-result",
        &edit,
        "--replace-result",
        &edit,
    ]);
    out.assert_error(1);
    assert_eq!(session_count(&d), n);
}

#[test]
fn diff_of_two_sessions_aligns_a_fork_by_seq_then_by_message_and_two_runs_by_message() {
    let d = Demo::new();
    let (at, out) = fork_with_edited_result(&d);
    assert_eq!(out.code, 0, "{out:?}");
    let fork = out.json()["session"].as_str().expect("id").to_owned();
    assert_eq!(d.run(&["resume", &fork]).code, 0);

    // A run and its edited fork: they share the parent's events through
    // the fork point; after it, the edited result and the answer echoing
    // it differ, list_dir's result is alike.
    let out = d.run(&["--json", "diff", &d.id, &fork]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert_eq!(v["shared_events"], at + 1, "{v}");
    let changes: Vec<(u64, &str)> = v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["sequence"].as_u64().expect("seq"),
                m["change"].as_str().expect("change"),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [(6, "changed"), (7, "same"), (8, "changed")],
        "{v}"
    );
    assert_eq!(v["messages"][0]["a"]["content"], "9 words", "{v}");
    assert_eq!(v["messages"][0]["b"]["content"], "42 words (edited)", "{v}");
    let calls = v["tool_calls"].as_array().expect("tool calls");
    assert_eq!(calls.len(), 1, "{v}");
    assert_eq!(calls[0]["call_id"], "call_2_1", "{v}");
    assert_eq!(calls[0]["b"]["result"], "42 words (edited)", "{v}");
    assert_eq!(v["outcomes"]["b"][0], "succeeded", "{v}");
    // For people: the shared seqs and the edited message.
    let text = d.run(&["diff", &d.id, &fork]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains(&format!("share seq 0..={at}")),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("42 words (edited)"), "{}", text.stdout);

    // Two runs of one prompt share no event (each has its own sandbox
    // label) and are paired by message: all alike.
    let sb = d.dir.path().join("sb-again");
    let again = d.run(&["--json", "demo", "--sandbox", path_str(&sb)]);
    assert_eq!(again.code, 0, "{again:?}");
    let other = again.json()["session"].as_str().expect("id").to_owned();
    let v = d.run(&["--json", "diff", &d.id, &other]).json();
    assert_eq!(v["shared_events"], 0, "{v}");
    let messages = v["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 9, "{v}");
    assert!(messages.iter().all(|m| m["change"] == "same"), "{v}");
    assert_eq!(v["tool_calls"], serde_json::json!([]), "{v}");
    // Side by side in a page: the same comparison, loading nothing.
    let html = d.dir.path().join("compare.html");
    let out = d.run(&["view", &d.id, "--compare", &fork, "-o", path_str(&html)]);
    assert_eq!(out.code, 0, "{out:?}");
    let page = std::fs::read_to_string(&html).expect("the page");
    assert!(page.contains("default-src 'none'"), "a CSP");
    let start = page.find("id=\"diff-data\">").expect("the data") + "id=\"diff-data\">".len();
    let end = start + page[start..].find("</script>").expect("its end");
    let data: Value = serde_json::from_str(&page[start..end]).expect("JSON data");
    let v = d.run(&["--json", "diff", &d.id, &fork]).json();
    assert_eq!(data, v, "the page shows what diff --json prints");
    // And a browser lays it out: the edited result beside the original.
    if let Some(chromium) = crate::view::chromium() {
        let url = format!("file://{}", html.display());
        let profile = d.dir.path().join("profile");
        let dom = crate::view::headless(&chromium, &profile, &url, &["--dump-dom"]);
        let row = dom
            .split("<tr ")
            .find(|r| r.contains("msg=6 changed"))
            .unwrap_or_else(|| panic!("a changed row for msg=6: {dom}"));
        let (a, b) = (row.find("9 words"), row.find("42 words (edited)"));
        assert!(a.is_some() && b.is_some() && a < b, "A then B: {row}");
    }
    // The seq form is unchanged; a seq that is not a number is refused.
    assert_eq!(d.run(&["diff", &d.id, "3", "9"]).code, 0);
    d.run(&["diff", &d.id, "x", "9"]).assert_error(1);
}

/// The seq of message `msg=n` of `id`, and its content.
fn message(d: &Demo, id: &str, n: u64) -> (u64, String) {
    events(d, id)
        .iter()
        .find(|e| e["type"] == "message" && e["sequence"] == n)
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["content"].as_str().expect("content").to_owned(),
            )
        })
        .expect("the message")
}

#[test]
fn an_edited_user_message_is_what_the_resumed_fork_sends() {
    let d = Demo::new();
    let before = events(&d, &d.id);
    let (user_seq, _) = message(&d, &d.id, 1);
    let (_, system) = message(&d, &d.id, 0);
    let edited = "Write a much longer todo list to notes.txt, with many more words in it, \
                  then count them and list the folder.";
    let file = d.dir.path().join("user.txt");
    std::fs::write(&file, edited).expect("write the edit");
    let edit = format!("1={}", path_str(&file));
    // Where message 1 is already recorded: refused, naming the seq before it.
    let n = session_count(&d);
    let out = d.run(&[
        "fork",
        &d.id,
        "--at",
        &user_seq.to_string(),
        "--replace-message",
        &edit,
    ]);
    let line = out.assert_error(1);
    assert!(
        line.contains(&format!("--at {}", user_seq - 1)),
        "names the seq to fork at: {line}"
    );
    // A tool result is --replace-result's; a message no evaluation has.
    let tool = format!("6={}", path_str(&file));
    let line = d
        .run(&["fork", &d.id, "--at", "14", "--replace-message", &tool])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("--replace-result call_2_1"), "{line}");
    let absent = format!("99={}", path_str(&file));
    d.run(&["fork", &d.id, "--at", "2", "--replace-message", &absent])
        .assert_error(1);
    assert_eq!(session_count(&d), n, "no fork made");

    let at = (user_seq - 1).to_string();
    let out = d.run(&[
        "--json",
        "fork",
        &d.id,
        "--at",
        &at,
        "--replace-message",
        &edit,
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let fork = out.json()["session"].as_str().expect("id").to_owned();
    assert_eq!(message(&d, &fork, 1).1, edited);
    assert_eq!(events(&d, &d.id), before, "the parent is untouched");
    assert_eq!(d.run(&["resume", &fork]).code, 0);
    // The scripted provider counts a request's input tokens from its
    // messages' lengths (len/4 + 4 each): turn 1 carried the system
    // prompt and the edited user message, not the original.
    let turn1 = events(&d, &fork)
        .into_iter()
        .find(|e| e["type"] == "provider_call" && e["seq"].as_u64() > Some(user_seq))
        .expect("the fork's first provider call");
    let expected = (system.len() / 4 + 4) + (edited.len() / 4 + 4);
    assert_eq!(turn1["input_tokens"], expected as u64, "{turn1}");
    let v = d.run(&["--json", "diff", &d.id, &fork]).json();
    assert_eq!(v["shared_events"], user_seq, "{v}");
    assert_eq!(v["messages"][0]["change"], "changed", "{v}");
    assert_eq!(v["messages"][0]["b"]["content"], edited, "{v}");
}
