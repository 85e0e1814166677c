//! The command line. Exit codes: 0 ok, 1 error, 2 usage, 3 corruption
//! found, 4 a lease held or lost.
//!
//! This file holds the top-level parser and the dispatch; the options every
//! command takes are `global`'s ([`Global`], what each handler gets; with
//! `--no-pager`, `--compress` and `--prices`, the flags of the commands
//! that page, create a database or show a run's cost); each
//! group of commands lives in its own file with its arguments and handlers:
//! `record` (demo, resume; `resumed` marks and finds resumes), `read`
//! (sessions, log, show, pending; `find` their filters, `--last` and id
//! prefixes), `diff` (`diff_sessions` for two sessions), `edit` (fork with
//! an edited result or message), `stats`, `view` and `serve` (the timeline
//! page; `view/fold.rs` the statuses the page shows), `price` (a run's
//! cost from the price table), `conversation`
//! (conversations, turns, and the conversation views of show and pending;
//! `compact_history` the compaction recorded by hand;
//! `conversation_demo` is `demo --conversation`), `transfer` (export, with
//! `redact`), `import`, `copy`, `lease`, and `admin` (verify, salvage,
//! compact, fork, sessions --delete), `man` the man pages, `cancel`
//! (cancel-turn), `chat`. `open` finds databases and sessions
//! (attaching to a writer's read service, and warning on stderr of what
//! reading cut off), `filter` the filters of log and show, `event_json` the
//! JSON of an event, `output` writes stdout's lines (`outln!`), JSON,
//! errors and warnings and progress, `style` colour, times and the pager,
//! `render` formats for people, `demo` is the scripted agent and `sandbox`
//! the folder its tools cannot leave; `hint` names the command in the
//! next-step hints.

/// `println!` that ends the process quietly when stdout is a closed pipe
/// (`agent-journal log X | head`) instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::output::emit(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::emit(format_args!($($arg)*))
    };
}

mod admin;
mod cancel;
#[cfg(feature = "http")]
mod chat;
mod compact_history;
mod conversation;
mod conversation_demo;
mod copy;
mod demo;
mod diff;
mod diff_sessions;
mod edit;
mod event_json;
mod filter;
mod find;
mod global;
mod hint;
mod import;
mod import_seen;
mod lease;
mod man;
mod open;
mod output;
mod price;
mod read;
mod record;
mod redact;
mod render;
mod resumed;
mod sandbox;
mod serve;
mod stats;
mod style;
mod transfer;
mod view;

use std::process::ExitCode;

use agent_journal::Error;
use clap::{Parser, Subcommand};

use self::global::Global;
use self::output::{JSON, report_error};

/// Replay-debug the runs of AI agents recorded in an agent-journal.
#[derive(Parser, Debug)]
#[command(name = "agent-journal", version, about)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands, in the order `--help` lists them.
#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scripted agent with real local tools in a sandbox, recording every event.
    Demo(record::DemoArgs),
    /// Continue a demo session from its crash point (in place, or --fork);
    /// finished tools are not run again, and a second resume does nothing.
    Resume(record::ResumeArgs),
    /// List the conversations of the conversation engine.
    Conversations,
    /// The turns of a conversation: status, agent, provider/model, tokens, duration, error.
    Turns(conversation::TurnsArgs),
    /// Record a compaction of a conversation's history by hand (nothing is deleted).
    CompactHistory(compact_history::CompactArgs),
    /// Give up an interrupted turn of a conversation: stored as cancelled, no tool run.
    #[command(allow_missing_positional = true)]
    CancelTurn(cancel::CancelArgs),
    /// Chat with a real provider (one user message per line of stdin), recording everything.
    #[cfg(feature = "http")]
    Chat(chat::ChatArgs),
    /// The crash point, and the pending and in-doubt tool calls.
    Pending(read::PendingArgs),
    /// What changed between two points of a session (SESSION A B), or
    /// between two sessions (A B: a run and its fork, two runs of one prompt);
    /// `--last` stands for the first SESSION.
    #[command(override_usage = diff::USAGE)]
    Diff(diff::DiffArgs),
    /// List sessions: id, created, events, status, last activity.
    Sessions(read::SessionsArgs),
    /// Rewrite the database into a new one, reclaiming space (sled never shrinks its file).
    Compact(admin::CompactArgs),
    /// Copy every readable record into a new database and report what was dropped.
    Salvage(admin::NewDatabase),
    /// The timeline of a session, one event a line.
    Log(read::LogArgs),
    /// The state at a seq: evaluations, messages, tool calls and their status.
    Show(read::ShowArgs),
    /// Write a session as one self-contained HTML page: a timeline, a
    /// scrubber over its state, search and filters (no network needed).
    View(view::ViewArgs),
    /// Where a run's time and tokens went: per provider call and model,
    /// per tool (min/median/max), failures, provider time against tool time.
    Stats(stats::StatsArgs),
    /// Serve the timeline of every session on 127.0.0.1, following live
    /// sessions as their events land.
    Serve(serve::ServeArgs),
    /// Check every frame and invariant; exit 3 with the location of any damage.
    Verify(admin::VerifyArgs),
    /// Export a session.
    Export(transfer::ExportArgs),
    /// Import sessions from a file into the database.
    Import(import::ImportArgs),
    /// A new session branching from SESSION after event SEQ.
    Fork(admin::ForkArgs),
    /// Copy every session of one journal into another (sled, PostgreSQL,
    /// an exported file), verifying each frame; all or nothing per session.
    Copy(copy::CopyArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of agent-journal or of one subcommand
    /// (`man log`), or write them all (`man --all DIR`); generated from
    /// these definitions.
    Man(man::ManArgs),
}

/// Runs the command line and maps errors to exit codes.
pub fn main() -> ExitCode {
    // Known before parsing, so that a usage error under `--json` is JSON.
    let json = std::env::args_os().skip(1).any(|a| a == "--json");
    JSON.store(json, std::sync::atomic::Ordering::Relaxed);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    style::init(cli.global.json, cli.global.utc);
    let result = run(&cli);
    style::finish_pager();
    match result {
        Ok(code) => code,
        Err(e) => {
            let code = match e {
                _ if e.is_corruption() => 3,
                Error::IncompleteSession(_) => 3,
                Error::Fenced { .. } | Error::LeaseHeld { .. } => 4,
                _ => 1,
            };
            report_error(code, e.kind(), &e.to_string());
            ExitCode::from(code)
        }
    }
}

/// Reports an argument that clap refused. A value that its parser refused
/// (a blank session id, a seq that is not a number) is one `error:` line on
/// stderr, exit 2, as the other errors are one line; everything else (help,
/// version, missing or unknown arguments, with their usage) is clap's own.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ErrorKind};
    if e.kind() == ErrorKind::ValueValidation {
        if let Some(reason) = std::error::Error::source(&e) {
            let context = |kind| e.get(kind).map(|v| v.to_string()).unwrap_or_default();
            let line = format!(
                "invalid value {:?} for '{}': {reason}",
                context(ContextKind::InvalidValue),
                context(ContextKind::InvalidArg)
            );
            report_error(2, "usage", &line);
            return ExitCode::from(2);
        }
    }
    let help = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if JSON.load(std::sync::atomic::Ordering::Relaxed) && !help {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        report_error(2, "usage", first.trim_start_matches("error: "));
        return ExitCode::from(2);
    }
    e.exit()
}

/// Hands the parsed command to its handler.
fn run(cli: &Cli) -> Result<ExitCode, Error> {
    let g = &cli.global;
    match &cli.command {
        Command::Demo(args) => record::demo(g, args),
        Command::Resume(args) => record::resume(g, args),
        Command::Conversations => conversation::conversations(g),
        Command::Turns(args) => conversation::turns(g, args),
        Command::CompactHistory(args) => compact_history::compact_history(g, args),
        Command::CancelTurn(args) => cancel::cancel_turn(g, args),
        #[cfg(feature = "http")]
        Command::Chat(args) => chat::chat(g, args),
        Command::Pending(args) => read::pending(g, args),
        Command::Diff(args) => diff::diff(g, args),
        Command::Sessions(args) => match &args.delete {
            Some(session) => admin::delete_session(g, session, args.force),
            None => read::sessions(g, &args.list, &args.prices),
        },
        Command::Compact(args) => admin::compact(g, args),
        Command::Salvage(args) => admin::salvage(g, &args.to),
        Command::Log(args) => read::log(g, args),
        Command::Show(args) => read::show(g, args),
        Command::View(args) => view::view(g, args),
        Command::Serve(args) => serve::serve(g, args),
        Command::Stats(args) => stats::stats(g, args),
        Command::Verify(args) => admin::verify(g, args.session.as_deref()),
        Command::Export(args) => transfer::export(g, args),
        Command::Import(args) => import::import(g, args),
        Command::Fork(args) => admin::fork(g, args),
        Command::Copy(args) => copy::copy(g, args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(*shell, &mut cmd, "agent-journal", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => {
            use clap::CommandFactory;
            man::man(g, args, Cli::command(), usage_error)
        }
    }
}
