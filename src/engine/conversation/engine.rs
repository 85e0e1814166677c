//! The conversation engine (the spec's section 7): conversations, and turns
//! run step by step, each step stored before the next is taken.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use uuid::Uuid;

use crate::engine::tool::{Tool, ToolContext};
use crate::error::{Error, Result};
use crate::event::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationId, ConversationMessage, MessageRole,
    Metadata, ProviderCallRecord, ProviderOperation, TurnError, TurnId, TurnStatus,
};
use crate::model::{CallId, ToolCallRecord, ToolStatus, now};

use super::adapter::{AgentContext, ProviderAdapter, ProviderCallOptions, ProviderChatRequest};
use super::compaction::{CompactionRequest, Compactor};
use super::plan::{
    ConversationHooks, DefaultHistoryBuilder, HistoryBuilder, HistoryContext, PlanInput,
    PlannedTurn, TurnPlanner,
};
use super::store::{ConversationStore, ConversationTurn, Page};

/// The key, in a provider call's `request_metadata`, of the compaction
/// summary the request carried (when the history had one), so the request
/// can be rebuilt ([`rebuild_request`](super::rebuild_request)).
pub const SENT_SUMMARY: &str = "history_summary";

/// How an engine is put together (the spec's `ConversationEngineConfig`).
#[derive(Clone)]
pub struct ConversationEngineConfig {
    /// The agent of operations that name none.
    pub default_agent: String,
    /// Where conversations live.
    pub store: Arc<dyn ConversationStore>,
    /// Provider adapters by id.
    pub providers: BTreeMap<String, Arc<dyn ProviderAdapter>>,
    /// The model of each provider when the plan names none.
    pub default_models: BTreeMap<String, String>,
    /// Chooses the messages sent. Default: [`DefaultHistoryBuilder`] (all).
    pub history_builder: Option<Arc<dyn HistoryBuilder>>,
    /// Chooses provider and model. Default: the `"provider"` and `"model"`
    /// hints if given, else the first provider (in id order) and its
    /// default model.
    pub planner: Option<Arc<dyn TurnPlanner>>,
    /// Told about conversations and turns.
    pub hooks: Option<Arc<dyn ConversationHooks>>,
    /// The tools models may call, run within turns with the inner loop's
    /// exactly-once rules.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Provider calls a turn may make (a tool loop's steps). Default: 16.
    pub max_steps: u32,
    /// Use [`ProviderAdapter::stream_chat`] where the adapter supports it.
    /// Default: false.
    pub streaming: bool,
    /// Compacts what is sent after a turn whose model stopped (never in
    /// the middle of a tool loop). Default: none (the history sent grows).
    pub compactor: Option<Arc<dyn Compactor>>,
}

impl ConversationEngineConfig {
    /// A configuration with `default_agent`, `store`, and nothing else.
    pub fn new(default_agent: impl Into<String>, store: Arc<dyn ConversationStore>) -> Self {
        Self {
            default_agent: default_agent.into(),
            store,
            providers: BTreeMap::new(),
            default_models: BTreeMap::new(),
            history_builder: None,
            planner: None,
            hooks: None,
            tools: Vec::new(),
            max_steps: 16,
            streaming: false,
            compactor: None,
        }
    }

    /// Adds a provider adapter with its default model.
    pub fn provider(mut self, adapter: Arc<dyn ProviderAdapter>, model: impl Into<String>) -> Self {
        let id = adapter.id().to_owned();
        self.default_models.insert(id.clone(), model.into());
        self.providers.insert(id, adapter);
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }
}

/// Options of [`ConversationEngine::create_conversation`].
#[derive(Clone, Debug, Default)]
pub struct CreateConversation {
    /// Its id. Default: a new one. Choosing it lets a caller record the id
    /// elsewhere first (and makes a retried creation fail with
    /// [`Error::ConversationExists`] instead of creating a second one).
    pub id: Option<ConversationId>,
    /// The agent. Default: the engine's default agent.
    pub agent: Option<String>,
    /// A human or tenant identifier.
    pub subject_id: Option<String>,
    /// A title.
    pub title: Option<String>,
    /// Messages to start with (system instructions, the first user message).
    pub initial_messages: Vec<ConversationMessage>,
    /// Free-form metadata.
    pub metadata: Metadata,
}

/// Options of [`ConversationEngine::run_turn`].
#[derive(Clone, Debug, Default)]
pub struct RunTurn {
    /// The agent. Default: the engine's default agent.
    pub agent: Option<String>,
    /// Default: `"user_message"`.
    pub trigger_type: Option<String>,
    /// Hints for the planner and the adapter (`"provider"`, `"model"`).
    pub hints: Metadata,
}

/// The conversation engine: creates conversations, runs turns against
/// provider adapters, and records every step in its store.
///
/// Every step of a turn is stored before the next is taken: the turn as
/// `running`, each provider call when it starts and when it ends, the
/// output messages, each tool call's `Started` before its handler runs and
/// its result after. A process that dies mid-turn leaves the turn
/// `running`: [`interrupted_turns`](Self::interrupted_turns) reports it and
/// [`resume_turn`](Self::resume_turn) finishes it without running a
/// completed tool again.
pub struct ConversationEngine {
    pub(super) config: ConversationEngineConfig,
    pub(super) running: Mutex<BTreeSet<TurnId>>,
}

/// What one step of a turn did.
pub(super) enum Step {
    /// The model answered without calling a tool.
    Answered,
    /// The model called tools; they ran.
    Tools,
}

impl ConversationEngine {
    /// An engine with `config`.
    pub fn new(config: ConversationEngineConfig) -> Self {
        Self {
            config,
            running: Mutex::new(BTreeSet::new()),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &ConversationEngineConfig {
        &self.config
    }

    /// Its store.
    pub fn store(&self) -> &dyn ConversationStore {
        &*self.config.store
    }

    /// Creates a conversation with its initial messages, then tells the
    /// hooks.
    pub fn create_conversation(&self, options: CreateConversation) -> Result<Conversation> {
        let at = now();
        let conversation = Conversation {
            id: options.id.unwrap_or_default(),
            agent: options
                .agent
                .unwrap_or_else(|| self.config.default_agent.clone()),
            subject_id: options.subject_id,
            title: options.title,
            created_at: at,
            updated_at: at,
            metadata: options.metadata,
        };
        self.store()
            .create_conversation(&conversation, &options.initial_messages)?;
        if let Some(h) = &self.config.hooks {
            h.on_conversation_created(&conversation);
        }
        Ok(conversation)
    }

    /// The conversation, if it exists.
    pub fn get_conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        self.store().get_conversation(id)
    }

    /// Appends messages (new user input, say).
    pub fn append_messages(
        &self,
        id: ConversationId,
        messages: &[ConversationMessage],
    ) -> Result<()> {
        self.store().append_messages(id, messages)
    }

    /// Runs a turn (the spec's `runTurn`): the messages appended since the
    /// last turn are its input; the history builder, the planner and the
    /// hooks are consulted; provider calls and tool calls follow until the
    /// model answers without calling a tool.
    ///
    /// # Errors
    /// [`Error::TurnFailed`] when a provider call fails (the turn is stored
    /// as failed first, and `after_turn_error` told);
    /// [`Error::NotAConversation`]; a storage error leaves the turn
    /// `running`, to be resumed.
    pub fn run_turn(&self, id: ConversationId, options: RunTurn) -> Result<ConversationTurn> {
        let conversation = self
            .store()
            .get_conversation(id)?
            .ok_or(Error::NotAConversation(id))?;
        let input = self.store().unanswered_messages(id)?;
        let agent = options
            .agent
            .unwrap_or_else(|| self.config.default_agent.clone());
        let mut turn = ConversationTurn {
            id: TurnId::new(),
            conversation_id: id,
            agent,
            input_messages: input,
            output_messages: Vec::new(),
            provider_calls: Vec::new(),
            tool_calls: Vec::new(),
            status: TurnStatus::Running,
            trigger_type: Some(
                options
                    .trigger_type
                    .unwrap_or_else(|| "user_message".to_owned()),
            ),
            started_at: now(),
            finished_at: None,
            error: None,
            metadata: Metadata::new(),
        };
        if !options.hints.is_empty() {
            turn.metadata.insert(
                "hints".into(),
                Value::Object(options.hints.clone().into_iter().collect()),
            );
        }
        let _running = self.mark_running(turn.id);
        self.store().create_turn(&turn)?;
        let plan = match self.plan(&conversation, &turn, &options.hints) {
            Ok(plan) => plan,
            Err(e) => return self.fail(&conversation, &mut turn, turn_error(&e, "plan")),
        };
        if let Some(h) = &self.config.hooks {
            h.before_turn(&turn, &conversation);
        }
        self.drive(&conversation, &mut turn, &plan)
    }

    /// Marks `turn` as run by this engine until the guard drops.
    pub(super) fn mark_running(&self, turn: TurnId) -> RunningGuard<'_> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(turn);
        RunningGuard { engine: self, turn }
    }

    /// The plan of the planner, or the default one.
    pub(super) fn plan(
        &self,
        conversation: &Conversation,
        turn: &ConversationTurn,
        hints: &Metadata,
    ) -> Result<PlannedTurn> {
        let providers: Vec<String> = self.config.providers.keys().cloned().collect();
        if let Some(planner) = &self.config.planner {
            let input = PlanInput {
                conversation,
                messages: &turn.input_messages,
                agent: &turn.agent,
                hints,
                providers: &providers,
            };
            return planner.plan_turn(&input);
        }
        let hint = |k: &str| hints.get(k).and_then(Value::as_str).map(str::to_owned);
        let provider = hint("provider")
            .or_else(|| providers.first().cloned())
            .ok_or_else(|| Error::UnknownProvider(String::new()))?;
        let model = hint("model")
            .or_else(|| self.config.default_models.get(&provider).cloned())
            .unwrap_or_default();
        Ok(PlannedTurn {
            provider,
            model,
            parameters: Metadata::new(),
        })
    }

    /// Provider calls and tools until the model answers, then the turn is
    /// stored as succeeded.
    pub(super) fn drive(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        plan: &PlannedTurn,
    ) -> Result<ConversationTurn> {
        loop {
            if turn.provider_calls.len() >= self.config.max_steps as usize {
                let e = TurnError {
                    message: format!("stopped after {} provider calls", self.config.max_steps),
                    code: Some("max_steps".into()),
                    provider: None,
                    raw: Value::Null,
                };
                return self.fail(conversation, turn, e);
            }
            match self.step(conversation, turn, plan)? {
                Step::Answered => break,
                Step::Tools => {}
            }
        }
        self.maybe_compact(turn)?;
        self.succeed(conversation, turn)
    }

    /// Stores `turn` as succeeded and the conversation's `updated_at`,
    /// then tells the hooks.
    pub(super) fn succeed(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
    ) -> Result<ConversationTurn> {
        turn.status = TurnStatus::Succeeded;
        turn.finished_at = Some(now());
        self.store().update_turn(turn)?;
        let mut updated = conversation.clone();
        updated.updated_at = now();
        self.store().update_conversation(&updated)?;
        if let Some(h) = &self.config.hooks {
            h.after_turn_success(turn, &updated);
        }
        Ok(turn.clone())
    }

    /// Compacts what is sent, if a compactor is configured and the model
    /// stopped; records the compaction. A compactor's error is recorded in
    /// the turn's metadata (`compaction_error`) and the turn goes on.
    fn maybe_compact(&self, turn: &mut ConversationTurn) -> Result<()> {
        let Some(compactor) = &self.config.compactor else {
            return Ok(());
        };
        let Some(last) = turn.provider_calls.last() else {
            return Ok(());
        };
        let stopped = match last.response_metadata.get("finish_reason") {
            None => true,
            Some(r) => matches!(r.as_str(), Some("stop" | "end_turn" | "stop_sequence")),
        };
        if !stopped {
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
            tokens_before: last.usage.as_ref().map(|u| u.tokens.total()),
            at: now(),
        };
        self.store().record_compaction(id, &record)
    }

    /// One provider call, and the tools it asks for.
    fn step(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        plan: &PlannedTurn,
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
        let default_builder = DefaultHistoryBuilder::default();
        let builder: &dyn HistoryBuilder = match &self.config.history_builder {
            Some(b) => &**b,
            None => &default_builder,
        };
        let window = self.store().history(id, builder.window())?;
        let history = builder.build_history(&HistoryContext {
            conversation,
            system: &window.system,
            summary: window.summary.as_deref(),
            messages: &window.messages,
            next_turn_id: turn.id,
            agent: &turn.agent,
        });
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
        let options = ProviderCallOptions {
            conversation_id: id,
            turn_id: turn.id,
            agent: turn.agent.clone(),
            agent_context: AgentContext {
                agent: turn.agent.clone(),
                run_id: run_id.clone(),
                labels,
                metadata: conversation.metadata.clone(),
                correlation_id: run_id.clone(),
                parent_correlation_id: parent.clone(),
            },
            extensions: extensions.clone(),
            metadata: turn
                .metadata
                .get("hints")
                .and_then(Value::as_object)
                .map(|o| o.clone().into_iter().collect())
                .unwrap_or_default(),
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
        let mut m = ConversationMessage::new(MessageRole::Tool, text);
        m.conversation_id = turn.conversation_id;
        m.turn_id = Some(turn.id);
        m.name = Some(record.name.clone());
        m.tool_call_id = Some(record.call_id.clone());
        turn.output_messages.push(m);
        set_status(turn, &record.call_id, status);
        self.store().update_turn(turn)
    }

    /// Stores `turn` as failed with `error`, tells the hooks, and returns
    /// [`Error::TurnFailed`].
    pub(super) fn fail<T>(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        error: TurnError,
    ) -> Result<T> {
        turn.status = TurnStatus::Failed;
        turn.finished_at = Some(now());
        turn.error = Some(error.clone());
        self.store().update_turn(turn)?;
        let mut updated = conversation.clone();
        updated.updated_at = now();
        self.store().update_conversation(&updated)?;
        let returned = Error::TurnFailed {
            conversation: conversation.id,
            turn: turn.id.0,
            message: error.message,
        };
        if let Some(h) = &self.config.hooks {
            h.after_turn_error(turn, &returned, &updated);
        }
        Err(returned)
    }
}

/// A turn error from a library error, with `code`.
fn turn_error(e: &Error, code: &str) -> TurnError {
    TurnError {
        message: e.to_string(),
        code: Some(code.to_owned()),
        provider: None,
        raw: Value::Null,
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

/// Keeps a turn in the engine's running set while it is driven.
pub(super) struct RunningGuard<'a> {
    engine: &'a ConversationEngine,
    turn: TurnId,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.engine
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.turn);
    }
}
