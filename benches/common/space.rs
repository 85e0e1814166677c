//! Row 15: bytes on disk of an agent's session against an SQLite table
//! holding the same messages, one row each.
//!
//! The workload: steps of a user message, an assistant message with one
//! tool call, and the tool's result, each recorded as an OpenAI adapter
//! records it (the neutral fields and the provider's message as JSON).
//! The journal appends them with the default configuration (`Synced`,
//! incremental snapshots) and is closed; SQLite stores each provider message
//! as the OpenAI Agents SDK's `SQLiteSession` does (a row of
//! `agent_messages` with the message's JSON), in WAL mode, then
//! checkpoints (`wal_checkpoint(TRUNCATE)`). Both sizes are the bytes of
//! every file the store left.

use std::path::Path;

use agent_journal::{
    CallId, EvaluationId, Event, InnerMessage, Journal, JournalConfig, Role, ToolCallRecord,
};
use serde_json::json;

use super::report::{Report, Row, Verdict, fmt_bytes, fmt_ratio, thousands};
use super::tempdir;

/// The bytes of every file under `dir`, and of each top-level entry.
fn dir_bytes(dir: &Path) -> (u64, Vec<(String, u64)>) {
    fn walk(p: &Path) -> u64 {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|rd| rd.flatten().map(|e| walk(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    let mut parts: Vec<(String, u64)> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                walk(&e.path()),
            )
        })
        .collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    (parts.iter().map(|p| p.1).sum(), parts)
}

/// The three messages of step `i`: (neutral message, provider JSON) each.
fn step(i: u64, eval: EvaluationId) -> [(InnerMessage, String); 3] {
    let question = format!(
        "Order #{:06} was supposed to arrive on Monday but the tracking page still says \
         'label created'. Can you check where it is and whether it will arrive this week?",
        100_000 + i
    );
    let call_id = format!("call_{:024x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let arguments = json!({"order_id": format!("{:06}", 100_000 + i)}).to_string();
    let result = json!({
        "order_id": format!("{:06}", 100_000 + i),
        "status": "in_transit",
        "carrier": "UPS",
        "last_scan": {"at": "2026-11-23T08:14:00Z", "place": "Louisville, KY, US"},
        "estimated_delivery": "2026-11-27",
        "items": [{"sku": format!("SKU-{}", i % 977), "qty": 1 + i % 3}],
    })
    .to_string();
    let mut user = InnerMessage::new(Role::User, question.clone(), eval, 3 * i + 1);
    user.turn = i as u32;
    let user_json = json!({"role": "user", "content": question});
    let mut asking = InnerMessage::new(Role::Assistant, "", eval, 3 * i + 2);
    asking.turn = i as u32 + 1;
    asking.tool_calls.push(ToolCallRecord::new(
        CallId(call_id.clone()),
        "lookup_order",
        arguments.clone(),
    ));
    let asking_json = json!({
        "role": "assistant", "content": null, "refusal": null, "annotations": [],
        "tool_calls": [{"id": call_id, "type": "function",
                        "function": {"name": "lookup_order", "arguments": arguments}}],
    });
    let mut tool = InnerMessage::new(Role::Tool, result.clone(), eval, 3 * i + 3);
    tool.turn = i as u32 + 1;
    tool.tool_call_id = Some(CallId(call_id.clone()));
    tool.tool_name = Some("lookup_order".into());
    let tool_json = json!({"role": "tool", "tool_call_id": call_id, "content": result});
    [(user, user_json), (asking, asking_json), (tool, tool_json)].map(|(mut m, j)| {
        let text = j.to_string();
        m.provider_payload = Some(json!({"provider": "openai", "message": j}).to_string());
        (m, text)
    })
}

/// What the journal left on disk for `steps` agent steps.
struct Written {
    bytes: u64,
    parts: Vec<(String, u64)>,
    frame_bytes: u64,
    json_bytes: u64,
    append: std::time::Duration,
    /// Bytes after `compact_to` (sled's garbage left behind).
    compacted: u64,
}

/// Appends `steps` agent steps to a new database (default configuration,
/// pages compressed if `compress`), closes it, and measures its files.
fn journal_bytes(steps: u64, compress: bool) -> Written {
    let dir = tempdir();
    let db = dir.path().join("db");
    let eval = EvaluationId::new();
    let mut json_bytes = 0u64;
    let frame_bytes;
    let append;
    {
        let config = JournalConfig {
            compress,
            ..JournalConfig::default()
        };
        let journal = Journal::open_with(&db, config).expect("open");
        let session = journal.create_session().expect("session");
        let start = std::time::Instant::now();
        session
            .append(Event::EvaluationStarted {
                evaluation_id: eval,
                prompt_ns: "support".into(),
                prompt_key: "orders".into(),
                adapter: "openai".into(),
            })
            .expect("append");
        for i in 0..steps {
            for (m, text) in step(i, eval) {
                json_bytes += text.len() as u64;
                session.append(Event::Message(m)).expect("append");
            }
        }
        append = start.elapsed();
        let mut total = 0u64;
        let head = session.head();
        session
            .events(0..head)
            .expect("events")
            .iter()
            .for_each(|e| {
                total += agent_journal::format::encode_frame(
                    e,
                    agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
                )
                .expect("encode")
                .len() as u64
            });
        frame_bytes = total;
    }
    let (bytes, parts) = dir_bytes(&db);
    let to = dir.path().join("compacted");
    Journal::open(&db)
        .expect("reopen")
        .compact_to(&to, |_| {})
        .expect("compact");
    let compacted = dir_bytes(&to).0;
    Written {
        compacted,
        bytes,
        parts,
        frame_bytes,
        json_bytes,
        append,
    }
}

pub fn section_space(quick: bool, rep: &mut Report) {
    let steps: u64 = if quick { 2_000 } else { 10_000 };
    eprintln!(
        "[15] bytes on disk: {} agent steps (user, assistant with a tool call, tool result) vs an SQLite table",
        thousands(steps)
    );
    let eval = EvaluationId::new();
    let plain = journal_bytes(steps, false);
    let packed = journal_bytes(steps, true);
    let sqlite_dir = tempdir();
    let path = sqlite_dir.path().join("session.db");
    let sqlite_append;
    {
        let conn = rusqlite::Connection::open(&path).expect("sqlite open");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE agent_sessions (
                 session_id TEXT PRIMARY KEY,
                 created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                 updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
             CREATE TABLE agent_messages (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 session_id TEXT NOT NULL,
                 message_data TEXT NOT NULL,
                 created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                 FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE);
             CREATE INDEX idx_agent_messages_session_id ON agent_messages (session_id, created_at);
             INSERT INTO agent_sessions (session_id) VALUES ('bench');",
        )
        .expect("schema");
        let mut insert = conn
            .prepare("INSERT INTO agent_messages (session_id, message_data) VALUES ('bench', ?1)")
            .expect("prepare");
        let start = std::time::Instant::now();
        for i in 0..steps {
            for (_, text) in step(i, eval) {
                insert.execute([text]).expect("insert");
            }
        }
        drop(insert);
        sqlite_append = start.elapsed();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("checkpoint");
    }
    let (sqlite, _) = dir_bytes(sqlite_dir.path());
    let items = 3 * steps;
    let baseline = format!(
        "SQLite table, one row of JSON per message (the Agents SDK's `SQLiteSession` schema), WAL mode, checkpointed: {} ({:.0} B/message)",
        fmt_bytes(sqlite),
        sqlite as f64 / items as f64
    );
    for (id, w, how) in [
        ("15", &plain, "default configuration"),
        (
            "15z",
            &packed,
            "pages compressed (`JournalConfig::compress`)",
        ),
    ] {
        let ratio = w.bytes as f64 / sqlite as f64;
        rep.row(Row {
            id,
            what: format!(
                "bytes on disk, {} agent steps ({} messages with their provider JSON), {how}, closed",
                thousands(steps),
                thousands(items)
            ),
            ours: format!(
                "{} ({:.0} B/message)",
                fmt_bytes(w.bytes),
                w.bytes as f64 / items as f64
            ),
            baseline: baseline.clone(),
            ratio: fmt_ratio(ratio),
            target: "<= 1x".into(),
            verdict: Verdict::at_most(ratio, 1.0),
        });
        rep.note(format!(
            "row {id}: the journal's files: {}; {} after `compact`; appended (`Synced`, one at a time) in {:.2} s, SQLite's inserts (autocommit) in {:.2} s.",
            w.parts
                .iter()
                .map(|(n, b)| format!("{n} {}", fmt_bytes(*b)))
                .collect::<Vec<_>>()
                .join(", "),
            fmt_bytes(w.compacted),
            w.append.as_secs_f64(),
            sqlite_append.as_secs_f64(),
        ));
    }
    rep.note(format!(
        "rows 15, 15z: the frames {} ({:.0} B/message), the messages' JSON alone {} ({:.0} B/message).",
        fmt_bytes(plain.frame_bytes),
        plain.frame_bytes as f64 / items as f64,
        fmt_bytes(plain.json_bytes),
        plain.json_bytes as f64 / items as f64,
    ));
}
