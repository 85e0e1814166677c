//! Checkpoint strategies and the JSON form.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::error::{Error, Result};
use crate::event::Outcome;
use crate::model::{CallId, EvaluationId, ToolStatus};
use crate::state::tests::{
    CustomCounter, build_events, envelopes, fold, in_order_and_shuffled, registry, session_spec, t,
};
use crate::state::{SessionState, Slice};

fn env(seq: u64, event: Event) -> Envelope {
    Envelope {
        session: SessionId::new(),
        seq,
        at: t(0),
        event,
    }
}

fn custom(seq: u64) -> Envelope {
    env(
        seq,
        Event::Custom {
            kind: "k".into(),
            payload: vec![],
        },
    )
}

fn status(seq: u64, status: ToolStatus) -> Envelope {
    env(
        seq,
        Event::ToolStatus {
            evaluation_id: EvaluationId::new(),
            call_id: CallId::from("c"),
            status,
            error: None,
        },
    )
}

#[test]
fn every_events() {
    let s = CheckpointStrategy::EveryEvents(10);
    assert!(!s.should_checkpoint(None, None, &custom(8)));
    assert!(s.should_checkpoint(None, None, &custom(9)));
    assert!(!s.should_checkpoint(Some(9), None, &custom(18)));
    assert!(s.should_checkpoint(Some(9), None, &custom(19)));
    assert!(CheckpointStrategy::EveryEvents(0).should_checkpoint(Some(3), None, &custom(4)));
    assert!(!CheckpointStrategy::EveryEvents(0).should_checkpoint(Some(4), None, &custom(4)));
}

#[test]
fn on_tool_use() {
    let s = CheckpointStrategy::OnToolUse;
    assert!(s.should_checkpoint(Some(1), None, &status(2, ToolStatus::Completed)));
    assert!(s.should_checkpoint(Some(1), None, &status(2, ToolStatus::Failed)));
    assert!(!s.should_checkpoint(Some(1), None, &status(2, ToolStatus::Started)));
    assert!(!s.should_checkpoint(Some(1), None, &custom(2)));
}

#[test]
fn on_complete() {
    let s = CheckpointStrategy::OnComplete;
    let finished = env(
        5,
        Event::EvaluationFinished {
            evaluation_id: EvaluationId::new(),
            outcome: Outcome::Succeeded,
        },
    );
    assert!(s.should_checkpoint(Some(1), None, &finished));
    assert!(!s.should_checkpoint(Some(1), None, &status(2, ToolStatus::Completed)));
}

#[test]
fn periodic() {
    let s = CheckpointStrategy::Periodic(Duration::from_secs(60));
    assert!(s.should_checkpoint(None, None, &custom(0)));
    assert!(!s.should_checkpoint(Some(0), Some(Instant::now()), &custom(1)));
    if let Some(old) = Instant::now().checked_sub(Duration::from_secs(61)) {
        assert!(s.should_checkpoint(Some(0), Some(old), &custom(1)));
    }
}

#[test]
fn incremental_every_n_events_is_the_default_and_geometric_where_chains_are_not_kept() {
    let s = CheckpointStrategy::default();
    assert_eq!(s, CheckpointStrategy::Incremental { every: 8192 });
    assert!(!s.should_checkpoint(None, None, &custom(8190)));
    assert!(s.should_checkpoint(None, None, &custom(8191)));
    assert!(!s.should_checkpoint(Some(8191), None, &custom(16_382)));
    assert!(s.should_checkpoint(Some(8191), None, &custom(16_383)));
    assert!(s.should_checkpoint(Some(1_000_000), None, &custom(1_008_192)));
    assert_eq!(s.for_store(true), s);
    assert_eq!(
        s.for_store(false),
        CheckpointStrategy::Geometric {
            first: 8192,
            factor: 2
        }
    );
}

#[test]
fn on_demand_never() {
    let s = CheckpointStrategy::OnDemand;
    assert!(!s.should_checkpoint(None, None, &custom(1_000_000)));
}

#[test]
fn geometric_spacing_keeps_total_snapshot_work_linear() {
    let s = CheckpointStrategy::Geometric {
        first: 1024,
        factor: 2,
    };
    assert!(!s.should_checkpoint(None, None, &custom(1022)));
    assert!(s.should_checkpoint(None, None, &custom(1023)));
    assert!(!s.should_checkpoint(Some(4095), None, &custom(8189)));
    assert!(s.should_checkpoint(Some(4095), None, &custom(8190)));
    // Simulate a session of a million events: the sum of the seqs snapshots
    // are taken at (a proxy for bytes written) stays within 2x the length.
    let (mut last, mut sum, mut count) = (None, 0u64, 0);
    for seq in 0..1_000_000u64 {
        if s.should_checkpoint(last, None, &custom(seq)) {
            last = Some(seq);
            sum += seq;
            count += 1;
        }
    }
    assert!(sum <= 2 * 1_000_000, "sum {sum}");
    assert!(count < 12, "count {count}");
    // factor 1 degrades to one snapshot every `first` events.
    let flat = CheckpointStrategy::Geometric {
        first: 10,
        factor: 1,
    };
    assert!(flat.should_checkpoint(Some(1000), None, &custom(1010)));
}

fn sample() -> SessionState {
    let mut reg_state = SessionState::with_slices(&registry());
    let spec = proptest::strategy::ValueTree::current(
        &session_spec()
            .new_tree(&mut proptest::test_runner::TestRunner::deterministic())
            .expect("tree"),
    );
    for e in envelopes(build_events(&spec)) {
        reg_state.apply(&e);
    }
    reg_state
}

fn opts() -> JsonOptions {
    JsonOptions {
        names: crate::snapshot::SliceNames::Journal,
        include_logs: true,
        parent_id: None,
        tags: vec![("run".into(), "1".into())],
        created_at: Some(t(0)),
    }
}

#[test]
fn json_has_the_wink_shape_with_sorted_keys() {
    let s = sample();
    let text = s.to_json(&opts());
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v.to_string(), text, "keys are sorted");
    assert_eq!(v["version"], "1");
    assert_eq!(v["children_ids"], json!([]));
    assert_eq!(v["tags"], json!({"run": "1"}));
    assert_eq!(
        v["parent_id"],
        json!(SessionId(uuid::Uuid::from_u128(7)).to_string())
    );
    assert_eq!(v["policies"]["agent_journal:AdapterStateSnapshot"], "log");
    assert_eq!(v["policies"]["test:CustomCounter"], "state");
    assert_eq!(v["slices"][0]["slice_type"], "agent_journal:InnerMessage");
    let first = &v["slices"][0]["items"][0];
    assert_eq!(first["role"], "system");
    assert!(
        first["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let back = SessionState::from_json(&text, &registry()).expect("from_json");
    assert_eq!(back, s);
    // Without `include_logs`: no application LOG slice, but the adapter
    // states (the recovery flow finds them in a default checkpoint).
    let no_logs = s.to_json(&JsonOptions::default());
    assert!(no_logs.contains("agent_journal:AdapterStateSnapshot"));
    assert!(!no_logs.contains("test:CustomLog"));
    let back = SessionState::from_json(&no_logs, &registry()).expect("from_json");
    assert_eq!(back.messages(), s.messages());
    assert_eq!(back.adapter_states(), s.adapter_states());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn json_round_trips((events, shuffled) in in_order_and_shuffled()) {
        let reg = registry();
        for events in [events, shuffled] {
            let s = fold(SessionState::with_slices(&reg), &envelopes(events));
            let back = SessionState::from_json(&s.to_json(&opts()), &reg);
            prop_assert!(matches!(&back, Ok(b) if *b == s), "{back:?}");
            // Under WINK's names too: the tags carry what the specs lack.
            let wink = JsonOptions {
                names: crate::snapshot::SliceNames::Wink { module: None },
                ..opts()
            };
            let back = SessionState::from_json(&s.to_json(&wink), &reg);
            prop_assert!(matches!(&back, Ok(b) if *b == s), "{back:?}");
        }
    }

    #[test]
    fn json_at_any_split_folds_on_to_the_same_state(
        (events, shuffled) in in_order_and_shuffled(),
        cut in 0usize..200,
    ) {
        let reg = registry();
        for events in [events, shuffled] {
            let envs = envelopes(events);
            let k = cut % (envs.len() + 1);
            let all = fold(SessionState::with_slices(&reg), &envs);
            let prefix = fold(SessionState::with_slices(&reg), &envs[..k]);
            let json = prefix.to_json(&opts());
            let restored = SessionState::from_json(&json, &reg).expect("from_json");
            prop_assert_eq!(fold(restored, &envs[k..]), all);
        }
    }

    #[test]
    fn from_json_never_panics(text in ".{0,64}", cut in 0usize..100_000) {
        let _ = SessionState::from_json(&text, &registry());
        let valid = sample().to_json(&opts());
        let cut = cut % (valid.len() + 1);
        if let Some(prefix) = valid.get(..cut) {
            let r = SessionState::from_json(prefix, &registry());
            prop_assert!(cut == valid.len() || matches!(r, Err(Error::SnapshotRestore(_))));
        }
    }
}

/// from_json of the sample document after `edit`.
fn edited(edit: impl FnOnce(&mut Value)) -> Result<SessionState> {
    let mut v: Value = serde_json::from_str(&sample().to_json(&opts())).expect("json");
    edit(&mut v);
    SessionState::from_json(&v.to_string(), &registry())
}

fn assert_refused(r: Result<SessionState>, needles: &[&str]) {
    match &r {
        Err(Error::SnapshotRestore(reason)) => {
            for n in needles {
                assert!(reason.contains(n), "{reason:?} does not mention {n:?}");
            }
        }
        other => panic!("expected SnapshotRestore, got {other:?}"),
    }
    assert!(matches!(r, Err(Error::SnapshotRestore(_))));
}

fn slice_index(v: &Value, name: &str) -> usize {
    v["slices"]
        .as_array()
        .and_then(|s| s.iter().position(|s| s["slice_type"] == name))
        .expect("slice")
}

#[test]
fn refuses_text_that_is_not_json() {
    let r = SessionState::from_json("{\"version\": ", &registry());
    assert_refused(r, &["not JSON", "line 1"]);
}

#[test]
fn refuses_a_top_level_that_is_not_an_object() {
    assert_refused(
        SessionState::from_json("[1]", &registry()),
        &["top level", "an array"],
    );
}

#[test]
fn refuses_a_missing_top_level_key() {
    let r = edited(|v| {
        v.as_object_mut().map(|o| o.remove("tags"));
    });
    assert_refused(r, &["top level", "missing key \"tags\""]);
}

#[test]
fn refuses_an_extra_top_level_key() {
    assert_refused(
        edited(|v| v["extra"] = json!(1)),
        &["top level", "unknown key \"extra\""],
    );
}

#[test]
fn refuses_another_version() {
    assert_refused(edited(|v| v["version"] = json!("2")), &["version", "\"2\""]);
    assert_refused(edited(|v| v["version"] = json!(1)), &["version"]);
}

#[test]
fn refuses_a_bad_created_at() {
    let r = edited(|v| v["created_at"] = json!("yesterday"));
    assert_refused(r, &["created_at", "invalid timestamp \"yesterday\""]);
}

#[test]
fn refuses_a_bad_parent_id() {
    assert_refused(
        edited(|v| v["parent_id"] = json!("parent-1")),
        &["parent_id"],
    );
}

#[test]
fn refuses_bad_children_ids_and_tags() {
    assert_refused(
        edited(|v| v["children_ids"] = json!(["x"])),
        &["children_ids[0]"],
    );
    assert_refused(edited(|v| v["tags"] = json!({"a": 1})), &["tags.\"a\""]);
}

#[test]
fn refuses_an_item_of_the_wrong_shape() {
    let r = edited(|v| v["slices"][0]["items"][1]["role"] = json!(5));
    assert_refused(r, &["slices[0].items[1].role"]);
    let r = edited(|v| v["slices"][0]["items"][2]["surprise"] = json!(true));
    assert_refused(r, &["slices[0].items[2]", "surprise"]);
    let r = edited(|v| v["slices"][1]["items"] = json!({}));
    assert_refused(r, &["slices[1].items"]);
    let r = edited(|v| v["slices"][2]["extra"] = json!(0));
    assert_refused(r, &["slices[2]", "unknown key"]);
}

#[test]
fn refuses_an_invalid_timestamp_in_an_item() {
    let r = edited(|v| v["slices"][0]["items"][3]["created_at"] = json!("yesterday"));
    assert_refused(
        r,
        &["slices[0].items[3].created_at: invalid timestamp \"yesterday\""],
    );
    let r = edited(|v| {
        v["slices"][0]["items"][0]["created_at"] = json!("2024-01-01T00:00:00.123456789Z")
    });
    assert_refused(r, &["slices[0].items[0]", "sub-microsecond"]);
}

#[test]
fn refuses_a_bad_id() {
    let r = edited(|v| v["slices"][0]["items"][0]["evaluation_id"] = json!("eval-10"));
    assert_refused(r, &["slices[0].items[0].evaluation_id", "UUID"]);
    let r = edited(|v| {
        let i = slice_index(v, "agent_journal:Evaluation");
        v["slices"][i]["items"][0]["evaluation_id"] = json!("eval-10");
    });
    assert_refused(r, &[".items[0].evaluation_id"]);
}

#[test]
fn refuses_an_unknown_slice_type() {
    let r = edited(|v| {
        v["slices"][1]["slice_type"] = json!("other:Thing");
        v["slices"][1]["item_type"] = json!("other:Thing");
    });
    assert_refused(r, &["slices[1]", "unknown slice type \"other:Thing\""]);
    let r = edited(|v| v["policies"]["other:Thing"] = json!("state"));
    assert_refused(r, &["policies", "other:Thing"]);
}

#[test]
fn refuses_a_policy_that_disagrees() {
    let r = edited(|v| v["policies"]["agent_journal:InnerMessage"] = json!("log"));
    assert_refused(r, &["policies.\"agent_journal:InnerMessage\"", "\"log\""]);
    let r = edited(|v| v["policies"]["test:CustomLog"] = json!("state"));
    assert_refused(r, &["test:CustomLog"]);
    let r = edited(|v| v["policies"]["test:CustomLog"] = json!("sometimes"));
    assert_refused(r, &["test:CustomLog", "sometimes"]);
    let r = edited(|v| {
        v["policies"]
            .as_object_mut()
            .map(|p| p.remove("agent_journal:Usage"));
    });
    assert_refused(r, &["no policy", "agent_journal:Usage"]);
}

#[test]
fn refuses_a_missing_state_slice_but_not_a_missing_log_slice() {
    let r = edited(|v| {
        let i = slice_index(v, "agent_journal:ToolCall");
        v["slices"].as_array_mut().map(|s| s.remove(i));
    });
    assert_refused(r, &["missing slice \"agent_journal:ToolCall\""]);
    let r = edited(|v| {
        let i = slice_index(v, CustomCounter::NAME);
        v["slices"].as_array_mut().map(|s| s.remove(i));
    });
    assert_refused(r, &["missing slice \"test:CustomCounter\""]);
    let r = edited(|v| {
        let i = slice_index(v, "test:CustomLog");
        v["slices"].as_array_mut().map(|s| s.remove(i));
    });
    assert!(
        matches!(r, Ok(s) if s.slice::<crate::state::tests::CustomLog>().is_some_and(|l| l.0.is_empty()))
    );
}

#[test]
fn refuses_inconsistent_items() {
    let r = edited(|v| {
        let i = slice_index(v, "agent_journal:InnerMessage");
        let dup = v["slices"][i]["items"][0].clone();
        if let Some(a) = v["slices"][i]["items"].as_array_mut() {
            a.push(dup);
        }
    });
    assert_refused(r, &["duplicate message_id"]);
    let r = edited(|v| {
        let i = slice_index(v, "agent_journal:ConversationState");
        v["slices"][i]["items"][0]["user_message_ids"] = json!([]);
    });
    assert_refused(r, &[".items[0]", "conversation"]);
    let r = edited(|v| {
        let s = v["slices"]
            .as_array()
            .map(|s| s[0].clone())
            .unwrap_or_default();
        if let Some(a) = v["slices"].as_array_mut() {
            a.push(s);
        }
    });
    assert_refused(r, &["appears twice"]);
    let r = edited(|v| {
        let i = slice_index(v, "test:CustomCounter");
        v["slices"][i]["items"] = json!([1, 2]);
    });
    assert_refused(r, &["exactly one item"]);
    let r = edited(|v| {
        let i = slice_index(v, "test:CustomCounter");
        v["slices"][i]["items"] = json!([{"total": "many"}]);
    });
    assert_refused(r, &[".items[0]"]);
}

#[test]
fn a_status_that_came_before_its_message_survives_json() {
    let reg = registry();
    let eval = EvaluationId::new();
    let mut s = SessionState::with_slices(&reg);
    s.apply(&env(
        0,
        Event::ToolStatus {
            evaluation_id: eval,
            call_id: CallId::from("c"),
            status: ToolStatus::Started,
            error: None,
        },
    ));
    let back = SessionState::from_json(&s.to_json(&opts()), &reg).expect("from_json");
    assert_eq!(back, s);
    let mut m = crate::model::InnerMessage::new(crate::model::Role::Assistant, "", eval, 1);
    m.tool_calls = vec![crate::model::ToolCallRecord::new("c", "t", "{}")];
    let mut back = back;
    back.apply(&env(1, Event::Message(m.clone())));
    let got = back
        .messages()
        .get(m.message_id)
        .map(|m| m.tool_calls[0].status);
    assert_eq!(got, Some(ToolStatus::Started));
}
