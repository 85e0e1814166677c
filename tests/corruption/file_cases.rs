//! Damage to an exported `.ajournal` file: what opening it, `verify` and
//! `salvage` make of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agent_journal::format::ajournal::MAGIC;
use agent_journal::format::{DEFAULT_MAX_EVENT_BYTES, TailDamage};
use agent_journal::maintenance::salvage_file;
use agent_journal::{Envelope, Error, Journal, SessionId};

use super::fixture::Fixture;
use super::process::aj;
use super::verdict::{Verdict, check_prefix, first_diff, salvaged_records};
use crate::common::path_str;

/// How much more than opening a case gets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Depth {
    /// Only `ajournal::parse` of the bytes (the parser `Journal::open` uses).
    Parse,
    /// `Journal::open` and every session's events.
    Open,
    /// Also `verify` through the binary and `salvage_file`.
    Verify,
    /// Also `salvage --to` through the binary, and `verify` of its output.
    Cli,
}

/// What opening the file showed.
#[derive(Clone, Copy, Debug)]
enum Seen {
    Tail(u64),
    Corrupt(u64),
    Refused,
    Clean,
}

/// Checks one damaged copy of the fixture's export. `intact` lists the
/// records still whole in it (a perfect salvage recovers them all).
pub fn check_file(
    fx: &Fixture,
    damaged: &[u8],
    intact: &[(SessionId, u64)],
    depth: Depth,
) -> Verdict {
    let Some(first) = first_diff(&fx.bytes, damaged) else {
        return Verdict::Harmless;
    };
    if depth == Depth::Parse {
        let read = agent_journal::format::ajournal::parse(damaged, DEFAULT_MAX_EVENT_BYTES)
            .map(|(streams, tail)| (streams.into_iter().collect(), tail));
        return judge(fx, read, damaged, first).0;
    }
    let dir = fx.path("file-case");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("case dir");
    let path = dir.join("case.ajournal");
    std::fs::write(&path, damaged).expect("write case");
    let (verdict, seen) = judge(fx, open_file(&path), damaged, first);
    let judged_ok = matches!(
        verdict,
        Verdict::Recovered | Verdict::Detected | Verdict::Harmless
    );
    if !judged_ok || depth == Depth::Open {
        return verdict;
    }
    if let Err(v) = cli_verify(&path, seen, &dir) {
        return v;
    }
    if let Err(v) = salvage(fx, &path, first, intact, depth) {
        return v;
    }
    verdict
}

/// What a reader made of a file: every session's events and the cut tail.
type Read = agent_journal::Result<(BTreeMap<SessionId, Vec<Envelope>>, Option<TailDamage>)>;

/// `Journal::open` of the file and every session's events.
fn open_file(path: &Path) -> Read {
    let j = Journal::open(path)?;
    let mut out = BTreeMap::new();
    for id in j.sessions()? {
        out.insert(id, j.session(id)?.events(..)?);
    }
    Ok((out, j.file_damage().cloned()))
}

fn judge(fx: &Fixture, read: Read, damaged: &[u8], first: usize) -> (Verdict, Seen) {
    let start = fx.record_start(first);
    let located = |o: u64, what: &str| -> Result<(), Verdict> {
        if (o as usize) < start || o as usize > damaged.len() {
            return Err(Verdict::Fail(format!(
                "{what} at byte offset {o}, but the first damaged byte is {first}, in the record at {start}"
            )));
        }
        Ok(())
    };
    let (streams, tail) = match read {
        Ok(r) => r,
        Err(Error::Corruption {
            offset: Some(o), ..
        }) => {
            return match located(o, "corruption reported") {
                Ok(()) => (Verdict::Detected, Seen::Corrupt(o)),
                Err(v) => (v, Seen::Clean),
            };
        }
        Err(e @ (Error::NotAJournal { .. } | Error::Unsupported(_))) => {
            return if first < MAGIC.len() {
                (Verdict::Detected, Seen::Refused)
            } else {
                (
                    Verdict::Fail(format!("refused though the magic is intact: {e}")),
                    Seen::Clean,
                )
            };
        }
        Err(e) => {
            return (
                Verdict::Fail(format!("unexpected error {e:?}")),
                Seen::Clean,
            );
        }
    };
    let mut complete = streams.len() == fx.exported.len();
    let mut returned = BTreeSet::new();
    for (id, events) in &streams {
        if let Err(m) = check_prefix(&fx.exported, *id, events) {
            return (Verdict::Wrong(m), Seen::Clean);
        }
        complete &= events.len() == fx.exported[id].len();
        returned.extend(events.iter().map(|e| (*id, e.seq)));
    }
    match tail {
        Some(d) => {
            if let Err(v) = located(d.start, "torn tail reported") {
                return (v, Seen::Clean);
            }
            if let Some(lost) = fx
                .records_before(first)
                .into_iter()
                .find(|r| !returned.contains(r))
            {
                return (
                    Verdict::Fail(format!(
                        "record {lost:?}, before the damage, was not returned"
                    )),
                    Seen::Clean,
                );
            }
            (Verdict::Recovered, Seen::Tail(d.start))
        }
        None if complete => (Verdict::Harmless, Seen::Clean),
        // The trailer tells a file cut short, even exactly
        // between two records, from a whole one.
        None => (
            Verdict::SilentLoss(format!(
                "{} of {} records returned and no damage reported",
                returned.len(),
                fx.total()
            )),
            Seen::Clean,
        ),
    }
}

/// `verify` through the binary: exit 3 naming the offset, 1 for a file
/// that is not a journal any more, 0 when nothing can be seen.
fn cli_verify(path: &Path, seen: Seen, dir: &Path) -> Result<(), Verdict> {
    let out = aj(path, &["verify"], &dir.join("verify"));
    if out.panicked() {
        return Err(Verdict::Panicked(format!("verify: {out:?}")));
    }
    if out.timed_out {
        return Err(Verdict::Fail(format!("verify hung: {out:?}")));
    }
    let ok = match seen {
        Seen::Tail(o) => out.code == Some(3) && out.stdout.contains(&format!("byte offset {o}")),
        Seen::Corrupt(o) => {
            out.code == Some(3)
                && out.stderr.starts_with("error: corruption")
                && out.stderr.contains(&format!("byte offset {o}"))
        }
        Seen::Refused => out.code == Some(1),
        Seen::Clean => out.code == Some(0),
    };
    if ok {
        Ok(())
    } else {
        Err(Verdict::Fail(format!(
            "verify after {seen:?}: code {:?}, stdout {:?}, stderr {:?}",
            out.code, out.stdout, out.stderr
        )))
    }
}

fn salvage(
    fx: &Fixture,
    path: &Path,
    first: usize,
    intact: &[(SessionId, u64)],
    depth: Depth,
) -> Result<(), Verdict> {
    let dir = path.parent().expect("dir");
    let dest = dir.join("salvaged");
    let report = match salvage_file(path, &dest, DEFAULT_MAX_EVENT_BYTES) {
        Ok(r) => r,
        Err(Error::NotAJournal { .. } | Error::Unsupported(_)) if first < MAGIC.len() => {
            return Ok(());
        }
        Err(e) => return Err(Verdict::Fail(format!("salvage_file: {e:?}"))),
    };
    let present = salvaged_records(&dest, &fx.exported)?;
    if present.len() as u64 != report.copied {
        return Err(Verdict::Fail(format!(
            "salvage reports {} records copied, the new database holds {}",
            report.copied,
            present.len()
        )));
    }
    if let Some(lost) = fx
        .records_before(first)
        .into_iter()
        .find(|r| !present.contains(r))
    {
        return Err(Verdict::Fail(format!(
            "salvage lost {lost:?}, a record before the damage"
        )));
    }
    if let Some(missed) = intact.iter().find(|r| !present.contains(r)) {
        return Err(Verdict::Fail(format!(
            "salvage_file missed {missed:?}, a record still whole in the file"
        )));
    }
    if present.len() < fx.total() && report.dropped.is_empty() {
        return Err(Verdict::Fail(format!(
            "{} of {} records salvaged and nothing listed as dropped",
            present.len(),
            fx.total()
        )));
    }
    if let Some(p) = report.dropped.iter().find(|p| p.offset.is_none()) {
        return Err(Verdict::Fail(format!("dropped without an offset: {p}")));
    }
    if depth == Depth::Cli {
        let dest2 = dir.join("salvaged-by-cli");
        let out = aj(
            path,
            &["salvage", "--to", path_str(&dest2), "--json"],
            &dir.join("salvage"),
        );
        let v: serde_json::Value = match (out.code, serde_json::from_str(&out.stdout)) {
            (Some(0), Ok(v)) => v,
            _ if out.panicked() => return Err(Verdict::Panicked(format!("salvage --to: {out:?}"))),
            _ => return Err(Verdict::Fail(format!("salvage --to: {out:?}"))),
        };
        if v["copied"] != report.copied
            || v["dropped"].as_array().map(Vec::len) != Some(report.dropped.len())
        {
            return Err(Verdict::Fail(format!(
                "salvage --json says {v}, the library {report:?}"
            )));
        }
        let out = aj(&dest2, &["verify"], &dir.join("verify-salvaged"));
        if out.code != Some(0) {
            return Err(Verdict::Fail(format!("verify of the salvaged db: {out:?}")));
        }
    }
    Ok(())
}
