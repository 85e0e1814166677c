//! `verify`: checks every frame and the stream invariants of sessions.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::event::{Envelope, Event};
use crate::format;
use crate::journal::Journal;
use crate::model::{MessageId, SessionId};
use crate::state::SessionState;
use crate::store::Visit;

/// One problem `verify` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The session.
    pub session: SessionId,
    /// The seq of the event, when the problem is one event.
    pub seq: Option<u64>,
    /// Byte offset in an exported file, when it applies.
    pub offset: Option<u64>,
    /// Damage (a frame that fails its checks) or a broken invariant.
    pub kind: ProblemKind,
    /// What is wrong.
    pub message: String,
}

/// The kinds of problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// A frame fails its version, checksum or decoding, or a seq is missing.
    Damage,
    /// The frames are sound but the stream breaks a rule (seq 0 is not
    /// `SessionOpened`, a duplicated message id, ...).
    Invariant,
    /// The cached snapshot is unreadable or differs from the fold (harmless:
    /// it is ignored, but it is reported).
    Snapshot,
    /// A session that a copy into this journal left in part: the copy
    /// stopped before its last event was durable. Not listed by
    /// [`Journal::sessions`]; the next copy replaces it.
    Incomplete,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session {}", self.session)?;
        if let Some(seq) = self.seq {
            write!(f, " seq {seq}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " offset {o}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What `verify` checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Events checked.
    pub events: u64,
    /// Snapshots checked against the fold.
    pub snapshots: u64,
    /// Problems found, in order.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True if some event frame is damaged, or a session is incomplete
    /// (CLI exit code 3).
    pub fn has_damage(&self) -> bool {
        self.problems
            .iter()
            .any(|p| matches!(p.kind, ProblemKind::Damage | ProblemKind::Incomplete))
    }

    /// True if nothing at all was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Journal {
    /// Checks every frame of the given session (all sessions if `None`), the
    /// stream's invariants, and that the cached snapshot equals the fold of
    /// the events it covers. Reads everything; changes nothing. `progress`
    /// is called with the number of events checked since the last call.
    ///
    /// # Errors
    /// Only for I/O errors and unknown sessions; damage is reported in the
    /// [`VerifyReport`], not as an error.
    pub fn verify(
        &self,
        session: Option<SessionId>,
        mut progress: impl FnMut(u64),
    ) -> Result<VerifyReport> {
        let partial = self.incomplete_copies()?;
        let ids = match session {
            Some(id) => {
                if self.inner.store.len(id)?.is_none() {
                    return Err(Error::SessionNotFound(id));
                }
                vec![id]
            }
            None => self.inner.store.sessions()?,
        };
        let mut report = VerifyReport::default();
        for id in ids {
            if partial.contains(&id) {
                // Its events may stop anywhere: whole frames, but not all.
                let held = self.inner.store.len(id)?.unwrap_or(0);
                report.problems.push(Problem {
                    session: id,
                    seq: None,
                    offset: None,
                    kind: ProblemKind::Incomplete,
                    message: format!(
                        "incomplete copy: a copy into this journal stopped after writing \
                         {held} events of it; rerun the copy to finish it"
                    ),
                });
                continue;
            }
            verify_session(self, id, &mut report, &mut progress)?;
        }
        // Acknowledged events the store no longer holds (found when it was
        // opened, against its own record of what it acknowledged).
        for loss in self.inner.store.losses() {
            if session.is_none_or(|id| id == loss.session) {
                report.problems.push(Problem {
                    session: loss.session,
                    seq: Some(loss.held),
                    offset: None,
                    kind: ProblemKind::Damage,
                    message: loss.to_string(),
                });
            }
        }
        // Damage to the write-ahead log that names no session.
        if let Some(message) = self.inner.store.log_damage() {
            report.problems.push(Problem {
                session: SessionId::from_bytes([0; 16]),
                seq: None,
                offset: None,
                kind: ProblemKind::Damage,
                message,
            });
        }
        Ok(report)
    }
}

fn verify_session(
    journal: &Journal,
    id: SessionId,
    report: &mut VerifyReport,
    progress: &mut impl FnMut(u64),
) -> Result<()> {
    let store = &journal.inner.store;
    let config = &journal.inner.config;
    let limit = config.max_event_bytes;
    let len = store.len(id)?.unwrap_or(0);
    let links = crate::session::chain::latest_links(journal, id);
    let mut state = SessionState::with_slices(&config.slices);
    let mut state_ok = true;
    // A fork that reads its parent's prefix: its own events come after it
    // (`session/fork.rs`), its state starts from the parent's.
    let base = crate::session::base_of(journal, id)?;
    let offset = base.map_or(0, |b| b.at + 1);
    let mut missing_parent = None;
    if let Some(b) = base {
        match journal.session(b.parent).and_then(|p| p.state_at(b.at)) {
            Ok(s) => state = s,
            Err(e) => {
                state_ok = false;
                missing_parent = Some(format!(
                    "this fork reads its first {} events from session {}: {e}",
                    b.at + 1,
                    b.parent
                ));
            }
        }
    }
    let mut expect = 0u64;
    let mut seen: HashSet<MessageId> = HashSet::new();
    let problem = |seq: Option<u64>, kind: ProblemKind, message: String| Problem {
        session: id,
        seq: seq.map(|s| s + offset),
        offset: None,
        kind,
        message,
    };
    let mut found: Vec<Problem> = Vec::new();
    let links = links.unwrap_or_else(|e| {
        // A snapshot file gone or cut short: harmless (the stream is
        // replayed), but reported.
        found.push(problem(
            None,
            ProblemKind::Snapshot,
            format!("snapshot unreadable: {e}"),
        ));
        Vec::new()
    });
    // Each link of the chain is checked at its seq: the state it gives
    // (the whole snapshot, then each delta on it) against the fold.
    let mut next_link = 0usize;
    let mut chained: Option<SessionState> = None;
    let mut checked = 0u64;
    if let Some(m) = missing_parent {
        found.push(problem(Some(0), ProblemKind::Damage, m));
    }
    store.scan_past_damage(id, 0, len, &mut |seq, frame| {
        if seq != expect {
            found.push(problem(
                Some(expect),
                ProblemKind::Damage,
                format!("events {expect}..{seq} are missing (a gap)"),
            ));
            state_ok = false;
        }
        expect = seq + 1;
        let decoded = frame
            .map_err(|e| e.to_string())
            .and_then(|f| format::decode_frame(f, limit).map_err(|e| e.to_string()));
        let env: Envelope = match decoded {
            Ok(env) => env,
            Err(e) => {
                found.push(problem(Some(seq), ProblemKind::Damage, e.to_string()));
                state_ok = false;
                return Ok(Visit::Continue(()));
            }
        };
        if env.session != id || env.seq != seq {
            found.push(problem(
                Some(seq),
                ProblemKind::Damage,
                format!("record belongs to session {} seq {}", env.session, env.seq),
            ));
            state_ok = false;
            return Ok(Visit::Continue(()));
        }
        match (&env.event, seq) {
            (Event::SessionOpened { .. }, 0) => {}
            (Event::ForkPoint { .. }, 0) if base.is_some() => {}
            (Event::ForkPoint { .. }, _) => found.push(problem(
                Some(seq),
                ProblemKind::Invariant,
                "ForkPoint after a fork's first event".into(),
            )),
            (_, 0) => found.push(problem(
                Some(0),
                ProblemKind::Invariant,
                format!("seq 0 is {}, not SessionOpened", env.event.kind()),
            )),
            (Event::SessionOpened { .. }, _) => found.push(problem(
                Some(seq),
                ProblemKind::Invariant,
                "SessionOpened after seq 0".into(),
            )),
            (Event::Message(m), _) if !seen.insert(m.message_id) => found.push(problem(
                Some(seq),
                ProblemKind::Invariant,
                format!(
                    "message {} appears twice (the fold keeps the first)",
                    m.message_id
                ),
            )),
            _ => {}
        }
        if state_ok {
            let mut env = env;
            env.seq += offset;
            state.apply_owned(env);
            if let Some((sseq, sframe)) = links.get(next_link)
                && *sseq == seq + offset
            {
                next_link += 1;
                checked += 1;
                let verdict = match chained.take() {
                    None => format::verify_frame(sframe)
                        .map_err(|e| e.to_string())
                        .and_then(|body| {
                            SessionState::decode_snapshot(
                                body,
                                &config.slices,
                                config.max_snapshot_bytes,
                            )
                            .map_err(|e| e.to_string())
                        }),
                    Some(mut s) => s
                        .apply_delta_frame(
                            sframe.clone(),
                            &config.slices,
                            config.max_snapshot_bytes,
                        )
                        .map(|()| s)
                        .map_err(|e| e.to_string()),
                };
                let what = if next_link == 1 {
                    "snapshot"
                } else {
                    "delta snapshot"
                };
                match verdict {
                    Ok(s) if s == state => chained = Some(s),
                    Ok(_) => found.push(problem(
                        Some(seq),
                        ProblemKind::Snapshot,
                        format!("{what} differs from the fold of its events"),
                    )),
                    Err(e) => found.push(problem(
                        Some(seq),
                        ProblemKind::Snapshot,
                        format!("{what} unreadable: {e}"),
                    )),
                }
                if chained.is_none() {
                    // The links after a bad one cannot be checked.
                    next_link = links.len();
                }
            }
        }
        progress(1);
        Ok(Visit::Continue(()))
    })?;
    if expect < len {
        // The scan ended before the stream's last key: sled lost part of
        // its tree.
        found.push(problem(
            Some(expect),
            ProblemKind::Damage,
            format!(
                "events {expect}..{len} are missing (the stream's last key is {})",
                len - 1
            ),
        ));
        state_ok = false;
    }
    if let Some((sseq, _)) = links.get(next_link)
        && state_ok
    {
        found.push(problem(
            Some(sseq.saturating_sub(offset)),
            ProblemKind::Snapshot,
            format!("snapshot at seq {sseq} is past the stream's end"),
        ));
    }
    report.sessions += 1;
    report.events += expect;
    report.snapshots += checked;
    report.problems.extend(found);
    Ok(())
}
