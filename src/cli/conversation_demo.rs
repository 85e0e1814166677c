//! `demo --conversation`: a scripted multi-turn conversation run through the
//! conversation engine, with the demo's real tools in a sandbox, hooks that
//! print to stderr, and a turn that fails; and its resume after a crash.
//!
//! The driver is idempotent: each step looks at what the conversation
//! already holds (its user messages, its turns) and does only what is
//! missing, so a resume finishes the interrupted turns and then goes on
//! with the rest of the script exactly as an uninterrupted run would.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_journal::Role;
use agent_journal::agent::ResumeMode;
use agent_journal::conversation::{
    Conversation, ConversationEngine, ConversationEngineConfig, ConversationHooks, ConversationId,
    ConversationMessage, ConversationStore, ConversationTurn, CreateConversation,
    JournalConversationStore, Page, ResumeTurn, RunTurn, ScriptedAdapter, ScriptedReply,
};
use agent_journal::{Error, Journal, Session, SessionId};

use crate::cli::demo::{ListDir, WordCount, WriteFile, label_of};
use crate::cli::render::short;
use crate::cli::sandbox::Sandbox;

/// The agent of demo conversations: `resume` takes only these.
pub(crate) const AGENT: &str = "demo-conversation";
const SYSTEM: &str = "You are a careful file assistant working in a sandbox folder.";
const NOTES: &str = "buy milk\nfix the flaky test\ncall the bank\n";

/// What the user says, one message per turn.
const USERS: [&str; 4] = [
    "Write a short todo list to notes.txt.",
    "How many words does it have, and what else is in the folder?",
    "Now summarise the list in French.",
    "Please try again.",
];

fn script() -> Vec<Vec<ScriptedReply>> {
    let notes = serde_json::json!({"path": "notes.txt", "content": NOTES}).to_string();
    let readme =
        serde_json::json!({"path": "README.txt", "content": "sandbox of the agent-journal demo\n"})
            .to_string();
    let path = |p: &str| serde_json::json!({ "path": p }).to_string();
    vec![
        vec![
            ScriptedReply::calls(
                "I'll write the list.",
                &[("write_file", &notes), ("write_file", &readme)],
            ),
            ScriptedReply::text("Done: {results}."),
        ],
        vec![
            ScriptedReply::calls(
                "Let me look.",
                &[("word_count", &path("notes.txt")), ("list_dir", &path("."))],
            ),
            ScriptedReply::text("The tools said: {results}."),
        ],
        vec![ScriptedReply::Fail {
            message: "the model is overloaded (a scripted failure)".into(),
            code: "overloaded".into(),
        }],
        vec![ScriptedReply::text(
            "Acheter du lait, réparer le test instable, appeler la banque.",
        )],
    ]
}

/// Hooks that tell the user, on stderr, what the engine does.
struct Narrate;

impl ConversationHooks for Narrate {
    fn on_conversation_created(&self, c: &Conversation) {
        eprintln!("hook: conversation {} created for agent {}", c.id, c.agent);
    }
    fn before_turn(&self, t: &ConversationTurn, _: &Conversation) {
        let input = t
            .input_messages
            .last()
            .map(|m| m.text())
            .unwrap_or_default();
        eprintln!("hook: turn {} starts on {input:?}", short(t.id));
    }
    fn after_turn_success(&self, t: &ConversationTurn, _: &Conversation) {
        eprintln!(
            "hook: turn {} succeeded: {} messages, {} provider calls, {} tokens",
            short(t.id),
            t.output_messages.len(),
            t.provider_calls.len(),
            t.total_tokens()
        );
    }
    fn after_turn_error(&self, t: &ConversationTurn, e: &Error, _: &Conversation) {
        eprintln!("hook: turn {} failed: {e}", short(t.id));
    }
}

/// The demo's engine over `journal`, its tools working in `sandbox`.
fn engine(journal: &Journal, sandbox: &Arc<Sandbox>) -> ConversationEngine {
    let store = Arc::new(JournalConversationStore::new(journal.clone()));
    let mut config = ConversationEngineConfig::new(AGENT, store)
        .provider(Arc::new(ScriptedAdapter::new(script())), "scripted-1")
        .tool(Arc::new(WriteFile(sandbox.clone())))
        .tool(Arc::new(WordCount(sandbox.clone())))
        .tool(Arc::new(ListDir(sandbox.clone())));
    config.hooks = Some(Arc::new(Narrate));
    ConversationEngine::new(config)
}

/// The script's remaining steps: each user message not yet appended, each
/// turn not yet run. A scripted failure is recorded (and told by the
/// hooks), and the conversation goes on.
fn drive(engine: &ConversationEngine, id: ConversationId) -> Result<(), Error> {
    for (k, text) in USERS.iter().enumerate() {
        let messages = engine.store().get_messages(id, Page::all())?;
        let users = messages.iter().filter(|m| m.role == Role::User).count();
        if users <= k {
            engine.append_messages(id, &[ConversationMessage::user(*text)])?;
        }
        if engine.store().list_turns(id, Page::all())?.len() > k {
            continue;
        }
        match engine.run_turn(id, RunTurn::default()) {
            Ok(_) | Err(Error::TurnFailed { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Records a demo conversation in `journal` (the database at `db`), its
/// tools in a new folder under `sandbox_root`; returns its id and that folder.
pub(crate) fn run(
    journal: &Journal,
    sandbox_root: &Path,
) -> Result<(ConversationId, PathBuf), Error> {
    let sandbox = Arc::new(Sandbox::create_under(sandbox_root)?);
    let engine = engine(journal, &sandbox);
    // Recorded outside the session's events, before the conversation exists.
    let id = ConversationId::new();
    sandbox.admit(journal, id)?;
    let conversation = engine.create_conversation(CreateConversation {
        id: Some(id),
        title: Some("Todo list in the sandbox".into()),
        initial_messages: vec![ConversationMessage::system(SYSTEM)],
        ..CreateConversation::default()
    })?;
    drive(&engine, conversation.id)?;
    Ok((conversation.id, sandbox.path().to_owned()))
}

/// What a resume of a conversation found to do.
pub(crate) enum ConversationResume {
    /// It resumed.
    Resumed(Resumed),
    /// Nothing was left to do here, for this reason (nothing was written);
    /// `resumed_in` is the session that already resumed from this point.
    NothingToDo {
        reason: String,
        resumed_in: Option<SessionId>,
    },
}

/// What a resume of a conversation did.
pub(crate) struct Resumed {
    /// The session resumed in (a fork unless continued in place).
    pub(crate) target: Session,
    /// The interrupted turns, as they ended.
    pub(crate) turns: Vec<ConversationTurn>,
    /// The folder the tools worked in.
    pub(crate) sandbox: PathBuf,
}

/// Resumes a demo conversation: its interrupted turns are finished (never
/// left running), then the rest of the script runs. The sandbox is chosen
/// as for an inner-loop session (never from the session's own labels).
///
/// With no turn left interrupted and the script done, or when the session
/// or a fork of it already resumed from this point, it does nothing.
///
/// # Errors
/// Refusals come before anything is written: a conversation the demo did
/// not make, a session without a sandbox.
pub(crate) fn resume(
    session: &Session,
    mode: ResumeMode,
    interrupt_never_tools: bool,
    chosen: Option<&Path>,
) -> Result<ConversationResume, Error> {
    let id = session.id();
    let store = JournalConversationStore::new(session.journal().clone());
    let info = store
        .get_conversation(id)?
        .ok_or(Error::NotAConversation(id))?;
    if info.agent != AGENT {
        return Err(Error::InvalidInput(format!(
            "conversation {id} was made by agent {:?}, not by `demo --conversation`: resume it \
             with the engine and providers that made it",
            info.agent
        )));
    }
    let open = store
        .list_turns(id, Page::all())?
        .iter()
        .any(|t| !t.status.is_finished());
    let turns = store.list_turns(id, Page::all())?.len();
    if !open && turns >= USERS.len() {
        return Ok(ConversationResume::NothingToDo {
            reason: "no turn was interrupted and the script is done".into(),
            resumed_in: None,
        });
    }
    if let Some(e) = crate::cli::resumed::resumed_elsewhere(session)? {
        return Ok(ConversationResume::NothingToDo {
            reason: e.sentence(),
            resumed_in: Some(e.session),
        });
    }
    let sandbox = Arc::new(match chosen {
        Some(dir) => Sandbox::chosen(dir)?,
        None => Sandbox::recorded(session.journal(), id, label_of(session).as_deref())?,
    });
    let target = match mode {
        ResumeMode::Continue => session.clone(),
        ResumeMode::Fork => session.fork(session.head().saturating_sub(1))?,
    };
    if target.id() != id || chosen.is_some() {
        sandbox.admit(session.journal(), target.id())?;
    }
    let state = if open { "interrupted" } else { "script_left" };
    crate::cli::resumed::mark(&target, id, session.head().saturating_sub(1), state)?;
    let engine = engine(session.journal(), &sandbox);
    let options = ResumeTurn {
        interrupt_never_tools,
    };
    let mut done = Vec::new();
    for t in engine.interrupted_turns(target.id())? {
        match engine.resume_turn(target.id(), t.id, options) {
            Ok(turn) => done.push(turn),
            Err(Error::TurnFailed { .. }) => {
                if let Some(turn) = engine.store().get_turn(target.id(), t.id)? {
                    done.push(turn);
                }
            }
            Err(e) => return Err(e),
        }
    }
    drive(&engine, target.id())?;
    Ok(ConversationResume::Resumed(Resumed {
        target,
        turns: done,
        sandbox: sandbox.path().to_owned(),
    }))
}
