//! `sessions`, `log`, `show` and `pending`: reading a database or an exported
//! journal without changing it.

use std::process::ExitCode;

use agent_journal::state::JsonOptions;
use agent_journal::{Error, Journal, Session, SessionId};
use clap::Args;

use crate::cli::filter::{Filter, FilterArgs};
use crate::cli::find::ListArgs;
use crate::cli::find::session_arg;
use crate::cli::global::Global;
use crate::cli::open::{at_or_last, open_for_reading, open_quietly, read_session, warn_torn_tail};
use crate::cli::output::print_json;
use crate::cli::price;
use crate::cli::{conversation, event_json, render, resumed, style};

/// The arguments of `sessions`.
#[derive(Args, Debug)]
pub(crate) struct SessionsArgs {
    /// Delete this session instead of listing (refused if a tool call is in doubt).
    #[arg(long, value_name = "SESSION", value_parser = session_arg, conflicts_with = "ListArgs")]
    pub(crate) delete: Option<String>,
    /// With --delete: delete even with tool calls in doubt.
    #[arg(long, requires = "delete")]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) list: ListArgs,
    #[command(flatten)]
    pub(crate) prices: crate::cli::global::PricesArg,
}

/// The arguments of `log`.
#[derive(Args, Debug)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    #[command(flatten)]
    pager: crate::cli::global::PagerArg,
    /// First seq to show.
    #[arg(long)]
    from: Option<u64>,
    /// Last seq to show (inclusive).
    #[arg(long)]
    to: Option<u64>,
    /// Keep printing events as they are appended (by any process, on
    /// PostgreSQL at once through LISTEN/NOTIFY), until interrupted; with
    /// `--json`, one JSON object a line.
    #[arg(long, conflicts_with = "to")]
    follow: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

/// The arguments of `show`.
#[derive(Args, Debug)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    #[command(flatten)]
    pager: crate::cli::global::PagerArg,
    /// Show the state right after this event (default: the last).
    #[arg(long)]
    at: Option<u64>,
    /// For a conversation: show this turn (id, or a unique prefix or suffix) in detail.
    #[arg(long, value_name = "TURN")]
    turn: Option<String>,
    /// With --turn: print the request body of the turn's last provider call,
    /// rebuilt as the provider's API takes it, ready to be sent again.
    #[arg(long, requires = "turn")]
    request: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

/// The arguments of `pending`.
#[derive(Args, Debug)]
pub(crate) struct PendingArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
}

/// `sessions` (without `--delete`, which `admin::delete_session` handles):
/// the sessions `list` selects, in its order; under `--json` one object a
/// line. Without `--sort` each is written as it is read (and the reading
/// stops at `--limit`); with it, after all are read.
pub(crate) fn sessions(
    cli: &Global,
    list: &ListArgs,
    prices: &crate::cli::global::PricesArg,
) -> Result<ExitCode, Error> {
    let select = list.select(cli.utc)?;
    let journal = open_for_reading(&cli.db)?;
    let prices = prices.load()?;
    // The cost of each session listed (`None`: a model with no price).
    let mut costs = std::collections::HashMap::new();
    // Streamed: JSON Lines in the database's order, in constant memory.
    let stream = cli.json && !list.sorted();
    let mut infos = Vec::new();
    let mut kept = 0;
    for id in journal.sessions()? {
        if !list.sorted() && select.full(kept) {
            break;
        }
        let s = journal.session(id)?;
        warn_torn_tail(&s);
        let info = s.info()?;
        if !select.keeps(&info) {
            continue;
        }
        kept += 1;
        let cost = price::session_total(&s, &prices)?;
        if stream {
            outln!("{}", render::info_json(&info, cost));
        } else {
            costs.insert(info.id, cost);
            infos.push(info);
        }
    }
    if stream {
        return Ok(ExitCode::SUCCESS);
    }
    select.order(&mut infos);
    if cli.json {
        for info in &infos {
            outln!(
                "{}",
                render::info_json(info, costs.get(&info.id).copied().flatten())
            );
        }
    } else {
        render::print_sessions(&infos, &costs);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the events `from..to` of `s` that `filter` lets through: one line
/// each, or one JSON object a line under `--json`; streamed, in constant
/// memory.
fn print_events(
    cli: &Global,
    s: &Session,
    from: u64,
    to: u64,
    filter: &mut Filter,
) -> Result<(), Error> {
    s.for_each_event(from..to, |e| {
        if filter.event(&e) {
            if cli.json {
                outln!("{}", event_json::event(&e));
            } else {
                outln!("{}", render::event_line(&e));
            }
        }
        Ok(())
    })
}

/// `log SESSION [--from A] [--to B]`.
pub(crate) fn log(cli: &Global, args: &LogArgs) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    let head = s.head();
    let from = args.from.unwrap_or(0);
    // A `--to` past the head means "to the end".
    let to = match args.to {
        Some(t) => t.saturating_add(1).min(head),
        None => head,
    };
    let mut filter = Filter::new(&args.filter, true)?;
    filter.learn_before(&s, from)?;
    if args.follow {
        let id = s.id();
        drop((s, journal));
        return follow(cli, id, from, &mut filter);
    }
    if from < head && from >= to {
        return Err(Error::InvalidInput(format!(
            "--from {from} is after --to {}",
            to.saturating_sub(1)
        )));
    }
    if !cli.json {
        style::start_pager(args.pager.no_pager);
    }
    print_events(cli, &s, from, to, &mut filter)?;
    Ok(ExitCode::SUCCESS)
}

/// `log SESSION --follow`: the events from `from` on, then each new one as
/// it lands. A database this process would hold (a sled folder nobody else
/// has open, an exported file being written) is opened again at every
/// poll, so that an agent can start meanwhile and the file's new records
/// are read; one read through a writer's read service or on PostgreSQL is
/// kept, and waits for appends there.
fn follow(
    cli: &Global,
    id: SessionId,
    mut next: u64,
    filter: &mut Filter,
) -> Result<ExitCode, Error> {
    let mut kept: Option<(Journal, Session)> = None;
    loop {
        let (journal, s) = match kept.take() {
            Some(open) => open,
            None => {
                let journal = open_quietly(&cli.db)?;
                let s = journal.session(id)?;
                (journal, s)
            }
        };
        // Through a read service (read-only, a folder) or on PostgreSQL (no
        // path): other processes write while this one reads.
        let shared = match journal.path() {
            None => true,
            Some(p) => journal.is_read_only() && p.is_dir(),
        };
        let head = match s.refresh() {
            Ok(head) => head,
            // The writer stopped: open again (directly, now).
            Err(_) if shared && journal.path().is_some() => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                continue;
            }
            Err(e) => return Err(e),
        };
        if head > next {
            print_events(cli, &s, next, head, filter)?;
            next = head;
        }
        if shared {
            journal.wait_for_events(id, next, std::time::Duration::from_secs(1))?;
            kept = Some((journal, s));
        } else {
            drop((s, journal));
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

/// `show SESSION [--at SEQ]`.
pub(crate) fn show(cli: &Global, args: &ShowArgs) -> Result<ExitCode, Error> {
    let filter = Filter::new(&args.filter, false)?;
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    let at = at_or_last(&s, args.at);
    let state = s.state_at(at)?;
    if let Some(turn) = &args.turn {
        let log = conversation::conversation_log(&s, &state, at)?;
        if args.request {
            print_json(&conversation::request_body(&log, turn)?)?;
        } else if cli.json {
            print_json(&conversation::turn_value(&state, &log, turn)?)?;
        } else {
            conversation::print_turn(&state, &log, turn)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if cli.json {
        let text = state.to_json(&JsonOptions {
            include_logs: true,
            ..JsonOptions::default()
        });
        outln!("{text}");
    } else if state.conversation_log().is_conversation() {
        style::start_pager(args.pager.no_pager);
        conversation::print_conversation(&s, at, &state);
    } else {
        style::start_pager(args.pager.no_pager);
        render::print_state(&s, at, &state, &filter);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pending SESSION`.
pub(crate) fn pending(cli: &Global, args: &PendingArgs) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    if s.state().conversation_log().is_conversation() {
        return conversation::pending(cli, &s);
    }
    let plan = s.resume_plan()?;
    // The forks, and which of the calls left open here each finished.
    let open: Vec<_> = plan.pending.iter().chain(&plan.in_doubt).collect();
    let forks = resumed::forks_json(&s, |f| {
        let state = f.state();
        open.iter()
            .filter(|c| {
                state
                    .tool_calls()
                    .get(plan.evaluation_id, &c.call_id)
                    .is_some_and(|d| d.status.is_terminal())
            })
            .map(|c| c.call_id.as_str().to_owned())
            .collect()
    })?;
    let elsewhere = if plan.is_finished() {
        None
    } else {
        resumed::resumed_elsewhere(&s)?
    };
    if cli.json {
        let mut v = render::plan_json(&plan);
        v["forks"] = serde_json::Value::Array(forks);
        v["resumed_in"] = serde_json::json!(elsewhere.as_ref().map(|e| e.session.to_string()));
        print_json(&v)?;
    } else {
        render::print_plan(&plan);
        resumed::print_forks(&forks);
        if let Some(e) = &elsewhere {
            outln!("{}: `resume {}` has nothing to do", e.sentence(), s.id());
        }
    }
    Ok(ExitCode::SUCCESS)
}
