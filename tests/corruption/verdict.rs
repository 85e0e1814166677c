//! Judging a damaged input: what a reader returned is compared with the
//! original ([`check_prefix`], [`salvaged_records`]), each case ends in a
//! [`Verdict`], and a [`Tally`] per kind of damage counts them and fails the
//! test on any panic, wrong data or broken promise.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use agent_journal::maintenance::SALVAGE_GAP_KIND;
use agent_journal::{Envelope, Event, Journal, SessionId};

use super::fixture::Truth;

/// First byte where `a` and `b` differ (the shorter length if one is a
/// prefix of the other), `None` if equal.
pub fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        return None;
    }
    Some(
        a.iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len())),
    )
}

/// Compares what a journal returned for a session with the original: it must
/// be a prefix, event for event. `Err` describes the first difference.
pub fn check_prefix(truth: &Truth, id: SessionId, got: &[Envelope]) -> Result<(), String> {
    let Some(t) = truth.get(&id) else {
        return Err(format!("session {id} is not in the original"));
    };
    if got.len() > t.len() {
        return Err(format!(
            "session {id}: {} events returned, the original has {}",
            got.len(),
            t.len()
        ));
    }
    for (g, o) in got.iter().zip(t) {
        if g != o {
            return Err(format!(
                "session {id} seq {}: returned {:?}, the original is {:?}",
                o.seq, g, o
            ));
        }
    }
    Ok(())
}

/// What a salvaged database holds, mapped back to the original: every
/// `(session, original seq)` it contains. Markers of lost records and the
/// stand-in `SessionOpened` are skipped; any other event that is not the
/// original's, in the original's order, is wrong data.
pub fn salvaged_records(dest: &Path, truth: &Truth) -> Result<BTreeSet<(SessionId, u64)>, Verdict> {
    let j = Journal::open(dest).map_err(|e| Verdict::Fail(format!("salvaged db: {e}")))?;
    let report = j
        .verify(None, |_| {})
        .map_err(|e| Verdict::Fail(format!("verify of the salvaged db: {e}")))?;
    if !report.is_clean() {
        return Err(Verdict::Fail(format!(
            "the salvaged db does not verify clean: {:?}",
            report.problems
        )));
    }
    let mut present = BTreeSet::new();
    for id in j.sessions().map_err(|e| Verdict::Fail(e.to_string()))? {
        let Some(t) = truth.get(&id) else {
            return Err(Verdict::Wrong(format!("salvage made up session {id}")));
        };
        let events = j
            .session(id)
            .and_then(|s| s.events(..))
            .map_err(|e| Verdict::Fail(format!("salvaged session {id}: {e}")))?;
        let mut cursor = 0usize;
        for env in events {
            let marker =
                matches!(&env.event, Event::Custom { kind, .. } if kind == SALVAGE_GAP_KIND);
            let stand_in = env.seq == 0
                && matches!(&env.event, Event::SessionOpened { labels }
                    if labels.iter().any(|(k, _)| k == "salvaged"));
            if marker || stand_in {
                continue;
            }
            let Some(k) = t[cursor..]
                .iter()
                .position(|o| o.at == env.at && o.event == env.event)
            else {
                return Err(Verdict::Wrong(format!(
                    "salvaged session {id} seq {} holds {:?}, which is not the original's next event",
                    env.seq, env.event
                )));
            };
            present.insert((id, t[cursor + k].seq));
            cursor += k + 1;
        }
    }
    Ok(present)
}

/// How one damaged input ended.
#[derive(Debug)]
pub enum Verdict {
    /// Opened; the damage was reported with its place; what was returned is
    /// the original's prefix.
    Recovered,
    /// Refused with `Corruption` carrying a location (or, damage to the
    /// magic, as not a journal).
    Detected,
    /// The bytes changed but not the content (records of two sessions
    /// reordered, which the format allows; a byte sled never reads; a log
    /// record whose events sled held anyway): everything is returned.
    Harmless,
    /// The damage removed or spoiled what sled held, and opening gave it
    /// all back from the write-ahead log: everything is returned.
    Repaired,
    /// Acknowledged events missing and nothing reported them.
    SilentLoss(String),
    /// A process of the case (the binary, a child test) panicked.
    Panicked(String),
    /// Data returned that is not the original's: the worst outcome.
    Wrong(String),
    /// Any other failure of the promise (damage not located, a wrong exit
    /// code, a database that should open and does not, ...).
    Fail(String),
}

/// Counts verdicts of one damage kind (or of several: [`Tally::add`]) and
/// asserts the promise at the end.
pub struct Tally {
    pub kind: String,
    /// Kinds added together (1 for one kind).
    pub kinds: usize,
    pub tried: usize,
    pub recovered: usize,
    pub detected: usize,
    pub harmless: usize,
    pub repaired: usize,
    pub panics: usize,
    pub silent_losses: usize,
    pub wrong: usize,
    /// Every case that did not end well, described (panics, silent losses
    /// and wrong data included).
    pub failures: Vec<String>,
    /// Observations about sled itself (not our code), by name.
    pub sled: BTreeMap<String, usize>,
}

impl Tally {
    pub fn new(kind: &str) -> Tally {
        Tally {
            kind: kind.to_owned(),
            kinds: 1,
            tried: 0,
            recovered: 0,
            detected: 0,
            harmless: 0,
            repaired: 0,
            panics: 0,
            silent_losses: 0,
            wrong: 0,
            failures: Vec::new(),
            sled: BTreeMap::new(),
        }
    }

    /// Runs one case under `catch_unwind`. `f` gets a list to note
    /// observations about sled in ([`Notes`]).
    pub fn case(&mut self, what: impl FnOnce() -> String, f: impl FnOnce(&mut Notes) -> Verdict) {
        self.tried += 1;
        let mut notes = Notes::default();
        let r = catch_unwind(AssertUnwindSafe(|| f(&mut notes)));
        for s in notes.sled {
            *self.sled.entry(s).or_default() += 1;
        }
        match r {
            Ok(Verdict::Recovered) => self.recovered += 1,
            Ok(Verdict::Detected) => self.detected += 1,
            Ok(Verdict::Harmless) => self.harmless += 1,
            Ok(Verdict::Repaired) => self.repaired += 1,
            Ok(Verdict::SilentLoss(m)) => {
                self.silent_losses += 1;
                self.failures.push(format!("{}: SILENT LOSS: {m}", what()));
            }
            Ok(Verdict::Panicked(m)) => {
                self.panics += 1;
                self.failures.push(format!("{}: PANIC: {m}", what()));
            }
            Ok(Verdict::Wrong(m)) => {
                self.wrong += 1;
                self.failures
                    .push(format!("{}: SILENT WRONG DATA: {m}", what()));
            }
            Ok(Verdict::Fail(m)) => self.failures.push(format!("{}: {m}", what())),
            Err(p) => {
                self.panics += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                self.failures.push(format!("{}: PANIC: {msg}", what()));
            }
        }
    }

    pub fn add(&mut self, other: Tally) {
        self.kinds += other.kinds;
        self.tried += other.tried;
        self.recovered += other.recovered;
        self.detected += other.detected;
        self.harmless += other.harmless;
        self.repaired += other.repaired;
        self.panics += other.panics;
        self.silent_losses += other.silent_losses;
        self.wrong += other.wrong;
        self.failures.extend(other.failures);
        for (k, v) in other.sled {
            *self.sled.entry(k).or_default() += v;
        }
    }

    /// Cases that ended well: detected, recovered, or nothing lost at all.
    pub fn ok(&self) -> usize {
        self.recovered + self.detected + self.harmless + self.repaired
    }

    /// `[kind] damaged inputs: N / detected or recovered: N / panics: 0 /
    /// silent losses: 0 (the detail)`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "[{}] damaged inputs: {} / detected or recovered: {} / panics: {} / silent losses: {} \
             (recovered {}, detected {}, intact {}, repaired from the log {}; wrong data {}, other failures {}",
            self.kind,
            self.tried,
            self.ok(),
            self.panics,
            self.silent_losses,
            self.recovered,
            self.detected,
            self.harmless,
            self.repaired,
            self.wrong,
            self.failures.len() - self.panics - self.silent_losses - self.wrong,
        );
        if !self.sled.is_empty() {
            s.push_str(&format!("; notes: {:?}", self.sled));
        }
        s.push(')');
        s
    }

    /// Prints the summary and fails on any panic, silent loss, wrong data
    /// or other failure.
    pub fn finish(self) {
        eprintln!("{}", self.summary());
        let shown: Vec<&String> = self.failures.iter().take(20).collect();
        assert!(
            self.failures.is_empty(),
            "{}\n{} failure(s), first ones:\n{}",
            self.summary(),
            self.failures.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// What a case noted while it ran, for the summary; never a failure.
#[derive(Default)]
pub struct Notes {
    /// Observations about sled itself (not our code): how it reacted to
    /// damage below our frames. Also what a case of the killed database
    /// damaged (whether sled held it), to see what the cases covered.
    pub sled: Vec<String>,
}
