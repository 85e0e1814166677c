//! The `Evaluations` slice: one record per evaluation (agent run).

use std::collections::{BTreeMap, BTreeSet};

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
    /// Its place in the stream: the seq of its first `EvaluationStarted`
    /// event, or of its first message when that came before: `Some` once
    /// it [is started](Self::is_started), `None` before. This, not the id,
    /// orders evaluations in time: an id is a UUIDv7 made from the clock,
    /// and a clock can step back.
    pub started_seq: Option<u64>,
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
            started_seq: None,
        }
    }

    /// True once it has an `EvaluationStarted` event or a message.
    pub fn is_started(&self) -> bool {
        self.started_at.is_some() || self.message_count > 0
    }
}

/// Every evaluation of the session (state slice), looked up by id, and
/// ordered in time by its place in the stream
/// ([`EvaluationInfo::started_seq`]), not by its id: ids are UUIDv7, made
/// from a clock that can step back. O(log n) per event.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "Vec<EvaluationInfo>")]
pub struct Evaluations {
    evals: BTreeMap<EvalKey, EvaluationInfo>,
    /// `(started_seq, id)` of every evaluation that has a `started_seq`:
    /// derived from `evals`, kept for [`latest`](Self::latest).
    by_start: BTreeSet<(u64, EvalKey)>,
}

impl Evaluations {
    /// The evaluation with this id.
    pub fn get(&self, eval: EvaluationId) -> Option<&EvaluationInfo> {
        self.evals.get(&eval.into())
    }

    /// All evaluations, in id order (a stable order, whatever order their
    /// events came in; for their order in time, see
    /// [`EvaluationInfo::started_seq`]).
    pub fn iter(&self) -> impl Iterator<Item = &EvaluationInfo> + '_ {
        self.evals.values()
    }

    /// The latest evaluation: the one started last in the stream (the
    /// greatest [`started_seq`](EvaluationInfo::started_seq)), whatever
    /// its id.
    pub fn latest(&self) -> Option<&EvaluationInfo> {
        let (_, key) = self.by_start.last()?;
        self.evals.get(key)
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

    /// The evaluation's record, before the event at `seq` (its
    /// `EvaluationStarted` or a message) is folded into it: if that event
    /// starts it, `seq` is its place in the stream.
    fn starting(&mut self, eval: EvaluationId, seq: u64) -> &mut EvaluationInfo {
        let key = EvalKey::from(eval);
        let e = self
            .evals
            .entry(key)
            .or_insert_with(|| EvaluationInfo::new(eval));
        if !e.is_started() && e.started_seq.is_none() {
            e.started_seq = Some(seq);
            self.by_start.insert((seq, key));
        }
        e
    }

    pub(crate) fn on_started(
        &mut self,
        eval: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
        adapter: &str,
        at: DateTime<Utc>,
        seq: u64,
    ) {
        let e = self.starting(eval, seq);
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
    pub(crate) fn on_turn(&mut self, eval: EvaluationId, turn: u32, seq: u64) {
        let e = self.starting(eval, seq);
        e.turns = e.turns.max(turn);
        e.message_count = e.message_count.saturating_add(1);
    }

    /// Folds a new (not duplicate) message, the event at `seq`.
    pub(crate) fn on_message(&mut self, m: &InnerMessage, seq: u64) {
        let e = self.starting(m.evaluation_id, seq);
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

    /// Puts `info` in place of the evaluation's record (a delta snapshot's).
    pub(crate) fn put(&mut self, info: EvaluationInfo) -> Result<(), String> {
        let key = EvalKey::from(info.evaluation_id);
        check_place(&info)?;
        if let Some(seq) = self.evals.get(&key).and_then(|e| e.started_seq) {
            self.by_start.remove(&(seq, key));
        }
        if let Some(seq) = info.started_seq {
            self.by_start.insert((seq, key));
        }
        self.evals.insert(key, info);
        Ok(())
    }

    /// Builds the slice from its records. Fails on a repeated id, with the
    /// item's index.
    pub(crate) fn from_items(items: Vec<EvaluationInfo>) -> Result<Self, (usize, String)> {
        let mut evals = BTreeMap::new();
        let mut by_start = BTreeSet::new();
        for (i, e) in items.into_iter().enumerate() {
            let id = e.evaluation_id;
            let key = EvalKey::from(id);
            check_place(&e).map_err(|m| (i, m))?;
            if let Some(seq) = e.started_seq {
                by_start.insert((seq, key));
            }
            if evals.insert(key, e).is_some() {
                return Err((i, format!("duplicate evaluation {id}")));
            }
        }
        Ok(Self { evals, by_start })
    }
}

/// An evaluation record has a place in the stream if and only if it is
/// started: a record that breaks this (a snapshot or JSON no build
/// writes) is refused.
fn check_place(e: &EvaluationInfo) -> Result<(), String> {
    match (e.started_seq.is_some(), e.is_started()) {
        (true, false) => Err(format!(
            "evaluation {} has a started_seq but no start",
            e.evaluation_id
        )),
        (false, true) => Err(format!(
            "evaluation {} is started but has no started_seq",
            e.evaluation_id
        )),
        _ => Ok(()),
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
    use uuid::Uuid;

    #[test]
    fn latest_skips_evaluations_without_start_or_messages() {
        let (a, b) = (EvaluationId::new(), EvaluationId::new());
        let mut e = Evaluations::default();
        e.on_started(a, "ns", "key", "scripted", now(), 1);
        e.on_compacted(b, 3, &Some("sum".into()));
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(a));
        let mut m = InnerMessage::new(Role::Assistant, "x", b, 1);
        m.turn = 2;
        e.on_message(&m, 3);
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(b));
        assert_eq!(e.get(b).map(|x| (x.turns, x.message_count)), Some((2, 1)));
        e.on_finished(a, &Outcome::Succeeded, now());
        assert_eq!(
            e.get(a).and_then(|x| x.outcome.clone()),
            Some(Outcome::Succeeded)
        );
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn latest_is_the_last_started_in_the_stream_not_the_greatest_id() {
        // The clock stepped back between the two: the later one has the
        // smaller id.
        let early = EvaluationId(Uuid::from_u128(u128::MAX - 1));
        let late = EvaluationId(Uuid::from_u128(1));
        let mut e = Evaluations::default();
        e.on_started(early, "ns", "early", "scripted", now(), 1);
        e.on_message(&InnerMessage::new(Role::User, "hi", early, 0), 2);
        e.on_finished(early, &Outcome::Succeeded, now());
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(early));
        e.on_started(late, "ns", "late", "scripted", now(), 4);
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(late));
        // A repeated start and later messages do not move it.
        e.on_started(early, "ns", "early", "scripted", now(), 5);
        e.on_turn(early, 1, 6);
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(late));
        assert_eq!(e.get(early).and_then(|x| x.started_seq), Some(1));
        assert_eq!(e.get(late).and_then(|x| x.started_seq), Some(4));
        // Its first message places an evaluation with no EvaluationStarted.
        let imported = EvaluationId(Uuid::from_u128(0));
        e.on_turn(imported, 0, 7);
        assert_eq!(e.latest().map(|x| x.evaluation_id), Some(imported));
        // The records rebuild the same slice, in any order.
        let mut items: Vec<EvaluationInfo> = e.iter().cloned().collect();
        items.reverse();
        assert_eq!(Evaluations::from_items(items).ok(), Some(e));
    }

    #[test]
    fn a_start_without_a_place_or_a_place_without_a_start_is_refused() {
        let a = EvaluationId(Uuid::from_u128(1));
        let unplaced = EvaluationInfo {
            started_at: Some(now()),
            ..EvaluationInfo::new(a)
        };
        let err = Evaluations::from_items(vec![unplaced.clone()]).expect_err("refused");
        assert_eq!(err.0, 0);
        assert!(err.1.contains("no started_seq"), "{err:?}");
        assert!(Evaluations::default().put(unplaced).is_err());

        let placed = EvaluationInfo {
            started_seq: Some(3),
            ..EvaluationInfo::new(a)
        };
        let err = Evaluations::from_items(vec![placed]).expect_err("refused");
        assert_eq!(err.0, 0);
        assert!(err.1.contains("no start"), "{err:?}");
    }
}
