//! The table, the notes, the machine, and number formatting.

use std::path::Path;
use std::time::Duration;

/// PASS, FAIL, or a row that only informs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Info,
}

impl Verdict {
    pub fn at_least(value: f64, target: f64) -> Verdict {
        if value >= target {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }

    pub fn at_most(value: f64, target: f64) -> Verdict {
        if value <= target {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "**FAIL**",
            Verdict::Info => "info",
        }
    }
}

/// One row of the table.
pub struct Row {
    pub id: &'static str,
    pub what: String,
    pub ours: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
    pub verdict: Verdict,
}

/// Rows and notes, printed at the end.
#[derive(Default)]
pub struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    pub fn row(&mut self, row: Row) {
        eprintln!(
            "  -> row {}: ours {} | baseline {} | ratio {} | {}",
            row.id,
            row.ours,
            row.baseline,
            row.ratio,
            row.verdict.as_str()
        );
        self.rows.push(row);
    }

    pub fn note(&mut self, note: String) {
        eprintln!("  note: {note}");
        self.notes.push(note);
    }

    pub fn print(&self) {
        println!("| # | measured | ours | baseline (same run) | ratio | target | result |");
        println!("|---|---|---|---|---|---|---|");
        for r in &self.rows {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.id,
                r.what,
                r.ours,
                r.baseline,
                r.ratio,
                r.target,
                r.verdict.as_str()
            );
        }
        if !self.notes.is_empty() {
            println!();
            println!("Notes:");
            for n in &self.notes {
                println!("- {n}");
            }
        }
    }
}

/// `nproc`, CPU model, memory, kernel, and the filesystem of `dir`.
pub fn machine(dir: &Path) -> Vec<String> {
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "?".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| format!("{:.1} GiB", kb as f64 / (1 << 20) as f64))
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    vec![
        format!("nproc: {nproc}"),
        format!("load average at start (1/5/15 min): {}", load_average()),
        format!("CPU: {model}"),
        format!("memory: {mem}"),
        format!("kernel: {kernel}"),
        format!("temp dir: {} on {}", dir.display(), filesystem(dir)),
        "sled 0.34.7 (Mode::HighThroughput, 512 MiB cache, as the library opens it)".into(),
    ]
}

/// `/proc/loadavg`'s three averages: the machine may be shared.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The filesystem type and device of the mount holding `dir`.
fn filesystem(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let (dev, mnt, fstype) = (f[0], f[1], f[2]);
        if dir.starts_with(mnt) && best.as_ref().is_none_or(|(l, _)| mnt.len() >= *l) {
            best = Some((mnt.len(), format!("{fstype} ({dev} mounted at {mnt})")));
        }
    }
    best.map(|(_, s)| s).unwrap_or_else(|| "?".into())
}

/// `12,345,678`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Events per second.
pub fn rate(events: u64, d: Duration) -> f64 {
    events as f64 / d.as_secs_f64()
}

/// `123,456 ev/s`.
pub fn fmt_rate(r: f64) -> String {
    format!("{} ev/s", thousands(r.round() as u64))
}

/// A duration with a sensible unit.
pub fn fmt_dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}

/// Bytes with a binary unit.
pub fn fmt_bytes(b: u64) -> String {
    let f = b as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// `0.87x`.
pub fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}x")
}
