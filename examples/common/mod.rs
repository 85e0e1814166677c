//! What every example shares: where it records (`--db PATH`, else the
//! CLI's default `./agent-journal.db`, so `agent-journal` opens what an
//! example recorded) and the command line that shows a recorded session.
//! Not an example itself (cargo runs `examples/*.rs` only).

use std::path::{Path, PathBuf};

/// The database to record into: `--db PATH`, else `agent-journal.db` in
/// the current directory. Runs add sessions to it.
pub fn db_path(name: &str) -> Result<PathBuf, String> {
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next(), args.next()) {
        (None, _, _) => Ok("agent-journal.db".into()),
        (Some(flag), Some(path), None) if flag == "--db" => Ok(path.into()),
        _ => Err(format!("usage: cargo run --example {name} [-- --db PATH]")),
    }
}

/// Prints the command line that shows `session` with the CLI.
pub fn print_cli_hint(db: &Path, session: agent_journal::SessionId) {
    println!(
        "look at it: agent-journal --db {} log {session}",
        db.display()
    );
    println!(
        "  (before `cargo install`: cargo run --release -- --db {} log {session})",
        db.display()
    );
}
