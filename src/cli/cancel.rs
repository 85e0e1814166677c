//! `cancel-turn CONVERSATION TURN [--reason TEXT]` (or `cancel-turn --last
//! TURN`): gives up an interrupted
//! turn for good, as the library's `ConversationEngine::cancel_turn` does.

use std::process::ExitCode;
use std::sync::Arc;

use agent_journal::Error;
use agent_journal::conversation::{
    ConversationEngine, ConversationEngineConfig, JournalConversationStore,
};
use clap::Args;
use serde_json::json;

use crate::cli::conversation::find_turn;
use crate::cli::find::{Pick, session_arg};
use crate::cli::global::Global;
use crate::cli::open::{find_session, open_existing};
use crate::cli::output::print_json;

/// The arguments of `cancel-turn`: `CONVERSATION TURN`, or `--last TURN`
/// (the command allows the missing first positional, so that a single
/// value is TURN); exactly one of CONVERSATION and `--last`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("conversation_ref")
    .args(["conversation", "last"])
    .required(true)
    .multiple(false))]
pub(crate) struct CancelArgs {
    /// Conversation (session) id, or a unique prefix or suffix of it.
    #[arg(value_parser = session_arg)]
    conversation: Option<String>,
    /// Instead of CONVERSATION: the conversation with the latest activity
    /// (`cancel-turn --last TURN`).
    #[arg(long)]
    last: bool,
    /// The interrupted turn: a prefix or a suffix of its id (as `turns` prints it).
    turn: String,
    /// Why, kept in the turn's metadata (`cancel_reason`).
    #[arg(long, default_value = "cancelled from the command line")]
    reason: String,
}

/// `cancel-turn`: the turn (pending or running, that no process runs any
/// more) is stored as `cancelled`; its calls in flight are closed and its
/// tool calls without a result get the cancelled result, so the next turn
/// sends a valid history. No tool and no provider is called.
pub(crate) fn cancel_turn(cli: &Global, args: &CancelArgs) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
    let which = match (&args.conversation, args.last) {
        (Some(text), false) => Pick::Id(text),
        // clap makes them exclusive and one required.
        _ => Pick::Last,
    };
    let s = find_session(&journal, which)?;
    let state = s.state_cloned();
    if !state.conversation_log().is_conversation() {
        return Err(Error::NotAConversation(s.id()));
    }
    let turn = find_turn(state.conversation_log(), &args.turn)?.id;
    let store = Arc::new(JournalConversationStore::new(journal));
    let engine = ConversationEngine::new(ConversationEngineConfig::new("cli", store));
    let done = engine.cancel_turn(s.id(), turn, &args.reason)?;
    let answered = done
        .tool_calls
        .iter()
        .filter(|c| c.status == agent_journal::ToolStatus::Failed)
        .count();
    if cli.json {
        let v = json!({
            "conversation": s.id().to_string(),
            "turn": turn.to_string(),
            "status": done.status.as_str(),
            "reason": args.reason,
        });
        return print_json(&v).map(|()| ExitCode::SUCCESS);
    }
    outln!(
        "turn {turn} of conversation {} is {}; {answered} tool call(s) without a result answered as cancelled",
        s.id(),
        done.status.as_str()
    );
    Ok(ExitCode::SUCCESS)
}
