//! Property tests of the reducers and of the binary snapshot; generators
//! shared with the JSON tests.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::*;
use crate::error::Error;
use crate::event::{
    AdapterStateSnapshot, Event, Outcome, ProviderCallRecord, ProviderOutcome, TokenUsage,
};
use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, SessionId, ToolCallRecord, ToolStatus,
};

/// An application STATE slice: counts Custom events by kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CustomCounter {
    pub(crate) total: u64,
    pub(crate) by_kind: BTreeMap<String, u64>,
}

impl Slice for CustomCounter {
    const NAME: &'static str = "test:CustomCounter";
    fn apply(&mut self, envelope: &Envelope) {
        if let Event::Custom { kind, .. } = &envelope.event {
            self.total += 1;
            *self.by_kind.entry(kind.clone()).or_default() += 1;
        }
    }
}

/// An application LOG slice: the seqs of Custom events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CustomLog(pub(crate) Vec<u64>);

impl Slice for CustomLog {
    const NAME: &'static str = "test:CustomLog";
    const POLICY: SlicePolicy = SlicePolicy::Log;
    fn apply(&mut self, envelope: &Envelope) {
        if let Event::Custom { .. } = &envelope.event {
            self.0.push(envelope.seq);
        }
    }
}

pub(crate) fn registry() -> SliceRegistry {
    let mut r = SliceRegistry::new();
    r.register::<CustomCounter>().register::<CustomLog>();
    r
}

/// What happens to one tool call.
#[derive(Clone, Debug)]
pub(crate) struct CallSpec {
    /// 0: nothing, 1: started, 2: started+completed, 3: started+failed, 4: completed only.
    pub(crate) outcome: u8,
    pub(crate) with_result: bool,
}

/// One evaluation.
#[derive(Clone, Debug)]
pub(crate) struct EvalSpec {
    pub(crate) started: bool,
    pub(crate) turns: Vec<Vec<CallSpec>>,
    pub(crate) final_answer: bool,
    pub(crate) compact: Option<u64>,
    pub(crate) adapter_state: bool,
    pub(crate) custom: u8,
    pub(crate) finished: bool,
}

fn call_spec() -> impl Strategy<Value = CallSpec> {
    (0u8..5, any::<bool>()).prop_map(|(outcome, with_result)| CallSpec {
        outcome,
        with_result,
    })
}

fn eval_spec() -> impl Strategy<Value = EvalSpec> {
    (
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(call_spec(), 0..3), 0..4),
        any::<bool>(),
        prop::option::of(0u64..6),
        any::<bool>(),
        0u8..3,
        any::<bool>(),
    )
        .prop_map(
            |(started, turns, final_answer, compact, adapter_state, custom, finished)| EvalSpec {
                started,
                turns,
                final_answer,
                compact,
                adapter_state,
                custom,
                finished,
            },
        )
}

pub(crate) fn session_spec() -> impl Strategy<Value = Vec<EvalSpec>> {
    prop::collection::vec(eval_spec(), 1..4)
}

pub(crate) fn t(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(1_700_000_000_000_000 + micros)
        .single()
        .unwrap_or_default()
}

/// The id of the `ix`th evaluation of a generated session. After the
/// first, each has a smaller id than the one before, as when the clock
/// steps back between evaluations (ids are UUIDv7): only their place in
/// the stream tells which one started last.
pub(crate) fn eval_id(ix: u128) -> EvaluationId {
    EvaluationId(Uuid::from_u128(
        0x1000 + if ix == 0 { 0 } else { 0x100 - ix },
    ))
}

fn message(role: Role, eval_ix: u128, seq: u64, turn: u32) -> InnerMessage {
    let mut m = InnerMessage::new(role, format!("{role} {seq}"), eval_id(eval_ix), seq);
    m.turn = turn;
    m.prompt_ns = "ns".into();
    m.prompt_key = format!("key{eval_ix}");
    m.created_at = t(((eval_ix as i64) << 20) + seq as i64);
    m.message_id = MessageId(Uuid::from_u128(
        (eval_ix << 64) | u128::from(seq) | 1 << 100,
    ));
    m
}

/// The events of a session described by `spec`.
pub(crate) fn build_events(spec: &[EvalSpec]) -> Vec<Event> {
    let mut ev = vec![Event::SessionOpened {
        labels: vec![("agent".into(), "test".into())],
    }];
    ev.push(Event::ForkPoint {
        parent: SessionId(Uuid::from_u128(7)),
        at: 3,
    });
    for (i, e) in spec.iter().enumerate() {
        let ix = i as u128;
        let eval = eval_id(ix);
        if e.started {
            ev.push(Event::EvaluationStarted {
                evaluation_id: eval,
                prompt_ns: "ns".into(),
                prompt_key: format!("key{i}"),
                adapter: "scripted".into(),
            });
        }
        ev.push(Event::Message(message(Role::System, ix, 0, 0)));
        ev.push(Event::Message(message(Role::User, ix, 1, 0)));
        let mut seq = 2;
        for (turn_ix, calls) in e.turns.iter().enumerate() {
            let turn = turn_ix as u32 + 1;
            let mut a = message(Role::Assistant, ix, seq, turn);
            seq += 1;
            let ids: Vec<CallId> = (0..calls.len())
                .map(|k| CallId(format!("c{turn}_{k}")))
                .collect();
            a.tool_calls = ids
                .iter()
                .map(|c| ToolCallRecord::new(c.clone(), "tool", "{\"x\":1}"))
                .collect();
            ev.push(Event::Message(a));
            ev.push(Event::ProviderCall(ProviderCallRecord {
                evaluation_id: eval,
                turn,
                provider: "scripted".into(),
                model: "m".into(),
                usage: TokenUsage {
                    input_tokens: 100 + u64::from(turn),
                    output_tokens: 10,
                    cache_read_tokens: 1,
                    cache_write_tokens: 2,
                    ..Default::default()
                },
                started_at: t(1),
                finished_at: t(2),
                outcome: ProviderOutcome::Ok,
            }));
            for (c, id) in calls.iter().zip(&ids) {
                let status = |status, error: Option<&str>| Event::ToolStatus {
                    evaluation_id: eval,
                    call_id: id.clone(),
                    status,
                    error: error.map(str::to_owned),
                };
                if matches!(c.outcome, 1..=3) {
                    ev.push(status(ToolStatus::Started, None));
                }
                if c.with_result {
                    let mut r = message(Role::Tool, ix, seq, turn);
                    seq += 1;
                    r.tool_call_id = Some(id.clone());
                    r.tool_name = Some("tool".into());
                    ev.push(Event::Message(r));
                }
                match c.outcome {
                    2 | 4 => ev.push(status(ToolStatus::Completed, None)),
                    3 => ev.push(status(ToolStatus::Failed, Some("boom"))),
                    _ => {}
                }
            }
        }
        if e.final_answer {
            let turn = e.turns.len() as u32 + 1;
            ev.push(Event::Message(message(Role::Assistant, ix, seq, turn)));
        }
        if let Some(through) = e.compact {
            ev.push(Event::Compacted {
                evaluation_id: eval,
                through_sequence: through,
                summary: Some(format!("summary {through}")),
            });
        }
        if e.adapter_state {
            ev.push(Event::AdapterState(AdapterStateSnapshot {
                snapshot_id: Uuid::from_u128(0x5000 + ix),
                adapter_type: "sdk".into(),
                state: "{\"s\":1}".into(),
                resumable: true,
                captured_at: t(5),
                evaluation_id: Some(eval),
                supersedes: None,
            }));
        }
        for k in 0..e.custom {
            ev.push(Event::Custom {
                kind: format!("k{k}"),
                payload: vec![k],
            });
        }
        if e.finished {
            ev.push(Event::EvaluationFinished {
                evaluation_id: eval,
                outcome: Outcome::Failed {
                    error: "stopped".into(),
                },
            });
        }
    }
    ev
}

pub(crate) fn envelopes(events: Vec<Event>) -> Vec<Envelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Envelope {
            session: SessionId(Uuid::from_u128(42)),
            seq: i as u64,
            at: t(1_000 + i as i64),
            event,
        })
        .collect()
}

pub(crate) fn fold(start: SessionState, envs: &[Envelope]) -> SessionState {
    let mut s = start;
    for e in envs {
        s.apply(e);
    }
    s
}

/// The events of a generated session, in order and shuffled.
pub(crate) fn in_order_and_shuffled() -> impl Strategy<Value = (Vec<Event>, Vec<Event>)> {
    session_spec().prop_flat_map(|spec| {
        let events = build_events(&spec);
        (Just(events.clone()), Just(events).prop_shuffle())
    })
}

/// The events of a generated session, in order and shuffled, and up to
/// `max_dups` indexes of events to append again (as duplicates).
fn shuffled_with_duplicates(
    max_dups: usize,
) -> impl Strategy<Value = (Vec<Event>, Vec<Event>, Vec<usize>)> {
    session_spec().prop_flat_map(move |spec| {
        let events = build_events(&spec);
        let n = events.len();
        (
            Just(events.clone()),
            Just(events).prop_shuffle(),
            prop::collection::vec(0..n, 0..max_dups),
        )
    })
}

const LIMIT: u64 = 1 << 24;

/// One evaluation: a turn with an unanswered call, an empty turn, an answer.
pub(crate) fn one_eval_spec() -> EvalSpec {
    EvalSpec {
        started: true,
        turns: vec![
            vec![CallSpec {
                outcome: 1,
                with_result: false,
            }],
            vec![],
        ],
        final_answer: true,
        compact: None,
        adapter_state: false,
        custom: 0,
        finished: false,
    }
}

mod reducers;
