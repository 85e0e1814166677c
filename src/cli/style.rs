//! How text output looks on a terminal: colour (only on a terminal, never
//! with `NO_COLOR` set or under `--json`), times (local, with their zone and
//! the date when it is not today; `--utc` for UTC), whole contents
//! (`--full`), and the pager (`$PAGER`, else `less -FRX`, on a terminal
//! unless `--no-pager`).

use std::io::{IsTerminal, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Local, Utc};

static COLOUR: AtomicBool = AtomicBool::new(false);
static UTC: AtomicBool = AtomicBool::new(false);
static FULL: AtomicBool = AtomicBool::new(false);
/// The pager, while one runs: what `outln!` writes goes to its stdin.
static PAGER: Mutex<Option<(Child, ChildStdin)>> = Mutex::new(None);

/// Sets the look of this run from the global options.
pub(crate) fn init(json: bool, utc: bool) {
    let colour = !json
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    COLOUR.store(colour, Ordering::Relaxed);
    UTC.store(utc, Ordering::Relaxed);
}

/// Whole contents and arguments instead of one clipped line (`--full`).
pub(crate) fn set_full(full: bool) {
    FULL.store(full, Ordering::Relaxed);
}

/// True under `--full`.
pub(crate) fn full() -> bool {
    FULL.load(Ordering::Relaxed)
}

/// The colours used.
#[derive(Clone, Copy)]
pub(crate) enum Paint {
    /// Seqs and times.
    Dim,
    /// Event types.
    Kind,
    /// Success.
    Good,
    /// Failure, in doubt.
    Bad,
    /// Pending, running.
    Warn,
}

/// `text` in colour `p` when colour is on.
pub(crate) fn paint(p: Paint, text: &str) -> String {
    if !COLOUR.load(Ordering::Relaxed) {
        return text.to_owned();
    }
    let code = match p {
        Paint::Dim => "2",
        Paint::Kind => "36",
        Paint::Good => "32",
        Paint::Bad => "31",
        Paint::Warn => "33",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The colour of a status word.
pub(crate) fn status_paint(status: &str) -> Paint {
    match status {
        "completed" | "succeeded" | "finished" | "ok" => Paint::Good,
        "failed" | "in_doubt" | "in-doubt" | "cancelled" => Paint::Bad,
        _ => Paint::Warn,
    }
}

/// A time as people read it, the one format of every time the text
/// output prints: local (or UTC under `--utc`, with a `Z`) with its zone,
/// milliseconds, and the date when it is not today.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    if UTC.load(Ordering::Relaxed) {
        let date = if at.date_naive() == Utc::now().date_naive() {
            String::new()
        } else {
            at.format("%Y-%m-%d ").to_string()
        };
        return format!("{date}{}Z", at.format("%H:%M:%S%.3f"));
    }
    let local = at.with_timezone(&Local);
    let date = if local.date_naive() == Local::now().date_naive() {
        String::new()
    } else {
        local.format("%Y-%m-%d ").to_string()
    };
    format!("{date}{}", local.format("%H:%M:%S%.3f%:z"))
}

/// Starts the pager when stdout is a terminal and `no_pager` is false:
/// `$PAGER` (run by `sh -c`; empty or `cat` means none), else `less -FRX`
/// (which quits at once when the text fits the screen). Without one, or if
/// it cannot start, output goes to stdout as usual.
pub(crate) fn start_pager(no_pager: bool) {
    if no_pager || !std::io::stdout().is_terminal() {
        return;
    }
    let command = std::env::var("PAGER").unwrap_or_else(|_| "less -FRX".into());
    if command.trim().is_empty() || command.trim() == "cat" {
        return;
    }
    let child = Command::new("sh")
        .args(["-c", &command])
        .env(
            "LESS",
            std::env::var("LESS").unwrap_or_else(|_| "FRX".into()),
        )
        .stdin(Stdio::piped())
        .spawn();
    if let Ok(mut child) = child {
        if let Some(stdin) = child.stdin.take() {
            *PAGER.lock().unwrap_or_else(|p| p.into_inner()) = Some((child, stdin));
        }
    }
}

/// Writes one line to the pager if one runs; `None` when none does. A
/// pager that quit (the user pressed `q`) ends the process quietly.
pub(crate) fn to_pager(args: std::fmt::Arguments<'_>) -> Option<()> {
    let mut pager = PAGER.lock().unwrap_or_else(|p| p.into_inner());
    let (_, stdin) = pager.as_mut()?;
    if stdin
        .write_fmt(args)
        .and_then(|()| stdin.write_all(b"\n"))
        .is_err()
    {
        drop(pager);
        finish_pager();
        std::process::exit(0);
    }
    Some(())
}

/// Closes the pager's input and waits for the user to leave it.
pub(crate) fn finish_pager() {
    let taken = PAGER.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((mut child, stdin)) = taken {
        drop(stdin);
        let _ = child.wait();
    }
}
