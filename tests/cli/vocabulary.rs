//! One vocabulary in every output: an event's type is the same word in the
//! text of `log`, in `log --json`, and in what `--type` takes (the older
//! `ToolStatus` spelling still accepted); `seq` is only ever an event's
//! number (a message's index is `msg=`); a state is one snake_case word;
//! and every time of a JSON output has the same shape.

use serde_json::Value;

use super::Demo;

/// Every string of `v` (recursively) that reads as a date and time.
fn times(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            if b.len() >= 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' {
                out.push(s.clone());
            }
        }
        Value::Array(a) => a.iter().for_each(|x| times(x, out)),
        Value::Object(o) => o.values().for_each(|x| times(x, out)),
        _ => {}
    }
}

#[test]
fn log_text_and_json_and_type_filters_use_one_word_per_event_type() {
    let d = Demo::new();
    let json = d.run(&["--json", "log", &d.id]).json_lines();
    let text = d.run(&["--utc", "log", &d.id, "--no-pager"]);
    assert_eq!(text.code, 0, "{text:?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), json.len());
    for (line, e) in lines.iter().zip(&json) {
        // `SEQ  [DATE ]TIMEZ  TYPE  what`: the word after the time.
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| w.ends_with('Z')).expect("a time");
        assert_eq!(words[0], e["seq"].to_string(), "{line}");
        assert_eq!(words[at + 1], e["type"].as_str().unwrap(), "{line}");
    }
    // `--type` takes that word, and the older spelling as its alias.
    let new = d.run(&["log", &d.id, "--type", "tool_status", "--no-pager"]);
    let old = d.run(&["log", &d.id, "--type", "ToolStatus", "--no-pager"]);
    assert_eq!(new.code, 0, "{new:?}");
    assert_eq!(new.stdout, old.stdout);
    assert_eq!(new.stdout.lines().count(), 8, "{new:?}");
    assert!(new.stdout.lines().all(|l| l.contains(" tool_status ")));
    let bad = d.run(&["log", &d.id, "--type", "toolstatus"]);
    assert!(bad.assert_error(1).contains("tool_status"), "{bad:?}");
}

#[test]
fn seq_is_an_event_number_and_a_message_index_is_msg() {
    let d = Demo::new();
    for args in [
        vec!["show", d.id.as_str(), "--no-pager"],
        vec!["log", d.id.as_str(), "--no-pager"],
        vec!["diff", d.id.as_str(), "0", "22"],
    ] {
        let out = d.run(&args);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(!out.stdout.contains("seq="), "{args:?}: {}", out.stdout);
        assert!(out.stdout.contains("msg="), "{args:?}: {}", out.stdout);
    }
}

#[test]
fn every_time_of_the_json_outputs_has_one_shape() {
    let d = Demo::new();
    let mut all = Vec::new();
    for e in d.run(&["--json", "log", &d.id]).json_lines() {
        times(&e, &mut all);
    }
    for s in d.run(&["--json", "sessions"]).json_lines() {
        times(&s, &mut all);
    }
    times(&d.run(&["--json", "show", &d.id]).json(), &mut all);
    let conversation = tempfile::tempdir().expect("tempdir");
    let db = conversation.path().join("db");
    let sb = conversation.path().join("sb");
    let out = super::aj(
        &db,
        &[
            "--json",
            "demo",
            "--conversation",
            "--sandbox",
            crate::common::path_str(&sb),
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let id = out.json()["conversation"].as_str().expect("id").to_owned();
    for args in [
        vec!["conversations"],
        vec!["turns", id.as_str()],
        vec!["log", id.as_str()],
    ] {
        let mut a = vec!["--json"];
        a.extend(args);
        for v in super::aj(&db, &a).json_lines() {
            times(&v, &mut all);
        }
    }
    assert!(all.len() > 50, "{}", all.len());
    for t in &all {
        assert!(t.ends_with('Z'), "not UTC with a Z: {t}");
        let parsed = chrono::DateTime::parse_from_rfc3339(t).expect("RFC 3339");
        let again = parsed
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        assert_eq!(&again, t, "one shape");
    }
}
