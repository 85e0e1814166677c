//! Finding a run among many: `sessions` filters and orders (`--status`,
//! `--label`, `--since`/`--until`, `--limit`, `--sort`), `--last` in place
//! of a session id, and the candidates an ambiguous id prefix matches.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::{aj, crash_a_conversation};
use crate::common::path_str;

/// A database with three demo runs, made in this order: `a` (finished),
/// `b` (crashed after event 5: unfinished) and `c` (finished).
struct Three {
    _dir: TempDir,
    db: PathBuf,
    /// `sessions --json` of a, b, c, in that order.
    infos: Vec<Value>,
}

impl Three {
    fn new() -> Three {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        for (sb, crash) in [("sa", None), ("sb", Some("5")), ("sc", None)] {
            let sb = dir.path().join(sb);
            let mut args = vec!["demo", "--sandbox", path_str(&sb)];
            if let Some(n) = crash {
                args.extend(["--crash-after", n]);
            }
            let out = aj(&db, &args);
            assert_eq!(out.code == 0, crash.is_none(), "{out:?}");
        }
        let infos = aj(&db, &["sessions", "--json"]).json_lines();
        assert_eq!(infos.len(), 3, "{infos:?}");
        Three {
            _dir: dir,
            db,
            infos,
        }
    }

    fn id(&self, i: usize) -> &str {
        self.infos[i]["id"].as_str().expect("an id")
    }

    /// The ids `sessions --json ARGS` lists, in its order.
    fn listed(&self, args: &[&str]) -> Vec<String> {
        listed(&self.db, args)
    }
}

/// The ids `sessions --json ARGS` lists on `db`, in its order.
fn listed(db: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["sessions", "--json"];
    all.extend_from_slice(args);
    let out = aj(db, &all);
    assert_eq!(out.code, 0, "{out:?}");
    out.json_lines()
        .iter()
        .map(|v| v["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Asserts a run was refused as a usage error (exit 2, clap's message).
fn usage_error(out: super::Out) {
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.starts_with("error: "), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn sessions_filters_select_by_status_label_and_activity_then_sort_and_limit() {
    let t = Three::new();
    let (a, b, c) = (t.id(0), t.id(1), t.id(2));
    assert_eq!(t.infos[1]["status"], "unfinished", "{:?}", t.infos);

    assert_eq!(t.listed(&["--status", "unfinished"]), [b]);
    assert_eq!(t.listed(&["--status", "finished"]), [a, c]);
    assert_eq!(t.listed(&["--status", "idle"]), Vec::<String>::new());
    assert_eq!(
        t.listed(&["--status", "idle", "--status", "unfinished"]),
        [b]
    );

    // Labels: every one given must match.
    let sandbox = t.infos[2]["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .find(|l| l[0] == "sandbox")
        .and_then(|l| l[1].as_str())
        .expect("a sandbox label")
        .to_owned();
    let of_c = format!("sandbox={sandbox}");
    assert_eq!(t.listed(&["--label", "agent=demo"]), [a, b, c]);
    assert_eq!(t.listed(&["--label", "agent=demo", "--label", &of_c]), [c]);
    assert_eq!(
        t.listed(&["--label", "agent=other", "--label", &of_c]),
        Vec::<String>::new()
    );

    // Times bound the last activity, both ends included.
    let last = |i: usize| t.infos[i]["last_activity"].as_str().expect("a time");
    assert_eq!(t.listed(&["--since", last(2)]), [c]);
    assert_eq!(t.listed(&["--until", last(0)]), [a]);
    assert_eq!(t.listed(&["--since", last(1), "--until", last(1)]), [b]);
    let today = &last(2)[..10];
    assert_eq!(
        t.listed(&["--since", today, "--until", today, "--utc"]),
        [a, b, c]
    );
    assert_eq!(t.listed(&["--until", "2000-01-01"]), Vec::<String>::new());

    // Orders: newest / latest / biggest first, ties in the database's order.
    assert_eq!(t.listed(&["--sort", "created"]), [c, b, a]);
    assert_eq!(t.listed(&["--sort", "activity"]), [c, b, a]);
    assert_eq!(t.listed(&["--sort", "events"]), [a, c, b]);
    assert_eq!(t.listed(&["--sort", "events", "--limit", "1"]), [a]);
    assert_eq!(t.listed(&["--limit", "2"]), [a, b]);
    assert_eq!(t.listed(&["--status", "finished", "--limit", "1"]), [a]);

    // The text table lists the same.
    let out = aj(&t.db, &["sessions", "--status", "unfinished"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(b), "{out:?}");
    assert!(
        !out.stdout.contains(a) && !out.stdout.contains(c),
        "{out:?}"
    );

    // Mistakes are usage errors (exit 2), and --delete takes no filter.
    for bad in [
        &["sessions", "--since", "yesterday"][..],
        &["sessions", "--label", "agent"],
        &["sessions", "--status", "crashed"],
        &["sessions", "--delete", a, "--status", "finished"],
    ] {
        usage_error(aj(&t.db, bad));
    }
    assert_eq!(t.listed(&[]).len(), 3);
}

#[test]
fn last_names_the_session_with_the_latest_activity_in_every_command() {
    let t = Three::new();
    let (b, c) = (t.id(1), t.id(2));
    // Same output as with the id, in each command that takes one.
    let same = |id: &str, args: &[&str]| {
        let with = |who: &[&str]| {
            let mut all: Vec<&str> = vec![args[0]];
            all.extend_from_slice(who);
            all.extend_from_slice(&args[1..]);
            let out = aj(&t.db, &all);
            assert_eq!(out.code, 0, "{out:?}");
            out.stdout
        };
        assert_eq!(with(&["--last"]), with(&[id]), "{args:?}");
    };
    // (`show --json` and `export` stamp the time they ran: their text.)
    for args in [
        &["log", "--json"][..],
        &["show"],
        &["pending", "--json"],
        &["stats", "--json"],
    ] {
        same(c, args);
    }

    // Resuming the crashed run makes it the latest active one.
    let out = aj(&t.db, &["--json", "resume", b]);
    assert_eq!(out.code, 0, "{out:?}");
    same(b, &["log"]);
    let out = aj(&t.db, &["--json", "resume", "--last"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(t.listed(&["--sort", "activity", "--limit", "1"]), [b]);

    // Neither, or both, is a usage error.
    usage_error(aj(&t.db, &["log"]));
    aj(&t.db, &["--json", "log"]).assert_error(2);
    usage_error(aj(&t.db, &["log", c, "--last"]));
    aj(&t.db, &["--json", "export", "--last", c]).assert_error(2);
}

/// `--last` stands for the first session of `diff` (`diff --last A B`,
/// `diff --last OTHER`), for the parent of `fork` and for the conversation
/// of `cancel-turn` (`cancel-turn --last TURN`).
#[test]
fn last_stands_for_the_first_session_of_diff_fork_and_cancel_turn() {
    let t = Three::new();
    let (a, c) = (t.id(0), t.id(2));
    let run = |args: &[&str]| {
        let out = aj(&t.db, args);
        assert_eq!(out.code, 0, "{out:?}");
        out.stdout
    };
    assert_eq!(
        run(&["--json", "diff", "--last", "3", "9"]),
        run(&["--json", "diff", c, "3", "9"])
    );
    assert_eq!(run(&["diff", "--last", a]), run(&["diff", c, a]));
    // One value too many or too few for the form, or --last and SESSION.
    for bad in [
        &["diff", "--last"][..],
        &["diff", "--last", "1", "2", "3"],
        &["diff", c],
        &["diff", " ", "1", "2"],
    ] {
        usage_error(aj(&t.db, bad));
    }
    aj(&t.db, &["diff", "--last", "1", "2", "3"]).assert_error(2);
    usage_error(aj(&t.db, &["fork", c, "--last", "--at", "2"]));

    let fork = aj(&t.db, &["--json", "fork", "--last", "--at", "4"]).json();
    assert_eq!(fork["parent"], c, "{fork}");

    // A conversation killed inside a turn is the latest active session.
    crash_a_conversation(&t.db, &t.db.with_file_name("conversation"));
    let pending = aj(&t.db, &["--json", "pending", "--last"]).json();
    let turn = pending["interrupted_turns"][0]["turn"]
        .as_str()
        .expect("an interrupted turn");
    usage_error(aj(&t.db, &["cancel-turn", c, "--last", turn]));
    usage_error(aj(&t.db, &["cancel-turn", turn]));
    let out = aj(&t.db, &["--json", "cancel-turn", "--last", turn]).json();
    assert_eq!(out["status"], "cancelled", "{out}");
    assert_eq!(out["turn"], turn, "{out}");
    assert_eq!(
        out["conversation"], pending["conversation"],
        "{out} {pending}"
    );
}

#[test]
fn an_ambiguous_prefix_lists_its_candidates() {
    let t = Three::new();
    // UUIDv7 ids begin with their time: ids made a second apart share
    // their first digits (whatever the clock, all three share one "0").
    let common = (0..36)
        .take_while(|&n| (1..3).all(|i| t.id(i)[..=n] == t.id(0)[..=n]))
        .count();
    let prefix = &t.id(0)[..common.clamp(1, 8)];
    for (i, info) in t.infos.iter().enumerate() {
        assert!(t.id(i).starts_with(prefix), "{info}");
    }
    let out = aj(&t.db, &["log", prefix]);
    let line = out.assert_error(1);
    assert!(line.contains("matches 3 sessions"), "{line}");
    for info in &t.infos {
        for key in ["id", "created", "status"] {
            let v = info[key].as_str().expect("a string");
            assert!(line.contains(v), "{key} {v} missing from {line}");
        }
    }
    let out = aj(&t.db, &["--json", "show", prefix]);
    let line = out.assert_error(1);
    let v: Value = serde_json::from_str(line).expect("a JSON error");
    assert_eq!(v["error"]["kind"], "invalid_input", "{v}");
    let message = v["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains(t.id(1)) && message.contains("unfinished"),
        "{v}"
    );
    // A unique suffix still finds its session.
    let out = aj(&t.db, &["--json", "pending", &t.id(1)[28..]]);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn serve_filters_and_searches_its_session_list() {
    let t = Three::new();
    let (a, b, c) = (t.id(0), t.id(1), t.id(2));
    let (_server, port) = crate::view::start_serve(&t.db);
    let host = format!("127.0.0.1:{port}");
    let get = |target: &str| crate::view::http_get(port, &host, "GET", target);
    let api = |query: &str| -> Vec<String> {
        let (code, body) = get(&format!("/api/sessions?{query}"));
        assert_eq!(code, 200, "{query}: {body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        v.as_array()
            .expect("an array")
            .iter()
            .map(|s| s["id"].as_str().expect("an id").to_owned())
            .collect()
    };
    assert_eq!(api(""), [a, b, c]);
    assert_eq!(api("status=unfinished"), [b]);
    assert_eq!(api("status=finished&sort=activity&limit=1"), [c]);
    // An empty field (an HTML form's) is no filter; labels are percent-encoded.
    assert_eq!(api("status=&label=agent%3Ddemo&q="), [a, b, c]);
    assert_eq!(api("label=agent%3Dother"), Vec::<String>::new());
    // `q`: a text of the id or of a label, any case.
    assert_eq!(api(&format!("q={}", &c[24..].to_uppercase())), [c]);
    assert_eq!(api("q=%2Fsb%2F"), [b]);
    assert_eq!(api("until=2000-01-01"), Vec::<String>::new());

    // The page: the form keeps what was asked, the table only what matches.
    let (code, page) = get("/?status=unfinished&q=sb");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains(&format!("href=\"/s/{b}\"")), "{page}");
    assert!(!page.contains(&format!("href=\"/s/{a}\"")), "{page}");
    assert!(
        page.contains("<option value=\"unfinished\" selected>"),
        "{page}"
    );
    assert!(
        page.contains("name=\"q\" placeholder=\"id or label text\" value=\"sb\""),
        "{page}"
    );

    // A bad filter is a 400 naming it.
    for bad in ["status=crashed", "since=yesterday", "limit=x", "colour=red"] {
        let (code, body) = get(&format!("/api/sessions?{bad}"));
        assert_eq!(code, 400, "{bad}: {body}");
    }
}
