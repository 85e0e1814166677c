//! Row 12: the timeline page of a 100,000-event session (`view`): the time
//! to write it, and its time to first render in headless Chromium against
//! a page of the same data that only parses it. Row 13: `fork --at 40000`
//! of a 50,000-event session against reading those 40,000 events.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_journal::Journal;

use crate::common::events::AgentRun;
use crate::common::report::{Report, Row, Verdict, fmt_bytes, fmt_dur, fmt_ratio, thousands};
use crate::common::{buffered, tempdir};

const CHROMIUM: &str = "/usr/bin/chromium";

/// A session of `n` agent events in the database at `path`; its id.
fn session_of(path: &Path, n: u64) -> String {
    let journal = Journal::open_with(path, buffered()).expect("open");
    let s = journal.create_session().expect("create");
    let mut run = AgentRun::new(200);
    while s.head() < n {
        let k = (n - s.head()).min(1_000);
        s.append_batch(run.take_vec(k)).expect("append");
    }
    journal.flush().expect("flush");
    s.id().to_string()
}

/// The `data-first-render-ms` a page sets, loaded in headless Chromium
/// (best of `rounds`); `None` without Chromium.
fn first_render_ms(page: &Path, profile: &Path, rounds: usize) -> Option<f64> {
    let mut best: Option<f64> = None;
    for _ in 0..rounds.max(1) {
        let out = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1400,900",
                "--dump-dom",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("file://{}", page.display()))
            .output()
            .ok()?;
        let dom = String::from_utf8_lossy(&out.stdout);
        let key = "data-first-render-ms=\"";
        let at = dom.find(key)? + key.len();
        let ms: f64 = dom[at..at + dom[at..].find('"')?].parse().ok()?;
        best = Some(best.map_or(ms, |b: f64| b.min(ms)));
    }
    best
}

pub fn section_viewer(quick: bool, rounds: usize, rep: &mut Report) {
    let n = if quick { 20_000 } else { 100_000 };
    eprintln!("[12] the timeline page of a {}-event session", thousands(n));
    let dir = tempdir();
    let db = dir.path().join("db");
    let id = session_of(&db, n);
    let page = dir.path().join("page.html");
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_agent-journal"))
        .arg("--db")
        .arg(&db)
        .args(["view", &id, "-o"])
        .arg(&page)
        .output()
        .expect("run view");
    let write = t.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).expect("page");
    // The baseline: the same data in a page whose script only parses it.
    let start = html
        .find("<script type=\"application/json\"")
        .expect("data");
    let end = start + html[start..].find("</script>").expect("end") + "</script>".len();
    let baseline = dir.path().join("baseline.html");
    std::fs::write(
        &baseline,
        format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>{}<script>\
             const d = JSON.parse(document.getElementById('journal-data').textContent);\
             document.body.dataset.events = d.events.length;\
             document.documentElement.dataset.firstRenderMs = performance.now().toFixed(1);\
             </script></body></html>",
            &html[start..end]
        ),
    )
    .expect("baseline");
    let profile = dir.path().join("profile");
    let (ours, base) = match (
        first_render_ms(&page, &profile, rounds),
        first_render_ms(&baseline, &profile, rounds),
    ) {
        (Some(o), Some(b)) => (o, b),
        _ => {
            rep.note("row 12 skipped: no headless Chromium at /usr/bin/chromium".into());
            return;
        }
    };
    rep.row(Row {
        id: "12",
        what: format!(
            "`view` of a {}-event session ({}): time to first render in headless Chromium (page written in {})",
            thousands(n),
            fmt_bytes(html.len() as u64),
            fmt_dur(write)
        ),
        ours: format!("{ours:.0} ms"),
        baseline: format!("the same data in a page that only parses it: {base:.0} ms"),
        ratio: format!("{} the parse alone", fmt_ratio(ours / base)),
        target: "first render <= 2 s".into(),
        verdict: Verdict::at_most(ours, 2_000.0),
    });
}

/// Peak resident memory of this process (VmHWM), after resetting it.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Runs `f` and returns its time and the peak memory it added.
pub fn measured(f: impl FnOnce()) -> (Duration, u64) {
    reset_peak();
    let before = rss_bytes();
    let t = Instant::now();
    f();
    let d = t.elapsed();
    (d, peak_bytes().saturating_sub(before))
}

pub fn section_fork(quick: bool, rep: &mut Report) {
    let (n, at) = if quick {
        (10_000, 8_000)
    } else {
        (50_000, 40_000)
    };
    eprintln!(
        "[13] fork at {} of a {}-event session",
        thousands(at),
        thousands(n)
    );
    let dir = tempdir();
    let db = dir.path().join("db");
    let id = session_of(&db, n);
    let journal = Journal::open_with(&db, buffered()).expect("open");
    let s = journal.session(id.parse().expect("id")).expect("session");
    let (read, read_mem) = measured(|| {
        let mut count = 0u64;
        s.for_each_event(0..at, |_| {
            count += 1;
            Ok(())
        })
        .expect("read");
        assert_eq!(count, at);
    });
    let (fork, fork_mem) = measured(|| {
        let f = journal.fork_session(s.id(), at - 1).expect("fork");
        assert_eq!(journal.stream_len(f).expect("len"), Some(1));
    });
    let ratio = fork.as_secs_f64() / read.as_secs_f64();
    rep.row(Row {
        id: "13",
        what: format!(
            "`fork --at {}` of a {}-event session (`Journal::fork_session`, as the CLI runs it): time and peak memory added",
            thousands(at),
            thousands(n)
        ),
        ours: format!("{} / {}", fmt_dur(fork), fmt_bytes(fork_mem)),
        baseline: format!(
            "reading the {} events: {} / {}",
            thousands(at),
            fmt_dur(read),
            fmt_bytes(read_mem)
        ),
        ratio: format!("{ratio:.4}x the read"),
        target: "<= 0.01x (O(1) forks)".into(),
        verdict: Verdict::at_most(ratio, 0.01),
    });
}
