//! `view`'s timeline read back from headless Chromium's DOM: every status
//! a tool call, an evaluation and a turn can have, shown as the library's
//! fold has it (not ranked again by the page); a crash banner at the crash
//! point with the calls in doubt; an idle gap before a resume cut to a
//! break; failed rows red; arguments pretty-printed; and the cost of a run
//! from a price table in `stats`, `sessions` and the page.
//!
//! Screenshots of a crashed run, a resumed run and a conversation go to
//! `docs/screenshots/` with
//! `cargo test --test integration cli::timeline::screenshots -- --ignored`.

use std::path::{Path, PathBuf};

use agent_journal::conversation::{ConversationEvent, TurnError, TurnId, TurnRecord, TurnStatus};
use agent_journal::{Event, InnerMessage, Journal, Outcome, Role, ToolCallRecord};
use chrono::Utc;
use serde_json::Value;

use super::aj;
use crate::common::path_str;
use crate::view::{chromium, headless};

/// `view ID -o DIR/NAME.html`, then the DOM headless Chromium builds from
/// it at `#seq=SEQ` (the end without one).
fn dom(db: &Path, id: &str, name: &str, seq: Option<u64>, chromium: &Path) -> String {
    let dir = db.parent().expect("a parent");
    let page = dir.join(format!("{name}.html"));
    let out = aj(db, &["view", id, "-o", path_str(&page)]);
    assert_eq!(out.code, 0, "{out:?}");
    let url = match seq {
        Some(s) => format!("file://{}#seq={s}", page.display()),
        None => format!("file://{}", page.display()),
    };
    headless(chromium, &dir.join("profile"), &url, &["--dump-dom"])
}

/// The opening tags of the elements of `dom` with `tag` whose attributes
/// hold `marker`.
fn tags<'a>(dom: &'a str, tag: &str, marker: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let open = format!("<{tag} ");
    let mut from = 0;
    while let Some(at) = dom[from..].find(&open) {
        let start = from + at;
        let end = start + dom[start..].find('>').expect("a tag ends");
        if dom[start..end].contains(marker) {
            out.push(&dom[start..end]);
        }
        from = end;
    }
    out
}

/// The value of `attr` in an opening tag.
fn attr<'a>(tag: &'a str, attr: &str) -> Option<&'a str> {
    let key = format!(" {attr}=\"");
    let v = tag.find(&key)? + key.len();
    Some(&tag[v..v + tag[v..].find('"')?])
}

/// The `data-status` of every element (of `tag`) naming `key`: the span
/// tree's row and the state's table row.
fn statuses<'a>(dom: &'a str, tag: &str, key: &str) -> Vec<&'a str> {
    tags(dom, tag, &format!("data-key=\"{key}\""))
        .into_iter()
        .filter_map(|t| attr(t, "data-status"))
        .collect()
}

/// One turn event of a conversation turn with `status`.
fn turn(status: TurnStatus, error: Option<&str>) -> Event {
    Event::Conversation(Box::new(ConversationEvent::Turn(TurnRecord {
        id: TurnId::new(),
        agent: "agent".into(),
        status,
        trigger_type: None,
        input_messages: vec![],
        output_messages: vec![],
        started_at: Utc::now(),
        finished_at: status.is_finished().then(Utc::now),
        error: error.map(|m| TurnError {
            message: m.into(),
            code: None,
            provider: None,
            raw: Value::Null,
        }),
        metadata: Default::default(),
    })))
}

/// Every status of a tool call (pending, started, completed, failed, and
/// in doubt at the crash point), of an evaluation (running, succeeded,
/// failed, cancelled) and of a turn (pending, running, succeeded, failed,
/// cancelled), as the page shows them in its span tree and its state
/// table. Two of them the page got wrong when it ranked statuses itself:
/// two evaluations that both have a `call_1` (they were one row), and a
/// started call whose result message is recorded without a final status
/// (the fold does not count it in doubt: `resume` would not run it again).
#[test]
fn every_status_of_a_call_an_evaluation_and_a_turn_is_the_folds() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (id, e1, e2, e3, e4, turns, started_seq) = {
        let journal = Journal::open(&db).unwrap();
        let s = journal.create_session().unwrap();
        let e1 = s.start_evaluation("p", "one").unwrap();
        e1.user("go").unwrap();
        e1.assistant(
            "four calls",
            vec![
                ToolCallRecord::new("call_1", "write_file", "{\"path\":\"a.txt\",\"n\":1}"),
                ToolCallRecord::new("call_2", "write_file", "{}"),
                ToolCallRecord::new("call_3", "write_file", "{}"),
                ToolCallRecord::new("call_4", "write_file", "{}"),
            ],
        )
        .unwrap();
        e1.tool_started("call_1").unwrap();
        e1.tool_result("call_1", "done").unwrap();
        e1.tool_started("call_2").unwrap();
        e1.tool_failed("call_2", "disk full").unwrap();
        e1.tool_started("call_3").unwrap();
        // A result message, and no final status: the fold keeps `started`
        // with a result, which `resume` does not count in doubt.
        let mut m = InnerMessage::new(Role::Tool, "written", e1.id(), 0);
        m.tool_call_id = Some("call_3".into());
        m.tool_name = Some("write_file".into());
        e1.record_message(m).unwrap();
        e1.finish(Outcome::Succeeded).unwrap();
        let e3 = s.start_evaluation("p", "three").unwrap();
        e3.finish(Outcome::Failed {
            error: "gave up".into(),
        })
        .unwrap();
        let e4 = s.start_evaluation("p", "four").unwrap();
        e4.finish(Outcome::Cancelled).unwrap();
        let mut turns = Vec::new();
        for (status, error) in [
            (TurnStatus::Pending, None),
            (TurnStatus::Running, None),
            (TurnStatus::Succeeded, None),
            (TurnStatus::Failed, Some("overloaded")),
            (TurnStatus::Cancelled, None),
        ] {
            let ev = turn(status, error);
            if let Event::Conversation(c) = &ev {
                if let ConversationEvent::Turn(t) = &**c {
                    turns.push((t.id.to_string(), status.as_str()));
                }
            }
            s.append(ev).unwrap();
        }
        // The last evaluation runs when the process stops: the same call
        // id as the first one's, started and never answered.
        let e2 = s.start_evaluation("p", "two").unwrap();
        e2.user("again").unwrap();
        e2.assistant(
            "two calls",
            vec![
                ToolCallRecord::new("call_1", "write_file", "{}"),
                ToolCallRecord::new("call_5", "write_file", "{}"),
            ],
        )
        .unwrap();
        let started_seq = e2.tool_started("call_1").unwrap();
        s.append(Event::Custom {
            kind: "note".into(),
            payload: b"the last event".to_vec(),
        })
        .unwrap();
        (
            s.id().to_string(),
            e1.id().to_string(),
            e2.id().to_string(),
            e3.id().to_string(),
            e4.id().to_string(),
            turns,
            started_seq,
        )
    };
    let end = dom(&db, &id, "statuses", None, &chromium);
    let expect = |kind_tag: &str, key: &str, want: &str| {
        let got = statuses(&end, kind_tag, key);
        assert!(!got.is_empty(), "no {kind_tag} for {key}");
        assert!(
            got.iter().all(|s| *s == want),
            "{key}: {got:?}, want {want}"
        );
    };
    for (key, want) in [
        (format!("{e1}/call_1"), "completed"),
        (format!("{e1}/call_2"), "failed"),
        (format!("{e1}/call_3"), "started"),
        (format!("{e1}/call_4"), "pending"),
        (format!("{e2}/call_1"), "in_doubt"),
        (format!("{e2}/call_5"), "pending"),
    ] {
        expect("tr", &key, want);
        expect("div", &key, want);
    }
    for (key, want) in [
        (&e1, "succeeded"),
        (&e3, "failed"),
        (&e4, "cancelled"),
        (&e2, "running"),
    ] {
        expect("tr", key, want);
        expect("div", key, want);
    }
    for (key, want) in &turns {
        expect("tr", key, want);
        expect("div", key, want);
    }
    // The crash banner: one call in doubt (not call_3, which has its
    // result), one never started (call_5: call_4's evaluation finished,
    // `resume` leaves it), two turns open.
    let banners = tags(&end, "div", "class=\"crash-banner\"");
    assert!(!banners.is_empty(), "no crash banner");
    assert_eq!(attr(banners[0], "data-in-doubt"), Some("1"), "{banners:?}");
    assert!(
        end.contains(
            "1 call in doubt; 1 never started; 2 turns left running; resume with: agent-journal resume"
        ),
        "{end}"
    );
    // Failed rows are red; arguments are pretty-printed JSON.
    assert!(end.contains("class=\"row failed\""), "no failed row");
    assert!(end.contains("{\n  \"path\": \"a.txt\",\n  \"n\": 1\n}"));

    // Before the crash point, the started call is started, not in doubt.
    let before = dom(&db, &id, "statuses", Some(started_seq), &chromium);
    let key = format!("{e2}/call_1");
    assert_eq!(statuses(&before, "tr", &key), ["started"]);
    assert!(tags(&before, "div", "class=\"crash-banner\"").len() == 1);
}

/// A demo run killed with a call in doubt, resumed after an idle pause:
/// the page marks the crash point (with the call in doubt, then with the
/// seq it was resumed at), cuts the pause to a break so both halves of the
/// run keep their width, shows a provider call's request and response,
/// links a fork and its parent, and shows the conversation demo's failed
/// turn and provider call.
#[test]
fn a_crashed_then_resumed_run_keeps_its_crash_point_and_cuts_the_idle_gap() {
    let Some(chromium) = chromium() else {
        return;
    };
    let run = Runs::new();
    let crashed = dom(&run.db, &run.id, "crashed", None, &chromium);
    let banner = tags(&crashed, "div", "class=\"crash-banner\"");
    assert_eq!(attr(banner[0], "data-seq"), Some("14"), "{banner:?}");
    assert_eq!(attr(banner[0], "data-in-doubt"), Some("1"));
    assert!(
        crashed.contains("1 call in doubt; 1 never started; resume with: agent-journal resume")
    );
    // The panel of the provider call at seq 12 (turn 2): the five
    // messages it was sent, the assistant message it answered with.
    let at_call = dom(&run.db, &run.id, "crashed", Some(12), &chromium);
    let panel = tags(&at_call, "div", "id=\"provider-call\"");
    assert_eq!(attr(panel[0], "data-sent"), Some("5"), "{at_call}");
    assert_eq!(attr(panel[0], "data-received"), Some("1"));
    assert!(at_call.contains("Request (5 messages)") && at_call.contains("Response (1 message)"));

    run.resume_after_a_pause();
    let resumed = dom(&run.db, &run.id, "resumed", None, &chromium);
    assert!(resumed.contains("1 call in doubt; 1 never started; resumed at seq 15"));
    let breaks = tags(&resumed, "div", "class=\"break\"");
    assert_eq!(breaks.len(), 1, "{resumed}");
    let idle: u64 = attr(breaks[0], "data-ms").unwrap().parse().unwrap();
    assert!(idle >= 1400, "{idle}");
    // Without the cut, the pause would take its share of the run's time
    // (most of it) and squeeze the run before it into the first
    // hundredths of the width; cut, it takes one break of 5%.
    let tree = tags(&resumed, "div", "id=\"tree\"");
    let span: f64 = attr(tree[0], "data-span-ms").unwrap().parse().unwrap();
    let share: f64 = attr(breaks[0], "data-share").unwrap().parse().unwrap();
    assert!(idle as f64 > 0.5 * span, "{idle} ms idle of {span}");
    assert!(share <= 0.05, "the break takes {share} of the width");

    // A fork links to its parent's page, the parent to its fork's (the
    // files `view ID` writes next to each other).
    let out = aj(&run.db, &["fork", &run.id, "--at", "5"]);
    assert_eq!(out.code, 0, "{out:?}");
    let fork = out
        .stdout
        .strip_prefix("forked session ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned();
    let page = dom(&run.db, &fork, "fork", None, &chromium);
    assert!(
        page.contains(&format!("href=\"{}.html\"", run.id)),
        "{page}"
    );
    let page = dom(&run.db, &run.id, "parent", None, &chromium);
    assert!(page.contains(&format!("href=\"{fork}.html\"")), "{page}");

    let conv = dom(&run.conv_db, &run.conv_id, "conversation", None, &chromium);
    let turns: Vec<&str> = tags(&conv, "tr", "data-kind=\"turn\"")
        .into_iter()
        .filter_map(|t| attr(t, "data-status"))
        .collect();
    assert_eq!(turns, ["succeeded", "succeeded", "failed", "succeeded"]);
    assert!(conv.contains("class=\"row failed\""));
    // A conversation's provider calls: five answered, one failed, as the
    // fold has them.
    let mut calls: Vec<&str> = tags(&conv, "div", "data-kind=\"provider_call\"")
        .into_iter()
        .filter_map(|t| attr(t, "data-status"))
        .collect();
    calls.sort_unstable();
    assert_eq!(calls, ["failed", "ok", "ok", "ok", "ok", "ok"]);
    // A conversation's call names the messages it sent: the last one
    // (seq 57) was sent the 13 messages before it, and answered with one.
    assert_eq!(tags(&conv, "div", "data-kind=\"provider_call\"").len(), 6);
    let at_call = dom(
        &run.conv_db,
        &run.conv_id,
        "conversation",
        Some(57),
        &chromium,
    );
    let panel = tags(&at_call, "div", "id=\"provider-call\"");
    assert_eq!(attr(panel[0], "data-sent"), Some("13"), "{at_call}");
    assert_eq!(attr(panel[0], "data-received"), Some("1"));
    assert!(tags(&conv, "div", "class=\"crash-banner\"").is_empty());
}

/// The databases of the screenshots: a demo run crashed after event 14,
/// and a conversation demo.
struct Runs {
    _dir: tempfile::TempDir,
    db: PathBuf,
    id: String,
    conv_db: PathBuf,
    conv_id: String,
}

impl Runs {
    fn new() -> Runs {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("run").join("db");
        let sb = dir.path().join("sb");
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        let out = aj(
            &db,
            &["demo", "--sandbox", path_str(&sb), "--crash-after", "14"],
        );
        assert_ne!(out.code, 0, "it crashed: {out:?}");
        let id = aj(&db, &["--json", "sessions"]).json_lines()[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let conv_db = dir.path().join("conv").join("db");
        std::fs::create_dir_all(conv_db.parent().unwrap()).unwrap();
        let csb = dir.path().join("csb");
        let out = aj(
            &conv_db,
            &["demo", "--conversation", "--sandbox", path_str(&csb)],
        );
        assert_eq!(out.code, 0, "{out:?}");
        let conv_id = aj(&conv_db, &["--json", "sessions"]).json_lines()[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        Runs {
            _dir: dir,
            db,
            id,
            conv_db,
            conv_id,
        }
    }

    /// Waits 1.5 s (an idle gap), then resumes the crashed run (in the
    /// sandbox its session records).
    fn resume_after_a_pause(&self) {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let out = aj(&self.db, &["resume", &self.id]);
        assert_eq!(out.code, 0, "{out:?}");
    }
}

/// PNGs of a crashed run, the same run resumed, and a conversation, for a
/// person to look at (checked in under `docs/screenshots/`).
#[test]
#[ignore = "writes docs/screenshots/*.png: run by hand when the page changes"]
fn screenshots() {
    let chromium = chromium().expect("chromium");
    let run = Runs::new();
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shoot = |db: &Path, id: &str, name: &str| {
        let page = db.parent().unwrap().join(format!("{name}.html"));
        let out = aj(db, &["view", id, "-o", path_str(&page)]);
        assert_eq!(out.code, 0, "{out:?}");
        let png = shots.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&png);
        headless(
            &chromium,
            &db.parent().unwrap().join("profile"),
            &format!("file://{}", page.display()),
            &[&format!("--screenshot={}", png.display())],
        );
        let bytes = std::fs::read(&png).expect("a screenshot");
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);
    };
    shoot(&run.db, &run.id, "crashed");
    run.resume_after_a_pause();
    shoot(&run.db, &run.id, "resumed");
    shoot(&run.conv_db, &run.conv_id, "conversation");
}

/// The cost of a run from a price table: `stats` per call and in total,
/// `sessions` per session (a column and `cost_usd`), the page's data; the
/// table from `--prices` or `AGENT_JOURNAL_PRICES`. A model the table does
/// not name (the demo's `scripted-1` is in no built-in table) gets no cost,
/// and its run's total is unknown (`null`), never a guess.
#[test]
fn a_run_costs_what_the_price_table_says_and_an_unknown_model_nothing() {
    let d = super::Demo::new();
    let prices = d.path("prices.json");
    std::fs::write(
        &prices,
        r#"{"date": "2026-01-02", "models": {"scripted": {"input": 3, "output": 15}}}"#,
    )
    .unwrap();
    let p = path_str(&prices);
    let stats = d.run(&["--json", "stats", &d.id, "--prices", p]).json();
    let calls = stats["provider_calls"].as_array().unwrap();
    assert!(!calls.is_empty());
    // `scripted-1` is priced as `scripted` (the longest name it starts
    // with, then `-`).
    let want: f64 = calls
        .iter()
        .map(|c| {
            (c["input_tokens"].as_f64().unwrap() * 3.0
                + c["output_tokens"].as_f64().unwrap() * 15.0)
                / 1e6
        })
        .sum();
    let cost = stats["cost_usd"].as_f64().expect("a cost");
    assert!(
        want > 0.0 && (cost - want).abs() < 1e-12,
        "{cost} vs {want}"
    );
    assert_eq!(stats["prices_date"], "2026-01-02");
    assert!(calls.iter().all(|c| c["cost_usd"].as_f64().is_some()));
    let listed = d.run(&["--json", "sessions", "--prices", p]).json_lines();
    assert!((listed[0]["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12);
    let by_env = super::Out::of(
        crate::common::cli_command(&d.db)
            .env("AGENT_JOURNAL_PRICES", &prices)
            .args(["--json", "stats", &d.id]),
    )
    .json();
    assert_eq!(by_env["cost_usd"], stats["cost_usd"]);
    let page = d.path("page.html");
    assert_eq!(
        d.run(&["view", &d.id, "--prices", p, "-o", path_str(&page)])
            .code,
        0
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("\"total\":{}", stats["cost_usd"])),
        "no total in the page"
    );

    // The built-in table has no price for it: no cost anywhere.
    let stats = d.run(&["--json", "stats", &d.id]).json();
    assert_eq!(stats["cost_usd"], Value::Null);
    assert_eq!(stats["unpriced_models"], serde_json::json!(["scripted-1"]));
    assert!(stats["provider_calls"][0]["cost_usd"].is_null());
    assert_eq!(
        d.run(&["--json", "sessions"]).json_lines()[0]["cost_usd"],
        Value::Null
    );
    let text = d.run(&["sessions"]).stdout;
    let head = text.lines().next().unwrap();
    assert!(head.contains(" cost "), "{text}");
    let text = d.run(&["stats", &d.id]).stdout;
    assert!(
        text.contains("cost: -, unknown: no price for scripted-1"),
        "{text}"
    );

    // A table that is not one: refused, named.
    std::fs::write(&prices, "{\"models\": 3}").unwrap();
    let out = d.run(&["stats", &d.id, "--prices", p]);
    assert!(
        out.assert_error(1)
            .contains("prices.json is not a price table")
    );
}
