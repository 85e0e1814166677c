//! agent-journal (work in progress; crate docs written with the journal).
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod codec;
mod error;
mod event;
mod model;
mod snapshot;
mod state;

pub use crate::codec::{
    DEFAULT_MAX_EVENT_BYTES, FRAME_HEADER_LEN, FRAME_VERSION, FrameError, codec, decode_frame,
    encode_frame, seal, verify_frame,
};
pub use crate::error::{Error, Result};
pub use crate::event::{
    AdapterStateSnapshot, Envelope, Event, Outcome, ProviderCallRecord, ProviderOutcome, TokenUsage,
};
pub use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, SessionId, ToolCallRecord, ToolStatus,
    now, ts,
};
pub use crate::snapshot::{CheckpointStrategy, JsonOptions};
pub use crate::state::{
    AdapterStates, Conversation, ConversationView, EvaluationInfo, Evaluations, Messages,
    SessionState, Slice, SlicePolicy, SliceRegistry, ToolCallInfo, ToolCalls, TurnIds, TurnView,
    Usage, UsageTotals,
};
