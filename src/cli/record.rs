//! `demo` and `resume`: recording runs of the demo agent, and continuing them
//! after a crash.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::agent::ResumeMode;
use agent_journal::conversation::TurnStatus;
use agent_journal::resume::ResumeState;
use agent_journal::{Error, Journal, JournalConfig, Session, SessionId};
use clap::{Args, ValueEnum};

use crate::cli::conversation_demo::ConversationResume;
use crate::cli::global::Global;
use crate::cli::open::{find_session, open_existing};
use crate::cli::output::print_json;
use crate::cli::{conversation, conversation_demo, demo, render, resumed};

/// The arguments of `demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Folder the demo's tools work in (default: next to the database).
    #[arg(long)]
    sandbox: Option<PathBuf>,
    /// Abort the process right after event N is durable (crash injection).
    #[arg(long, value_name = "N")]
    crash_after: Option<u64>,
    /// How to crash: abort (SIGABRT) or kill (SIGKILL, no cleanup at all).
    #[arg(long, value_enum, default_value = "abort")]
    crash_with: CrashWith,
    /// Run a multi-turn conversation through the conversation engine instead
    /// (tools, hooks printing to stderr, and a turn that fails).
    #[arg(long)]
    conversation: bool,
    #[command(flatten)]
    compress: crate::cli::global::CompressArg,
    #[command(flatten)]
    lease: crate::cli::lease::LeaseArgs,
}

/// The arguments of `resume`.
#[derive(Args, Debug)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    /// Continue in a new fork made at the crash point (a what-if branch)
    /// instead of in the session itself (the default). The session and its
    /// forks made there share the tool calls left open: once one of them
    /// has resumed, a resume of another does nothing.
    #[arg(long)]
    fork: bool,
    /// Continue in the session itself: the default (kept for scripts
    /// written when forking was).
    #[arg(long = "continue", hide = true, conflicts_with = "fork")]
    #[allow(dead_code)]
    continue_in_place: bool,
    /// Record in-doubt calls of never-idempotent tools as failed instead of stopping.
    #[arg(long)]
    interrupt_never: bool,
    /// Folder the tools work in. Needed unless `demo` (or a resume) made the
    /// session in this database: a session's own labels never choose it, so
    /// an imported one always needs it.
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    #[command(flatten)]
    lease: crate::cli::lease::LeaseArgs,
}

/// How `demo --crash-after` ends the process.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum CrashWith {
    /// `std::process::abort()`: SIGABRT.
    Abort,
    /// SIGKILL sent to this process by `kill -KILL`.
    Kill,
}

/// `demo [--sandbox DIR] [--crash-after N] [--crash-with abort|kill]`.
pub(crate) fn demo(cli: &Global, args: &DemoArgs) -> Result<ExitCode, Error> {
    let mut config = JournalConfig {
        compress: args.compress.compress,
        ..JournalConfig::default()
    };
    if let Some(n) = args.crash_after {
        let how = args.crash_with;
        config.after_append = Some(std::sync::Arc::new(move |id, _first, last| {
            if last >= n {
                if last == n {
                    eprintln!(
                        "crash injected ({how:?}) right after event {n} of session {id} is durable"
                    );
                } else {
                    eprintln!(
                        "crash injected ({how:?}) after event {n} of session {id}: it was written \
                         in one atomic batch with the events up to {last}, all durable"
                    );
                }
                if how == CrashWith::Kill {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &std::process::id().to_string()])
                        .status();
                }
                std::process::abort();
            }
        }));
    }
    let journal = Journal::open_with(&cli.db, config)?;
    let sandbox = args
        .sandbox
        .clone()
        .unwrap_or_else(|| default_sandbox(&cli.db));
    if args.conversation {
        if args.lease.lease_owner.is_some() {
            return Err(Error::Unsupported(
                "--lease-owner applies to the inner-loop demo, not to --conversation".into(),
            ));
        }
        return demo_conversation(cli, &journal, &sandbox);
    }
    let (result, sandbox) = demo::run(&journal, &sandbox, &args.lease)?;
    let session = &result.session;
    if cli.json {
        print_json(&serde_json::json!({
            "session": session.id().to_string(),
            "events": session.head(),
            "sandbox": sandbox.display().to_string(),
            "answer": result.content,
        }))?;
    } else {
        outln!(
            "recorded session {} ({} events) in {}",
            session.id(),
            session.head(),
            cli.db.display()
        );
        outln!("tools worked in {}", sandbox.display());
        outln!();
        render::print_log(session, 0, session.head())?;
        outln!();
        // Commands that work as printed, before `cargo install` too.
        let aj = crate::cli::hint::command(&cli.db);
        let id = session.id();
        outln!("next: {aj} show {id}            (the state at the end)");
        outln!("      {aj} show {id} --at 6     (time travel)");
        outln!("      {aj} demo --crash-after 9    (crash mid-run, then `resume`)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `demo --conversation`: the conversation, then its turns.
fn demo_conversation(cli: &Global, journal: &Journal, sandbox: &Path) -> Result<ExitCode, Error> {
    let (id, sandbox) = conversation_demo::run(journal, sandbox)?;
    let session = journal.session(id)?;
    let state = session.state_cloned();
    let log = state.conversation_log();
    if cli.json {
        print_json(&serde_json::json!({
            "conversation": id.to_string(),
            "events": session.head(),
            "turns": log.turns().len(),
            "failed_turns": log.turns().iter().filter(|t| t.status == TurnStatus::Failed).count(),
            "sandbox": sandbox.display().to_string(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "recorded conversation {id} ({} events, {} turns) in {}",
        session.head(),
        log.turns().len(),
        cli.db.display()
    );
    outln!("tools worked in {}", sandbox.display());
    outln!();
    conversation::print_turns(state.conversation_log(), None);
    outln!();
    // Commands that work as printed, before `cargo install` too.
    let aj = crate::cli::hint::command(&cli.db);
    outln!("next: {aj} show {id}                  (messages and turns)");
    if let Some(t) = log.turns().get(2) {
        outln!("      {aj} show {id} --turn {}   (the failed turn)", t.id);
    }
    outln!("      {aj} log {id}                   (every event)");
    outln!(
        "      {aj} demo --conversation --crash-after 12   (crash mid-turn, then `pending` and `resume`)"
    );
    Ok(ExitCode::SUCCESS)
}

/// Says that a resume of `s` (stopped at `crash_point`) has nothing to do,
/// and why; nothing was written.
fn nothing_to_do(
    cli: &Global,
    s: &Session,
    crash_point: u64,
    reason: &str,
    resumed_in: Option<SessionId>,
) -> Result<ExitCode, Error> {
    if cli.json {
        print_json(&serde_json::json!({
            "session": s.id().to_string(),
            "crash_point": crash_point,
            "nothing_to_do": reason,
            "resumed_in": resumed_in.map(|r| r.to_string()),
        }))?;
    } else {
        outln!(
            "session {} (last seq {crash_point}): nothing to resume: {reason}",
            s.id()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `resume` of a demo conversation.
fn resume_conversation(
    cli: &Global,
    args: &ResumeArgs,
    s: &Session,
    mode: ResumeMode,
) -> Result<ExitCode, Error> {
    let from = s.head().saturating_sub(1);
    let r = match conversation_demo::resume(s, mode, args.interrupt_never, args.sandbox.as_deref())?
    {
        ConversationResume::Resumed(r) => r,
        ConversationResume::NothingToDo { reason, resumed_in } => {
            return nothing_to_do(cli, s, from, &reason, resumed_in);
        }
    };
    let target = &r.target;
    if cli.json {
        let turns: Vec<serde_json::Value> = r
            .turns
            .iter()
            .map(|t| serde_json::json!({"turn": t.id.to_string(), "status": t.status.as_str()}))
            .collect();
        print_json(&serde_json::json!({
            "conversation": target.id().to_string(),
            "resumed_from": s.id().to_string(),
            "crash_point": from,
            "interrupted_turns": turns,
            "sandbox": r.sandbox.display().to_string(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "conversation {} stopped at seq {from}; {} interrupted turn(s) finished; {}; tools work in {}",
        s.id(),
        r.turns.len(),
        if target.id() == s.id() {
            "continued in place".to_owned()
        } else {
            format!("resumed in fork {}", target.id())
        },
        r.sandbox.display()
    );
    outln!();
    conversation::print_turns(target.state_cloned().conversation_log(), None);
    Ok(ExitCode::SUCCESS)
}

/// `resume SESSION [--fork] [--interrupt-never] [--sandbox DIR]`: continues
/// the session itself (or, with `--fork`, a fork made at its crash point);
/// with nothing left to do (its run finished, or it or a fork of it already
/// resumed from this crash point) it says so, writes nothing and exits 0.
pub(crate) fn resume(cli: &Global, args: &ResumeArgs) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
    let s = find_session(&journal, &args.session)?;
    let mode = if args.fork {
        ResumeMode::Fork
    } else {
        ResumeMode::Continue
    };
    // Another worker's live lease refuses the resume before anything is
    // read or written; continuing in place takes the lease before the plan
    // is read (the handle catches up with the last holder's events).
    crate::cli::lease::check_free(&journal, s.id(), &args.lease)?;
    if s.state().conversation_log().is_conversation() {
        if args.lease.lease_owner.is_some() {
            return Err(Error::Unsupported(
                "--lease-owner applies to the inner-loop demo, not to conversations".into(),
            ));
        }
        return resume_conversation(cli, args, &s, mode);
    }
    let held = match mode {
        ResumeMode::Continue => crate::cli::lease::hold(&s, &args.lease)?,
        ResumeMode::Fork => None,
    };
    let plan = s.resume_plan()?;
    plan.check_prompt(demo::PROMPT_NS, demo::PROMPT_KEY)?;
    let nothing = match &plan.state {
        ResumeState::Finished(o) => {
            Some((format!("its run finished ({})", render::outcome(o)), None))
        }
        _ => resumed::resumed_elsewhere(&s)?.map(|e| (e.sentence(), Some(e.session))),
    };
    if let Some((reason, resumed_in)) = nothing {
        if let Some(h) = held {
            h.release()?;
        }
        return nothing_to_do(cli, &s, plan.crash_point, &reason, resumed_in);
    }
    let (result, sandbox) = demo::resume(
        &s,
        &plan,
        mode,
        args.interrupt_never,
        args.sandbox.as_deref(),
        &args.lease,
    )?;
    if let Some(h) = held {
        h.release()?;
    }
    let target = &result.session;
    if cli.json {
        print_json(&serde_json::json!({
            "session": target.id().to_string(),
            "resumed_from": s.id().to_string(),
            "crash_point": plan.crash_point,
            "state_at_crash": render::state_name(&plan.state),
            "outcome": render::outcome_word(&result.outcome),
            "answer": result.content,
            "sandbox": sandbox.display().to_string(),
        }))?;
    } else {
        outln!(
            "session {} stopped at seq {} ({}); {}; tools work in {}",
            s.id(),
            plan.crash_point,
            render::state_name(&plan.state),
            if target.id() == s.id() {
                "continued in place".to_owned()
            } else {
                format!("resumed in fork {}", target.id())
            },
            sandbox.display()
        );
        outln!();
        let from = if target.id() == s.id() {
            plan.crash_point + 1
        } else {
            0
        };
        render::print_log(target, from, target.head())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `agent-journal-sandbox` next to the database.
fn default_sandbox(db: &Path) -> PathBuf {
    if db.to_str().is_some_and(|s| s.contains("://")) {
        // A database on a server: the current folder.
        return PathBuf::from("agent-journal-sandbox");
    }
    let parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    parent.join("agent-journal-sandbox")
}
