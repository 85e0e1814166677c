//! Running an agent on the journal: the inner loop that calls a
//! [`Provider`], runs the [`Tool`]s it asks for and records every step, so
//! that a crashed run resumes where it stopped and a finished tool never
//! runs twice.
//!
//! ```
//! use agent_journal::agent::{InnerLoop, ScriptStep, ScriptedProvider, Tool, ToolContext};
//! use agent_journal::{Journal, Outcome};
//!
//! struct Echo;
//! impl Tool for Echo {
//!     fn name(&self) -> &str {
//!         "echo"
//!     }
//!     fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
//!         Ok(arguments.to_owned())
//!     }
//! }
//!
//! # fn main() -> agent_journal::Result<()> {
//! let journal = Journal::memory();
//! let session = journal.create_session()?;
//! let model = ScriptedProvider::new(vec![ScriptStep {
//!     content: "Echoing.".into(),
//!     calls: vec![("echo".into(), r#"{"text":"hi"}"#.into())],
//! }]);
//! let agent = InnerLoop::new(&model, vec![&Echo]);
//! let result = agent.run(&session, "demo", "echo", "You echo.", "Say hi")?;
//! assert_eq!(result.outcome, Outcome::Succeeded);
//! assert_eq!(session.state().tool_calls().len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! The guarantees per tool are its [`Idempotency`]; a run that stopped is
//! continued with [`InnerLoop::resume`] and its [`ResumeOptions`].

pub use crate::engine::adapter::{
    AdapterState, ResumeValidation, SdkSessionState, validate_sdk_state,
};
pub use crate::engine::inner_loop::{InnerLoop, LoopResult, ResumeMode, ResumeOptions};
pub use crate::engine::provider::{Provider, ProviderRequest, ProviderResponse};
pub use crate::engine::scripted::{ScriptStep, ScriptedProvider};
pub use crate::engine::stateful::{
    CapturedState, SdkStateTracker, StateChange, StateConfig, StatefulProvider, diff_states,
    validate_state,
};
pub use crate::engine::tool::{Idempotency, Tool, ToolContext};
