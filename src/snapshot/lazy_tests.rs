//! The JSON form of lazily decoded states (binary snapshots whose messages
//! stay bytes until read): the same JSON as the state they were taken from.

use proptest::prelude::*;

use super::JsonOptions;
use crate::event::Envelope;
use crate::format::{FRAME_HEADER_LEN, seal};
use crate::state::tests::{
    EvalSpec, build_events, envelopes, fold, in_order_and_shuffled, one_eval_spec, registry, t,
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn lazily_decoded_states_fold_on_like_the_original(
        (events, shuffled) in in_order_and_shuffled()
    ) {
        let reg = registry();
        for events in [events, shuffled] {
            let envs = envelopes(events);
            let all = fold(SessionState::with_slices(&reg), &envs);
            let opts = JsonOptions {
                include_logs: true,
                created_at: Some(t(0)),
                ..JsonOptions::default()
            };
            for k in 0..=envs.len() {
                let prefix = fold(SessionState::with_slices(&reg), &envs[..k]);
                let body = prefix.encode_snapshot(LIMIT).expect("encode");

                // Decoded lazily: equal, same JSON, same bytes again (copied),
                // and folds on to the same state.
                let decoded = lazy(&prefix, &reg);
                prop_assert_eq!(&decoded, &prefix);
                prop_assert_eq!(decoded.to_json(&opts), prefix.to_json(&opts));
                prop_assert_eq!(&decoded.encode_snapshot(LIMIT).expect("encode"), &body);
                prop_assert_eq!(&fold_owned(lazy(&prefix, &reg), &envs[k..]), &all);
            }
        }
    }
}

#[test]
fn the_json_decoder_leaves_room_for_what_comes_next() {
    // The JSON form's decoder goes through the same constructor as the
    // binary one (see state/binary/tests.rs).
    let reg = SliceRegistry::new();
    let many: Vec<EvalSpec> = (0..40).map(|_| one_eval_spec()).collect();
    let s = fold(SessionState::new(), &envelopes(build_events(&many)));
    let calls = s.tool_calls().len();
    assert!(calls >= 40, "{calls}");
    let json = SessionState::from_json(&s.to_json(&JsonOptions::default()), &reg).expect("json");
    assert!(json.tool_calls().spare() >= calls / 8);
}
