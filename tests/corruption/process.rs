//! Processes with a time limit: the binary, and this test binary re-run as
//! a child, observed from outside so that a crash or a hang of theirs is a
//! finding instead of the end of the campaign.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli_command;

/// A run of the binary (or of a child test process).
#[derive(Debug)]
pub struct Out {
    /// The exit code, `None` if a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Killed for running past its time limit.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Whether it panicked (Rust's exit code 101, or the panic message).
    pub fn panicked(&self) -> bool {
        self.code == Some(101) || self.stderr.contains("panicked at")
    }
}

/// Runs `cmd` with stdout and stderr in files under `scratch`, killing it
/// after `limit`.
pub fn run_limited(mut cmd: Command, limit: Duration, scratch: &Path) -> Out {
    use std::os::unix::process::ExitStatusExt;
    std::fs::create_dir_all(scratch).expect("scratch");
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait after kill");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        stdout: String::from_utf8_lossy(&std::fs::read(&out_path).unwrap_or_default()).into(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap_or_default()).into(),
    }
}

/// `agent-journal --db DB ARGS...`, limited to 60 s.
pub fn aj(db: &Path, args: &[&str], scratch: &Path) -> Out {
    let mut c = cli_command(db);
    c.args(args);
    run_limited(c, Duration::from_secs(60), scratch)
}
