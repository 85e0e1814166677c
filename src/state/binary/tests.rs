//! `apply_owned` and lazily decoded messages.

use proptest::prelude::*;

use crate::event::{Envelope, Event};
use crate::format::{FRAME_HEADER_LEN, seal, verify_frame};
use crate::model::Role;
use crate::state::tests::{
    EvalSpec, build_events, envelopes, fold, in_order_and_shuffled, one_eval_spec, registry,
};
use crate::state::{SessionState, SliceRegistry};

const LIMIT: u64 = 1 << 24;

fn fold_owned(start: SessionState, envs: &[Envelope]) -> SessionState {
    let mut s = start;
    for e in envs {
        s.apply_owned(e.clone());
    }
    s
}

/// Decodes a snapshot of `s` as a store would hand it over: a whole frame.
fn lazy(s: &SessionState, reg: &SliceRegistry) -> SessionState {
    let frame = crate::format::SharedBytes::from(seal(&s.encode_snapshot(LIMIT).expect("encode")));
    SessionState::decode_snapshot_shared(frame, FRAME_HEADER_LEN, reg, LIMIT).expect("decode")
}

fn no_placeholder(s: &SessionState) -> bool {
    s.messages()
        .iter()
        .all(|m| !m.content.starts_with("<undecodable"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn apply_owned_equals_apply((events, shuffled) in in_order_and_shuffled()) {
        let reg = registry();
        for events in [events, shuffled] {
            // With a duplicate of every message: copies change nothing.
            let mut events = events;
            let dups: Vec<Event> = events
                .iter()
                .filter(|e| matches!(e, Event::Message(_)))
                .cloned()
                .collect();
            events.extend(dups);
            let envs = envelopes(events);
            let by_ref = fold(SessionState::with_slices(&reg), &envs);
            let owned = fold_owned(SessionState::with_slices(&reg), &envs);
            prop_assert_eq!(&owned, &by_ref);
            prop_assert_eq!(owned.encode_snapshot(LIMIT).ok(), by_ref.encode_snapshot(LIMIT).ok());
        }
    }
}

fn spec() -> Vec<EvalSpec> {
    vec![one_eval_spec()]
}

#[test]
fn a_decoded_state_has_room_for_what_comes_next() {
    // Decoded vectors that are exactly full make the first append after an
    // open copy every message id and every call (25-45 ms for a
    // million-event session, inside that append).
    let reg = SliceRegistry::new();
    let many: Vec<EvalSpec> = (0..40).map(|_| spec()[0].clone()).collect();
    let s = fold(SessionState::new(), &envelopes(build_events(&many)));
    let (messages, calls) = (s.messages().len(), s.tool_calls().len());
    assert!(messages >= 160 && calls >= 40, "{messages} {calls}");
    for d in [
        lazy(&s, &reg),
        SessionState::decode_snapshot(&s.encode_snapshot(LIMIT).expect("encode"), &reg, LIMIT)
            .expect("decode"),
    ] {
        assert_eq!(d, s);
        assert!(d.messages().index_spare() >= messages / 8, "messages");
        assert!(d.tool_calls().spare() >= calls / 8, "calls");
    }
}

#[test]
fn a_damaged_body_is_refused_at_load_never_served_later() {
    let reg = SliceRegistry::new();
    let s = fold(SessionState::new(), &envelopes(build_events(&spec())));
    let body = s.encode_snapshot(LIMIT).expect("encode");
    let mut refused = 0;
    for i in 0..body.len() {
        for x in [0x01, 0x80, 0xff] {
            let mut b = body.clone();
            b[i] ^= x;
            match SessionState::decode_snapshot(&b, &reg, LIMIT) {
                Err(_) => refused += 1,
                // Whatever was accepted decodes every message.
                Ok(d) => assert!(no_placeholder(&d), "flip {x:#x} at {i}"),
            }
        }
    }
    assert!(refused > body.len());
}

#[test]
fn a_status_after_decoding_updates_the_message_held_as_bytes() {
    let reg = SliceRegistry::new();
    let envs = envelopes(build_events(&spec()));
    // Cut right after the assistant message that makes the call.
    let cut = envs
        .iter()
        .position(|e| matches!(&e.event, Event::Message(m) if !m.tool_calls.is_empty()))
        .expect("a call")
        + 1;
    let all = fold(SessionState::new(), &envs);
    let mut d = lazy(&fold(SessionState::new(), &envs[..cut]), &reg);
    for e in &envs[cut..] {
        d.apply(e);
    }
    assert_eq!(d, all);
    let a = d
        .messages()
        .iter()
        .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .map(|m| m.tool_calls[0].status);
    assert_eq!(a, Some(crate::model::ToolStatus::Started));
    assert_eq!(
        d.encode_snapshot(LIMIT).ok(),
        all.encode_snapshot(LIMIT).ok()
    );
}

#[test]
fn a_snapshot_of_an_unknown_format_or_out_of_range_start_is_refused() {
    let reg = SliceRegistry::new();
    let s = fold(SessionState::new(), &envelopes(build_events(&spec())));
    let frame = crate::format::SharedBytes::from(seal(&s.encode_snapshot(LIMIT).expect("encode")));
    assert!(verify_frame(&frame).is_ok());
    let past = SessionState::decode_snapshot_shared(frame.clone(), frame.len() + 1, &reg, LIMIT);
    assert!(past.is_err());
    // Read from the wrong offset: refused, never a panic.
    for start in 0..FRAME_HEADER_LEN {
        let _ = SessionState::decode_snapshot_shared(frame.clone(), start, &reg, LIMIT);
    }
    let ok = SessionState::decode_snapshot_shared(frame, FRAME_HEADER_LEN, &reg, LIMIT);
    assert_eq!(ok.ok(), Some(s));
}

/// A snapshot over `PARALLEL_MIN` is decoded on two threads: the same
/// state, and a flipped byte anywhere is still refused (crc first).
#[test]
fn a_big_snapshot_decodes_on_two_threads_and_still_checks_its_crc() {
    // Ten evaluations: the conversation is rebuilt partly on each thread.
    let mut envs = vec![];
    let mut events: Vec<Event> = Vec::new();
    for _ in 0..10 {
        let eval = crate::model::EvaluationId::new();
        events.push(Event::EvaluationStarted {
            evaluation_id: eval,
            prompt_ns: "ns".into(),
            prompt_key: "k".into(),
            adapter: "a".into(),
        });
        events.extend((0..1_200u64).map(|i| {
            let role = [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Other,
            ][(i % 5) as usize];
            let mut m = crate::model::InnerMessage::new(role, "x".repeat(400), eval, i);
            m.turn = (i / 4) as u32;
            Event::Message(m)
        }));
    }
    envs.extend(envelopes(events));
    let s = fold(SessionState::new(), &envs);
    let reg = SliceRegistry::new();
    let frame = s.encode_snapshot_frame(u64::MAX, 0).expect("encode");
    assert!(frame.len() >= super::PARALLEL_MIN, "{}", frame.len());
    let got = SessionState::decode_snapshot_frame(
        crate::format::SharedBytes::from(frame.clone()),
        &reg,
        u64::MAX,
    )
    .expect("decode");
    assert_eq!(got, s);
    for e in s.messages().evaluations() {
        assert_eq!(got.conversation_view(e), s.conversation_view(e));
    }
    for at in [FRAME_HEADER_LEN + 3, frame.len() / 2, frame.len() - 3] {
        let mut bad = frame.clone();
        bad[at] ^= 0x01;
        let e = SessionState::decode_snapshot_frame(
            crate::format::SharedBytes::from(bad),
            &reg,
            u64::MAX,
        )
        .expect_err("a flipped byte");
        assert!(e.to_string().contains("checksum"), "at {at}: {e}");
    }
}

/// A snapshot of another format number (a delta's, or one no build
/// writes) is refused, so the session replays its stream instead.
#[test]
fn a_snapshot_of_another_format_is_refused() {
    let reg = SliceRegistry::new();
    let s = fold(SessionState::new(), &envelopes(build_events(&spec())));
    let mut body = s.encode_snapshot(LIMIT).expect("encode");
    assert_eq!(body[0], 1, "the format, a one-byte varint");
    for other in [0, 2, 3, 9] {
        body[0] = other;
        let r = SessionState::decode_snapshot(&body, &reg, LIMIT);
        let want = format!("snapshot format {other} where 1 is expected");
        assert!(
            matches!(&r, Err(crate::error::Error::SnapshotRestore(m)) if m.contains(&want)),
            "{:?}",
            r.err()
        );
    }
}
