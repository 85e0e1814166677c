//! Runs and compressed blocks of the sled store (`docs/format.md`, "Runs
//! and blocks"): every event reads back whatever holds it, while seals move
//! events under readers, across reopens, cut inside a run or block, damaged
//! in a block's bytes or a run's header; and the layout's version marker.

use std::path::Path;

use agent_journal::{Durability, Envelope, Event, Journal, JournalConfig, SessionId};

use crate::common::{raw_sled, run_or_block};

fn config(block_bytes: usize, durability: Durability) -> JournalConfig {
    JournalConfig {
        block_bytes,
        durability,
        serve_readers: false,
        ..JournalConfig::default()
    }
}

/// Event `n`: its number, and a body whose size varies from a few bytes to
/// past what sled keeps inline (a frame of its own in a segment).
fn event(n: u64) -> Event {
    let size = match n % 97 {
        0 => 9_000,
        k => (k as usize * 37) % 700,
    };
    let mut payload = n.to_le_bytes().to_vec();
    payload.extend((0..size).map(|i| (i as u64 * 31 + n) as u8 % 64 + 32));
    Event::Custom {
        kind: "blocks".into(),
        payload,
    }
}

fn number(e: &Envelope) -> u64 {
    match &e.event {
        Event::Custom { payload, .. } => {
            u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"))
        }
        other => panic!("not a test event: {other:?}"),
    }
}

/// A session of `n` events (after its `SessionOpened`), appended alone and
/// in batches; returns its id.
fn build(path: &Path, config: JournalConfig, n: u64) -> SessionId {
    let j = Journal::open_with(path, config).expect("open");
    let s = j.create_session().expect("create");
    let mut next = 0;
    while next < n {
        let k = (next % 7).min(n - next).max(1);
        if k == 1 {
            s.append(event(next)).expect("append");
        } else {
            s.append_batch((next..next + k).map(event).collect())
                .expect("append batch");
        }
        next += k;
    }
    s.id()
}

/// The session's events read back, checked in order against what was
/// appended.
fn check_events(j: &Journal, id: SessionId, n: u64) {
    let events = j.session(id).expect("session").events(..).expect("events");
    assert_eq!(events.len() as u64, n + 1, "SessionOpened and {n} events");
    for (i, e) in events.iter().enumerate().skip(1) {
        assert_eq!(e.seq, i as u64);
        assert_eq!(number(e), i as u64 - 1, "seq {i}");
        assert_eq!(e.event, event(i as u64 - 1), "seq {i}");
    }
}

/// The values of tree `events` for `id`: how many are runs, blocks, and
/// events alone.
fn layout(path: &Path, id: SessionId) -> (usize, usize, usize) {
    let db = raw_sled(path);
    let events = db.open_tree("events").expect("tree");
    let (mut runs, mut blocks, mut ones) = (0, 0, 0);
    for item in events.scan_prefix(id.as_bytes()) {
        let (_, v) = item.expect("item");
        match run_or_block(&v) {
            Some((_, None)) => runs += 1,
            Some((_, Some(_))) => blocks += 1,
            None => ones += 1,
        }
    }
    (runs, blocks, ones)
}

#[test]
fn every_event_reads_back_from_runs_and_blocks_and_after_reopening() {
    for durability in [Durability::Buffered, Durability::Synced] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let n = 1_500;
        let id = build(&path, config(4 << 10, durability), n);
        let (runs, blocks, ones) = layout(&path, id);
        assert!(blocks >= 10, "{durability:?}: {blocks} blocks");
        assert!(
            runs + blocks + ones < n as usize / 4,
            "{durability:?}: {runs} runs, {blocks} blocks, {ones} alone for {n} events"
        );
        let j = Journal::open_with(&path, config(4 << 10, durability)).expect("reopen");
        check_events(&j, id, n);
        let s = j.session(id).expect("session");
        // Time travel and ranges that start and end inside blocks.
        for k in [0, 1, 13, 700, 1_201, n] {
            assert_eq!(s.state_at(k).expect("state_at").last_seq(), Some(k));
            let range = s.events(k..(k + 40).min(n + 1)).expect("range");
            assert_eq!(range.first().map(|e| e.seq), Some(k));
        }
        assert!(j.verify(None, |_| {}).expect("verify").is_clean());
        // The bytes the blocks hold are compressed.
        assert!(path.join("frames").is_dir());
    }
}

#[test]
fn readers_see_every_event_while_seals_move_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let j = Journal::open_with(&path, config(64, Durability::Buffered)).expect("open");
    let s = j.create_session().expect("create");
    let n = 3_000u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = {
            let s = s.clone();
            scope.spawn(move || {
                for i in 0..n {
                    s.append(event(i)).expect("append");
                }
            })
        };
        for r in 0..3u64 {
            let (s, done) = (s.clone(), &done);
            scope.spawn(move || {
                let mut reads = 0u64;
                while !done.load(std::sync::atomic::Ordering::Acquire) || reads == 0 {
                    let head = s.head();
                    let from = (head * r / 4).min(head.saturating_sub(1));
                    let events = s.events(from..head).expect("a range while seals run");
                    assert_eq!(events.len() as u64, head - from);
                    for (k, e) in events.iter().enumerate() {
                        assert_eq!(e.seq, from + k as u64);
                        if e.seq > 0 {
                            assert_eq!(number(e), e.seq - 1);
                        }
                    }
                    reads += 1;
                }
            });
        }
        writer.join().expect("writer");
        done.store(true, std::sync::atomic::Ordering::Release);
    });
    drop(s);
    drop(j);
    let j = Journal::open(&path).expect("reopen");
    check_events(&j, j.sessions().expect("sessions")[0], n);
}

/// Rewrites the body of the block stored under `key` (decompressed, given
/// to `change`, compressed again and appended to its segment), with a new
/// pointer: as a writer would have written the changed bytes.
fn rewrite_block(path: &Path, events: &sled::Tree, key: &[u8], change: impl FnOnce(&mut Vec<u8>)) {
    let v = events.get(key).expect("get").expect("the block");
    let Some((count, Some([segment, offset, stored, raw]))) = run_or_block(&v) else {
        panic!("not a block");
    };
    let file = path.join("frames").join(format!("{segment:020}.seg"));
    let mut bytes = std::fs::read(&file).expect("segment");
    let start = offset as usize;
    let mut body = zstd::block::decompress(&bytes[start..start + stored as usize], raw as usize)
        .expect("decompress");
    change(&mut body);
    let packed = zstd::block::compress(&body, 1).expect("compress");
    let at = bytes.len() as u64;
    bytes.extend(&packed);
    std::fs::write(&file, bytes).expect("write segment");
    let mut p = vec![0xFA];
    p.extend(count.to_le_bytes());
    for x in [segment, at, packed.len() as u64, body.len() as u64] {
        p.extend(x.to_le_bytes());
    }
    let crc = crc32fast::hash(&p);
    p.extend(crc.to_le_bytes());
    events.insert(key, p).expect("insert");
}

/// The last value of `id` in tree `events`: its key and the events it holds.
fn last_value(events: &sled::Tree, id: SessionId) -> (sled::IVec, u64, u64) {
    let (k, v) = events
        .scan_prefix(id.as_bytes())
        .next_back()
        .expect("a value")
        .expect("item");
    let at = u64::from_be_bytes(k[16..24].try_into().expect("seq"));
    (k, at, run_or_block(&v).map_or(1, |(n, _)| u64::from(n)))
}

#[test]
fn a_torn_tail_inside_a_block_is_cut_keeping_the_events_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    // Every value sealed into a block of its own.
    let cfg = || config(1, Durability::Buffered);
    let id = build(&path, cfg(), 60);
    let j = Journal::open_with(&path, cfg()).expect("open");
    j.session(id)
        .expect("session")
        .append_batch((60..65).map(event).collect())
        .expect("a batch of 5 last");
    drop(j);
    let (at, count) = {
        let db = raw_sled(&path);
        let events = db.open_tree("events").expect("tree");
        let (k, at, count) = last_value(&events, id);
        assert!(count >= 5, "the last value holds the last batch: {count}");
        // The last byte of the body is the last event's: its frame's check fails.
        rewrite_block(&path, &events, &k, |body| {
            let last = body.len() - 1;
            body[last] ^= 0x20;
        });
        db.flush().expect("flush");
        (at, count)
    };
    let head = at + count;
    let j = Journal::open_with(&path, cfg()).expect("reopen");
    let s = j.session(id).expect("a torn tail does not stop the open");
    let tail = s.torn_tail().expect("a torn tail");
    assert_eq!((tail.start, tail.len), (head - 1, 1));
    assert_eq!(s.head(), head - 1);
    // The next append cuts it off: the block keeps the events before it.
    s.append(event(1_000)).expect("append over the tail");
    drop(s);
    drop(j);
    let j = Journal::open_with(&path, cfg()).expect("reopen");
    let s = j.session(id).expect("session");
    assert!(s.torn_tail().is_none());
    let events = s.events(..).expect("events");
    assert_eq!(events.len() as u64, head);
    for e in &events[1..events.len() - 1] {
        assert_eq!(number(e), e.seq - 1);
    }
    assert_eq!(number(&events[events.len() - 1]), 1_000);
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_damaged_block_is_reported_and_salvage_keeps_every_other_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let n = 400;
    let id = build(&path, config(2 << 10, Durability::Synced), n);
    // A block in the middle of the stream: flip bytes of its stored form.
    let (first, count) = {
        let db = raw_sled(&path);
        let events = db.open_tree("events").expect("tree");
        let blocks: Vec<(u64, u32, [u64; 4])> = events
            .scan_prefix(id.as_bytes())
            .filter_map(|item| {
                let (k, v) = item.expect("item");
                let at = u64::from_be_bytes(k[16..24].try_into().expect("seq"));
                match run_or_block(&v) {
                    Some((count, Some(p))) => Some((at, count, p)),
                    _ => None,
                }
            })
            .collect();
        assert!(blocks.len() >= 4, "{} blocks", blocks.len());
        let (at, count, [segment, offset, stored, _]) = blocks[blocks.len() / 2];
        let file = path.join("frames").join(format!("{segment:020}.seg"));
        let mut bytes = std::fs::read(&file).expect("segment");
        for i in [stored / 3, stored / 2] {
            bytes[(offset + i) as usize] ^= 0x5a;
        }
        std::fs::write(&file, bytes).expect("write");
        (at, u64::from(count))
    };
    let out = crate::common::run_cli(&path, &["verify"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let named = (first..first + count).any(|seq| stdout.contains(&format!("{id} seq {seq}")));
    assert!(named, "verify names an event of the block: {stdout}");
    let dest = dir.path().join("salvaged");
    let r = agent_journal::maintenance::salvage_database(
        &path,
        &dest,
        agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
    )
    .expect("salvage");
    assert!(
        r.copied >= n + 1 - count,
        "{} copied of {}",
        r.copied,
        n + 1
    );
    // Older copies of the block's events (sled's pages from before the
    // seal) may give every one of them back; else the loss is reported.
    assert!(
        r.copied == n + 1 || !r.dropped.is_empty(),
        "{} copied, nothing reported",
        r.copied
    );
    assert!(r.from_files > 0 || !r.dropped.is_empty(), "{r:?}");
    let j = Journal::open(&dest).expect("the salvaged database opens");
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_run_whose_header_is_damaged_is_read_as_damage_not_as_other_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    // No blocks: every value stays a run in sled.
    let id = build(&path, config(0, Durability::Buffered), 200);
    let at = {
        let db = raw_sled(&path);
        let events = db.open_tree("events").expect("tree");
        let runs: Vec<(sled::IVec, u64)> = events
            .scan_prefix(id.as_bytes())
            .filter_map(|item| {
                let (k, v) = item.expect("item");
                let at = u64::from_be_bytes(k[16..24].try_into().expect("seq"));
                matches!(run_or_block(&v), Some((_, None))).then_some((k, at))
            })
            .collect();
        assert!(runs.len() >= 3, "{} runs", runs.len());
        let (k, at) = runs[runs.len() / 2].clone();
        let mut v = events.get(&k).expect("get").expect("run").to_vec();
        // Its count says 1,000 more events than it holds.
        let count = u32::from_le_bytes(v[1..5].try_into().expect("count")) + 1_000;
        v[1..5].copy_from_slice(&count.to_le_bytes());
        events.insert(&k, v).expect("insert");
        db.flush().expect("flush");
        at
    };
    let j = Journal::open(&path).expect("open");
    let e = j.session(id).expect_err("damage before good events");
    assert!(
        matches!(e, agent_journal::Error::Corruption { seq: Some(s), .. } if s == at || s == at + 1),
        "{e:?}"
    );
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.session == id && p.seq == Some(at)),
        "{:?}",
        report.problems
    );
    // The head is not raised by the count the damaged header claims.
    assert_eq!(j.stream_len(id).expect("len"), Some(201));
}

/// The layout marker: `agent-journal 1`, the only value this build reads;
/// a database marked otherwise (a later build's) is refused with
/// `Unsupported` naming the path and the value, and left as it was.
#[test]
fn a_database_of_another_layout_version_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let id = build(&db, config(4 << 10, Durability::Synced), 50);
    let marker = |p: &Path| {
        let raw = raw_sled(p);
        let v = raw
            .open_tree("meta")
            .expect("meta")
            .get("format")
            .expect("get");
        String::from_utf8_lossy(&v.expect("a marker")).into_owned()
    };
    assert_eq!(marker(&db), "agent-journal 1");
    for other in ["agent-journal 2", "agent-journal 0"] {
        {
            let raw = raw_sled(&db);
            let meta = raw.open_tree("meta").expect("meta");
            meta.insert("format", other).expect("insert");
            raw.flush().expect("flush");
        }
        let Err(e) = Journal::open(&db) else {
            panic!("a database marked {other:?} opened");
        };
        let message = e.to_string();
        assert!(
            matches!(e, agent_journal::Error::Unsupported(_))
                && message.contains(&db.display().to_string())
                && message.contains(other),
            "{e:?}"
        );
        assert_eq!(marker(&db), other, "left as it was");
    }
    {
        let raw = raw_sled(&db);
        let meta = raw.open_tree("meta").expect("meta");
        meta.insert("format", "agent-journal 1").expect("insert");
        raw.flush().expect("flush");
    }
    let j = Journal::open(&db).expect("marked back: opens");
    check_events(&j, id, 50);
}
