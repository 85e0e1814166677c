//! The benchmark program of agent-journal: prints a markdown table of our
//! numbers against baselines measured in the same run (raw sled, a plain
//! file with fdatasync per record), with the targets of the issue.
//!
//! ```text
//! cargo bench --bench journal                      # everything (~minutes)
//! cargo bench --bench journal -- --quick           # smaller sizes, a smoke run
//! cargo bench --bench journal -- 2 cold-open       # some sections, by number or by part
//!                                                  # of the name ("synced" runs 2 and 3)
//! cargo bench --bench journal -- --list            # the sections
//! ```
//!
//! The sections live in `common/` (`append.rs`: rows 1-3, `open.rs`: 4 and 6,
//! `growth.rs`: 5 and 7, `resume.rs`: 8, `conversation.rs`: 9, the
//! conversation engine); helpers in `common/{events,raw,timing,report}.rs`.
//!
//! Every database lives in a temp dir. "Cold" opens are cold for the process
//! (nothing cached in memory by sled or the library); the OS page cache is
//! warm for ours and for the baseline alike.

mod common;

use std::time::Instant;

use common::append::{section_buffered, section_synced, section_synced_threads};
use common::growth::{section_append_cost, section_disk};
use common::open::{section_cold_open, section_realistic_open, section_snapshot_open};
use common::report::{Report, fmt_dur};
use common::tempdir;

/// The sections, by number and name; a filter argument selects a section
/// when it equals its number or is part of its name.
const SECTIONS: [(&str, &str, &str); 16] = [
    ("1", "buffered", "Buffered append vs raw sled inserts"),
    (
        "2",
        "synced",
        "Synced append, one writer, vs write + fdatasync",
    ),
    (
        "3",
        "synced-16",
        "Synced append, 16 threads, vs a plain leader/follower loop",
    ),
    (
        "4",
        "cold-open",
        "cold open + fold of a big session vs raw scan + decode",
    ),
    ("5", "append-cost", "append cost at event 1M vs at event 1k"),
    (
        "6",
        "snapshot-open",
        "open with a snapshot vs fold from 0 (needs 4); 6r, 6t, 6m: a session as the default snapshots leave it (open, state_at, memory)",
    ),
    (
        "7",
        "disk",
        "bytes on disk per event, snapshot bytes vs journal bytes",
    ),
    (
        "8",
        "resume",
        "resume plan of a 50,000-message session vs WINK's restore",
    ),
    (
        "9",
        "conversation",
        "conversation engine: run_turn vs send_chat and raw sled; turn 10,000 vs turn 1",
    ),
    (
        "10",
        "compaction",
        "the request of a turn at 100,000 messages vs 1,000 (window, compaction); state blob vs serde_json",
    ),
    (
        "11",
        "postgres",
        "PostgreSQL store vs raw INSERT + commit and SELECT on the same server",
    ),
    (
        "12",
        "viewer",
        "the timeline page of a 100,000-event session: first render vs parsing its data",
    ),
    (
        "13",
        "fork",
        "fork at 40,000 of 50,000 events vs reading the 40,000",
    ),
    (
        "14",
        "formats",
        "import a 50,000-message conversation in each format vs serde_json parsing it",
    ),
    (
        "15",
        "space",
        "bytes on disk of agent steps vs an SQLite table",
    ),
    (
        "16",
        "large",
        "Synced append of 16 KiB messages (segment files) vs write + fdatasync",
    ),
];

/// Sizes of a run.
struct Sizes {
    /// Events of the Buffered append loop (row 1).
    buffered: u64,
    /// Events of the one-writer Synced loop (row 2).
    synced: u64,
    /// Threads and events per thread of the concurrent Synced loop (row 3).
    threads: usize,
    per_thread: u64,
    /// Rounds of row 3 (its contestants take turns round by round).
    thread_rounds: u64,
    /// Events of the big sessions (rows 4, 5, 6).
    big: u64,
    /// Width of the timing windows of row 5, and where the early one starts.
    window: u64,
    early: u64,
    /// Events appended after the snapshot (row 6).
    tail: u64,
    /// Events of the session of row 7.
    disk: u64,
    /// Rounds of rows 4 and 6 (alternating ours and the baseline; the best of each is kept).
    rounds: usize,
    /// Turns of the long conversation of row 9 (the timed turns start there).
    conversation_turns: u64,
    /// Timed turns of each contestant of row 9, journal store and in-memory store.
    turns_synced: u64,
    turns_memory: u64,
}

impl Sizes {
    fn full() -> Self {
        Sizes {
            buffered: 300_000,
            synced: 2_000,
            threads: 16,
            per_thread: 2_000,
            thread_rounds: 5,
            big: 1_000_000,
            window: 10_000,
            early: 1_000,
            tail: 1_000,
            disk: 1_000_000,
            rounds: 3,
            conversation_turns: 10_000,
            turns_synced: 300,
            turns_memory: 2_000,
        }
    }

    fn quick() -> Self {
        Sizes {
            buffered: 50_000,
            synced: 300,
            threads: 16,
            per_thread: 100,
            thread_rounds: 2,
            big: 100_000,
            window: 10_000,
            early: 1_000,
            tail: 1_000,
            disk: 100_000,
            rounds: 1,
            conversation_turns: 10_000,
            turns_synced: 60,
            turns_memory: 300,
        }
    }
}

struct Opts {
    quick: bool,
    filters: Vec<String>,
    /// The arguments as given after `--`, to print the command.
    args: Vec<String>,
}

impl Opts {
    fn parse() -> Opts {
        let mut opts = Opts {
            quick: false,
            filters: Vec::new(),
            args: Vec::new(),
        };
        for a in std::env::args().skip(1) {
            match a.as_str() {
                // cargo bench passes --bench to harness = false programs.
                "--bench" => continue,
                "--quick" => opts.quick = true,
                "--list" | "--help" | "-h" => {
                    println!("usage: cargo bench --bench journal -- [--quick] [SECTION...]");
                    println!("sections (by number or part of the name):");
                    for (n, name, what) in SECTIONS {
                        println!("  {n}  {name:<14} {what}");
                    }
                    std::process::exit(0);
                }
                f if f.starts_with('-') => eprintln!("ignoring unknown flag {f}"),
                f => opts.filters.push(f.to_owned()),
            }
            opts.args.push(a);
        }
        opts
    }

    fn selected(&self, number: &str) -> bool {
        let (_, name, _) = SECTIONS
            .iter()
            .find(|(n, _, _)| *n == number)
            .expect("section");
        self.filters.is_empty()
            || self
                .filters
                .iter()
                .any(|f| f == number || name.contains(f.as_str()))
    }

    fn command(&self) -> String {
        if self.args.is_empty() {
            "cargo bench --bench journal".into()
        } else {
            format!("cargo bench --bench journal -- {}", self.args.join(" "))
        }
    }
}

fn main() {
    // Row 4m runs its open in a process of its own (this binary again).
    if let Ok(spec) = std::env::var(common::open::OPEN_MEMORY_CHILD) {
        common::open::open_memory_child(&spec);
        return;
    }
    let started = Instant::now();
    let opts = Opts::parse();
    let sizes = if opts.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let probe = tempdir();
    let machine = common::report::machine(probe.path());
    drop(probe);
    eprintln!("agent-journal benchmark ({})", opts.command());
    for m in &machine {
        eprintln!("  {m}");
    }
    let mut rep = Report::default();

    if opts.selected("1") {
        section_buffered(&sizes, &mut rep);
    }
    let mut one_writer_synced = None;
    if opts.selected("2") {
        one_writer_synced = Some(section_synced(&sizes, &mut rep));
    }
    if opts.selected("3") {
        section_synced_threads(&sizes, one_writer_synced, &mut rep);
    }
    if opts.selected("4") || opts.selected("6") {
        let big = section_cold_open(&sizes, &mut rep);
        if opts.selected("6") {
            section_snapshot_open(&sizes, &big, &mut rep);
        }
    }
    if opts.selected("6") {
        section_realistic_open(&sizes, &mut rep);
    }
    if opts.selected("5") {
        section_append_cost(&sizes, &mut rep);
    }
    if opts.selected("7") {
        section_disk(&sizes, &mut rep, false);
        section_disk(&sizes, &mut rep, true);
    }
    if opts.selected("8") {
        common::resume::section_resume(50_000, sizes.rounds, &mut rep);
    }
    if opts.selected("9") {
        common::conversation::section_conversation(&sizes, &mut rep);
    }
    if opts.selected("10") {
        common::compaction::section_compaction(opts.quick, &mut rep);
    }
    if opts.selected("11") {
        common::pg::section_postgres(&sizes, &mut rep);
    }
    if opts.selected("12") {
        common::viewer::section_viewer(opts.quick, sizes.rounds, &mut rep);
    }
    if opts.selected("13") {
        common::viewer::section_fork(opts.quick, &mut rep);
    }
    if opts.selected("14") {
        common::formats::section_formats(opts.quick, &mut rep);
    }
    if opts.selected("15") {
        common::space::section_space(opts.quick, &mut rep);
    }
    if opts.selected("16") {
        common::append::section_large(&sizes, &mut rep);
    }

    println!();
    println!("## agent-journal benchmark");
    println!();
    println!("Machine:");
    for m in &machine {
        println!("- {m}");
    }
    println!(
        "- mode: {}. Rows 1, 2, 3 and 5 time their contestants taking turns in chunks \
         (times summed), so load from elsewhere falls on both sides alike; row 5 keeps the \
         best of {} window pairs; rows 4 and 6 alternate ours and the baselines for as many \
         rounds and keep the best of each",
        if opts.quick { "--quick" } else { "full" },
        sizes.rounds
    );
    println!();
    rep.print();
    println!();
    println!("Total runtime: {}", fmt_dur(started.elapsed()));
    println!("Command: `{}`", opts.command());
}
