//! `agent-journal`: replay-debug the runs of AI agents.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
