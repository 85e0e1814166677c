//! The pure parts of the adapters: request bodies for unusual histories,
//! stream parsing wherever the bytes are cut, streamed and plain results
//! agreeing, and hostile bodies giving typed errors.

use agent_journal::TokenUsage;
use agent_journal::ToolCallRecord;
use agent_journal::conversation::http::{
    AnthropicStream, OpenAiStream, anthropic_request_body, openai_request_body,
    parse_anthropic_error, parse_anthropic_response, parse_anthropic_stream, parse_openai_error,
    parse_openai_response, parse_openai_stream,
};
use agent_journal::conversation::{
    ChatInputMessage, ConversationMessage, Metadata, ProviderChatRequest, ProviderChatResult,
    ProviderError,
};
use serde_json::{Value, json};

/// What a result says, without the message's fresh id and time.
type Key = (
    String,
    Vec<(String, String, String)>,
    Option<TokenUsage>,
    Metadata,
    Option<Value>,
);

fn key(r: &ProviderChatResult) -> Key {
    let m = &r.messages[0];
    let calls = m
        .tool_calls
        .iter()
        .map(|c| (c.call_id.to_string(), c.name.clone(), c.arguments.clone()))
        .collect();
    (
        m.text(),
        calls,
        r.usage.clone(),
        r.response_metadata.clone(),
        r.raw.clone(),
    )
}

type Parse = fn(&[u8]) -> Result<ProviderChatResult, ProviderError>;

fn openai_in_two(a: &[u8], b: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let mut s = OpenAiStream::new();
    s.push(a, &mut |_| {})?;
    s.push(b, &mut |_| {})?;
    s.finish(&mut |_| {})
}

fn anthropic_in_two(a: &[u8], b: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let mut s = AnthropicStream::new();
    s.push(a, &mut |_| {})?;
    s.push(b, &mut |_| {})?;
    s.finish(&mut |_| {})
}

#[test]
fn streams_parse_the_same_wherever_they_are_cut() {
    type InTwo = fn(&[u8], &[u8]) -> Result<ProviderChatResult, ProviderError>;
    let cases: [(String, Parse, InTwo, Parse); 2] = [
        (
            super::openai::stream_body(),
            parse_openai_stream,
            openai_in_two,
            parse_openai_response,
        ),
        (
            super::anthropic::stream_body("Adding both.", true),
            parse_anthropic_stream,
            anthropic_in_two,
            parse_anthropic_response,
        ),
    ];
    for (body, whole, in_two, plain) in cases {
        let bytes = body.as_bytes();
        let expected = key(&whole(bytes).expect("whole"));
        for cut in 0..=bytes.len() {
            let got = in_two(&bytes[..cut], &bytes[cut..]).expect("cut");
            assert_eq!(key(&got), expected, "cut at {cut}");
        }
        // The assembled raw, read as a plain body, says the same.
        let raw = expected.4.clone().expect("raw");
        let again = plain(raw.to_string().as_bytes()).expect("plain");
        assert_eq!(key(&again), expected);
    }
}

#[test]
fn hostile_bodies_give_typed_errors() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let huge_index = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":18446744073709551615,",
        "\"id\":\"c\",\"function\":{\"name\":\"x\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}],",
        "\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":1e300,\"total_tokens\":18446744073709551615}}\n\n",
        "data: [DONE]\n\n",
    );
    let bodies: Vec<&[u8]> = vec![
        b"",
        b"\xff\xfe\xfd",
        b"null",
        b"[]",
        b"{}",
        b"{\"choices\": 5}",
        b"{\"choices\": [{\"message\": {\"content\": 7}}]}",
        b"{\"choices\": [{\"message\": {\"tool_calls\": [{\"function\": {}}]}}]}",
        b"{\"content\": [{\"type\": \"tool_use\", \"input\": 1}]}",
        b"{\"content\": \"x\"}",
        b"{\"n\": 1e999}",
        deep.as_bytes(),
        b"data: {\"choices\": [",
        b"data: [DONE]\n\n",
        b"event: content_block_delta\ndata: {\"index\": 9, \"delta\": {}}\n\n",
        b"data: {\"type\":\"message_start\"}\n\n",
        b"data: \xff\n\ndata: [DONE]\n\n",
        huge_index.as_bytes(),
    ];
    let parsers: [Parse; 4] = [
        parse_openai_response,
        parse_openai_stream,
        parse_anthropic_response,
        parse_anthropic_stream,
    ];
    for body in &bodies {
        for parse in parsers {
            if let Err(e) = parse(body) {
                assert!(
                    ["parse", "network", "server"].contains(&e.category.as_str()),
                    "{e:?}"
                );
            }
        }
    }
    let r = parse_openai_stream(huge_index.as_bytes()).expect("a huge index is only a key");
    assert_eq!(r.messages[0].tool_calls.len(), 1);
    let usage = r.usage.expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (0, 0),
        "not counts: 0"
    );
    assert_eq!(usage.total_tokens, Some(u64::MAX));
    let e = parse_openai_response(b"{\"id\": ").expect_err("cut");
    assert_eq!(
        (e.category.as_str(), e.raw),
        ("parse", Some(json!("{\"id\": ")))
    );
}

#[test]
fn error_bodies_of_every_shape() {
    let e = parse_openai_error(502, b"");
    assert_eq!(
        (e.category.as_str(), e.message.as_str(), e.raw),
        ("server", "HTTP 502", None)
    );
    let vllm =
        json!({"object": "error", "message": "bad model", "type": "BadRequestError", "code": 400});
    let e = parse_openai_error(400, vllm.to_string().as_bytes());
    assert_eq!(
        (e.message.as_str(), e.code.as_deref()),
        ("bad model", Some("400"))
    );
    let e = parse_openai_error(404, b"{\"error\": \"model 'x' not found\"}");
    assert_eq!(
        (e.category.as_str(), e.message.as_str()),
        ("client", "model 'x' not found")
    );
    let e = parse_anthropic_error(403, b"\xff not json");
    assert_eq!((e.category.as_str(), e.status), ("auth", Some(403)));
    assert_eq!(e.raw, Some(json!("\u{fffd} not json")));
    let e = parse_anthropic_response(
        br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
    )
    .expect_err("an error body");
    assert_eq!(
        (e.category.as_str(), e.code.as_deref()),
        ("rate_limit", Some("rate_limit_error"))
    );
}

fn chat(messages: Vec<ConversationMessage>) -> ProviderChatRequest {
    ProviderChatRequest {
        messages: messages.iter().map(ChatInputMessage::from).collect(),
        model: "m".into(),
        parameters: Metadata::new(),
        tools: Vec::new(),
    }
}

#[test]
fn request_bodies_of_unusual_histories() {
    let mut first = ConversationMessage::assistant("Hello.");
    first.tool_calls = vec![
        ToolCallRecord::new("t1", "f", "not json"),
        ToolCallRecord::new("t2", "f", ""),
    ];
    let mut parts = ConversationMessage::json(
        agent_journal::Role::User,
        json!([{"type": "text", "text": "see"}, {"type": "image", "source": {"type": "url", "url": "u"}}]),
    );
    parts.name = Some("Alice Smith".into());
    let request = chat(vec![first, parts, ConversationMessage::user("")]);

    let body = anthropic_request_body(&request, false);
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": "[conversation start]"})
    );
    let uses = &body["messages"][1]["content"];
    assert_eq!(uses[1]["input"], json!({"arguments": "not json"}));
    assert_eq!(uses[2]["input"], json!({}));
    assert_eq!(
        body["messages"][2]["content"][1]["type"], "image",
        "blocks pass through"
    );
    assert_eq!(
        body["messages"].as_array().map(Vec::len),
        Some(3),
        "the empty user text merged away"
    );
    assert!(body.get("system").is_none() && body.get("tools").is_none());

    let body = openai_request_body(&request, true);
    let user = &body["messages"][1];
    assert!(
        user["content"].is_array() && user.get("name").is_none(),
        "{user}"
    );
    assert_eq!(body["messages"][0]["content"], "Hello.");
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn a_blank_error_message_is_replaced_by_what_is_known() {
    // Found by the adapter_openai fuzz target: `{"error":""}`.
    let e = parse_openai_error(400, br#"{"error":""}"#);
    assert!(!e.message.trim().is_empty(), "{e:?}");
    assert!(e.message.contains("HTTP 400"), "{}", e.message);
    let e = parse_openai_response(br#"{"error":""}"#).expect_err("an error");
    assert!(!e.message.trim().is_empty(), "{e:?}");
    let e = parse_anthropic_error(
        529,
        br#"{"type":"error","error":{"type":"overloaded_error","message":"  "}}"#,
    );
    assert!(!e.message.trim().is_empty(), "{e:?}");
}
