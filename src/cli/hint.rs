//! How the next-step hints (`next: agent-journal show ...`) name the
//! command, so that a hint copied into the shell works before
//! `cargo install`: `agent-journal` when that name on `PATH` is this very
//! binary, else `cargo run --release --`; and with `--db PATH` when the
//! database is not the default one.

use std::path::{Path, PathBuf};

/// The database a command uses when `--db` is not given.
const DEFAULT_DB: &str = "agent-journal.db";

/// The start of a command line that runs this binary on `db`:
/// `agent-journal`, or `cargo run --release --` when `agent-journal` on
/// `PATH` is missing or another binary, followed by `--db DB` unless `db`
/// is the default `agent-journal.db` (quoted for a POSIX shell if needed).
pub(crate) fn command(db: &Path) -> String {
    let mut line = if on_path_is_this_binary() {
        "agent-journal".to_owned()
    } else {
        "cargo run --release --".to_owned()
    };
    if db != Path::new(DEFAULT_DB) {
        line.push_str(" --db ");
        line.push_str(&shell_quote(&db.display().to_string()));
    }
    line
}

/// True if the first `agent-journal` on `PATH` resolves to the running
/// executable (a symlink to it counts). Any failure to tell is a no.
fn on_path_is_this_binary() -> bool {
    let Some(this) = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
    else {
        return false;
    };
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("agent-journal"))
        .find(|p| is_executable(p))
        .and_then(|p: PathBuf| p.canonicalize().ok())
        .is_some_and(|found| found == this)
}

/// A regular file (after links) with an execute bit, as a shell would run it.
#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A regular file (after links).
#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// `text` as one POSIX shell word: as it is when it holds only safe
/// characters, else in single quotes.
fn shell_quote(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quotes_only_what_a_shell_would_split() {
        assert_eq!(shell_quote("/tmp/a.db"), "/tmp/a.db");
        assert_eq!(shell_quote("my db"), "'my db'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
