//! Sessions: append, read, fold, time travel, fork.

pub(crate) mod chain;
mod fork;
mod lease;
mod open;
mod read;
pub(crate) mod recorder;
mod replay;

pub(crate) use fork::{Base, base_of, missing_parent};
use replay::replay;

use std::ops::{Bound, Deref, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::event::{Envelope, Event};
use crate::format::{self, SharedBytes, TailDamage};
use crate::journal::{Journal, SessionInfo, SessionStatus};
use crate::model::{SessionId, now};
use crate::state::SessionState;
use crate::store::Loss;

/// What opening a session cost: how much was read from where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// The seq of the snapshot the state started from, if one was used.
    pub snapshot_seq: Option<u64>,
    /// Events read and folded after the snapshot (or from 0).
    pub events_replayed: u64,
    /// Why a snapshot that existed was not used, if it was not.
    pub snapshot_rejected: Option<String>,
    /// Delta snapshots applied on the whole one (see
    /// [`CheckpointStrategy::Incremental`](crate::CheckpointStrategy::Incremental)).
    pub snapshot_deltas: u32,
}

/// Deltas after which the next snapshot is whole again: a chain is read
/// back link by link when a session opens.
const MAX_DELTAS: u32 = 4096;

pub(crate) struct Core {
    /// Next seq (number of good events).
    head: u64,
    /// Shared with the readers' guards: an append copies it only while a
    /// guard taken before it is still alive (`Arc::make_mut`).
    state: Arc<SessionState>,
    last_snapshot: Option<u64>,
    last_snapshot_at: Option<Instant>,
    /// Bytes of the last snapshot frame written or read (0 if none).
    last_snapshot_len: usize,
    /// Deltas on the last whole snapshot (its chain's length, less one).
    chain: u32,
    /// A torn tail found at load, cut off at the next append.
    tail: Option<TailDamage>,
    /// Snapshots past the head were found at load (their events were lost
    /// or cut): dropped at the next append, before new events take their
    /// seqs.
    stale_snapshots: bool,
    load: LoadStats,
    checkpoint_error: Option<String>,
    /// The lease this handle's appends are made under, if it took one.
    lease: Option<crate::store::Lease>,
}

pub(crate) struct SessionShared {
    id: SessionId,
    /// For a fork that reads its parent's prefix: the parent and the fork
    /// point (`session/fork.rs`).
    base: Option<Base>,
    core: Mutex<Core>,
}

/// One event stream. Cheap to clone; clones share state. `Send + Sync`.
#[derive(Clone)]
pub struct Session {
    journal: Journal,
    pub(crate) shared: Arc<SessionShared>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("head", &self.head())
            .finish()
    }
}

/// Two handles are equal when they are handles of the same session.
impl PartialEq for Session {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Session {}

/// A read-only view of a session's folded state, as it was when taken.
///
/// Taking one costs O(1) and holds no lock, so any number may be alive at
/// once, on any thread (`session.state().x() + session.state().y()` is
/// fine), and appends never wait for one. An append made while a guard is
/// alive copies the state first (the guard keeps seeing the state it was
/// taken at), so drop guards before appending in a loop.
pub struct StateGuard<'a>(Arc<SessionState>, std::marker::PhantomData<&'a Session>);

impl Deref for StateGuard<'_> {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.0
    }
}

fn bounds(range: impl RangeBounds<u64>, len: u64) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&a) => a,
        Bound::Excluded(&a) => a.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&b) => b.saturating_add(1),
        Bound::Excluded(&b) => b,
        Bound::Unbounded => len,
    };
    (from, to)
}

impl Session {
    pub(crate) fn empty(journal: Journal, id: SessionId) -> Session {
        Self::empty_at(journal, id, None)
    }

    fn empty_at(journal: Journal, id: SessionId, base: Option<Base>) -> Session {
        let state = SessionState::with_slices(&journal.inner.config.slices);
        Session {
            journal,
            shared: Arc::new(SessionShared {
                id,
                base,
                core: Mutex::new(Core {
                    head: base.map_or(0, Base::offset),
                    state: Arc::new(state),
                    last_snapshot: None,
                    last_snapshot_at: None,
                    last_snapshot_len: 0,
                    chain: 0,
                    tail: None,
                    stale_snapshots: false,
                    load: LoadStats::default(),
                    checkpoint_error: None,
                    lease: None,
                }),
            }),
        }
    }

    pub(crate) fn from_shared(journal: Journal, shared: Arc<SessionShared>) -> Session {
        Session { journal, shared }
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        self.shared.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads a session from the store: snapshot, then the verified tail. A
    /// fork without a snapshot of its own starts from its parent's state at
    /// the fork point.
    pub(crate) fn load(journal: Journal, id: SessionId) -> Result<Session> {
        let store = journal.inner.store.clone();
        let len = store.len(id)?.ok_or(Error::SessionNotFound(id))?;
        let base = base_of(&journal, id)?;
        let offset = base.map_or(0, Base::offset);
        let session = Session::empty_at(journal, id, base);
        {
            let mut core = session.core();
            let mut from = 0;
            // A snapshot that cannot be read (a file of the store gone or
            // cut short) is rejected like one that cannot be decoded; a
            // chain is used up to its last good link.
            let found = chain::read_chain(&session.journal, id, offset, len + offset, len + offset);
            core.load.snapshot_rejected = found.rejected;
            core.stale_snapshots = found.past_end;
            if let Some((mut state, seq)) = found.state {
                if session.deltas() {
                    // Changes from here on go into the next delta.
                    state.mark(seq);
                }
                core.last_snapshot_len = found.last_len;
                core.chain = found.deltas;
                core.state = Arc::new(state);
                core.last_snapshot = Some(seq);
                core.load.snapshot_seq = Some(seq);
                core.load.snapshot_deltas = found.deltas;
                from = seq + 1 - offset;
            }
            if from == 0
                && let Some(b) = base
            {
                core.state = Arc::new(session.prefix_state(b)?);
            }
            let core = &mut *core;
            let (head, tail) = replay(
                &session.journal,
                id,
                from,
                len,
                Arc::make_mut(&mut core.state),
                &mut core.load.events_replayed,
                offset,
            )?;
            core.head = head + offset;
            core.tail = with_loss(tail, head, store.losses().iter().find(|l| l.session == id)).map(
                |mut t| {
                    t.start += offset;
                    t
                },
            );
        }
        Ok(session)
    }

    /// A fork's state before its own events: its parent's at the fork
    /// point (the fork's marker, folded next, names the origin).
    fn prefix_state(&self, b: Base) -> Result<SessionState> {
        let parent = self.journal.session(b.parent).map_err(|e| match e {
            Error::SessionNotFound(_) => missing_parent(self.id(), b.parent),
            other => other,
        })?;
        parent.state_at(b.at)
    }

    /// Where the session's own stored events start in its seqs: 0, or for a
    /// fork that reads its parent's prefix, the seq after that prefix.
    pub(crate) fn offset(&self) -> u64 {
        self.shared.base.map_or(0, Base::offset)
    }

    /// The session's id.
    pub fn id(&self) -> SessionId {
        self.shared.id
    }

    /// The journal this session belongs to.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The number of events in the stream: the seq the next event will get.
    pub fn head(&self) -> u64 {
        self.core().head
    }

    /// The damaged tail found when the session was opened, if any. It is
    /// not part of the stream and is cut off by the next append.
    pub fn torn_tail(&self) -> Option<TailDamage> {
        self.core().tail.clone()
    }

    /// What opening this session read.
    pub fn load_stats(&self) -> LoadStats {
        self.core().load.clone()
    }

    /// The error of the last failed automatic checkpoint, if any (snapshots
    /// are a cache: a failed one loses nothing).
    pub fn checkpoint_error(&self) -> Option<String> {
        self.core().checkpoint_error.clone()
    }

    /// Appends one event and returns its seq. Durable as configured
    /// ([`JournalConfig::durability`](crate::JournalConfig::durability)) when it returns.
    ///
    /// # Errors
    /// [`Error::TooLarge`] (nothing written), [`Error::Poisoned`] after a
    /// failed flush, [`Error::Io`].
    pub fn append(&self, event: Event) -> Result<u64> {
        self.append_batch(vec![event]).map(|(first, _)| first)
    }

    /// Appends one event only if the stream's next seq is `expected`
    /// (optimistic concurrency).
    ///
    /// # Errors
    /// [`Error::Conflict`] when another writer appended first; nothing is written.
    pub fn append_expected(&self, expected: u64, event: Event) -> Result<u64> {
        self.append_batch_at(expected, vec![event])
            .map(|(first, _)| first)
    }

    /// Appends events atomically (all or none); returns the seqs of the first
    /// and of the last. An empty batch appends nothing.
    pub fn append_batch(&self, events: Vec<Event>) -> Result<(u64, u64)> {
        self.append_inner(None, events)
    }

    /// [`Session::append_batch`] with an expected next seq.
    pub fn append_batch_at(&self, expected: u64, events: Vec<Event>) -> Result<(u64, u64)> {
        self.append_inner(Some(expected), events)
    }

    /// Appends under the session's lock, held until the events are durable
    /// at the journal's [`Durability`](crate::Durability): only then do they
    /// enter the head and the state, so no reader (in this thread or
    /// another) sees an event before its append has returned `Ok`, and an
    /// append whose write or sync failed leaves the head and the state as
    /// they were (the journal is then poisoned: the events may or may not
    /// be on disk, as a tool call in doubt). Appends to other sessions share
    /// the sync meanwhile (group commit).
    fn append_inner(&self, expected: Option<u64>, events: Vec<Event>) -> Result<(u64, u64)> {
        let inner = &self.journal.inner;
        let id = self.id();
        inner.poison.check()?;
        let (first, last) = {
            let mut core = self.core();
            if let Some(e) = expected
                && e != core.head
            {
                return Err(Error::Conflict {
                    session: id,
                    expected: e,
                    found: core.head,
                });
            }
            let first = core.head;
            if events.is_empty() {
                return Ok((first, first));
            }
            let at = now();
            // Stored at their seq in the session's own stream (a fork's
            // start after its parent's prefix, `fork.rs`).
            let offset = self.offset();
            let stored = first - offset;
            let mut envelopes: Vec<Envelope> = events
                .into_iter()
                .enumerate()
                .map(|(i, event)| Envelope {
                    session: id,
                    seq: stored + i as u64,
                    at,
                    event,
                })
                .collect();
            let frames = envelopes
                .iter()
                .map(|e| format::encode_frame(e, inner.config.max_event_bytes))
                .collect::<Result<Vec<_>>>()?;
            let written = inner.write(|store| {
                if core.tail.is_some() {
                    // The torn tail found at load is not part of the stream:
                    // cut it off before writing over its seqs.
                    store.truncate(id, stored)?;
                    core.tail = None;
                    core.stale_snapshots = true;
                }
                if core.stale_snapshots {
                    // Snapshots that counted events no longer there (their
                    // seqs are as read) would be taken for the new ones'.
                    store.drop_snapshots_from(id, first)?;
                    core.stale_snapshots = false;
                }
                store.append_leased(id, stored, &frames, core.lease.as_ref())
            });
            match written {
                Ok(()) => {}
                Err(Error::Conflict { found, .. }) => {
                    // Another writer (another process on a shared store) got
                    // there first: catch up so the next attempt sees its events.
                    let (head, _) = replay(
                        &self.journal,
                        id,
                        stored,
                        found,
                        Arc::make_mut(&mut core.state),
                        &mut 0,
                        offset,
                    )?;
                    core.head = head + offset;
                    return Err(Error::Conflict {
                        session: id,
                        expected: first,
                        found: found + offset,
                    });
                }
                Err(e) => return Err(e),
            }
            inner.flush_configured()?;
            let head = first + envelopes.len() as u64;
            if let Some(env) = envelopes.last_mut() {
                env.seq += offset;
            }
            let strategy = inner
                .config
                .checkpoint
                .for_store(inner.store.keeps_snapshot_chains());
            let checkpoint = envelopes.last().is_some_and(|env| {
                strategy.should_checkpoint(core.last_snapshot, core.last_snapshot_at, env)
            });
            if let Some(env) = envelopes.last_mut() {
                env.seq -= offset;
            }
            // The events move into the state: no message is cloned. The head
            // moves last: a reducer that panicked would leave the head
            // before these events, and the next append (a `Conflict` with
            // the store) would replay them.
            let state = Arc::make_mut(&mut core.state);
            for (mut env, frame) in envelopes.drain(..).zip(frames) {
                env.seq += offset;
                // A message is kept as the bytes of its frame, as a replay
                // keeps it (a decoded message takes about twice its frame's
                // memory); decoded again on first access.
                if matches!(env.event, Event::Message(_)) {
                    let frame = SharedBytes::new(frame.into_boxed_slice());
                    let body = frame.get(format::FRAME_HEADER_LEN..).unwrap_or_default();
                    if let Some(start) = format::message::message_start(body) {
                        state.apply_framed(env, &frame, format::FRAME_HEADER_LEN + start);
                        continue;
                    }
                }
                state.apply_owned(env);
            }
            core.head = head;
            let last = head - 1;
            if checkpoint && let Err(e) = self.write_snapshot(&mut core) {
                core.checkpoint_error = Some(e.to_string());
            }
            (first, last)
        };
        if let Some(hook) = &inner.config.after_append {
            hook(id, first, last);
        }
        Ok((first, last))
    }

    fn write_snapshot(&self, core: &mut Core) -> Result<Option<u64>> {
        if core.head == 0 || self.journal.is_read_only() {
            return Ok(None);
        }
        // A snapshot is a cache: its failure poisons nothing, but nothing is
        // written after a failed write.
        self.journal.inner.poison.check()?;
        let seq = core.head - 1;
        if core.last_snapshot == Some(seq) {
            // Nothing was appended since: the snapshot there is this state
            // (and a delta on itself would break its chain).
            return Ok(Some(seq));
        }
        let config = &self.journal.inner.config;
        let store = &self.journal.inner.store;
        let deltas = self.deltas();
        // A delta on the last snapshot if the state recorded its changes
        // since that one, and the chain is not too long to read back.
        let delta = deltas
            && core.last_snapshot.is_some()
            && core.state.marks.at == core.last_snapshot
            && core.chain < MAX_DELTAS;
        // Room for twice the last snapshot (the geometric strategy's next):
        // growing a buffer of hundreds of MiB by doubling copies it as often.
        let capacity = core.last_snapshot_len.saturating_mul(2);
        if delta {
            let frame = core
                .state
                .encode_delta_frame(config.max_snapshot_bytes, capacity)?;
            core.last_snapshot_len = frame.len();
            store.add_snapshot(self.id(), seq, frame)?;
            core.chain += 1;
        } else {
            let frame = core
                .state
                .encode_snapshot_frame(config.max_snapshot_bytes, capacity)?;
            core.last_snapshot_len = frame.len();
            store.put_snapshot(self.id(), seq, frame)?;
            core.chain = 0;
        }
        if deltas {
            Arc::make_mut(&mut core.state).mark(seq);
        }
        core.last_snapshot = Some(seq);
        core.last_snapshot_at = Some(Instant::now());
        core.checkpoint_error = None;
        Ok(Some(seq))
    }

    /// True if this session's snapshots after the first are deltas: the
    /// `Incremental` strategy, in a store that keeps chains of snapshots.
    fn deltas(&self) -> bool {
        let inner = &self.journal.inner;
        inner.config.checkpoint.is_incremental() && inner.store.keeps_snapshot_chains()
    }

    /// Writes a snapshot of the current state now (the `OnDemand` strategy)
    /// and returns the seq it covers (`None` for an empty or read-only session).
    /// With the `Incremental` strategy it is a delta on the last one.
    pub fn snapshot(&self) -> Result<Option<u64>> {
        let mut core = self.core();
        self.write_snapshot(&mut core)
    }

    /// The folded state after the last event. O(1): it is kept folded.
    pub fn state(&self) -> StateGuard<'_> {
        StateGuard(self.core().state.clone(), std::marker::PhantomData)
    }

    /// A copy of the folded state.
    pub fn state_cloned(&self) -> SessionState {
        let state = self.core().state.clone();
        (*state).clone()
    }

    /// A new session that branches from this one after event `at`. It
    /// refers to this session's events `0..=at` instead of copying them
    /// (same seqs and times), then holds `ForkPoint { parent, at }` at seq
    /// `at + 1` and its own events: making it writes one event, and its
    /// state is `state_at(at)` plus the fork origin. This session cannot be
    /// deleted while the fork exists. See [`Journal::fork_session`].
    ///
    /// # Errors
    /// [`Error::SeqOutOfRange`] if `at` is past the head.
    pub fn fork(&self, at: u64) -> Result<Session> {
        let head = self.head();
        if at >= head {
            return Err(Error::SeqOutOfRange {
                session: self.id(),
                seq: at,
                len: head,
            });
        }
        let id = self.journal.fork_session(self.id(), at)?;
        self.journal.session(id)
    }

    /// A summary: created, last activity, number of events, status.
    pub fn info(&self) -> Result<SessionInfo> {
        let head = self.head();
        // A fork was made when its marker was, after its parent's prefix.
        let offset = self.offset();
        let first = self.events(offset..(offset + 1).min(head))?;
        let last = if head > 1 {
            self.events(head - 1..head)?
        } else {
            first.clone()
        };
        let created = first.first().map(|e| e.at).unwrap_or_else(now);
        let last_activity = last.first().map(|e| e.at).unwrap_or(created);
        let state = self.state();
        let log = state.conversation_log();
        let status = match state.evaluations().latest() {
            // A conversation: unfinished while a turn is left running.
            _ if log.unfinished().next().is_some() => SessionStatus::Unfinished,
            _ if log.is_conversation() && !log.turns().is_empty() => SessionStatus::Finished,
            None => SessionStatus::Idle,
            Some(e) if e.outcome.is_some() => SessionStatus::Finished,
            Some(_) => SessionStatus::Unfinished,
        };
        Ok(SessionInfo {
            id: self.id(),
            created,
            last_activity,
            events: head,
            labels: state.labels().to_vec(),
            forked_from: state.forked_from(),
            status,
        })
    }
}

/// The public handles are `Send + Sync` (checked at compile time).
fn _assert_send_sync<T: Send + Sync>() {}
#[allow(dead_code)]
fn _assert_handles_are_send_sync() {
    _assert_send_sync::<Journal>();
    _assert_send_sync::<Session>();
}

/// The damaged tail a session opens with, extended by the acknowledged
/// events the store lost after it (or after `head`, without a torn tail):
/// reported like a torn tail, and cut off at the next append.
fn with_loss(tail: Option<TailDamage>, head: u64, loss: Option<&Loss>) -> Option<TailDamage> {
    let Some(loss) = loss.filter(|l| l.acknowledged > head) else {
        return tail;
    };
    Some(match tail {
        Some(t) => TailDamage::events(
            t.start,
            loss.acknowledged - t.start,
            format!("{}; {loss}", t.reason),
        ),
        None => TailDamage::events(head, loss.acknowledged - head, loss.to_string()),
    })
}
