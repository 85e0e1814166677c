//! The options every command takes (`--db`, `--json`, `--utc`), as each
//! command's handler gets them, and the two that only some commands take:
//! `--no-pager` ([`PagerArg`], of the commands that page) and `--compress`
//! ([`CompressArg`], of the commands that create a database), and
//! `--prices` ([`PricesArg`], of the commands that show a run's cost).

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

/// `--prices FILE`: a flag of the commands that show a run's cost
/// (`stats`, `sessions`, `view`, `serve`).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct PricesArg {
    /// The price table a run's cost is computed with: a JSON file
    /// `{"date": ..., "models": {MODEL: {"input", "output", "cache_read",
    /// "cache_write"}}}` in US dollars per million tokens (default: the
    /// table built in, dated; a model it does not name shows no cost).
    #[arg(long, env = "AGENT_JOURNAL_PRICES", value_name = "FILE")]
    pub(crate) prices: Option<PathBuf>,
}

impl PricesArg {
    /// The price table of `--prices`, or the built-in one.
    ///
    /// # Errors
    /// The file's, as [`crate::cli::price::Prices::load`] says them.
    pub(crate) fn load(&self) -> Result<crate::cli::price::Prices, agent_journal::Error> {
        crate::cli::price::Prices::load(self.prices.as_deref())
    }
}
