//! Row 14: importing a 50,000-message conversation in each format (parsed,
//! checked, and appended to a journal in memory), in messages per second,
//! against `serde_json` parsing the same text alone; and the peak memory the
//! import added.

use std::time::Duration;

use agent_journal::provider::ConversationFormat;
use agent_journal::{EvaluationId, InnerMessage, Journal, Role, ToolCallRecord};

use crate::common::report::{Report, Row, Verdict, fmt_bytes, fmt_ratio, thousands};
use crate::common::viewer::measured;

/// A conversation of `n` messages: rounds of a user message, an assistant
/// message calling a tool, its result, and an answer.
fn conversation(n: usize) -> Vec<InnerMessage> {
    let eval = EvaluationId::new();
    let mut out = vec![InnerMessage::new(
        Role::System,
        "You are a careful agent.",
        eval,
        0,
    )];
    let mut round = 0;
    while out.len() < n {
        let seq = out.len() as u64;
        out.push(InnerMessage::new(
            Role::User,
            format!("Question {round}: what is in folder {round}?"),
            eval,
            seq,
        ));
        let mut a = InnerMessage::new(Role::Assistant, "Let me look.", eval, seq + 1);
        a.tool_calls = vec![ToolCallRecord::new(
            format!("call_{round}"),
            "list_dir",
            format!("{{\"path\":\"/data/{round}\"}}"),
        )];
        out.push(a);
        let mut t = InnerMessage::new(
            Role::Tool,
            format!("a.txt b.txt c{round}.txt"),
            eval,
            seq + 2,
        );
        t.tool_call_id = Some(format!("call_{round}").into());
        t.tool_name = Some("list_dir".into());
        out.push(t);
        out.push(InnerMessage::new(
            Role::Assistant,
            format!("Folder {round} holds three files."),
            eval,
            seq + 3,
        ));
        round += 1;
    }
    out.truncate(n);
    out
}

/// The conversation as a Claude Code session log: one record a message,
/// each the child of the one before.
fn claude_code_log(messages: &[InnerMessage]) -> String {
    let request = ConversationFormat::Anthropic.to_json(messages);
    let mut out = String::new();
    let mut parent = serde_json::Value::Null;
    for (i, m) in request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .enumerate()
    {
        let uuid = format!("rec-{i}");
        let record = serde_json::json!({
            "type": m["role"], "uuid": uuid, "parentUuid": parent,
            "sessionId": "bench", "message": m,
        });
        out.push_str(&record.to_string());
        out.push('\n');
        parent = serde_json::Value::String(uuid);
    }
    out
}

pub fn section_formats(quick: bool, rep: &mut Report) {
    let n = if quick { 5_000 } else { 50_000 };
    eprintln!(
        "[14] importing a {}-message conversation in each format",
        thousands(n as u64)
    );
    let messages = conversation(n);
    for (id, f) in [
        ("14a", ConversationFormat::OpenAi),
        ("14b", ConversationFormat::Anthropic),
        ("14c", ConversationFormat::OpenAiResponses),
        ("14d", ConversationFormat::Gemini),
        ("14e", ConversationFormat::Ollama),
        ("14f", ConversationFormat::Jsonl),
    ] {
        let text = f.to_text(&messages);
        let (best_json, best_import, peak, imported) = best_of_3(
            || {
                let v: serde_json::Value = if f == ConversationFormat::Jsonl {
                    serde_json::Value::Array(
                        text.lines()
                            .map(|l| serde_json::from_str(l).expect("json"))
                            .collect(),
                    )
                } else {
                    serde_json::from_str(&text).expect("json")
                };
                std::hint::black_box(v);
            },
            |journal| {
                journal
                    .import_conversation(&text, f, "bench", "import")
                    .expect("import")
            },
        );
        let rate = |d: Duration| imported as f64 / d.as_secs_f64();
        rep.row(Row {
            id,
            what: format!(
                "import {} messages, {} ({}): parse, check, append to a journal in memory",
                thousands(imported as u64),
                f.name(),
                fmt_bytes(text.len() as u64)
            ),
            ours: format!(
                "{} msg/s, peak +{}",
                thousands(rate(best_import) as u64),
                fmt_bytes(peak)
            ),
            baseline: format!(
                "serde_json parsing the same text: {} msg/s",
                thousands(rate(best_json) as u64)
            ),
            ratio: fmt_ratio(rate(best_import) / rate(best_json)),
            target: "report".into(),
            verdict: Verdict::Info,
        });
    }
    // Claude Code session logs: read into threads, imported as a session.
    let text = claude_code_log(&messages);
    let (best_json, best_import, peak, imported) = best_of_3(
        || {
            let v: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("json"))
                .collect();
            std::hint::black_box(v);
        },
        |journal| {
            journal
                .import_claude_code_text(&text, "bench.jsonl")
                .expect("import")
        },
    );
    let rate = |d: Duration| imported as f64 / d.as_secs_f64();
    rep.row(Row {
        id: "14g",
        what: format!(
            "import {} messages, claude-code ({}): read the log, link its records, import as a session",
            thousands(imported as u64),
            fmt_bytes(text.len() as u64)
        ),
        ours: format!("{} msg/s, peak +{}", thousands(rate(best_import) as u64), fmt_bytes(peak)),
        baseline: format!("serde_json parsing the same lines: {} msg/s", thousands(rate(best_json) as u64)),
        ratio: fmt_ratio(rate(best_import) / rate(best_json)),
        target: "report".into(),
        verdict: Verdict::Info,
    });
}

/// Three rounds of `parse` (the baseline) and `import` (into a new journal
/// in memory each round): the best time of each, the peak memory an import
/// added, and the messages it imported.
fn best_of_3(
    mut parse: impl FnMut(),
    mut import: impl FnMut(&Journal) -> agent_journal::Session,
) -> (Duration, Duration, u64, usize) {
    let (mut best_json, mut best_import, mut peak, mut imported) =
        (Duration::MAX, Duration::MAX, 0, 0);
    for _ in 0..3 {
        let (d, _) = measured(&mut parse);
        best_json = best_json.min(d);
        let journal = Journal::memory();
        let (d, mem) = measured(|| {
            imported = import(&journal).state().messages().len();
        });
        best_import = best_import.min(d);
        peak = peak.max(mem);
    }
    (best_json, best_import, peak, imported)
}
