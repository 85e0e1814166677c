//! Misbehaving readers cost the writer nothing measurable: a child process
//! appends (the agent) while this one holds 1,000 connections to its read
//! service and sends oversized, slow and garbage requests. Rounds with and
//! without the attack alternate, so that the machine's own noise falls on
//! both; the child's append latency (median of the rounds' medians), its
//! memory (VmRSS) and its descriptors are compared.
//!
//! The normal suite runs a short version with generous bounds; the long
//! one reports the figures of the README:
//! `AJ_READERS_ROUNDS=10 AJ_READERS_APPENDS=20000 cargo test --release
//! --test integration readers_bounds::load::long -- --ignored --nocapture`
//! (`AJ_READERS_DURABILITY=synced` for `Synced` appends).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_journal::{Durability, Event, Journal, JournalConfig};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The child: opens the database at `AJ_READERS_CHILD_DB`, says `READY`,
/// then for each `append N` line on stdin appends N events of ~300 bytes
/// and answers `LAT <median ns> <p99 ns>`.
#[test]
#[ignore = "the child process of the read-service load test; runs only when AJ_READERS_CHILD_DB is set"]
fn child() {
    let Ok(db) = std::env::var("AJ_READERS_CHILD_DB") else {
        return;
    };
    let durability = match std::env::var("AJ_READERS_DURABILITY").as_deref() {
        Ok("synced") => Durability::Synced,
        _ => Durability::Buffered,
    };
    let journal = Journal::open_with(
        &db,
        JournalConfig {
            durability,
            ..JournalConfig::default()
        },
    )
    .expect("child: open");
    let s = journal.create_session().expect("child: session");
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nREADY").unwrap();
    out.flush().unwrap();
    let mut n = 0u64;
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("child: stdin");
        let Some(count) = line.strip_prefix("append ") else {
            continue;
        };
        let count: usize = count.parse().expect("child: a count");
        let mut lat = Vec::with_capacity(count);
        for _ in 0..count {
            let mut payload = vec![0u8; 300];
            payload[..8].copy_from_slice(&n.to_le_bytes());
            let event = Event::Custom {
                kind: "load".into(),
                payload,
            };
            let t = Instant::now();
            s.append(event).expect("child: append");
            lat.push(t.elapsed().as_nanos() as u64);
            n += 1;
        }
        lat.sort_unstable();
        let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
        writeln!(out, "LAT {} {p99}", lat[lat.len() / 2]).unwrap();
        out.flush().unwrap();
    }
}

/// The writer child and its pipes.
struct Writer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Writer {
    fn start(db: &Path) -> Writer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "readers_bounds::load::child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("AJ_READERS_CHILD_DB", db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while line.trim() != "READY" {
            line.clear();
            assert!(output.read_line(&mut line).unwrap() > 0, "the child ended");
        }
        Writer {
            child,
            input,
            output,
        }
    }

    /// Appends `n` events in the child: (median, p99) in ns.
    fn append(&mut self, n: u64) -> (u64, u64) {
        writeln!(self.input, "append {n}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let mut w = line.split_whitespace().skip(1).map(|v| v.parse().unwrap());
        (w.next().unwrap(), w.next().unwrap())
    }

    fn proc_path(&self, what: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/{what}", self.child.id()))
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(self.proc_path("fd")).unwrap().count()
    }

    /// VmRSS in KiB.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(self.proc_path("status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The attack of one round: `held` connections opened and kept, and
/// threads sending oversized lines, a byte at a time, and garbage, each
/// connecting again whenever the service closes it.
struct Attack {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    held: Vec<UnixStream>,
    /// Connections the attackers made.
    tries: Arc<AtomicU64>,
}

impl Attack {
    fn start(socket: &Path, held: usize) -> Attack {
        let stop = Arc::new(AtomicBool::new(false));
        let tries = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for kind in [
            "oversized",
            "oversized",
            "slow",
            "slow",
            "garbage",
            "garbage",
        ] {
            let (socket, stop, tries) = (socket.to_owned(), stop.clone(), tries.clone());
            threads.push(std::thread::spawn(move || {
                let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ kind.len() as u64;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut c) = UnixStream::connect(&socket) else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    tries.fetch_add(1, Ordering::Relaxed);
                    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                    match kind {
                        // 4 MiB without a newline, then read what comes.
                        "oversized" => {
                            let chunk = vec![b'a'; 64 << 10];
                            for _ in 0..64 {
                                if c.write_all(&chunk).is_err() {
                                    break;
                                }
                            }
                        }
                        // A request a byte at a time.
                        "slow" => {
                            for b in b"scan 0 0 99999999999\n" {
                                if stop.load(Ordering::Relaxed) || c.write_all(&[*b]).is_err() {
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                        // Random bytes in random lines.
                        _ => {
                            for _ in 0..8 {
                                let mut line = Vec::new();
                                for _ in 0..200 {
                                    seed ^= seed << 13;
                                    seed ^= seed >> 7;
                                    seed ^= seed << 17;
                                    line.push(seed as u8);
                                }
                                line.push(b'\n');
                                if c.write_all(&line).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let mut sink = [0u8; 4096];
                    while matches!(c.read(&mut sink), Ok(n) if n > 0) {}
                    std::thread::sleep(Duration::from_millis(5));
                }
            }));
        }
        // Let the attackers take their places first.
        std::thread::sleep(Duration::from_millis(50));
        let held = (0..held)
            .filter_map(|_| UnixStream::connect(socket).ok())
            .collect();
        Attack {
            stop,
            threads,
            held,
            tries,
        }
    }

    /// Stops the attackers and closes every connection: (held, tries).
    fn stop(self) -> (usize, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        (self.held.len(), self.tries.load(Ordering::Relaxed))
    }
}

/// Raises this process's descriptor limit to `n` if it is lower.
fn raise_fd_limit(n: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if soft < n {
        let ok = Command::new("prlimit")
            .arg(format!("--pid={}", std::process::id()))
            .arg(format!("--nofile={n}:{n}"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "could not raise the descriptor limit to {n} (soft {soft})"
        );
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// What a run measured.
struct Figures {
    latency: f64,
    p99: f64,
    rss: f64,
    rss_kib: (u64, u64),
}

/// `rounds` pairs of rounds (quiet, then under attack), `appends` each.
fn run(rounds: u64, appends: u64) -> Figures {
    raise_fd_limit(4096);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut w = Writer::start(&db);
    let socket = db.join("readers.sock");
    w.append(appends); // warm-up
    let baseline = w.fds();
    let (mut quiet, mut attacked) = (Vec::new(), Vec::new());
    let (mut quiet99, mut attacked99) = (Vec::new(), Vec::new());
    let mut rss = (0, 0);
    // Per round: the writer grows as it appends, attack or not, so each
    // attacked phase is compared with the quiet phase just before it.
    let mut rss_ratios = Vec::new();
    for round in 0..rounds {
        let q = w.append(appends);
        let rss_quiet = w.rss();
        let attack = Attack::start(&socket, 1000);
        let a = w.append(appends);
        let rss_attacked = w.rss();
        let (held, tries) = attack.stop();
        assert!(held >= 990, "only {held} connections held");
        eprintln!(
            "round {round}: median {} -> {} ns, p99 {} -> {} ns, VmRSS {rss_quiet} -> {rss_attacked} KiB, {tries} attacking connections",
            q.0, a.0, q.1, a.1
        );
        quiet.push(q.0);
        attacked.push(a.0);
        quiet99.push(q.1);
        attacked99.push(a.1);
        rss = (rss.0.max(rss_quiet), rss.1.max(rss_attacked));
        rss_ratios.push(rss_attacked as f64 / rss_quiet.max(1) as f64);
        // Every descriptor comes back once the readers are gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.fds() > baseline && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(w.fds(), baseline, "descriptors left after round {round}");
    }
    // And the service still serves.
    let reader = Journal::attach(&db).unwrap();
    assert_eq!(reader.sessions().unwrap().len(), 1);
    Figures {
        latency: median(&mut attacked) as f64 / median(&mut quiet) as f64,
        p99: median(&mut attacked99) as f64 / median(&mut quiet99) as f64,
        rss: {
            rss_ratios.sort_by(f64::total_cmp);
            rss_ratios[rss_ratios.len() / 2]
        },
        rss_kib: rss,
    }
}

fn report(f: &Figures) {
    eprintln!(
        "under attack / quiet: median append latency {:.3}x, p99 {:.3}x, VmRSS {:.3}x (median of the rounds; peaks {} -> {} KiB)",
        f.latency, f.p99, f.rss, f.rss_kib.0, f.rss_kib.1
    );
}

#[test]
fn a_thousand_misbehaving_readers_cost_the_writer_nothing_measurable() {
    let f = run(3, 5000);
    report(&f);
    // Generous on a shared 2-core machine; the long run gives the figure.
    assert!(f.latency < 1.5, "append latency {:.2}x", f.latency);
    assert!(f.rss < 1.10, "memory {:.3}x", f.rss);
}

#[test]
#[ignore = "long: the README figure (see the module's docs)"]
fn long() {
    let f = run(
        env_u64("AJ_READERS_ROUNDS", 10),
        env_u64("AJ_READERS_APPENDS", 20_000),
    );
    report(&f);
    assert!(f.latency < 1.10, "append latency {:.3}x", f.latency);
    assert!(f.rss < 1.10, "memory {:.3}x", f.rss);
}
