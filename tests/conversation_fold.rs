//! The `ConversationLog` slice under sequences of conversation events:
//! folded into a `SessionState`, written as a snapshot (binary and JSON)
//! and read back, it is the same; and a fold resumed from the snapshot of
//! a prefix equals the fold of every event.
//!
//! The streams are shaped as a conversation session's (a `Created` first,
//! records as the engine writes them: see `event`), with few ids so that
//! records are replaced and messages repeated. What falls outside that
//! shape and broke the properties is pinned at the end, one test each.

use agent_journal::conversation::{
    Conversation, ConversationEvent, ConversationMessage, Metadata, ProviderCallRecord,
    ProviderOperation, TurnId,
};
use agent_journal::state::{JsonOptions, SessionState, SliceRegistry};
use agent_journal::{CallId, Envelope, Event, MessageId, SessionId, ToolCallRecord, ToolStatus};
use proptest::prelude::*;
use uuid::Uuid;

use crate::codec::conversation::{Domain, conversation, conversation_event};
use crate::codec::{opt_text, tool_status};

const SESSION: SessionId = SessionId(Uuid::from_bytes([1; 16]));

/// The turn of provider call `id`: a call belongs to one turn (the engine
/// records it again when it ends, never under another turn). Maps the
/// calls of `Domain::few` (ids of bytes 30-32) to its turns (20-22).
fn turn_of_call(id: Uuid) -> TurnId {
    TurnId(Uuid::from_bytes([id.as_bytes()[0] - 10; 16]))
}

/// A conversation event, or the status change of a turn's tool call (the
/// journal store writes both), as the engine writes them: a message's tool
/// calls are `Pending` (their statuses come from `ToolStatus` events), and
/// a provider call is always recorded under the same turn.
fn event(d: &Domain) -> BoxedStrategy<Event> {
    prop_oneof![
        5 => conversation_event(d).prop_map(|mut e| {
            match &mut e {
                ConversationEvent::Message(m) => {
                    for c in &mut m.tool_calls {
                        c.status = ToolStatus::Pending;
                    }
                }
                ConversationEvent::ProviderCall(c) => c.turn_id = turn_of_call(c.id),
                _ => {}
            }
            Event::Conversation(Box::new(e))
        }),
        1 => (d.turn.clone(), d.tool_call.clone(), tool_status(), opt_text()).prop_map(
            |(turn, call_id, status, error)| Event::ToolStatus {
                evaluation_id: turn.as_evaluation(),
                call_id,
                status,
                error,
            }
        ),
    ]
    .boxed()
}

/// Events at seqs 0, 1, 2, ... of one session, the first a `Created`.
fn stream() -> BoxedStrategy<Vec<Envelope>> {
    let d = Domain::few();
    let created =
        conversation(&d).prop_map(|c| Event::Conversation(Box::new(ConversationEvent::Created(c))));
    (
        (created, d.at.clone()),
        prop::collection::vec((event(&d), d.at.clone()), 0..24),
    )
        .prop_map(|(first, rest)| {
            std::iter::once(first)
                .chain(rest)
                .enumerate()
                .map(|(seq, (event, at))| Envelope {
                    session: SESSION,
                    seq: seq as u64,
                    at,
                    event,
                })
                .collect()
        })
        .boxed()
}

fn fold_onto(mut state: SessionState, envelopes: &[Envelope]) -> SessionState {
    for e in envelopes {
        state.apply(e);
    }
    state
}

fn fold(envelopes: &[Envelope]) -> SessionState {
    fold_onto(SessionState::new(), envelopes)
}

/// The state through a binary snapshot.
fn binary(state: &SessionState) -> SessionState {
    let body = state.encode_snapshot(u64::MAX).expect("encode snapshot");
    SessionState::decode_snapshot(&body, &SliceRegistry::new(), u64::MAX).expect("decode snapshot")
}

/// The state through a JSON snapshot (with the LOG slices, so that
/// everything is in it).
fn json(state: &SessionState) -> SessionState {
    let text = state.to_json(&JsonOptions {
        include_logs: true,
        ..JsonOptions::default()
    });
    SessionState::from_json(&text, &SliceRegistry::new()).expect("from_json")
}

type Form = (&'static str, fn(&SessionState) -> SessionState);
const FORMS: [Form; 2] = [("binary", binary), ("json", json)];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_snapshot_restores_the_conversation_log(events in stream()) {
        let state = fold(&events);
        for (form, through) in FORMS {
            let back = through(&state);
            prop_assert_eq!(
                back.conversation_log(), state.conversation_log(), "{} snapshot", form
            );
            prop_assert_eq!(&back, &state, "{} snapshot", form);
        }
    }

    #[test]
    fn a_fold_resumed_from_a_snapshot_equals_the_whole_fold(
        events in stream(),
        cut in any::<prop::sample::Index>(),
    ) {
        let whole = fold(&events);
        let k = cut.index(events.len() + 1);
        let prefix = fold(&events[..k]);
        for (form, through) in FORMS {
            let resumed = fold_onto(through(&prefix), &events[k..]);
            prop_assert_eq!(
                resumed.conversation_log(), whole.conversation_log(),
                "{} snapshot after {} of {} events", form, k, events.len()
            );
            prop_assert_eq!(
                &resumed, &whole, "{} snapshot after {} of {} events", form, k, events.len()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Written through a journal whose snapshots are deltas every `every`
    /// events: the state at every seq (read from the chain of snapshots at
    /// or before it) and the state a reopened session reads from its chain
    /// are the fold of the stream.
    #[test]
    fn delta_snapshots_give_the_fold_at_every_seq(events in stream(), every in 1u64..5) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let config = agent_journal::JournalConfig {
            checkpoint: agent_journal::CheckpointStrategy::Incremental { every },
            durability: agent_journal::Durability::Buffered,
            ..agent_journal::JournalConfig::default()
        };
        let (id, stored) = {
            let j = agent_journal::Journal::open_with(&path, config.clone()).expect("open");
            let s = j.create_session().expect("create");
            for e in &events {
                s.append(e.event.clone()).expect("append");
            }
            let stored = s.events(..).expect("events");
            for k in 0..stored.len() {
                prop_assert_eq!(&s.state_at(k as u64).expect("state_at"), &fold(&stored[..=k]), "at {}", k);
            }
            (s.id(), stored)
        };
        let j = agent_journal::Journal::open_with(&path, config).expect("reopen");
        let s = j.session(id).expect("session");
        prop_assert!(s.load_stats().events_replayed < every, "{:?}", s.load_stats());
        prop_assert_eq!(&*s.state(), &fold(&stored));
        let report = j.verify(None, |_| {}).expect("verify");
        prop_assert!(report.is_clean(), "{:?}", report.problems);
    }
}

// ------------------------------------------------ cases the properties found

fn at(seq: u64, event: Event) -> Envelope {
    Envelope {
        session: SESSION,
        seq,
        at: chrono::DateTime::UNIX_EPOCH,
        event,
    }
}

fn conv(e: ConversationEvent) -> Event {
    Event::Conversation(Box::new(e))
}

fn created() -> Event {
    conv(ConversationEvent::Created(Conversation {
        id: SESSION,
        agent: "support".into(),
        subject_id: None,
        title: None,
        created_at: chrono::DateTime::UNIX_EPOCH,
        updated_at: chrono::DateTime::UNIX_EPOCH,
        metadata: Metadata::new(),
    }))
}

fn message(turn: Option<TurnId>, tool_calls: Vec<ToolCallRecord>) -> Event {
    let mut m = ConversationMessage::assistant("hi");
    m.id = MessageId(Uuid::from_bytes([10; 16]));
    m.conversation_id = SESSION;
    m.created_at = chrono::DateTime::UNIX_EPOCH;
    m.turn_id = turn;
    m.tool_calls = tool_calls;
    conv(ConversationEvent::Message(m))
}

fn provider_call(turn: TurnId) -> Event {
    conv(ConversationEvent::ProviderCall(ProviderCallRecord {
        id: Uuid::from_bytes([30; 16]),
        conversation_id: SESSION,
        turn_id: turn,
        provider: "scripted".into(),
        model: "m".into(),
        operation: ProviderOperation::Chat,
        request_id: None,
        correlation_id: None,
        parent_correlation_id: None,
        request_metadata: Metadata::new(),
        response_metadata: Metadata::new(),
        parameters: Metadata::new(),
        tools: Vec::new(),
        sent_messages: Vec::new(),
        usage: None,
        outcome: None,
        started_at: chrono::DateTime::UNIX_EPOCH,
        finished_at: None,
    }))
}

/// A session with conversation records but no `Created` event: both
/// snapshot forms keep them (they once wrote the log only for a
/// conversation, and a reopened session lost them).
#[test]
fn a_conversation_log_without_created_survives_snapshots() {
    let state = fold(&[at(0, message(None, Vec::new()))]);
    assert_eq!(state.conversation_log().messages().len(), 1);
    for (form, through) in FORMS {
        assert_eq!(
            through(&state).conversation_log(),
            state.conversation_log(),
            "{form} snapshot"
        );
    }
}

/// A provider call recorded again under another turn moves to it in
/// `calls_of`, as a snapshot's rebuilt index has it.
#[test]
fn a_provider_call_recorded_under_another_turn_moves_to_it() {
    let (a, b) = (
        TurnId(Uuid::from_bytes([20; 16])),
        TurnId(Uuid::from_bytes([21; 16])),
    );
    let state = fold(&[
        at(0, created()),
        at(1, provider_call(a)),
        at(2, provider_call(b)),
    ]);
    let log = state.conversation_log();
    assert_eq!(log.calls()[0].turn_id, b);
    assert_eq!(
        (log.calls_of(a).count(), log.calls_of(b).count()),
        (0, 1),
        "the call's record names turn b"
    );
    assert_eq!(binary(&state).conversation_log(), log);
}

/// A conversation message's tool call status is ignored (its `ToolStatus`
/// events alone say it), so both snapshot forms give back the fold.
#[test]
fn a_status_in_a_conversation_message_is_ignored_and_snapshots_agree() {
    let turn = TurnId(Uuid::from_bytes([20; 16]));
    let mut call = ToolCallRecord::new(CallId("call_1".into()), "ls", "{}");
    call.status = ToolStatus::Started;
    let state = fold(&[at(0, created()), at(1, message(Some(turn), vec![call]))]);
    assert_eq!(binary(&state), state);
    assert_eq!(json(&state), state);
}

/// Whole states compare their conversation logs too.
#[test]
fn session_states_with_different_conversation_logs_differ() {
    let with = fold(&[at(0, created()), at(1, message(None, Vec::new()))]);
    let custom = Event::Custom {
        kind: "k".into(),
        payload: Vec::new(),
    };
    let without = fold(&[at(0, created()), at(1, custom)]);
    assert_ne!(with.conversation_log(), without.conversation_log());
    assert_ne!(with, without);
}
