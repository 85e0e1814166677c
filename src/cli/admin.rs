//! `verify`, `salvage`, `compact`, `fork` and `sessions --delete`: checking,
//! rescuing and reshaping databases.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::Error;
use clap::Args;

use crate::cli::global::Global;
use crate::cli::open::{find_session_id, open_existing};
use crate::cli::output::{print_json, progress};

/// The arguments of `compact` and `salvage`.
#[derive(Args, Debug)]
pub(crate) struct NewDatabase {
    /// The new database (must not exist, or be an empty directory). It is
    /// built under a temporary name beside it and renamed when whole.
    #[arg(long)]
    pub(crate) to: PathBuf,
}

/// The arguments of `compact`.
#[derive(Args, Debug)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    pub(crate) new: NewDatabase,
    /// Compress the new database's pages (zstd; about 2.4x smaller on
    /// agent messages, appends cost more CPU). Default: as the source's.
    #[arg(long, conflicts_with = "no_compress")]
    pub(crate) compress: bool,
    /// Do not compress the new database's pages. Default: as the source's.
    #[arg(long)]
    pub(crate) no_compress: bool,
}

/// The arguments of `verify`.
#[derive(Args, Debug)]
pub(crate) struct VerifyArgs {
    /// Only this session.
    #[arg(value_parser = crate::cli::find::session_arg)]
    pub(crate) session: Option<String>,
}

/// The arguments of `fork`.
#[derive(Args, Debug)]
pub(crate) struct ForkArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    /// The last event of the parent to include.
    #[arg(long)]
    at: u64,
    /// Give tool call CALL_ID the text of FILE as its result in the fork
    /// (repeatable). The call must have no result at SEQ (pending, or in
    /// doubt); the fork records the result as the recorder would (tool
    /// message, `completed`), after an `agent_journal.edit` marker; the
    /// parent is not touched. `resume FORK` goes on from there.
    #[arg(long = "replace-result", value_name = "CALL_ID=FILE")]
    replace_result: Vec<String>,
    /// Give the fork, in place of message N (`msg=N` as `log` prints it,
    /// of the parent's evaluation holding it), a message of the same role
    /// with the text of FILE. SEQ must be where N is the next message (the
    /// fork holds none of the parent's messages from N on); an assistant
    /// message keeps its tool calls. After an `agent_journal.edit` marker;
    /// `resume FORK` sends the edited history.
    #[arg(
        long = "replace-message",
        value_name = "N=FILE",
        conflicts_with = "replace_result"
    )]
    replace_message: Option<String>,
}

/// `compact --to NEW [--compress | --no-compress]`.
pub(crate) fn compact(cli: &Global, args: &CompactArgs) -> Result<ExitCode, Error> {
    let to = &args.new.to;
    let compress = match (args.compress, args.no_compress) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let journal = open_existing(&cli.db)?;
    let total = journal
        .sessions()?
        .iter()
        .map(|id| journal.stream_len(*id).map(|n| n.unwrap_or(0)))
        .sum::<Result<u64, Error>>()?;
    let bar = progress(total, "compact");
    let r = journal.compact_to_with(to, compress, |k| bar.inc(k))?;
    bar.finish_and_clear();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": r.sessions, "events": r.events,
            "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
            "compressed": r.compressed,
        }))?;
    } else {
        outln!(
            "copied {} sessions ({} events) to {}: {} bytes -> {} bytes",
            r.sessions,
            r.events,
            to.display(),
            r.bytes_before,
            r.bytes_after
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `salvage --to NEW`.
pub(crate) fn salvage(cli: &Global, to: &Path) -> Result<ExitCode, Error> {
    let limit = agent_journal::format::DEFAULT_MAX_EVENT_BYTES;
    let bar = progress(0, "salvage");
    let tick = |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let r = if cli.db.is_file() {
        agent_journal::maintenance::salvage_file_with(&cli.db, to, limit, tick)?
    } else {
        // The database's files are read before sled opens it (sled rewrites
        // a damaged log when it opens one); a missing one is named, and
        // nothing is created.
        // (The journal's records, the demo's sandbox registry among them,
        // go into the new database too.)
        agent_journal::maintenance::salvage_database_with(&cli.db, to, limit, tick)?
    };
    bar.finish_and_clear();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": r.sessions, "copied": r.copied, "renumbered": r.renumbered,
            "from_files": r.from_files,
            "dropped": r.dropped.iter().map(|p| serde_json::json!({
                "session": p.session.to_string(), "seq": p.seq, "offset": p.offset, "reason": p.message,
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        for p in &r.dropped {
            outln!("dropped: {p}");
        }
        outln!(
            "salvaged {} sessions, {} records ({} renumbered, {} found in the files) into {}; dropped {}",
            r.sessions,
            r.copied,
            r.renumbered,
            r.from_files,
            to.display(),
            r.dropped.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify [SESSION]`.
pub(crate) fn verify(cli: &Global, session: Option<&str>) -> Result<ExitCode, Error> {
    // `verify` reports what a damaged file end cut off itself, and looks at
    // a private copy of a database's files (or through the process that
    // has it open): opening a damaged sled log repairs it, destroying the
    // evidence.
    let journal = crate::cli::open::open_untouched(&cli.db)?;
    let id = match session {
        Some(text) => Some(find_session_id(&journal, text)?),
        None => None,
    };
    let ids = match id {
        Some(id) => vec![id],
        None => journal.sessions()?,
    };
    let total = ids
        .iter()
        .map(|id| journal.stream_len(*id).map(|n| n.unwrap_or(0)))
        .sum::<Result<u64, Error>>()?;
    let bar = progress(total, "verify");
    let report = journal.verify(id, |k| bar.inc(k))?;
    bar.finish_and_clear();
    let file_damage = journal.file_damage().cloned();
    // Read from a copy that the open had to rebuild: the database itself is
    // damaged (sled cannot read it), though its records hold every
    // acknowledged event.
    let rebuilt = journal.rebuilt_from().is_some().then(|| {
        format!(
            "{}: sled cannot read its files; every acknowledged event is in the journal's own \
             records, and the next command that opens it for writing rebuilds it",
            cli.db.display()
        )
    });
    let damaged = report.has_damage() || file_damage.is_some() || rebuilt.is_some();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": report.sessions,
            "events": report.events,
            "snapshots": report.snapshots,
            "ok": !damaged,
            "file_tail": file_damage.as_ref().map(|d| serde_json::json!({"offset": d.start, "bytes": d.len, "reason": d.reason})),
            "problems": report.problems.iter().map(|p| serde_json::json!({
                "session": p.session.to_string(),
                "seq": p.seq,
                "offset": p.offset,
                "kind": format!("{:?}", p.kind).to_lowercase(),
                "message": p.message,
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        for p in &report.problems {
            outln!("{:?}: {p}", p.kind);
        }
        if let Some(d) = &file_damage {
            outln!("Damage: {}: {d}", cli.db.display());
        }
        if let Some(r) = &rebuilt {
            outln!("Damage: {r}");
        }
        outln!(
            "checked {} sessions, {} events, {} snapshots: {}",
            report.sessions,
            report.events,
            report.snapshots,
            if damaged {
                "DAMAGE FOUND"
            } else if report.is_clean() {
                "ok"
            } else {
                "ok (with warnings)"
            }
        );
    }
    if damaged {
        {
            let first = report
                .problems
                .iter()
                .find(|p| {
                    matches!(
                        p.kind,
                        agent_journal::maintenance::ProblemKind::Damage
                            | agent_journal::maintenance::ProblemKind::Incomplete
                    )
                })
                .map(|p| p.to_string())
                .or(file_damage.map(|d| format!("{}: {d}", cli.db.display())))
                .or(rebuilt)
                .unwrap_or_default();
            crate::cli::report_error(3, "corruption", &format!("corruption: {first}"));
        }
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// `fork SESSION --at SEQ`.
pub(crate) fn fork(cli: &Global, args: &ForkArgs) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
    // One event written; neither session's state is loaded.
    let parent = find_session_id(&journal, &args.session)?;
    let at = args.at;
    if let Some(arg) = &args.replace_message {
        let edit = crate::cli::edit::read_message_edit(arg)?;
        let (f, edit) = crate::cli::edit::fork_with_message(&journal, parent, at, edit)?;
        if cli.json {
            print_json(&serde_json::json!({
                "session": f.to_string(), "parent": parent.to_string(), "at": at, "edits": [edit],
            }))?;
        } else {
            outln!("forked session {f} from {parent} at seq {at}");
            outln!(
                "  replaced message {} with {} ({} bytes)",
                edit["replace_message"],
                edit["file"].as_str().unwrap_or(""),
                edit["bytes"]
            );
            outln!("resume with: agent-journal resume {f}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.replace_result.is_empty() {
        let edits = args
            .replace_result
            .iter()
            .map(|a| crate::cli::edit::read_replacement(a))
            .collect::<Result<Vec<_>, Error>>()?;
        let (f, edits) = crate::cli::edit::fork_with_edits(&journal, parent, at, edits)?;
        if cli.json {
            print_json(&serde_json::json!({
                "session": f.to_string(), "parent": parent.to_string(), "at": at, "edits": edits,
            }))?;
        } else {
            outln!("forked session {f} from {parent} at seq {at}");
            for e in &edits {
                outln!(
                    "  replaced the result of {} with {} ({} bytes)",
                    e["replace_result"].as_str().unwrap_or(""),
                    e["file"].as_str().unwrap_or(""),
                    e["bytes"]
                );
            }
            outln!("resume with: agent-journal resume {f}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let f = journal.fork_session(parent, at)?;
    if cli.json {
        print_json(
            &serde_json::json!({"session": f.to_string(), "parent": parent.to_string(), "at": at}),
        )?;
    } else {
        outln!("forked session {f} from {parent} at seq {at}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `sessions --delete SESSION [--force]`.
pub(crate) fn delete_session(cli: &Global, session: &str, force: bool) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
    let id = find_session_id(&journal, session)?;
    journal.delete_session(id, force)?;
    if cli.json {
        print_json(&serde_json::json!({"deleted": id.to_string()}))?;
    } else {
        outln!("deleted session {id}");
    }
    Ok(ExitCode::SUCCESS)
}
