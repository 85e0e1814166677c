//! What a session holds: [`SessionState`], folded from its events by pure
//! reducers, with a slice per concern.
//!
//! ```
//! use agent_journal::{Journal, ToolCallRecord, ToolStatus};
//!
//! # fn main() -> agent_journal::Result<()> {
//! let journal = Journal::memory();
//! let session = journal.create_session()?;
//! let eval = session.start_evaluation("support", "triage")?;
//! eval.user("What is in /tmp?")?;
//! eval.assistant("Looking.", vec![ToolCallRecord::new("call_1", "list_dir", "{}")])?;
//! eval.tool_started("call_1")?;
//!
//! let state = session.state(); // the fold up to the last event
//! assert_eq!(state.messages().for_evaluation(eval.id()).count(), 2);
//! let call = state.tool_calls().get(eval.id(), &"call_1".into()).expect("recorded");
//! assert_eq!(call.status, ToolStatus::Started);
//! # Ok(())
//! # }
//! ```
//!
//! A [`SessionState`] holds the built-in slices ([`Messages`], [`ToolCalls`],
//! [`Evaluations`], [`AdapterStates`], [`Usage`], [`ConversationLog`]) and any
//! application slices registered in a [`SliceRegistry`]. Folding is
//! deterministic: `fold(all) == fold(prefix)` then `fold(rest)`, and a state
//! decoded from a snapshot folds on exactly like the state it was taken from.
//!
//! Every reducer costs O(1) amortized or O(log n) per event, never O(n).

mod adapter_states;
mod binary;
pub(crate) mod conversation;
pub(crate) mod conversation_log;
pub(crate) mod delta;
mod dyn_slice;
mod evaluations;
mod hash;
mod keys;
mod list_delta;
mod messages;
mod session;
mod tool_calls;
mod usage;

#[cfg(test)]
pub(crate) mod tests;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::event::Envelope;

pub use adapter_states::AdapterStates;
pub use conversation::{ConversationView, TurnView};
pub use conversation_log::ConversationLog;
pub(crate) use dyn_slice::DynSlice;
pub use dyn_slice::SliceRegistry;
pub use evaluations::{EvaluationInfo, Evaluations};
pub use messages::Messages;
pub(crate) use messages::peek_message;
pub(crate) use session::Marks;
pub use session::SessionState;
pub use tool_calls::{ToolCallInfo, ToolCalls};
pub use usage::{Usage, UsageTotals};

pub use crate::snapshot::{JsonOptions, SliceNames};

/// What happens to a slice when a state is restored from a snapshot
/// ([`SessionState::restore`]), as in WINK's sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlicePolicy {
    /// The slice is replaced by the snapshot's version (rolled back).
    State,
    /// The slice is an append-only log of the live session and survives a
    /// restore untouched (adapter states, audit trails).
    Log,
}

impl SlicePolicy {
    /// The lowercase name (`"state"`, `"log"`), as written in JSON snapshots.
    pub fn as_str(&self) -> &'static str {
        match self {
            SlicePolicy::State => "state",
            SlicePolicy::Log => "log",
        }
    }
}

/// An application slice: state folded from the session's events by a pure
/// reducer, carried in snapshots next to the built-in slices.
///
/// `apply` sees every envelope exactly as appended, duplicates included, and
/// must be deterministic (no clock, no randomness, no I/O). Use ordered
/// containers (`BTreeMap`, `Vec`) rather than `HashMap`: two states compare
/// equal when their slices encode to the same bytes.
///
/// ```
/// use agent_journal::{Envelope, Event};
/// use agent_journal::state::Slice;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Default, Serialize, Deserialize)]
/// struct Counter(u64);
///
/// impl Slice for Counter {
///     const NAME: &'static str = "myapp:Counter";
///     fn apply(&mut self, envelope: &Envelope) {
///         if let Event::Custom { .. } = envelope.event {
///             self.0 += 1;
///         }
///     }
/// }
/// ```
pub trait Slice: Default + Clone + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The slice's unique name, `"crate:Type"` style. It names the slice in
    /// snapshots; names starting with `agent_journal:` are reserved.
    const NAME: &'static str;
    /// Its restore policy. Default: [`SlicePolicy::State`].
    const POLICY: SlicePolicy = SlicePolicy::State;
    /// Folds one event into the slice.
    fn apply(&mut self, envelope: &Envelope);
}
