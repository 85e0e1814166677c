//! Damage to copies of the killed database ([`Killed`]): to the frames sled
//! holds (the database kinds, through raw sled), and to the last records
//! of the write-ahead log. The promise is the same for both: the database
//! opens; every acknowledged event is returned or reported lost (a torn
//! tail, `Journal::losses()`, `Corruption` at its seq, named by `verify`);
//! nothing returned differs from the original.

use std::path::Path;

use super::db_cases::{DbDamage, damaged};
use super::killed::{Killed, WalRecord};
use super::observe::{Expect, Seen, judge};
use super::process::aj;
use super::verdict::{Notes, Verdict, salvaged_records};
use crate::common::{Rng, path_str};

/// Judges a killed database damaged in sled's frames (`damages`, already
/// applied to `db`): in the library, then through the binary.
pub fn check_killed_db(
    kf: &Killed,
    db: &Path,
    damages: &[DbDamage],
    salvage: bool,
    notes: &mut Notes,
) -> Verdict {
    let dmg = damaged(damages);
    for (id, seqs) in &dmg.bad {
        for seq in seqs {
            notes.sled.push(
                if kf.in_log(*id, *seq) {
                    "a damaged frame the log also holds"
                } else {
                    "a damaged frame only sled holds"
                }
                .into(),
            );
        }
    }
    let seen = super::observe::observe(db);
    let x = Expect {
        strict: true,
        bad: Some(&dmg.bad),
        must_open: true,
    };
    let judged = judge(&kf.truth, &kf.acked, &seen, x);
    // Everything back without a report: the log gave back what sled lost.
    let verdict = match judged.verdict {
        Verdict::Harmless => Verdict::Repaired,
        v => v,
    };
    cli_checks(kf, db, verdict, &judged.missing, &seen, salvage)
}

/// One damage to the last or the second-to-last record of the log: a
/// flipped byte of its body (in either copy), the file cut inside it (its
/// second copy, the file's last bytes), or a copy zeroed from a point to
/// its end (a torn write). When the log's last record was
/// not acknowledged (the kill came before its ack), one case in three first
/// erases it, as a kill a moment earlier leaves the log: then the last
/// record is an acknowledged one. Returns what was done.
pub fn damage_wal(kf: &Killed, db: &Path, rng: &mut Rng, notes: &mut Notes) -> String {
    let acked =
        |r: &WalRecord| kf.acked.get(&r.session).copied().unwrap_or(0) >= r.first_seq + r.count;
    let path = db.join("wal");
    let mut bytes = std::fs::read(&path).expect("read the log");
    // Each record twice: the first copies, then the second ones (the last
    // records of the file).
    let (firsts, seconds) = kf.wal.split_at(kf.wal.len() / 2);
    let mut n = seconds.len();
    let mut what = String::new();
    let last = seconds[n - 1];
    if !acked(&last) && n >= 3 && rng.below(3) == 0 {
        bytes[firsts[n - 1].start..firsts[n - 1].end].fill(0);
        bytes[last.start..last.end].fill(0);
        n -= 1;
        what = format!(
            "the unacknowledged last record ({}..{} and {}..{}) never written, then ",
            firsts[n].start, firsts[n].end, last.start, last.end
        );
    }
    let (i, name) = if rng.below(2) == 0 {
        (n - 1, "the last record")
    } else {
        (n - 2, "the second-to-last record")
    };
    let r = seconds[i];
    notes.sled.push(format!(
        "{name} damaged ({}acknowledged; its events {})",
        if acked(&r) { "" } else { "not " },
        if kf.in_sled(&r) {
            "in sled too"
        } else {
            "only in the log"
        }
    ));
    // A flipped byte or a zeroed tail in either copy; the file cut inside
    // its last copy (a cut inside the first copy would take every second
    // copy with it: a cut inside the file's first half).
    let (copy, which) = if rng.below(2) == 0 {
        (firsts[i], "first")
    } else {
        (r, "second")
    };
    what += &match rng.below(3) {
        0 => {
            let at = rng.between(copy.start + 12, copy.end - 1);
            let mask = rng.mask();
            bytes[at] ^= mask;
            format!(
                "byte {at} of {name}'s {which} copy ({}..{}) ^ {mask:#04x}",
                copy.start, copy.end
            )
        }
        1 => {
            let cut = rng.between(r.start + 1, r.end - 1);
            bytes.truncate(cut);
            format!(
                "the log cut at byte {cut}, inside {name}'s second copy ({}..{})",
                r.start, r.end
            )
        }
        _ => {
            let from = rng.between(copy.start + 1, copy.end - 1);
            bytes[from..copy.end].fill(0);
            format!(
                "{name}'s {which} copy ({}..{}) zeroed from byte {from}",
                copy.start, copy.end
            )
        }
    };
    std::fs::write(&path, &bytes).expect("write the log");
    format!(
        "{what}; the record holds {} seq {}..{}",
        r.session,
        r.first_seq,
        r.first_seq + r.count
    )
}

/// Judges a killed database whose log was damaged.
pub fn check_wal(kf: &Killed, db: &Path, salvage: bool) -> Verdict {
    let seen = super::observe::observe(db);
    let x = Expect {
        must_open: true,
        ..Expect::default()
    };
    let judged = judge(&kf.truth, &kf.acked, &seen, x);
    cli_checks(kf, db, judged.verdict, &judged.missing, &seen, salvage)
}

/// The binary on the damaged copy, as the library's open left it: `verify`
/// exits 3 naming every session with acknowledged events missing when
/// anything was reported, 0 when nothing was; `salvage --to` (when asked)
/// writes a database that verifies clean and holds every event the library
/// returned.
fn cli_checks(
    kf: &Killed,
    db: &Path,
    verdict: Verdict,
    missing: &[(agent_journal::SessionId, u64)],
    seen: &Seen,
    salvage: bool,
) -> Verdict {
    let reported = match verdict {
        Verdict::Detected | Verdict::Recovered => true,
        Verdict::Harmless | Verdict::Repaired => false,
        v => return v,
    };
    let work = db.with_extension("work");
    let out = aj(db, &["verify"], &work.join("verify"));
    if out.panicked() {
        return Verdict::Panicked(format!("verify: {out:?}"));
    }
    if let Some((id, seq)) = missing
        .iter()
        .find(|(id, _)| out.code != Some(3) || !out.stdout.contains(&id.to_string()))
    {
        return Verdict::SilentLoss(format!(
            "acknowledged events of {id} are missing from seq {seq}; verify, opening the \
             database again, exits {:?} without naming the session: {}",
            out.code, out.stdout
        ));
    }
    if out.code != Some(if reported { 3 } else { 0 }) {
        return Verdict::Fail(format!("verify after {verdict:?}: {out:?}"));
    }
    if salvage {
        let dest = work.join("salvaged");
        let out = aj(
            db,
            &["salvage", "--to", path_str(&dest), "--json"],
            &work.join("salvage"),
        );
        if out.panicked() {
            return Verdict::Panicked(format!("salvage --to: {out:?}"));
        }
        if out.code != Some(0) {
            return Verdict::Fail(format!("salvage --to: {out:?}"));
        }
        let out = aj(&dest, &["verify"], &work.join("verify-salvaged"));
        if out.code != Some(0) {
            return Verdict::Fail(format!("verify of the salvaged db: {out:?}"));
        }
        let present = match salvaged_records(&dest, &kf.truth) {
            Ok(p) => p,
            Err(v) => return v,
        };
        let returned = seen
            .open
            .as_ref()
            .ok()
            .and_then(|o| o.sessions.as_ref().ok())
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s.id, s.events.as_ref()?.as_ref().ok()?)))
            .flat_map(|(id, events)| events.iter().map(move |e| (id, e.seq)));
        for r in returned {
            if !present.contains(&r) {
                return Verdict::Fail(format!(
                    "salvage lost {} seq {}, which the library returned",
                    r.0, r.1
                ));
            }
        }
    }
    verdict
}
