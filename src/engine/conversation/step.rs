//! One step of a turn: the history window, the provider call (stored when
//! it starts and when it ends), the output messages, the tool calls (each
//! `Started` stored before its handler runs, its result after), and the
//! compaction after a turn whose model stopped.

use std::sync::Arc;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::engine::tool::{Tool, ToolContext};
use crate::error::{Error, Result};
use crate::event::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationId, ConversationMessage, Metadata,
    ProviderCallRecord, ProviderOperation, TurnError, TurnId, TurnStatus,
};
use crate::model::Role;
use crate::model::{CallId, ToolCallRecord, ToolStatus, now};

use super::adapter::{AgentContext, ProviderCallOptions, ProviderChatRequest};
use super::compaction::{CompactionRequest, is_natural_stop};
use super::engine::{ConversationEngine, Prepared, Step, turn_error};
use super::order::{cut_after_turn, unanswered_call};
use super::plan::{
    DefaultHistoryBuilder, HistoryBuilder, HistoryContext, PlannedTurn, SENT_SUMMARY,
};
use super::store::{ConversationTurn, Page};

impl ConversationEngine {
    /// Compacts what is sent, if a compactor is configured and the model
    /// stopped; records the compaction. A compactor's error is recorded in
    /// the turn's metadata (`compaction_error`) and the turn goes on.
    pub(super) fn maybe_compact(&self, turn: &mut ConversationTurn) -> Result<()> {
        let Some(compactor) = &self.config.compactor else {
            return Ok(());
        };
        let Some(last) = turn.provider_calls.last() else {
            return Ok(());
        };
        if !is_natural_stop(&last.response_metadata) {
            return Ok(());
        }
        let id = turn.conversation_id;
        let window = self.store().history(id, None)?;
        let request = CompactionRequest {
            state_messages: &window.messages,
            leading_system: &window.system,
            summary: window.summary.as_deref(),
            last_usage: last.usage.as_ref(),
            provider: &last.provider,
        };
        let done = match compactor.compact(&request) {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(()),
            Err(e) => {
                turn.metadata
                    .insert("compaction_error".into(), Value::String(e.to_string()));
                return Ok(());
            }
        };
        let Some(first) = window.messages.get(done.keep_from) else {
            return Ok(());
        };
        let record = CompactionRecord {
            turn_id: Some(turn.id),
            first_kept: first.id,
            strategy: done.strategy,
            summary: done.summary,
            messages_before: window.messages.len() as u64,
            messages_after: (window.messages.len() - done.keep_from) as u64,
            tokens_before: last.usage.as_ref().map(|u| u.total()),
            at: now(),
        };
        self.store().record_compaction(id, &record)?;
        tracing::info!(
            conversation = %id,
            turn = %turn.id,
            strategy = %record.strategy,
            dropped = done.keep_from,
            kept = record.messages_after,
            summary = record.summary.is_some(),
            "compacted the conversation's history"
        );
        Ok(())
    }

    /// The history of `turn`'s next provider call: the store's window (cut
    /// after the turn's own messages: what was appended while it ran is
    /// the next turn's input), shaped by the history builder.
    pub(super) fn prepare(
        &self,
        conversation: &Conversation,
        turn: &ConversationTurn,
    ) -> Result<Prepared> {
        let default_builder = DefaultHistoryBuilder::default();
        let builder: &dyn HistoryBuilder = match &self.config.history_builder {
            Some(b) => &**b,
            None => &default_builder,
        };
        let mut window = self.store().history(conversation.id, builder.window())?;
        let input: Vec<_> = turn.input_messages.iter().map(|m| m.id).collect();
        cut_after_turn(&mut window.messages, turn.id, &input);
        let history = builder.build_history(&HistoryContext {
            conversation,
            system: &window.system,
            summary: window.summary.as_deref(),
            messages: &window.messages,
            next_turn_id: turn.id,
            agent: &turn.agent,
        });
        Ok(Prepared { window, history })
    }

    /// One provider call (with the history `first`, or one built now), and
    /// the tools it asks for.
    pub(super) fn step(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        plan: &PlannedTurn,
        first: Option<Prepared>,
    ) -> Result<Step> {
        let id = conversation.id;
        let adapter = self
            .config
            .providers
            .get(&plan.provider)
            .cloned()
            .ok_or_else(|| Error::UnknownProvider(plan.provider.clone()));
        let adapter = match adapter {
            Ok(a) => a,
            Err(e) => return self.fail(conversation, turn, turn_error(&e, "unknown_provider")),
        };
        let Prepared { window, history } = match first {
            Some(p) => p,
            None => self.prepare(conversation, turn)?,
        };
        if let Some(problem) = unanswered_call(&history) {
            let e = TurnError {
                message: format!("not sent: {problem}"),
                code: Some("unanswered_tool_call".into()),
                provider: None,
                raw: Value::Null,
            };
            return self.fail(conversation, turn, e);
        }
        let streaming = self.config.streaming && adapter.supports_streaming();
        let run_id = format!("{id}:{}", turn.id);
        let parent = self.parent_run_id(id, turn.id)?;
        let mut extensions = Metadata::new();
        extensions.insert("ai.provider".into(), json!(adapter.id()));
        extensions.insert("ai.model".into(), json!(plan.model));
        extensions.insert("ai.request_type".into(), json!("chat"));
        extensions.insert("ai.streaming".into(), json!(streaming));
        let labels = [
            ("conversationId", id.to_string()),
            ("turnId", turn.id.to_string()),
            ("provider", adapter.id().to_owned()),
            ("model", plan.model.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        // The spec's wiring: `AgentContext.metadata` is the call options'.
        let metadata: Metadata = turn
            .metadata
            .get("hints")
            .and_then(Value::as_object)
            .map(|o| o.clone().into_iter().collect())
            .unwrap_or_default();
        let options = ProviderCallOptions {
            conversation_id: id,
            turn_id: turn.id,
            agent: turn.agent.clone(),
            agent_context: AgentContext {
                agent: turn.agent.clone(),
                run_id: run_id.clone(),
                labels,
                metadata: metadata.clone(),
                correlation_id: run_id.clone(),
                parent_correlation_id: parent.clone(),
            },
            extensions: extensions.clone(),
            metadata,
        };
        let request = ProviderChatRequest {
            messages: history,
            model: plan.model.clone(),
            parameters: plan.parameters.clone(),
            tools: self.config.tools.iter().map(|t| t.spec()).collect(),
        };
        let mut call = ProviderCallRecord {
            id: Uuid::now_v7(),
            conversation_id: id,
            turn_id: turn.id,
            provider: adapter.id().to_owned(),
            model: plan.model.clone(),
            operation: ProviderOperation::Chat,
            request_id: None,
            correlation_id: Some(run_id),
            parent_correlation_id: parent,
            request_metadata: {
                let mut m = extensions;
                if let Some(summary) = &window.summary {
                    m.insert(SENT_SUMMARY.into(), json!(summary));
                }
                m
            },
            response_metadata: Metadata::new(),
            parameters: plan.parameters.clone(),
            tools: request.tools.clone(),
            sent_messages: request.messages.iter().filter_map(|m| m.source).collect(),
            usage: None,
            outcome: None,
            started_at: now(),
            finished_at: None,
        };
        turn.provider_calls.push(call.clone());
        turn.status = TurnStatus::Running;
        self.store().update_turn(turn)?;
        let result = if streaming {
            let hooks = self.config.hooks.clone();
            let seen = turn.clone();
            adapter.stream_chat(&request, &options, &mut |chunk| {
                if let Some(h) = &hooks {
                    h.on_chunk(&seen, chunk);
                }
            })
        } else {
            adapter.send_chat(&request, &options)
        };
        call.finished_at = Some(now());
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                call.request_id = e.request_id.clone();
                call.outcome = Some(CallOutcome {
                    ok: false,
                    status: e.status,
                    error_category: Some(e.category.clone()),
                    error: Some(e.message.clone()),
                    attempts: 1,
                });
                replace_call(turn, call);
                let error = TurnError {
                    message: e.message.clone(),
                    code: e.code.clone().or(e.status.map(|s| s.to_string())),
                    provider: Some(adapter.id().to_owned()),
                    raw: e.raw.clone().unwrap_or(Value::Null),
                };
                return self.fail(conversation, turn, error);
            }
        };
        call.request_id = result.request_id;
        call.usage = result.usage;
        call.response_metadata = result.response_metadata;
        call.outcome = Some(CallOutcome {
            ok: true,
            status: None,
            error_category: None,
            error: None,
            attempts: 1,
        });
        replace_call(turn, call);
        let mut requested = Vec::new();
        for mut m in result.messages {
            m.conversation_id = id;
            m.turn_id = Some(turn.id);
            for c in &mut m.tool_calls {
                c.status = ToolStatus::Pending;
                requested.push(c.clone());
            }
            turn.output_messages.push(m);
        }
        turn.tool_calls.extend(requested.iter().cloned());
        self.store().update_turn(turn)?;
        if requested.is_empty() {
            return Ok(Step::Answered);
        }
        for call in &requested {
            self.run_tool(turn, &call.call_id, false)?;
        }
        Ok(Step::Tools)
    }

    /// The tool named `name`.
    pub(super) fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.config.tools.iter().find(|t| t.name() == name).cloned()
    }

    /// The run id of the turn before `turn`, if any.
    fn parent_run_id(&self, id: ConversationId, turn: TurnId) -> Result<Option<String>> {
        let last = self.store().list_turns(id, Page::last(2))?;
        Ok(last
            .iter()
            .find(|t| t.id != turn)
            .map(|t| format!("{id}:{}", t.id)))
    }

    /// Runs tool call `call_id` of `turn`: `Started` stored, the handler,
    /// then its result message and status stored together.
    pub(super) fn run_tool(
        &self,
        turn: &mut ConversationTurn,
        call_id: &CallId,
        is_resume: bool,
    ) -> Result<()> {
        let Some(record) = turn
            .tool_calls
            .iter()
            .find(|c| &c.call_id == call_id)
            .cloned()
        else {
            return Ok(());
        };
        let outcome = match self.tool(&record.name) {
            None => Err(format!("unknown tool {:?}", record.name)),
            Some(tool) => {
                set_status(turn, call_id, ToolStatus::Started);
                self.store().update_turn(turn)?;
                let ctx = ToolContext {
                    call_id: call_id.clone(),
                    is_resume,
                    evaluation_id: turn.id.as_evaluation(),
                };
                tool.call(&record.arguments, &ctx)
            }
        };
        self.record_tool_result(turn, &record, outcome)
    }

    /// Stores a tool call's result message and final status together.
    pub(super) fn record_tool_result(
        &self,
        turn: &mut ConversationTurn,
        record: &ToolCallRecord,
        outcome: std::result::Result<String, String>,
    ) -> Result<()> {
        let (status, text) = match outcome {
            Ok(out) => (ToolStatus::Completed, out),
            Err(err) => (ToolStatus::Failed, err),
        };
        let mut m = ConversationMessage::new(Role::Tool, text);
        m.conversation_id = turn.conversation_id;
        m.turn_id = Some(turn.id);
        m.name = Some(record.name.clone());
        m.tool_call_id = Some(record.call_id.clone());
        turn.output_messages.push(m);
        set_status(turn, &record.call_id, status);
        self.store().update_turn(turn)
    }
}

/// Replaces the record with `call`'s id in `turn`.
fn replace_call(turn: &mut ConversationTurn, call: ProviderCallRecord) {
    if let Some(c) = turn.provider_calls.iter_mut().find(|c| c.id == call.id) {
        *c = call;
    }
}

/// Sets the status of `call_id` in `turn`.
pub(super) fn set_status(turn: &mut ConversationTurn, call_id: &CallId, status: ToolStatus) {
    if let Some(c) = turn.tool_calls.iter_mut().find(|c| &c.call_id == call_id) {
        c.status = status;
    }
}
