//! `verify`, `compact` and `salvage`: checking and rescuing databases.

use std::path::Path;
use std::process::ExitCode;

use agent_journal::Error;

use crate::cli::{Cli, find_session_id, open_existing, print_json, progress};

/// `compact --to NEW`.
pub(crate) fn compact(cli: &Cli, to: &Path) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
    let total = journal
        .sessions()?
        .iter()
        .map(|id| journal.stream_len(*id).map(|n| n.unwrap_or(0)))
        .sum::<Result<u64, Error>>()?;
    let bar = progress(total, "compact");
    let r = journal.compact_to(to, |k| bar.inc(k))?;
    bar.finish_and_clear();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": r.sessions, "events": r.events,
            "bytes_before": r.bytes_before, "bytes_after": r.bytes_after,
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
pub(crate) fn salvage(cli: &Cli, to: &Path) -> Result<ExitCode, Error> {
    let r = if cli.db.is_file() {
        agent_journal::salvage_file(&cli.db, to, agent_journal::DEFAULT_MAX_EVENT_BYTES)?
    } else {
        open_existing(&cli.db)?.salvage_to(to)?
    };
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": r.sessions, "copied": r.copied, "renumbered": r.renumbered,
            "dropped": r.dropped.iter().map(|p| serde_json::json!({
                "session": p.session.to_string(), "seq": p.seq, "offset": p.offset, "reason": p.message,
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        for p in &r.dropped {
            outln!("dropped: {p}");
        }
        outln!(
            "salvaged {} sessions, {} records ({} renumbered) into {}; dropped {}",
            r.sessions,
            r.copied,
            r.renumbered,
            to.display(),
            r.dropped.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify [SESSION]`.
pub(crate) fn verify(cli: &Cli, session: Option<&str>) -> Result<ExitCode, Error> {
    let journal = open_existing(&cli.db)?;
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
    let damaged = report.has_damage() || file_damage.is_some();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": report.sessions,
            "events": report.events,
            "snapshots": report.snapshots,
            "ok": !damaged,
            "file_tail": file_damage.as_ref().map(|d| serde_json::json!({"offset": d.offset, "bytes": d.bytes, "reason": d.reason})),
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
        if !cli.json {
            let first = report
                .problems
                .iter()
                .find(|p| p.kind == agent_journal::ProblemKind::Damage)
                .map(|p| p.to_string())
                .or(file_damage.map(|d| format!("{}: {d}", cli.db.display())))
                .unwrap_or_default();
            eprintln!("error: corruption: {first}");
        }
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}
