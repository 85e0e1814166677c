//! `copy --from DB --to DB`: every session of one journal into another.

use std::path::PathBuf;
use std::process::ExitCode;

use agent_journal::Error;
use clap::Args;

use crate::cli::global::Global;
use crate::cli::open::open_for_reading;
use crate::cli::output::{print_json, progress};

/// The arguments of `copy`.
#[derive(Args, Debug)]
pub(crate) struct CopyArgs {
    /// The journal to copy from: a database folder, a `postgres://` URL, or
    /// an exported `.ajournal` file.
    #[arg(long, value_name = "DB")]
    from: PathBuf,
    /// The journal to copy into: a database folder or a `postgres://` URL
    /// (created if missing).
    #[arg(long, value_name = "DB")]
    to: PathBuf,
    #[command(flatten)]
    compress: crate::cli::global::CompressArg,
}

/// `copy --from DB --to DB`.
pub(crate) fn copy(cli: &Global, args: &CopyArgs) -> Result<ExitCode, Error> {
    let from = open_for_reading(&args.from)?;
    let to = crate::cli::open::open_creating(&args.to, args.compress.compress)?;
    let total: u64 = from
        .sessions()?
        .into_iter()
        .map(|id| from.stream_len(id).map(|n| n.unwrap_or(0)))
        .sum::<Result<u64, Error>>()?;
    let bar = progress(total, "copy");
    let report = from.copy_to(&to, |n| bar.inc(n))?;
    bar.finish_and_clear();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": report.sessions.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "events": report.events,
        }))?;
    } else {
        outln!(
            "copied {} sessions ({} events), every frame verified",
            report.sessions.len(),
            report.events
        );
    }
    Ok(ExitCode::SUCCESS)
}
