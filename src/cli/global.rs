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
    /// The price table that `stats`, `sessions` and `view` compute a run's
    /// cost with: a JSON file `{"date": ..., "models": {MODEL: {"input",
    /// "output", "cache_read", "cache_write"}}}` in US dollars per million
    /// tokens (default: the table built in, dated; a model it does not name
    /// shows no cost).
    #[arg(long, global = true, env = "AGENT_JOURNAL_PRICES", value_name = "FILE")]
    pub(crate) prices: Option<PathBuf>,
}

impl Global {
    /// The price table of `--prices`, or the built-in one.
    ///
    /// # Errors
    /// The file's, as [`crate::cli::price::Prices::load`] says them.
    pub(crate) fn prices(&self) -> Result<crate::cli::price::Prices, agent_journal::Error> {
        crate::cli::price::Prices::load(self.prices.as_deref())
    }
}
