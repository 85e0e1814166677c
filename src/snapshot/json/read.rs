//! Reading a WINK-shaped JSON snapshot: the header, the policies, each
//! slice checked for shape and type, then the state assembled.

use super::check::{Found, err, micros, parse};
use super::items::{
    ADAPTER_STATES, AdapterStateItem, BUILT_INS, CONVERSATION, CONVERSATION_LOG, ConversationItem,
    EVALUATIONS, MESSAGES, SESSION_INFO, SessionInfoItem, TOOL_CALLS, TOP_KEYS, TsItem, USAGE,
    UsageItem, conversation_items,
};
use crate::error::{Error, Result};
use crate::event::{AdapterStateSnapshot, TokenUsage};
use crate::model::{InnerMessage, SessionId};
use crate::provider::read::kind;
use crate::state::{
    AdapterStates, ConversationLog, DynSlice, EvaluationInfo, Evaluations, Messages, SessionState,
    SlicePolicy, SliceRegistry, ToolCallInfo, ToolCalls, Usage, UsageTotals,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

fn micros_opt(t: &Option<DateTime<Utc>>, loc: &str, field: &str) -> Result<()> {
    t.as_ref().map_or(Ok(()), |t| micros(t, loc, field))
}

fn policy_of(name: &str, registry: &SliceRegistry) -> Option<SlicePolicy> {
    BUILT_INS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
        .or_else(|| (name == CONVERSATION_LOG).then_some(SlicePolicy::State))
        .or_else(|| registry.find(name).map(|f| f.policy))
}

fn check_header(doc: &Map<String, Value>) -> Result<()> {
    for key in TOP_KEYS {
        if !doc.contains_key(key) {
            return Err(err(format!("top level: missing key {key:?}")));
        }
    }
    if let Some(key) = doc.keys().find(|k| !TOP_KEYS.contains(&k.as_str())) {
        return Err(err(format!("top level: unknown key {key:?}")));
    }
    match doc.get("version") {
        Some(Value::String(v)) if v == "1" => {}
        Some(v) => return Err(err(format!("version: expected \"1\", found {v}"))),
        None => {}
    }
    if let Some(v) = doc.get("created_at") {
        parse::<TsItem>(v, "created_at")?;
    }
    if let Some(v) = doc.get("parent_id") {
        parse::<Option<SessionId>>(v, "parent_id")?;
    }
    match doc.get("children_ids") {
        Some(Value::Array(ids)) => {
            for (i, v) in ids.iter().enumerate() {
                parse::<SessionId>(v, &format!("children_ids[{i}]"))?;
            }
        }
        Some(v) => {
            return Err(err(format!(
                "children_ids: expected an array, found {}",
                kind(v)
            )));
        }
        None => {}
    }
    match doc.get("tags") {
        Some(Value::Object(tags)) => {
            if let Some((k, v)) = tags.iter().find(|(_, v)| !v.is_string()) {
                return Err(err(format!(
                    "tags.{k:?}: expected a string, found {}",
                    kind(v)
                )));
            }
        }
        Some(v) => return Err(err(format!("tags: expected an object, found {}", kind(v)))),
        None => {}
    }
    Ok(())
}

fn check_policies(doc: &Map<String, Value>, registry: &SliceRegistry) -> Result<BTreeSet<String>> {
    let policies = match doc.get("policies") {
        Some(Value::Object(p)) => p,
        Some(v) => {
            return Err(err(format!(
                "policies: expected an object, found {}",
                kind(v)
            )));
        }
        None => return Err(err("top level: missing key \"policies\"")),
    };
    for (name, v) in policies {
        let given = match v.as_str() {
            Some("state") => SlicePolicy::State,
            Some("log") => SlicePolicy::Log,
            _ => {
                return Err(err(format!(
                    "policies.{name:?}: expected \"state\" or \"log\", found {v}"
                )));
            }
        };
        let real = policy_of(name, registry)
            .ok_or_else(|| err(format!("policies: unknown slice type {name:?}")))?;
        if given != real {
            return Err(err(format!(
                "policies.{name:?}: is {:?} but the slice's policy is {:?}",
                given.as_str(),
                real.as_str()
            )));
        }
    }
    Ok(policies.keys().cloned().collect())
}

/// The slices of the document by type, checked for shape, type and policy.
fn find_slices<'a>(
    doc: &'a mut Map<String, Value>,
    registry: &SliceRegistry,
    with_policy: &BTreeSet<String>,
) -> Result<BTreeMap<String, Found<'a>>> {
    let slices = match doc.get_mut("slices") {
        Some(Value::Array(s)) => s,
        Some(v) => return Err(err(format!("slices: expected an array, found {}", kind(v)))),
        None => return Err(err("top level: missing key \"slices\"")),
    };
    let mut found = BTreeMap::new();
    for (index, s) in slices.iter_mut().enumerate() {
        let loc = format!("slices[{index}]");
        let what = kind(s);
        let obj = s
            .as_object_mut()
            .ok_or_else(|| err(format!("{loc}: expected an object, found {what}")))?;
        for key in ["item_type", "items", "slice_type"] {
            if !obj.contains_key(key) {
                return Err(err(format!("{loc}: missing key {key:?}")));
            }
        }
        if let Some(key) = obj
            .keys()
            .find(|k| !["item_type", "items", "slice_type"].contains(&k.as_str()))
        {
            return Err(err(format!("{loc}: unknown key {key:?}")));
        }
        let name = obj
            .get("slice_type")
            .and_then(Value::as_str)
            .ok_or_else(|| err(format!("{loc}.slice_type: expected a string")))?
            .to_owned();
        let name = name.as_str();
        if policy_of(name, registry).is_none() {
            return Err(err(format!("{loc}: unknown slice type {name:?}")));
        }
        if obj.get("item_type").and_then(Value::as_str) != Some(name) {
            return Err(err(format!("{loc}.item_type: expected {name:?}")));
        }
        if !with_policy.contains(name) {
            return Err(err(format!("{loc}: no policy for slice type {name:?}")));
        }
        let items = obj
            .get_mut("items")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| err(format!("{loc}.items: expected an array")))?;
        if found
            .insert(name.to_owned(), Found { index, items })
            .is_some()
        {
            return Err(err(format!("{loc}: slice type {name:?} appears twice")));
        }
    }
    Ok(found)
}

/// Takes slice `name` out of `found`.
fn required<'a>(found: &mut BTreeMap<String, Found<'a>>, name: &str) -> Result<Found<'a>> {
    found
        .remove(name)
        .ok_or_else(|| err(format!("slices: missing slice {name:?}")))
}

/// Reads a document; see [`SessionState::from_json`].
pub(super) fn from_str(text: &str, registry: &SliceRegistry) -> Result<SessionState> {
    let value: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    from_value(value, registry)
}

/// Reads a document from `reader`, parsed straight into its JSON value (no
/// text kept); see [`SessionState::from_json_reader`].
pub(super) fn from_reader(
    reader: impl std::io::Read,
    registry: &SliceRegistry,
) -> Result<SessionState> {
    let value: Value =
        serde_json::from_reader(std::io::BufReader::new(reader)).map_err(|e| {
            match e.classify() {
                serde_json::error::Category::Io => Error::SnapshotRestore(format!("not read: {e}")),
                _ => err(format!("not JSON: {e}")),
            }
        })?;
    from_value(value, registry)
}

/// Reads a parsed document, moving its parts out of it as it goes (each
/// item's JSON is dropped once the item is parsed).
fn from_value(mut value: Value, registry: &SliceRegistry) -> Result<SessionState> {
    let doc = value.as_object().ok_or_else(|| {
        err(format!(
            "top level: expected an object, found {}",
            kind(&value)
        ))
    })?;
    check_header(doc)?;
    if super::wink_read::is_wink(doc) {
        let Value::Object(doc) = value else {
            return Err(err("top level: expected an object"));
        };
        match super::wink_read::from_wink(doc)? {
            super::wink_read::Wink::Native(events) => {
                return Ok(super::wink_read::fold(events, registry));
            }
            super::wink_read::Wink::Journal(v) => value = v,
        }
    }
    let doc = value
        .as_object_mut()
        .ok_or_else(|| err("top level: expected an object"))?;
    check_header(doc)?;
    let with_policy = check_policies(doc, registry)?;
    let mut found = find_slices(doc, registry, &with_policy)?;

    let mut f = required(&mut found, MESSAGES)?;
    let items: Vec<InnerMessage> = f.parse_all()?;
    for (i, m) in items.iter().enumerate() {
        micros(&m.created_at, &f.loc(i), "created_at")?;
    }
    let mut messages = Messages::from_items(items).map_err(f.at())?;

    let mut f = required(&mut found, TOOL_CALLS)?;
    let items: Vec<ToolCallInfo> = f.parse_all()?;
    for (i, c) in items.iter().enumerate() {
        let loc = f.loc(i);
        micros_opt(&c.requested_at, &loc, "requested_at")?;
        micros_opt(&c.started_at, &loc, "started_at")?;
        micros_opt(&c.finished_at, &loc, "finished_at")?;
        // Statuses of calls no message holds yet live only here.
        messages.set_status(c.evaluation_id, &c.call_id, c.status);
    }
    let tool_calls = ToolCalls::from_items(items).map_err(f.at())?;

    let mut f = required(&mut found, EVALUATIONS)?;
    let items: Vec<EvaluationInfo> = f.parse_all()?;
    for (i, e) in items.iter().enumerate() {
        micros_opt(&e.started_at, &f.loc(i), "started_at")?;
        micros_opt(&e.finished_at, &f.loc(i), "finished_at")?;
    }
    let evaluations = Evaluations::from_items(items).map_err(f.at())?;

    let mut f = required(&mut found, CONVERSATION)?;
    let items: Vec<ConversationItem> = f.parse_all()?;
    let expected = conversation_items(&messages);
    if let Some(i) =
        (0..items.len().max(expected.len())).find(|i| items.get(*i) != expected.get(*i))
    {
        return Err(err(format!(
            "{}: the conversation does not match the InnerMessage slice",
            f.loc(i)
        )));
    }

    let adapter_states = match found.remove(ADAPTER_STATES) {
        None => AdapterStates::default(),
        Some(mut f) => {
            let items: Vec<AdapterStateItem> = f.parse_all()?;
            let mut states = Vec::with_capacity(items.len());
            for (i, a) in items.into_iter().enumerate() {
                micros(&a.captured_at, &f.loc(i), "captured_at")?;
                states.push(AdapterStateSnapshot {
                    snapshot_id: a.snapshot_id,
                    adapter_type: a.adapter_type,
                    state: a.state,
                    resumable: a.resumable,
                    captured_at: a.captured_at,
                    evaluation_id: a.evaluation_id,
                    supersedes: a.supersedes,
                });
            }
            AdapterStates::from_items(states)
        }
    };

    let mut f = required(&mut found, USAGE)?;
    let items: Vec<UsageItem> = f.parse_all()?;
    let usage = Usage::from_items(items.into_iter().map(|u| {
        let usage = TokenUsage {
            input_tokens: u.usage.input_tokens,
            output_tokens: u.usage.output_tokens,
            cache_read_tokens: u.usage.cache_read_tokens,
            cache_write_tokens: u.usage.cache_write_tokens,
            ..TokenUsage::default()
        };
        let totals = UsageTotals {
            usage,
            provider_calls: u.provider_calls,
        };
        (u.evaluation_id, totals)
    }))
    .map_err(f.at())?;

    let f = required(&mut found, SESSION_INFO)?;
    let info: SessionInfoItem = parse(f.one()?, &f.loc(0))?;

    let conversations = match found.remove(CONVERSATION_LOG) {
        None => ConversationLog::default(),
        Some(f) => parse(f.one()?, &f.loc(0))?,
    };

    let mut app: Vec<Box<dyn DynSlice>> = Vec::with_capacity(registry.len());
    for factory in registry.factories() {
        match (found.get(factory.name), factory.policy) {
            (None, SlicePolicy::Log) => app.push((factory.make)()),
            (None, SlicePolicy::State) => {
                return Err(err(format!("slices: missing slice {:?}", factory.name)));
            }
            (Some(f), _) => app.push(
                (factory.from_json)(f.one()?).map_err(|e| err(format!("{}: {e}", f.loc(0))))?,
            ),
        }
    }

    Ok(SessionState {
        conversations,
        messages,
        tool_calls,
        evaluations,
        adapter_states,
        usage,
        labels: info.labels,
        forked_from: info.forked_from.map(|f| (f.parent, f.at)),
        last_seq: info.last_seq,
        events_applied: info.events_applied,
        app,
        marks: crate::state::Marks::default(),
    })
}
