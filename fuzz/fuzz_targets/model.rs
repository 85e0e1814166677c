//! Model-based fuzzing of the engine: a sequence of operations (append,
//! append batch, snapshot, reopen, fork, select, new session, state_at,
//! resume plan) is applied to a sled-backed `Journal` and to a plain model
//! (a `Vec<Event>` per session), and after every step the two are compared:
//!
//! - `head()` is the model's length, `events(..)` are the model's events
//!   with seqs 0..n and the session's id;
//! - `*state()` is the fold of `events(..)`, and `state_at(seq)` the fold of
//!   the prefix `0..=seq`;
//! - after a reopen every session loads (using its snapshot) to the state it
//!   had before, and no snapshot is rejected;
//! - a fork reads its parent's events `0..=at` as they are (their session,
//!   seqs and times), then holds `ForkPoint { parent, at }` and its own
//!   events, and its state says it was forked from its parent at `at`;
//! - `resume_plan()` exists iff an evaluation was started, and is
//!   consistent with the state.
//!
//! The journal is opened with `Durability::Buffered` and
//! `CheckpointStrategy::EveryEvents(1..=4)`, so snapshots are frequent.
#![no_main]

use agent_journal::{
    CheckpointStrategy, Durability, Envelope, Error, Event, Journal, JournalConfig, Session,
    SessionId, ToolStatus,
};
use arbitrary::{Arbitrary, Unstructured};
use fuzz_common::{Batch, SmallEvent, SmallStr, fold, scratch_dir};
use libfuzzer_sys::fuzz_target;

/// At most this many operations per input.
const MAX_OPS: usize = 64;
/// At most this many reopens per input (opening sled costs milliseconds).
const MAX_REOPENS: usize = 3;

#[derive(Debug)]
struct Input {
    checkpoint_every: u8,
    ops: Vec<Op>,
}

/// Operations until the data runs out (not `Vec`'s one continuation bit per
/// element, which makes long sequences rare).
impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let checkpoint_every = u.arbitrary()?;
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < MAX_OPS {
            ops.push(u.arbitrary()?);
        }
        Ok(Input {
            checkpoint_every,
            ops,
        })
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Append(SmallEvent),
    AppendBatch(Batch),
    Snapshot,
    Reopen,
    Fork(u8),
    Select(u8),
    NewSession(Vec<(SmallStr, SmallStr)>),
    StateAt(u8),
    ResumePlan,
}

/// The event, except that `SessionOpened` and `ForkPoint` become `Custom`:
/// those are written by `create_session` and `fork` only (design, section 4),
/// and the model checks what the engine itself writes.
fn appendable(e: &SmallEvent) -> Event {
    match e.to_event() {
        Event::SessionOpened { .. } => Event::Custom {
            kind: "opened".into(),
            payload: Vec::new(),
        },
        Event::ForkPoint { at, .. } => Event::Custom {
            kind: "forked".into(),
            payload: at.to_le_bytes().to_vec(),
        },
        other => other,
    }
}

struct World {
    dir: tempfile::TempDir,
    config: JournalConfig,
    journal: Option<Journal>,
    /// Engine handles, same order as `model`.
    handles: Vec<Session>,
    /// The model: each session's id and events.
    model: Vec<(SessionId, Vec<Event>)>,
    /// The session each event's envelope names (a fork's prefix is its
    /// ancestors').
    owners: Vec<Vec<SessionId>>,
    cur: usize,
}

impl World {
    fn journal(&self) -> &Journal {
        self.journal.as_ref().expect("open")
    }

    fn open(&mut self) {
        let j = Journal::open_with(self.dir.path().join("db"), self.config.clone())
            .unwrap_or_else(|e| panic!("reopen failed: {e}"));
        self.journal = Some(j);
    }

    fn add(&mut self, session: Session, events: Vec<Event>, prefix: Vec<SessionId>) {
        let mut owners = prefix;
        owners.resize(events.len(), session.id());
        self.owners.push(owners);
        self.model.push((session.id(), events));
        self.handles.push(session);
        self.cur = self.handles.len() - 1;
        self.check(self.cur);
    }

    /// Compares session `i` with the model; returns its envelopes.
    fn check(&self, i: usize) -> Vec<Envelope> {
        let (id, events) = &self.model[i];
        let h = &self.handles[i];
        assert_eq!(h.id(), *id);
        assert_eq!(h.head(), events.len() as u64, "head != model length");
        let envs = h.events(..).unwrap_or_else(|e| panic!("events(..): {e}"));
        assert_eq!(envs.len(), events.len(), "events(..) length");
        for (seq, (env, event)) in envs.iter().zip(events).enumerate() {
            assert_eq!(env.seq, seq as u64, "seq");
            assert_eq!(env.session, self.owners[i][seq], "session of an envelope");
            assert_eq!(
                &env.event, event,
                "event at seq {seq} differs from the model"
            );
        }
        let folded = fold(&envs);
        assert!(*h.state() == folded, "state() != fold(events(..))");
        assert_eq!(h.torn_tail(), None, "torn tail on a healthy journal");
        assert_eq!(h.checkpoint_error(), None, "a checkpoint failed");
        envs
    }

    fn reopen(&mut self) {
        let before: Vec<_> = self.handles.iter().map(Session::state_cloned).collect();
        self.handles.clear();
        self.journal = None;
        self.open();
        let mut stored = self.journal().sessions().expect("sessions");
        stored.sort();
        let mut expected: Vec<_> = self.model.iter().map(|(id, _)| *id).collect();
        expected.sort();
        assert_eq!(stored, expected, "sessions after reopen");
        for (i, state) in before.into_iter().enumerate() {
            let h = self
                .journal()
                .session(self.model[i].0)
                .unwrap_or_else(|e| panic!("session after reopen: {e}"));
            let stats = h.load_stats();
            assert_eq!(
                stats.snapshot_rejected, None,
                "a snapshot we wrote was rejected"
            );
            assert!(
                h.state_cloned() == state,
                "state after reopen != state before"
            );
            self.handles.push(h);
            self.check(i);
        }
    }

    fn apply(&mut self, op: Op, reopens: &mut usize) {
        match op {
            Op::Append(e) => {
                let event = appendable(&e);
                let h = &self.handles[self.cur];
                let seq = h.append(event.clone()).expect("append");
                assert_eq!(seq, self.model[self.cur].1.len() as u64, "append's seq");
                self.model[self.cur].1.push(event);
                let id = self.model[self.cur].0;
                self.owners[self.cur].push(id);
            }
            Op::AppendBatch(Batch(es)) => {
                let events: Vec<Event> = es.iter().map(appendable).collect();
                let n = events.len() as u64;
                let head = self.model[self.cur].1.len() as u64;
                let (first, last) = self.handles[self.cur]
                    .append_batch(events.clone())
                    .expect("append_batch");
                assert_eq!(first, head, "first seq of a batch");
                assert_eq!(
                    last,
                    if n == 0 { head } else { head + n - 1 },
                    "last seq of a batch"
                );
                self.model[self.cur].1.extend(events);
                let id = self.model[self.cur].0;
                let n = self.model[self.cur].1.len();
                self.owners[self.cur].resize(n, id);
            }
            Op::Snapshot => {
                let head = self.model[self.cur].1.len() as u64;
                let s = self.handles[self.cur].snapshot().expect("snapshot");
                assert_eq!(s, Some(head - 1), "snapshot covers the head");
            }
            Op::Reopen => {
                if *reopens < MAX_REOPENS {
                    *reopens += 1;
                    self.reopen();
                }
            }
            Op::Fork(at) => {
                let (parent, events) = &self.model[self.cur];
                let at = u64::from(at) % events.len() as u64;
                self.check(self.cur);
                let parent = *parent;
                let mut forked: Vec<Event> = events[..=at as usize].to_vec();
                forked.push(Event::ForkPoint { parent, at });
                let prefix = self.owners[self.cur][..=at as usize].to_vec();
                let h = self.handles[self.cur].fork(at).expect("fork");
                self.add(h, forked, prefix);
                let state = self.handles[self.cur].state_cloned();
                assert_eq!(
                    state.forked_from(),
                    Some((parent, at)),
                    "a fork's state does not name the session and seq it was forked from"
                );
            }
            Op::Select(i) => self.cur = usize::from(i) % self.handles.len(),
            Op::NewSession(labels) => {
                let labels: Vec<(String, String)> = labels
                    .into_iter()
                    .take(3)
                    .map(|(k, v)| (k.0, v.0))
                    .collect();
                let h = self
                    .journal()
                    .create_session_with_labels(labels.clone())
                    .expect("create_session");
                self.add(h, vec![Event::SessionOpened { labels }], Vec::new());
            }
            Op::StateAt(x) => {
                let envs = self.check(self.cur);
                let h = &self.handles[self.cur];
                let head = envs.len() as u64;
                let seq = u64::from(x) % head;
                let s = h.state_at(seq).expect("state_at");
                assert!(
                    s == fold(&envs[..=seq as usize]),
                    "state_at({seq}) != fold(0..={seq})"
                );
                assert!(
                    matches!(h.state_at(head), Err(Error::SeqOutOfRange { .. })),
                    "state_at(head) must be out of range"
                );
            }
            Op::ResumePlan => {
                let h = &self.handles[self.cur];
                let state = h.state_cloned();
                match (h.resume_plan(), state.evaluations().latest()) {
                    (Err(Error::ConversationNotFound(_)), None) => {}
                    (Ok(plan), Some(latest)) => {
                        assert_eq!(plan.evaluation_id, latest.evaluation_id);
                        assert_eq!(Some(plan.crash_point), state.last_seq());
                        let seqs: Vec<u64> = plan.messages.iter().map(|m| m.sequence).collect();
                        assert!(
                            seqs.windows(2).all(|w| w[0] <= w[1]),
                            "messages out of sequence order"
                        );
                        assert_eq!(plan.next_sequence, seqs.last().map_or(0, |s| s + 1));
                        assert!(plan.pending.iter().all(|c| c.status == ToolStatus::Pending));
                        assert!(
                            plan.in_doubt
                                .iter()
                                .all(|c| c.status == ToolStatus::Started)
                        );
                    }
                    (plan, latest) => {
                        panic!("resume_plan {plan:?} with latest evaluation {latest:?}")
                    }
                }
            }
        }
        self.check(self.cur);
    }
}

fuzz_target!(|input: Input| {
    let config = JournalConfig {
        durability: Durability::Buffered,
        checkpoint: CheckpointStrategy::EveryEvents(1 + u64::from(input.checkpoint_every % 4)),
        cache_bytes: 4 << 20,
        ..JournalConfig::default()
    };
    let mut w = World {
        dir: scratch_dir(),
        config,
        journal: None,
        handles: Vec::new(),
        model: Vec::new(),
        owners: Vec::new(),
        cur: 0,
    };
    w.open();
    let first = w.journal().create_session().expect("create_session");
    w.add(first, vec![Event::SessionOpened { labels: Vec::new() }], Vec::new());
    let mut reopens = 0;
    for op in input.ops.into_iter().take(MAX_OPS) {
        w.apply(op, &mut reopens);
    }
    // Last: everything survives a final reopen.
    w.reopen();
});
