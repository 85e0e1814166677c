//! WINK's own names: the document WINK's `Snapshot.from_json` reads, and
//! reading what WINK writes of the specs' items.
//!
//! Writing renames the messages and adapter states to the specs' types,
//! builds the conversation-state spec's `ConversationState` items (messages
//! embedded), and moves every slice the specs do not define into two tags,
//! as JSON text, so that a document that went through WINK and back still
//! holds the whole state. Reading undoes that; a document WINK wrote from
//! its own items has no such tags, and becomes the fold of its messages.

use std::collections::HashMap;

use uuid::Uuid;

use super::items::{ADAPTER_STATES, MESSAGES, TsItem, slice, to_value, val};
use crate::model::InnerMessage;
use crate::snapshot::JsonOptions;
use crate::state::ConversationView;
use crate::state::{SessionState, SlicePolicy};
use serde_json::{Map, Value};

/// The specs' modules of their types.
const INNER_MESSAGES_MODULE: &str = "weakincentives.runtime.inner_messages";
const CONVERSATION_MODULE: &str = "weakincentives.runtime.conversation";
const ADAPTER_STATE_MODULE: &str = "weakincentives.runtime.adapter_state";

/// The tag holding the slices the specs have no type for (JSON text of the
/// crate's slice entries), and the tag holding their policies.
pub(super) const SLICES_TAG: &str = "agent_journal.slices";
pub(super) const POLICIES_TAG: &str = "agent_journal.policies";

/// The session label mapping derived evaluation UUIDs back to the
/// evaluation ids a WINK document gave (JSON object, UUID to original).
pub(super) const EVALUATION_IDS_LABEL: &str = "agent_journal.wink_evaluation_ids";

/// The session label keeping the slices of a WINK document that are not
/// the specs' (JSON object: `slices`, the entries as WINK wrote them, and
/// `policies`), so that a WINK export writes them back.
pub(super) const OTHER_SLICES_LABEL: &str = "agent_journal.wink_slices";

/// The extra field of a tool-call record whose status WINK cannot say
/// (`started`, written `pending` for WINK).
pub(super) const JOURNAL_STATUS: &str = "journal_status";

/// The extra field of an adapter state holding the state's JSON text when
/// the object written beside it would not give the same text back.
pub(super) const JOURNAL_STATE: &str = "journal_state";

/// The namespace of evaluation and snapshot ids derived from WINK's strings.
pub(super) const DERIVED: Uuid = Uuid::from_u128(0x6a6f_7572_6e61_6c2d_7769_6e6b_2d69_6473);

struct Names {
    messages: String,
    conversation: String,
    adapter_states: String,
}

impl Names {
    fn new(module: Option<&str>) -> Self {
        let name = |default: &str, ty: &str| format!("{}:{ty}", module.unwrap_or(default));
        Self {
            messages: name(INNER_MESSAGES_MODULE, "InnerMessage"),
            conversation: name(CONVERSATION_MODULE, "ConversationState"),
            adapter_states: name(ADAPTER_STATE_MODULE, "AdapterStateSnapshot"),
        }
    }
}

/// The original evaluation ids of a session imported from WINK, by UUID.
fn original_ids(labels: &[(String, String)]) -> HashMap<String, String> {
    labels
        .iter()
        .rev()
        .find(|(k, _)| k == EVALUATION_IDS_LABEL)
        .and_then(|(_, v)| serde_json::from_str::<HashMap<String, String>>(v).ok())
        .unwrap_or_default()
        .into_iter()
        // Only ids reading derives the same UUID from: a label that says
        // otherwise would not read back.
        .filter(|(uuid, original)| *uuid == derived_uuid(original).to_string())
        .collect()
}

/// The UUID reading gives a WINK `evaluation_id` that is not one (v5).
pub(super) fn derived_uuid(original: &str) -> Uuid {
    Uuid::new_v5(&DERIVED, original.as_bytes())
}

/// Whether a slice type is one of the specs' (in any module).
pub(super) fn is_spec_type(ty: &str) -> bool {
    [
        ":InnerMessage",
        ":ConversationState",
        ":AdapterStateSnapshot",
    ]
    .iter()
    .any(|s| ty.ends_with(s))
}

fn rename_eval(v: &mut Value, ids: &HashMap<String, String>) {
    if let Some(Value::String(id)) = v.get_mut("evaluation_id")
        && let Some(original) = ids.get(id.as_str())
    {
        *id = original.clone();
    }
}

fn wink_message(mut v: Value, m: Option<&InnerMessage>, ids: &HashMap<String, String>) -> Value {
    rename_eval(&mut v, ids);
    if let Some(Value::Array(calls)) = v.get_mut("tool_calls") {
        for (k, call) in calls.iter_mut().enumerate() {
            let record = m.and_then(|m| m.tool_calls.get(k));
            let started = call["status"] == "started"
                || record.is_some_and(|r| r.status == crate::model::ToolStatus::Started);
            if started {
                call["status"] = Value::String("pending".into());
                call[JOURNAL_STATUS] = Value::String("started".into());
            }
        }
    }
    v
}

fn wink_adapter_state(mut v: Value, ids: &HashMap<String, String>) -> Value {
    rename_eval(&mut v, ids);
    if v["evaluation_id"].is_null() {
        v["evaluation_id"] = Value::String(String::new());
    }
    if let Some(Value::String(text)) = v.get("state")
        && let Ok(state @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        // The object loses the text's key order and spacing: the text
        // stays beside it, used on reading while the object is unchanged.
        if state.to_string().as_str() != text.as_str() {
            v[JOURNAL_STATE] = Value::String(text.clone());
        }
        v["state"] = state;
    }
    v
}

/// The conversation-state spec's `ConversationMessage`.
fn conversation_message(m: &InnerMessage) -> Value {
    let calls: Vec<Value> = m
        .tool_calls
        .iter()
        .map(
            |c| serde_json::json!({"call_id": c.call_id, "name": c.name, "arguments": c.arguments}),
        )
        .collect();
    serde_json::json!({
        "role": m.role,
        "content": m.content,
        "tool_calls": calls,
        "tool_call_id": m.tool_call_id,
        "name": m.tool_name,
        "created_at": val(&TsItem(m.created_at)),
        "message_id": m.message_id,
    })
}

/// The conversation-state spec's `ConversationState` of one evaluation; the
/// spec requires a system message and an assistant message per turn, so an
/// evaluation without a system message has none and a turn without its
/// assistant message is left out (the messages are in the message slice).
fn conversation_state(v: &ConversationView<'_>, eval_id: &str) -> Option<Value> {
    let system = v.system_message?;
    let turns: Vec<Value> = v
        .turns
        .iter()
        .filter_map(|t| {
            let assistant = t.assistant_message?;
            let payload = t
                .provider_payload
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .filter(Value::is_object)
                .unwrap_or(Value::Null);
            Some(serde_json::json!({
                "turn_number": t.turn_number,
                "assistant_message": conversation_message(assistant),
                "tool_messages": t.tool_messages.iter().map(|m| conversation_message(m)).collect::<Vec<_>>(),
                "provider_payload": payload,
                "evaluation_id": eval_id,
                "created_at": val(&TsItem(assistant.created_at)),
            }))
        })
        .collect();
    Some(serde_json::json!({
        "evaluation_id": eval_id,
        "prompt_ns": v.prompt_ns,
        "prompt_key": v.prompt_key,
        "system_message": conversation_message(system),
        "turns": turns,
        "created_at": val(&TsItem(v.created_at.unwrap_or(system.created_at))),
        "state_id": v.state_id,
    }))
}

fn wink_slice(name: &str, items: Vec<Value>) -> Value {
    slice(name, items)
}

/// The document under the specs' names (see [`SliceNames::Wink`](crate::state::SliceNames::Wink)).
pub(super) fn to_wink_value(s: &SessionState, opts: &JsonOptions, module: Option<&str>) -> Value {
    let names = Names::new(module);
    let ids = original_ids(&s.labels);
    let mut doc = to_value(s, opts);
    let Some(obj) = doc.as_object_mut() else {
        return doc;
    };
    let mut slices = Vec::new();
    let mut kept = Vec::new();
    if let Some(Value::Array(all)) = obj.remove("slices") {
        for mut entry in all {
            let items = match entry.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            match entry["slice_type"].as_str() {
                Some(MESSAGES) => {
                    let mut held = s.messages.iter();
                    let items = items
                        .into_iter()
                        .map(|v| wink_message(v, held.next(), &ids));
                    slices.push(wink_slice(&names.messages, items.collect()));
                }
                Some(ADAPTER_STATES) => {
                    let items = items.into_iter().map(|a| wink_adapter_state(a, &ids));
                    slices.push(wink_slice(&names.adapter_states, items.collect()));
                }
                _ => {
                    entry["items"] = Value::Array(items);
                    kept.push(entry);
                }
            }
        }
    }
    let conversation: Vec<Value> = s
        .messages
        .evaluations()
        .filter_map(|eval| {
            let view = s.conversation_view(eval)?;
            let id = eval.to_string();
            conversation_state(&view, ids.get(&id).map_or(&id, |o| o))
        })
        .collect();
    slices.push(wink_slice(&names.conversation, conversation));
    let others = s
        .labels
        .iter()
        .rev()
        .find(|(k, _)| k == OTHER_SLICES_LABEL)
        .and_then(|(_, v)| serde_json::from_str::<Value>(v).ok());
    let mut other_policies = Map::new();
    if let Some(Value::Object(mut o)) = others {
        if let Some(Value::Array(entries)) = o.remove("slices") {
            let other = |e: &Value| {
                e.get("slice_type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !is_spec_type(t) && !t.starts_with("agent_journal:"))
            };
            // All or none: a label some of whose entries could not be read
            // back as other slices is not one this crate wrote; it stays a
            // label (in the crate's slices) and nothing is added.
            if entries.iter().all(other) {
                slices.extend(entries);
            }
        }
        if let Some(Value::Object(p)) = o.remove("policies") {
            other_policies = p;
        }
    }
    // WINK writes its slices sorted by type name.
    slices.sort_by(|a, b| a["slice_type"].as_str().cmp(&b["slice_type"].as_str()));
    let mut policies = match obj.remove("policies") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    policies.remove(MESSAGES);
    policies.remove(ADAPTER_STATES);
    let mut wink_policies = other_policies;
    let state = || Value::String(SlicePolicy::State.as_str().into());
    wink_policies.insert(names.messages.clone(), state());
    wink_policies.insert(names.conversation.clone(), state());
    // As WINK does, no empty slice: a reader needs the module of each type
    // written, and a session without adapter states or conversation needs
    // none for them.
    slices.retain(|e| {
        e["items"].as_array().is_some_and(|i| !i.is_empty()) || e["slice_type"] == names.messages
    });
    let written = |name: &str| slices.iter().any(|e| e["slice_type"] == name);
    if written(&names.adapter_states) {
        let log = Value::String(SlicePolicy::Log.as_str().into());
        wink_policies.insert(names.adapter_states.clone(), log);
    }
    if !written(&names.conversation) {
        wink_policies.remove(&names.conversation);
    }
    let mut tags = match obj.remove("tags") {
        Some(Value::Object(t)) => t,
        _ => Map::new(),
    };
    tags.insert(
        SLICES_TAG.into(),
        Value::String(Value::Array(kept).to_string()),
    );
    tags.insert(
        POLICIES_TAG.into(),
        Value::String(Value::Object(policies).to_string()),
    );
    obj.insert("slices".into(), Value::Array(slices));
    obj.insert("policies".into(), Value::Object(wink_policies));
    obj.insert("tags".into(), Value::Object(tags));
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_module() {
        let n = Names::new(None);
        assert_eq!(
            n.messages,
            "weakincentives.runtime.inner_messages:InnerMessage"
        );
        assert_eq!(
            n.conversation,
            "weakincentives.runtime.conversation:ConversationState"
        );
        let n = Names::new(Some("my.mod"));
        assert_eq!(n.adapter_states, "my.mod:AdapterStateSnapshot");
    }
}
