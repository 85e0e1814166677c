//! A fast keyed hasher for the slices' internal maps, which hash ids (UUIDs)
//! and call ids millions of times while folding: SipHash, std's default,
//! was a quarter of the fold.
//!
//! Each word is mixed with a folded 64x64->128 multiply (as foldhash and
//! aHash's fallback do), under two keys drawn once per process from std's
//! `RandomState`, so the hashes cannot be predicted from outside.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A `HashMap` with [`FastState`].
pub(crate) type FastMap<K, V> = HashMap<K, V, FastState>;

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

fn keys() -> (u64, u64) {
    static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
    *KEYS.get_or_init(|| {
        let s = RandomState::new();
        (s.hash_one(0x5eed_u64), s.hash_one(0x5eed_5eed_u64) | 1)
    })
}

fn folded_multiply(a: u64, b: u64) -> u64 {
    let full = u128::from(a) * u128::from(b);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Builds [`FastHasher`]s with the process's keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastState {
    k0: u64,
    k1: u64,
}

impl Default for FastState {
    fn default() -> Self {
        let (k0, k1) = keys();
        Self { k0, k1 }
    }
}

impl BuildHasher for FastState {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher {
            h: self.k0,
            k: self.k1,
        }
    }
}

/// The hasher of [`FastState`].
pub(crate) struct FastHasher {
    h: u64,
    k: u64,
}

impl FastHasher {
    fn mix(&mut self, word: u64) {
        self.h = folded_multiply(self.h ^ word, MUL ^ self.k);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        // The length goes in the last word so that trailing zeros count.
        self.mix(u64::from_le_bytes(w) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    fn finish(&self) -> u64 {
        folded_multiply(self.h, self.k).rotate_left(23)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CallId, MessageId};
    use std::collections::HashSet;

    #[test]
    fn distinct_keys_spread() {
        let s = FastState::default();
        let ids: Vec<MessageId> = (0..10_000).map(|_| MessageId::new()).collect();
        let hashes: HashSet<u64> = ids.iter().map(|i| s.hash_one(i)).collect();
        assert_eq!(hashes.len(), ids.len());
        // The top 7 bits (hashbrown's control bytes) take many values.
        let tops: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(tops.len() > 100, "{}", tops.len());
        let calls: HashSet<u64> = (0..10_000)
            .map(|i| s.hash_one(CallId(format!("call_{i:08}"))))
            .collect();
        assert_eq!(calls.len(), 10_000);
        assert_ne!(
            s.hash_one(CallId("a".into())),
            s.hash_one(CallId("a\0".into()))
        );
        let mut m: FastMap<MessageId, usize> = FastMap::default();
        for (i, id) in ids.iter().enumerate() {
            m.insert(*id, i);
        }
        assert!(ids.iter().enumerate().all(|(i, id)| m.get(id) == Some(&i)));
    }
}
