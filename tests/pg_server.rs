//! A throwaway PostgreSQL server for the tests: one cluster per test binary,
//! in a temporary directory, listening only on a Unix socket there, stopped
//! when the test binary exits. Each journal gets a schema of its own.
//!
//! The server's binaries come from the machine (`/usr/lib/postgresql/*/bin`,
//! installed by `.ci/postgres.sh`). Without them the PostgreSQL tests print
//! a notice and pass, except in CI (`CI` set), where they fail.
//! `AGENT_JOURNAL_TEST_PG=postgres://...` points the tests at a server of
//! your own instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Server {
    url: String,
    _dir: tempfile::TempDir,
    /// The shell that stops the server when this process exits (kept, not
    /// waited for: it outlives every test).
    _watch: Option<std::process::Child>,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();

/// The newest installed server's `bin` directory.
fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, b)| b)
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `program args` as the `postgres` user when running as root (the server
/// refuses to run as root).
fn command(program: &Path) -> Command {
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn start() -> Option<Server> {
    if let Ok(url) = std::env::var("AGENT_JOURNAL_TEST_PG") {
        return Some(Server {
            url,
            _dir: tempfile::tempdir().expect("tempdir"),
            _watch: None,
        });
    }
    let Some(bin) = bin_dir() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the PostgreSQL tests: run .ci/postgres.sh first (no /usr/lib/postgresql/*/bin/initdb)"
        );
        eprintln!("note: PostgreSQL tests skipped: no server binaries (run .ci/postgres.sh)");
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    if as_root() {
        let ok = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "chown of the test cluster's directory to postgres");
    }
    let out = command(&bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        .output()
        .expect("run initdb");
    assert!(
        out.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server, watched by a shell that stops it when this test binary
    // (its parent) exits.
    // The tests need no durability from the server; the benchmark does
    // (`AGENT_JOURNAL_PG_FSYNC=on`).
    let fsync = std::env::var("AGENT_JOURNAL_PG_FSYNC").unwrap_or_else(|_| "off".into());
    let durable = fsync == "on";
    let server = format!(
        "{} -D {} -k {} -p 5432 -c listen_addresses= -c fsync={} -c full_page_writes={} \
         -c max_connections=400 -c shared_buffers=64MB",
        bin.join("postgres").display(),
        data.display(),
        data.display(),
        if durable { "on" } else { "off" },
        if durable { "on" } else { "off" },
    );
    let log = dir.path().join("server.log");
    let watch = format!(
        "{server} 2>{} & pid=$!; parent={}; while [ -d /proc/$parent ] && kill -0 $pid 2>/dev/null; do sleep 0.5; done; kill -INT $pid 2>/dev/null; wait $pid",
        log.display(),
        std::process::id()
    );
    let mut sh = if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", &watch]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &watch]);
        c
    };
    let watch = sh
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postgres");
    let url = format!(
        "postgresql:///postgres?host={}&port=5432&user=postgres",
        data.display()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if postgres::Client::connect(&url, postgres::NoTls).is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the test PostgreSQL server did not start within 30 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Server {
        url,
        _dir: dir,
        _watch: Some(watch),
    })
}

/// The URL of the test server, `None` (after a notice) if there is none
/// outside CI.
pub fn server_url() -> Option<String> {
    SERVER.get_or_init(start).as_ref().map(|s| s.url.clone())
}

/// The URL of a journal in a schema of its own on the test server.
pub fn fresh_url() -> Option<String> {
    let base = server_url()?;
    let schema = format!("t{}", uuid::Uuid::now_v7().simple());
    let sep = if base.contains('?') { '&' } else { '?' };
    // The application name tells this journal's connections apart on the
    // server (a test that cuts them cuts no other test's).
    Some(format!(
        "{base}{sep}application_name={schema}&schema={schema}"
    ))
}
