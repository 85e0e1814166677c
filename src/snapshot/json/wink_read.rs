//! Reading a document under the specs' names: one this crate wrote (its
//! tags give back the whole state), or one WINK wrote from the specs' items
//! (the fold of its messages).

use std::collections::HashMap;

use uuid::Uuid;

use super::check::{Found, err, micros};
use super::items::{ADAPTER_STATES, MESSAGES, slice};
use super::wink::{
    DERIVED, EVALUATION_IDS_LABEL, JOURNAL_STATE, JOURNAL_STATUS, OTHER_SLICES_LABEL, POLICIES_TAG,
    SLICES_TAG, derived_uuid, is_spec_type,
};
use crate::error::Result;
use crate::event::{Envelope, Event};
use crate::model::{CallId, EvaluationId, InnerMessage, SessionId, ToolStatus, now};
use crate::provider::read::kind;
use crate::state::{SessionState, SlicePolicy, SliceRegistry};
use serde_json::{Map, Value};

/// What reading a document under the specs' names gives.
pub(super) enum Wink {
    /// A document this crate wrote: the same document under the crate's
    /// names, to be read as such.
    Journal(Value),
    /// A document WINK wrote from the specs' items: the events whose fold is
    /// its state.
    Native(Vec<Event>),
}

/// Whether `doc` names its slices as the specs do: the crate's tags are
/// there, or a slice whose type is a spec's type outside the crate's module.
pub(super) fn is_wink(doc: &Map<String, Value>) -> bool {
    let tagged = doc
        .get("tags")
        .and_then(Value::as_object)
        .is_some_and(|t| t.contains_key(SLICES_TAG));
    let types = || {
        doc.get("slices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("slice_type").and_then(Value::as_str))
    };
    if types().any(|t| t == MESSAGES) {
        return false;
    }
    let spec_slice = |t: &str| !t.starts_with("agent_journal:") && is_spec_type(t);
    tagged || types().any(spec_slice)
}

fn text_tag<'a>(tags: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match tags.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(err(format!(
            "tags.{key}: expected a string, found {}",
            kind(v)
        ))),
    }
}

/// Reads the spec-named slices of `doc` (see [`Wink`]).
pub(super) fn from_wink(mut doc: Map<String, Value>) -> Result<Wink> {
    let mut tags = match doc.remove("tags") {
        Some(Value::Object(t)) => t,
        Some(v) => return Err(err(format!("tags: expected an object, found {}", kind(&v)))),
        None => Map::new(),
    };
    let entries = match doc.remove("slices") {
        Some(Value::Array(s)) => s,
        Some(v) => {
            return Err(err(format!(
                "slices: expected an array, found {}",
                kind(&v)
            )));
        }
        None => Vec::new(),
    };
    let policies = doc
        .get("policies")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut messages: Option<(usize, Vec<Value>)> = None;
    let mut adapter_states: Option<(usize, Vec<Value>)> = None;
    let mut others: Vec<Value> = Vec::new();
    let mut other_policies = Map::new();
    for (i, mut e) in entries.into_iter().enumerate() {
        let ty = e.get("slice_type").and_then(Value::as_str).unwrap_or("");
        let item_ty = e.get("item_type").and_then(Value::as_str).unwrap_or("");
        if ty.starts_with("agent_journal:") {
            return Err(err(format!(
                "slices[{i}]: the crate's slice type {ty:?} in a document under WINK's names \
                 (the crate's slices travel in the tag {SLICES_TAG:?})"
            )));
        }
        if is_spec_type(ty) && item_ty != ty {
            return Err(err(format!(
                "slices[{i}]: slice type {ty:?} holds items of type {item_ty:?}"
            )));
        }
        let slot = if ty.ends_with(":InnerMessage") {
            &mut messages
        } else if ty.ends_with(":AdapterStateSnapshot") {
            &mut adapter_states
        } else if ty.ends_with(":ConversationState") {
            // Derived from the messages: rebuilt by the fold.
            continue;
        } else {
            // WINK's other slices: kept as they are, written back by a WINK export.
            if let Some(p) = policies.get(ty) {
                other_policies.insert(ty.to_owned(), p.clone());
            }
            others.push(e);
            continue;
        };
        if slot.is_some() {
            return Err(err(format!("slices[{i}]: repeated slice type {ty:?}")));
        }
        let items = match e.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            Some(v) => {
                let found = kind(&v);
                return Err(err(format!(
                    "slices[{i}].items: expected an array, found {found}"
                )));
            }
            None => Vec::new(),
        };
        *slot = Some((i, items));
    }
    let (mi, message_items) = messages.unwrap_or_default();
    let ids = |items: &[Value]| -> HashMap<String, Uuid> {
        items
            .iter()
            .filter_map(|m| m.get("evaluation_id")?.as_str())
            .map(|s| (s.to_owned(), evaluation_uuid(s)))
            .collect()
    };
    let eval_ids = ids(&message_items);
    let mut messages: Vec<Value> = message_items
        .into_iter()
        .map(|m| journal_message(m, &eval_ids))
        .collect();
    let (ai, adapter_items) = adapter_states.unwrap_or_default();
    let mut adapters: Vec<Value> = adapter_items
        .into_iter()
        .enumerate()
        .map(|(k, a)| journal_adapter_state(a, k, &eval_ids))
        .collect();
    let kept = (!others.is_empty())
        .then(|| serde_json::json!({"slices": others, "policies": other_policies}));
    if let Some(slices) = text_tag(&tags, SLICES_TAG)? {
        let mut all: Vec<Value> = serde_json::from_str(slices).map_err(|e| {
            err(format!(
                "tags.{SLICES_TAG}: not a JSON array of slices: {e}"
            ))
        })?;
        let mut policies: Map<String, Value> = match text_tag(&tags, POLICIES_TAG)? {
            Some(p) => serde_json::from_str(p)
                .map_err(|e| err(format!("tags.{POLICIES_TAG}: not a JSON object: {e}")))?,
            None => Map::new(),
        };
        // WINK's other slices are those of the session label that wrote
        // them (in the crate's `SessionInfo`): the label stays as it is.
        all.push(slice(MESSAGES, messages));
        policies.insert(
            MESSAGES.into(),
            Value::String(SlicePolicy::State.as_str().into()),
        );
        if !adapters.is_empty() {
            all.push(slice(ADAPTER_STATES, adapters));
            let log = Value::String(SlicePolicy::Log.as_str().into());
            policies.insert(ADAPTER_STATES.into(), log);
        }
        tags.remove(SLICES_TAG);
        tags.remove(POLICIES_TAG);
        doc.insert("slices".into(), Value::Array(all));
        doc.insert("policies".into(), Value::Object(policies));
        doc.insert("tags".into(), Value::Object(tags));
        return Ok(Wink::Journal(Value::Object(doc)));
    }
    if let Some(kept) = &kept {
        tags.insert(OTHER_SLICES_LABEL.into(), Value::String(kept.to_string()));
    }
    let mut f = Found {
        index: mi,
        items: &mut messages,
    };
    let mut parsed: Vec<InnerMessage> = f.parse_all()?;
    for (i, m) in parsed.iter().enumerate() {
        micros(&m.created_at, &f.loc(i), "created_at")?;
    }
    let statuses: Vec<Vec<(CallId, ToolStatus)>> = parsed
        .iter_mut()
        .map(|m| {
            m.tool_calls
                .iter_mut()
                .map(|c| (c.call_id.clone(), std::mem::take(&mut c.status)))
                .collect()
        })
        .collect();
    let adapters: Vec<crate::event::AdapterStateSnapshot> = Found {
        index: ai,
        items: &mut adapters,
    }
    .parse_all()?;
    for (i, a) in adapters.iter().enumerate() {
        let loc = format!("slices[{ai}].items[{i}]");
        micros(&a.captured_at, &loc, "captured_at")?;
    }
    Ok(Wink::Native(native_events(
        parsed, statuses, adapters, &tags, &eval_ids,
    )))
}

/// The evaluation UUID of a WINK `evaluation_id`: itself when it is one,
/// else derived from it (v5), the same for the same string.
fn evaluation_uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap_or_else(|_| derived_uuid(s))
}

fn set_eval(v: &mut Value, ids: &HashMap<String, Uuid>) {
    if let Some(Value::String(id)) = v.get_mut("evaluation_id")
        && let Some(uuid) = ids.get(id.as_str())
    {
        *id = uuid.to_string();
    }
}

/// A WINK `InnerMessage` item as the crate's: evaluation UUID, `started`
/// given back, fields the crate does not know left out.
fn journal_message(mut v: Value, ids: &HashMap<String, Uuid>) -> Value {
    set_eval(&mut v, ids);
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    const FIELDS: [&str; 13] = [
        "role",
        "content",
        "evaluation_id",
        "sequence",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "turn",
        "prompt_ns",
        "prompt_key",
        "created_at",
        "message_id",
        "provider_payload",
    ];
    obj.retain(|k, _| FIELDS.contains(&k.as_str()));
    if let Some(Value::Array(calls)) = obj.get_mut("tool_calls") {
        for call in calls.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::String(s)) = call.remove(JOURNAL_STATUS)
                && s == "started"
            {
                call.insert("status".into(), Value::String(s));
            }
            call.retain(|k, _| ["call_id", "name", "arguments", "status"].contains(&k.as_str()));
        }
    }
    v
}

/// A WINK `AdapterStateSnapshot` item as the crate's: the state as JSON
/// text; the crate's own fields when the item has them, else derived (the
/// adapter type of a state with a `session_id` is `claude_agent_sdk`, its
/// resumability the spec's rule, the snapshot id derived from the item).
fn journal_adapter_state(mut v: Value, k: usize, ids: &HashMap<String, Uuid>) -> Value {
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    let state = obj.get("state").cloned().unwrap_or(Value::Null);
    let session_id = state.get("session_id").and_then(Value::as_str);
    if !obj.contains_key("adapter_type") {
        let ty = if session_id.is_some() {
            "claude_agent_sdk"
        } else {
            "unknown"
        };
        obj.insert("adapter_type".into(), Value::String(ty.into()));
    }
    if !obj.contains_key("resumable") {
        let complete = state
            .get("is_complete")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let resumable = session_id.is_some_and(|s| !s.is_empty()) && !complete;
        obj.insert("resumable".into(), Value::Bool(resumable));
    }
    let kept = match obj.remove(JOURNAL_STATE) {
        Some(Value::String(t)) => Some(t),
        _ => None,
    };
    let text = match &state {
        Value::String(s) => s.clone(),
        other => kept
            .filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| v == *other))
            .unwrap_or_else(|| other.to_string()),
    };
    if !obj.contains_key("snapshot_id") {
        let seed = format!("{k}:{text}");
        let id = Uuid::new_v5(&DERIVED, seed.as_bytes());
        obj.insert("snapshot_id".into(), Value::String(id.to_string()));
    }
    obj.insert("state".into(), Value::String(text));
    match obj.get("evaluation_id") {
        Some(Value::String(e)) if e.is_empty() => {
            obj.insert("evaluation_id".into(), Value::Null);
        }
        Some(Value::String(e)) => {
            let id = ids.get(e).copied().unwrap_or_else(|| evaluation_uuid(e));
            obj.insert("evaluation_id".into(), Value::String(id.to_string()));
        }
        _ => {}
    }
    if let Some(Value::String(s)) = obj.get("supersedes")
        && Uuid::parse_str(s).is_err()
    {
        let id = Uuid::new_v5(&DERIVED, s.as_bytes());
        obj.insert("supersedes".into(), Value::String(id.to_string()));
    }
    v
}

/// A message with the rank of its evaluation and its calls' statuses.
type Ranked = (usize, InnerMessage, Vec<(CallId, ToolStatus)>);

/// The events of a WINK-written document: the session opened with its tags
/// as labels (and the original evaluation ids, if any was not a UUID); per
/// evaluation in order of first appearance, its start, its messages in
/// sequence order each followed by its calls' statuses; the adapter states.
fn native_events(
    mut messages: Vec<InnerMessage>,
    statuses: Vec<Vec<(CallId, ToolStatus)>>,
    adapters: Vec<crate::event::AdapterStateSnapshot>,
    tags: &Map<String, Value>,
    ids: &HashMap<String, Uuid>,
) -> Vec<Event> {
    let mut labels: Vec<(String, String)> = tags
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    let originals: Map<String, Value> = ids
        .iter()
        .filter(|(s, u)| u.to_string() != **s)
        .map(|(s, u)| (u.to_string(), Value::String(s.clone())))
        .collect();
    if !originals.is_empty() {
        labels.retain(|(k, _)| k != EVALUATION_IDS_LABEL);
        labels.push((
            EVALUATION_IDS_LABEL.into(),
            Value::Object(originals).to_string(),
        ));
    }
    let mut order: Vec<EvaluationId> = Vec::new();
    for m in &messages {
        if !order.contains(&m.evaluation_id) {
            order.push(m.evaluation_id);
        }
    }
    let mut indexed: Vec<Ranked> = messages
        .drain(..)
        .zip(statuses)
        .map(|(m, s)| {
            let rank = order
                .iter()
                .position(|e| *e == m.evaluation_id)
                .unwrap_or(0);
            (rank, m, s)
        })
        .collect();
    indexed.sort_by_key(|(rank, m, _)| (*rank, m.sequence));
    let mut events = vec![Event::SessionOpened { labels }];
    let mut started: Option<EvaluationId> = None;
    for (_, m, calls) in indexed {
        let eval = m.evaluation_id;
        if started != Some(eval) {
            started = Some(eval);
            events.push(Event::EvaluationStarted {
                evaluation_id: eval,
                prompt_ns: m.prompt_ns.clone(),
                prompt_key: m.prompt_key.clone(),
                adapter: String::new(),
            });
        }
        events.push(Event::Message(m));
        for (call_id, status) in calls {
            if status != ToolStatus::Pending {
                events.push(Event::ToolStatus {
                    evaluation_id: eval,
                    call_id,
                    status,
                    error: None,
                });
            }
        }
    }
    events.extend(adapters.into_iter().map(Event::AdapterState));
    events
}

/// The state whose fold `events` are.
pub(super) fn fold(events: Vec<Event>, registry: &SliceRegistry) -> SessionState {
    let session = SessionId::new();
    let mut state = SessionState::with_slices(registry);
    for (seq, event) in (0u64..).zip(events) {
        state.apply_owned(Envelope {
            session,
            seq,
            at: now(),
            event,
        });
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_evaluation_ids_are_stable_and_uuids_stay() {
        let u = Uuid::now_v7();
        assert_eq!(evaluation_uuid(&u.to_string()), u);
        assert_eq!(evaluation_uuid("eval-1"), evaluation_uuid("eval-1"));
        assert_ne!(evaluation_uuid("eval-1"), evaluation_uuid("eval-2"));
    }
}
