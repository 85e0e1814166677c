//! Machine output on stdout and progress on stderr.

use std::io::IsTerminal;

use agent_journal::Error;

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json(value: &serde_json::Value) -> Result<(), Error> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Error::InvalidInput(e.to_string()))?;
    outln!("{text}");
    Ok(())
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

/// A spinner on stderr with the time elapsed, for work whose size is not
/// known ahead (hidden when stderr is not a terminal). It turns while the
/// work runs; `finish_and_clear` removes it.
pub(crate) fn working(what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}
