//! Stateful adapters (adapter-state spec): a provider that keeps its own
//! session (an agent SDK's) hands the inner loop a state to capture, and
//! takes one back to resume from; the loop captures it by itself.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::engine::adapter::{AdapterState, ResumeValidation, SdkSessionState, validate_sdk_state};
use crate::engine::provider::Provider;
use crate::error::{Error, Result};
use crate::event::AdapterStateSnapshot;
use crate::model::now;
use crate::snapshot::CheckpointStrategy;

/// An adapter state as a provider hands it over: its type, its JSON, and
/// whether it can be resumed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedState {
    /// The adapter type (`"claude_agent_sdk"`).
    pub adapter_type: String,
    /// The state as JSON text.
    pub state: String,
    /// Whether it can be used to resume.
    pub resumable: bool,
}

impl CapturedState {
    /// The captured form of a typed state.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if it does not serialize.
    pub fn of<S: AdapterState>(state: &S) -> Result<Self> {
        Ok(Self {
            adapter_type: state.adapter_type().to_owned(),
            state: serde_json::to_string(state)
                .map_err(|e| Error::InvalidInput(format!("adapter state: {e}")))?,
            resumable: state.resumable(),
        })
    }
}

/// The adapter-state spec's `StatefulAdapter`: a provider with a resumable
/// state of its own. The spec's `evaluate_with_state(prompt, session,
/// resume_from, ...) -> (response, state)` is this trait driven by
/// [`InnerLoop::stateful`](crate::agent::InnerLoop::stateful): the loop passes the
/// state to resume from before the first round trip, asks for the state
/// as its [`StateConfig::capture`] says and at the end (success or
/// failure), and records it. Deadlines and budgets are the provider's own (the loop has
/// `max_turns`).
pub trait StatefulProvider: Provider {
    /// The adapter type of its states; the loop only resumes from states of
    /// this type.
    fn adapter_type(&self) -> &str;

    /// Called once before the evaluation's first round trip (and before a
    /// resumed one's next): `Some` with the state to continue (for an SDK,
    /// pass its session id as the SDK's `resume` option), `None` to start a
    /// fresh session.
    fn resume_from(&self, state: Option<&AdapterStateSnapshot>);

    /// The state to capture now, if it has one (an SDK has none until its
    /// init message named the session).
    fn capture(&self) -> Option<CapturedState>;
}

/// Where in the loop a capture may happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CapturePoint {
    /// After a provider round trip was recorded.
    RoundTrip,
    /// After a tool call's result (or failure) was recorded.
    Tool,
}

/// Whether `strategy` captures at `point`, `events` events and `elapsed`
/// time after the last capture (`None`: no capture yet). The end of the
/// evaluation always captures, except under `OnDemand`.
pub(crate) fn capture_due(
    strategy: CheckpointStrategy,
    point: CapturePoint,
    events: Option<u64>,
    elapsed: Option<Duration>,
) -> bool {
    match strategy {
        CheckpointStrategy::OnToolUse => point == CapturePoint::Tool,
        CheckpointStrategy::OnComplete | CheckpointStrategy::OnDemand => false,
        CheckpointStrategy::Periodic(d) => elapsed.is_none_or(|e| e > d),
        CheckpointStrategy::EveryEvents(n) | CheckpointStrategy::Incremental { every: n } => {
            events.is_none_or(|e| e >= n.max(1))
        }
        CheckpointStrategy::Geometric { first, .. } => events.is_none_or(|e| e >= first.max(1)),
    }
}

/// The adapter-state spec's `ClaudeAgentSDKClientConfig`, for any
/// [`StatefulProvider`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateConfig {
    /// Capture the provider's state. Default: `true`.
    pub capture_state: bool,
    /// When to capture (the adapter-state spec's checkpointing frequency),
    /// besides the end of the evaluation (success or failure), which always
    /// captures except under `OnDemand`: `OnToolUse` (the default) after
    /// each tool call, `OnComplete` only at the end, `Periodic(d)` after a
    /// round trip or tool call once `d` has passed since the last capture,
    /// `OnDemand` never by itself (the application calls
    /// [`Evaluation::capture_adapter_state`](crate::Evaluation::capture_adapter_state)),
    /// `EveryEvents(n)` once `n` events were appended since the last
    /// capture, `Geometric` as `EveryEvents(first)`, `Incremental` as
    /// `EveryEvents(every)`. A state equal to the
    /// last capture is not captured again.
    pub capture: CheckpointStrategy,
    /// A new evaluation ([`InnerLoop::run`](crate::agent::InnerLoop::run)) first
    /// looks for a resumable state in the session. Default: `false`. A
    /// resume ([`InnerLoop::resume`](crate::agent::InnerLoop::resume)) always
    /// looks: it is the crash-recovery flow.
    pub auto_resume: bool,
    /// How a found state is checked. Default: `Strict` with one hour.
    pub resume_validation: ResumeValidation,
    /// The workspace the strict check expects. Default: `None`.
    pub workspace: Option<String>,
    /// The prompt name the strict check expects. Default: `None`, which
    /// means `"{prompt_ns}:{prompt_key}"` of the evaluation.
    pub prompt_name: Option<String>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            capture_state: true,
            capture: CheckpointStrategy::OnToolUse,
            auto_resume: false,
            resume_validation: ResumeValidation::Strict {
                max_age: Duration::from_secs(3600),
            },
            workspace: None,
            prompt_name: None,
        }
    }
}

/// Checks a found state of any adapter type: an SDK state as
/// [`validate_sdk_state`] does; another type by its `resumable` flag
/// (`Relaxed`, `Strict`) and, for `Strict`, its capture time.
///
/// # Errors
/// [`Error::SessionExpired`] saying why it cannot be used.
pub fn validate_state(
    snapshot: &AdapterStateSnapshot,
    validation: ResumeValidation,
    workspace: Option<&str>,
    prompt_name: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    if snapshot.adapter_type == SdkSessionState::ADAPTER_TYPE {
        return validate_sdk_state(snapshot, validation, workspace, prompt_name, at).map(|_| ());
    }
    if validation == ResumeValidation::None {
        return Ok(());
    }
    if !snapshot.resumable {
        return Err(Error::SessionExpired(format!(
            "adapter state {} ({}) is not resumable",
            snapshot.snapshot_id, snapshot.adapter_type
        )));
    }
    if let ResumeValidation::Strict { max_age } = validation {
        let age = (at - snapshot.captured_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        if age > max_age {
            return Err(Error::SessionExpired(format!(
                "adapter state {} was captured {}s ago (limit {}s)",
                snapshot.snapshot_id,
                age.as_secs(),
                max_age.as_secs()
            )));
        }
    }
    Ok(())
}

/// Tracks an agent SDK's session from the messages its query yields, as
/// the adapter-state spec's `_run_sdk_query` does: the session id comes
/// from the init message (`{"type": "system", "subtype": "init",
/// "session_id": ...}`, or the id under `data`), every message counts, and
/// the end of a query marks the session complete. A [`StatefulProvider`]
/// built on an SDK feeds it each message and returns [`Self::captured`].
#[derive(Debug)]
pub struct SdkStateTracker {
    inner: Mutex<SdkSessionState>,
}

impl SdkStateTracker {
    /// A tracker for a session of `prompt_name` in `workspace`, with no
    /// session id yet.
    pub fn new(prompt_name: impl Into<String>, workspace: Option<String>) -> Self {
        let t = now();
        Self {
            inner: Mutex::new(SdkSessionState {
                session_id: String::new(),
                created_at: t,
                last_activity_at: t,
                workspace_path: workspace,
                prompt_name: prompt_name.into(),
                message_count: 0,
                is_complete: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SdkSessionState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts from a captured state (a resumed session goes on counting).
    pub fn resume(&self, state: SdkSessionState) {
        *self.lock() = SdkSessionState {
            is_complete: false,
            ..state
        };
    }

    /// Takes one message of the SDK's stream. An init message with an empty
    /// or missing session id leaves the id as it was.
    pub fn observe(&self, message: &Value) {
        let mut s = self.lock();
        s.message_count += 1;
        s.last_activity_at = now();
        if message.get("subtype").and_then(Value::as_str) == Some("init") {
            let id = message
                .get("session_id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .or_else(|| {
                    message
                        .pointer("/data/session_id")
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty())
                });
            if let Some(id) = id {
                s.session_id = id.to_owned();
            }
        }
        if message.get("type").and_then(Value::as_str) == Some("result") {
            s.is_complete = true;
        }
    }

    /// The state now.
    pub fn state(&self) -> SdkSessionState {
        self.lock().clone()
    }

    /// The state to capture: `None` until a session id is known.
    pub fn captured(&self) -> Option<CapturedState> {
        let s = self.state();
        if s.session_id.is_empty() {
            return None;
        }
        CapturedState::of(&s).ok()
    }
}

/// One difference between two adapter states (see [`diff_states`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StateChange {
    /// The field: `adapter_type`, `resumable`, or a field of the state
    /// (`state.session_id`); `state` when a state is not a JSON object.
    pub field: String,
    /// Its value before (`None`: absent).
    pub before: Option<Value>,
    /// Its value after (`None`: absent).
    pub after: Option<Value>,
}

/// The adapter-state spec's `diff_states`: what changed from `before` to
/// `after`, field by field (the state's top-level fields, decoded from its
/// JSON), in field order. Equal states give no changes.
pub fn diff_states(
    before: &AdapterStateSnapshot,
    after: &AdapterStateSnapshot,
) -> Vec<StateChange> {
    let mut changes = Vec::new();
    let mut field = |name: String, b: Option<Value>, a: Option<Value>| {
        if b != a {
            changes.push(StateChange {
                field: name,
                before: b,
                after: a,
            });
        }
    };
    field(
        "adapter_type".into(),
        Some(Value::String(before.adapter_type.clone())),
        Some(Value::String(after.adapter_type.clone())),
    );
    field(
        "resumable".into(),
        Some(Value::Bool(before.resumable)),
        Some(Value::Bool(after.resumable)),
    );
    let decode = |s: &AdapterStateSnapshot| {
        serde_json::from_str::<Value>(&s.state).unwrap_or_else(|_| Value::String(s.state.clone()))
    };
    match (decode(before), decode(after)) {
        (Value::Object(b), Value::Object(a)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for k in keys {
                field(format!("state.{k}"), b.get(k).cloned(), a.get(k).cloned());
            }
        }
        (b, a) => field("state".into(), Some(b), Some(a)),
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_strategy_captures_where_the_spec_says() {
        use CapturePoint::{RoundTrip, Tool};
        let d = Duration::from_secs(10);
        let due = |s, p, e, t| capture_due(s, p, e, t);
        assert!(due(CheckpointStrategy::OnToolUse, Tool, Some(1), None));
        assert!(!due(CheckpointStrategy::OnToolUse, RoundTrip, None, None));
        assert!(!due(CheckpointStrategy::OnComplete, Tool, None, None));
        assert!(!due(CheckpointStrategy::OnDemand, Tool, None, None));
        let periodic = CheckpointStrategy::Periodic(d);
        assert!(due(periodic, RoundTrip, Some(1), None));
        assert!(!due(
            periodic,
            RoundTrip,
            Some(1),
            Some(Duration::from_secs(1))
        ));
        assert!(due(periodic, Tool, Some(1), Some(Duration::from_secs(11))));
        assert!(!due(
            CheckpointStrategy::EveryEvents(5),
            Tool,
            Some(4),
            None
        ));
        assert!(due(
            CheckpointStrategy::EveryEvents(5),
            RoundTrip,
            Some(5),
            None
        ));
    }

    #[test]
    fn diff_states_names_each_changed_field() {
        let snap = |state: &str, resumable| AdapterStateSnapshot {
            snapshot_id: uuid::Uuid::nil(),
            adapter_type: "claude_agent_sdk".into(),
            state: state.into(),
            resumable,
            captured_at: now(),
            evaluation_id: None,
            supersedes: None,
        };
        let a = snap(r#"{"session_id":"s","message_count":2,"x":1}"#, true);
        let b = snap(
            r#"{"session_id":"s","message_count":5,"is_complete":true}"#,
            false,
        );
        let d = diff_states(&a, &b);
        let fields: Vec<&str> = d.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "resumable",
                "state.is_complete",
                "state.message_count",
                "state.x"
            ]
        );
        assert_eq!(d[2].before, Some(Value::from(2)));
        assert_eq!(d[3].after, None);
        assert!(diff_states(&a, &a).is_empty());
        let d = diff_states(&snap("opaque", true), &snap("other", true));
        assert_eq!(d[0].field, "state");
    }
}
