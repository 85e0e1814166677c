//! Damage as the binary reports it: `verify` exits 3 naming the session
//! and seq of a damaged frame, or the byte offset where an exported journal
//! was cut, and `log` still shows what is readable.

use super::{Demo, aj, line_seq};
use crate::common::{raw_sled, record_offsets};

#[test]
fn verify_finds_a_flipped_byte_and_names_the_session_and_seq() {
    let d = Demo::new();
    let out = d.run(&["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "no progress bar on a pipe: {out:?}");
    assert_eq!(d.run(&["verify", "--json"]).json()["ok"], true);

    // Damage event 10 (of 0..23) with the CLI not running.
    {
        let id: agent_journal::SessionId = d.id.parse().expect("id");
        let db = raw_sled(&d.db);
        let events = db.open_tree("events").expect("tree events");
        crate::common::unpack_event(&d.db, &events, id, 10);
        let mut key = id.as_bytes().to_vec();
        key.extend_from_slice(&10u64.to_be_bytes());
        let mut v = events.get(&key).expect("get").expect("present").to_vec();
        assert!(v.len() > 12);
        v[12] ^= 0x5a;
        events.insert(key, v).expect("insert");
        db.flush().expect("flush");
    }

    let out = d.run(&["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    for text in [&out.stdout, &out.stderr] {
        assert!(
            text.contains(&d.id) && text.contains("seq 10"),
            "names the place: {out:?}"
        );
    }
    assert!(out.stderr.starts_with("error: corruption"), "{out:?}");

    let out = d.run(&["verify", "--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["session"], d.id.as_str());
    assert_eq!(v["problems"][0]["seq"], 10);
    assert_eq!(v["problems"][0]["kind"], "damage");

    assert_eq!(d.run(&["verify", &d.id]).code, 3);
    for cmd in ["log", "show"] {
        let out = d.run(&[cmd, &d.id]);
        assert_eq!(out.code, 3, "{cmd}: {out:?}");
        assert!(
            out.stderr.contains("seq 10") && out.stderr.contains(&d.id),
            "{cmd}: {out:?}"
        );
    }
}

#[test]
fn a_cut_exported_journal_fails_verify_at_its_offset_and_keeps_its_prefix() {
    let d = Demo::new();
    let file = d.export_journal("run.ajournal");
    let bytes = std::fs::read(&file).expect("read");
    let offsets = record_offsets(&bytes);
    assert_eq!(offsets.len(), 23);
    let last = offsets[22];
    let cut = d.path("cut.ajournal");
    // The last 3 bytes of the last record gone, and the trailer after it.
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN - 3;
    std::fs::write(&cut, &bytes[..end]).expect("write");

    let out = aj(&cut, &["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    let needle = format!("byte offset {last}");
    assert!(out.stdout.contains(&needle), "{out:?}");
    assert!(
        out.stderr.starts_with("error: corruption") && out.stderr.contains(&needle),
        "{out:?}"
    );
    let out = aj(&cut, &["verify", "--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["file_tail"]["offset"], last as u64);

    let out = aj(&cut, &["log", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out
        .lines()
        .iter()
        .filter(|l| !l.starts_with("!!"))
        .map(|l| line_seq(l))
        .collect();
    assert_eq!(seqs, (0..22).collect::<Vec<_>>());
    assert_eq!(std::fs::read(&cut).expect("read").len(), end);

    // Cut exactly between two records: the trailer is missing, and says so.
    let between = d.path("between.ajournal");
    std::fs::write(&between, &bytes[..offsets[10]]).expect("write");
    let out = aj(&between, &["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    let needle = format!("cut short at byte offset {}", offsets[10]);
    assert!(
        out.stdout.contains(&needle) && out.stdout.contains("without its trailer"),
        "{out:?}"
    );
}

#[test]
fn log_of_a_cut_exported_journal_reports_the_cut() {
    let d = Demo::new();
    let file = d.export_journal("run.ajournal");
    let bytes = std::fs::read(&file).expect("read");
    let last = record_offsets(&bytes)[22];
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN - 3;
    std::fs::write(&file, &bytes[..end]).expect("write");
    let out = aj(&file, &["log", &d.id]);
    let needle = format!("byte offset {last}");
    assert!(
        out.stdout.contains(&needle) || out.stderr.contains(&needle),
        "the cut should be reported as a sled torn tail is: {out:?}"
    );
}
