//! Reading a stream back: frame checks, snapshot decoding, replay with
//! torn-tail detection.

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format;
use crate::format::TailDamage;
use crate::journal::Journal;
use crate::model::SessionId;
use crate::state::{SessionState, peek_message};
use crate::store::Visit;

/// Decodes a snapshot frame; `Err(reason)` if it cannot be used.
pub(crate) fn decode_snapshot(
    frame: crate::format::SharedBytes,
    seq: u64,
    len: u64,
    config: &crate::journal::JournalConfig,
) -> std::result::Result<SessionState, String> {
    if seq >= len {
        return Err(format!(
            "snapshot at seq {seq} is past the stream's head {len}"
        ));
    }
    // Message bodies stay in this buffer, decoded on first access.
    let state =
        SessionState::decode_snapshot_frame(frame, &config.slices, config.max_snapshot_bytes)
            .map_err(|e| e.to_string())?;
    if state.last_seq() != Some(seq) {
        return Err(format!(
            "snapshot claims seq {:?} but is stored at {seq}",
            state.last_seq()
        ));
    }
    Ok(state)
}

/// Event `seq` of `id` is missing: a gap.
fn gap(id: SessionId, seq: u64) -> Error {
    Error::corruption(
        Some(id),
        Some(seq),
        None,
        "event missing from the stream (a gap)",
    )
}

/// The record stored as event `seq` of `id` says it is `env`'s place.
fn misplaced(id: SessionId, seq: u64, env: &Envelope) -> Error {
    Error::corruption(
        Some(id),
        Some(seq),
        None,
        format!("record belongs to session {} seq {}", env.session, env.seq),
    )
}

pub(crate) fn check_frame(
    id: SessionId,
    seq: u64,
    expect: u64,
    frame: &[u8],
    limit: u64,
) -> Result<Envelope> {
    if seq != expect {
        return Err(gap(id, expect));
    }
    let env: Envelope = format::decode_frame(frame, limit)
        .map_err(|e| Error::corruption(Some(id), Some(seq), None, e.to_string()))?;
    if env.session != id || env.seq != seq {
        return Err(misplaced(id, seq, &env));
    }
    Ok(env)
}

/// Replays frames `from..to` (stored seqs) into `state`, verifying each;
/// each event is folded at its stored seq plus `offset` (a fork's own
/// events come after its parent's prefix, `session/fork.rs`). Returns the
/// new head (a stored seq) and, if the stream ends in damaged frames, the
/// torn tail (at stored seqs).
///
/// Only frames that fail their own checks (truncated, checksum, undecodable)
/// at the very end can be a torn tail: the crash point of a write. A missing
/// seq (a gap), a record that belongs to another place, an unknown format
/// version (a newer build may have written it), or a damaged frame followed
/// by a readable one is [`Error::Corruption`] at the first seq in question,
/// never cut off and never skipped.
pub(crate) fn replay(
    journal: &Journal,
    id: SessionId,
    from: u64,
    to: u64,
    state: &mut SessionState,
    count: &mut u64,
    offset: u64,
) -> Result<(u64, Option<TailDamage>)> {
    let limit = journal.inner.config.max_event_bytes;
    let mut expect = from;
    let mut bad: Option<(u64, String)> = None;
    let mut bad_count = 0u64;
    journal.scan_frames_shared(id, from, to, &mut |seq, shared| {
        let frame: &[u8] = &shared;
        let next = expect + bad_count;
        if seq != next {
            return Err(gap(id, next));
        }
        if let Some((bseq, reason)) = &bad {
            // Anything after a damaged frame: if it is readable, the damage
            // was not a torn tail.
            if format::decode_frame::<Envelope>(frame, limit).is_ok() {
                return Err(Error::corruption(
                    Some(id),
                    Some(*bseq),
                    None,
                    reason.clone(),
                ));
            }
            bad_count += 1;
            return Ok(Visit::Continue(()));
        }
        // A plain message (most events) is checked and kept as its bytes,
        // not decoded: the state decodes it on first access.
        if offset == 0
            && let Ok(body) = format::verify_frame(frame)
            && body.len() as u64 <= limit
            && let Some(m) = peek_message(body)
            && m.session == id
            && m.seq == seq
            && state.fold_plain_message(&m, Some((&shared, format::FRAME_HEADER_LEN)))
        {
            *count += 1;
            expect += 1;
            return Ok(Visit::Continue(()));
        }
        let env: Envelope = match format::decode_frame(frame, limit) {
            Ok(env) => env,
            Err(format::FrameError::UnknownVersion(v)) => {
                return Err(Error::corruption(
                    Some(id),
                    Some(seq),
                    None,
                    format!("unknown frame version {v}: written by a newer build? (not cut off)"),
                ));
            }
            Err(e) => {
                bad = Some((seq, e.to_string()));
                bad_count += 1;
                return Ok(Visit::Continue(()));
            }
        };
        if env.session != id || env.seq != seq {
            return Err(misplaced(id, seq, &env));
        }
        // A message (one with tool calls, or one a plain fold left to the
        // decode) is kept as the bytes of its frame all the same: decoded
        // messages would take twice the memory of the frames they came in.
        // (Its bytes hold no seq: a fork's offset changes nothing in them.)
        let mut env = env;
        env.seq += offset;
        match format::message::message_start(&frame[format::FRAME_HEADER_LEN..]) {
            Some(start) => state.apply_framed(env, &shared, format::FRAME_HEADER_LEN + start),
            None => state.apply_owned(env),
        }
        *count += 1;
        expect += 1;
        Ok(Visit::Continue(()))
    })?;
    // The store's scan ended before the stream's last key (sled lost part
    // of its tree): the events in between are missing, not cut off.
    if expect + bad_count < to {
        return Err(gap(id, expect + bad_count));
    }
    let tail = bad.map(|(from_seq, reason)| TailDamage::events(from_seq, bad_count, reason));
    Ok((expect, tail))
}
