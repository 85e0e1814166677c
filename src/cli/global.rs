//! The options every command takes (`--db`, `--json`, `--utc`,
//! `--no-pager`, `--compress`), as each command's handler gets them.

use std::path::PathBuf;

/// The global options, given before or after the command.
#[derive(clap::Args, Debug)]
pub(crate) struct Global {
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
    /// Times in UTC (default: local time, with its zone).
    #[arg(long, global = true)]
    pub(crate) utc: bool,
    /// Never page `log` and `show` (default: through `$PAGER`, else
    /// `less -FRX`, when stdout is a terminal).
    #[arg(long, global = true)]
    pub(crate) no_pager: bool,
    /// Compress the pages of a database this command creates (zstd: about
    /// 2.4x smaller on agent messages; appends cost more CPU). A database
    /// keeps the setting it was created with; `compact --compress` or
    /// `--no-compress` rewrites it.
    #[arg(long, global = true)]
    pub(crate) compress: bool,
}
