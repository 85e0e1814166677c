//! Keys of the sled trees: a session id (16 bytes) then a seq (u64 big-endian),
//! so that byte order is stream order.

use crate::model::SessionId;

/// Key of event `seq` of `session`.
pub(crate) fn key(session: SessionId, seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(session.as_bytes());
    k[16..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// Splits a key into its session and seq, if it has the right shape.
pub(crate) fn split_key(k: &[u8]) -> Option<(SessionId, u64)> {
    let sid: [u8; 16] = k.get(..16)?.try_into().ok()?;
    let seq: [u8; 8] = k.get(16..24)?.try_into().ok()?;
    if k.len() != 24 {
        return None;
    }
    Some((SessionId::from_bytes(sid), u64::from_be_bytes(seq)))
}
