//! The resume rule: every rebuilt history is valid (synthetic results,
//! dropped duplicates and orphans, results moved before a user message,
//! alternating Anthropic roles, reused call ids, non-object arguments).

use serde_json::{Value, json};

use super::helpers::{Conv, check_both};
use crate::model::INTERRUPTED_RESULT;
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};
use crate::provider::{anthropic, openai};

#[test]
fn unfinished_calls_get_a_synthetic_result_and_every_call_is_kept() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.system("sys")
        .user("go")
        .assistant(
            "",
            &[
                ("c1", Completed),
                ("c2", Failed),
                ("c3", Started),
                ("c4", Pending),
            ],
        )
        .tool("c1", "one")
        .tool("c2", "boom");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(o[2]["tool_calls"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        o[3..].to_vec(),
        vec![
            json!({"role": "tool", "tool_call_id": "c1", "content": "one"}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
            json!({"role": "tool", "tool_call_id": "c3", "content": INTERRUPTED_RESULT}),
            json!({"role": "tool", "tool_call_id": "c4", "content": INTERRUPTED_RESULT}),
        ]
    );
    assert_eq!(
        a["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": true},
            {"type": "tool_result", "tool_use_id": "c3", "content": INTERRUPTED_RESULT, "is_error": true},
            {"type": "tool_result", "tool_use_id": "c4", "content": INTERRUPTED_RESULT, "is_error": true},
        ]})
    );
    assert_eq!(a["messages"][1]["content"][0]["input"], json!({"x": 1}));
}

#[test]
fn duplicate_orphan_and_late_results_are_dropped() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.tool("c0", "orphan before any call")
        .user("go")
        .assistant("a1", &[("c1", Completed), ("c2", Completed)])
        .tool("c1", "first")
        .tool("c1", "second")
        .tool("zz", "orphan")
        .assistant("a2", &[("c3", Completed)])
        .tool("c2", "late")
        .tool("c3", "three");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(
        Value::Array(o),
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "a1", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "tool_c1", "arguments": "{\"x\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "tool_c2", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "first"},
            {"role": "tool", "tool_call_id": "c2", "content": INTERRUPTED_RESULT},
            {"role": "assistant", "content": "a2", "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "tool_c3", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c3", "content": "three"}
        ])
    );
    assert_eq!(a["messages"].as_array().map(Vec::len), Some(5));
}

#[test]
fn results_move_before_a_user_message_that_came_between() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed)])
        .user("hurry up")
        .system("late system note")
        .tool("c1", "done");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(
        o[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "done"})
    );
    assert_eq!(o[3], json!({"role": "user", "content": "hurry up"}));
    assert_eq!(
        o[4],
        json!({"role": "system", "content": "late system note"})
    );
    assert_eq!(a["system"], "late system note");
    assert_eq!(
        a["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "c1", "content": "done"},
            {"type": "text", "text": "hurry up"}
        ])
    );
}

#[test]
fn anthropic_roles_alternate_whatever_the_history() {
    let mut c = Conv::new();
    c.system("one")
        .assistant("first", &[])
        .assistant("second", &[])
        .system("two");
    let (_, a) = check_both(&c.msgs);
    assert_eq!(
        a,
        json!({
            "system": "one\n\ntwo",
            "messages": [
                {"role": "user", "content": anthropic::LEADING_USER_TEXT},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "first"},
                    {"type": "text", "text": "second"}
                ]}
            ]
        })
    );
    assert_eq!(anthropic::to_request(&[]), json!({"messages": []}));
    assert_eq!(openai::to_messages(&[]), Vec::<Value>::new());
}

#[test]
fn a_reused_call_id_is_dropped_from_the_later_message() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed)])
        .tool("c1", "one")
        .assistant("", &[("c1", Completed), ("c2", Completed)])
        .tool("c1", "again")
        .tool("c2", "two");
    let (o, _) = check_both(&c.msgs);
    assert_eq!(o[3]["tool_calls"].as_array().map(Vec::len), Some(1));
    assert_eq!(o[3]["tool_calls"][0]["id"], "c2");
    assert_eq!(o.len(), 5);
}

#[test]
fn arguments_that_are_not_an_object_still_make_a_valid_tool_use() {
    let eval = EvaluationId::new();
    let mut asst = InnerMessage::new(Role::Assistant, "", eval, 1);
    asst.tool_calls = vec![
        ToolCallRecord::new("a", "f", ""),
        ToolCallRecord::new("b", "f", "not json"),
        ToolCallRecord::new("c", "f", "[1,2]"),
    ];
    let (_, a) = check_both(&[InnerMessage::new(Role::User, "go", eval, 0), asst]);
    let content = &a["messages"][1]["content"];
    assert_eq!(content[0]["input"], json!({}));
    assert_eq!(content[1]["input"], json!({"arguments": "not json"}));
    assert_eq!(content[2]["input"], json!({"arguments": "[1,2]"}));
}
