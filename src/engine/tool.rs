//! Tools and their idempotency.

use crate::event::conversation::ToolSpec;
use crate::model::{CallId, EvaluationId};

/// What running a tool twice does, which decides what resume does with a
/// call that was running when the process died (*in doubt*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Idempotency {
    /// Running it again is harmless (reads, pure computations): re-run.
    #[default]
    Safe,
    /// It deduplicates by [`ToolContext::call_id`]: re-run with
    /// `is_resume = true`, and the tool returns its first result.
    Keyed,
    /// It must never run twice (payments, emails): resume stops with
    /// [`Error::ToolIdempotency`](crate::Error::ToolIdempotency), unless the
    /// caller asks to record the call as failed ("interrupted").
    Never,
}

/// What a tool is told about the call it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolContext {
    /// The provider's call id: the idempotency key.
    pub call_id: CallId,
    /// True when the call is re-run by a resume after it was in doubt.
    pub is_resume: bool,
    /// The evaluation the call belongs to.
    pub evaluation_id: EvaluationId,
}

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model. Default: empty.
    fn description(&self) -> &str {
        ""
    }

    /// The JSON schema of its arguments. Default: any object
    /// (`{"type": "object"}`).
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }

    /// The tool as a provider request offers it: name, description and
    /// parameters schema.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }

    /// What running it twice does. Default: [`Idempotency::Safe`].
    fn idempotency(&self) -> Idempotency {
        Idempotency::Safe
    }

    /// Runs the tool with its JSON arguments. `Ok` is the result shown to the
    /// model; `Err` is a failure, recorded as a failed call (and shown to the
    /// model as the tool's result, so it can react).
    fn call(&self, arguments: &str, ctx: &ToolContext) -> Result<String, String>;
}
