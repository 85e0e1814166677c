//! `compact-history SESSION --messages N | --tokens N [--dry-run]`: a
//! compaction recorded by hand, of a conversation or of an inner-loop
//! session's latest evaluation (the conversation `conversation_log` reads).

use std::process::ExitCode;

use agent_journal::conversation::{
    CompactionRecord, CompactionRequest, CompactionStrategy, ConversationStore, HistoryWindow,
    JournalConversationStore, MessageLimitCompactor, TokenLimitCompactor,
};
use agent_journal::{Error, Event};
use clap::Args;
use serde_json::json;

use crate::cli::conversation::conversation_log;
use crate::cli::global::Global;
use crate::cli::output::print_json;
use crate::cli::render::clip;

/// The arguments of `compact-history`.
#[derive(Args, Debug)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    conversation: crate::cli::find::SessionRef,
    /// Keep at most this many messages sent (besides the leading system ones).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "tokens",
        required_unless_present = "tokens"
    )]
    messages: Option<usize>,
    /// Compact down to about this many tokens, scaled from the last call's usage.
    #[arg(long, value_name = "N")]
    tokens: Option<u64>,
    /// Print what would be sent before and after, and record nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `compact-history CONVERSATION --messages N | --tokens N [--dry-run]`:
/// records a compaction by hand.
pub(crate) fn compact_history(cli: &Global, args: &CompactArgs) -> Result<ExitCode, Error> {
    let journal = crate::cli::open::open_existing(&cli.db)?;
    let s = crate::cli::open::find_session(&journal, &args.conversation)?;
    let id = s.id();
    let state = s.state_cloned();
    let log = conversation_log(&s, &state, s.head().saturating_sub(1))?;
    let last_usage = log.calls().iter().rev().find_map(|c| c.usage.clone());
    // What is sent now: the engine's history; for an inner-loop session,
    // its latest evaluation's messages (what `resume` continues).
    let inner = if state.conversation_log().is_conversation() {
        None
    } else {
        state.evaluations().latest().map(|e| e.evaluation_id)
    };
    let window = match inner {
        None => JournalConversationStore::new(journal).history(id, None)?,
        Some(eval) => HistoryWindow {
            system: log.leading_system().to_vec(),
            summary: state
                .evaluations()
                .get(eval)
                .and_then(|e| e.compaction_summary.clone()),
            messages: log
                .sendable()
                .iter()
                .filter(|m| m.turn_id.is_some_and(|t| t.as_evaluation() == eval))
                .cloned()
                .collect(),
            sendable: 0,
        },
    };
    let request = CompactionRequest {
        state_messages: &window.messages,
        leading_system: &window.system,
        summary: window.summary.as_deref(),
        last_usage: last_usage.as_ref(),
        provider: "",
    };
    let done = match (args.messages, args.tokens) {
        (Some(n), _) => MessageLimitCompactor { max_messages: n }.apply(&request)?,
        (None, Some(t)) => {
            if last_usage.is_none() {
                return Err(Error::InvalidInput(format!(
                    "conversation {id} has no provider call with token usage to scale from; use --messages"
                )));
            }
            TokenLimitCompactor {
                max_tokens: t,
                target_tokens: Some(t),
            }
            .apply(&request)?
        }
        (None, None) => None,
    };
    let before = window.messages.len();
    let keep_from = done.as_ref().map_or(0, |d| d.keep_from);
    let record = done.as_ref().map(|d| CompactionRecord {
        turn_id: None,
        first_kept: window.messages[d.keep_from].id,
        strategy: format!("{} (by hand)", d.strategy),
        summary: None,
        messages_before: before as u64,
        messages_after: (before - d.keep_from) as u64,
        tokens_before: last_usage.as_ref().map(|u| u.total()),
        at: agent_journal::format::now(),
    });
    if let (Some(r), false) = (&record, args.dry_run) {
        match inner {
            None => JournalConversationStore::new(s.journal().clone()).record_compaction(id, r)?,
            Some(eval) => {
                let sequence = state.messages().get(r.first_kept).map_or(0, |m| m.sequence);
                s.append(Event::Compacted {
                    evaluation_id: eval,
                    through_sequence: sequence.saturating_sub(1),
                    summary: None,
                })?;
            }
        }
    }
    if cli.json {
        let v = json!({
            "conversation": id.to_string(),
            "recorded": record.is_some() && !args.dry_run,
            "messages_before": before,
            "messages_after": before - keep_from,
            "first_kept": record.as_ref().map(|r| r.first_kept.to_string()),
        });
        return print_json(&v).map(|()| ExitCode::SUCCESS);
    }
    let Some(record) = record else {
        outln!(
            "nothing to compact: {before} messages are sent, and no user message allows a cut within the limit"
        );
        return Ok(ExitCode::SUCCESS);
    };
    outln!(
        "{} {before} -> {} messages sent (leading system messages aside); nothing is deleted",
        if args.dry_run {
            "would compact"
        } else {
            "compacted"
        },
        record.messages_after
    );
    for (i, m) in window.messages.iter().enumerate() {
        let mark = if i < keep_from { "dropped" } else { "sent   " };
        outln!("  {mark} [{}] {}", m.role.as_str(), clip(&m.text(), 70));
    }
    Ok(ExitCode::SUCCESS)
}
