//! The validators: they reject the inner-messages spec's reconstruction (the
//! bug class they exist for), and each error names the message and the reason.

use serde_json::{Value, json};

use super::helpers::{Conv, check_both, verdict};
use crate::model::ToolStatus;
use crate::provider::validate;

#[test]
fn validators_reject_the_spec_reconstruction() {
    // The conversation: c1 completed, c2 failed (its error result recorded),
    // c3 pending (no result). The spec keeps only completed calls in the
    // assistant message and every tool result.
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let spec = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": [call("c1")]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
    ];
    assert_eq!(
        verdict(validate::openai(&spec)),
        Err("messages[3]: tool result for \"c2\", a call the preceding assistant message (messages[1]) did not make".to_owned())
    );
    // When every call is filtered out, the assistant keeps an empty list.
    let spec = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": []}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
    ];
    assert_eq!(
        verdict(validate::openai(&spec)),
        Err(
            "messages[1]: \"tool_calls\" is an empty array (omit it when there are no calls)"
                .to_owned()
        )
    );
    // Keeping the call but not giving it a result is the other half.
    let unanswered = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c3")]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "user", "content": "continue"}),
    ];
    assert_eq!(
        verdict(validate::openai(&unanswered)),
        Err("messages[1]: tool call \"c3\" has no result (expected a tool message for it before messages[3])".to_owned())
    );
    assert_eq!(
        verdict(validate::openai(&unanswered[..3])),
        Err("messages[1]: tool call \"c3\" has no result (expected a tool message for it before the end of the history)".to_owned())
    );

    // The same bug in the Anthropic shape.
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let orphaned = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("c1")]},
        {"role": "user", "content": [result("c1"), result("c2")]}
    ]});
    assert_eq!(
        verdict(validate::anthropic(&orphaned)),
        Err("messages[2].content[1]: tool_result for \"c2\", which no tool_use of the preceding assistant message made".to_owned())
    );
    let missing = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("c1"), tool_use("c3")]},
        {"role": "user", "content": [result("c1")]}
    ]});
    assert_eq!(
        verdict(validate::anthropic(&missing)),
        Err("messages[1].content[1]: tool_use \"c3\" has no tool_result in the next message (messages[2])".to_owned())
    );

    // Our rebuild of the same conversation passes both.
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed), ("c2", Failed), ("c3", Pending)])
        .tool("c1", "ok")
        .tool("c2", "boom");
    check_both(&c.msgs);
}

#[test]
fn openai_validator_messages() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let asst = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|i| call(i)).collect::<Vec<_>>()});
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
    let user = json!({"role": "user", "content": "hi"});
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![json!(1)],
            "messages[0]: expected an object, found a number",
        ),
        (
            vec![json!({"role": "robot"})],
            "messages[0]: invalid role \"robot\"",
        ),
        (
            vec![json!({"content": "x"})],
            "messages[0]: missing \"role\"",
        ),
        (
            vec![user.clone(), tool("c1")],
            "messages[1]: tool result for \"c1\", which no earlier assistant message called",
        ),
        (
            vec![user.clone(), asst(&["c1"]), tool("c1"), tool("c1")],
            "messages[3]: second result for tool call \"c1\" (the first is messages[2])",
        ),
        (
            vec![user.clone(), asst(&["c1"]), user.clone(), tool("c1")],
            "messages[1]: tool call \"c1\" has no result (expected a tool message for it before messages[2])",
        ),
        (
            vec![
                user.clone(),
                asst(&["c1"]),
                tool("c1"),
                user.clone(),
                tool("c1"),
            ],
            "messages[4]: tool result for \"c1\" does not directly follow its assistant message (messages[1]); only tool messages may come between",
        ),
        (
            vec![asst(&["c1", "c1"])],
            "messages[0].tool_calls[1]: tool call id \"c1\" appears twice in this message (first at tool_calls[0])",
        ),
        (
            vec![json!({"role": "tool", "content": "x"})],
            "messages[0]: a tool message needs a \"tool_call_id\"",
        ),
        (
            vec![
                json!({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
            ],
            "messages[0].tool_calls[0]: missing \"type\": \"function\"",
        ),
    ];
    for (messages, want) in cases {
        let got = verdict(validate::openai(&messages)).expect_err("invalid");
        assert!(
            got.starts_with(want),
            "for {messages:?}:\n  got  {got}\n  want {want}"
        );
    }
    // The Display of the error says what it is.
    let e = validate::openai(&[json!(1)]).expect_err("invalid");
    assert_eq!(
        e.to_string(),
        "invalid input: messages[0]: expected an object, found a number"
    );
    assert_eq!(verdict(validate::openai(&[])), Ok(()));
    assert_eq!(
        verdict(validate::openai(&[
            user.clone(),
            asst(&["a", "b"]),
            tool("b"),
            tool("a"),
            user
        ])),
        Ok(())
    );
}

#[test]
fn anthropic_validator_messages() {
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let user = json!({"role": "user", "content": "hi"});
    let asst = json!({"role": "assistant", "content": "hello"});
    let req = |m: Vec<Value>| json!({"messages": m});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!("x"),
            "expected a request object or a messages array, found a string",
        ),
        (
            json!({"system": 1, "messages": []}),
            "system: must be a string or an array of text blocks, found a number",
        ),
        (json!({}), "missing \"messages\""),
        (
            req(vec![asst.clone()]),
            "messages[0]: the first message must have role \"user\", found \"assistant\"",
        ),
        (
            // Consecutive user messages are one turn: a result after the
            // first one's text comes after other content.
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": "first"}),
                json!({"role": "user", "content": [result("t")]}),
            ]),
            "messages[3].content[0]: tool_result after other content",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "system", "content": "s"}),
            ]),
            "messages[1]: role \"system\" is not allowed in messages",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
            ]),
            "messages[1].content[0]: tool_use \"t\" has no tool_result (no message follows)",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [{"type": "text", "text": "x"}, result("t")]}),
            ]),
            "messages[2].content[1]: tool_result after other content; tool_result blocks must come first in a user message",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t")]}),
                json!({"role": "assistant", "content": [tool_use("t")]}),
            ]),
            "messages[3].content[0]: tool_use id \"t\" is used twice (first at messages[1].content[0])",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t")]}),
                asst.clone(),
                json!({"role": "user", "content": [result("t")]}),
            ]),
            "messages[4].content[0]: tool_result for \"t\" is not in the message right after its tool_use (messages[1].content[0])",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t"), result("t")]}),
            ]),
            "messages[2].content[1]: second tool_result for tool_use \"t\"",
        ),
        (
            req(vec![json!({"role": "user", "content": [result("t")]})]),
            "messages[0].content[0]: tool_result for \"t\", which no tool_use of the preceding assistant message made",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [result("t")]}),
            ]),
            "messages[1].content[0]: tool_result in an assistant message",
        ),
    ];
    // What the API accepts: consecutive messages of one role make one turn.
    let consecutive = req(vec![
        user.clone(),
        user.clone(),
        json!({"role": "assistant", "content": [tool_use("t")]}),
        json!({"role": "user", "content": [result("t")]}),
        json!({"role": "user", "content": "and then"}),
    ]);
    validate::anthropic(&consecutive).expect("consecutive user messages are one turn");
    for (request, want) in cases {
        let got = verdict(validate::anthropic(&request)).expect_err("invalid");
        assert!(
            got.starts_with(want),
            "for {request}:\n  got  {got}\n  want {want}"
        );
    }
    // The Display of the error says what it is.
    let e = validate::anthropic(&json!({})).expect_err("invalid");
    assert_eq!(e.to_string(), "invalid input: missing \"messages\"");
    assert_eq!(
        verdict(validate::anthropic(&json!({"messages": []}))),
        Ok(())
    );
    assert_eq!(verdict(validate::anthropic(&json!([user, asst]))), Ok(()));
}
