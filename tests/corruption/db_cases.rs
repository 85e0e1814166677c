//! Damage to the frames stored in a database, made through raw sled with the
//! journal closed: what opening it, `verify` and `salvage` make of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agent_journal::{Error, Journal, SessionId};

use super::fixture::Fixture;
use super::process::aj;
use super::verdict::{Verdict, check_prefix, salvaged_records};
use crate::common::{Rng, event_key, path_str, raw_sled};

/// One change to the `events` tree.
#[derive(Clone, Copy, Debug)]
pub enum DbDamage {
    /// XOR 1 to 3 random bytes of the frame of `seq`.
    Flip(SessionId, u64),
    /// Remove the key of `seq` (a gap).
    Remove(SessionId, u64),
    /// Exchange the values of two keys.
    Swap((SessionId, u64), (SessionId, u64)),
}

/// Applies `damages` with raw sled (the journal must be closed).
pub fn apply(db: &Path, damages: &[DbDamage], rng: &mut Rng) {
    let raw = raw_sled(db);
    let t = raw.open_tree("events").expect("tree events");
    // Each damage hits one event's value alone.
    for d in damages {
        let places = match *d {
            DbDamage::Flip(id, seq) | DbDamage::Remove(id, seq) => vec![(id, seq)],
            DbDamage::Swap(a, b) => vec![a, b],
        };
        for (id, seq) in places {
            crate::common::unpack_event(db, &t, id, seq);
        }
    }
    let get = |id: SessionId, seq: u64| {
        t.get(event_key(id, seq))
            .expect("get")
            .unwrap_or_else(|| panic!("{id} seq {seq} is stored"))
    };
    for d in damages {
        match *d {
            DbDamage::Flip(id, seq) => {
                let old = get(id, seq);
                let mut v = old.to_vec();
                for _ in 0..rng.between(1, 3) {
                    let i = rng.below(v.len());
                    v[i] ^= rng.mask();
                }
                if v == old.as_ref() {
                    v[0] ^= 0x01;
                }
                t.insert(event_key(id, seq), v).expect("insert");
            }
            DbDamage::Remove(id, seq) => {
                t.remove(event_key(id, seq))
                    .expect("remove")
                    .expect("was there");
            }
            DbDamage::Swap(a, b) => {
                let (va, vb) = (get(a.0, a.1), get(b.0, b.1));
                t.insert(event_key(a.0, a.1), vb).expect("insert");
                t.insert(event_key(b.0, b.1), va).expect("insert");
            }
        }
    }
    raw.flush().expect("flush");
}

/// What the damages did, per `(session, seq)`.
#[derive(Default)]
pub struct Damaged {
    /// Every damaged seq of each session (flipped, removed, swapped).
    pub bad: BTreeMap<SessionId, BTreeSet<u64>>,
    /// Frames whose bytes were changed.
    flipped: BTreeSet<(SessionId, u64)>,
    /// Keys removed.
    removed: BTreeSet<(SessionId, u64)>,
    /// Records that are whole but stored under another key.
    misplaced: BTreeSet<(SessionId, u64)>,
}

pub fn damaged(damages: &[DbDamage]) -> Damaged {
    let mut d = Damaged::default();
    for x in damages {
        match *x {
            DbDamage::Flip(id, seq) => {
                d.bad.entry(id).or_default().insert(seq);
                d.flipped.insert((id, seq));
                d.misplaced.remove(&(id, seq));
            }
            DbDamage::Remove(id, seq) => {
                d.bad.entry(id).or_default().insert(seq);
                d.removed.insert((id, seq));
            }
            DbDamage::Swap(a, b) => {
                for r in [a, b] {
                    d.bad.entry(r.0).or_default().insert(r.1);
                    d.misplaced.insert(r);
                }
            }
        }
    }
    d
}

/// Checks one damaged database: in the library, then `verify` and
/// `salvage --to` through the binary, then the salvaged database.
pub fn check_db(fx: &Fixture, db: &Path, damages: &[DbDamage]) -> Verdict {
    let dmg = damaged(damages);
    let verdict = match open_db(fx, db, &dmg) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let dir = db.with_extension("work");
    let out = aj(db, &["verify"], &dir.join("verify"));
    if out.panicked() {
        return Verdict::Panicked(format!("verify of a damaged db: {out:?}"));
    }
    if out.code != Some(3) || !out.stderr.starts_with("error: corruption") {
        return Verdict::Fail(format!("verify of a damaged db: {out:?}"));
    }
    for (id, seqs) in &dmg.bad {
        for seq in seqs {
            if !out.stdout.contains(&format!("session {id} seq {seq}")) {
                return Verdict::Fail(format!(
                    "verify does not name session {id} seq {seq}: {}",
                    out.stdout
                ));
            }
        }
    }
    if let Err(v) = salvage(fx, db, damages, &dmg, &dir) {
        return v;
    }
    verdict
}

fn open_db(fx: &Fixture, db: &Path, dmg: &Damaged) -> Result<Verdict, Verdict> {
    let bad = &dmg.bad;
    let j = Journal::open(db).map_err(|e| Verdict::Fail(format!("open: {e:?}")))?;
    let ids = j
        .sessions()
        .map_err(|e| Verdict::Fail(format!("sessions: {e}")))?;
    if ids.iter().collect::<Vec<_>>() != fx.truth.keys().collect::<Vec<_>>() {
        return Err(Verdict::Fail(format!("sessions listed: {ids:?}")));
    }
    let (mut detected, mut recovered) = (false, false);
    for (id, t) in &fx.truth {
        // Reading the events finds the first damaged seq; opening replays
        // only after the session's snapshot, so it finds the first one there.
        let first = bad.get(id).and_then(|s| s.first().copied());
        let replayed_from = fx.snapshots.get(id).map_or(0, |s| s + 1);
        let first_replayed = bad
            .get(id)
            .and_then(|s| s.range(replayed_from..).next().copied());
        let check = |expected: Option<u64>, what: &str, q: u64| -> Result<(), Verdict> {
            if Some(q) == expected {
                Ok(())
            } else {
                Err(Verdict::Fail(format!(
                    "session {id}: {what} at seq {q}, but the first damaged seq there is {expected:?}"
                )))
            }
        };
        let at = |what: &str, q: u64| check(first_replayed, what, q);
        let s = match j.session(*id) {
            Ok(s) => s,
            Err(Error::Corruption {
                session: Some(sid),
                seq: Some(q),
                ..
            }) if sid == *id => {
                at("corruption reported when opening", q)?;
                detected = true;
                continue;
            }
            Err(e) => return Err(Verdict::Fail(format!("session {id}: {e:?}"))),
        };
        let tail = s.torn_tail();
        if let Some(tail) = &tail {
            at("torn tail reported", tail.start)?;
            if tail.start != s.head() {
                return Err(Verdict::Fail(format!("{id}: {tail} but head {}", s.head())));
            }
            // Only frames that fail their checks belong in a torn tail: the
            // next append deletes it.
            let mut stored =
                (tail.start..t.len() as u64).filter(|seq| !dmg.removed.contains(&(*id, *seq)));
            if let Some(seq) = stored.find(|seq| !dmg.flipped.contains(&(*id, *seq))) {
                return Err(Verdict::Fail(format!(
                    "session {id}: {tail} holds seq {seq}, which is whole (after a gap or a swap)"
                )));
            }
            recovered = true;
        }
        match s.events(..) {
            Ok(events) => {
                check_prefix(&fx.truth, *id, &events).map_err(Verdict::Wrong)?;
                if events.len() as u64 != s.head() {
                    return Err(Verdict::Fail(format!(
                        "session {id}: head {} but {} events",
                        s.head(),
                        events.len()
                    )));
                }
                if tail.is_none() && (first.is_some() || events.len() != t.len()) {
                    return Err(Verdict::SilentLoss(format!(
                        "session {id}: {} of {} events and nothing reported (damage at {first:?})",
                        events.len(),
                        t.len()
                    )));
                }
            }
            // A snapshot covered the damaged seq, so opening did not read
            // it; reading the events does.
            Err(Error::Corruption {
                session: Some(sid),
                seq: Some(q),
                ..
            }) if sid == *id => {
                check(first, "corruption reported when reading", q)?;
                detected = true;
            }
            Err(e) => return Err(Verdict::Fail(format!("events of {id}: {e:?}"))),
        }
    }
    let report = j
        .verify(None, |_| {})
        .map_err(|e| Verdict::Fail(format!("verify: {e}")))?;
    for (id, seqs) in bad {
        for seq in seqs {
            if !report
                .problems
                .iter()
                .any(|p| p.session == *id && p.seq == Some(*seq))
            {
                return Err(Verdict::Fail(format!(
                    "Journal::verify misses session {id} seq {seq}: {:?}",
                    report.problems
                )));
            }
        }
    }
    Ok(if detected {
        Verdict::Detected
    } else if recovered {
        Verdict::Recovered
    } else {
        Verdict::Fail("no damage seen".into())
    })
}

fn salvage(
    fx: &Fixture,
    db: &Path,
    damages: &[DbDamage],
    dmg: &Damaged,
    dir: &Path,
) -> Result<(), Verdict> {
    let dest = dir.join("salvaged");
    let out = aj(
        db,
        &["salvage", "--to", path_str(&dest), "--json"],
        &dir.join("salvage"),
    );
    let v: serde_json::Value = match (out.code, serde_json::from_str(&out.stdout)) {
        (Some(0), Ok(v)) => v,
        _ if out.panicked() => return Err(Verdict::Panicked(format!("salvage --to: {out:?}"))),
        _ => return Err(Verdict::Fail(format!("salvage --to: {out:?}"))),
    };
    let dropped: BTreeSet<(String, u64)> = v["dropped"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p["session"].as_str()?.to_owned(), p["seq"].as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let out = aj(&dest, &["verify"], &dir.join("verify-salvaged"));
    if out.code != Some(0) {
        return Err(Verdict::Fail(format!("verify of the salvaged db: {out:?}")));
    }
    let present = salvaged_records(&dest, &fx.truth)?;
    // A damaged or removed frame is listed as dropped, or was found whole
    // in an older copy in sled's file and copied back (`present` holds only
    // events equal to what was written).
    for d in damages {
        match *d {
            DbDamage::Flip(id, seq)
                if !dropped.contains(&(id.to_string(), seq)) && !present.contains(&(id, seq)) =>
            {
                return Err(Verdict::Fail(format!(
                    "salvage neither lists {id} seq {seq} as dropped nor gives it back: {v}"
                )));
            }
            // A lost seq 0 is not listed: salvage writes a stand-in
            // `SessionOpened` labelled "salvaged" in its place.
            DbDamage::Remove(id, seq)
                if seq > 0
                    && !dropped.contains(&(id.to_string(), seq))
                    && !present.contains(&(id, seq)) =>
            {
                return Err(Verdict::Fail(format!(
                    "salvage neither lists the gap at {id} seq {seq} as dropped nor gives it back: {v}"
                )));
            }
            _ => {}
        }
    }
    if v["copied"].as_u64() != Some(present.len() as u64) {
        return Err(Verdict::Fail(format!(
            "salvage says {} copied, the new db holds {}",
            v["copied"],
            present.len()
        )));
    }
    for (id, t) in &fx.truth {
        for e in t {
            let damaged = dmg.bad.get(id).is_some_and(|s| s.contains(&e.seq));
            if !damaged && !present.contains(&(*id, e.seq)) {
                return Err(Verdict::Fail(format!(
                    "salvage lost {id} seq {}, which was not damaged",
                    e.seq
                )));
            }
        }
    }
    if let Some((id, seq)) = dmg.misplaced.iter().find(|r| !present.contains(r)) {
        return Err(Verdict::Fail(format!(
            "salvage dropped {id} seq {seq}, whole but stored under another key"
        )));
    }
    Ok(())
}
