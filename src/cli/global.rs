//! The options every command takes (`--db`, `--json`, `--utc`), as each
//! command's handler gets them, and the two that only some commands take:
//! `--no-pager` ([`PagerArg`], of the commands that page) and `--compress`
//! ([`CompressArg`], of the commands that create a database).

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
}

/// `--no-pager`: a flag of the commands that page (`log`, `show`) only;
/// any other command refuses it (exit 2).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct PagerArg {
    /// Never page (default: through `$PAGER`, else `less -FRX`, when
    /// stdout is a terminal and the output is not `--json`).
    #[arg(long)]
    pub(crate) no_pager: bool,
}

/// `--compress`: a flag of the commands that create a database (`demo`,
/// `chat`, `import`, `copy`); any other command refuses it (exit 2).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct CompressArg {
    /// Compress the pages of the database if this command creates it
    /// (zstd: about 2.4x smaller on agent messages; appends cost more
    /// CPU). Default: not compressed. A database keeps the setting it was
    /// created with (the flag does nothing to an existing one); `compact
    /// --compress` or `--no-compress` rewrites it.
    #[arg(long)]
    pub(crate) compress: bool,
}
