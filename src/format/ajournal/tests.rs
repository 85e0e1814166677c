//! Tests of reading and writing `.ajournal` bytes.

use super::*;
use crate::event::Event;

/// The magic and the records of `n` events of one session, without the
/// trailer.
fn records_of(n: u64) -> Vec<u8> {
    let sid = SessionId::new();
    let mut bytes = MAGIC.to_vec();
    for seq in 0..n {
        let env = Envelope {
            session: sid,
            seq,
            at: crate::model::now(),
            event: Event::Custom {
                kind: "k".into(),
                payload: vec![seq as u8; 10],
            },
        };
        let frame = format::encode_frame(&env, 1 << 20).expect("encode");
        bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&frame);
    }
    bytes
}

/// `n` records and a trailer that counts `count` of them.
fn file_counting(n: u64, count: u64) -> Vec<u8> {
    let mut bytes = records_of(n);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&TRAILER_MARK.to_le_bytes());
    bytes.extend_from_slice(&count.to_le_bytes());
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// A file of `n` events, as the writer makes it.
fn file_with(n: u64) -> Vec<u8> {
    file_counting(n, n)
}

fn events(c: &FileContents) -> usize {
    c.streams.values().next().map(Vec::len).unwrap_or(0)
}

#[test]
fn the_writer_ends_a_file_with_its_trailer() {
    let dir = std::env::temp_dir().join(format!("aj-file-{}", SessionId::new()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("x.ajournal");
    let records = records_of(3);
    let mut w = FileWriter::create(&path).expect("create");
    let mut pos = MAGIC.len();
    while pos < records.len() {
        let len = u32::from_le_bytes(records[pos..pos + 4].try_into().expect("4")) as usize;
        w.write_frame(&records[pos + 4..pos + 4 + len])
            .expect("write");
        pos += 4 + len;
    }
    assert_eq!(w.finish().expect("finish"), 3);
    let written = std::fs::read(&path).expect("read");
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(written[..MAGIC.len()], MAGIC[..]);
    assert_eq!(
        written[MAGIC.len()..written.len() - TRAILER_LEN],
        records[MAGIC.len()..]
    );
    let read = parse_frames(&written, 1 << 20).expect("parse");
    assert_eq!((events(&read), read.tail), (3, None));
}

#[test]
fn a_cut_at_any_length_keeps_the_good_prefix_and_is_reported() {
    let full = file_with(5);
    let whole = parse_frames(&full, 1 << 20).expect("parse");
    assert_eq!((events(&whole), whole.tail.is_none()), (5, true));
    for cut in MAGIC.len()..full.len() {
        let c = parse_frames(&full[..cut], 1 << 20).expect("a truncated file still opens");
        assert!(events(&c) <= 5);
        // Even a cut exactly between two records, or right before the
        // trailer: the trailer is missing.
        let tail = c.tail.unwrap_or_else(|| panic!("cut at {cut} unreported"));
        assert!(tail.start <= cut as u64, "{tail}");
    }
    let between = parse_frames(&full[..full.len() - TRAILER_LEN], 1 << 20).expect("parse");
    assert_eq!(events(&between), 5);
    let tail = between.tail.expect("reported");
    assert_eq!(tail.len, 0);
    assert!(tail.to_string().contains("without its trailer"), "{tail}");
}

#[test]
fn a_trailer_that_does_not_match_is_corruption_at_its_offset() {
    let trailer_at = (file_with(4).len() - TRAILER_LEN) as u64;
    // One record fewer than the trailer counts: a whole record gone.
    let missing = file_counting(4, 5);
    assert!(matches!(
        parse_frames(&missing, 1 << 20),
        Err(Error::Corruption { offset: Some(o), ref reason, .. }) if o == trailer_at && reason.contains("counts 5")
    ));
    // A flipped byte of the checksum, or of the count.
    for at in [1, 5] {
        let mut flipped = file_with(4);
        let i = flipped.len() - at;
        flipped[i] ^= 0x08;
        assert!(matches!(
            parse_frames(&flipped, 1 << 20),
            Err(Error::Corruption { offset: Some(o), .. }) if o == trailer_at
        ));
        let (records, dropped) = parse_lenient(&flipped, 1 << 20).expect("lenient");
        assert_eq!((records.len(), dropped.len()), (4, 1));
    }
}

#[test]
fn bytes_after_the_trailer_are_a_reported_tail() {
    let mut bytes = file_with(2);
    let end = bytes.len() as u64;
    bytes.extend_from_slice(b"garbage");
    let c = parse_frames(&bytes, 1 << 20).expect("parse");
    assert_eq!(events(&c), 2);
    let tail = c.tail.expect("reported");
    assert_eq!((tail.start, tail.len), (end, 7));
}

#[test]
fn salvage_reports_a_missing_trailer() {
    let full = file_with(3);
    let (records, dropped) = parse_lenient(&full, 1 << 20).expect("lenient");
    assert_eq!((records.len(), dropped.len()), (3, 0));
    let cut = &full[..full.len() - TRAILER_LEN];
    let (records, dropped) = parse_lenient(cut, 1 << 20).expect("lenient");
    assert_eq!((records.len(), dropped.len()), (3, 1));
    assert!(dropped[0].message.contains("without its trailer"));
}

/// Every fifth byte starts what looks like a 256 KiB record of our
/// frame version (its checksum fails): a search that checksummed each
/// would hash ~100 GiB here. The budget stops it after ~129 MiB.
#[test]
fn a_file_crafted_to_look_like_records_everywhere_is_read_in_linear_time() {
    let mut bytes = MAGIC.to_vec();
    let mut unit = (256u32 << 10).to_le_bytes().to_vec();
    unit.push(format::FRAME_VERSION);
    while bytes.len() < 2 << 20 {
        bytes.extend_from_slice(&unit);
    }
    let start = std::time::Instant::now();
    let read = parse_frames(&bytes, 16 << 20).expect("a damaged file still opens");
    assert_eq!(events(&read), 0);
    let tail = read.tail.expect("reported");
    assert!(tail.reason.contains("gave up"), "{tail}");
    assert_eq!(tail.start, MAGIC.len() as u64);
    let (records, dropped) = parse_lenient(&bytes, 16 << 20).expect("lenient");
    assert!(records.is_empty());
    assert!(dropped[0].message.contains("gave up"), "{:?}", dropped[0]);
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
}

/// The budget is never near for real damage: records after a garbage
/// region are still found, by salvage and by the strict reader.
#[test]
fn records_after_a_region_of_random_garbage_are_still_found() {
    let good = file_with(3);
    let trailer = good.len() - TRAILER_LEN;
    let first_end =
        MAGIC.len() + 4 + u32::from_le_bytes(good[8..12].try_into().expect("4")) as usize;
    // The first record's bytes replaced by 64 KiB of pseudo-random ones.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut bytes = MAGIC.to_vec();
    for _ in 0..(64 << 10) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.push(x as u8);
    }
    bytes.extend_from_slice(&good[first_end..trailer]);
    let (records, dropped) = parse_lenient(&bytes, 16 << 20).expect("lenient");
    assert_eq!(records.len(), 2, "{dropped:?}");
    assert!(!dropped.iter().any(|d| d.message.contains("gave up")));
}

#[test]
fn damage_before_good_records_is_corruption_with_offset() {
    let mut bytes = file_with(3);
    let at = MAGIC.len() + 4 + 7; // inside the first frame's body
    bytes[at] ^= 0x40;
    match parse_frames(&bytes, 1 << 20) {
        Err(Error::Corruption {
            offset: Some(o), ..
        }) => assert_eq!(o, MAGIC.len() as u64),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn another_version_and_garbage_are_refused() {
    // A future version, and the version byte damaged (into `0`, `2`).
    for version in [b'9', b'0', b'2'] {
        let mut bytes = file_with(1);
        bytes[7] = version;
        assert!(matches!(
            parse_frames(&bytes, 1 << 20),
            Err(Error::Unsupported(ref m)) if m.contains("AGJRNL01")
        ));
        // Salvage still reads its records (the trailer's checksum, which
        // covers the magic, no longer matches: reported).
        let (records, dropped) = parse_lenient(&bytes, 1 << 20).expect("lenient");
        assert_eq!((records.len(), dropped.len()), (1, 1));
    }
    assert!(matches!(
        parse_frames(b"hello world", 1 << 20),
        Err(Error::NotAJournal { .. })
    ));
}
