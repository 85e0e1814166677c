//! A WINK-shaped JSON snapshot (a checkpoint of the specs' flow) turned
//! into a journal session: the events whose fold is the snapshot's state,
//! so the checkpoint resumes like any crashed session.

use std::collections::BTreeSet;

use crate::error::Result;
use crate::event::conversation::ConversationEvent;
use crate::event::{Event, ProviderCallRecord, ProviderOutcome};
use crate::journal::Journal;
use crate::model::{EvaluationId, SessionId, ToolStatus};
use crate::session::Session;
use crate::state::SessionState;

/// The label of a session imported from a snapshot.
const IMPORTED: (&str, &str) = ("imported", "wink");

impl Journal {
    /// Imports a WINK-shaped JSON snapshot (as [`SessionState::to_json`]
    /// writes it; see `docs/spec-conformance.md` for how it differs from
    /// WINK's own `Snapshot.to_json`) as a new
    /// session whose state is the snapshot's, recorded as events in one
    /// atomic append: each evaluation's start, its messages in sequence
    /// order, each tool call's status (and error) after the message that
    /// made it, its end; the adapter states; the conversation engine's
    /// records. So [`Session::resume_plan`] and
    /// [`InnerLoop::resume`](crate::agent::InnerLoop::resume) continue it with
    /// exactly-once tools, like any crashed session.
    ///
    /// What events cannot carry is not invented: times of status changes
    /// are the import's (an event's time is its append's); each evaluation's token
    /// usage comes as one provider call record of provider `"imported"`
    /// holding its totals (the number of calls is not kept), and
    /// application slices start from their defaults.
    ///
    /// # Errors
    /// [`Error::SnapshotRestore`](crate::Error::SnapshotRestore) for a document [`SessionState::from_json`]
    /// refuses (naming where); nothing is written then.
    pub fn import_snapshot(&self, text: &str) -> Result<Session> {
        let state = SessionState::from_json(text, &self.config().slices)?;
        self.import_snapshot_state(&state)
    }

    /// Imports a snapshot already read ([`SessionState::from_json`],
    /// [`SessionState::from_json_reader`]) as [`import_snapshot`](Self::import_snapshot)
    /// does: so a caller can check the document before it opens (or
    /// creates) a journal, and read it once. Application slices are not
    /// recorded whatever registry read it (they start from their defaults).
    ///
    /// # Errors
    /// A storage error; nothing is written then.
    pub fn import_snapshot_state(&self, state: &SessionState) -> Result<Session> {
        self.import_snapshot_labelled(state, &[])
    }

    /// [`import_snapshot_state`](Self::import_snapshot_state), with
    /// `labels` added to the session's opening labels (after the
    /// snapshot's own and `imported`), as a caller records where the
    /// snapshot came from (the CLI: `import.sha256`, its content hash).
    ///
    /// # Errors
    /// A storage error; nothing is written then.
    pub fn import_snapshot_labelled(
        &self,
        state: &SessionState,
        labels: &[(String, String)],
    ) -> Result<Session> {
        let mut events = snapshot_events(state);
        if let Some(Event::SessionOpened { labels: opening }) = events.first_mut() {
            opening.extend(labels.iter().cloned());
        }
        self.create_session_from(SessionId::new(), events)
    }
}

/// The events whose fold has `state`'s messages, tool calls, evaluations,
/// adapter states and conversation records.
fn snapshot_events(state: &SessionState) -> Vec<Event> {
    let mut labels = state.labels().to_vec();
    labels.retain(|(k, _)| k != IMPORTED.0);
    labels.push((IMPORTED.0.into(), IMPORTED.1.into()));
    let mut events = vec![Event::SessionOpened { labels }];
    let statuses =
        |events: &mut Vec<Event>, eval: EvaluationId, calls: &[crate::model::ToolCallRecord]| {
            for call in calls {
                let Some(info) = state.tool_calls().get(eval, &call.call_id) else {
                    continue;
                };
                if info.status != ToolStatus::Pending {
                    events.push(Event::ToolStatus {
                        evaluation_id: eval,
                        call_id: call.call_id.clone(),
                        status: info.status,
                        error: info.error.clone(),
                    });
                }
            }
        };
    let mut done: BTreeSet<EvaluationId> = BTreeSet::new();
    for e in state.evaluations().iter() {
        done.insert(e.evaluation_id);
        events.push(Event::EvaluationStarted {
            evaluation_id: e.evaluation_id,
            prompt_ns: e.prompt_ns.clone(),
            prompt_key: e.prompt_key.clone(),
            adapter: e.adapter.clone(),
        });
        for m in state.messages().for_evaluation(e.evaluation_id) {
            events.push(Event::Message(m.clone()));
            statuses(&mut events, e.evaluation_id, &m.tool_calls);
        }
        if let Some(totals) = state.usage().for_evaluation(e.evaluation_id) {
            let at = e
                .finished_at
                .or(e.started_at)
                .unwrap_or_else(crate::model::now);
            events.push(Event::ProviderCall(ProviderCallRecord {
                evaluation_id: e.evaluation_id,
                turn: 0,
                provider: "imported".into(),
                model: String::new(),
                usage: totals.usage.clone(),
                started_at: at,
                finished_at: at,
                outcome: ProviderOutcome::Ok,
            }));
        }
        if let Some(through) = e.compacted_through {
            events.push(Event::Compacted {
                evaluation_id: e.evaluation_id,
                through_sequence: through,
                summary: e.compaction_summary.clone(),
            });
        }
        if let Some(outcome) = &e.outcome {
            events.push(Event::EvaluationFinished {
                evaluation_id: e.evaluation_id,
                outcome: outcome.clone(),
            });
        }
    }
    // Messages of evaluations the snapshot has no record of.
    for m in state
        .messages()
        .iter()
        .filter(|m| !done.contains(&m.evaluation_id))
    {
        events.push(Event::Message(m.clone()));
        statuses(&mut events, m.evaluation_id, &m.tool_calls);
    }
    events.extend(
        state
            .adapter_states()
            .iter()
            .cloned()
            .map(Event::AdapterState),
    );
    let log = state.conversation_log();
    if let Some(info) = log.info() {
        let conv = |c| Event::Conversation(Box::new(c));
        events.push(conv(ConversationEvent::Created(info.clone())));
        for m in log.messages() {
            events.push(conv(ConversationEvent::Message(m.clone())));
            if let Some(turn) = m.turn_id {
                statuses(&mut events, turn.as_evaluation(), &m.tool_calls);
            }
        }
        events.extend(
            log.calls()
                .iter()
                .cloned()
                .map(|c| conv(ConversationEvent::ProviderCall(c))),
        );
        events.extend(
            log.turns()
                .iter()
                .cloned()
                .map(|t| conv(ConversationEvent::Turn(t))),
        );
        events.extend(
            log.compactions()
                .iter()
                .cloned()
                .map(|c| conv(ConversationEvent::Compacted(c))),
        );
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_state_gives_one_labelled_opening() {
        let events = snapshot_events(&SessionState::new());
        assert_eq!(events.len(), 1);
        assert!(
            matches!(&events[0], Event::SessionOpened { labels } if labels == &[("imported".to_owned(), "wink".to_owned())])
        );
    }
}
