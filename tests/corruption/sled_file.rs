//! Damage to sled's own `db` file, below our frames. sled may refuse the
//! database, recover to an earlier point, or panic (the library contains
//! its panics: a corruption error); each case runs in a child process (this
//! test binary, re-run on one test) so that a crash that got through (a
//! panic, an abort, a hang) is observed, and fails the case, instead of
//! taking the campaign down with it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_journal::SessionId;

use super::fixture::Truth;
use super::observe::{Expect, Seen, judge};
use super::process::{Out, aj, run_limited};
use super::verdict::{Notes, Verdict};
use crate::common::{Rng, copy_dir, path_str};

pub const CHILD_DB: &str = "AJ_CORRUPT_CHILD_DB";
pub const CHILD_OUT: &str = "AJ_CORRUPT_CHILD_OUT";
pub const CHILD_TEST: &str = "corruption::child_reads_a_damaged_database";

/// The database a case damages a copy of, and what it must give back.
pub struct Target<'a> {
    /// The database (not changed: cases copy it).
    pub db: &'a Path,
    /// Where the cases' copies go.
    pub scratch: &'a Path,
    /// Every event the database may hold.
    pub truth: &'a Truth,
    /// Events acknowledged per session.
    pub acked: &'a BTreeMap<SessionId, u64>,
}

/// Where a crash happened: sled's source or ours.
fn crash_site(out: &Out) -> String {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("panicked at"))
        .unwrap_or("");
    if line.contains("sled-0.34") || line.contains("/sled/") {
        format!("sled panic: {}", line.trim())
    } else if out.panicked() {
        format!("OUR panic: {}", line.trim())
    } else if out.timed_out {
        "hang (killed after the time limit)".into()
    } else {
        format!("killed by signal {:?}", out.signal)
    }
}

/// One case: flip 1 to 4 random bytes of the `db` file of a copy of the
/// target, then read it in a child process, verify it and salvage it
/// through the binary.
pub fn sled_file_case(t: &Target, rng: &mut Rng, case: usize, notes: &mut Notes) -> Verdict {
    let db = t.scratch.join(format!("sled-file-{case}"));
    copy_dir(t.db, &db);
    let work = t.scratch.join(format!("sled-file-{case}.work"));
    let file = db.join("db");
    let mut bytes = std::fs::read(&file).expect("read db file");
    // Half the flips land in the part of the file sled has written (its
    // non-zero bytes), half anywhere.
    let used: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    let mut flipped = Vec::new();
    for _ in 0..rng.between(1, 4) {
        let i = if rng.below(2) == 0 && !used.is_empty() {
            used[rng.below(used.len())]
        } else {
            rng.below(bytes.len())
        };
        bytes[i] ^= rng.mask();
        flipped.push(i);
    }
    std::fs::write(&file, &bytes).expect("write db file");

    let report = work.join("child.json");
    let mut child = Command::new(std::env::current_exe().expect("test binary"));
    child
        .args([
            "--ignored",
            "--exact",
            CHILD_TEST,
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DB, &db)
        .env(CHILD_OUT, &report);
    let out = run_limited(child, Duration::from_secs(60), &work.join("child"));
    let after = std::fs::read(&file).unwrap_or_default();
    if after != bytes {
        let changed = after.iter().zip(&bytes).filter(|(a, b)| a != b).count()
            + after.len().abs_diff(bytes.len());
        notes.sled.push(if changed > 64 {
            "opening rewrote the log after the damage (more than 64 bytes changed)".into()
        } else {
            "opening rewrote a few bytes of the db file".into()
        });
    }
    let seen: Option<Seen> = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let (verdict, missing) = match seen {
        // sled's own panics are contained by the library (a corruption
        // error): any panic, hang or signal is a failure.
        _ if out.panicked() => {
            return Verdict::Panicked(format!("flips at {flipped:?}: {}", crash_site(&out)));
        }
        _ if out.timed_out || out.signal.is_some() => {
            return Verdict::Fail(format!("flips at {flipped:?}: {}", crash_site(&out)));
        }
        None => return Verdict::Fail(format!("the child wrote no report: {out:?}")),
        Some(seen) => {
            note(&seen, notes);
            let j = judge(t.truth, t.acked, &seen, Expect::default());
            (j.verdict, j.missing)
        }
    };
    if !matches!(
        verdict,
        Verdict::Recovered | Verdict::Detected | Verdict::Harmless
    ) {
        return verdict;
    }
    // The binary on the same damaged copy (as the child's open left it):
    // no crash of ours; a clean exit code; every session with acknowledged
    // events missing still reported; a salvage that opens and verifies,
    // when there is one.
    let out = aj(&db, &["verify"], &work.join("verify"));
    if out.panicked() {
        return Verdict::Panicked(format!("verify: {}", crash_site(&out)));
    } else if out.timed_out || out.signal.is_some() {
        return Verdict::Fail(format!("verify: {}", crash_site(&out)));
    } else if !matches!(out.code, Some(0 | 1 | 3)) {
        return Verdict::Fail(format!("verify: {out:?}"));
    } else if let Some((id, seq)) = missing
        .iter()
        .find(|(id, _)| out.code != Some(3) || !out.stdout.contains(&id.to_string()))
    {
        return Verdict::SilentLoss(format!(
            "the library found acknowledged events of {id} missing from seq {seq}; verify, \
             opening the database again, exits {:?} without naming it: {}",
            out.code, out.stdout
        ));
    } else if matches!(verdict, Verdict::Recovered | Verdict::Detected) && out.code == Some(0) {
        notes
            .sled
            .push("verify exits 0 on a database the library found damaged".into());
    }
    let dest = work.join("salvaged");
    let out = aj(
        &db,
        &["salvage", "--to", path_str(&dest)],
        &work.join("salvage"),
    );
    if out.panicked() {
        return Verdict::Panicked(format!("salvage: {}", crash_site(&out)));
    } else if out.timed_out || out.signal.is_some() {
        return Verdict::Fail(format!("salvage: {}", crash_site(&out)));
    } else if out.code == Some(0) {
        let out = aj(&dest, &["verify"], &work.join("verify-salvaged"));
        if out.code != Some(0) {
            return Verdict::Fail(format!("verify of the salvaged db: {out:?}"));
        }
    } else {
        notes
            .sled
            .push("salvage cannot run: the database does not open".into());
    }
    let _ = std::fs::remove_dir_all(&db);
    let _ = std::fs::remove_dir_all(&work);
    verdict
}

/// Notes how sled took the damage (what the library saw), for the summary.
fn note(seen: &Seen, notes: &mut Notes) {
    let opened = match &seen.open {
        Ok(o) => o,
        Err(e) => {
            notes.sled.push(format!("refused to open: {}", e.variant));
            return;
        }
    };
    let sessions = match &opened.sessions {
        Ok(s) => s,
        Err(e) => {
            notes
                .sled
                .push(format!("listing sessions failed: {}", e.variant));
            return;
        }
    };
    if !opened.losses.is_empty() {
        notes
            .sled
            .push("sled lost acknowledged events: reported as losses".into());
    }
    for s in sessions {
        let failed = s
            .open
            .as_ref()
            .or(s.events.as_ref().and_then(|e| e.as_ref().err()));
        if let Some(e) = failed
            && (!e.corruption || e.seq.is_none())
        {
            notes.sled.push(format!(
                "reading a session fails with {} without a seq",
                e.variant
            ));
        }
    }
}
