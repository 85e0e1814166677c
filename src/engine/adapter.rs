//! Adapter states (adapter-state spec): what an SDK-backed adapter needs to
//! resume its own session after a worker dies, kept in a LOG slice.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize as SerializeDerive};

use crate::error::{Error, Result};
use crate::event::AdapterStateSnapshot;
use crate::session::Session;
use crate::session::recorder::Evaluation;

/// An adapter's resumable state. Keep it small: ids and metadata, not history.
pub trait AdapterState: Serialize + DeserializeOwned {
    /// The adapter type (`"claude_agent_sdk"`).
    fn adapter_type(&self) -> &str;
    /// Whether the state can be used to resume.
    fn resumable(&self) -> bool;
}

/// The state of an SDK session (the spec's `ClaudeAgentSDKState`).
#[derive(Clone, Debug, PartialEq, Eq, SerializeDerive, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdkSessionState {
    /// The SDK's session id, passed back to it to resume.
    pub session_id: String,
    /// When the SDK session was created.
    #[serde(with = "crate::model::ts")]
    pub created_at: DateTime<Utc>,
    /// When the last message was received.
    #[serde(with = "crate::model::ts")]
    pub last_activity_at: DateTime<Utc>,
    /// The working directory it ran in.
    pub workspace_path: Option<String>,
    /// The prompt that started it.
    pub prompt_name: String,
    /// Messages in the SDK session (for validation).
    pub message_count: u64,
    /// Whether the SDK session completed normally.
    pub is_complete: bool,
}

impl SdkSessionState {
    /// The adapter type of this state.
    pub const ADAPTER_TYPE: &'static str = "claude_agent_sdk";
}

impl AdapterState for SdkSessionState {
    fn adapter_type(&self) -> &str {
        Self::ADAPTER_TYPE
    }
    fn resumable(&self) -> bool {
        !self.session_id.is_empty() && !self.is_complete
    }
}

/// How strictly a found adapter state is checked before it is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeValidation {
    /// Resumable, same workspace, same prompt, and last active within `max_age`.
    Strict {
        /// The oldest `last_activity_at` accepted.
        max_age: Duration,
    },
    /// Only that the session id exists and the session is resumable (the
    /// adapter-state spec's `RELAXED`).
    Relaxed,
    /// Only that it decodes (the adapter-state spec's `NONE`). What is
    /// checked is still the most recent resumable state: the recovery flow
    /// finds that first, whatever the validation.
    None,
}

impl Evaluation {
    /// Records an adapter state (a LOG slice entry: it survives restores).
    pub fn capture_adapter_state<S: AdapterState>(&self, state: &S) -> Result<u64> {
        let json = serde_json::to_string(state)
            .map_err(|e| Error::InvalidInput(format!("adapter state: {e}")))?;
        self.adapter_state(state.adapter_type(), json, state.resumable())
    }
}

impl Session {
    /// The most recent resumable adapter state of `adapter_type`, if any.
    pub fn find_resumable_state(&self, adapter_type: &str) -> Option<AdapterStateSnapshot> {
        self.state()
            .adapter_states()
            .find_resumable(adapter_type)
            .cloned()
    }

    /// The adapter-state spec's recovery flow for an SDK session: the most
    /// recent *resumable* SDK state ([`Self::find_resumable_state`]; a
    /// later capture that is not resumable, a completed session or one
    /// with no session id yet, does not hide it), decoded and checked as
    /// `validation` says ([`validate_sdk_state`]). Under
    /// [`ResumeValidation::None`] the state found is returned unchecked,
    /// with its session id.
    ///
    /// # Errors
    /// [`Error::SessionExpired`] saying why no state can be used (no
    /// resumable one, another workspace or prompt, too old, undecodable).
    pub fn resumable_sdk_state(
        &self,
        validation: ResumeValidation,
        workspace: Option<&str>,
        prompt_name: &str,
        at: DateTime<Utc>,
    ) -> Result<SdkSessionState> {
        let found = self
            .find_resumable_state(SdkSessionState::ADAPTER_TYPE)
            .ok_or_else(|| {
                Error::SessionExpired(format!(
                    "no resumable {} state in session {}",
                    SdkSessionState::ADAPTER_TYPE,
                    self.id()
                ))
            })?;
        validate_sdk_state(&found, validation, workspace, prompt_name, at)
    }
}

/// Checks a captured SDK state against what the resuming worker has.
///
/// # Errors
/// [`Error::SessionExpired`] with the reason.
pub fn validate_sdk_state(
    snapshot: &AdapterStateSnapshot,
    validation: ResumeValidation,
    workspace: Option<&str>,
    prompt_name: &str,
    at: DateTime<Utc>,
) -> Result<SdkSessionState> {
    let state: SdkSessionState = serde_json::from_str(&snapshot.state).map_err(|e| {
        Error::SessionExpired(format!(
            "adapter state {} is unreadable: {e}",
            snapshot.snapshot_id
        ))
    })?;
    if validation == ResumeValidation::None {
        return Ok(state);
    }
    if !state.resumable() {
        return Err(Error::SessionExpired(format!(
            "SDK session {:?} is not resumable ({})",
            state.session_id,
            if state.is_complete {
                "it completed"
            } else {
                "it has no session id"
            }
        )));
    }
    if let ResumeValidation::Strict { max_age } = validation {
        if state.prompt_name != prompt_name {
            return Err(Error::SessionExpired(format!(
                "SDK session {:?} ran prompt {:?}, not {prompt_name:?}",
                state.session_id, state.prompt_name
            )));
        }
        if state.workspace_path.as_deref() != workspace {
            return Err(Error::SessionExpired(format!(
                "SDK session {:?} ran in workspace {:?}, not {:?}",
                state.session_id, state.workspace_path, workspace
            )));
        }
        let age = (at - state.last_activity_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        if age > max_age {
            return Err(Error::SessionExpired(format!(
                "SDK session {:?} was last active {}s ago (limit {}s)",
                state.session_id,
                age.as_secs(),
                max_age.as_secs()
            )));
        }
    }
    Ok(state)
}
