//! `export --redact` against a corpus of 30 kinds of real-shaped (fake)
//! secrets, each put in every field a session carries (labels, prompt
//! identity, system prompt, user and assistant messages, tool names, call
//! ids, tool arguments as JSON keys and values, tool results and errors,
//! provider payloads' keys and values, custom payloads; a state blob's
//! contents, names and metadata keys), exported through the binary in
//! every format: no secret (nor any 8 characters of one) is left, ordinary
//! text is, and the count reported is the number of marks written.

use std::collections::HashSet;

use agent_journal::conversation::ConversationMessage;
use agent_journal::conversation::state_blob::append_to_state;
use agent_journal::{Event, Journal, Outcome, ToolCallRecord};
use serde_json::json;

use crate::common::{path_str, run_cli};

/// (kind, the text it is written in, the secret in it).
const CORPUS: &[(&str, &str, &str)] = &[
    (
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----\nFNl5oFA6Qd8Mj7zdnbMjAdTdlzC5T4uUhf7kvmlP7HVDctQUy1xvCkgafrfwA94h\n-----END RSA PRIVATE KEY-----",
        "FNl5oFA6Qd8Mj7zdnbMjAdTdlzC5T4uUhf7kvmlP7HVDctQUy1xvCkgafrfwA94h",
    ),
    (
        "openai",
        "OPENAI_KEY_sk-proj-u8jzPde0IgxLd6GncfBAT3BlbkFJepfJBd0Kh8oOOL8dKLzd",
        "sk-proj-u8jzPde0IgxLd6GncfBAT3BlbkFJepfJBd0Kh8oOOL8dKLzd",
    ),
    (
        "openai-legacy",
        "key sk-ocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIBXuDL7DxtpYlSXp here",
        "sk-ocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIBXuDL7DxtpYlSXp",
    ),
    (
        "anthropic",
        "x-api-key: sk-ant-api03-fKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rESQedUStPKR0CsTy4Qwb8DwkNhFdnXsiVpzz63FfkCzJAA",
        "sk-ant-api03-fKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rESQedUStPKR0CsTy4Qwb8DwkNhFdnXsiVpzz63FfkCzJAA",
    ),
    (
        "aws-access-key-id",
        "call_AKIARI3R2WYOJFLJOOA7",
        "AKIARI3R2WYOJFLJOOA7",
    ),
    (
        "aws-secret-access-key",
        "aws_secret_access_key=1LlqsajAIxNKu8iS2G/8NPRVdD53X+83RZJzzzzg",
        "1LlqsajAIxNKu8iS2G/8NPRVdD53X+83RZJzzzzg",
    ),
    (
        "github",
        "GITHUB_TOKEN=ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE",
        "ghp_EOzdmenCkhvMdgaKjIg8xNbe3nNyjOq9wMxE",
    ),
    (
        "github-pat",
        "pat: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",
        "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",
    ),
    (
        "gitlab",
        "glpat-9wCZ7Uw9xfogoEmvnEN5",
        "glpat-9wCZ7Uw9xfogoEmvnEN5",
    ),
    (
        "slack-token",
        "slack_xoxb-907511637265-1676122202972-N0MEQ7wjJJibaZUPgHV7iB3m",
        "xoxb-907511637265-1676122202972-N0MEQ7wjJJibaZUPgHV7iB3m",
    ),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/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",
        "T03NBQNSG/BPWLUQIA1ID/6Vw5DQL05HA064GiIjHGb3CX",
    ),
    (
        "stripe",
        "sk_live_lMaXZjljENUhJduRHHJEYXg4JdpmrcXgGCJbW56eCuNGMGmSrCGIZEG8pSH4487q7J58m1CiAhz",
        "sk_live_lMaXZjljENUhJduRHHJEYXg4JdpmrcXgGCJbW56eCuNGMGmSrCGIZEG8pSH4487q7J58m1CiAhz",
    ),
    (
        "twilio",
        "twilio SKe73cf575dcad6ba2b0aee0ca92373288",
        "SKe73cf575dcad6ba2b0aee0ca92373288",
    ),
    (
        "sendgrid",
        "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",
        "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",
    ),
    (
        "npm",
        "//registry.npmjs.org/:_authToken=npm_qdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7CgQ0",
        "npm_qdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7CgQ0",
    ),
    (
        "pypi",
        "pypi-AgEIcHlwaS5vcmcPBQFI14zGtSnovm14TUOizwd1iaeOV4qBkdfQ1y3GQsMpSscDlkrCaqx9vJu",
        "pypi-AgEIcHlwaS5vcmcPBQFI14zGtSnovm14TUOizwd1iaeOV4qBkdfQ1y3GQsMpSscDlkrCaqx9vJu",
    ),
    (
        "huggingface",
        "hf: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",
        "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",
    ),
    (
        "google",
        "https://generativelanguage.googleapis.com/v1?key=AIza9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi",
        "AIza9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi",
    ),
    (
        "jwt",
        "Cookie: session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvIn0.6HWGK10Zb0RLZ5TR9SPofbciOx9gy1CJdObOIRpFqaD",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvIn0.6HWGK10Zb0RLZ5TR9SPofbciOx9gy1CJdObOIRpFqaD",
    ),
    (
        "bearer",
        "Authorization: Bearer ZeV7G5IfQHeVVEqZe2qpUWnoVPDF2yeE",
        "ZeV7G5IfQHeVVEqZe2qpUWnoVPDF2yeE",
    ),
    (
        "basic",
        "Authorization: Basic ZGVwbG95OjZSc1hjTk9QbWVNanZxUFY=",
        "ZGVwbG95OjZSc1hjTk9QbWVNanZxUFY=",
    ),
    (
        "url-password",
        "postgres://app:HsDDDXh5Jmtf7EbsDe@db.internal:5432/prod",
        "HsDDDXh5Jmtf7EbsDe",
    ),
    (
        "assignment",
        "DB_PASSWORD=0G9Cryn687neLfjVHq8x",
        "0G9Cryn687neLfjVHq8x",
    ),
    (
        "digitalocean",
        "dop_v1_483b7ffc050fec94dbca3a0aac36098b2cc2bd818319478da6bd0c621de49f14",
        "dop_v1_483b7ffc050fec94dbca3a0aac36098b2cc2bd818319478da6bd0c621de49f14",
    ),
    (
        "shopify",
        "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",
        "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",
    ),
    (
        "mailgun",
        "api:key-7b860dcd6c8a1f8b46287cced9041dff",
        "key-7b860dcd6c8a1f8b46287cced9041dff",
    ),
    (
        "azure",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=aez7770H2DCpYgojjHRg80USP2W5DfJXcaYioK6cPTt9iOqHOBSWhgetH8LmyqoYMaaItDr9uP14pEHpJpb9AT==;EndpointSuffix=core.windows.net",
        "aez7770H2DCpYgojjHRg80USP2W5DfJXcaYioK6cPTt9iOqHOBSWhgetH8LmyqoYMaaItDr9uP14pEHpJpb9AT==",
    ),
    (
        "groq",
        "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",
        "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",
    ),
    (
        "google-oauth",
        "ya29.a0AfH6SMBx3kT9vQ2pL8mN4rS7uW1yZ5cE0gJ6hK",
        "ya29.a0AfH6SMBx3kT9vQ2pL8mN4rS7uW1yZ5cE0gJ6hK",
    ),
    (
        "stripe-webhook",
        "whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH",
        "whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH",
    ),
];

/// Ordinary text that must come out as it went in.
const PROSE: &str = "commit 3f786850e387550fdab836ed7e6dc881de23001b (aws upload), id \
    0192f3a4-5b6c-7d8e-9f01-23456789abcd, the token limit, max_tokens: 4096, a \
    task-management-pipeline-v2, Basic authentication";

/// Two secrets as keys of one object: they redact to the same text.
const CLASH: &str = r#"{"AKIAIOSFODNN7EXAMPLE": 1, "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8": 2}"#;

/// A session with each kind of secret in every field; its id.
fn session_with_corpus(db: &std::path::Path) -> String {
    let journal = Journal::open(db).unwrap();
    let labels = CORPUS
        .iter()
        .map(|(name, text, _)| (format!("{name} {text}"), (*text).to_owned()))
        .collect();
    let s = journal.create_session_with_labels(labels).unwrap();
    for (i, (name, text, _)) in CORPUS.iter().enumerate() {
        let e = s.start_evaluation("redact", text).unwrap();
        e.system(format!("You hold {text}.")).unwrap();
        e.user(format!("my {name} is {text}; {PROSE}")).unwrap();
        let call = format!("call_{text}");
        let failing = format!("call{i}_{text}");
        let args =
            json!({ (text.to_string()): text, "nested": {"q": text, "list": [text]} }).to_string();
        e.assistant(
            format!("calling with {text}"),
            vec![
                ToolCallRecord::new(call.clone(), format!("fetch_{text}"), args),
                ToolCallRecord::new(failing.clone(), "probe", CLASH),
            ],
        )
        .unwrap();
        e.tool_started(call.clone()).unwrap();
        e.tool_result(call, format!("result: {text}")).unwrap();
        e.tool_started(failing.clone()).unwrap();
        e.tool_failed(failing, format!("refused {text}")).unwrap();
        let openai = json!({"provider": "openai", "message": {
            "role": "assistant", "content": format!("note {text}"), "x_meta": { (text.to_string()): text }}});
        e.assistant_with_payload(format!("note {text}"), vec![], Some(openai.to_string()))
            .unwrap();
        let anthropic = json!({"provider": "anthropic", "message": {
            "role": "assistant", "content": [{"type": "text", "text": format!("done {text}")}],
            "x_meta": { (text.to_string()): text }}});
        e.assistant_with_payload(format!("done {text}"), vec![], Some(anthropic.to_string()))
            .unwrap();
        e.finish(Outcome::Succeeded).unwrap();
        s.append(Event::Custom {
            kind: format!("note {name}"),
            payload: format!("custom {text}").into_bytes(),
        })
        .unwrap();
    }
    s.id().to_string()
}

/// A state blob holding the corpus in contents, names and metadata keys,
/// imported as a conversation; its id.
fn conversation_with_corpus(db: &std::path::Path, dir: &std::path::Path) -> String {
    let messages: Vec<ConversationMessage> = CORPUS
        .iter()
        .map(|(_, text, _)| {
            let mut m = ConversationMessage::user(format!("{text}; {PROSE}"));
            m.name = Some((*text).to_owned());
            m.metadata.insert((*text).to_owned(), json!(text));
            m
        })
        .collect();
    let blob = append_to_state(None, "openai", &messages).state;
    let file = dir.join("blob.json");
    std::fs::write(&file, blob).unwrap();
    let out = run_cli(
        db,
        &[
            "--json",
            "import",
            path_str(&file),
            "--format",
            "state-blob",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"][0].as_str().unwrap().to_owned()
}

/// The secrets (kind, 8 characters of one) whose 8 characters somewhere
/// appear in `text`.
fn leaks(text: &str) -> Vec<(&'static str, String)> {
    let windows: HashSet<&[u8]> = text.as_bytes().windows(8).collect();
    let mut found = Vec::new();
    for (name, _, secret) in CORPUS {
        if let Some(w) = secret.as_bytes().windows(8).find(|w| windows.contains(w)) {
            found.push((*name, String::from_utf8_lossy(w).into_owned()));
        }
    }
    found
}

/// The count `export` reported on stderr (`--json`: `{"redacted": N}`).
fn reported(stderr: &[u8]) -> usize {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("{\"redacted\""))
        .unwrap_or_else(|| panic!("no count in {text}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["redacted"].as_u64().unwrap() as usize
}

#[test]
fn every_secret_in_every_field_is_redacted_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let id = session_with_corpus(&db);
    let conversation = conversation_with_corpus(&db, dir.path());
    let formats = [
        ("openai", &id),
        ("openai-responses", &id),
        ("anthropic", &id),
        ("gemini", &id),
        ("ollama", &id),
        ("jsonl", &id),
        ("wink", &id),
        ("state-blob", &conversation),
    ];
    for (format, session) in formats {
        let mut args = vec!["--json", "export", session.as_str(), "--format", format];
        if !matches!(format, "wink" | "state-blob") {
            args.extend(["--evaluation", "all"]);
        }
        // Unredacted, every secret is there: the checks below can fail.
        let plain = run_cli(&db, &args);
        assert!(
            plain.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&plain.stderr)
        );
        let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
        assert_eq!(leaks(&plain).len(), CORPUS.len(), "{format}");

        args.push("--redact");
        let out = run_cli(&db, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {stderr}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(leaks(&text), Vec::new(), "{format}: {text}");
        assert_eq!(leaks(&stderr), Vec::new(), "{format}: {stderr}");
        assert!(
            text.contains(PROSE),
            "{format}: prose over-redacted: {text}"
        );
        // The count is the marks written.
        assert_eq!(
            reported(&out.stderr),
            text.matches("[REDACTED").count(),
            "{format}"
        );
        assert!(reported(&out.stderr) >= CORPUS.len() * 3, "{format}");
        // Still the format it was.
        if format == "jsonl" {
            for l in text.lines() {
                serde_json::from_str::<serde_json::Value>(l).expect("a JSON line");
            }
        } else {
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON");
        }
        // Two keys of one object that redact alike stay two keys.
        if matches!(format, "anthropic" | "gemini" | "ollama") {
            assert!(
                text.contains("\"[REDACTED:1]\"") && text.contains("\"[REDACTED:2]\""),
                "{format}: {text}"
            );
        }
    }
}

#[test]
fn a_redacted_journal_file_holds_no_secret_and_says_how_many_it_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let id = session_with_corpus(&db);
    let bytes_of = |args: &[&str], file: &std::path::Path| -> (Vec<u8>, serde_json::Value) {
        let mut all = vec!["--json", "export", id.as_str(), "--format", "journal", "-o"];
        all.push(path_str(file));
        all.extend(args);
        let out = run_cli(&db, &all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            std::fs::read(file).unwrap(),
            serde_json::from_slice(&out.stdout).unwrap(),
        )
    };
    let plain = dir.path().join("plain.ajournal");
    let (bytes, _) = bytes_of(&[], &plain);
    assert_eq!(leaks(&String::from_utf8_lossy(&bytes)).len(), CORPUS.len());

    let file = dir.path().join("shared.ajournal");
    let (bytes, v) = bytes_of(&["--redact"], &file);
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(leaks(&text), Vec::new());
    assert!(text.contains(PROSE));
    // The count is the marks in the events the file holds (a message's
    // frame stores a payload's copy of its content once: count decoded).
    let read = Journal::open(&file).unwrap();
    let events = read
        .session(id.parse().unwrap())
        .unwrap()
        .events(..)
        .unwrap();
    let marks: usize = events
        .iter()
        .map(|e| match &e.event {
            Event::Custom { payload, .. } => String::from_utf8_lossy(payload)
                .matches("[REDACTED")
                .count(),
            other => serde_json::to_string(other)
                .unwrap()
                .matches("[REDACTED")
                .count(),
        })
        .sum();
    drop(read);
    assert_eq!(v["redacted"].as_u64(), Some(marks as u64));
    assert!(marks >= CORPUS.len() * 10, "{marks}");
    // It verifies, imports, and reads back without a secret.
    assert!(run_cli(&file, &["verify"]).status.success());
    let other = dir.path().join("other");
    let out = run_cli(&other, &["import", path_str(&file), "--format", "journal"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = run_cli(&other, &["--json", "log", &id, "--full"]);
    assert!(log.status.success());
    assert_eq!(leaks(&String::from_utf8_lossy(&log.stdout)), Vec::new());
}
