//! Progress of the long commands: importing an exported journal and
//! salvaging report the events written against their total, rising to it
//! (what the command line's bars show, with their ETA).

use agent_journal::Journal;

use crate::common::custom;

fn rising_to_the_total(calls: &[(u64, u64)], total: u64) {
    assert!(!calls.is_empty());
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "{calls:?}");
    assert!(calls.iter().all(|&(_, t)| t == total), "{calls:?}");
    assert_eq!(calls.last().map(|c| c.0), Some(total));
}

#[test]
fn import_and_salvage_report_their_progress() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("all.ajournal");
    {
        let journal = Journal::open(&db).unwrap();
        for n in [10_000u64, 3] {
            let s = journal.create_session().unwrap();
            s.append_batch((0..n).map(custom).collect()).unwrap();
        }
        journal.export_journal(&[], &file, |_| {}).unwrap();
    }
    let total = 10_001 + 4;

    let mut calls = Vec::new();
    let other = Journal::open(dir.path().join("other")).unwrap();
    other
        .import_journal_with(&file, |done, total| calls.push((done, total)))
        .unwrap();
    rising_to_the_total(&calls, total);
    assert!(calls.len() > 3, "in chunks: {calls:?}");

    let mut calls = Vec::new();
    agent_journal::maintenance::salvage_database_with(
        &db,
        &dir.path().join("saved"),
        1 << 20,
        |d, t| {
            calls.push((d, t));
        },
    )
    .unwrap();
    rising_to_the_total(&calls, total);

    let mut calls = Vec::new();
    agent_journal::maintenance::salvage_file_with(
        &file,
        &dir.path().join("saved2"),
        1 << 20,
        |d, t| {
            calls.push((d, t));
        },
    )
    .unwrap();
    rising_to_the_total(&calls, total);
}
