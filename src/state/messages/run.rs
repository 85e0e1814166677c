//! The messages of one evaluation, by `(sequence, message_id)`.
//!
//! Messages nearly always come in order, so they are pushed onto a sorted
//! `Vec` (O(1), and decoding a snapshot builds it in one pass); one that
//! sorts below the end of the `Vec` goes to a `BTreeMap` instead. Lookups
//! search both (O(log n)); iteration merges them.

use std::collections::BTreeMap;
use std::iter::Peekable;

use super::slot::Slot;
use crate::model::MessageId;

/// A message's key in its evaluation.
pub(super) type Key = (u64, MessageId);

#[derive(Clone, Debug, Default)]
pub(super) struct EvalMessages {
    /// Sorted by key.
    run: Vec<(Key, Slot)>,
    /// Keys below the end of `run` when they came.
    rest: BTreeMap<Key, Slot>,
}

impl EvalMessages {
    /// Messages sorted by key, with no repeated key.
    pub(super) fn from_sorted(run: Vec<(Key, Slot)>) -> Self {
        Self {
            run,
            rest: BTreeMap::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.run.len() + self.rest.len()
    }

    /// Gives back the room kept for more messages.
    pub(super) fn shrink(&mut self) {
        self.run.shrink_to_fit();
    }

    /// Inserts a message whose key is not there (its id is new).
    pub(super) fn insert(&mut self, key: Key, slot: Slot) {
        match self.run.last() {
            Some((last, _)) if *last >= key => {
                self.rest.insert(key, slot);
            }
            _ => self.run.push((key, slot)),
        }
    }

    /// Where `key` is in `run`. Sequences are nearly always 0, 1, 2, ...
    /// with no gap, so a message's sequence is its place: one probe there
    /// first, then a binary search.
    fn position(&self, key: &Key) -> Option<usize> {
        let guess = usize::try_from(key.0).ok();
        if let Some(i) = guess.filter(|&i| self.run.get(i).is_some_and(|(k, _)| k == key)) {
            return Some(i);
        }
        self.run.binary_search_by(|(k, _)| k.cmp(key)).ok()
    }

    pub(super) fn get(&self, key: &Key) -> Option<&Slot> {
        match self.position(key) {
            Some(i) => self.run.get(i).map(|(_, s)| s),
            None => self.rest.get(key),
        }
    }

    pub(super) fn get_mut(&mut self, key: &Key) -> Option<&mut Slot> {
        match self.position(key) {
            Some(i) => self.run.get_mut(i).map(|(_, s)| s),
            None => self.rest.get_mut(key),
        }
    }

    /// The message with the greatest key.
    pub(super) fn last(&self) -> Option<(&Key, &Slot)> {
        let a = self.run.last().map(|(k, s)| (k, s));
        let b = self.rest.last_key_value();
        match (a, b) {
            (Some(x), Some(y)) => Some(if x.0 > y.0 { x } else { y }),
            (x, y) => x.or(y),
        }
    }

    /// Every message, by key.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Key, &Slot)> + '_ {
        Merge {
            a: self.run.iter().map(|(k, s)| (k, s)).peekable(),
            b: self.rest.iter().peekable(),
        }
    }
}

/// Two iterators sorted by key, merged (their keys are distinct).
struct Merge<A: Iterator, B: Iterator> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'k, V, A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (&'k Key, V)>,
    B: Iterator<Item = (&'k Key, V)>,
{
    type Item = (&'k Key, V);

    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some((x, _)), Some((y, _))) => x < y,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if take_a { self.a.next() } else { self.b.next() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SharedBytes;

    #[test]
    fn in_and_out_of_order_inserts_read_back_sorted() {
        let id = MessageId::new();
        let slot = |n: usize| Slot::shared(SharedBytes::from(vec![n as u8]));
        let mut m = EvalMessages::default();
        for seq in [3u64, 5, 1, 9, 4, 10, 0] {
            m.insert((seq, id), slot(seq as usize));
        }
        let keys: Vec<u64> = m.iter().map(|(k, _)| k.0).collect();
        assert_eq!(keys, vec![0, 1, 3, 4, 5, 9, 10]);
        assert_eq!(m.len(), 7);
        assert_eq!(m.last().map(|(k, _)| k.0), Some(10));
        for seq in [0u64, 1, 3, 4, 5, 9, 10] {
            assert!(m.get(&(seq, id)).is_some() && m.get_mut(&(seq, id)).is_some());
        }
        assert!(m.get(&(2, id)).is_none());
        m.insert((7, id), slot(7));
        assert_eq!(m.last().map(|(k, _)| k.0), Some(10));
        let mut only_rest = EvalMessages::default();
        only_rest.insert((1, id), slot(1));
        only_rest.rest.insert((0, id), slot(0));
        only_rest.run.clear();
        assert_eq!(only_rest.last().map(|(k, _)| k.0), Some(0));
    }

    #[test]
    fn lookups_find_messages_whose_sequence_is_not_their_place() {
        let (a, b) = (MessageId::new(), MessageId::new());
        let slot = |n: usize| Slot::shared(SharedBytes::from(vec![n as u8]));
        // Gaps, a start past 0, and two ids at one sequence: the probe at
        // `run[sequence]` finds another message or nothing.
        let keys = [(2u64, a), (2, b), (3, a), (7, a), (u64::MAX, b)];
        let m = EvalMessages::from_sorted({
            let mut v: Vec<_> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (*k, slot(i)))
                .collect();
            v.sort_by_key(|x| x.0);
            v
        });
        for (i, k) in keys.iter().enumerate() {
            // Each slot's byte is its key's place in `keys`.
            let at = m
                .get(k)
                .and_then(|s| s.raw_bytes())
                .map(|b| usize::from(b[0]));
            assert_eq!(at, Some(i), "{k:?}");
        }
        assert!(m.get(&(0, a)).is_none() && m.get(&(3, b)).is_none());
    }
}
