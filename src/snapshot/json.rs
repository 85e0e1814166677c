//! The WINK-shaped JSON form of a [`SessionState`]: written under the
//! crate's slice names (`items.rs`) or the specs' (`wink.rs`), read
//! strictly (`read.rs`, `check.rs`), WINK's own documents included
//! (`wink_read.rs`).

mod check;
mod items;
mod read;
mod wink;
mod wink_read;

use self::items::to_value;
use self::read::{from_reader, from_str};
use self::wink::to_wink_value;
use crate::error::Result;
use crate::snapshot::{JsonOptions, SliceNames};
use crate::state::{SessionState, SliceRegistry};

impl SessionState {
    /// The state as a WINK-shaped JSON snapshot, every object's keys sorted:
    ///
    /// ```text
    /// {"children_ids":[],"created_at":"...","parent_id":null,
    ///  "policies":{"agent_journal:InnerMessage":"state",...},
    ///  "slices":[{"item_type":"agent_journal:InnerMessage","items":[...],
    ///             "slice_type":"agent_journal:InnerMessage"},...],
    ///  "tags":{},"version":"1"}
    /// ```
    ///
    /// Slices: `agent_journal:InnerMessage` (the messages, as serde writes
    /// [`InnerMessage`](crate::InnerMessage)), `agent_journal:ToolCall`,
    /// `agent_journal:Evaluation`, `agent_journal:ConversationState` (message
    /// ids by turn), `agent_journal:AdapterStateSnapshot` (LOG, always), `agent_journal:Usage`, `agent_journal:SessionInfo`
    /// (labels, fork origin, seq), then each application slice under its
    /// name, with its JSON as the only item. With [`SliceNames::Wink`] the
    /// document carries the specs' names instead (see there).
    ///
    /// An application slice serde cannot write as JSON (a map with non-string
    /// keys) is written with no items, which [`from_json`](Self::from_json) rejects.
    pub fn to_json(&self, opts: &JsonOptions) -> String {
        match &opts.names {
            SliceNames::Journal => to_value(self, opts).to_string(),
            SliceNames::Wink { module } => to_wink_value(self, opts, module.as_deref()).to_string(),
        }
    }

    /// Reads a JSON snapshot written by [`to_json`](Self::to_json) under
    /// either kind of [`SliceNames`], or by WINK itself from the specs'
    /// `InnerMessage` items (with `ConversationState` and
    /// `AdapterStateSnapshot` items beside them, if any): then the state is
    /// the fold of the messages in sequence order per evaluation, each
    /// call's status as its record gives it; an `evaluation_id` that is not
    /// a UUID gets a UUID derived from it (v5), and the session label
    /// `agent_journal.wink_evaluation_ids` keeps the originals, so a WINK
    /// export writes them back. The application slices are those of
    /// `registry`. LOG slices may be absent (they start empty); every STATE
    /// slice must be there. Indexes are rebuilt from the items, so
    /// `from_json(to_json(s))` equals `s` when `include_logs` was set (or
    /// the application has no LOG slice).
    ///
    /// # Errors
    /// [`Error::SnapshotRestore`](crate::Error::SnapshotRestore) naming what
    /// is wrong and where (`slices[0].items[3]: invalid timestamp
    /// "yesterday"`): not JSON, not an object, a missing or unknown key, a
    /// version other than `"1"`, a bad timestamp or id, an item of the wrong
    /// shape, an unknown or repeated slice type, a policy that disagrees with
    /// the slice's, a missing STATE slice. Never panics.
    pub fn from_json(text: &str, registry: &SliceRegistry) -> Result<SessionState> {
        from_str(text, registry)
    }

    /// Reads a document from `reader` as [`from_json`](Self::from_json)
    /// reads its text, parsed straight into JSON (the text is never held
    /// whole), each item's JSON dropped as soon as it is parsed: a document
    /// of one long message costs about twice the message, where reading it
    /// as text first costs the text as well.
    ///
    /// # Errors
    /// As [`from_json`](Self::from_json); a read that fails is an
    /// [`Error::SnapshotRestore`](crate::Error::SnapshotRestore) saying
    /// "not read".
    pub fn from_json_reader(
        reader: impl std::io::Read,
        registry: &SliceRegistry,
    ) -> Result<SessionState> {
        from_reader(reader, registry)
    }
}
