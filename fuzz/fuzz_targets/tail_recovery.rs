//! A valid `.ajournal` built from arbitrary events of up to three
//! interleaved sessions, then damaged once (truncated, a byte flipped, or a
//! range zeroed), then parsed.
//!
//! Properties: `ajournal::parse` returns exactly the records before the
//! first damaged one (in file order, grouped by session), and if it did not
//! return everything, or the trailer was hit, it reports the damage at the
//! start of the first missing record (or of the trailer), wherever a
//! truncation fell; or it fails with `Corruption` at the start of a damaged
//! record or of the trailer; or, if the magic itself was hit, with
//! `NotAJournal` / `Unsupported`, or `Corruption` inside the magic (a
//! version byte turned into another known format's). It never returns an event that was not in
//! the original, and no damage goes unreported.
#![no_main]

use std::collections::BTreeMap;

use agent_journal::format::ajournal::{MAGIC, TRAILER_LEN, parse};
use agent_journal::{Envelope, Error, SessionId};
use arbitrary::{Arbitrary, Unstructured};
use fuzz_common::{LIMIT, SmallEvent, ajournal_bytes, ts};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Mutation {
    Truncate(u16),
    Flip { at: u16, mask: u8 },
    Zero { at: u16, len: u8 },
}

#[derive(Debug)]
struct Input {
    mutation: Mutation,
    /// (session 0..3, event), in file order.
    records: Vec<(u8, SmallEvent)>,
}

/// The mutation, then records until the data runs out (at most 32).
impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mutation = u.arbitrary()?;
        let mut records = Vec::new();
        while !u.is_empty() && records.len() < 32 {
            records.push(u.arbitrary()?);
        }
        Ok(Input { mutation, records })
    }
}

fuzz_target!(|input: Input| {
    let mut next_seq = [0u64; 3];
    let records: Vec<Envelope> = input
        .records
        .iter()
        .map(|(s, e)| {
            let s = usize::from(s % 3);
            let seq = next_seq[s];
            next_seq[s] += 1;
            Envelope {
                session: SessionId::from_bytes([0xA0 + s as u8; 16]),
                seq,
                at: ts(seq as u32),
                event: e.to_event(),
            }
        })
        .collect();
    let (original, starts) = ajournal_bytes(&records);
    let mut bytes = original.clone();
    // Where the damage begins, and whether the input was cut short there.
    let (damage_at, truncated) = match input.mutation {
        Mutation::Truncate(n) => {
            let n = usize::from(n) % (bytes.len() + 1);
            bytes.truncate(n);
            (n, true)
        }
        Mutation::Flip { at, mask } => {
            let at = usize::from(at) % bytes.len();
            bytes[at] ^= mask.max(1);
            (at, false)
        }
        Mutation::Zero { at, len } => {
            let at = usize::from(at) % bytes.len();
            let end = (at + usize::from(len) + 1).min(bytes.len());
            bytes[at..end].fill(0);
            (at, false)
        }
    };
    let changed = bytes != original;
    // Zeroing bytes that were zero changes nothing: the damage begins at the
    // first byte that differs.
    let damage_at = if truncated {
        damage_at
    } else {
        (0..bytes.len())
            .find(|&i| bytes[i] != original[i])
            .unwrap_or(bytes.len())
    };
    let trailer = (original.len() - TRAILER_LEN) as u64;
    let start_of = |k: usize| starts.get(k).copied().unwrap_or(trailer);

    match parse(&bytes, LIMIT) {
        Ok((streams, tail)) => {
            assert!(
                damage_at >= MAGIC.len() || !changed,
                "damaged magic accepted"
            );
            let got: usize = streams.iter().map(|(_, e)| e.len()).sum();
            // Exactly the first `got` records, grouped by session.
            let mut expected: BTreeMap<SessionId, Vec<Envelope>> = BTreeMap::new();
            for env in &records[..got.min(records.len())] {
                expected.entry(env.session).or_default().push(env.clone());
            }
            let got_map: BTreeMap<SessionId, Vec<Envelope>> = streams.into_iter().collect();
            assert_eq!(
                got_map, expected,
                "parse returned events that are not the original's prefix"
            );
            assert!(got <= records.len());
            if got == records.len() && tail.is_some() {
                assert!(
                    damage_at as u64 >= trailer,
                    "a tail after every record, the damage at {damage_at} before the trailer"
                );
            }
            let boundary = start_of(got);
            match tail {
                Some(t) => {
                    assert_eq!(t.start, boundary, "tail not at the first missing record");
                    assert_eq!(t.start + t.len, bytes.len() as u64, "tail length");
                }
                None => assert!(
                    !changed,
                    "damage at {damage_at} without a report (got {got} of {} records)",
                    records.len()
                ),
            }
        }
        Err(Error::Corruption { offset, .. }) => {
            let o = offset.expect("file corruption names its byte offset");
            assert!(changed, "corruption reported on an intact file");
            // A damaged magic that still reads as a known format (2 -> 1)
            // is found by the trailer and reported at the version byte.
            assert!(
                starts.contains(&o) || o == trailer || (o < MAGIC.len() as u64 && damage_at < MAGIC.len()),
                "corruption offset {o} is not a record start nor the trailer's"
            );
            assert!(
                o <= damage_at as u64,
                "corruption reported at {o}, after the damage at {damage_at}"
            );
        }
        Err(Error::NotAJournal { .. } | Error::Unsupported(_)) => {
            assert!(
                damage_at < MAGIC.len(),
                "refused as not a journal, damage at {damage_at}"
            );
        }
        Err(e) => panic!("unexpected error {e:?}"),
    }
});
