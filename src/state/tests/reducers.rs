//! The reducers under any order and duplication of events, snapshots of
//! the folded state, application slices and restores.

use super::*;

fn binary_round_trip(s: &SessionState, reg: &SliceRegistry) -> SessionState {
    let body = s.encode_snapshot(LIMIT).expect("encode");
    let frame = crate::format::seal(&body);
    let body = crate::format::verify_frame(&frame).expect("frame");
    SessionState::decode_snapshot(body, reg, LIMIT).expect("decode")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fold_all_equals_fold_prefix_then_rest_through_a_snapshot(
        (events, shuffled) in in_order_and_shuffled()
    ) {
        let reg = registry();
        for events in [events, shuffled] {
            let envs = envelopes(events);
            let all = fold(SessionState::with_slices(&reg), &envs);
            for k in 0..=envs.len() {
                let prefix = fold(SessionState::with_slices(&reg), &envs[..k]);
                prop_assert_eq!(&fold(prefix.clone(), &envs[k..]), &all);
                let restored = binary_round_trip(&prefix, &reg);
                prop_assert_eq!(&fold(restored, &envs[k..]), &all);
            }
        }
    }

    #[test]
    fn fold_all_equals_a_chain_of_delta_snapshots_then_the_tail(
        (events, shuffled) in in_order_and_shuffled(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let reg = registry();
        for events in [events, shuffled] {
            let envs = envelopes(events);
            let all = fold(SessionState::with_slices(&reg), &envs);
            // Snapshots after the events before each cut (at least one).
            let mut points: Vec<usize> = cuts.iter().map(|c| 1 + c.index(envs.len())).collect();
            points.sort_unstable();
            points.dedup();
            let mut live = SessionState::with_slices(&reg);
            let mut chain = Vec::new();
            let mut at = 0;
            for &k in &points {
                live = fold(live, &envs[at..k]);
                at = k;
                let frame = if chain.is_empty() {
                    live.encode_snapshot_frame(LIMIT, 0)
                } else {
                    live.encode_delta_frame(LIMIT, 0)
                }
                .expect("encode");
                live.mark(k as u64 - 1);
                chain.push(crate::format::SharedBytes::from(frame));
            }
            let mut back =
                SessionState::decode_snapshot_frame(chain[0].clone(), &reg, LIMIT).expect("whole");
            for (i, frame) in chain.iter().enumerate().skip(1) {
                back.apply_delta_frame(frame.clone(), &reg, LIMIT)
                    .unwrap_or_else(|e| panic!("delta {i} of {}: {e}", chain.len()));
            }
            let prefix = fold(SessionState::with_slices(&reg), &envs[..at]);
            prop_assert_eq!(&back, &prefix);
            prop_assert_eq!(&fold(back, &envs[at..]), &all);
            // Recording changes does not change the fold.
            prop_assert_eq!(&fold(live, &envs[at..]), &all);
        }
    }

    #[test]
    fn messages_do_not_depend_on_order_or_duplicates(
        (events, shuffled, dups) in shuffled_with_duplicates(12)
    ) {
        let in_order = fold(SessionState::new(), &envelopes(events));
        let mut permuted = shuffled.clone();
        for i in dups {
            if let Some(e @ (Event::Message(_) | Event::ToolStatus { .. })) = shuffled.get(i) {
                permuted.push(e.clone());
            }
        }
        let other = fold(SessionState::new(), &envelopes(permuted));
        prop_assert_eq!(other.messages(), in_order.messages());
        let views = |s: &SessionState| {
            s.messages()
                .evaluations()
                .map(|e| s.conversation_view(e).map(|v| (v.user_messages.len(), v.turns.len())))
                .collect::<Vec<_>>()
        };
        prop_assert_eq!(views(&other), views(&in_order));
        let counts = |s: &SessionState| {
            s.evaluations().iter().map(|e| (e.turns, e.message_count)).collect::<Vec<_>>()
        };
        prop_assert_eq!(counts(&other), counts(&in_order));
        for c in in_order.tool_calls().iter() {
            let got = other.tool_calls().get(c.evaluation_id, &c.call_id).map(|o| (o.status, o.result));
            prop_assert_eq!(got, Some((c.status, c.result)));
        }
    }

    #[test]
    fn folding_frames_without_decoding_plain_messages_changes_nothing(
        (events, shuffled, dups) in shuffled_with_duplicates(8)
    ) {
        let mut permuted = shuffled.clone();
        for i in dups {
            if let Some(e) = shuffled.get(i) {
                permuted.push(e.clone());
            }
        }
        for (in_order, events) in [(true, events), (false, permuted)] {
            let envs = envelopes(events);
            let decoded = fold(SessionState::new(), &envs);
            let mut lazy = SessionState::new();
            let mut kept = 0;
            for env in &envs {
                let frame = crate::format::encode_frame(env, LIMIT).expect("frame");
                let body = crate::format::verify_frame(&frame).expect("body");
                match crate::state::peek_message(body) {
                    Some(m) => {
                        prop_assert_eq!((m.session, m.seq), (env.session, env.seq));
                        // Kept in its frame, or copied, in turns.
                        let shared = crate::format::SharedBytes::from(frame.clone());
                        let keep = (env.seq % 2 == 0).then_some((&shared, crate::format::FRAME_HEADER_LEN));
                        if lazy.fold_plain_message(&m, keep) {
                            kept += 1;
                        } else {
                            lazy.apply_framed(env.clone(), &shared, crate::format::FRAME_HEADER_LEN + m.start);
                        }
                    }
                    None => {
                        let plain = matches!(&env.event, Event::Message(m)
                            if m.tool_calls.is_empty() && m.tool_call_id.is_none());
                        prop_assert!(!plain, "a plain message was not recognised");
                        // Any other message is kept in its frame, or
                        // decoded, in turns (as a replay and an append do).
                        match crate::format::message::message_start(body) {
                            Some(start) if env.seq % 3 != 0 => {
                                let shared = crate::format::SharedBytes::from(frame.clone());
                                lazy.apply_framed(env.clone(), &shared, crate::format::FRAME_HEADER_LEN + start);
                            }
                            Some(_) => lazy.apply_owned(env.clone()),
                            None => {
                                prop_assert!(!matches!(env.event, Event::Message(_)));
                                lazy.apply_owned(env.clone());
                            }
                        }
                    }
                }
            }
            prop_assert_eq!(&lazy, &decoded);
            // The bytes of a message whose calls moved on since are given
            // the statuses: a snapshot depends only on the state.
            prop_assert_eq!(lazy.encode_snapshot(LIMIT).ok(), decoded.encode_snapshot(LIMIT).ok());
            for (a, b) in lazy.messages().iter().zip(decoded.messages().iter()) {
                prop_assert_eq!(a, b);
            }
            prop_assert_eq!(lazy.evaluations(), decoded.evaluations());
            // Messages kept as bytes are copied into a snapshot as they are.
            let reg = SliceRegistry::new();
            prop_assert_eq!(&binary_round_trip(&lazy, &reg), &decoded);
            // In order, every evaluation starts before its messages: each
            // plain message takes the path without decoding.
            let plain = envs.iter().filter(|e| matches!(&e.event, Event::Message(m)
                if m.tool_calls.is_empty() && m.tool_call_id.is_none())).count();
            if in_order {
                prop_assert!(kept > 0 || plain == 0, "{} plain messages, none kept as bytes", plain);
            }
        }
    }

    #[test]
    fn the_latest_evaluation_is_the_last_started_in_the_stream(
        (events, shuffled) in in_order_and_shuffled()
    ) {
        let reg = registry();
        for events in [events, shuffled] {
            // Started by its EvaluationStarted or its first message,
            // whichever comes first; the latest is the last so started.
            let mut started = Vec::new();
            for e in &events {
                let eval = match e {
                    Event::EvaluationStarted { evaluation_id, .. } => *evaluation_id,
                    Event::Message(m) => m.evaluation_id,
                    _ => continue,
                };
                if !started.contains(&eval) {
                    started.push(eval);
                }
            }
            let envs = envelopes(events);
            let all = fold(SessionState::with_slices(&reg), &envs);
            prop_assert_eq!(all.evaluations().latest().map(|e| e.evaluation_id), started.last().copied());
            for k in 0..=envs.len() {
                let prefix = fold(SessionState::with_slices(&reg), &envs[..k]);
                let restored = fold(binary_round_trip(&prefix, &reg), &envs[k..]);
                prop_assert_eq!(
                    restored.evaluations().latest().map(|e| e.evaluation_id),
                    started.last().copied()
                );
            }
        }
    }

    #[test]
    fn binary_snapshot_round_trips((events, shuffled) in in_order_and_shuffled()) {
        let reg = registry();
        let s = fold(SessionState::with_slices(&reg), &envelopes(events));
        prop_assert_eq!(&binary_round_trip(&s, &reg), &s);
        // Out of order: statuses before their messages, results before calls.
        let s = fold(SessionState::with_slices(&reg), &envelopes(shuffled));
        let back = binary_round_trip(&s, &reg);
        prop_assert_eq!(&back, &s);
        prop_assert_eq!(back.encode_snapshot(LIMIT).ok(), s.encode_snapshot(LIMIT).ok());
    }
}

#[test]
fn state_and_registry_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SessionState>();
    assert_send_sync::<SliceRegistry>();
}

#[test]
fn tool_status_updates_the_assistant_message_and_tool_calls() {
    let spec = EvalSpec {
        started: true,
        turns: vec![vec![
            CallSpec {
                outcome: 2,
                with_result: true,
            },
            CallSpec {
                outcome: 1,
                with_result: false,
            },
            CallSpec {
                outcome: 0,
                with_result: false,
            },
        ]],
        final_answer: false,
        compact: None,
        adapter_state: false,
        custom: 0,
        finished: false,
    };
    let s = fold(SessionState::new(), &envelopes(build_events(&[spec])));
    let eval = eval_id(0);
    let a = s
        .messages()
        .for_evaluation(eval)
        .find(|m| m.role == Role::Assistant)
        .expect("assistant");
    let statuses: Vec<ToolStatus> = a.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        vec![
            ToolStatus::Completed,
            ToolStatus::Started,
            ToolStatus::Pending
        ]
    );
    let ids = |it: &mut dyn Iterator<Item = &ToolCallInfo>| {
        it.map(|c| c.call_id.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&mut s.tool_calls().in_doubt(eval)), vec!["c1_1"]);
    assert_eq!(ids(&mut s.tool_calls().pending(eval)), vec!["c1_2"]);
    let view = s.conversation_view(eval).expect("view");
    assert_eq!(view.turns.len(), 1);
    assert_eq!(view.turns[0].tool_messages.len(), 1);
    assert_eq!(
        s.evaluations().latest().map(|e| e.evaluation_id),
        Some(eval)
    );
    assert_eq!(s.usage().total().provider_calls, 1);
    assert_eq!(s.forked_from(), Some((SessionId(Uuid::from_u128(7)), 3)));
}

#[test]
fn app_slice_round_trips_and_a_missing_one_is_refused() {
    let reg = registry();
    let spec = EvalSpec {
        started: true,
        turns: vec![],
        final_answer: true,
        compact: None,
        adapter_state: true,
        custom: 2,
        finished: true,
    };
    let s = fold(
        SessionState::with_slices(&reg),
        &envelopes(build_events(&[spec])),
    );
    assert_eq!(s.slice::<CustomCounter>().map(|c| c.total), Some(2));
    assert_eq!(s.slice::<CustomLog>().map(|c| c.0.len()), Some(2));
    assert_eq!(binary_round_trip(&s, &reg), s);

    // A registry with a slice the snapshot lacks: replay instead.
    let plain = fold(SessionState::new(), &envelopes(build_events(&[])));
    let body = plain.encode_snapshot(LIMIT).expect("encode");
    let r = SessionState::decode_snapshot(&body, &reg, LIMIT);
    assert!(matches!(&r, Err(Error::SnapshotRestore(m)) if m.contains("test:CustomCounter")));
    // Without the registry the app slices are dropped.
    let r = SessionState::decode_snapshot(
        &s.encode_snapshot(LIMIT).expect("encode"),
        &SliceRegistry::new(),
        LIMIT,
    );
    assert!(
        matches!(&r, Ok(d) if d.slice::<CustomCounter>().is_none() && d.messages() == s.messages())
    );
}

#[test]
fn damaged_or_oversized_snapshots_are_refused() {
    let reg = registry();
    let spec = EvalSpec {
        started: true,
        turns: vec![vec![CallSpec {
            outcome: 1,
            with_result: false,
        }]],
        final_answer: false,
        compact: None,
        adapter_state: false,
        custom: 1,
        finished: false,
    };
    let s = fold(
        SessionState::with_slices(&reg),
        &envelopes(build_events(&[spec])),
    );
    let body = s.encode_snapshot(LIMIT).expect("encode");
    for cut in 0..body.len() {
        let r = SessionState::decode_snapshot(&body[..cut], &reg, LIMIT);
        assert!(matches!(r, Err(Error::SnapshotRestore(_))), "cut at {cut}");
    }
    let mut other_format = body.clone();
    other_format[0] = 4;
    let r = SessionState::decode_snapshot(&other_format, &reg, LIMIT);
    assert!(matches!(&r, Err(Error::SnapshotRestore(m)) if m.contains("format 4")));
    assert!(matches!(
        s.encode_snapshot(64),
        Err(Error::TooLarge { limit: 64, .. })
    ));
    // Any byte flipped: an error or some state, never a panic.
    for i in 0..body.len() {
        let mut b = body.clone();
        b[i] ^= 0x5a;
        let _ = SessionState::decode_snapshot(&b, &reg, LIMIT);
    }
}

#[test]
fn restore_takes_state_slices_and_keeps_log_slices() {
    let reg = registry();
    let mk = |custom, adapter_state| EvalSpec {
        started: true,
        turns: vec![],
        final_answer: true,
        compact: None,
        adapter_state,
        custom,
        finished: false,
    };
    let live = fold(
        SessionState::with_slices(&reg),
        &envelopes(build_events(&[mk(2, true), mk(1, true)])),
    );
    let snap = fold(
        SessionState::with_slices(&reg),
        &envelopes(build_events(&[mk(1, false)])),
    );
    let mut restored = live.clone();
    restored.restore(snap.clone());
    assert_eq!(restored.messages(), snap.messages());
    assert_eq!(restored.last_seq(), snap.last_seq());
    assert_eq!(restored.adapter_states(), live.adapter_states());
    assert_eq!(
        restored.slice::<CustomCounter>(),
        snap.slice::<CustomCounter>()
    );
    assert_eq!(restored.slice::<CustomLog>(), live.slice::<CustomLog>());
}

#[test]
fn folding_in_order_messages_is_linear() {
    let eval = EvaluationId::new();
    let mut envs = Vec::with_capacity(200_000);
    let mut turn = 0;
    for seq in 0..200_000u64 {
        let mut m = InnerMessage::new(Role::Assistant, "x", eval, seq);
        if seq % 2 == 0 {
            turn += 1;
            m.tool_calls = vec![ToolCallRecord::new(format!("c{seq}"), "t", "{}")];
        } else {
            m.role = Role::Tool;
            m.tool_call_id = Some(CallId(format!("c{}", seq - 1)));
        }
        m.turn = turn;
        envs.push(Envelope {
            session: SessionId(Uuid::from_u128(1)),
            seq,
            at: t(seq as i64),
            event: Event::Message(m),
        });
    }
    let mut s = SessionState::new();
    let (first, second) = envs.split_at(100_000);
    let t0 = Instant::now();
    for e in first {
        s.apply(e);
    }
    let t1 = Instant::now();
    for e in second {
        s.apply(e);
    }
    let t2 = Instant::now();
    let (a, b) = (t1 - t0, t2 - t1);
    assert_eq!(s.messages().len(), 200_000);
    assert_eq!(s.tool_calls().len(), 100_000);
    assert!(b < a * 3, "first 100k: {a:?}, second 100k: {b:?}");
}
