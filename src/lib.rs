//! **agent-journal**: the flight recorder and durable memory of AI agents.
//!
//! Every message and every tool-call status change an agent makes is appended
//! as an event to an append-only, checksummed journal (sled, embedded).
//! Reducers fold the events into a session state, so the state at any event
//! is the fold up to it, a snapshot is that fold cached, and resuming after a
//! crash is "replay to the crash point, then run only the tool calls that
//! never finished".
//!
//! ```
//! use agent_journal::{Journal, Outcome, ToolCallRecord, ToolStatus};
//!
//! # fn main() -> agent_journal::Result<()> {
//! # let dir = tempfile::tempdir().expect("tempdir");
//! # let path = dir.path().join("journal.db");
//! let (session_id, eval_id) = {
//!     let journal = Journal::open(&path)?;
//!     let session = journal.create_session()?;
//!     let eval = session.start_evaluation("support", "triage")?;
//!     eval.system("You are a helpful agent.")?;
//!     eval.user("What is in /tmp?")?;
//!     eval.assistant("Let me look.", vec![ToolCallRecord::new("call_1", "list_dir", r#"{"path":"/tmp"}"#)])?;
//!     eval.tool_started("call_1")?;
//!     // The process dies here: the tool was running, no result was recorded.
//!     (session.id(), eval.id())
//! }; // dropping everything is the crash: each append above was already durable
//!
//! let journal = Journal::open(&path)?;
//! let session = journal.session(session_id)?;
//! let call = session.state().tool_calls().get(eval_id, &"call_1".into()).cloned().expect("recorded");
//! assert_eq!(call.status, ToolStatus::Started); // in doubt: it started, it never finished
//!
//! // Continue the same evaluation where it stopped.
//! let eval = session.evaluation(eval_id)?;
//! eval.tool_result("call_1", "a.txt b.txt")?;
//! eval.assistant("There are two files.", vec![])?;
//! eval.finish(Outcome::Succeeded)?;
//! assert_eq!(session.state().messages().for_evaluation(eval_id).count(), 5);
//! # Ok(())
//! # }
//! ```
//!
//! # What survives what
//!
//! With the default [`Durability::Synced`], an event is on disk when
//! `append` returns (written to the database's write-ahead log and synced):
//! it survives a crash of the process and a loss of power. [`Durability::Flushed`] survives a process crash but
//! not necessarily power loss; [`Durability::Buffered`] may lose the last
//! ~500 ms in a process crash. In every case what survives is a gap-free
//! prefix of each stream. Concurrent appenders share one sync (group commit).
//!
//! Every record is a checksummed frame (`docs/format.md`). A damaged record
//! at the end of a stream (a torn tail) is reported and cut off at the next
//! append; a damaged record followed by good ones is [`Error::Corruption`]
//! with its session and seq, never a panic and never skipped silently.
//! Snapshots are only a cache: a damaged one is ignored.
//!
//! # What it is not
//!
//! Not a general database (one writer process per database: a second gets
//! [`Error::Locked`]), not a model client (providers are traits you
//! implement), and not a place for large blobs (events are limited to
//! 16 MiB by default).
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod agent;
mod engine;
mod error;
mod event;
pub mod format;
mod journal;
pub mod maintenance;
mod mem;
mod model;
pub mod provider;
pub mod resume;
mod session;
mod snapshot;
pub mod state;
pub mod store;
pub mod transfer;
mod verify;

/// The conversation engine: conversations, turns, provider adapters, stores.
pub use crate::engine::conversation;
pub use crate::error::{Error, Result};
pub use crate::event::{
    AdapterStateSnapshot, Envelope, Event, Outcome, ProviderCallRecord, ProviderOutcome, TokenUsage,
};
pub use crate::journal::{AfterAppend, Journal, JournalConfig, SessionInfo, SessionStatus};
pub use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, SessionId, ToolCallRecord, ToolStatus,
};
pub use crate::session::recorder::Evaluation;
pub use crate::session::{LoadStats, Session, StateGuard};
pub use crate::snapshot::CheckpointStrategy;
pub use crate::store::durability::Durability;
