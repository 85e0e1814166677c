//! `AnthropicAdapter` against the scripted server.

use std::sync::Arc;
use std::time::Duration;

use agent_journal::Role;
use agent_journal::conversation::http::{AnthropicAdapter, HttpOptions};
use agent_journal::conversation::{
    ConversationMessage, CreateConversation, Page, ProviderAdapter, RunTurn, TurnStatus,
};
use agent_journal::{Error, ToolStatus};
use serde_json::{Value, json};

use super::server::{Reply, Server};
use super::{assert_error, call_options, delta_text, engine, request, with_chunks};

fn adapter(server: &Server) -> AnthropicAdapter {
    AnthropicAdapter::new(HttpOptions::new(server.base_url()).api_key("sk-ant-test"))
}

/// A message with thinking blocks (to skip), two text blocks and two
/// parallel `tool_use` blocks, cache usage and unknown members.
pub fn tool_use_response() -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "container": null,
        "content": [
            {"type": "thinking", "thinking": "The user wants two sums.", "signature": "sig=="},
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "text", "text": "Adding "},
            {"type": "text", "text": "both.", "citations": null},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 4, "b": 5}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {
            "input_tokens": 200, "output_tokens": 60,
            "cache_read_input_tokens": 150, "cache_creation_input_tokens": 20,
            "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 0},
            "service_tier": "standard",
        },
    })
}

fn event(data: Value) -> String {
    let kind = data["type"].as_str().unwrap_or("message").to_owned();
    format!("event: {kind}\ndata: {data}\n\n")
}

fn delta(index: u64, delta: Value) -> String {
    event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn start(index: u64, block: Value) -> String {
    event(json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn stop(index: u64) -> String {
    event(json!({"type": "content_block_stop", "index": index}))
}

/// A streamed message with `text`; with two tool calls when `tools`.
pub fn stream_body(text: &str, tools: bool) -> String {
    let json_delta = |s: &str| json!({"type": "input_json_delta", "partial_json": s});
    let mut out = vec![
        event(json!({"type": "message_start", "message": {
            "id": "msg_s1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 300, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 100, "output_tokens": 1}}})),
        event(json!({"type": "ping"})),
        start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "Two sums."}),
        ),
        delta(0, json!({"type": "signature_delta", "signature": "EqQB"})),
        stop(0),
        start(1, json!({"type": "text", "text": ""})),
    ];
    let (head, tail) = text.split_at(text.len() / 2);
    out.push(delta(1, json!({"type": "text_delta", "text": head})));
    out.push(delta(1, json!({"type": "text_delta", "text": tail})));
    out.push(stop(1));
    if tools {
        out.extend([
            start(
                2,
                json!({"type": "tool_use", "id": "toolu_s1", "name": "add", "input": {}}),
            ),
            delta(2, json_delta("")),
            delta(2, json_delta("{\"a\": 2")),
            delta(2, json_delta(", \"b\": 3}")),
            stop(2),
            start(
                3,
                json!({"type": "tool_use", "id": "toolu_s2", "name": "add", "input": {}}),
            ),
            delta(3, json_delta("{\"a\":4,\"b\":5}")),
            stop(3),
        ]);
    }
    let reason = if tools { "tool_use" } else { "end_turn" };
    out.push(event(json!({"type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": {"output_tokens": 89}})));
    out.push(event(json!({"type": "message_stop"})));
    out.concat()
}

#[test]
fn anthropic_request_maps_history_tools_parameters_and_headers() {
    let server = Server::start(vec![
        Reply::json(&tool_use_response(), "req-a1"),
        Reply::json(&tool_use_response(), "req-a2"),
    ]);
    let a = adapter(&server);
    let params = json!({"temperature": 0.5, "tool_choice": {"type": "auto"}, "stream": true});
    let result = a
        .send_chat(&request("claude-x", params), &call_options())
        .expect("send_chat");
    a.send_chat(
        &request("claude-x", json!({"max_tokens": 4096})),
        &call_options(),
    )
    .expect("second");
    let got = server.finish();
    let r = &got[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    let tool_use = |id: &str, a: i64, b: i64| json!({"type": "tool_use", "id": id, "name": "add", "input": {"a": a, "b": b}});
    let expected = json!({
        "model": "claude-x",
        "system": "You are terse.\n\nUse tools for arithmetic.",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "What are 2+3 and 4+5?"},
            {"role": "assistant", "content": [tool_use("call_a", 2, 3), tool_use("call_b", 4, 5)]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "5"},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "9"},
                {"type": "text", "text": "Thanks. And their sum?"},
            ]},
        ],
        "tools": [{"name": "add", "description": "Adds two integers.",
                   "input_schema": super::add_spec().parameters}],
        "temperature": 0.5, "tool_choice": {"type": "auto"},
    });
    assert_eq!(r.body, expected);
    assert_eq!(
        got[1].body["max_tokens"], 4096,
        "the parameters' max_tokens wins"
    );

    let m = &result.messages[0];
    assert_eq!(
        (m.role, m.text()),
        (Role::Assistant, "Adding both.".to_owned())
    );
    let calls: Vec<_> = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_1", r#"{"a":2,"b":3}"#),
            ("toolu_2", r#"{"a":4,"b":5}"#)
        ]
    );
    assert_eq!(m.provider_message_id.as_deref(), Some("msg_01"));
    let usage = result.usage.as_ref().expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (200, 60));
    assert_eq!(
        (usage.cache_read_tokens, usage.cache_write_tokens),
        (150, 20)
    );
    assert_eq!(usage.total_tokens, None);
    assert_eq!(usage.breakdown["service_tier"], "standard");
    assert_eq!(
        usage.breakdown["cache_creation"]["ephemeral_5m_input_tokens"],
        20
    );
    assert_eq!(result.request_id.as_deref(), Some("req-a1"));
    assert_eq!(result.response_metadata["stop_reason"], "tool_use");
    assert_eq!(
        result.response_metadata["model"],
        "claude-sonnet-4-5-20250929"
    );
    assert_eq!(result.raw, Some(tool_use_response()));
}

#[test]
fn anthropic_streams_text_tool_use_and_usage_keeping_thinking() {
    let server = Server::start(vec![Reply::sse(
        &stream_body("Adding both.", true),
        5,
        "req-s1",
    )]);
    let a = adapter(&server);
    let (result, chunks) =
        with_chunks(|on| a.stream_chat(&request("claude-x", json!({})), &call_options(), on));
    let result = result.expect("stream_chat");
    assert_eq!(delta_text(&chunks), "Adding both.");
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c.delta.is_none() && c.raw.is_some())
            .count(),
        4,
        "input fragments"
    );
    let n = chunks.len();
    assert!(chunks[n - 2].is_message_complete);
    assert_eq!(chunks[n - 1].usage, result.usage);
    let m = &result.messages[0];
    // A thinking block makes the content the block list as it came (sent
    // back unchanged in the tool loop), the thinking's signature included.
    let blocks = m.content.as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "thinking");
    assert_eq!(blocks[0]["signature"], "EqQB");
    let text: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(text, ["Adding both."]);
    let calls: Vec<_> = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_s1", r#"{"a":2,"b":3}"#),
            ("toolu_s2", r#"{"a":4,"b":5}"#)
        ]
    );
    let usage = result.usage.as_ref().expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (300, 89));
    assert_eq!(usage.cache_read_tokens, 100);
    assert_eq!(result.request_id.as_deref(), Some("req-s1"));
    assert_eq!(result.response_metadata["stop_reason"], "tool_use");
    let raw = result.raw.as_ref().expect("raw");
    assert_eq!(
        raw["content"][0]["thinking"], "Two sums.",
        "thinking kept in raw"
    );
    assert_eq!(raw["content"][0]["signature"], "EqQB");
    let got = server.finish();
    assert_eq!(got[0].body["stream"], true);
    assert_eq!(got[0].header("accept"), Some("text/event-stream"));
}

#[test]
fn anthropic_error_bodies_are_typed() {
    let err = |kind: &str, message: &str| json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011"});
    let cases = [
        (
            400,
            "invalid_request_error",
            "max_tokens: Field required",
            "client",
        ),
        (401, "authentication_error", "invalid x-api-key", "auth"),
        (403, "permission_error", "no access to this model", "auth"),
        (
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
            "rate_limit",
        ),
        (500, "api_error", "Internal server error", "server"),
        (529, "overloaded_error", "Overloaded", "server"),
    ];
    let mut script: Vec<Reply> = cases
        .iter()
        .map(|(status, kind, message, _)| Reply::status(*status, &err(kind, message), "req-x"))
        .collect();
    let mid_stream = stream_body("Hello there", false).replace(
        "event: message_delta",
        &format!(
            "{}event: message_delta",
            event(err("overloaded_error", "Overloaded"))
        ),
    );
    script.push(Reply::sse(&mid_stream, 64, "req-mid"));
    let cut = stream_body("Hello there", true);
    script.push(Reply::sse_closing(&cut[..cut.len() * 2 / 3], 64, "req-cut"));
    script.push(Reply::Slow {
        delay: Duration::from_millis(1500),
    });
    let server = Server::start(script);
    let a = adapter(&server);
    for (status, kind, message, category) in cases {
        let e = a
            .send_chat(&request("claude-x", json!({})), &call_options())
            .expect_err("error");
        assert_error(&e, category, Some(status), Some(kind), message);
        assert_eq!(e.raw, Some(err(kind, message)));
        assert_eq!(e.request_id.as_deref(), Some("req-x"));
    }
    let stream = |a: &AnthropicAdapter| {
        a.stream_chat(
            &request("claude-x", json!({})),
            &call_options(),
            &mut |_| {},
        )
        .expect_err("a stream error")
    };
    let e = stream(&a);
    assert_error(
        &e,
        "server",
        Some(200),
        Some("overloaded_error"),
        "Overloaded",
    );
    assert_eq!(e.request_id.as_deref(), Some("req-mid"));
    let e = stream(&a);
    assert_error(&e, "network", Some(200), None, "message_stop");
    let quick = AnthropicAdapter::new(
        HttpOptions::new(server.base_url()).timeout(Duration::from_millis(300)),
    );
    assert_eq!(stream(&quick).category, "timeout");
    server.finish();
}

fn conversation(
    engine: &agent_journal::conversation::ConversationEngine,
) -> agent_journal::SessionId {
    engine
        .create_conversation(CreateConversation {
            initial_messages: vec![
                ConversationMessage::system("Be terse."),
                ConversationMessage::user("2+3? 4+5?"),
            ],
            ..Default::default()
        })
        .expect("create")
        .id
}

#[test]
fn anthropic_engine_streamed_turn_with_tools() {
    let server = Server::start(vec![
        Reply::sse(&stream_body("Adding both.", true), 11, "req-t1"),
        Reply::sse(&stream_body("5 and 9.", false), 11, "req-t2"),
    ]);
    let engine = engine(Arc::new(adapter(&server)), "claude-sonnet-4-5", true);
    let id = conversation(&engine);
    let turn = engine.run_turn(id, RunTurn::default()).expect("run_turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    let texts: Vec<_> = turn
        .output_messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::Assistant, "Adding both.".into()),
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
    for (call, rid) in turn.provider_calls.iter().zip(["req-t1", "req-t2"]) {
        assert_eq!(call.provider, "anthropic");
        assert_eq!(call.request_id.as_deref(), Some(rid));
        assert_eq!(call.usage.as_ref().map(|u| u.output_tokens), Some(89));
        assert!(call.outcome.as_ref().is_some_and(|o| o.ok));
        assert_eq!(call.request_metadata["ai.streaming"], true);
    }
    let stored = engine
        .store()
        .get_turn(id, turn.id)
        .expect("get")
        .expect("stored");
    assert_eq!(stored, turn);

    let got = server.finish();
    assert_eq!(got[1].body["system"], "Be terse.");
    let messages = got[1].body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "user, assistant, user with the results");
    // The answer's thinking block goes back first, signature intact (the
    // API requires it in a tool loop with extended thinking).
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "thinking", "thinking": "Two sums.", "signature": "EqQB"})
    );
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "text", "text": "Adding both."})
    );
    assert_eq!(messages[1]["content"][3]["id"], "toolu_s2");
    assert_eq!(messages[1]["content"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        messages[2]["content"][1],
        json!({"type": "tool_result", "tool_use_id": "toolu_s2", "content": "9"})
    );
}

#[test]
fn anthropic_engine_turn_error_keeps_the_provider_body() {
    let body =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = Server::start(vec![Reply::status(529, &body, "req-f1")]);
    let engine = engine(Arc::new(adapter(&server)), "claude-sonnet-4-5", false);
    let id = conversation(&engine);
    let e = engine
        .run_turn(id, RunTurn::default())
        .expect_err("overloaded");
    assert!(
        matches!(&e, Error::TurnFailed { message, .. } if message == "Overloaded"),
        "{e:?}"
    );
    let turns = engine.store().list_turns(id, Page::all()).expect("turns");
    let turn = turns.last().expect("a turn");
    assert_eq!(turn.status, TurnStatus::Failed);
    let error = turn.error.as_ref().expect("error");
    assert_eq!(
        (&error.raw, error.code.as_deref()),
        (&body, Some("overloaded_error"))
    );
    assert_eq!(
        (error.message.as_str(), error.provider.as_deref()),
        ("Overloaded", Some("anthropic"))
    );
    let call = &turn.provider_calls[0];
    assert_eq!(call.request_id.as_deref(), Some("req-f1"));
    let outcome = call.outcome.as_ref().expect("outcome");
    assert_eq!(
        (
            outcome.ok,
            outcome.status,
            outcome.error_category.as_deref()
        ),
        (false, Some(529), Some("server"))
    );
    server.finish();
}
