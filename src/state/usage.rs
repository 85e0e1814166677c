//! The `Usage` slice: token usage per evaluation and for the session.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{ProviderCallRecord, TokenUsage};
use crate::model::EvaluationId;

/// Token totals and number of provider calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Summed token counts (saturating).
    pub usage: TokenUsage,
    /// Number of provider calls.
    pub provider_calls: u64,
}

impl UsageTotals {
    /// Adds another total (saturating, so the sum is associative).
    pub fn add(&mut self, other: &UsageTotals) {
        self.usage.add_counts(&other.usage);
        self.provider_calls = self.provider_calls.saturating_add(other.provider_calls);
    }
}

/// Token usage of the provider calls, per evaluation and in total (state
/// slice), for token-limit compaction and cost reports. O(log n) per event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    per_eval: BTreeMap<EvaluationId, UsageTotals>,
    total: UsageTotals,
}

impl Usage {
    /// The totals of one evaluation.
    pub fn for_evaluation(&self, eval: EvaluationId) -> Option<&UsageTotals> {
        self.per_eval.get(&eval)
    }

    /// The totals of the session.
    pub fn total(&self) -> &UsageTotals {
        &self.total
    }

    /// Per-evaluation totals, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (EvaluationId, &UsageTotals)> + '_ {
        self.per_eval.iter().map(|(k, v)| (*k, v))
    }

    /// Puts the totals of one evaluation (a delta snapshot's).
    pub(crate) fn put(&mut self, eval: EvaluationId, totals: UsageTotals) {
        self.per_eval.insert(eval, totals);
    }

    /// Sets the session's totals (a delta snapshot's).
    pub(crate) fn set_total(&mut self, total: UsageTotals) {
        self.total = total;
    }

    pub(crate) fn on_provider_call(&mut self, call: &ProviderCallRecord) {
        let one = UsageTotals {
            usage: call.usage.clone(),
            provider_calls: 1,
        };
        self.per_eval
            .entry(call.evaluation_id)
            .or_default()
            .add(&one);
        self.total.add(&one);
    }

    /// Builds the slice from per-evaluation totals; the session total is
    /// their sum. Fails on a repeated evaluation, with the item's index.
    pub(crate) fn from_items(
        items: impl IntoIterator<Item = (EvaluationId, UsageTotals)>,
    ) -> Result<Self, (usize, String)> {
        let mut out = Usage::default();
        for (i, (eval, totals)) in items.into_iter().enumerate() {
            out.total.add(&totals);
            if out.per_eval.insert(eval, totals).is_some() {
                return Err((i, format!("duplicate evaluation {eval}")));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ProviderOutcome;
    use crate::model::now;

    #[test]
    fn sums_per_evaluation_and_in_total() {
        let (a, b) = (EvaluationId::new(), EvaluationId::new());
        let call = |eval, input| ProviderCallRecord {
            evaluation_id: eval,
            turn: 1,
            provider: "scripted".into(),
            model: "m".into(),
            usage: TokenUsage {
                input_tokens: input,
                output_tokens: 1,
                ..TokenUsage::default()
            },
            started_at: now(),
            finished_at: now(),
            outcome: ProviderOutcome::Ok,
        };
        let mut u = Usage::default();
        u.on_provider_call(&call(a, 10));
        u.on_provider_call(&call(a, 5));
        u.on_provider_call(&call(b, u64::MAX));
        assert_eq!(
            u.for_evaluation(a)
                .map(|t| (t.usage.input_tokens, t.provider_calls)),
            Some((15, 2))
        );
        assert_eq!(u.total().usage.input_tokens, u64::MAX);
        assert_eq!(u.total().provider_calls, 3);
        let rebuilt = Usage::from_items(u.iter().map(|(k, v)| (k, v.clone()))).expect("rebuild");
        assert_eq!(rebuilt, u);
    }
}
