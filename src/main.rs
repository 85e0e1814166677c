//! `agent-journal`: replay-debug the runs of AI agents.

mod cli;

fn main() -> std::process::ExitCode {
    quiet_sled_panics();
    cli::main()
}

/// sled 0.34 panics on some damaged pages of its files; the library
/// contains those panics and reports them as corruption (a one-line error,
/// exit 3), so their default message would only be noise on stderr. Any
/// other panic is printed as usual.
fn quiet_sled_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_sled = info
            .location()
            .is_some_and(|l| l.file().contains("sled-0.34"));
        if !in_sled {
            default(info);
        }
    }));
}
