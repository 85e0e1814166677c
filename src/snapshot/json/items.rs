//! The items of a JSON snapshot (their structs, the crate's slice names)
//! and the document written under those names.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::AdapterStateSnapshot;
use crate::model::{EvaluationId, InnerMessage, MessageId, SessionId, now};
use crate::snapshot::JsonOptions;
use crate::state::conversation::view;
use crate::state::{Messages, SessionState, SlicePolicy, ToolCalls, TurnView};

pub(super) const MESSAGES: &str = "agent_journal:InnerMessage";
pub(super) const TOOL_CALLS: &str = "agent_journal:ToolCall";
pub(super) const EVALUATIONS: &str = "agent_journal:Evaluation";
pub(super) const CONVERSATION: &str = "agent_journal:ConversationState";
pub(super) const ADAPTER_STATES: &str = "agent_journal:AdapterStateSnapshot";
pub(super) const USAGE: &str = "agent_journal:Usage";
pub(super) const SESSION_INFO: &str = "agent_journal:SessionInfo";

/// The built-in slice types and their policies, in document order.
/// The conversation engine's records: in a document only when the session
/// holds a conversation, so older readers' documents lack it.
pub(super) const CONVERSATION_LOG: &str = "agent_journal:ConversationLog";

pub(super) const BUILT_INS: [(&str, SlicePolicy); 7] = [
    (MESSAGES, SlicePolicy::State),
    (TOOL_CALLS, SlicePolicy::State),
    (EVALUATIONS, SlicePolicy::State),
    (CONVERSATION, SlicePolicy::State),
    (ADAPTER_STATES, SlicePolicy::Log),
    (USAGE, SlicePolicy::State),
    (SESSION_INFO, SlicePolicy::State),
];

pub(super) const TOP_KEYS: [&str; 7] = [
    "children_ids",
    "created_at",
    "parent_id",
    "policies",
    "slices",
    "tags",
    "version",
];

#[derive(Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct TurnItem {
    pub(super) turn_number: u32,
    pub(super) assistant_message_id: Option<MessageId>,
    pub(super) tool_message_ids: Vec<MessageId>,
}

#[derive(Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(super) struct ConversationItem {
    pub(super) evaluation_id: EvaluationId,
    pub(super) system_message_id: Option<MessageId>,
    pub(super) user_message_ids: Vec<MessageId>,
    pub(super) turns: Vec<TurnItem>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdapterStateItem {
    pub(super) snapshot_id: uuid::Uuid,
    pub(super) adapter_type: String,
    pub(super) state: String,
    pub(super) resumable: bool,
    #[serde(with = "crate::model::ts")]
    pub(super) captured_at: DateTime<Utc>,
    pub(super) evaluation_id: Option<EvaluationId>,
    pub(super) supersedes: Option<uuid::Uuid>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TokenUsageItem {
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cache_read_tokens: u64,
    pub(super) cache_write_tokens: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageItem {
    pub(super) evaluation_id: EvaluationId,
    pub(super) usage: TokenUsageItem,
    pub(super) provider_calls: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ForkItem {
    pub(super) parent: SessionId,
    pub(super) at: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionInfoItem {
    pub(super) labels: Vec<(String, String)>,
    pub(super) forked_from: Option<ForkItem>,
    pub(super) last_seq: Option<u64>,
    pub(super) events_applied: u64,
}

pub(super) fn val<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or_else(|e| Value::String(format!("unserializable: {e}")))
}

/// A message as WINK reads it: `Started` (ours, not the spec's) is written
/// `"pending"` in its tool calls, as design.md says, where the `ToolCall`
/// items keep `"started"` for the call (reading gives it back to the
/// message); elsewhere it stays `"started"`, so nothing is lost.
pub(super) fn message_item(m: &InnerMessage, calls: &ToolCalls) -> Value {
    let mut v = val(m);
    if let Some(Value::Array(items)) = v.get_mut("tool_calls") {
        for (item, record) in items.iter_mut().zip(&m.tool_calls) {
            let kept = calls
                .get(m.evaluation_id, &record.call_id)
                .is_some_and(|c| c.status == crate::model::ToolStatus::Started);
            if record.status == crate::model::ToolStatus::Started && kept {
                item["status"] = Value::String("pending".into());
            }
        }
    }
    v
}

/// The conversation-state slice's items: each evaluation's conversation,
/// read from `messages`.
pub(super) fn conversation_items(messages: &Messages) -> Vec<ConversationItem> {
    messages
        .evaluations()
        .filter_map(|eval| view(eval, messages))
        .map(|v| ConversationItem {
            evaluation_id: v.evaluation_id,
            system_message_id: v.system_message.map(|m| m.message_id),
            user_message_ids: v.user_messages.iter().map(|m| m.message_id).collect(),
            turns: v.turns.iter().map(turn_item).collect(),
        })
        .collect()
}

pub(super) fn turn_item(t: &TurnView<'_>) -> TurnItem {
    TurnItem {
        turn_number: t.turn_number,
        assistant_message_id: t.assistant_message.map(|m| m.message_id),
        tool_message_ids: t.tool_messages.iter().map(|m| m.message_id).collect(),
    }
}

pub(super) fn adapter_item(a: &AdapterStateSnapshot) -> AdapterStateItem {
    AdapterStateItem {
        snapshot_id: a.snapshot_id,
        adapter_type: a.adapter_type.clone(),
        state: a.state.clone(),
        resumable: a.resumable,
        captured_at: a.captured_at,
        evaluation_id: a.evaluation_id,
        supersedes: a.supersedes,
    }
}

pub(super) fn slice(slice_type: &str, items: Vec<Value>) -> Value {
    let mut m = Map::new();
    m.insert("item_type".into(), Value::String(slice_type.into()));
    m.insert("items".into(), Value::Array(items));
    m.insert("slice_type".into(), Value::String(slice_type.into()));
    Value::Object(m)
}

/// The document as a JSON value (keys sorted by serde_json's `Map`).
pub(super) fn to_value(s: &SessionState, opts: &JsonOptions) -> Value {
    let mut slices = vec![
        slice(
            MESSAGES,
            s.messages
                .iter()
                .map(|m| message_item(m, &s.tool_calls))
                .collect(),
        ),
        slice(TOOL_CALLS, s.tool_calls.iter().map(val).collect()),
        slice(EVALUATIONS, s.evaluations.iter().map(val).collect()),
        slice(
            CONVERSATION,
            conversation_items(&s.messages).iter().map(val).collect(),
        ),
    ];
    // A LOG slice, but always written: the specs' recovery flow (restore
    // the checkpoint, find the adapter state, resume with it) needs it in
    // a checkpoint written with the defaults.
    let items = s.adapter_states.iter().map(|a| val(&adapter_item(a)));
    slices.push(slice(ADAPTER_STATES, items.collect()));
    let usage = s.usage.iter().map(|(eval, t)| {
        val(&UsageItem {
            evaluation_id: eval,
            usage: TokenUsageItem {
                input_tokens: t.usage.input_tokens,
                output_tokens: t.usage.output_tokens,
                cache_read_tokens: t.usage.cache_read_tokens,
                cache_write_tokens: t.usage.cache_write_tokens,
            },
            provider_calls: t.provider_calls,
        })
    });
    slices.push(slice(USAGE, usage.collect()));
    let info = SessionInfoItem {
        labels: s.labels.clone(),
        forked_from: s.forked_from.map(|(parent, at)| ForkItem { parent, at }),
        last_seq: s.last_seq,
        events_applied: s.events_applied,
    };
    slices.push(slice(SESSION_INFO, vec![val(&info)]));
    let mut policies = Map::new();
    if !s.conversations.is_empty() {
        slices.push(slice(CONVERSATION_LOG, vec![val(&s.conversations)]));
        policies.insert(
            CONVERSATION_LOG.into(),
            Value::String(SlicePolicy::State.as_str().into()),
        );
    }
    for (name, policy) in BUILT_INS {
        if policy == SlicePolicy::State || name == ADAPTER_STATES || opts.include_logs {
            policies.insert(name.into(), Value::String(policy.as_str().into()));
        }
    }
    for a in &s.app {
        if a.policy() == SlicePolicy::Log && !opts.include_logs {
            continue;
        }
        let items = a.to_json().map(|v| vec![v]).unwrap_or_default();
        slices.push(slice(a.name(), items));
        policies.insert(a.name().into(), Value::String(a.policy().as_str().into()));
    }
    let tags: Map<String, Value> = opts
        .tags
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let created_at = opts.created_at.unwrap_or_else(now);
    let parent = opts.parent_id.or(s.forked_from.map(|(p, _)| p));
    let mut doc = Map::new();
    doc.insert("children_ids".into(), Value::Array(Vec::new()));
    doc.insert("created_at".into(), val(&TsItem(created_at)));
    doc.insert(
        "parent_id".into(),
        parent.map_or(Value::Null, |p| Value::String(p.to_string())),
    );
    doc.insert("policies".into(), Value::Object(policies));
    doc.insert("slices".into(), Value::Array(slices));
    doc.insert("tags".into(), Value::Object(tags));
    doc.insert("version".into(), Value::String("1".into()));
    Value::Object(doc)
}

#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct TsItem(#[serde(with = "crate::model::ts")] pub(super) DateTime<Utc>);
