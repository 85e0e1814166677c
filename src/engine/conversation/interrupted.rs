//! What a new turn does about the turns a stopped process left unfinished
//! (so that no request carries a tool call without its result), and the
//! cancellation of a turn.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::conversation::{Conversation, ConversationId, TurnId, TurnStatus};
use crate::model::now;

use super::engine::{ConversationEngine, InterruptedTurns};
use super::resume::ResumeTurn;
use super::store::ConversationTurn;

impl ConversationEngine {
    /// Settles every interrupted turn of conversation `id` as `policy`
    /// says (what [`run_turn`](Self::run_turn) does first), and returns
    /// them as stored after. The command line's `chat` calls it with
    /// [`InterruptedTurns::Resume`] when it continues a conversation.
    ///
    /// # Errors
    /// [`Error::InterruptedTurn`] under `Refuse`; [`Error::ToolIdempotency`]
    /// under `Resume`; storage errors.
    pub fn settle_interrupted(
        &self,
        id: ConversationId,
        policy: InterruptedTurns,
    ) -> Result<Vec<ConversationTurn>> {
        let turns = self.interrupted_turns(id)?;
        if let (InterruptedTurns::Refuse, Some(t)) = (policy, turns.first()) {
            return Err(Error::InterruptedTurn {
                conversation: id,
                turn: t.id.0,
            });
        }
        let mut out = Vec::with_capacity(turns.len());
        for t in turns {
            let done = match policy {
                InterruptedTurns::Answer => self.answer_turn(id, t.id),
                _ => self.resume_turn(id, t.id, ResumeTurn::default()),
            };
            match done {
                Ok(turn) => out.push(turn),
                // Stored as failed, every tool call answered: the history
                // is valid.
                Err(Error::TurnFailed { .. }) => {
                    if let Some(turn) = self.store().get_turn(id, t.id)? {
                        out.push(turn);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Asks the driver of `turn`, if this engine is running it, to stop
    /// (with `reason`); false when it is not running here.
    pub(super) fn request_cancel(&self, turn: TurnId, reason: &str) -> bool {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&turn);
        if running {
            self.cancelling
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(turn, reason.to_owned());
        }
        running
    }

    /// The reason of a cancellation asked for `turn`, taken.
    pub(super) fn take_cancel(&self, turn: TurnId) -> Option<String> {
        self.cancelling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&turn)
    }

    /// Stores `turn` (every tool call answered) as cancelled, and the
    /// conversation's `updated_at`.
    pub(super) fn cancelled(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        reason: &str,
    ) -> Result<ConversationTurn> {
        turn.status = TurnStatus::Cancelled;
        turn.finished_at = Some(now());
        turn.metadata
            .insert("cancel_reason".into(), Value::String(reason.to_owned()));
        self.store().update_turn(turn)?;
        let mut updated = conversation.clone();
        updated.updated_at = now();
        self.store().update_conversation(&updated)?;
        Ok(turn.clone())
    }
}
