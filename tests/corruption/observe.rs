//! What the library shows of a damaged database ([`Seen`], gathered by
//! [`observe`] in this process, or in a child process that writes it as
//! JSON), and the judge of what it shows against what was acknowledged
//! ([`judge`]): every acknowledged event is returned or reported lost, and
//! nothing returned differs from the original.
//!
//! A report is anything the library says about a place in a stream: a
//! session's torn tail (`start..start + len`), a loss of
//! `Journal::losses()` (`held..acknowledged`), or `Corruption` at a seq
//! when a session is opened or read (everything from that seq on). A
//! missing acknowledged event that no report covers is a silent loss.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agent_journal::maintenance::ProblemKind;
use agent_journal::{Envelope, Error, Journal, JournalConfig, SessionId};
use serde::{Deserialize, Serialize};

use super::fixture::Truth;
use super::verdict::{Verdict, check_prefix};

/// An error, as the judge needs it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrSeen {
    pub message: String,
    /// `Error`'s variant name.
    pub variant: String,
    pub corruption: bool,
    pub session: Option<SessionId>,
    pub seq: Option<u64>,
}

impl From<&Error> for ErrSeen {
    fn from(e: &Error) -> ErrSeen {
        let (session, seq) = match e {
            Error::Corruption { session, seq, .. } => (*session, *seq),
            _ => (None, None),
        };
        ErrSeen {
            message: e.to_string(),
            variant: format!("{e:?}")
                .split([' ', '(', '{'])
                .next()
                .unwrap_or_default()
                .to_owned(),
            corruption: e.is_corruption(),
            session,
            seq,
        }
    }
}

/// One session as the library shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionSeen {
    pub id: SessionId,
    /// `Journal::session` failed.
    pub open: Option<ErrSeen>,
    pub head: u64,
    /// The torn tail: start, length.
    pub tail: Option<(u64, u64)>,
    /// Every event (`events(..)`), when the session opened.
    pub events: Option<Result<Vec<Envelope>, ErrSeen>>,
}

/// A problem of `Journal::verify`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ProblemSeen {
    pub session: SessionId,
    pub seq: Option<u64>,
    pub damage: bool,
    pub message: String,
}

/// What an opened database shows.
#[derive(Debug, Serialize, Deserialize)]
pub struct OpenedSeen {
    /// `Journal::losses()`: session, held, acknowledged.
    pub losses: Vec<(SessionId, u64, u64)>,
    pub sessions: Result<Vec<SessionSeen>, ErrSeen>,
    pub verify: Result<Vec<ProblemSeen>, ErrSeen>,
}

/// Everything the library shows of a database.
#[derive(Debug, Serialize, Deserialize)]
pub struct Seen {
    pub open: Result<OpenedSeen, ErrSeen>,
}

/// Opens `db` (never creating it) and reads everything: losses, every
/// session with its torn tail and its events, and `verify`.
pub fn observe(db: &Path) -> Seen {
    let config = JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    let j = match Journal::open_with(db, config) {
        Ok(j) => j,
        Err(e) => {
            return Seen {
                open: Err((&e).into()),
            };
        }
    };
    let losses = j
        .losses()
        .iter()
        .map(|l| (l.session, l.held, l.acknowledged))
        .collect();
    let sessions = j
        .sessions()
        .map(|ids| ids.into_iter().map(|id| session_seen(&j, id)).collect())
        .map_err(|e| (&e).into());
    let verify = j
        .verify(None, |_| {})
        .map(|r| {
            r.problems
                .iter()
                .map(|p| ProblemSeen {
                    session: p.session,
                    seq: p.seq,
                    damage: p.kind == ProblemKind::Damage,
                    message: p.message.clone(),
                })
                .collect()
        })
        .map_err(|e| (&e).into());
    Seen {
        open: Ok(OpenedSeen {
            losses,
            sessions,
            verify,
        }),
    }
}

fn session_seen(j: &Journal, id: SessionId) -> SessionSeen {
    match j.session(id) {
        Err(e) => SessionSeen {
            id,
            open: Some((&e).into()),
            head: 0,
            tail: None,
            events: None,
        },
        Ok(s) => SessionSeen {
            id,
            open: None,
            head: s.head(),
            tail: s.torn_tail().map(|t| (t.start, t.len)),
            events: Some(s.events(..).map_err(|e| (&e).into())),
        },
    }
}

/// What a case expects beyond the promise about acknowledged events.
#[derive(Clone, Copy, Default)]
pub struct Expect<'a> {
    /// Every event of the original that is missing must be reported, not
    /// only the acknowledged ones (the damage was done to sled's frames:
    /// no event can vanish the way an unacknowledged one does in a crash).
    pub strict: bool,
    /// The seqs damaged in sled, per session: a report may not start
    /// before a session's first damaged seq, and a session without damage
    /// reports nothing.
    pub bad: Option<&'a BTreeMap<SessionId, BTreeSet<u64>>>,
    /// The database must open and list its sessions (the damage left sled's
    /// own files alone).
    pub must_open: bool,
}

/// The judge's findings.
pub struct Judged {
    pub verdict: Verdict,
    /// Sessions with acknowledged events not returned, and the first seq
    /// missing: `verify` through the binary must name each.
    pub missing: Vec<(SessionId, u64)>,
}

impl Judged {
    fn only(verdict: Verdict) -> Judged {
        Judged {
            verdict,
            missing: Vec::new(),
        }
    }
}

/// Judges what the library showed of a database against `truth` (every
/// event the database may hold: its stream as a sound open reads it) and
/// `acked` (how many events of each session were acknowledged).
pub fn judge(truth: &Truth, acked: &BTreeMap<SessionId, u64>, seen: &Seen, x: Expect) -> Judged {
    let opened = match &seen.open {
        Ok(o) => o,
        Err(e) if e.corruption && !x.must_open => return Judged::only(Verdict::Detected),
        Err(e) => return Judged::only(Verdict::Fail(format!("open: {e:?}"))),
    };
    let listed = match &opened.sessions {
        Ok(s) => s,
        Err(e) if e.corruption && !x.must_open => return Judged::only(Verdict::Detected),
        Err(e) => return Judged::only(Verdict::Fail(format!("sessions: {e:?}"))),
    };
    let problems = match &opened.verify {
        Ok(p) => Some(p),
        Err(e) if e.corruption && !x.must_open => None,
        Err(e) => return Judged::only(Verdict::Fail(format!("Journal::verify: {e:?}"))),
    };
    let verify_names = |id: SessionId, seq: u64| {
        problems.is_none_or(|ps| {
            ps.iter()
                .any(|p| p.session == id && p.damage && p.seq == Some(seq))
        })
    };
    let mut losses: BTreeMap<SessionId, (u64, u64)> = BTreeMap::new();
    for &(id, held, ack) in &opened.losses {
        let Some(t) = truth.get(&id) else {
            return Judged::only(Verdict::Wrong(format!("a loss of unknown session {id}")));
        };
        if held >= ack || ack > t.len() as u64 {
            return Judged::only(Verdict::Wrong(format!(
                "session {id}: loss of {held}..{ack}, but {} events were written",
                t.len()
            )));
        }
        losses.insert(id, (held, ack));
    }
    let by_id: BTreeMap<SessionId, &SessionSeen> = listed.iter().map(|s| (s.id, s)).collect();
    if let Some(id) = by_id.keys().find(|id| !truth.contains_key(id)) {
        return Judged::only(Verdict::Wrong(format!("unknown session {id} listed")));
    }
    let (mut detected, mut reported) = (false, false);
    let mut missing = Vec::new();
    for (id, t) in truth {
        let id = *id;
        let acked = acked.get(&id).copied().unwrap_or(0);
        let need = if x.strict { t.len() as u64 } else { acked };
        // Reports: `start..end`, and whether a refusal made it.
        let mut reports: Vec<(u64, u64)> = Vec::new();
        let mut refused = false;
        if let Some(&(held, ack)) = losses.get(&id) {
            reports.push((held, ack));
        }
        let got = match by_id.get(&id) {
            None => 0,
            Some(s) => {
                let refusal = |e: &ErrSeen, what: &str| -> Result<u64, Verdict> {
                    if !e.corruption || e.session.is_some_and(|s| s != id) {
                        return Err(Verdict::Fail(format!("session {id}: {what}: {e:?}")));
                    }
                    Ok(e.seq.unwrap_or(0))
                };
                let events = match (&s.open, &s.events) {
                    (Some(e), _) => Err(refusal(e, "opening")),
                    (None, Some(Err(e))) => Err(refusal(e, "reading its events")),
                    (None, Some(Ok(events))) => Ok(events),
                    (None, None) => unreachable!("an opened session is read"),
                };
                if let Some((start, len)) = s.tail {
                    reports.push((start, start + len));
                }
                match events {
                    Err(Err(v)) => return Judged::only(v),
                    Err(Ok(q)) => {
                        refused = true;
                        reports.push((q, u64::MAX));
                        q
                    }
                    Ok(events) => {
                        if let Err(m) = check_prefix(truth, id, events) {
                            return Judged::only(Verdict::Wrong(m));
                        }
                        if events.len() as u64 != s.head {
                            return Judged::only(Verdict::Fail(format!(
                                "session {id}: head {} but {} events",
                                s.head,
                                events.len()
                            )));
                        }
                        events.len() as u64
                    }
                }
            }
        };
        detected |= refused;
        reported |= !reports.is_empty();
        if let Some(u) = (got..need).find(|q| !reports.iter().any(|r| r.0 <= *q && *q < r.1)) {
            let m = format!(
                "session {id}: {got} of {} events returned ({acked} acknowledged); seq {u} \
                 is missing and no report covers it (reports {reports:?})",
                t.len()
            );
            return Judged::only(if u < acked {
                Verdict::SilentLoss(m)
            } else {
                Verdict::Fail(m)
            });
        }
        if let Some(first) = reports.iter().map(|r| r.0).min() {
            if !verify_names(id, first) {
                return Judged::only(Verdict::Fail(format!(
                    "session {id}: reported from seq {first} ({reports:?}), but Journal::verify \
                     does not name that seq: {:?}",
                    opened.verify
                )));
            }
            if let Some(bad) = x.bad {
                match bad.get(&id).and_then(|b| b.first()) {
                    None => {
                        return Judged::only(Verdict::Fail(format!(
                            "session {id}, which was not damaged, reports {reports:?}"
                        )));
                    }
                    Some(b) if first < *b => {
                        return Judged::only(Verdict::Fail(format!(
                            "session {id}: reported from seq {first}, before its first damaged seq {b}"
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
        if got < acked {
            missing.push((id, got));
        }
    }
    let verify_damage = problems.is_none_or(|ps| ps.iter().any(|p| p.damage));
    let verdict = if detected {
        Verdict::Detected
    } else if reported || verify_damage {
        Verdict::Recovered
    } else {
        Verdict::Harmless
    };
    Judged { verdict, missing }
}
