//! `OpenAiAdapter` against the scripted server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_journal::Role;
use agent_journal::conversation::http::{HttpOptions, OpenAiAdapter};
use agent_journal::conversation::{Page, ProviderAdapter, RunTurn, TurnStatus};
use agent_journal::{Error, ToolStatus};
use serde_json::{Value, json};

use super::server::{Reply, Server};
use super::{assert_error, call_options, delta_text, engine, request, with_chunks};

fn adapter(server: &Server) -> OpenAiAdapter {
    OpenAiAdapter::new(HttpOptions::new(server.base_url()).api_key("sk-test"))
}

/// A completion whose message calls `add` twice in parallel, with
/// `content: null` and members the adapter does not know.
pub fn tool_calls_response() -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000u64,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_1", "service_tier": "default",
        "choices": [{
            "index": 0, "logprobs": null, "finish_reason": "tool_calls",
            "message": {
                "role": "assistant", "content": null, "refusal": null, "annotations": [],
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\":4,\"b\":5}"}},
                ],
            },
        }],
        "usage": {
            "prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 10},
        },
    })
}

/// A completion with text only.
pub fn text_response(text: &str) -> Value {
    json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
    })
}

/// One `data:` event of a chunk with `delta` and `finish_reason`.
fn chunk(delta: Value, finish: Value) -> String {
    let c = json!({
        "id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-mini", "system_fingerprint": "fp_s",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {c}\n\n")
}

/// A streamed completion: text in two deltas, two tool calls whose
/// fragments interleave, a finish reason, the usage chunk, `[DONE]`.
pub fn stream_body() -> String {
    let calls = |v: Value| json!({"tool_calls": v});
    [
        ": keep-alive\n\n".to_owned(),
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Let me "}), Value::Null),
        chunk(json!({"content": "add."}), Value::Null),
        chunk(
            calls(json!([{"index": 0, "id": "call_s1", "type": "function",
            "function": {"name": "add", "arguments": ""}}])),
            Value::Null,
        ),
        chunk(
            calls(json!([{"index": 1, "id": "call_s2", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\":4"}}])),
            Value::Null,
        ),
        chunk(
            calls(json!([{"index": 0, "function": {"arguments": "{\"a\":2,"}}])),
            Value::Null,
        ),
        chunk(
            calls(json!([{"index": 0, "function": {"arguments": "\"b\":3}"}},
            {"index": 1, "function": {"arguments": ",\"b\":5}"}}])),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        format!(
            "data: {}\r\n\r\n",
            json!({"id": "chatcmpl-s1", "object": "chat.completion.chunk",
            "model": "gpt-4o-mini", "choices": [],
            "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70,
                      "prompt_tokens_details": {"cached_tokens": 8}}})
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}

#[test]
fn openai_request_maps_history_tools_parameters_and_auth() {
    let server = Server::start(vec![Reply::json(&tool_calls_response(), "req-o1")]);
    let params = json!({"temperature": 0.2, "max_tokens": 256, "tool_choice": "auto",
                        "parallel_tool_calls": true, "stream": true});
    let result = adapter(&server)
        .send_chat(&request("gpt-4o", params), &call_options())
        .expect("send_chat");
    let got = server.finish();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("accept"), Some("application/json"));
    let call = |id: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": "add", "arguments": args}});
    let expected = json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "system", "content": "Use tools for arithmetic."},
            {"role": "user", "content": "What are 2+3 and 4+5?", "name": "alice"},
            {"role": "assistant", "content": null, "tool_calls": [
                call("call_a", "{\"a\":2,\"b\":3}"), call("call_b", "{\"a\":4,\"b\":5}")]},
            {"role": "tool", "tool_call_id": "call_a", "content": "5"},
            {"role": "tool", "tool_call_id": "call_b", "content": "9"},
            {"role": "user", "content": "Thanks. And their sum?"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "add", "description": "Adds two integers.",
            "parameters": super::add_spec().parameters}}],
        "temperature": 0.2, "max_tokens": 256, "tool_choice": "auto", "parallel_tool_calls": true,
    });
    assert_eq!(r.body, expected, "a plain call drops `stream`");

    // The response: content null, two parallel calls, usage with details.
    let m = &result.messages[0];
    assert_eq!((m.role, m.text()), (Role::Assistant, String::new()));
    let calls: Vec<_> = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_1", "{\"a\":2,\"b\":3}"),
            ("call_2", "{\"a\":4,\"b\":5}")
        ]
    );
    assert_eq!(m.provider_message_id.as_deref(), Some("chatcmpl-1"));
    let usage = result.usage.as_ref().expect("usage");
    assert_eq!(usage.input_tokens, 120);
    assert_eq!(usage.output_tokens, 40);
    assert_eq!(usage.cache_read_tokens, 64);
    assert_eq!(usage.total_tokens, Some(160));
    assert_eq!(
        usage.breakdown["prompt_tokens_details"],
        json!({"audio_tokens": 0})
    );
    assert_eq!(
        usage.breakdown["completion_tokens_details"],
        json!({"reasoning_tokens": 10})
    );
    assert_eq!(result.request_id.as_deref(), Some("req-o1"));
    assert_eq!(result.response_metadata["finish_reason"], "tool_calls");
    assert_eq!(result.response_metadata["model"], "gpt-4o-2024-08-06");
    assert_eq!(result.raw, Some(tool_calls_response()));
}

#[test]
fn openai_content_missing_unknown_fields_and_no_key() {
    let missing = json!({
        "id": "x", "model": "llama3.2", "x_vendor": {"queue_ms": 3},
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "reasoning_content": "think",
            "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 1}}}]}}],
    });
    let server = Server::start(vec![
        Reply::json(&missing, "r1"),
        Reply::json(&text_response("Fourteen."), "r2"),
    ]);
    let local = OpenAiAdapter::new(HttpOptions::new(server.base_url())).with_id("ollama");
    assert_eq!(local.id(), "ollama");
    let a = local
        .send_chat(&request("llama3.2", json!({})), &call_options())
        .expect("missing");
    let b = local
        .send_chat(&request("llama3.2", json!({})), &call_options())
        .expect("text");
    let got = server.finish();
    assert!(
        got.iter().all(|r| r.header("authorization").is_none()),
        "no key, no header"
    );
    let m = &a.messages[0];
    assert_eq!(m.text(), "");
    assert_eq!(m.tool_calls.len(), 1);
    assert!(
        m.tool_calls[0].call_id.as_str().starts_with("call_"),
        "a generated id"
    );
    assert_eq!(
        m.tool_calls[0].arguments, r#"{"a":1,"b":1}"#,
        "object arguments as JSON text"
    );
    assert_eq!(m.metadata["reasoning_content"], "think");
    assert_eq!(a.usage, None);
    assert_eq!(b.messages[0].text(), "Fourteen.");
    assert_eq!(b.response_metadata["finish_reason"], "stop");
}

#[test]
fn openai_streams_text_parallel_tool_calls_and_usage() {
    let server = Server::start(vec![
        Reply::sse(&stream_body(), 7, "req-s1"),
        // A server that ignores `stream` and answers in one piece.
        Reply::json(&text_response("Whole."), "req-s2"),
    ]);
    let a = adapter(&server);
    let params = json!({"stream_options": {"foo": 1}, "temperature": 0});
    let (result, chunks) = with_chunks(|on| {
        a.stream_chat(&request("gpt-4o-mini", params.clone()), &call_options(), on)
    });
    let result = result.expect("stream_chat");
    assert_eq!(delta_text(&chunks), "Let me add.");
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c.delta.is_none() && c.raw.is_some())
            .count(),
        4,
        "tool-call fragments"
    );
    let n = chunks.len();
    assert!(chunks[n - 2].is_message_complete);
    assert_eq!(chunks[n - 1].usage, result.usage);
    let m = &result.messages[0];
    assert_eq!(m.text(), "Let me add.");
    let calls: Vec<_> = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_s1", "add", "{\"a\":2,\"b\":3}"),
            ("call_s2", "add", "{\"a\":4,\"b\":5}")
        ]
    );
    let usage = result.usage.as_ref().expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (50, 20));
    assert_eq!((usage.cache_read_tokens, usage.total_tokens), (8, Some(70)));
    assert_eq!(result.request_id.as_deref(), Some("req-s1"));
    assert_eq!(result.response_metadata["finish_reason"], "tool_calls");
    assert_eq!(
        result.raw.as_ref().expect("raw")["object"],
        "chat.completion"
    );

    let (whole, chunks) =
        with_chunks(|on| a.stream_chat(&request("gpt-4o-mini", json!({})), &call_options(), on));
    assert_eq!(whole.expect("json fallback").messages[0].text(), "Whole.");
    assert!(chunks[0].is_message_complete && chunks[0].delta == Some(json!("Whole.")));

    let got = server.finish();
    let body = &got[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["stream_options"],
        json!({"foo": 1, "include_usage": true})
    );
    assert_eq!(body["temperature"], 0);
    assert_eq!(got[0].header("accept"), Some("text/event-stream"));
}

#[test]
fn openai_error_bodies_are_typed() {
    let err = |message: &str, kind: &str, code: Value| json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    let bodies = [
        err(
            "Invalid 'messages[1].role'",
            "invalid_request_error",
            Value::Null,
        ),
        err(
            "Incorrect API key provided",
            "invalid_request_error",
            json!("invalid_api_key"),
        ),
        err(
            "Rate limit reached for gpt-4o",
            "requests",
            json!("rate_limit_exceeded"),
        ),
    ];
    let server = Server::start(vec![
        Reply::status(400, &bodies[0], "req-e1"),
        Reply::status(401, &bodies[1], "req-e2"),
        Reply::status(429, &bodies[2], "req-e3"),
        Reply::text(500, "<html>upstream failure</html>", "req-e4"),
        Reply::Full {
            status: 200,
            content_type: "application/json",
            headers: vec![],
            body: b"{\"id\": \"x\", \"choices\": [".to_vec(),
        },
        Reply::status(503, &json!({"error": "model is loading"}), "req-e6"),
        Reply::sse(
            &format!(
                "{}data: {}\n\n",
                chunk(json!({"content": "Hi"}), Value::Null),
                json!({"error": {"message": "The server had an error", "type": "server_error"}})
            ),
            64,
            "req-e7",
        ),
    ]);
    let a = adapter(&server);
    let send = || {
        a.send_chat(&request("gpt-4o", json!({})), &call_options())
            .expect_err("an error")
    };
    let e = send();
    assert_error(
        &e,
        "client",
        Some(400),
        Some("invalid_request_error"),
        "Invalid 'messages[1].role'",
    );
    assert_eq!(
        (e.raw.as_ref(), e.request_id.as_deref()),
        (Some(&bodies[0]), Some("req-e1"))
    );
    let e = send();
    assert_error(
        &e,
        "auth",
        Some(401),
        Some("invalid_api_key"),
        "Incorrect API key",
    );
    let e = send();
    assert_error(
        &e,
        "rate_limit",
        Some(429),
        Some("rate_limit_exceeded"),
        "Rate limit reached",
    );
    assert_eq!(e.raw.as_ref(), Some(&bodies[2]));
    let e = send();
    assert_error(
        &e,
        "server",
        Some(500),
        None,
        "HTTP 500: <html>upstream failure</html>",
    );
    assert_eq!(
        e.raw,
        Some(json!("<html>upstream failure</html>")),
        "a non-JSON body as a string"
    );
    assert_eq!(e.request_id.as_deref(), Some("req-e4"));
    let e = send();
    assert_error(&e, "parse", Some(200), None, "not valid");
    let stream = || {
        a.stream_chat(&request("gpt-4o", json!({})), &call_options(), &mut |_| {})
            .expect_err("a stream error")
    };
    let e = stream();
    assert_error(&e, "server", Some(503), None, "model is loading");
    let e = stream();
    assert_error(
        &e,
        "server",
        Some(200),
        Some("server_error"),
        "The server had an error",
    );
    assert_eq!(e.request_id.as_deref(), Some("req-e7"));
    server.finish();
}

#[test]
fn openai_cut_bodies_limits_refusals_and_timeouts() {
    let full = tool_calls_response().to_string().into_bytes();
    let cut_stream: String = stream_body()
        .lines()
        .take(8)
        .map(|l| format!("{l}\n"))
        .collect();
    let server = Server::start(vec![
        Reply::Cut {
            declared: full.len(),
            body: full[..full.len() / 2].to_vec(),
        },
        Reply::sse_closing(&cut_stream, 16, "req-c2"),
        Reply::sse_dropped(&cut_stream, 16, "req-c2b"),
        Reply::json(&tool_calls_response(), "req-c3"),
        Reply::Slow {
            delay: Duration::from_millis(1500),
        },
        Reply::Parts {
            content_type: "text/event-stream",
            headers: vec![],
            parts: vec![chunk(json!({"content": "Hi"}), Value::Null).into_bytes()],
            pause: Duration::ZERO,
            stall: Duration::from_millis(1500),
            chunked: true,
            complete: true,
        },
    ]);
    let a = adapter(&server);
    let req = request("gpt-4o", json!({}));
    let e = a.send_chat(&req, &call_options()).expect_err("cut body");
    assert_error(&e, "network", Some(200), None, "cut off");
    let e = a
        .stream_chat(&req, &call_options(), &mut |_| {})
        .expect_err("cut stream");
    assert_error(&e, "network", Some(200), None, "[DONE]");
    assert_eq!(e.request_id.as_deref(), Some("req-c2"));
    let e = a
        .stream_chat(&req, &call_options(), &mut |_| {})
        .expect_err("dropped chunks");
    assert_error(&e, "network", Some(200), None, "cut off while being read");
    let small = OpenAiAdapter::new(HttpOptions::new(server.base_url()).max_body_bytes(256));
    let e = small
        .send_chat(&req, &call_options())
        .expect_err("too large");
    assert_error(
        &e,
        "parse",
        Some(200),
        None,
        "larger than the limit of 256 bytes",
    );

    let quick =
        OpenAiAdapter::new(HttpOptions::new(server.base_url()).timeout(Duration::from_millis(300)));
    for streaming in [false, true] {
        let start = Instant::now();
        let e = if streaming {
            quick.stream_chat(&req, &call_options(), &mut |_| {})
        } else {
            quick.send_chat(&req, &call_options())
        }
        .expect_err("timeout");
        assert_eq!(e.category, "timeout", "{e:?}");
        assert!(
            start.elapsed() < Duration::from_millis(1400),
            "gave up at the timeout"
        );
    }
    server.finish();

    // Nobody listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port");
    let gone = OpenAiAdapter::new(HttpOptions::new(format!("http://{port}/v1")));
    let e = gone.send_chat(&req, &call_options()).expect_err("refused");
    assert_eq!((e.category.as_str(), e.status), ("network", None), "{e:?}");
}

#[test]
fn openai_engine_turn_with_tools() {
    let server = Server::start(vec![
        Reply::json(&tool_calls_response(), "req-t1"),
        Reply::json(&text_response("5 and 9."), "req-t2"),
    ]);
    let engine = engine(Arc::new(adapter(&server)), "gpt-4o-mini", false);
    let conversation = engine
        .create_conversation(agent_journal::conversation::CreateConversation {
            initial_messages: vec![
                agent_journal::conversation::ConversationMessage::system("Be terse."),
                agent_journal::conversation::ConversationMessage::user("2+3? 4+5?"),
            ],
            ..Default::default()
        })
        .expect("create");
    let turn = engine
        .run_turn(conversation.id, RunTurn::default())
        .expect("run_turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    let texts: Vec<_> = turn
        .output_messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::Assistant, String::new()),
            (Role::Tool, "5".into()),
            (Role::Tool, "9".into()),
            (Role::Assistant, "5 and 9.".into()),
        ]
    );
    assert!(
        turn.tool_calls
            .iter()
            .all(|c| c.status == ToolStatus::Completed)
    );
    assert_eq!(turn.provider_calls.len(), 2);
    for (call, id) in turn.provider_calls.iter().zip(["req-t1", "req-t2"]) {
        assert_eq!(call.request_id.as_deref(), Some(id));
        assert!(call.usage.is_some());
        let outcome = call.outcome.as_ref().expect("outcome");
        assert!(outcome.ok && outcome.error.is_none());
    }
    assert_eq!(
        turn.provider_calls[0]
            .usage
            .as_ref()
            .map(|u| u.cache_read_tokens),
        Some(64)
    );
    assert_eq!(
        turn.provider_calls[1].response_metadata["finish_reason"],
        "stop"
    );
    let stored = engine
        .store()
        .get_turn(conversation.id, turn.id)
        .expect("get")
        .expect("stored");
    assert_eq!(stored, turn, "what the store recorded");

    let got = server.finish();
    assert_eq!(got[0].body["model"], "gpt-4o-mini");
    assert_eq!(got[0].body["tools"][0]["function"]["name"], "add");
    let second = got[1].body["messages"].as_array().expect("messages");
    assert_eq!(second.len(), 5, "system, user, assistant, two results");
    assert_eq!(second[2]["tool_calls"][1]["id"], "call_2");
    assert_eq!(
        second[4],
        json!({"role": "tool", "tool_call_id": "call_2", "content": "9"})
    );
}

#[test]
fn openai_engine_turn_error_keeps_the_provider_body() {
    let body = json!({"error": {"message": "Rate limit reached", "type": "requests",
                                "param": null, "code": "rate_limit_exceeded"}});
    let server = Server::start(vec![Reply::status(429, &body, "req-f1")]);
    let engine = engine(Arc::new(adapter(&server)), "gpt-4o-mini", true);
    let conversation = engine
        .create_conversation(agent_journal::conversation::CreateConversation {
            initial_messages: vec![agent_journal::conversation::ConversationMessage::user("Hi")],
            ..Default::default()
        })
        .expect("create");
    let e = engine
        .run_turn(conversation.id, RunTurn::default())
        .expect_err("rate limited");
    assert!(
        matches!(&e, Error::TurnFailed { message, .. } if message == "Rate limit reached"),
        "{e:?}"
    );
    let turns = engine
        .store()
        .list_turns(conversation.id, Page::all())
        .expect("turns");
    let turn = turns.last().expect("a turn");
    assert_eq!(turn.status, TurnStatus::Failed);
    let error = turn.error.as_ref().expect("error");
    assert_eq!(error.raw, body);
    assert_eq!(error.code.as_deref(), Some("rate_limit_exceeded"));
    assert_eq!(error.message, "Rate limit reached");
    assert_eq!(error.provider.as_deref(), Some("openai"));
    let call = &turn.provider_calls[0];
    assert_eq!(call.request_id.as_deref(), Some("req-f1"));
    let outcome = call.outcome.as_ref().expect("outcome");
    assert_eq!((outcome.ok, outcome.status), (false, Some(429)));
    assert_eq!(outcome.error_category.as_deref(), Some("rate_limit"));
    server.finish();
}
