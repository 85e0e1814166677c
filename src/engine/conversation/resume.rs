//! Turns left running by a process that died: found, resumed with the
//! inner loop's exactly-once rules, or recorded as failed.

use crate::engine::tool::Idempotency;
use crate::error::{Error, Result};
use crate::event::conversation::{
    CallOutcome, Conversation, ConversationId, Metadata, TurnError, TurnId,
};
use crate::model::Role;
use crate::model::{INTERRUPTED_ERROR, ToolStatus, now};

use super::engine::ConversationEngine;
use super::plan::PlannedTurn;
use super::store::{ConversationTurn, Page};

/// Options of [`ConversationEngine::resume_turn`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeTurn {
    /// Record in-doubt calls of [`Idempotency::Never`] tools as failed
    /// ("interrupted") and go on, instead of stopping with
    /// [`Error::ToolIdempotency`]. Default: false.
    pub interrupt_never_tools: bool,
}

/// The result of a tool call that had none when its turn was cancelled
/// ([`ConversationEngine::cancel_turn`]).
pub const CANCELLED_TOOL: &str = "cancelled: the turn was cancelled before this call's result was recorded; it was not run again";

/// The error of a turn settled by
/// [`InterruptedTurns::Answer`](super::InterruptedTurns::Answer) before its
/// model answered.
pub const ANSWERED_INTERRUPTED: &str = "interrupted: the process stopped before the model answered; its tool calls were answered before the next turn";

/// The error message of a provider call that was in flight when its
/// process died.
pub const INTERRUPTED_CALL: &str =
    "interrupted: the process stopped before the call's response was recorded";

impl ConversationEngine {
    /// The turns of conversation `id` recorded as pending or running that
    /// this engine is not running: left so by a process that died.
    pub fn interrupted_turns(&self, id: ConversationId) -> Result<Vec<ConversationTurn>> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let turns = self.store().list_turns(id, Page::all())?;
        Ok(turns
            .into_iter()
            .filter(|t| !t.status.is_finished() && !running.contains(&t.id))
            .collect())
    }

    fn interrupted(
        &self,
        id: ConversationId,
        turn: TurnId,
    ) -> Result<(Conversation, ConversationTurn)> {
        let conversation = self
            .store()
            .get_conversation(id)?
            .ok_or(Error::NotAConversation(id))?;
        let t = self
            .store()
            .get_turn(id, turn)?
            .ok_or(Error::TurnNotFound {
                conversation: id,
                turn: turn.0,
            })?;
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&turn);
        if t.status.is_finished() || running {
            return Err(Error::TurnFinished {
                conversation: id,
                turn: turn.0,
                status: if running {
                    "running here".into()
                } else {
                    t.status.as_str().into()
                },
            });
        }
        Ok((conversation, t))
    }

    /// Finishes an interrupted turn: a provider call left in flight is
    /// recorded as interrupted; completed tool calls are not run again;
    /// pending ones run; in-doubt ones (started, no result) follow their
    /// tool's [`Idempotency`]; then, unless the model had already answered,
    /// provider calls go on (each a new call record) as in
    /// [`run_turn`](Self::run_turn).
    ///
    /// Nothing is written before every check has passed.
    ///
    /// # Errors
    /// [`Error::TurnFinished`], [`Error::TurnNotFound`],
    /// [`Error::ToolIdempotency`], and those of `run_turn`.
    pub fn resume_turn(
        &self,
        id: ConversationId,
        turn: TurnId,
        options: ResumeTurn,
    ) -> Result<ConversationTurn> {
        let (conversation, mut turn) = self.interrupted(id, turn)?;
        let _running = self.mark_running(turn.id);
        if !options.interrupt_never_tools {
            if let Some(c) = turn
                .tool_calls
                .iter()
                .find(|c| c.status == ToolStatus::Started && self.never(&c.name))
            {
                return Err(Error::ToolIdempotency {
                    call_id: c.call_id.to_string(),
                    tool: c.name.clone(),
                });
            }
        }
        self.settle_tools(&mut turn)?;
        if answered(&turn) {
            return self.succeed(&conversation, &mut turn);
        }
        match turn.provider_calls.last() {
            Some(c) => {
                let plan = PlannedTurn {
                    provider: c.provider.clone(),
                    model: c.model.clone(),
                    parameters: c.parameters.clone(),
                };
                self.drive(&conversation, &mut turn, &plan, None)
            }
            None => {
                let hints: Metadata = turn
                    .metadata
                    .get("hints")
                    .and_then(|h| h.as_object())
                    .map(|o| o.clone().into_iter().collect())
                    .unwrap_or_default();
                self.start(&conversation, &mut turn, &hints)
            }
        }
    }

    /// True when tool `name` must never run twice.
    fn never(&self, name: &str) -> bool {
        self.tool(name)
            .is_some_and(|t| t.idempotency() == Idempotency::Never)
    }

    /// Closes the provider calls left in flight, then answers every tool
    /// call of `turn` without a result by its tool's [`Idempotency`], as
    /// the inner loop's resume does: completed calls are kept, pending ones
    /// run, in-doubt ones run again (`is_resume`) unless their tool must
    /// never run twice, which get the [`INTERRUPTED_ERROR`] result.
    fn settle_tools(&self, turn: &mut ConversationTurn) -> Result<()> {
        close_calls(turn);
        self.store().update_turn(turn)?;
        let in_doubt: Vec<_> = turn
            .tool_calls
            .iter()
            .filter(|c| c.status == ToolStatus::Started)
            .cloned()
            .collect();
        for c in &in_doubt {
            if self.never(&c.name) {
                self.record_tool_result(turn, c, Err(INTERRUPTED_ERROR.to_owned()))?;
            } else {
                self.run_tool(turn, &c.call_id, true)?;
            }
        }
        let pending: Vec<_> = turn
            .tool_calls
            .iter()
            .filter(|c| c.status == ToolStatus::Pending)
            .map(|c| c.call_id.clone())
            .collect();
        for call_id in &pending {
            self.run_tool(turn, call_id, false)?;
        }
        Ok(())
    }

    /// Settles an interrupted turn without calling its provider again
    /// ([`InterruptedTurns::Answer`](super::InterruptedTurns::Answer)): its
    /// tool calls are answered as [`settle_tools`](Self::settle_tools)
    /// says; then the turn is recorded as succeeded if its model had
    /// answered, else as failed with code `"interrupted"`.
    pub(super) fn answer_turn(&self, id: ConversationId, turn: TurnId) -> Result<ConversationTurn> {
        let (conversation, mut turn) = self.interrupted(id, turn)?;
        let _running = self.mark_running(turn.id);
        self.settle_tools(&mut turn)?;
        if answered(&turn) {
            return self.succeed(&conversation, &mut turn);
        }
        let error = TurnError {
            message: ANSWERED_INTERRUPTED.to_owned(),
            code: Some("interrupted".into()),
            provider: None,
            raw: serde_json::Value::Null,
        };
        match self.fail::<()>(&conversation, &mut turn, error) {
            Err(Error::TurnFailed { .. }) | Ok(()) => Ok(turn),
            Err(e) => Err(e),
        }
    }

    /// Records a turn that is not finished as cancelled (the spec's
    /// `cancelled`), with `reason` in its metadata (`cancel_reason`).
    ///
    /// - A turn left unfinished by a process that stopped (pending or
    ///   interrupted): nothing runs; a provider call in flight is closed as
    ///   interrupted, and every tool call without a result gets the
    ///   [`CANCELLED_TOOL`] result (recorded failed), so the history stays
    ///   valid for a provider; the turn is stored as cancelled and
    ///   returned.
    /// - A turn this engine is running (on another thread): it stops before
    ///   its next provider call (when every tool call it made has its
    ///   result), is stored as cancelled, and `run_turn` returns it so;
    ///   this returns the turn as stored now (still running).
    ///
    /// No hook is told (the spec has none for a cancellation).
    ///
    /// # Errors
    /// [`Error::TurnFinished`], [`Error::TurnNotFound`],
    /// [`Error::NotAConversation`].
    pub fn cancel_turn(
        &self,
        id: ConversationId,
        turn: TurnId,
        reason: &str,
    ) -> Result<ConversationTurn> {
        if self.request_cancel(turn, reason) {
            return self.store().get_turn(id, turn)?.ok_or(Error::TurnNotFound {
                conversation: id,
                turn: turn.0,
            });
        }
        let (conversation, mut turn) = self.interrupted(id, turn)?;
        let _running = self.mark_running(turn.id);
        self.give_up_open_calls(&mut turn, CANCELLED_TOOL)?;
        self.cancelled(&conversation, &mut turn, reason)
    }

    /// Closes `turn`'s provider calls in flight and gives each of its tool
    /// calls without a result the error `result`, running nothing: what
    /// `cancel_turn` and `fail_turn` share.
    fn give_up_open_calls(&self, turn: &mut ConversationTurn, result: &str) -> Result<()> {
        close_calls(turn);
        let open: Vec<_> = turn
            .tool_calls
            .iter()
            .filter(|c| !c.status.is_terminal())
            .cloned()
            .collect();
        for c in &open {
            self.record_tool_result(turn, c, Err(result.to_owned()))?;
        }
        Ok(())
    }

    /// Records an interrupted turn as failed without running anything: a
    /// provider call in flight and every tool call without a result are
    /// recorded as interrupted (the tool calls with an
    /// [`INTERRUPTED_ERROR`] result, so the history stays valid for a
    /// provider), then the turn as failed with code `"interrupted"` and
    /// `message`. The hooks are told as for a failed turn.
    pub fn fail_turn(
        &self,
        id: ConversationId,
        turn: TurnId,
        message: &str,
    ) -> Result<ConversationTurn> {
        let (conversation, mut turn) = self.interrupted(id, turn)?;
        let _running = self.mark_running(turn.id);
        self.give_up_open_calls(&mut turn, INTERRUPTED_ERROR)?;
        let error = TurnError {
            message: message.to_owned(),
            code: Some("interrupted".into()),
            provider: None,
            raw: serde_json::Value::Null,
        };
        match self.fail::<()>(&conversation, &mut turn, error) {
            Err(Error::TurnFailed { .. }) => Ok(turn),
            Err(e) => Err(e),
            Ok(()) => Ok(turn),
        }
    }
}

/// True when the model's last output is an answer (no tool call).
fn answered(turn: &ConversationTurn) -> bool {
    turn.output_messages
        .last()
        .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
}

/// Records every provider call of `turn` still in flight as interrupted.
fn close_calls(turn: &mut ConversationTurn) {
    for c in turn
        .provider_calls
        .iter_mut()
        .filter(|c| c.finished_at.is_none())
    {
        c.finished_at = Some(now());
        c.outcome = Some(CallOutcome {
            ok: false,
            status: None,
            error_category: Some("interrupted".into()),
            error: Some(INTERRUPTED_CALL.into()),
            attempts: 1,
        });
    }
}
