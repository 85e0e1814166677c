//! The conversation engine (the spec's section 7): conversations, and turns
//! run step by step, each step stored before the next is taken.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::engine::tool::Tool;
use crate::error::{Error, Result};
use crate::event::conversation::{
    Conversation, ConversationId, ConversationMessage, Metadata, TurnError, TurnId, TurnStatus,
};
use crate::model::now;

use super::adapter::{ChatInputMessage, ProviderAdapter};
use super::compaction::Compactor;
use super::plan::{ConversationHooks, HistoryBuilder, PlanInput, PlannedTurn, TurnPlanner};
use super::store::{ConversationStore, ConversationTurn, HistoryWindow};

/// What [`ConversationEngine::run_turn`] does first when the conversation
/// has interrupted turns (unfinished, and not running in this engine: left
/// so by a process that stopped). Whichever is chosen, the new turn never
/// sends a tool call without its result.
///
/// Default: [`Answer`](Self::Answer), the safe choice that keeps a
/// conversation going: it never runs twice a tool that must not run twice
/// ([`Idempotency::Never`](crate::agent::Idempotency::Never)), never fails on one,
/// and never calls a provider to finish a question the user may have moved
/// past.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterruptedTurns {
    /// Settle each interrupted turn without calling its provider: a
    /// provider call in flight is closed as interrupted; its tool calls
    /// without a result are answered by their tools' idempotency, as the
    /// inner loop's resume does (completed calls are kept, pending ones
    /// run, in-doubt ones run again with `is_resume` unless their tool is
    /// `Never`, which gets the [`INTERRUPTED_ERROR`](crate::resume::INTERRUPTED_ERROR)
    /// result); the turn is then stored as succeeded if its model had
    /// answered, else as failed with code `"interrupted"` (hooks told as
    /// usual). The new turn's model sees every result.
    #[default]
    Answer,
    /// Finish each interrupted turn first, as
    /// [`resume_turn`](ConversationEngine::resume_turn) with
    /// [`ResumeTurn::default`](super::ResumeTurn::default) does (its
    /// provider is called until its model answers; it does not see what was
    /// appended after it started). An
    /// in-doubt call of a `Never` tool stops with
    /// [`Error::ToolIdempotency`]: nothing written, no new turn.
    Resume,
    /// Return [`Error::InterruptedTurn`] naming the first interrupted turn;
    /// nothing is written. The caller resumes, fails or cancels it.
    Refuse,
}

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
    /// Chooses the messages sent. Default: [`DefaultHistoryBuilder`](super::plan::DefaultHistoryBuilder) (all).
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
    /// What [`ConversationEngine::run_turn`] does first when the
    /// conversation has interrupted turns (left unfinished by a process
    /// that stopped), so that no request carries a tool call without its
    /// result. Default: [`InterruptedTurns::Answer`] (never runs twice a
    /// tool that must not run twice, never calls a provider for the old
    /// turn); [`RunTurn::interrupted`] overrides it for one turn.
    pub interrupted_turns: InterruptedTurns,
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
            interrupted_turns: InterruptedTurns::default(),
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
    /// Hints for the planner and the adapter (`"provider"`, `"model"`);
    /// the adapter gets them as [`ProviderCallOptions::metadata`](super::ProviderCallOptions::metadata)
    /// (and its `AgentContext`'s metadata).
    pub hints: Metadata,
    /// What to do first about the conversation's interrupted turns.
    /// Default: the engine's [`ConversationEngineConfig::interrupted_turns`].
    pub interrupted: Option<InterruptedTurns>,
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
    /// Turns running here that [`cancel_turn`](Self::cancel_turn) asked to stop,
    /// with the reason given.
    pub(super) cancelling: Mutex<BTreeMap<TurnId, String>>,
}

/// A step's history, built before its provider call: what the history
/// builder saw and what it chose.
pub(super) struct Prepared {
    /// The window read from the store, cut after the turn's own messages.
    pub(super) window: HistoryWindow,
    /// The messages to send.
    pub(super) history: Vec<ChatInputMessage>,
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
            cancelling: Mutex::new(BTreeMap::new()),
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
    /// last turn are its input. First the conversation's interrupted turns
    /// are settled as [`RunTurn::interrupted`] (or the engine's
    /// [`interrupted_turns`](ConversationEngineConfig::interrupted_turns))
    /// says; then the turn is stored as `pending`; the history builder
    /// builds the history, the planner chooses provider and model (seeing
    /// the messages the builder saw), `before_turn` is told; the turn is
    /// stored as `running` with its first provider call; provider calls and
    /// tool calls follow until the model answers without calling a tool.
    ///
    /// Guarantee: no request carries a tool call without its result (the
    /// engine checks each history before sending it and fails the turn,
    /// code `"unanswered_tool_call"`, rather than send one).
    ///
    /// A turn that [`cancel_turn`](Self::cancel_turn) stops is returned
    /// with status `cancelled`.
    ///
    /// # Errors
    /// [`Error::TurnFailed`] when a provider call fails (the turn is stored
    /// as failed first, and `after_turn_error` told);
    /// [`Error::InterruptedTurn`] under [`InterruptedTurns::Refuse`];
    /// [`Error::ToolIdempotency`] under [`InterruptedTurns::Resume`];
    /// [`Error::NotAConversation`]; a storage error leaves the turn
    /// unfinished, to be resumed.
    pub fn run_turn(&self, id: ConversationId, options: RunTurn) -> Result<ConversationTurn> {
        let conversation = self
            .store()
            .get_conversation(id)?
            .ok_or(Error::NotAConversation(id))?;
        // Read before settling: the results that settle an interrupted
        // turn are appended after the input that came since.
        let input = self.store().unanswered_messages(id)?;
        let policy = options.interrupted.unwrap_or(self.config.interrupted_turns);
        self.settle_interrupted(id, policy)?;
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
            status: TurnStatus::Pending,
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
        self.start(&conversation, &mut turn, &options.hints)
    }

    /// The spec's order for a turn's first step: the history builder, then
    /// the planner (seeing the messages the builder saw), then
    /// `before_turn`; then the turn is driven.
    pub(super) fn start(
        &self,
        conversation: &Conversation,
        turn: &mut ConversationTurn,
        hints: &Metadata,
    ) -> Result<ConversationTurn> {
        let prepared = self.prepare(conversation, turn)?;
        let plan = match self.plan(conversation, turn, &prepared.window, hints) {
            Ok(plan) => plan,
            Err(e) => return self.fail(conversation, turn, turn_error(&e, "plan")),
        };
        if let Some(h) = &self.config.hooks {
            h.before_turn(turn, conversation);
        }
        self.drive(conversation, turn, &plan, Some(prepared))
    }

    /// Marks `turn` as run by this engine until the guard drops.
    pub(super) fn mark_running(&self, turn: TurnId) -> RunningGuard<'_> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(turn);
        RunningGuard { engine: self, turn }
    }

    /// The plan of the planner (shown the leading system messages and the
    /// window the history builder saw), or the default one.
    pub(super) fn plan(
        &self,
        conversation: &Conversation,
        turn: &ConversationTurn,
        window: &HistoryWindow,
        hints: &Metadata,
    ) -> Result<PlannedTurn> {
        let providers: Vec<String> = self.config.providers.keys().cloned().collect();
        if let Some(planner) = &self.config.planner {
            let messages: Vec<ConversationMessage> = window
                .system
                .iter()
                .chain(&window.messages)
                .cloned()
                .collect();
            let input = PlanInput {
                conversation,
                messages: &messages,
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
        mut first: Option<Prepared>,
    ) -> Result<ConversationTurn> {
        loop {
            // Here every tool call of the turn has its result.
            if let Some(reason) = self.take_cancel(turn.id) {
                return self.cancelled(conversation, turn, &reason);
            }
            if turn.provider_calls.len() >= self.config.max_steps as usize {
                let e = TurnError {
                    message: format!("stopped after {} provider calls", self.config.max_steps),
                    code: Some("max_steps".into()),
                    provider: None,
                    raw: Value::Null,
                };
                return self.fail(conversation, turn, e);
            }
            match self.step(conversation, turn, plan, first.take())? {
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
pub(super) fn turn_error(e: &Error, code: &str) -> TurnError {
    TurnError {
        message: e.to_string(),
        code: Some(code.to_owned()),
        provider: None,
        raw: Value::Null,
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
        self.engine
            .cancelling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.turn);
    }
}
