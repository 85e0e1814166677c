//! The one error type of the crate.

use std::path::PathBuf;

use crate::model::SessionId;

/// Every error the library returns.
///
/// Messages name the session, the seq and the byte offset where they apply,
/// so that a one-line report is enough to find the damage.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error, with what we were doing and on which path.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the journal was doing (`"opening /x/y"`, `"syncing"`).
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A record failed its checksum, its version or its decoding, before good
    /// records: the journal refuses to guess. Use `salvage` to copy what is readable.
    #[error("corruption in {}{}{}: {reason}",
        session.map(|s| format!("session {s}")).unwrap_or_else(|| "journal".to_owned()),
        seq.map(|s| format!(" at seq {s}")).unwrap_or_default(),
        offset.map(|o| format!(" at byte offset {o}")).unwrap_or_default())]
    Corruption {
        /// The session the damaged record belongs to, when known.
        session: Option<SessionId>,
        /// The seq of the damaged record, when known.
        seq: Option<u64>,
        /// The byte offset of the damaged record in its file, when it has one.
        offset: Option<u64>,
        /// What is wrong with it.
        reason: String,
    },
    /// An append was made against a stale head: someone else appended first.
    /// Nothing was written; re-read the head and retry.
    #[error(
        "conflict on session {session}: expected next seq {expected}, but the stream is at {found}"
    )]
    Conflict {
        /// The session appended to.
        session: SessionId,
        /// The next seq the writer expected.
        expected: u64,
        /// The real next seq of the stream.
        found: u64,
    },
    /// No session with this id exists in the journal.
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    /// The session is one that a copy into this journal left in part: the
    /// copy stopped (was killed, failed) before its last event was durable.
    /// Run the copy again (it replaces the session), or delete it.
    #[error(
        "session {0} is incomplete: a copy into this journal stopped before its last event; \
         run the copy again to finish it"
    )]
    IncompleteSession(SessionId),
    /// A seq or range beyond the stream's head.
    #[error("session {session}: seq {seq} is past the head (the stream has {len} events)")]
    SeqOutOfRange {
        /// The session.
        session: SessionId,
        /// The seq asked for.
        seq: u64,
        /// Number of events in the stream.
        len: u64,
    },
    /// There is no conversation (evaluation) to resume in the session.
    #[error("no conversation to resume in session {0}")]
    ConversationNotFound(SessionId),
    /// The evaluation to resume already finished: there is nothing to continue.
    #[error("evaluation {evaluation} of session {session} already finished; nothing to resume")]
    AlreadyFinished {
        /// The session.
        session: SessionId,
        /// The finished evaluation.
        evaluation: crate::model::EvaluationId,
    },
    /// The prompt given for a resume is not the one the evaluation started with.
    #[error(
        "prompt mismatch: the evaluation was started with {expected}, resume was asked with {found}"
    )]
    PromptMismatch {
        /// `ns/key` of the recorded evaluation.
        expected: String,
        /// `ns/key` given by the caller.
        found: String,
    },
    /// A snapshot (binary or WINK-shaped JSON) could not be restored.
    #[error("cannot restore snapshot: {0}")]
    SnapshotRestore(String),
    /// A tool call is in doubt (started, no result) and its tool must never run twice.
    #[error(
        "tool call {call_id} ({tool}) was running when the process stopped and its tool is not idempotent"
    )]
    ToolIdempotency {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        tool: String,
    },
    /// An adapter state is too old, or does not match, to be resumed.
    #[error("adapter session expired or invalid: {0}")]
    SessionExpired(String),
    /// The database is in use by another process.
    #[error("database {} is locked by another process (only one process may open it at a time)", path.display())]
    Locked {
        /// The database directory.
        path: PathBuf,
    },
    /// A path another user of the machine could change under this process
    /// (a folder they may write into, one of theirs, a link they own): it is
    /// not written into, and a link of theirs is not followed.
    #[error("{}: refused: {reason}", path.display())]
    UnsafePath {
        /// The path refused.
        path: PathBuf,
        /// What makes it unsafe.
        reason: String,
    },
    /// The path exists but is not a journal database or exported journal file.
    #[error("{} is not an agent-journal database or .ajournal file: {reason}", path.display())]
    NotAJournal {
        /// The path given.
        path: PathBuf,
        /// Why it was rejected.
        reason: String,
    },
    /// An event (or snapshot) is over the configured size limit; nothing was written.
    #[error("event of {size} bytes is over the limit of {limit} bytes; nothing was written")]
    TooLarge {
        /// Encoded size of the event.
        size: u64,
        /// The configured limit (`JournalConfig::max_event_bytes`).
        limit: u64,
    },
    /// An earlier write or flush failed: the writer refuses further appends, because the
    /// durability of what it acknowledged before can no longer be promised.
    #[error(
        "journal writer is poisoned by an earlier failed write or flush ({0}); reopen the journal"
    )]
    Poisoned(String),
    /// The operation is not possible on this kind of journal (for example,
    /// appending to an exported `.ajournal` file opened read-only).
    #[error("{0}")]
    Unsupported(String),
    /// An input file (import) is malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// An error of the storage engine that is not I/O or corruption.
    #[error("storage error: {0}")]
    Storage(String),
    /// The session exists but holds no conversation of the conversation engine.
    #[error("no conversation {0} (the session is missing or holds no conversation)")]
    NotAConversation(SessionId),
    /// A conversation with this id already exists.
    #[error("conversation {0} already exists")]
    ConversationExists(SessionId),
    /// The conversation has no turn with this id.
    #[error("conversation {conversation} has no turn {turn}")]
    TurnNotFound {
        /// The conversation.
        conversation: SessionId,
        /// The turn asked for.
        turn: uuid::Uuid,
    },
    /// A turn failed (its provider call failed, or it was interrupted); the
    /// turn is recorded as failed with the same error.
    #[error("turn {turn} of conversation {conversation} failed: {message}")]
    TurnFailed {
        /// The conversation.
        conversation: SessionId,
        /// The turn.
        turn: uuid::Uuid,
        /// The error, as recorded in the turn.
        message: String,
    },
    /// The turn already finished; there is nothing to resume.
    #[error("turn {turn} of conversation {conversation} already {status}; nothing to resume")]
    TurnFinished {
        /// The conversation.
        conversation: SessionId,
        /// The turn.
        turn: uuid::Uuid,
        /// Its status (`"succeeded"`).
        status: String,
    },
    /// A new turn was asked of a conversation that has an interrupted turn
    /// (left unfinished by a process that stopped) under
    /// [`InterruptedTurns::Refuse`](crate::conversation::InterruptedTurns::Refuse):
    /// nothing was written. Resume, fail or cancel that turn first. CLI
    /// exit code 1.
    #[error(
        "conversation {conversation} has an interrupted turn {turn}: resume, fail or cancel it before running a new turn"
    )]
    InterruptedTurn {
        /// The conversation.
        conversation: SessionId,
        /// The first interrupted turn.
        turn: uuid::Uuid,
    },
    /// A provider call outside a turn failed (a compaction's summary).
    #[error("provider {provider} failed: {message}")]
    ProviderFailed {
        /// The provider id.
        provider: String,
        /// Its error.
        message: String,
    },
    /// An error of the PostgreSQL server or of the connection to it. It
    /// poisons nothing: the failed operation had no effect, or (a commit
    /// whose answer was lost) a retry with the same expected head finds it
    /// as a `Conflict`.
    #[error("database error: {0}")]
    Database(String),
    /// An append or renewal under a lease that another worker has taken
    /// over (or that was released): nothing was written. CLI exit code 4.
    #[error("session {session}: the lease of epoch {epoch} is no longer held{}", match holder {
        Some((owner, epoch)) => format!(" ({owner:?} holds epoch {epoch})"),
        None => String::new(),
    })]
    Fenced {
        /// The session.
        session: SessionId,
        /// The epoch of the stale lease.
        epoch: u64,
        /// Who holds the lease now, and its epoch, if anyone does.
        holder: Option<(String, u64)>,
    },
    /// Another worker holds a live lease of the session. CLI exit code 4.
    #[error("session {session} is leased by {owner:?} until {expires_at}")]
    LeaseHeld {
        /// The session.
        session: SessionId,
        /// The worker holding it.
        owner: String,
        /// When the lease lapses unless renewed.
        expires_at: chrono::DateTime<chrono::Utc>,
    },
    /// No provider adapter is configured under this id.
    #[error("no provider adapter {0:?} is configured")]
    UnknownProvider(String),
    /// An import under `strict` met an item or content block whose type the
    /// journal does not model (without `strict` it is kept verbatim as an
    /// opaque item); nothing was imported.
    #[error(
        "{at}: {kind:?} is a type the journal does not model (refused by --strict); nothing was imported"
    )]
    Unmodeled {
        /// Where it is: the item's path (`input[3]`,
        /// `messages[2].content[1]`) or the log's line (`line 7`), after
        /// the file's name when known.
        at: String,
        /// Its type, as the input names it.
        kind: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with a description of what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A corruption error with the parts that are known.
    pub(crate) fn corruption(
        session: Option<SessionId>,
        seq: Option<u64>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            session,
            seq,
            offset,
            reason: reason.into(),
        }
    }

    /// True for errors that mean stored data is damaged (CLI exit code 3).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// The variant's name in snake_case (`"locked"`, `"corruption"`): a
    /// stable code for machines (the CLI's JSON errors carry it).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Corruption { .. } => "corruption",
            Error::Conflict { .. } => "conflict",
            Error::SessionNotFound(_) => "session_not_found",
            Error::IncompleteSession(_) => "incomplete_session",
            Error::SeqOutOfRange { .. } => "seq_out_of_range",
            Error::ConversationNotFound(_) => "conversation_not_found",
            Error::AlreadyFinished { .. } => "already_finished",
            Error::PromptMismatch { .. } => "prompt_mismatch",
            Error::SnapshotRestore(_) => "snapshot_restore",
            Error::ToolIdempotency { .. } => "tool_idempotency",
            Error::SessionExpired(_) => "session_expired",
            Error::Locked { .. } => "locked",
            Error::NotAJournal { .. } => "not_a_journal",
            Error::UnsafePath { .. } => "unsafe_path",
            Error::TooLarge { .. } => "too_large",
            Error::Poisoned(_) => "poisoned",
            Error::Unsupported(_) => "unsupported",
            Error::InvalidInput(_) => "invalid_input",
            Error::Storage(_) => "storage",
            Error::NotAConversation(_) => "not_a_conversation",
            Error::ConversationExists(_) => "conversation_exists",
            Error::TurnNotFound { .. } => "turn_not_found",
            Error::TurnFailed { .. } => "turn_failed",
            Error::TurnFinished { .. } => "turn_finished",
            Error::InterruptedTurn { .. } => "interrupted_turn",
            Error::ProviderFailed { .. } => "provider_failed",
            Error::Database(_) => "database",
            Error::Fenced { .. } => "fenced",
            Error::LeaseHeld { .. } => "lease_held",
            Error::UnknownProvider(_) => "unknown_provider",
            Error::Unmodeled { .. } => "unmodeled",
        }
    }
}
