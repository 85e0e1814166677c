//! Damage to sled's own `db` file, below our frames. sled may refuse the
//! database, recover to an earlier point, or panic (the library contains
//! its panics: a corruption error); each case runs in a child process (this
//! test binary, re-run on one test) so that a crash that got through (a
//! panic, an abort, a hang) is observed, and fails the case, instead of
//! taking the campaign down with it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_journal::{Error, Journal, JournalConfig};
use serde_json::{Value, json};

use super::fixture::Fixture;
use super::process::{Out, aj, run_limited};
use super::verdict::{Notes, Verdict};
use crate::common::{Rng, path_str};

pub const CHILD_DB: &str = "AJ_CORRUPT_CHILD_DB";
pub const CHILD_OUT: &str = "AJ_CORRUPT_CHILD_OUT";
pub const CHILD_TEST: &str = "corruption::child_reads_a_damaged_database";

fn error_json(e: &Error) -> Value {
    let (seq, offset) = match e {
        Error::Corruption { seq, offset, .. } => (*seq, *offset),
        _ => (None, None),
    };
    json!({"error": e.to_string(), "corruption": e.is_corruption(), "seq": seq, "offset": offset,
        "variant": format!("{e:?}").split([' ', '(', '{']).next().unwrap_or_default()})
}

/// In the child: everything the library reads from `db`, as JSON.
pub fn read_everything(db: &Path) -> Value {
    let config = JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    let j = match Journal::open_with(db, config) {
        Ok(j) => j,
        Err(e) => return json!({"open": error_json(&e)}),
    };
    let ids = match j.sessions() {
        Ok(ids) => ids,
        Err(e) => return json!({"open": "ok", "sessions": error_json(&e)}),
    };
    let mut sessions = Vec::new();
    for id in ids {
        let r = j.session(id).and_then(|s| {
            let tail = s.torn_tail().map(|t| t.to_string());
            s.events(..).map(|e| (e, tail))
        });
        sessions.push(match r {
            Ok((events, tail)) => {
                json!({"id": id.to_string(), "events": events, "torn_tail": tail})
            }
            Err(e) => json!({"id": id.to_string(), "failed": error_json(&e)}),
        });
    }
    let verify = match j.verify(None, |_| {}) {
        Ok(r) => json!({"damage": r.has_damage(), "problems": r.problems.len()}),
        Err(e) => error_json(&e),
    };
    json!({"open": "ok", "sessions": sessions, "verify": verify})
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
/// fixture, then read it in a child process, verify it and salvage it
/// through the binary.
pub fn sled_file_case(fx: &Fixture, rng: &mut Rng, case: usize, notes: &mut Notes) -> Verdict {
    let db = fx.copy_db(&format!("sled-file-{case}"));
    let work = fx.path(&format!("sled-file-{case}.work"));
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
    let v: Option<Value> = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let verdict = match v {
        // sled's own panics are contained by the library (a corruption
        // error): any panic, hang or signal is a failure.
        _ if out.panicked() || out.timed_out || out.signal.is_some() => {
            return Verdict::Fail(format!("flips at {flipped:?}: {}", crash_site(&out)));
        }
        None => return Verdict::Fail(format!("the child wrote no report: {out:?}")),
        Some(v) => match judge(fx, &v, notes) {
            Ok(verdict) => verdict,
            Err(v) => return v,
        },
    };
    // The binary on the same damaged copy: no crash of ours; a clean exit
    // code; a salvage that opens and verifies, when there is one.
    let out = aj(&db, &["verify"], &work.join("verify"));
    if out.panicked() || out.timed_out || out.signal.is_some() {
        return Verdict::Fail(format!("verify: {}", crash_site(&out)));
    } else if !matches!(out.code, Some(0 | 1 | 3)) {
        return Verdict::Fail(format!("verify: {out:?}"));
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
    if out.panicked() || out.timed_out || out.signal.is_some() {
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

/// Judges what the child read against the original.
fn judge(fx: &Fixture, v: &Value, notes: &mut Notes) -> Result<Verdict, Verdict> {
    if v["open"] != "ok" {
        let e = &v["open"];
        notes.sled.push(format!(
            "refused to open: {}",
            e["variant"].as_str().unwrap_or("?")
        ));
        return Ok(Verdict::Detected);
    }
    let Some(sessions) = v["sessions"].as_array() else {
        notes.sled.push("listing sessions failed".into());
        return Ok(Verdict::Detected);
    };
    let (mut complete, mut reported) = (sessions.len() == fx.truth.len(), false);

    for s in sessions {
        let id: agent_journal::SessionId = s["id"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| Verdict::Fail(format!("bad session id in {s}")))?;
        let Some(t) = fx.truth.get(&id) else {
            return Err(Verdict::Wrong(format!("unknown session {id}")));
        };
        if let Some(e) = s.get("failed") {
            if e["corruption"] != true || (e["seq"].is_null() && e["offset"].is_null()) {
                notes.sled.push(format!(
                    "reading a session fails with {}",
                    e["variant"].as_str().unwrap_or("?")
                ));
            }
            complete = false;
            reported = true;
            continue;
        }
        let events = s["events"].as_array().cloned().unwrap_or_default();
        if events.len() > t.len() {
            return Err(Verdict::Wrong(format!("{id}: more events than recorded")));
        }
        for (got, orig) in events.iter().zip(t) {
            if *got != serde_json::to_value(orig).expect("json") {
                return Err(Verdict::Wrong(format!("{id} seq {}: {got}", orig.seq)));
            }
        }
        complete &= events.len() == t.len();
        reported |= !s["torn_tail"].is_null();
    }
    reported |= v["verify"]["damage"] == true;
    Ok(match (complete, reported) {
        (true, false) => Verdict::Harmless,
        (true, true) | (false, true) => Verdict::Recovered,
        (false, false) => {
            notes
                .sled
                .push("opens with events missing and nothing reported (sled recovered to an earlier point)".into());
            Verdict::Undetectable("sled lost the end of its log")
        }
    })
}
