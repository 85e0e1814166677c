//! Issue 11, case 8: a conversation file is imported a message at a time
//! (`ConversationFile`), never whole. It must make the session the import
//! of its text makes, for every format, refuse what that import refuses
//! with the same message and write nothing then, and hold a turn of the
//! conversation in memory, not the conversation.

use std::path::Path;

use agent_journal::provider::ConversationFormat;
use agent_journal::transfer::ConversationFile;
use agent_journal::{Event, InnerMessage, Journal, SessionId};
use serde_json::{Value, json};

use crate::common::{path_str, run_cli};

/// A message without what each import draws anew (its id, time,
/// evaluation), and a payload pointing to another message by its place.
fn comparable(m: &InnerMessage, ids: &[String]) -> Value {
    let mut v = serde_json::to_value(m).expect("json");
    let o = v.as_object_mut().expect("object");
    for k in ["message_id", "created_at", "evaluation_id"] {
        o.remove(k);
    }
    if let Some(Value::String(p)) = o.get_mut("provider_payload") {
        for (i, id) in ids.iter().enumerate() {
            *p = p.replace(id, &format!("<message {i}>"));
        }
    }
    v
}

/// The events of session `id` in `j`, comparable across imports.
pub(crate) fn session_events(j: &Journal, id: SessionId) -> Vec<Value> {
    let events = j.session(id).expect("session").events(..).expect("events");
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Message(m) => Some(m.message_id.to_string()),
            _ => None,
        })
        .collect();
    events
        .iter()
        .map(|e| match &e.event {
            Event::Message(m) => comparable(m, &ids),
            Event::EvaluationStarted {
                prompt_ns,
                prompt_key,
                adapter,
                ..
            } => json!({"evaluation": [prompt_ns, prompt_key, adapter]}),
            Event::Custom { kind, payload } => {
                let mut p: Value = serde_json::from_slice(payload)
                    .unwrap_or_else(|_| String::from_utf8_lossy(payload).into());
                p.as_object_mut().map(|o| o.remove("evaluation"));
                // A Claude Code reply's records name its message.
                if let Some(m) = p.get_mut("message")
                    && let Some(i) = ids.iter().position(|id| m == id.as_str())
                {
                    *m = json!(format!("<message {i}>"));
                }
                json!({"custom": kind, "payload": p})
            }
            Event::ProviderCall(call) => {
                let mut v = serde_json::to_value(call).expect("json");
                v.as_object_mut().map(|o| o.remove("evaluation_id"));
                json!({"provider_call": v})
            }
            Event::EvaluationFinished { outcome, .. } => json!({"finished": outcome}),
            other => serde_json::to_value(other).expect("json"),
        })
        .collect()
}

/// Imports `text` both ways into fresh databases; the two sessions' events.
fn both_ways(
    dir: &Path,
    name: &str,
    text: &str,
    format: ConversationFormat,
) -> (Vec<Value>, Vec<Value>) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, text).expect("write");
    let whole = Journal::open(dir.join(format!("{name}-whole"))).expect("open");
    let a = whole
        .import_conversation(text, format, "import", name)
        .expect("import the text");
    let streamed = Journal::open(dir.join(format!("{name}-streamed"))).expect("open");
    let conversation = ConversationFile::open(&file, format, 1 << 30).expect("open the file");
    let (b, n) = streamed
        .import_conversation_file(&conversation, "import", name)
        .expect("import the file");
    assert_eq!(streamed.session(b).expect("session").head(), n);
    (session_events(&whole, a.id()), session_events(&streamed, b))
}

fn openai_request() -> Value {
    json!({"model": "gpt-4o", "temperature": 0.2, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "user", "content": "and?"},
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        {"role": "assistant", "content": "Sun in Paris, rain in Rome."},
        {"role": "user", "content": "Thanks. Now London?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    ]})
}

fn anthropic_request() -> Value {
    json!({"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Files?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "."}},
            {"type": "tool_use", "id": "t2", "name": "ls", "input": {"dir": "/"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a b"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "denied", "is_error": true},
            {"type": "text", "text": "go on"}]},
        {"role": "assistant", "content": "Done."}
    ], "system": [{"type": "text", "text": "You list files."}]})
}

/// JSON Lines of two messages, each line ended by `\r\n`.
fn openai_lines() -> String {
    let e = agent_journal::EvaluationId::new();
    (0..2)
        .map(|i| {
            let m = InnerMessage::new(agent_journal::Role::User, format!("l{i}"), e, i);
            serde_json::to_string(&m).expect("json") + "\r\n"
        })
        .collect()
}

#[test]
fn a_streamed_import_makes_the_session_the_import_of_its_text_makes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |p: &str| std::fs::read_to_string(fixtures.join(p)).expect("fixture");
    let e = agent_journal::EvaluationId::new;
    let jsonl = {
        // Two evaluations, interleaved and out of id order: grouped by id.
        let (first, second) = (e(), e());
        let mut lines = String::new();
        for (i, ev) in [second, first, second, first].into_iter().enumerate() {
            let m = InnerMessage::new(agent_journal::Role::User, format!("m{i}"), ev, i as u64);
            lines.push_str(&serde_json::to_string(&m).expect("json"));
            lines.push_str("\n\n");
        }
        lines
    };
    let cases = [
        (
            "openai",
            openai_request().to_string(),
            ConversationFormat::OpenAi,
        ),
        (
            "openai-bare",
            openai_request()["messages"].to_string(),
            ConversationFormat::OpenAi,
        ),
        (
            "anthropic",
            anthropic_request().to_string(),
            ConversationFormat::Anthropic,
        ),
        (
            "responses",
            read("openai-responses/items.json"),
            ConversationFormat::OpenAiResponses,
        ),
        (
            "responses-crashed",
            read("openai-responses/crashed.json"),
            ConversationFormat::OpenAiResponses,
        ),
        (
            "responses-text",
            json!({"input": "hello", "model": "m"}).to_string(),
            ConversationFormat::OpenAiResponses,
        ),
        (
            "ollama",
            read("ollama/messages.json"),
            ConversationFormat::Ollama,
        ),
        (
            "ollama-crashed",
            read("ollama/crashed.json"),
            ConversationFormat::Ollama,
        ),
        (
            "gemini",
            read("gemini/request.json"),
            ConversationFormat::Gemini,
        ),
        (
            "gemini-crashed",
            read("gemini/crashed.json"),
            ConversationFormat::Gemini,
        ),
        ("jsonl", jsonl, ConversationFormat::Jsonl),
        (
            "jsonl-crlf",
            "\r\n".to_owned() + &openai_lines(),
            ConversationFormat::Jsonl,
        ),
        // A member named twice: JSON keeps the last.
        (
            "openai-twice",
            r#"{"messages": [{"role": "user", "content": "a"}], "messages": [{"role": "user", "content": "b"}]}"#.to_owned(),
            ConversationFormat::OpenAi,
        ),
    ];
    for (name, text, format) in cases {
        let (whole, streamed) = both_ways(dir.path(), name, &text, format);
        assert!(whole.len() > 2, "{name}: {whole:?}");
        assert_eq!(whole, streamed, "{name}");
    }
}

#[test]
fn a_file_the_text_import_refuses_is_refused_alike_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = [
        (json!({"messages": [{"role": "tool", "tool_call_id": "x", "content": "?"}]}).to_string(), ConversationFormat::OpenAi),
        (json!({"model": "m"}).to_string(), ConversationFormat::OpenAi),
        (json!({"messages": 3}).to_string(), ConversationFormat::OpenAi),
        ("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}".to_owned(), ConversationFormat::OpenAi),
        (json!({"messages": []}).to_string(), ConversationFormat::Anthropic),
        (json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "q", "content": "?"}]}]}).to_string(), ConversationFormat::Anthropic),
        (json!({"input": [{"type": "function_call_output", "call_id": "z", "output": "?"}]}).to_string(), ConversationFormat::OpenAiResponses),
        (json!([{"role": "tool", "content": "?"}]).to_string(), ConversationFormat::Ollama),
        (json!({"contents": 5}).to_string(), ConversationFormat::Gemini),
        ("{\"role\": \"user\"}\nnot json\n".to_owned(), ConversationFormat::Jsonl),
    ];
    for (i, (text, format)) in bad.into_iter().enumerate() {
        let file = dir.path().join(format!("bad-{i}.json"));
        std::fs::write(&file, &text).expect("write");
        let reason = |e: agent_journal::Error| match e {
            agent_journal::Error::InvalidInput(r) => r,
            other => panic!("case {i}: {other}"),
        };
        let want = reason(
            Journal::memory()
                .import_conversation(&text, format, "import", "x")
                .expect_err("the text is refused"),
        );
        let got = reason(
            ConversationFile::open(&file, format, 1 << 30).expect_err("the file is refused"),
        );
        assert_eq!(got, want, "case {i}: {text}");
        // Through the binary: exit 1, the message, and no database.
        let db = dir.path().join(format!("db-{i}"));
        let out = run_cli(&db, &["import", path_str(&file), "--format", format.name()]);
        assert_eq!(out.status.code(), Some(1), "case {i}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "case {i}: {err} lacks {want}");
        assert!(!db.exists(), "case {i}: bad input created the database");
    }
    // Past the limit: refused before it is read.
    let file = dir.path().join("bad-0.json");
    let e = ConversationFile::open(&file, ConversationFormat::OpenAi, 10).expect_err("limit");
    assert!(
        e.to_string().contains("larger than the limit of 10 bytes"),
        "{e}"
    );
}

/// An OpenAI request of `steps` steps (a question, a call, its result) of
/// about 6 KiB each.
fn openai_steps(steps: usize) -> String {
    let mut rng = crate::common::Rng::new(steps as u64);
    let mut text = |n: usize| -> String {
        rng.bytes(n)
            .iter()
            .map(|b| char::from(b'a' + b % 26))
            .collect()
    };
    let mut messages = vec![json!({"role": "system", "content": "Answer."})];
    for i in 0..steps {
        let id = format!("call_{i}");
        messages.push(json!({"role": "user", "content": text(2000)}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "look", "arguments": json!({"q": text(200)}).to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": text(4000)}));
    }
    json!({"model": "m", "messages": messages}).to_string()
}

/// The import held the parsed request, its messages, their folded state
/// and the queue of their records at once: a 21 MB request peaked at 11
/// times its size (a 200 MB one at 4.8 GB), and its memory grew about
/// eight times as fast as the request. Streamed, memory holds a turn, the
/// store's fixed buffers and sled's bookkeeping of its pages: a request
/// three times as long costs less memory than the bytes it adds (release
/// builds, `docs/benchmarks.md`: 57 MB for a 37 MB request, 72 MB for a
/// 141 MB one).
#[test]
fn importing_a_longer_conversation_takes_little_more_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs = Vec::new();
    for steps in [2000, 6000] {
        let file = dir.path().join(format!("steps-{steps}.json"));
        std::fs::write(&file, openai_steps(steps)).expect("write");
        let size = std::fs::metadata(&file).expect("metadata").len();
        let db = dir.path().join(format!("db-{steps}"));
        let args = ["import", path_str(&file), "--format", "openai"];
        let (code, peak) = crate::common::peak_memory(&db, &args);
        assert_eq!(code, Some(0));
        let j = Journal::open(&db).expect("open");
        let id = j.sessions().expect("sessions")[0];
        // Opened, evaluation started, request fields, the messages.
        assert_eq!(
            j.session(id).expect("session").head(),
            3 + 3 * steps as u64 + 1
        );
        eprintln!("{steps} steps, {} MiB: peak {} MiB", size >> 20, peak >> 20);
        runs.push((size, peak));
    }
    crate::common::assert_memory_grows_less_than_input(&runs);
}

/// Text from a pipe cannot be read twice: `import /dev/stdin` reads it once
/// (within `--max-bytes`), detects its format in memory and imports it,
/// with no copy of it left anywhere.
#[test]
fn a_conversation_piped_in_is_detected_and_imported() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let text = openai_request().to_string();
    let mut child = crate::common::cli_command(&db)
        .args(["import", "/dev/stdin", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"openai\""),
        "{out:?}"
    );
    let j = Journal::open(&db).expect("open");
    let id = j.sessions().expect("sessions")[0];
    // The prompt key is the file's stem: "stdin" both ways. The import
    // labels the session with the SHA-256 of what it read.
    let (_, streamed) = both_ways(dir.path(), "stdin", &text, ConversationFormat::OpenAi);
    let mut events = session_events(&j, id);
    let labels = events[0]["SessionOpened"]["labels"]
        .as_array_mut()
        .expect("the opening's labels");
    let hash = labels.pop().expect("a label");
    assert_eq!(hash[0], "import.sha256", "{hash}");
    assert_eq!(hash[1].as_str().map(str::len), Some(64), "{hash}");
    assert_eq!(events, streamed);
}
