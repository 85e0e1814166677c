//! The `Evaluations` slice: one record per evaluation (agent run).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};

use crate::event::Outcome;
use crate::model::{EvaluationId, InnerMessage};
use crate::state::keys::EvalKey;

/// What is known about one evaluation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationInfo {
    /// Its id.
    pub evaluation_id: EvaluationId,
    /// Prompt namespace (from `EvaluationStarted`, else from its first message).
    pub prompt_ns: String,
    /// Prompt key (from `EvaluationStarted`, else from its first message).
    pub prompt_key: String,
    /// The adapter running it (from `EvaluationStarted`).
    pub adapter: String,
    /// When `EvaluationStarted` was appended (the first one).
    #[serde(with = "crate::model::ts::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// When `EvaluationFinished` was appended (the last one).
    #[serde(with = "crate::model::ts::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// How it ended, if it did.
    pub outcome: Option<Outcome>,
    /// The highest `turn` among its messages.
    pub turns: u32,
    /// Number of distinct messages.
    pub message_count: u64,
    /// Messages with `sequence <=` this were compacted (highest `Compacted` seen).
    pub compacted_through: Option<u64>,
    /// The summary of that compaction.
    pub compaction_summary: Option<String>,
}

impl EvaluationInfo {
    fn new(evaluation_id: EvaluationId) -> Self {
        Self {
            evaluation_id,
            prompt_ns: String::new(),
            prompt_key: String::new(),
            adapter: String::new(),
            started_at: None,
            finished_at: None,
            outcome: None,
            turns: 0,
            message_count: 0,
            compacted_through: None,
            compaction_summary: None,
        }
    }

    /// True once it has an `EvaluationStarted` event or a message.
    pub fn is_started(&self) -> bool {
        self.started_at.is_some() || self.message_count > 0
    }
}

/// Every evaluation of the session, in id order (= start order with UUIDv7)
/// (state slice). O(log n) per event.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "Vec<EvaluationInfo>")]
pub struct Evaluations {
    evals: BTreeMap<EvalKey, EvaluationInfo>,
}

impl Evaluations {
    /// The evaluation with this id.
    pub fn get(&self, eval: EvaluationId) -> Option<&EvaluationInfo> {
        self.evals.get(&eval.into())
    }

    /// All evaluations, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &EvaluationInfo> + '_ {
        self.evals.values()
    }

    /// The latest evaluation: the greatest id with an `EvaluationStarted`
    /// event or messages.
    pub fn latest(&self) -> Option<&EvaluationInfo> {
        self.evals.values().rev().find(|e| e.is_started())
    }

    /// Number of evaluations.
    pub fn len(&self) -> usize {
        self.evals.len()
    }

    /// True when there is no evaluation.
    pub fn is_empty(&self) -> bool {
        self.evals.is_empty()
    }

    fn entry(&mut self, eval: EvaluationId) -> &mut EvaluationInfo {
        self.evals
            .entry(eval.into())
            .or_insert_with(|| EvaluationInfo::new(eval))
    }

    pub(crate) fn on_started(
        &mut self,
        eval: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
        adapter: &str,
        at: DateTime<Utc>,
    ) {
        let e = self.entry(eval);
        if e.started_at.is_none() {
            e.started_at = Some(at);
            prompt_ns.clone_into(&mut e.prompt_ns);
            prompt_key.clone_into(&mut e.prompt_key);
            adapter.clone_into(&mut e.adapter);
        }
    }

    /// Folds a (new, not duplicate) message.
    /// True when a message of `eval` would set its prompt namespace and key
    /// (no `EvaluationStarted` seen, and none set yet).
    pub(crate) fn wants_prompt(&self, eval: EvaluationId) -> bool {
        self.evals.get(&eval.into()).is_none_or(|e| {
            e.started_at.is_none() && e.prompt_ns.is_empty() && e.prompt_key.is_empty()
        })
    }

    /// [`on_message`](Self::on_message) of a message that does not set the
    /// prompt ([`wants_prompt`](Self::wants_prompt) is false).
    pub(crate) fn on_turn(&mut self, eval: EvaluationId, turn: u32) {
        let e = self.entry(eval);
        e.turns = e.turns.max(turn);
        e.message_count = e.message_count.saturating_add(1);
    }

    pub(crate) fn on_message(&mut self, m: &InnerMessage) {
        let e = self.entry(m.evaluation_id);
        if e.started_at.is_none() && e.prompt_ns.is_empty() && e.prompt_key.is_empty() {
            e.prompt_ns.clone_from(&m.prompt_ns);
            e.prompt_key.clone_from(&m.prompt_key);
        }
        e.turns = e.turns.max(m.turn);
        e.message_count = e.message_count.saturating_add(1);
    }

    pub(crate) fn on_compacted(
        &mut self,
        eval: EvaluationId,
        through: u64,
        summary: &Option<String>,
    ) {
        let e = self.entry(eval);
        if e.compacted_through.is_none_or(|t| through >= t) {
            e.compacted_through = Some(through);
            e.compaction_summary.clone_from(summary);
        }
    }

    pub(crate) fn on_finished(&mut self, eval: EvaluationId, outcome: &Outcome, at: DateTime<Utc>) {
        let e = self.entry(eval);
        e.finished_at = Some(at);
        e.outcome = Some(outcome.clone());
    }

    /// Builds the slice from its records. Fails on a repeated id, with the
    /// item's index.
    pub(crate) fn from_items(items: Vec<EvaluationInfo>) -> Result<Self, (usize, String)> {
        let mut evals = BTreeMap::new();
        for (i, e) in items.into_iter().enumerate() {
            let id = e.evaluation_id;
            if evals.insert(EvalKey::from(id), e).is_some() {
                return Err((i, format!("duplicate evaluation {id}")));
            }
        }
        Ok(Self { evals })
    }
}

impl Serialize for Evaluations {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.evals.values())
    }
}

impl TryFrom<Vec<EvaluationInfo>> for Evaluations {
    type Error = String;
    fn try_from(items: Vec<EvaluationInfo>) -> Result<Self, String> {
        Evaluations::from_items(items).map_err(|(i, e)| format!("evaluations[{i}]: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, now};

    #[test]
    fn latest_skips_evaluations_without_start_or_messages() {
        let (a, b) = (EvaluationId::new(), EvaluationId::new());
        let mut e = Evaluations::default();
        e.on_started(a, "ns", "key", "scripted", now());
        e.on_compacted(b, 3, &Some("sum".into()));
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(a));
        let mut m = InnerMessage::new(Role::Assistant, "x", b, 1);
        m.turn = 2;
        e.on_message(&m);
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(b));
        assert_eq!(e.get(b).map(|x| (x.turns, x.message_count)), Some((2, 1)));
        e.on_finished(a, &Outcome::Succeeded, now());
        assert_eq!(
            e.get(a).and_then(|x| x.outcome.clone()),
            Some(Outcome::Succeeded)
        );
        assert_eq!(e.len(), 2);
    }
}
