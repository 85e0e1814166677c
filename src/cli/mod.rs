//! The command line. Exit codes: 0 ok, 1 error, 2 usage, 3 corruption found.

/// `println!` that ends the process quietly when stdout is a closed pipe
/// (`agent-journal log X | head`) instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::emit(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::emit(format_args!($($arg)*))
    };
}

mod admin;
mod demo;
mod diff;
mod render;

/// Writes one line to stdout; a closed pipe ends the process with success.
pub(crate) fn emit(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::{Error, Journal, JournalConfig, JsonOptions, Session, SessionId};
use clap::{Parser, Subcommand, ValueEnum};

/// Replay-debug the runs of AI agents recorded in an agent-journal.
#[derive(Parser, Debug)]
#[command(name = "agent-journal", version, about)]
pub(crate) struct Cli {
    /// The database directory, or an exported .ajournal file for read commands.
    #[arg(
        long,
        global = true,
        env = "AGENT_JOURNAL_DB",
        default_value = "agent-journal.db"
    )]
    pub(crate) db: PathBuf,
    /// Machine-readable output (JSON) on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scripted agent with real local tools in a sandbox, recording every event.
    Demo {
        /// Folder the demo's tools work in (default: next to the database).
        #[arg(long)]
        sandbox: Option<PathBuf>,
        /// Abort the process right after event N is durable (crash injection).
        #[arg(long, value_name = "N")]
        crash_after: Option<u64>,
        /// How to crash: abort (SIGABRT) or kill (SIGKILL, no cleanup at all).
        #[arg(long, value_enum, default_value = "abort")]
        crash_with: CrashWith,
    },
    /// Continue a demo session from its crash point; finished tools are not run again.
    Resume {
        /// Session id (or a unique prefix of it).
        session: String,
        /// Append to the crashed session instead of forking it (forking is the default).
        #[arg(long = "continue")]
        continue_in_place: bool,
        /// Record in-doubt calls of never-idempotent tools as failed instead of stopping.
        #[arg(long)]
        interrupt_never: bool,
    },
    /// The crash point, and the pending and in-doubt tool calls.
    Pending {
        /// Session id (or a unique prefix of it).
        session: String,
    },
    /// What changed between two points of a session.
    Diff {
        /// Session id (or a unique prefix of it).
        session: String,
        /// The earlier seq.
        a: u64,
        /// The later seq.
        b: u64,
    },
    /// List sessions: id, created, events, status, last activity.
    Sessions {
        /// Delete this session instead of listing (refused if a tool call is in doubt).
        #[arg(long, value_name = "SESSION")]
        delete: Option<String>,
        /// With --delete: delete even with tool calls in doubt.
        #[arg(long, requires = "delete")]
        force: bool,
    },
    /// Rewrite the database into a new one, reclaiming space (sled never shrinks its file).
    Compact {
        /// The new database (must not exist).
        #[arg(long)]
        to: PathBuf,
    },
    /// Copy every readable record into a new database and report what was dropped.
    Salvage {
        /// The new database (must not exist).
        #[arg(long)]
        to: PathBuf,
    },
    /// The timeline of a session, one event a line.
    Log {
        /// Session id (or a unique prefix of it).
        session: String,
        /// First seq to show.
        #[arg(long)]
        from: Option<u64>,
        /// Last seq to show (inclusive).
        #[arg(long)]
        to: Option<u64>,
    },
    /// The state at a seq: evaluations, messages, tool calls and their status.
    Show {
        /// Session id (or a unique prefix of it).
        session: String,
        /// Show the state right after this event (default: the last).
        #[arg(long)]
        at: Option<u64>,
    },
    /// Check every frame and invariant; exit 3 with the location of any damage.
    Verify {
        /// Only this session.
        session: Option<String>,
    },
    /// Export a session.
    Export {
        /// Session id (or a unique prefix of it).
        session: String,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// For `wink`: the state after this seq (default: the last).
        #[arg(long)]
        at: Option<u64>,
        /// Output file (default: stdout for wink, SESSION.ajournal for journal).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// For `wink`: include LOG slices (adapter states).
        #[arg(long)]
        include_logs: bool,
    },
    /// Import sessions from a file into the database.
    Import {
        /// The file to import.
        file: PathBuf,
        /// Its format.
        #[arg(long, value_enum)]
        format: ImportFormat,
    },
    /// A new session branching from SESSION after event SEQ.
    Fork {
        /// Session id (or a unique prefix of it).
        session: String,
        /// The last event of the parent to include.
        #[arg(long)]
        at: u64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum CrashWith {
    /// `std::process::abort()`: SIGABRT.
    Abort,
    /// SIGKILL sent to this process by `kill -KILL`.
    Kill,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ExportFormat {
    /// An exported journal file (.ajournal): every frame, verifiable.
    Journal,
    /// A WINK-shaped session snapshot (JSON).
    Wink,
    /// The latest evaluation as an OpenAI chat-completions messages array.
    Openai,
    /// The latest evaluation as an Anthropic Messages request (system + messages).
    Anthropic,
    /// The latest evaluation's messages, one JSON object per line.
    Jsonl,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ImportFormat {
    /// An exported journal file (.ajournal).
    Journal,
    /// An OpenAI chat-completions messages array, or a request body holding one.
    Openai,
    /// An Anthropic Messages request body.
    Anthropic,
    /// InnerMessage JSON objects, one per line.
    Jsonl,
}

/// Runs the command line and maps errors to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            let line = e.to_string().replace('\n', " ");
            eprintln!("error: {line}");
            ExitCode::from(if e.is_corruption() { 3 } else { 1 })
        }
    }
}

pub(crate) fn open_existing(db: &Path) -> Result<Journal, Error> {
    Journal::open_with(
        db,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
}

/// Finds a session by full id or unique prefix.
pub(crate) fn find_session(journal: &Journal, text: &str) -> Result<Session, Error> {
    if let Ok(id) = text.parse::<SessionId>() {
        return journal.session(id);
    }
    let needle = text.to_ascii_lowercase();
    let matches: Vec<SessionId> = journal
        .sessions()?
        .into_iter()
        .filter(|id| id.to_string().starts_with(&needle))
        .collect();
    match matches.as_slice() {
        [one] => journal.session(*one),
        [] => Err(Error::InvalidInput(format!("no session matches {text:?}"))),
        many => Err(Error::InvalidInput(format!(
            "{text:?} matches {} sessions; give more of the id",
            many.len()
        ))),
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub(crate) fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

pub(crate) fn print_json(value: &serde_json::Value) -> Result<(), Error> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Error::InvalidInput(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

fn run(cli: &Cli) -> Result<ExitCode, Error> {
    match &cli.command {
        Command::Demo {
            sandbox,
            crash_after,
            crash_with,
        } => {
            let mut config = JournalConfig::default();
            if let Some(n) = *crash_after {
                let how = *crash_with;
                config.after_append = Some(std::sync::Arc::new(move |id, _first, last| {
                    if last >= n {
                        eprintln!(
                            "crash injected ({how:?}) right after event {last} of session {id} is durable"
                        );
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
            let sandbox = sandbox.clone().unwrap_or_else(|| default_sandbox(&cli.db));
            let result = demo::run(&journal, &sandbox)?;
            let session = &result.session;
            if cli.json {
                print_json(&serde_json::json!({
                    "session": session.id().to_string(),
                    "events": session.head(),
                    "sandbox": demo::sandbox_of(session)?.display().to_string(),
                    "answer": result.content,
                }))?;
            } else {
                outln!(
                    "recorded session {} ({} events) in {}",
                    session.id(),
                    session.head(),
                    cli.db.display()
                );
                outln!("tools worked in {}", demo::sandbox_of(session)?.display());
                outln!();
                render::print_log(session, 0, session.head())?;
                outln!();
                outln!(
                    "next: agent-journal show {}            (the state at the end)",
                    session.id()
                );
                outln!(
                    "      agent-journal show {} --at 6     (time travel)",
                    session.id()
                );
                outln!(
                    "      agent-journal demo --crash-after 9    (crash mid-run, then `resume`)"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Resume {
            session,
            continue_in_place,
            interrupt_never,
        } => {
            let journal = Journal::open(&cli.db)?;
            let s = find_session(&journal, session)?;
            let plan = s.resume_plan()?;
            let mode = if *continue_in_place {
                agent_journal::ResumeMode::Continue
            } else {
                agent_journal::ResumeMode::Fork
            };
            let result = demo::resume(&s, mode, *interrupt_never)?;
            let target = &result.session;
            if cli.json {
                print_json(&serde_json::json!({
                    "session": target.id().to_string(),
                    "resumed_from": s.id().to_string(),
                    "crash_point": plan.crash_point,
                    "state_at_crash": plan.state.name(),
                    "outcome": format!("{:?}", result.outcome),
                    "answer": result.content,
                }))?;
            } else {
                outln!(
                    "session {} stopped at seq {} ({}); {}",
                    s.id(),
                    plan.crash_point,
                    plan.state.name(),
                    if target.id() == s.id() {
                        "continued in place".to_owned()
                    } else {
                        format!("resumed in fork {}", target.id())
                    }
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
        Command::Pending { session } => {
            let journal = open_existing(&cli.db)?;
            let s = find_session(&journal, session)?;
            let plan = s.resume_plan()?;
            if cli.json {
                print_json(&render::plan_json(&plan))?;
            } else {
                render::print_plan(&plan);
                if let Some(t) = s.torn_tail() {
                    outln!("!! {t}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Diff { session, a, b } => {
            let journal = open_existing(&cli.db)?;
            let s = find_session(&journal, session)?;
            let d = diff::diff(&s, *a, *b)?;
            if cli.json {
                print_json(&d.to_json())?;
            } else {
                d.print();
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sessions { delete, force } => {
            if let Some(text) = delete {
                let journal = Journal::open_with(
                    &cli.db,
                    JournalConfig {
                        create_if_missing: false,
                        ..JournalConfig::default()
                    },
                )?;
                let id = find_session_id(&journal, text)?;
                journal.delete_session(id, *force)?;
                if cli.json {
                    print_json(&serde_json::json!({"deleted": id.to_string()}))?;
                } else {
                    outln!("deleted session {id}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            let journal = open_existing(&cli.db)?;
            let infos = journal.sessions_info()?;
            if cli.json {
                print_json(&serde_json::Value::Array(
                    infos.iter().map(render::info_json).collect(),
                ))?;
            } else {
                render::print_sessions(&infos);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compact { to } => admin::compact(cli, to),
        Command::Salvage { to } => admin::salvage(cli, to),
        Command::Log { session, from, to } => {
            let journal = open_existing(&cli.db)?;
            let s = find_session(&journal, session)?;
            let head = s.head();
            let from = from.unwrap_or(0);
            let to = match to {
                Some(t) => t.saturating_add(1),
                None => head,
            };
            if cli.json {
                let events = s.events(from..to)?;
                let v = serde_json::to_value(&events)
                    .map_err(|e| Error::InvalidInput(e.to_string()))?;
                print_json(&v)?;
            } else {
                render::print_log(&s, from, to)?;
                if let Some(t) = s.torn_tail() {
                    outln!("!! {t}");
                }
                if let Some(d) = journal.file_damage() {
                    outln!("!! {}: {d}", cli.db.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { session, at } => {
            let journal = open_existing(&cli.db)?;
            let s = find_session(&journal, session)?;
            let at = at.unwrap_or(s.head().saturating_sub(1));
            let state = s.state_at(at)?;
            if cli.json {
                let text = state.to_json(&JsonOptions {
                    include_logs: true,
                    ..JsonOptions::default()
                });
                outln!("{text}");
            } else {
                render::print_state(&s, at, &state);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify { session } => admin::verify(cli, session.as_deref()),
        Command::Export {
            session,
            format,
            at,
            output,
            include_logs,
        } => {
            let journal = open_existing(&cli.db)?;
            let s = find_session(&journal, session)?;
            match format {
                ExportFormat::Journal => {
                    if at.is_some() {
                        return Err(Error::InvalidInput(
                            "--at applies to --format wink; a journal export holds every event"
                                .into(),
                        ));
                    }
                    let out = output
                        .clone()
                        .unwrap_or_else(|| PathBuf::from(format!("{}.ajournal", s.id())));
                    let bar = progress(s.head(), "export");
                    let n = journal.export_journal(&[s.id()], &out, |k| bar.inc(k))?;
                    bar.finish_and_clear();
                    if cli.json {
                        print_json(
                            &serde_json::json!({"file": out.display().to_string(), "events": n}),
                        )?;
                    } else {
                        outln!(
                            "wrote {n} events of session {} to {}",
                            s.id(),
                            out.display()
                        );
                    }
                }
                ExportFormat::Openai | ExportFormat::Anthropic | ExportFormat::Jsonl => {
                    let f = match format {
                        ExportFormat::Openai => agent_journal::ConversationFormat::OpenAi,
                        ExportFormat::Anthropic => agent_journal::ConversationFormat::Anthropic,
                        _ => agent_journal::ConversationFormat::Jsonl,
                    };
                    let text = s.export_conversation(f, *at)?;
                    write_output(output.as_deref(), text.trim_end())?;
                }
                ExportFormat::Wink => {
                    let at = at.unwrap_or(s.head().saturating_sub(1));
                    let state = s.state_at(at)?;
                    let forked = state.forked_from().map(|(p, _)| p);
                    let text = state.to_json(&JsonOptions {
                        include_logs: *include_logs,
                        parent_id: forked,
                        tags: vec![
                            ("session".into(), s.id().to_string()),
                            ("seq".into(), at.to_string()),
                        ],
                        created_at: None,
                    });
                    write_output(output.as_deref(), &text)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Import { file, format } => {
            let journal = Journal::open(&cli.db)?;
            match format {
                ImportFormat::Openai | ImportFormat::Anthropic | ImportFormat::Jsonl => {
                    let f = match format {
                        ImportFormat::Openai => agent_journal::ConversationFormat::OpenAi,
                        ImportFormat::Anthropic => agent_journal::ConversationFormat::Anthropic,
                        _ => agent_journal::ConversationFormat::Jsonl,
                    };
                    let text = std::fs::read_to_string(file).map_err(|e| Error::Io {
                        context: format!("reading {}", file.display()),
                        source: e,
                    })?;
                    let name = file
                        .file_stem()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let s = journal
                        .import_conversation(&text, f, "import", &name)
                        .map_err(|e| match e {
                            Error::InvalidInput(r) => {
                                Error::InvalidInput(format!("{}: {r}", file.display()))
                            }
                            other => other,
                        })?;
                    if cli.json {
                        print_json(
                            &serde_json::json!({"sessions": [s.id().to_string()], "events": s.head()}),
                        )?;
                    } else {
                        outln!("imported session {} ({} events)", s.id(), s.head());
                    }
                }
                ImportFormat::Journal => {
                    let (ids, tail) = journal.import_journal(file)?;
                    if cli.json {
                        print_json(&serde_json::json!({
                            "sessions": ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                            "torn_tail": tail.as_ref().map(|t| t.to_string()),
                        }))?;
                    } else {
                        for id in &ids {
                            outln!("imported session {id}");
                        }
                        if let Some(t) = tail {
                            eprintln!("warning: {}: {t}", file.display());
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Fork { session, at } => {
            let journal = Journal::open(&cli.db)?;
            let s = find_session(&journal, session)?;
            let f = s.fork(*at)?;
            if cli.json {
                print_json(
                    &serde_json::json!({"session": f.id().to_string(), "parent": s.id().to_string(), "at": at}),
                )?;
            } else {
                outln!("forked session {} from {} at seq {at}", f.id(), s.id());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn write_output(path: Option<&Path>, text: &str) -> Result<(), Error> {
    match path {
        Some(p) => std::fs::write(p, format!("{text}\n")).map_err(|e| Error::Io {
            context: format!("writing {}", p.display()),
            source: e,
        }),
        None => {
            outln!("{text}");
            Ok(())
        }
    }
}

fn default_sandbox(db: &Path) -> PathBuf {
    let parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    parent.join("agent-journal-sandbox")
}

pub(crate) fn find_session_id(journal: &Journal, text: &str) -> Result<SessionId, Error> {
    if let Ok(id) = text.parse::<SessionId>() {
        return Ok(id);
    }
    find_session(journal, text).map(|s| s.id())
}
