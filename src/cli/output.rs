//! Output: lines on stdout (`outln!`, which ends the process quietly on a
//! closed pipe), machine output, errors and warnings on stderr (as JSON
//! under `--json`), and progress on stderr.

use std::io::IsTerminal;

use agent_journal::Error;

use super::style;

/// A time in machine output: RFC 3339 in UTC with a `Z`, to the
/// microsecond the journal keeps and no trailing zeros
/// (`2026-01-02T03:04:05.123456Z`), as serde writes the times inside the
/// records JSON outputs carry, so every time of `--json` reads alike.
pub(crate) fn json_time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

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

/// Writes one line to stdout; a closed pipe ends the process with success.
pub(crate) fn emit(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if style::to_pager(args).is_some() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// True under `--json`: errors and warnings go to stderr as JSON too.
pub(crate) static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One error on stderr: `error: MESSAGE`, or under `--json` one line
/// `{"error": {"code": EXIT, "kind": KIND, "message": MESSAGE}}`.
pub(crate) fn report_error(code: u8, kind: &str, message: &str) {
    let line = message.replace(['\r', '\n'], " ");
    if JSON.load(std::sync::atomic::Ordering::Relaxed) {
        let v = serde_json::json!({"error": {"code": code, "kind": kind, "message": line}});
        eprintln!("{v}");
    } else {
        eprintln!("error: {line}");
    }
}

/// One warning on stderr: `warning: MESSAGE`, or under `--json` one line
/// `{"warning": {"message": MESSAGE}}`.
pub(crate) fn report_warning(message: &str) {
    let line = message.replace(['\r', '\n'], " ");
    if JSON.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{}", serde_json::json!({"warning": {"message": line}}));
    } else {
        eprintln!("warning: {line}");
    }
}
