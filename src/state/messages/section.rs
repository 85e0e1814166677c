//! The messages section of a binary snapshot, written and read by hand
//! with bincode's integer encoding (see `format/message.rs`):
//!
//! ```text
//! varint count                       number of messages
//! varint evaluations, each:          by id
//!   [16] evaluation_id, varint n, n x:       by (sequence, message_id)
//!     varint sequence, [16] message_id, varint len, len bytes: the body
//! varint calls, each:                by (evaluation_id, call_id)
//!   [16] evaluation_id, varint len, call_id (UTF-8), u8 status,
//!   varint n, n x: varint sequence, [16] message_id   (the messages holding it)
//! ```
//!
//! A body is the message's bincode (the crate's codec). Reading keeps each
//! body as bytes of the snapshot's buffer (after checking that it decodes)
//! and rebuilds every index from the headers and the calls; writing copies the bytes of a message still held as bytes
//! and encodes only the others.

use crate::format::SharedBytes;
use std::collections::hash_map::Entry;

use super::Messages;
use super::index::Index;
use super::run::EvalMessages;
use super::slot::{CallSlot, Slot};
use crate::format::message::{Bad, Reader, check_body, encode_body, stale_statuses, write_varint};
use crate::model::{CallId, EvaluationId, MessageId, ToolStatus};

impl From<Bad> for String {
    fn from(Bad(what, why): Bad) -> String {
        format!("{what}: {why}")
    }
}

const STATUSES: [ToolStatus; 4] = [
    ToolStatus::Pending,
    ToolStatus::Started,
    ToolStatus::Completed,
    ToolStatus::Failed,
];

fn status_byte(s: ToolStatus) -> u8 {
    match s {
        ToolStatus::Pending => 0,
        ToolStatus::Started => 1,
        ToolStatus::Completed => 2,
        ToolStatus::Failed => 3,
    }
}

/// Appends one message of a section: its key, then its body (copied if
/// it is held as bytes, else encoded in `scratch`).
fn write_message(
    out: &mut Vec<u8>,
    calls: super::slot::Calls<'_>,
    eval: EvaluationId,
    key: (u64, MessageId),
    slot: &Slot,
    scratch: &mut Vec<u8>,
) {
    write_varint(out, key.0);
    out.extend_from_slice(key.1.as_bytes());
    let bytes = match slot.raw_bytes() {
        // The statuses of its calls may have moved since the bytes were
        // written: patched in a copy, so that a snapshot's bytes depend
        // only on the state.
        Some(bytes) => match calls.map(|c| stale_statuses(bytes, |id| Some(c.get(id)?.status))) {
            Some(Ok(patches)) if !patches.is_empty() => {
                scratch.clear();
                scratch.extend_from_slice(bytes);
                for (at, byte) in patches {
                    if let Some(b) = scratch.get_mut(at) {
                        *b = byte;
                    }
                }
                scratch
            }
            _ => bytes,
        },
        None => {
            scratch.clear();
            encode_body(slot.get(calls, eval, key), scratch);
            scratch
        }
    };
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends the calls part of a section: their count, then each call.
fn write_calls(out: &mut Vec<u8>, calls: &[(EvaluationId, &CallId, &CallSlot)]) {
    write_varint(out, calls.len() as u64);
    for (eval, call, slot) in calls {
        out.extend_from_slice(eval.as_bytes());
        write_varint(out, call.0.len() as u64);
        out.extend_from_slice(call.0.as_bytes());
        out.push(status_byte(slot.status));
        write_varint(out, slot.holders.len() as u64);
        for (sequence, id) in &slot.holders {
            write_varint(out, *sequence);
            out.extend_from_slice(id.as_bytes());
        }
    }
}

/// A call of a section's calls part: its evaluation, id, status and the
/// keys of the messages that hold it.
type CallRecord = (EvaluationId, CallId, ToolStatus, Vec<(u64, MessageId)>);

/// Reads one call of a section's calls part (a pending call held by no
/// message is refused).
fn read_call(r: &mut Reader<'_>, len: usize) -> Result<CallRecord, String> {
    let eval = EvaluationId::from_bytes(r.array("call.evaluation_id")?);
    let n = r.len("call.call_id")?;
    let call = std::str::from_utf8(r.take(n, "call.call_id")?)
        .map_err(|e| format!("call.call_id: {e}"))?;
    let status = *STATUSES
        .get(usize::from(r.byte("call.status")?))
        .ok_or("call.status: unknown status")?;
    let n = r.len("call.holders")?;
    let mut holders = Vec::with_capacity(n.min(len / 17));
    for _ in 0..n {
        let sequence = r.varint("call.holder.sequence")?;
        let id = MessageId::from_bytes(r.array("call.holder.message_id")?);
        holders.push((sequence, id));
    }
    if holders.is_empty() && status == ToolStatus::Pending {
        return Err(format!("call {call}: pending and held by no message"));
    }
    Ok((eval, CallId::from(call), status, holders))
}

/// Appends the messages section of `m` to `out`.
pub(crate) fn write_section(m: &Messages, out: &mut Vec<u8>) -> Result<(), String> {
    let mut scratch = Vec::new();
    write_varint(out, m.len() as u64);
    write_varint(out, m.by_eval.len() as u64);
    for (eval, msgs) in &m.by_eval {
        let eval = eval.id();
        out.extend_from_slice(eval.as_bytes());
        write_varint(out, msgs.len() as u64);
        let calls = m.calls.get(&eval);
        for (key, slot) in msgs.iter() {
            write_message(out, calls, eval, *key, slot, &mut scratch);
        }
    }
    let mut calls: Vec<_> = m.call_slots().collect();
    calls.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    write_calls(out, &calls);
    Ok(())
}

/// Reads the messages section at `buf[at..at + len]`, keeping the bodies
/// as bytes of `buf`. Each body is
/// checked to decode and to hold the ids of its header; order, uniqueness
/// and every count are checked too.
pub(crate) fn read_section(buf: &SharedBytes, at: usize, len: usize) -> Result<Messages, String> {
    let section = at
        .checked_add(len)
        .and_then(|end| buf.get(at..end))
        .ok_or("the messages section is out of bounds")?;
    let mut r = Reader::new(section);
    let count = r.varint("count")?;
    let mut out = Messages::default();
    // A message takes more than 32 bytes: never reserve more than the
    // section could hold, whatever the count says.
    let cap = usize::try_from(count).unwrap_or(usize::MAX);
    // Huge pages if big (40 MB for a million messages), and room for the
    // messages still to come: the index keeps this vector, and the first
    // new message would otherwise copy it whole inside an append.
    let cap = cap.min(len / 32);
    let mut index = crate::mem::with_capacity(cap + cap / 8 + 16);
    let mut messages = 0u64;
    let evals = r.len("evaluations")?;
    let mut last_eval: Option<EvaluationId> = None;
    for _ in 0..evals {
        let eval = EvaluationId::from_bytes(r.array("evaluation_id")?);
        if last_eval.is_some_and(|last| last >= eval) {
            return Err(format!("evaluation {eval} out of order"));
        }
        last_eval = Some(eval);
        let n = r.len("messages")?;
        if n == 0 {
            return Err(format!("evaluation {eval} has no message"));
        }
        let mut run: Vec<((u64, MessageId), Slot)> = Vec::with_capacity(n.min(len / 32));
        for _ in 0..n {
            let sequence = r.varint("sequence")?;
            let id = MessageId::from_bytes(r.array("message_id")?);
            let key = (sequence, id);
            if run.last().is_some_and(|(k, _)| *k >= key) {
                return Err(format!("message {id} out of order"));
            }
            let body_len = r.len("body")?;
            let start = at + r.pos();
            let body = r.take(body_len, "body")?;
            let ids = check_body(body).map_err(|e| format!("message {id}: {e}"))?;
            if (ids.evaluation_id, ids.sequence, ids.message_id) != (eval, sequence, id) {
                return Err(format!("message {id}: its ids differ from its header's"));
            }
            index.push((id, (eval, sequence)));
            messages += 1;
            let bytes = buf
                .try_slice(start..start + body_len)
                .ok_or("a message body is out of bounds")?;
            run.push((key, Slot::shared(bytes)));
        }
        out.by_eval
            .insert(eval.into(), EvalMessages::from_sorted(run));
    }
    if messages != count {
        return Err(format!("{messages} messages where the count says {count}"));
    }
    out.index = index_of(index)?;
    for _ in 0..r.len("calls")? {
        let (eval, call, status, holders) = read_call(&mut r, len)?;
        for (sequence, id) in &holders {
            let held = out
                .by_eval
                .get(&eval.into())
                .is_some_and(|m| m.get(&(*sequence, *id)).is_some());
            if !held {
                return Err(format!("call {call}: held by unknown message {id}"));
            }
        }
        match out.calls.entry(eval).or_default().entry(call) {
            Entry::Occupied(o) => return Err(format!("duplicate call {}", o.key())),
            Entry::Vacant(v) => {
                v.insert(CallSlot { status, holders });
            }
        }
    }
    if !r.is_empty() {
        return Err("trailing bytes after the messages section".into());
    }
    Ok(out)
}

fn index_of(ids: Vec<(MessageId, (EvaluationId, u64))>) -> Result<Index, String> {
    Index::from_unsorted(ids).map_err(|id| format!("duplicate message_id {id}"))
}

/// The key of a message in a delta's section: by evaluation, then
/// `(sequence, message_id)`.
type FreshKey = (EvaluationId, (u64, MessageId));

/// Appends a delta snapshot's messages section to `out`, in the layout of
/// [`write_section`]: the messages of `fresh` (added since the snapshot the
/// delta builds on) and the call slots of `calls` (every call changed or
/// added since; those the slice has a slot for).
pub(crate) fn write_delta_section(
    m: &Messages,
    fresh: &[FreshKey],
    calls: &[(EvaluationId, &CallId)],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let mut fresh = fresh.to_vec();
    fresh.sort_unstable();
    fresh.dedup();
    let mut scratch = Vec::new();
    write_varint(out, fresh.len() as u64);
    let groups: Vec<&[FreshKey]> = fresh.chunk_by(|a, b| a.0 == b.0).collect();
    write_varint(out, groups.len() as u64);
    for group in groups {
        let eval = group[0].0;
        let msgs = m
            .by_eval
            .get(&eval.into())
            .ok_or_else(|| format!("evaluation {eval} has no messages"))?;
        out.extend_from_slice(eval.as_bytes());
        write_varint(out, group.len() as u64);
        for (_, key) in group {
            let slot = msgs
                .get(key)
                .ok_or_else(|| format!("message {} is not there", key.1))?;
            write_message(out, m.calls.get(&eval), eval, *key, slot, &mut scratch);
        }
    }
    let mut slots: Vec<(EvaluationId, &CallId, &CallSlot)> = calls
        .iter()
        .filter_map(|(eval, call)| Some((*eval, *call, m.call(*eval, call)?)))
        .collect();
    slots.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    slots.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    write_calls(out, &slots);
    Ok(())
}

/// Applies the messages section of a delta snapshot at `buf[at..at + len]`
/// to `m`: its messages are added (kept as bytes of `buf`); its call slots are put in
/// place, their statuses given to the older messages that hold them. Each
/// body is checked as [`read_section`] checks it; a message already there
/// is refused. On an error `m` is half changed: drop it.
pub(crate) fn apply_delta_section(
    m: &mut Messages,
    buf: &SharedBytes,
    at: usize,
    len: usize,
) -> Result<(), String> {
    let section = at
        .checked_add(len)
        .and_then(|end| buf.get(at..end))
        .ok_or("the messages section is out of bounds")?;
    let mut r = Reader::new(section);
    let count = r.varint("count")?;
    let mut fresh: std::collections::HashSet<FreshKey> = std::collections::HashSet::new();
    let mut last: Option<FreshKey> = None;
    let mut messages = 0u64;
    for _ in 0..r.len("evaluations")? {
        let eval = EvaluationId::from_bytes(r.array("evaluation_id")?);
        let n = r.len("messages")?;
        if n == 0 {
            return Err(format!("evaluation {eval} has no message"));
        }
        for _ in 0..n {
            let sequence = r.varint("sequence")?;
            let id = MessageId::from_bytes(r.array("message_id")?);
            let key = (sequence, id);
            if last.is_some_and(|l| l >= (eval, key)) {
                return Err(format!("message {id} out of order"));
            }
            last = Some((eval, key));
            let body_len = r.len("body")?;
            let start = at + r.pos();
            let body = r.take(body_len, "body")?;
            let ids = check_body(body).map_err(|e| format!("message {id}: {e}"))?;
            if (ids.evaluation_id, ids.sequence, ids.message_id) != (eval, sequence, id) {
                return Err(format!("message {id}: its ids differ from its header's"));
            }
            if !m.index.claim(id, (eval, sequence)) {
                return Err(format!("message {id} is there already"));
            }
            let bytes = buf
                .try_slice(start..start + body_len)
                .ok_or("a message body is out of bounds")?;
            m.by_eval
                .entry(eval.into())
                .or_default()
                .insert(key, Slot::shared(bytes));
            fresh.insert((eval, key));
            messages += 1;
        }
    }
    if messages != count {
        return Err(format!("{messages} messages where the count says {count}"));
    }
    let Messages {
        by_eval,
        calls: slots,
        ..
    } = m;
    for _ in 0..r.len("calls")? {
        let (eval, call_id, status, holders) = read_call(&mut r, len)?;
        let msgs = by_eval.get_mut(&eval.into());
        if !holders.is_empty() && msgs.is_none() {
            return Err(format!("call {call_id}: held by messages of no evaluation"));
        }
        if let Some(msgs) = msgs {
            for holder in &holders {
                let Some(slot) = msgs.get_mut(holder) else {
                    return Err(format!(
                        "call {call_id}: held by unknown message {}",
                        holder.1
                    ));
                };
                if fresh.contains(&(eval, *holder)) {
                    continue;
                }
                // Written before the status changed: give it the status.
                slot.forget(&call_id, status);
            }
        }
        slots
            .entry(eval)
            .or_default()
            .insert(call_id, CallSlot { status, holders });
    }
    if !r.is_empty() {
        return Err("trailing bytes after the messages section".into());
    }
    Ok(())
}
