//! Tests of the write-ahead log: records, generations, damage, replay.

use super::*;

fn sid(n: u8) -> SessionId {
    SessionId::from_bytes([n; 16])
}

fn tempfile_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "aj-wal-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

type Append = (SessionId, u64, Vec<Vec<u8>>);

fn sample() -> Vec<Append> {
    vec![
        (sid(1), 0, vec![b"one".to_vec()]),
        (sid(2), 5, vec![b"two".to_vec(), vec![], b"three".to_vec()]),
        (sid(1), 1, vec![vec![7; 300]]),
    ]
}

fn records(generation: u64, appends: &[Append]) -> Vec<Record> {
    appends
        .iter()
        .map(|(session, first_seq, frames)| Record {
            generation,
            session: *session,
            first_seq: *first_seq,
            frames: frames.clone(),
        })
        .collect()
}

/// A log as a store leaves it: opened, rolled over (generation 1), the
/// appends committed; the file's bytes and how many of them were written.
fn written(appends: &[Append]) -> (Vec<u8>, usize) {
    let dir = tempfile_dir();
    let (wal, old) = Wal::open(&dir, true, Poison::default()).expect("open");
    assert!(old.is_empty());
    wal.roll_over(&|| Ok(())).expect("rollover");
    for (s, seq, frames) in appends {
        wal.enqueue(*s, *seq, frames);
    }
    wal.commit(&|| Ok(())).expect("commit");
    let used = wal.size() as usize;
    let mut bytes = std::fs::read(dir.join(FILE)).expect("read");
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(bytes.len() as u64, PREALLOCATED);
    // Both halves hold the same records.
    let half = HALF as usize;
    assert_eq!(bytes[..used], bytes[half..half + used]);
    // The zeros after the second copy matter only as zeros: keep a few.
    bytes.truncate(half + used + 100);
    (bytes, used)
}

#[test]
fn records_read_back_as_written() {
    let (bytes, _) = written(&sample());
    assert_eq!(parse(&bytes), (1, records(1, &sample())));
}

#[test]
fn a_write_torn_in_both_halves_loses_only_the_records_it_cut() {
    let (bytes, used) = written(&sample());
    let whole = parse(&bytes).1;
    let half = HALF as usize;
    for cut in (0..used).step_by(3) {
        // What a torn write leaves in a preallocated file: zeros after, in
        // both copies.
        let mut torn = bytes.clone();
        torn[cut..used].fill(0);
        torn[half + cut..half + used].fill(0);
        let (_, got) = parse(&torn);
        assert!(got.len() < 3, "cut at {cut}");
        assert_eq!(got[..], whole[..got.len()], "cut at {cut}");
    }
}

#[test]
fn damage_to_one_copy_loses_nothing() {
    let (bytes, used) = written(&sample());
    let whole = parse(&bytes).1;
    let half = HALF as usize;
    for copy in [0, half] {
        for at in (copy..copy + used).step_by(5) {
            // A flipped byte...
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            assert_eq!(parse(&b).1, whole, "flip at {at}");
            // ...a zeroed tail...
            let mut b = bytes.clone();
            b[at..copy + used].fill(0);
            assert_eq!(parse(&b).1, whole, "zeroed from {at}");
        }
    }
    // ...or the file cut anywhere in its second half.
    for cut in (half..half + used + 10).step_by(7) {
        assert_eq!(parse(&bytes[..cut]).1, whole, "cut at {cut}");
    }
}

#[test]
fn a_rollover_starts_a_generation_that_hides_the_records_before_it() {
    let dir = tempfile_dir();
    let (wal, _) = Wal::open(&dir, true, Poison::default()).expect("open");
    wal.roll_over(&|| Ok(())).expect("rollover");
    for (s, seq, frames) in sample() {
        wal.enqueue(s, seq, &frames);
    }
    wal.commit(&|| Ok(())).expect("commit");
    wal.enqueue(sid(3), 0, &[b"queued".to_vec()]);
    let failed = wal.roll_over(&|| Err(Error::Storage("no".into())));
    assert!(failed.is_err());
    drop(wal);
    // A failed sled flush keeps the log as it was.
    let (wal, got) = Wal::open(&dir, true, Poison::default()).expect("reopen");
    assert_eq!(got, records(1, &sample()));
    wal.roll_over(&|| Ok(())).expect("rollover");
    drop(wal);
    // The old records are still in the file, behind the new start.
    let (wal, got) = Wal::open(&dir, true, Poison::default()).expect("reopen");
    assert!(got.is_empty(), "{got:?}");
    let bytes = std::fs::read(dir.join(FILE)).expect("read");
    assert!(bytes.windows(5).any(|w| w == b"three"));
    // Generations only grow, across opens too.
    wal.roll_over(&|| Ok(())).expect("rollover");
    wal.enqueue(sid(4), 9, &[b"new".to_vec()]);
    wal.commit(&|| Ok(())).expect("commit");
    drop(wal);
    let (_, got) = Wal::open(&dir, true, Poison::default()).expect("reopen");
    assert_eq!(got, records(3, &[(sid(4), 9, vec![b"new".to_vec()])]));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn concurrent_appenders_share_syncs_and_every_record_is_written() {
    let dir = tempfile_dir();
    let (wal, _) = Wal::open(&dir, true, Poison::default()).expect("open");
    wal.roll_over(&|| Ok(())).expect("rollover");
    let wal = std::sync::Arc::new(wal);
    let threads: Vec<_> = (0..16u8)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                for seq in 0..20 {
                    wal.enqueue(sid(t), seq, &[vec![t; 100]]);
                    wal.commit(&|| Ok(())).expect("commit");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("join");
    }
    let stats = wal.stats();
    assert!(
        stats.log_writes < 16 * 20 / 2,
        "{} writes for 320 appends",
        stats.log_writes
    );
    assert_eq!(stats.log_records, 320);
    assert!(stats.log_write_time > std::time::Duration::ZERO);
    let (_, records) = parse(&std::fs::read(dir.join(FILE)).expect("read"));
    assert_eq!(records.len(), 320);
    // The bytes of the records (a rollover's start record is not one).
    let mut all = Vec::new();
    for r in &records {
        encode(
            &mut all,
            MAGIC,
            r.generation,
            r.session,
            r.first_seq,
            &r.frames,
        );
    }
    assert_eq!(stats.log_bytes, all.len() as u64);
    assert_eq!(stats.rollovers, 1);
    for t in 0..16u8 {
        let seqs: Vec<u64> = records
            .iter()
            .filter(|r| r.session == sid(t))
            .map(|r| r.first_seq)
            .collect();
        assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "thread {t}");
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn garbage_is_no_record() {
    assert_eq!(parse(b""), (0, vec![]));
    assert_eq!(parse(&[0xAA; 100]), (0, vec![]));
    let mut fake = MAGIC.to_vec();
    fake.extend_from_slice(&u32::MAX.to_le_bytes());
    fake.extend_from_slice(&[0; 40]);
    assert_eq!(parse(&fake), (0, vec![]));
}

#[test]
fn a_log_the_disk_had_no_room_to_preallocate_writes_each_record_once() {
    // Without preallocation (as on a full disk) the file has no second
    // half: records written once (magic AJS1), from offset 0, growing as
    // written.
    let dir = tempfile_dir();
    let (wal, _) = Wal::open(&dir, false, Poison::default()).expect("open");
    wal.roll_over(&|| Ok(())).expect("rollover");
    for (s, seq, frames) in sample() {
        wal.enqueue(s, seq, &frames);
    }
    wal.commit(&|| Ok(())).expect("commit");
    drop(wal);
    let bytes = std::fs::read(dir.join(FILE)).expect("read");
    assert!((bytes.len() as u64) < HALF, "{} bytes", bytes.len());
    assert_eq!(bytes[..4], MAGIC_ONCE);
    assert_eq!(parse(&bytes), (1, records(1, &sample())));
    // Preallocated at the next open (there is room now): mirrored from the
    // first rollover on, the records written once zeroed.
    let (wal, got) = Wal::open(&dir, true, Poison::default()).expect("reopen");
    assert_eq!(got, records(1, &sample()));
    wal.roll_over(&|| Ok(())).expect("rollover");
    wal.enqueue(sid(9), 0, &[b"nine".to_vec()]);
    wal.commit(&|| Ok(())).expect("commit");
    drop(wal);
    let bytes = std::fs::read(dir.join(FILE)).expect("read");
    assert_eq!(bytes.len() as u64, PREALLOCATED);
    assert!(!parse_all(&bytes).2, "records written once left");
    assert_eq!(
        parse(&bytes),
        (2, records(2, &[(sid(9), 0, vec![b"nine".to_vec()])]))
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
