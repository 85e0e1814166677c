//! `man [SUBCOMMAND]` and `man --all DIR`: the man pages (roff), generated
//! from the command definitions by clap_mangen.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::Error;
use clap::Args;

use crate::cli::global::Global;
use crate::cli::output::print_json;

/// The arguments of `man`.
#[derive(Args, Debug)]
pub(crate) struct ManArgs {
    /// Print the page of this subcommand (`man log`: `agent-journal-log(1)`).
    /// Default: the page of `agent-journal` itself.
    #[arg(value_name = "SUBCOMMAND", conflicts_with = "all")]
    subcommand: Option<String>,
    /// Write every page into DIR instead of printing one: `agent-journal.1`
    /// and one `agent-journal-SUBCOMMAND.1` per subcommand. Each file is
    /// written whole (under a temporary name, then renamed), replacing a
    /// page already there. DIR must exist.
    #[arg(long, value_name = "DIR")]
    all: Option<PathBuf>,
}

/// `man [SUBCOMMAND | --all DIR]`; `top` is the whole command line's
/// definition. An unknown subcommand is a usage error (exit 2), reported
/// by `usage_error` (the command line's own, handed down).
pub(crate) fn man(
    cli: &Global,
    args: &ManArgs,
    top: clap::Command,
    usage_error: fn(clap::Error) -> ExitCode,
) -> Result<ExitCode, Error> {
    // Built, the subcommands know their full names (`agent-journal-log`
    // for the page, `agent-journal log` for its synopsis).
    let mut top = top.disable_help_subcommand(true);
    top.build();
    let source = format!("agent-journal {}", top.get_version().unwrap_or_default());
    if let Some(dir) = &args.all {
        return write_all(cli, &top, &source, dir);
    }
    let cmd = match &args.subcommand {
        None => top,
        Some(name) => match top.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let known: Vec<&str> = top.get_subcommands().map(|s| s.get_name()).collect();
                // Said with the usage of `man`, as clap says its own refusals.
                let mut man = top.find_subcommand("man").cloned().unwrap_or(top.clone());
                let e = man.error(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "no subcommand {name:?} to print the page of (one of: {})",
                        known.join(", ")
                    ),
                );
                return Ok(usage_error(e));
            }
        },
    };
    let (_, page) = render(cmd, &source)?;
    std::io::Write::write_all(&mut std::io::stdout(), &page).map_err(|source| Error::Io {
        context: "writing the man page".into(),
        source,
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `top` and of each of its subcommands into `dir`.
fn write_all(
    cli: &Global,
    top: &clap::Command,
    source: &str,
    dir: &Path,
) -> Result<ExitCode, Error> {
    let mut written = Vec::new();
    for cmd in std::iter::once(top).chain(top.get_subcommands()) {
        let (name, page) = render(cmd.clone(), source)?;
        let path = dir.join(name);
        agent_journal::maintenance::write_file(&path, &page)?;
        written.push(path);
    }
    if cli.json {
        let pages: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        print_json(&serde_json::json!({ "pages": pages }))?;
    } else {
        for p in &written {
            outln!("{}", p.display());
        }
        outln!("wrote {} man pages into {}", written.len(), dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The file name (`agent-journal-log.1`) and the roff text of `cmd`'s
/// page; `source` is its footer (`agent-journal 0.1.0`).
fn render(cmd: clap::Command, source: &str) -> Result<(String, Vec<u8>), Error> {
    let man = clap_mangen::Man::new(cmd).source(source);
    let mut page = Vec::new();
    man.render(&mut page).map_err(|source| Error::Io {
        context: "rendering the man page".into(),
        source,
    })?;
    Ok((man.get_filename(), page))
}
