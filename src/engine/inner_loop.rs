//! The inner loop: provider round trips and tool calls, each recorded as it
//! happens, and its resume from a [`ResumePlan`](crate::resume::ResumePlan).

use crate::engine::conversation::SUMMARY_PREFIX;
use crate::engine::provider::{Provider, ProviderRequest};
use crate::engine::stateful::{
    CapturePoint, StateConfig, StatefulProvider, capture_due, validate_state,
};
use crate::engine::tool::{Idempotency, Tool, ToolContext};
use crate::error::{Error, Result};
use crate::event::{Outcome, ProviderCallRecord, ProviderOutcome};
use crate::model::INTERRUPTED_ERROR;
use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, Role, now};
use crate::resume::ResumeState;
use crate::session::Session;
use crate::session::recorder::Evaluation;
use crate::snapshot::CheckpointStrategy;

/// Whether a resume appends to the crashed session or to a fork of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResumeMode {
    /// Append to the same session (the default): the crash point stays in
    /// its stream, the run goes on after it, and a second resume finds the
    /// evaluation finished ([`Error::AlreadyFinished`]) and writes nothing.
    #[default]
    Continue,
    /// Fork the session at its crash point and continue in the fork, leaving
    /// the original as it was: a what-if branch.
    Fork,
}

/// How to resume.
#[derive(Clone, Debug, Default)]
pub struct ResumeOptions {
    /// Continue or fork. Default: continue the same session.
    pub mode: ResumeMode,
    /// The evaluation to resume. Default: the latest.
    pub evaluation: Option<EvaluationId>,
    /// The prompt identity `(ns, key)` the caller resumes with; checked
    /// against the evaluation's ([`Error::PromptMismatch`]). Required
    /// unless `skip_prompt_check` is set: a resume with another prompt than
    /// the crashed run's would continue someone else's conversation.
    pub prompt: Option<(String, String)>,
    /// Resume without checking the prompt identity. Default: false.
    pub skip_prompt_check: bool,
    /// Record in-doubt calls of `Never` tools as failed ("interrupted") so
    /// the conversation can go on, instead of stopping with
    /// [`Error::ToolIdempotency`]. Default: false.
    pub interrupt_never_tools: bool,
}

impl ResumeOptions {
    /// Options that check the prompt identity `(ns, key)`; everything else
    /// at its default (continue the same session, the latest evaluation).
    pub fn new(prompt_ns: impl Into<String>, prompt_key: impl Into<String>) -> Self {
        Self {
            prompt: Some((prompt_ns.into(), prompt_key.into())),
            ..Self::default()
        }
    }
}

/// What a run or a resume ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopResult {
    /// The session the run was recorded in (a fork, for a forking resume).
    pub session: Session,
    /// The evaluation.
    pub evaluation_id: EvaluationId,
    /// The final assistant text (empty if it failed before one).
    pub content: String,
    /// The number of turns.
    pub turns: u32,
    /// How it ended.
    pub outcome: Outcome,
}

/// The last capture of a stateful provider's state in this run.
struct Captured {
    state: String,
    head: u64,
    at: std::time::Instant,
}

type Last = Option<Captured>;

/// Drives a provider and tools, recording every step in a session.
pub struct InnerLoop<'a> {
    provider: &'a dyn Provider,
    tools: Vec<&'a dyn Tool>,
    max_turns: u32,
    stateful: Option<(&'a dyn StatefulProvider, StateConfig)>,
}

impl<'a> InnerLoop<'a> {
    /// A loop over `provider` with `tools`; at most 32 turns.
    pub fn new(provider: &'a dyn Provider, tools: Vec<&'a dyn Tool>) -> Self {
        Self {
            provider,
            tools,
            max_turns: 32,
            stateful: None,
        }
    }

    /// A loop over a provider with a resumable state of its own (the
    /// adapter-state spec's `StatefulAdapter`): the loop hands it the state
    /// to resume from and records its state by itself, as `config` says
    /// (see [`StateConfig`]), each capture superseding the one before.
    pub fn stateful<P: StatefulProvider>(
        provider: &'a P,
        tools: Vec<&'a dyn Tool>,
        config: StateConfig,
    ) -> Self {
        Self {
            stateful: Some((provider, config)),
            ..Self::new(provider, tools)
        }
    }

    /// Sets the turn limit (the evaluation fails past it).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    fn tool(&self, name: &str) -> Option<&'a dyn Tool> {
        self.tools.iter().copied().find(|t| t.name() == name)
    }

    /// Starts an evaluation in `session` and runs it to its end: system and
    /// user messages, then provider round trips and tool calls until the
    /// model answers without calling a tool.
    pub fn run(
        &self,
        session: &Session,
        prompt_ns: &str,
        prompt_key: &str,
        system: &str,
        user: &str,
    ) -> Result<LoopResult> {
        let opening = [
            (Role::System, system.to_owned()),
            (Role::User, user.to_owned()),
        ];
        let eval = session.start_evaluation_with_messages(
            prompt_ns,
            prompt_key,
            self.provider.name(),
            &opening,
        )?;
        self.begin_state(&eval, false);
        let history = self.history(&eval);
        self.drive(&eval, history)
    }

    /// The conversation-state spec's `MainLoop` with a checkpoint handler, in
    /// one call: if the latest evaluation of `session` is unfinished, it is
    /// resumed in place (its prompt identity must be `(prompt_ns,
    /// prompt_key)`); otherwise a new evaluation runs. The journal is the
    /// checkpoint: every step is durable when it is appended, so there is
    /// nothing to save after a turn, and nothing to clear at the end.
    ///
    /// # Errors
    /// As [`resume`](Self::resume) and [`run`](Self::run).
    pub fn run_or_resume(
        &self,
        session: &Session,
        prompt_ns: &str,
        prompt_key: &str,
        system: &str,
        user: &str,
    ) -> Result<LoopResult> {
        let unfinished = match session.resume_plan() {
            Ok(plan) => !plan.is_finished() && plan.state != ResumeState::NotStarted,
            Err(Error::ConversationNotFound(_)) => false,
            Err(e) => return Err(e),
        };
        if unfinished {
            let options = ResumeOptions {
                mode: ResumeMode::Continue,
                ..ResumeOptions::new(prompt_ns, prompt_key)
            };
            return self.resume(session, &options);
        }
        self.run(session, prompt_ns, prompt_key, system, user)
    }

    /// Resumes the latest (or the chosen) evaluation of `session` from its
    /// crash point: completed calls are not run again; pending calls run;
    /// in-doubt calls follow their tool's [`Idempotency`]; then the loop goes on.
    ///
    /// Nothing is written before every check has passed.
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`], [`Error::PromptMismatch`] (and
    /// [`Error::InvalidInput`] without a prompt identity, unless
    /// `skip_prompt_check`), [`Error::AlreadyFinished`],
    /// [`Error::ToolIdempotency`].
    pub fn resume(&self, session: &Session, options: &ResumeOptions) -> Result<LoopResult> {
        let plan = match options.evaluation {
            Some(e) => session.resume_plan_for(e)?,
            None => session.resume_plan()?,
        };
        match &options.prompt {
            Some((ns, key)) => plan.check_prompt(ns, key)?,
            None if !options.skip_prompt_check => {
                return Err(Error::InvalidInput(format!(
                    "resuming evaluation {} needs the prompt identity it ran with \
                     (ResumeOptions::new(ns, key)), or skip_prompt_check",
                    plan.evaluation_id
                )));
            }
            None => {}
        }
        if plan.is_finished() {
            return Err(Error::AlreadyFinished {
                session: session.id(),
                evaluation: plan.evaluation_id,
            });
        }
        if plan.state == ResumeState::NotStarted {
            return Err(Error::InvalidInput(format!(
                "evaluation {} has no messages to resume from (it stopped before its system prompt)",
                plan.evaluation_id
            )));
        }
        for call in &plan.in_doubt {
            let never = self
                .tool(&call.name)
                .is_some_and(|t| t.idempotency() == Idempotency::Never);
            if never && !options.interrupt_never_tools {
                return Err(Error::ToolIdempotency {
                    call_id: call.call_id.to_string(),
                    tool: call.name.clone(),
                });
            }
        }
        let target = match options.mode {
            ResumeMode::Continue => session.clone(),
            ResumeMode::Fork => session.fork(plan.crash_point)?,
        };
        let eval = target.evaluation(plan.evaluation_id)?;
        self.begin_state(&eval, true);
        for call in &plan.in_doubt {
            match self.tool(&call.name).map(|t| t.idempotency()) {
                Some(Idempotency::Never) => {
                    eval.tool_failed(call.call_id.clone(), INTERRUPTED_ERROR)?;
                }
                _ => {
                    self.execute(&eval, &call.call_id, &call.name, &call.arguments, true)?;
                }
            }
        }
        for call in &plan.pending {
            self.execute(&eval, &call.call_id, &call.name, &call.arguments, false)?;
        }
        let history = self.history(&eval);
        if plan.state == ResumeState::Answered {
            self.capture(&eval, &mut None)?;
            eval.finish(Outcome::Succeeded)?;
            return Ok(self.result(&eval, &history, Outcome::Succeeded));
        }
        self.drive(&eval, history)
    }

    /// What the provider is sent: the evaluation's messages, except those a
    /// `Compacted` event compacted (the leading system messages are always
    /// sent), with the compaction's summary, if it wrote one, as a system
    /// message after the leading ones: what the conversation engine sends.
    fn history(&self, eval: &Evaluation) -> Vec<InnerMessage> {
        let state = eval.session().state();
        let info = state.evaluations().get(eval.id());
        let through = info.and_then(|e| e.compacted_through);
        let mut leading = true;
        let mut out: Vec<InnerMessage> = Vec::new();
        for m in state.messages().for_evaluation(eval.id()) {
            leading &= m.role == Role::System;
            if leading || through.is_none_or(|t| m.sequence > t) {
                out.push(m.clone());
            }
        }
        if let (Some(_), Some(summary)) =
            (through, info.and_then(|e| e.compaction_summary.as_deref()))
        {
            let at = out.iter().take_while(|m| m.role == Role::System).count();
            let text = format!("{SUMMARY_PREFIX}{summary}");
            out.insert(at, InnerMessage::new(Role::System, text, eval.id(), 0));
        }
        out
    }

    fn push(&self, eval: &Evaluation, history: &mut Vec<InnerMessage>, id: MessageId) {
        if let Some(m) = eval.session().state().messages().get(id) {
            history.push(m.clone());
        }
    }

    fn result(&self, eval: &Evaluation, history: &[InnerMessage], outcome: Outcome) -> LoopResult {
        let content = history
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        LoopResult {
            session: eval.session().clone(),
            evaluation_id: eval.id(),
            content,
            turns: eval.turn(),
            outcome,
        }
    }

    /// Provider round trips and tool calls until a final answer.
    fn drive(&self, eval: &Evaluation, mut history: Vec<InnerMessage>) -> Result<LoopResult> {
        let tools: Vec<_> = self.tools.iter().map(|t| t.spec()).collect();
        let mut captured = None;
        loop {
            if eval.turn() >= self.max_turns {
                let outcome = Outcome::Failed {
                    error: format!("stopped after {} turns", self.max_turns),
                };
                self.capture(eval, &mut captured)?;
                eval.finish(outcome.clone())?;
                return Ok(self.result(eval, &history, outcome));
            }
            let turn = eval.turn() + 1;
            let started_at = now();
            let request = ProviderRequest {
                messages: &history,
                tools: tools.clone(),
                turn,
            };
            let response = self.provider.complete(&request);
            let finished_at = now();
            let response = match response {
                Ok(r) => r,
                Err(message) => {
                    eval.provider_call(ProviderCallRecord {
                        evaluation_id: eval.id(),
                        turn,
                        provider: self.provider.name().to_owned(),
                        model: String::new(),
                        usage: Default::default(),
                        started_at,
                        finished_at,
                        outcome: ProviderOutcome::Error {
                            message: message.clone(),
                        },
                    })?;
                    let outcome = Outcome::Failed {
                        error: format!("provider error: {message}"),
                    };
                    self.capture(eval, &mut captured)?;
                    eval.finish(outcome.clone())?;
                    return Ok(self.result(eval, &history, outcome));
                }
            };
            eval.provider_call(ProviderCallRecord {
                evaluation_id: eval.id(),
                turn,
                provider: self.provider.name().to_owned(),
                model: response.model.clone(),
                usage: response.usage,
                started_at,
                finished_at,
                outcome: ProviderOutcome::Ok,
            })?;
            self.capture_at(eval, &mut captured, CapturePoint::RoundTrip)?;
            let calls = response.tool_calls.clone();
            let id = eval.assistant_with_payload(
                response.content,
                response.tool_calls,
                response.provider_payload,
            )?;
            self.push(eval, &mut history, id);
            if calls.is_empty() {
                self.capture(eval, &mut captured)?;
                eval.finish(Outcome::Succeeded)?;
                return Ok(self.result(eval, &history, Outcome::Succeeded));
            }
            for call in calls {
                let id = self.execute(eval, &call.call_id, &call.name, &call.arguments, false)?;
                self.push(eval, &mut history, id);
                self.capture_at(eval, &mut captured, CapturePoint::Tool)?;
            }
        }
    }

    /// Hands a stateful provider the state to resume from: on a resume, or
    /// with `auto_resume`, the session's most recent resumable state of its
    /// type (the adapter-state spec's `find_resumable_state`: a later
    /// capture that is not resumable does not hide it) if it passes the
    /// configured check; else none (a fresh session).
    fn begin_state(&self, eval: &Evaluation, resuming: bool) {
        let Some((provider, config)) = &self.stateful else {
            return;
        };
        let found = (resuming || config.auto_resume)
            .then(|| {
                let state = eval.session().state();
                state
                    .adapter_states()
                    .find_resumable(provider.adapter_type())
                    .cloned()
            })
            .flatten()
            .filter(|s| {
                let (ns, key) = eval.prompt();
                let prompt = config
                    .prompt_name
                    .clone()
                    .unwrap_or_else(|| format!("{ns}:{key}"));
                let workspace = config.workspace.as_deref();
                validate_state(s, config.resume_validation, workspace, &prompt, now()).is_ok()
            });
        provider.resume_from(found.as_ref());
    }

    /// Records the stateful provider's state at `point` if its strategy
    /// says so.
    fn capture_at(&self, eval: &Evaluation, last: &mut Last, point: CapturePoint) -> Result<()> {
        let Some((_, config)) = &self.stateful else {
            return Ok(());
        };
        let events = last
            .as_ref()
            .map(|l| eval.session().head().saturating_sub(l.head));
        let elapsed = last.as_ref().map(|l| l.at.elapsed());
        if capture_due(config.capture, point, events, elapsed) {
            self.capture(eval, last)?;
        }
        Ok(())
    }

    /// Records the stateful provider's state (at the end of the evaluation,
    /// or when due) if it differs from the last capture.
    fn capture(&self, eval: &Evaluation, last: &mut Last) -> Result<()> {
        let Some((provider, config)) = &self.stateful else {
            return Ok(());
        };
        if !config.capture_state || config.capture == CheckpointStrategy::OnDemand {
            return Ok(());
        }
        if let Some(c) = provider.capture()
            && last.as_ref().map(|l| l.state.as_str()) != Some(c.state.as_str())
        {
            eval.adapter_state(&c.adapter_type, c.state.clone(), c.resumable)?;
            *last = Some(Captured {
                state: c.state,
                head: eval.session().head(),
                at: std::time::Instant::now(),
            });
        }
        Ok(())
    }

    /// Runs one call: `Started`, the handler, then its result or failure.
    fn execute(
        &self,
        eval: &Evaluation,
        call_id: &CallId,
        name: &str,
        arguments: &str,
        is_resume: bool,
    ) -> Result<MessageId> {
        let Some(tool) = self.tool(name) else {
            return eval.tool_failed(call_id.clone(), format!("unknown tool {name:?}"));
        };
        eval.tool_started(call_id.clone())?;
        let ctx = ToolContext {
            call_id: call_id.clone(),
            is_resume,
            evaluation_id: eval.id(),
        };
        match tool.call(arguments, &ctx) {
            Ok(out) => eval.tool_result(call_id.clone(), out),
            Err(err) => eval.tool_failed(call_id.clone(), err),
        }
    }
}
