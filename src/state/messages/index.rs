//! Where each message is, by id: `(evaluation, sequence)`.
//!
//! The ids of a decoded snapshot go in a sorted array, built in one pass
//! (messages come by evaluation then sequence, and UUIDv7 ids are creation
//! order, so the array is nearly sorted already): a million random inserts
//! into a hash table were half the cost of decoding a snapshot. A new id
//! greater than every id of the array (a fresh UUIDv7: nearly every id a
//! fold meets) is pushed onto it, with no search and no hashing; the others
//! go in a hash map. Every id of the map is below the array's last (it was
//! when it was added, and the last only grows), so an id above the last is
//! in neither.

use std::collections::hash_map::Entry;

use crate::model::{EvaluationId, MessageId};
use crate::state::hash::FastMap;

/// Where a message is.
pub(super) type At = (EvaluationId, u64);

#[derive(Clone, Debug, Default)]
pub(super) struct Index {
    /// Sorted by id, distinct.
    base: Vec<(MessageId, At)>,
    /// Ids not in `base`.
    added: FastMap<MessageId, At>,
}

impl Index {
    /// The index of these messages, in any order; `Err` with an id that
    /// appears twice.
    pub(super) fn from_unsorted(mut base: Vec<(MessageId, At)>) -> Result<Self, MessageId> {
        base.sort_by_key(|(id, _)| *id);
        if let Some(w) = base.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(w[0].0);
        }
        Ok(Self {
            base,
            added: FastMap::default(),
        })
    }

    pub(super) fn len(&self) -> usize {
        self.base.len() + self.added.len()
    }

    /// Ids the sorted array can take before it must grow.
    #[cfg(test)]
    pub(super) fn spare(&self) -> usize {
        self.base.capacity() - self.base.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn in_base(&self, id: &MessageId) -> Option<At> {
        match self.base.last() {
            Some((last, _)) if last >= id => {}
            _ => return None,
        }
        let i = self.base.binary_search_by(|(x, _)| x.cmp(id)).ok()?;
        self.base.get(i).map(|(_, at)| *at)
    }

    pub(super) fn get(&self, id: &MessageId) -> Option<At> {
        self.added.get(id).copied().or_else(|| self.in_base(id))
    }

    /// Adds `id` at `at`; false (and nothing changes) if it is there.
    pub(super) fn claim(&mut self, id: MessageId, at: At) -> bool {
        if self.base.last().is_none_or(|(last, _)| *last < id) {
            self.base.push((id, at));
            return true;
        }
        if self.in_base(&id).is_some() {
            return false;
        }
        match self.added.entry(id) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(at);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn base_and_added_ids_are_found_and_claimed_once() {
        let id = |n: u128| MessageId(Uuid::from_u128(n));
        let eval = EvaluationId::new();
        let base = vec![
            (id(30), (eval, 3)),
            (id(10), (eval, 1)),
            (id(20), (eval, 2)),
        ];
        let mut ix = Index::from_unsorted(base).expect("distinct");
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.get(&id(20)), Some((eval, 2)));
        assert_eq!(ix.get(&id(25)), None);
        for n in [10, 20, 30] {
            assert!(!ix.claim(id(n), (eval, 9)));
        }
        assert!(ix.claim(id(25), (eval, 4)) && ix.claim(id(99), (eval, 5)));
        assert!(!ix.claim(id(25), (eval, 6)) && !ix.claim(id(99), (eval, 6)));
        assert_eq!((ix.get(&id(25)), ix.len()), (Some((eval, 4)), 5));
        let dup = Index::from_unsorted(vec![(id(1), (eval, 1)), (id(1), (eval, 2))]);
        assert_eq!(dup.err(), Some(id(1)));
        assert!(Index::default().is_empty());
        // Ids in and out of order, against a set.
        let mut ix = Index::default();
        let mut seen = std::collections::HashSet::new();
        for n in [5u128, 7, 6, 7, 1, 9, 8, 9, 2, 100, 50, 5, 100, 101] {
            assert_eq!(ix.claim(id(n), (eval, n as u64)), seen.insert(n), "{n}");
            assert_eq!(ix.len(), seen.len());
        }
        for n in 0..120u128 {
            let want = seen.contains(&n).then_some((eval, n as u64));
            assert_eq!(ix.get(&id(n)), want, "{n}");
        }
    }
}
