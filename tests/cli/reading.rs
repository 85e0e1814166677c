//! Reading a run as a person does: `log` and `show` filters (`--type`,
//! `--tool`, `--evaluation`, `--grep`, `--full`), ids given by their last
//! digits, times with their zone (`--utc`), `stats`, and the pager and
//! colour on a real terminal (a pseudo-terminal from `script`).

use std::process::Command;

use super::{Demo, aj, line_seq};
use crate::common::path_str;

#[test]
fn log_filters_pick_events_by_type_tool_evaluation_and_text() {
    let d = Demo::new();
    let seqs = |args: &[&str]| -> Vec<u64> {
        let mut all = vec!["log", d.id.as_str()];
        all.extend_from_slice(args);
        let out = d.run(&all);
        assert_eq!(out.code, 0, "{out:?}");
        out.lines().iter().map(|l| line_seq(l)).collect()
    };
    let events = d.run(&["--json", "log", &d.id]).json_lines();
    let of_type = |t: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["type"] == t)
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&["--type", "tool_status"]), of_type("tool_status"));
    let mut both = of_type("tool_status");
    both.extend(of_type("provider_call"));
    both.sort_unstable();
    assert_eq!(seqs(&["--type", "tool_status,provider_call"]), both);
    // The word_count call: requested, started, answered, completed.
    assert_eq!(seqs(&["--tool", "word_count"]).len(), 4);
    // --grep sees what the line does not show (arguments in full).
    let grep = seqs(&["--grep", "flaky test"]);
    assert_eq!(grep.len(), 1, "the write_file call's arguments");
    // An evaluation by the 8 digits the text shows.
    let eval = events[1]["evaluation"].as_str().unwrap();
    assert_eq!(seqs(&["--evaluation", &eval[eval.len() - 8..]]).len(), 22);
    assert!(seqs(&["--evaluation", "ffffffff"]).is_empty());
    // Combined with a range, and in JSON.
    assert_eq!(
        seqs(&["--type", "message", "--from", "10", "--to", "15"]),
        [10, 13, 15]
    );
    let json = d
        .run(&[
            "--json",
            "log",
            &d.id,
            "--tool",
            "list_dir",
            "--type",
            "tool_status",
        ])
        .json_lines();
    assert_eq!(json.len(), 2);
    assert!(json.iter().all(|e| e["type"] == "tool_status"));
    // Mistakes are usage errors naming what is valid.
    let line = d
        .run(&["log", &d.id, "--type", "toolstatus"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("tool_status"), "{line}");
    d.run(&["log", &d.id, "--grep", "("]).assert_error(1);
}

#[test]
fn full_shows_whole_contents_and_show_filters_the_state() {
    let d = Demo::new();
    let clipped = d.run(&["log", &d.id, "--type", "message"]);
    assert!(clipped.stdout.contains('…'));
    let full = d.run(&["log", &d.id, "--type", "message", "--full"]);
    assert!(!full.stdout.contains('…'), "{}", full.stdout);
    assert!(full.stdout.contains("what else is in the folder."));
    assert_eq!(
        full.lines().len(),
        clipped.lines().len(),
        "still one line an event"
    );

    let show = d.run(&["show", &d.id, "--type", "tool", "--tool", "word_count"]);
    assert_eq!(show.code, 0, "{show:?}");
    let messages: Vec<&str> = show
        .stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| l.contains(" msg=") && !l.starts_with("evaluation"))
        .collect();
    assert_eq!(messages.len(), 1, "{}", show.stdout);
    assert!(messages[0].contains("9 words"));
    assert!(show.stdout.contains("word_count"));
    assert!(!show.stdout.contains("write_file"), "{}", show.stdout);
    let full = d.run(&["show", &d.id, "--tool", "write_file", "--full"]);
    assert!(
        full.stdout.contains("\"path\":\"README.txt\""),
        "arguments in full"
    );
}

#[test]
fn ids_by_their_last_digits_and_times_with_their_zone() {
    let d = Demo::new();
    let tail = &d.id[d.id.len() - 8..];
    let out = d.run(&["show", tail]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&d.id));
    // Local time carries its offset; --utc says Z. (The tests run in UTC
    // unless TZ says otherwise: either way the zone is printed.)
    let local = d.run(&["log", &d.id, "--to", "0"]);
    let utc = d.run(&["--utc", "log", &d.id, "--to", "0"]);
    let time = |out: &super::Out| out.stdout.split_whitespace().nth(1).unwrap().to_owned();
    assert!(time(&utc).ends_with('Z'), "{utc:?}");
    let local = time(&local);
    assert!(
        local.ends_with('Z') || local.contains('+') || local.rfind('-').is_some_and(|i| i > 8),
        "an offset in {local}"
    );
    let sessions = d.run(&["--utc", "sessions"]);
    assert!(
        sessions.stdout.lines().nth(1).unwrap().contains("Z "),
        "{sessions:?}"
    );
}

#[test]
fn stats_report_tokens_tools_and_failures() {
    let d = Demo::new();
    let v = d.run(&["--json", "stats", &d.id]).json();
    assert_eq!(v["provider_calls"].as_array().unwrap().len(), 3);
    assert_eq!(v["models"][0]["input_tokens"], 252);
    assert_eq!(v["models"][0]["output_tokens"], 34);
    let tools: Vec<(&str, u64)> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["calls"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        tools,
        [("list_dir", 1), ("word_count", 1), ("write_file", 2)]
    );
    for t in v["tools"].as_array().unwrap() {
        let (min, med, max) = (
            t["min_ms"].as_f64(),
            t["median_ms"].as_f64(),
            t["max_ms"].as_f64(),
        );
        assert!(min <= med && med <= max, "{t}");
    }
    assert_eq!(v["failures"]["tools"], 0);
    let text = d.run(&["stats", &d.id]);
    assert!(text.stdout.contains("scripted/scripted-1"), "{text:?}");
    assert!(text.stdout.contains("in provider calls"));

    // A crashed run: the call that was running is counted in doubt.
    let db = d.path("crashed");
    let sb = d.path("sb-crashed");
    let out = aj(
        &db,
        &["demo", "--sandbox", path_str(&sb), "--crash-after", "9"],
    );
    assert_ne!(out.code, 0);
    let id = aj(&db, &["--json", "sessions"]).json_lines()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let v = aj(&db, &["--json", "stats", &id]).json();
    assert_eq!(v["failures"]["in_doubt"], 1, "{v}");
}

/// Runs `agent-journal ARGS` on a pseudo-terminal (`script`), with `env`.
fn on_terminal(db: &std::path::Path, args: &str, env: &[(&str, &str)]) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("notice: no `script`: skipping the terminal test");
        return None;
    }
    let command = format!(
        "{} --db {} {args}",
        env!("CARGO_BIN_EXE_agent-journal"),
        db.display()
    );
    let mut c = Command::new("script");
    c.args(["-qec", &command, "/dev/null"])
        .env_remove("AGENT_JOURNAL_DB")
        .env_remove("NO_COLOR")
        .env_remove("PAGER");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("script");
    assert!(out.status.success(), "{out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn on_a_terminal_log_is_paged_and_coloured_unless_told_not_to() {
    let d = Demo::new();
    let paged = d.path("paged.txt");
    let pager = format!("cat > {}", paged.display());
    let Some(out) = on_terminal(&d.db, &format!("log {}", d.id), &[("PAGER", &pager)]) else {
        return;
    };
    // Everything went to the pager, coloured.
    let text = std::fs::read_to_string(&paged).expect("the pager ran");
    assert_eq!(text.lines().count(), 23, "{text}");
    assert!(text.contains("\x1b[36m"), "colour on a terminal");
    assert!(
        !out.contains("session_opened"),
        "nothing printed beside the pager"
    );

    // --no-pager prints; NO_COLOR removes the colour.
    std::fs::remove_file(&paged).unwrap();
    let out = on_terminal(
        &d.db,
        &format!("log {} --no-pager", d.id),
        &[("PAGER", &pager), ("NO_COLOR", "1")],
    )
    .unwrap();
    assert!(!paged.exists());
    assert!(out.contains("session_opened"));
    assert!(!out.contains("\x1b["), "{out:?}");
    // Not a terminal: no colour, no pager (what every other test sees).
    let piped = d.run(&["log", &d.id]);
    assert!(!piped.stdout.contains("\x1b["));
}
