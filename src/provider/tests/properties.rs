//! Properties over generated histories: every rebuild is valid, imports and
//! round-trips, and any subset of imported messages still rebuilds validly.

use proptest::prelude::*;
use serde_json::Value;

use super::helpers::{Conv, an, check_both, oa, verdict};
use crate::model::{InnerMessage, ToolStatus};
use crate::provider::{anthropic, openai, validate};

#[derive(Clone, Debug)]
enum Op {
    System,
    User,
    /// An assistant message with this many new calls (and maybe one reused id).
    Assistant {
        calls: usize,
        reuse: bool,
        text: bool,
    },
    /// A result for the `k`-th call made so far (modulo), maybe failed.
    Result {
        k: usize,
        failed: bool,
    },
    /// A result for a call nobody made.
    Orphan,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::System),
        3 => Just(Op::User),
        4 => (0usize..4, proptest::bool::weighted(0.1), any::<bool>())
            .prop_map(|(calls, reuse, text)| Op::Assistant { calls, reuse, text }),
        6 => (any::<usize>(), proptest::bool::weighted(0.2)).prop_map(|(k, failed)| Op::Result { k, failed }),
        1 => Just(Op::Orphan),
    ]
}

fn build(ops: &[Op]) -> Vec<InnerMessage> {
    let mut c = Conv::new();
    let mut made: Vec<String> = Vec::new();
    let mut n = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::System => {
                c.system(&format!("system {i}"));
            }
            Op::User => {
                c.user(&format!("user {i}"));
            }
            Op::Assistant { calls, reuse, text } => {
                let mut ids: Vec<String> = (0..*calls)
                    .map(|_| {
                        n += 1;
                        format!("call_{n}")
                    })
                    .collect();
                if *reuse && !made.is_empty() {
                    ids.push(made[i % made.len()].clone());
                }
                let statuses = [
                    ToolStatus::Pending,
                    ToolStatus::Started,
                    ToolStatus::Completed,
                    ToolStatus::Failed,
                ];
                let calls: Vec<(&str, ToolStatus)> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| (id.as_str(), statuses[(i + j) % 4]))
                    .collect();
                c.assistant(if *text { "thinking aloud" } else { "" }, &calls);
                made.extend(ids);
            }
            Op::Result { k, failed } => {
                if !made.is_empty() {
                    let id = made[k % made.len()].clone();
                    c.tool(&id, if *failed { "error: boom" } else { "result" });
                }
            }
            Op::Orphan => {
                c.tool("nobody_called_this", "orphan");
            }
        }
    }
    c.msgs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_rebuilt_history_is_valid(ops in proptest::collection::vec(op(), 0..40)) {
        let msgs = build(&ops);
        let o = openai::to_messages(&msgs);
        prop_assert_eq!(verdict(validate::openai(&o)), Ok(()), "{}", Value::Array(o.clone()));
        let a = anthropic::to_request(&msgs);
        prop_assert_eq!(verdict(validate::anthropic(&a)), Ok(()), "{}", a);
    }

    #[test]
    fn rebuilt_histories_import_and_round_trip(ops in proptest::collection::vec(op(), 0..40)) {
        let msgs = build(&ops);
        // OpenAI: a rebuilt history imports, and exports to itself.
        let o = Value::Array(openai::to_messages(&msgs));
        let imported = oa(&o);
        prop_assert_eq!(Value::Array(openai::to_messages(&imported)), o.clone());
        // ... and translates to a valid Anthropic request.
        let a = anthropic::to_request(&imported);
        prop_assert_eq!(verdict(validate::anthropic(&a)), Ok(()), "{}", a);

        // Anthropic: the same.
        let a = anthropic::to_request(&msgs);
        let imported = an(&a);
        prop_assert_eq!(anthropic::to_request(&imported), a.clone());
        let o = openai::to_messages(&imported);
        prop_assert_eq!(verdict(validate::openai(&o)), Ok(()), "{}", Value::Array(o.clone()));
        // Tool results and their calls agree on the status after import.
        for m in &imported {
            for call in &m.tool_calls {
                prop_assert!(call.status == ToolStatus::Completed || call.status == ToolStatus::Failed);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Captured payloads never make a history invalid, even when messages
    /// are missing (a part of a split user message, a result, a call).
    #[test]
    fn any_subset_of_imported_messages_rebuilds_validly(
        ops in proptest::collection::vec(op(), 0..40),
        keep in proptest::collection::vec(proptest::bool::weighted(0.8), 80),
    ) {
        let msgs = build(&ops);
        let subset = |imported: Vec<InnerMessage>| -> Vec<InnerMessage> {
            imported
                .into_iter()
                .enumerate()
                .filter(|(i, _)| keep[i % keep.len()])
                .map(|(_, m)| m)
                .collect()
        };
        let from_anthropic = subset(an(&anthropic::to_request(&msgs)));
        check_both(&from_anthropic);
        let from_openai = subset(oa(&Value::Array(openai::to_messages(&msgs))));
        check_both(&from_openai);
        // Mixed: messages captured from both providers in one list.
        let mut mixed = from_anthropic;
        mixed.extend(from_openai);
        check_both(&mixed);
    }
}
