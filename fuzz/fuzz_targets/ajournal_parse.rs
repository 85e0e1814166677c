//! Arbitrary bytes as an exported journal (`.ajournal`). The first byte
//! chooses whether the magic is prepended (odd) or not (even), so half the
//! inputs get past the header check.
//!
//! Properties: never panics; on success every session's events carry that
//! session's id and seqs 0..n in order; a damaged tail lies at the end of
//! the input; writing the events back out (magic, length-prefixed
//! `encode_frame`s, trailer) and parsing again gives the same events and no
//! damage.
#![no_main]

use agent_journal::Error;
use agent_journal::format::ajournal::{MAGIC, parse};
use fuzz_common::{LIMIT, ajournal_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let bytes = if selector & 1 == 1 {
        [MAGIC.as_slice(), rest].concat()
    } else {
        rest.to_vec()
    };
    let (streams, tail) = match parse(&bytes, LIMIT) {
        Ok(r) => r,
        Err(Error::NotAJournal { .. }) => {
            assert!(
                !bytes.starts_with(b"AGJRNL") || bytes.len() < MAGIC.len(),
                "has the magic but NotAJournal"
            );
            return;
        }
        Err(Error::Unsupported(_)) => {
            assert!(
                bytes.starts_with(b"AGJRNL") && !bytes.starts_with(MAGIC),
                "a format this build reads refused"
            );
            return;
        }
        Err(Error::Corruption { offset, .. }) => {
            let o = offset.expect("file corruption names its byte offset");
            assert!(
                o >= MAGIC.len() as u64 && o < bytes.len() as u64,
                "offset {o} out of the file"
            );
            return;
        }
        Err(e) => panic!("unexpected error {e:?}"),
    };
    assert!(bytes.starts_with(MAGIC), "another format read");
    let mut ids: Vec<_> = streams.iter().map(|(id, _)| *id).collect();
    ids.dedup();
    assert_eq!(ids.len(), streams.len(), "a session listed twice");
    for (id, events) in &streams {
        assert!(!events.is_empty(), "an empty stream for {id}");
        for (i, env) in events.iter().enumerate() {
            assert_eq!(env.session, *id, "event filed under the wrong session");
            assert_eq!(env.seq, i as u64, "seqs out of order in {id}");
        }
    }
    if let Some(t) = &tail {
        assert!(
            t.start >= MAGIC.len() as u64,
            "tail starts inside the magic"
        );
        assert_eq!(
            t.start + t.len,
            bytes.len() as u64,
            "a tail that is not at the end"
        );
    }
    let (rewritten, _) = ajournal_bytes(streams.iter().flat_map(|(_, e)| e));
    let (again, again_tail) = parse(&rewritten, LIMIT).expect("a rewritten file must parse");
    assert_eq!(again_tail, None, "a rewritten file has damage");
    assert_eq!(again, streams, "rewriting changed the events");
});
