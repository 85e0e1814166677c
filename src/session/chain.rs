//! A session's chain of snapshots read back: the whole snapshot it starts
//! from, then each delta on it (`state/delta.rs`), up to the latest one
//! before a seq. A link that cannot be read or applied ends the chain
//! before it: the events after the last good link are replayed instead.

use crate::format::SharedBytes;
use crate::journal::Journal;
use crate::model::SessionId;
use crate::session::replay::decode_snapshot;
use crate::state::SessionState;
use crate::state::delta::builds_on;

/// A chain read back.
pub(crate) struct Chain {
    /// The state at the last good link, and that link's seq.
    pub(crate) state: Option<(SessionState, u64)>,
    /// Bytes of the last good link's frame.
    pub(crate) last_len: usize,
    /// Deltas applied on the whole snapshot.
    pub(crate) deltas: u32,
    /// Why a later snapshot was not used, if one was not.
    pub(crate) rejected: Option<String>,
    /// A snapshot is kept at `below` or later: past the stream's end (its
    /// events were lost or cut), and wrong once the stream grows past it.
    pub(crate) past_end: bool,
}

/// The links of the chain ending at the snapshot taken after `top`, from
/// its whole snapshot on; `Err((seq, why))` names the first link (from
/// `top` down) that cannot be read.
fn links(
    journal: &Journal,
    id: SessionId,
    top: u64,
    min: u64,
) -> Result<Vec<(u64, SharedBytes)>, (u64, String)> {
    let store = &journal.inner.store;
    let mut out = Vec::new();
    let mut at = top;
    loop {
        let frame = match store.snapshot_at(id, at) {
            Ok(Some(f)) => f,
            Ok(None) => return Err((at, format!("snapshot at seq {at} is missing"))),
            Err(e) => return Err((at, e.to_string())),
        };
        let prev = builds_on(&frame).map_err(|e| (at, e.to_string()))?;
        out.push((at, frame));
        match prev {
            None => break,
            Some(p) if p < at && p >= min => at = p,
            Some(p) => {
                return Err((
                    at,
                    format!("snapshot at seq {at} builds on seq {p}, outside its chain"),
                ));
            }
        }
    }
    out.reverse();
    Ok(out)
}

/// The state at the first `n` links of `links`, or why link `n - 1`
/// could not be applied (with how many applied).
fn apply(
    journal: &Journal,
    links: &[(u64, SharedBytes)],
    len: u64,
) -> Result<SessionState, (usize, String)> {
    let config = &journal.inner.config;
    let mut state = None;
    for (i, (seq, frame)) in links.iter().enumerate() {
        let next = match state.take() {
            None => decode_snapshot(frame.clone(), *seq, len, config),
            Some(mut s) => {
                let applied: Result<(), String> = SessionState::apply_delta_frame(
                    &mut s,
                    frame.clone(),
                    &config.slices,
                    config.max_snapshot_bytes,
                )
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    if s.last_seq() == Some(*seq) {
                        Ok(())
                    } else {
                        Err(format!(
                            "snapshot claims seq {:?} but is stored at {seq}",
                            s.last_seq()
                        ))
                    }
                });
                applied.map(|()| s)
            }
        };
        match next {
            Ok(s) => state = Some(s),
            Err(why) => return Err((i, why)),
        }
    }
    state.ok_or((0, "no snapshot".into()))
}

/// The state at the latest snapshot of `id` taken after a seq in
/// `min..below`, read from its chain; `len` is the stream's length (seqs
/// as the session counts them).
pub(crate) fn read_chain(
    journal: &Journal,
    id: SessionId,
    min: u64,
    below: u64,
    len: u64,
) -> Chain {
    let mut chain = Chain {
        state: None,
        last_len: 0,
        deltas: 0,
        rejected: None,
        past_end: false,
    };
    let mut seqs = match journal.inner.store.snapshot_seqs(id) {
        Ok(s) => s,
        Err(e) => {
            chain.rejected = Some(e.to_string());
            return chain;
        }
    };
    if let Some(&s) = seqs.last()
        && s < min
    {
        // Inside a fork's prefix: not a snapshot of the fork's own.
        chain.rejected = Some(format!("snapshot at seq {s} is inside the fork's prefix"));
    }
    chain.past_end = seqs.last().is_some_and(|s| *s >= below);
    seqs.retain(|s| (min..below).contains(s));
    // From the latest down: a chain that cannot be read at some link is
    // tried again below that link.
    while let Some(&top) = seqs.last() {
        let found = links(journal, id, top, min).and_then(|links| {
            match apply(journal, &links, len) {
                Ok(s) => Ok((s, links)),
                Err((0, why)) => Err((links[0].0, why)),
                Err((n, why)) => {
                    // Up to the link before the one that failed.
                    chain.rejected.get_or_insert(why);
                    let good = &links[..n];
                    apply(journal, good, len)
                        .map(|s| (s, good.to_vec()))
                        .map_err(|(_, why)| (good[0].0, why))
                }
            }
        });
        match found {
            Ok((state, links)) => {
                let (seq, frame) = links.last().expect("a link");
                chain.last_len = frame.len();
                chain.deltas = links.len().saturating_sub(1) as u32;
                chain.state = Some((state, *seq));
                return chain;
            }
            Err((at, why)) => {
                chain.rejected.get_or_insert(why);
                seqs.retain(|s| *s < at);
            }
        }
    }
    chain
}

/// The chain of the session's latest snapshot, from its whole one on
/// (empty without a snapshot), for `verify`.
///
/// # Errors
/// Why a link cannot be read.
pub(crate) fn latest_links(
    journal: &Journal,
    id: SessionId,
) -> Result<Vec<(u64, SharedBytes)>, String> {
    let seqs = journal
        .inner
        .store
        .snapshot_seqs(id)
        .map_err(|e| e.to_string())?;
    match seqs.last() {
        None => Ok(Vec::new()),
        Some(&top) => links(journal, id, top, 0).map_err(|(_, why)| why),
    }
}
