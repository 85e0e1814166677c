//! [`ListDelta`]: what changed in a list since a snapshot, the shape in
//! which a delta snapshot (`delta.rs`) carries the tool calls
//! (`tool_calls.rs`) and each list of the conversation engine's log
//! (`conversation_log.rs`). A leaf: the slices that make and apply one and the
//! delta snapshot that writes and reads them all use it.

use serde::{Deserialize, Serialize};

/// What changed in a list since a snapshot: its length then, the items
/// below it that changed (by index), and the items added after it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct ListDelta<T> {
    pub(crate) before: u64,
    pub(crate) changed: Vec<(u64, T)>,
    pub(crate) added: Vec<T>,
}
