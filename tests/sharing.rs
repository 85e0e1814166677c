//! Exporting for sharing: `export --redact` (and `--redact-pattern`)
//! leaves no secret in any format, `.ajournal` included (which still
//! verifies and imports), and says how many it replaced; `export
//! --evaluation ID|all` picks the evaluations.

use agent_journal::{Event, Journal, ToolCallRecord};

use crate::common::{path_str, run_cli};

const SECRETS: [&str; 6] = [
    "sk-proj-Zx81mQpL0aT3BlbkFJqW9uYvR2cD7eN4",
    "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2ln",
    "hunter2hunter2",
    "AKIAIOSFODNN7EXAMPLE",
    "internal-88231",
];

/// A session of two evaluations with secrets in a user message, tool
/// arguments, a tool result, a label and a custom event.
fn session_with_secrets(db: &std::path::Path) -> (String, Vec<String>) {
    let journal = Journal::open(db).unwrap();
    let s = journal
        .create_session_with_labels(vec![("token".into(), SECRETS[1].into())])
        .unwrap();
    let mut evals = Vec::new();
    for round in 0..2 {
        let e = s.start_evaluation("share", "k").unwrap();
        evals.push(e.id().to_string());
        e.user(format!("round {round}: my key is {} thanks", SECRETS[0]))
            .unwrap();
        let args = format!(
            "{{\"header\":\"Authorization: Bearer {}\",\"db\":\"postgres://app:{}@db/x\"}}",
            SECRETS[2], SECRETS[3]
        );
        e.assistant(
            "calling",
            vec![ToolCallRecord::new(format!("c{round}"), "fetch", args)],
        )
        .unwrap();
        e.tool_started(format!("c{round}")).unwrap();
        e.tool_result(
            format!("c{round}"),
            format!("found {} and {}", SECRETS[4], SECRETS[5]),
        )
        .unwrap();
        e.assistant(format!("done {round}"), vec![]).unwrap();
        e.finish(agent_journal::Outcome::Succeeded).unwrap();
    }
    s.append(Event::Custom {
        kind: "note".into(),
        payload: format!("aws {}", SECRETS[4]).into_bytes(),
    })
    .unwrap();
    (s.id().to_string(), evals)
}

#[test]
fn redacted_exports_hold_no_secret_in_any_format() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (id, _) = session_with_secrets(&db);
    let leaks = |text: &str| -> Vec<&str> {
        SECRETS
            .iter()
            .copied()
            .filter(|s| text.contains(s))
            .collect()
    };

    // Unredacted, the secrets are there (so the checks below can fail).
    let out = run_cli(
        &db,
        &["export", &id, "--format", "jsonl", "--evaluation", "all"],
    );
    assert!(out.status.success());
    assert_eq!(
        leaks(&String::from_utf8_lossy(&out.stdout)).len(),
        5,
        "all but the label"
    );

    for format in ["openai", "anthropic", "jsonl", "wink"] {
        let mut args = vec!["export", id.as_str(), "--format", format, "--redact"];
        args.extend(["--redact-pattern", "internal-[0-9]+"]);
        if format != "wink" {
            args.extend(["--evaluation", "all"]);
        }
        let out = run_cli(&db, &args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(leaks(&text), Vec::<&str>::new(), "{format}: {text}");
        assert!(text.contains("[REDACTED]"), "{format}");
        assert!(
            text.contains("postgres://app:[REDACTED]@db/x"),
            "{format}: {text}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("redacted ") && stderr.contains(" secrets"),
            "{stderr}"
        );
        // Still the format it was.
        if format == "jsonl" {
            for l in text.lines() {
                serde_json::from_str::<serde_json::Value>(l).expect("a JSON line");
            }
        } else {
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON");
        }
    }

    // The journal file: every event passed through, frames re-encoded; it
    // verifies, imports, and reads back without a secret.
    let file = dir.path().join("shared.ajournal");
    let out = run_cli(
        &db,
        &[
            "--json",
            "export",
            &id,
            "--format",
            "journal",
            "-o",
            path_str(&file),
            "--redact",
            "--redact-pattern",
            "internal-[0-9]+",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Per evaluation: key, bearer token, password, AWS key, internal id;
    // then the label and the custom payload.
    assert_eq!(v["redacted"], 12, "{v}");
    let bytes = std::fs::read(&file).unwrap();
    for s in SECRETS {
        assert!(
            !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} in the file"
        );
    }
    assert!(run_cli(&file, &["verify"]).status.success());
    let other = dir.path().join("other");
    assert!(
        run_cli(&other, &["import", path_str(&file), "--format", "journal"])
            .status
            .success()
    );
    let log = run_cli(&other, &["--json", "log", &id]);
    let text = String::from_utf8_lossy(&log.stdout);
    assert_eq!(leaks(&text), Vec::<&str>::new(), "{text}");
    assert!(text.contains("round 1: my key is [REDACTED] thanks"));
    // A bad pattern is refused before anything is written.
    let out = run_cli(
        &db,
        &["export", &id, "--format", "openai", "--redact-pattern", "("],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--redact-pattern"));
}

#[test]
fn export_evaluation_picks_one_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (id, evals) = session_with_secrets(&db);
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run_cli(&db, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Default: the latest evaluation.
    let latest = json(&["export", &id, "--format", "openai"]);
    assert!(
        latest[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("round 1")
    );
    // One, by the tail of its id (what the text mode prints).
    let tail = &evals[0][evals[0].len() - 8..];
    let first = json(&["export", &id, "--format", "openai", "--evaluation", tail]);
    assert!(first[0]["content"].as_str().unwrap().starts_with("round 0"));
    // All, in order, each a valid request.
    let all = json(&[
        "export",
        &id,
        "--format",
        "anthropic",
        "--evaluation",
        "all",
    ]);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 2);
    for (i, request) in all.iter().enumerate() {
        agent_journal::provider::validate::anthropic(request).expect("a valid request");
        let first = &request["messages"][0]["content"];
        assert!(first.to_string().contains(&format!("round {i}")), "{first}");
    }
    // Refusals: no such evaluation, and a format that has no evaluations.
    for args in [
        vec![
            "export",
            id.as_str(),
            "--format",
            "openai",
            "--evaluation",
            "ffffffff",
        ],
        vec![
            "export",
            id.as_str(),
            "--format",
            "wink",
            "--evaluation",
            "all",
        ],
    ] {
        let out = run_cli(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("evaluation"));
    }
}
