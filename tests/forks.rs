//! Forks that share their parent's prefix: making one writes one event;
//! the prefix reads as the parent's own events (same session, seqs and
//! times); the state is the parent's at the fork point plus the fork's own;
//! it survives reopening with and without snapshots; the parent cannot be
//! deleted under it; an exported fork carries its ancestors; a fork whose
//! parent is missing is reported, not shown short; forks made by earlier
//! versions (copies) still read.

use agent_journal::state::SessionState;
use agent_journal::{CheckpointStrategy, Durability, Error, Event, Journal, JournalConfig};

use crate::common::{backends, custom, path_str, run_cli};

fn fold(events: &[agent_journal::Envelope]) -> SessionState {
    let mut s = SessionState::default();
    for e in events {
        s.apply(e);
    }
    s
}

#[test]
fn a_fork_writes_one_event_and_reads_its_parents_prefix_as_it_is() {
    for b in backends() {
        let parent = b.journal.create_session().expect(b.name);
        for n in 0..2_000 {
            parent.append(custom(n)).expect(b.name);
        }
        let fork = parent.fork(1_500).expect(b.name);
        assert_eq!(
            b.journal.stream_len(fork.id()).expect(b.name),
            Some(1),
            "{}: one stored event, whatever the prefix",
            b.name
        );
        assert_eq!(fork.head(), 1_502);
        let shared = fork.events(..1_501).expect(b.name);
        assert_eq!(shared, parent.events(..1_501).expect(b.name), "{}", b.name);
        let marker = &fork.events(1_501..).expect(b.name)[0];
        assert_eq!((marker.session, marker.seq), (fork.id(), 1_501));
        assert!(
            matches!(marker.event, Event::ForkPoint { parent: p, at: 1_500 } if p == parent.id())
        );
        // The fork diverges; the parent does not see it.
        assert_eq!(fork.append(custom(99_999)).expect(b.name), 1_502);
        parent.append(custom(5_000)).expect(b.name);
        assert_eq!(parent.head(), 2_002);
        let all = fork.events(..).expect(b.name);
        assert_eq!(all.len(), 1_503);
        assert!(all.iter().enumerate().all(|(i, e)| e.seq == i as u64));
        assert!(
            *fork.state() == fold(&all),
            "{}: state == fold(events)",
            b.name
        );
        assert_eq!(fork.state().forked_from(), Some((parent.id(), 1_500)));
        assert!(fork.state_at(700).expect(b.name) == parent.state_at(700).expect(b.name));
        assert!(fork.state_at(1_501).expect(b.name) == fold(&all[..1_502]));
        assert!(matches!(
            fork.events(0..1_504),
            Err(Error::SeqOutOfRange { .. })
        ));
        assert!(
            b.journal
                .verify(None, |_| {})
                .expect(b.name)
                .problems
                .is_empty()
        );
    }
}

#[test]
fn a_fork_reopens_with_and_without_its_snapshot() {
    for every in [None, Some(50)] {
        let dir = tempfile::tempdir().unwrap();
        let config = || JournalConfig {
            durability: Durability::Buffered,
            checkpoint: every.map_or(
                CheckpointStrategy::OnDemand,
                CheckpointStrategy::EveryEvents,
            ),
            ..JournalConfig::default()
        };
        let (fork_id, before) = {
            let journal = Journal::open_with(dir.path().join("db"), config()).unwrap();
            let parent = journal.create_session().unwrap();
            for n in 0..300 {
                parent.append(custom(n)).unwrap();
            }
            let fork = parent.fork(200).unwrap();
            for n in 0..120 {
                fork.append(custom(1_000 + n)).unwrap();
            }
            journal.flush().unwrap();
            (fork.id(), fork.state_cloned())
        };
        let journal = Journal::open_with(dir.path().join("db"), config()).unwrap();
        let fork = journal.session(fork_id).unwrap();
        let stats = fork.load_stats();
        assert_eq!(stats.snapshot_rejected, None, "{every:?}");
        assert_eq!(stats.snapshot_seq.is_some(), every.is_some(), "{stats:?}");
        assert_eq!(fork.head(), 322);
        assert!(
            fork.state_cloned() == before,
            "{every:?}: the same state after reopening"
        );
        assert!(journal.verify(None, |_| {}).unwrap().problems.is_empty());
    }
}

#[test]
fn the_parent_stays_while_forks_read_it_and_exports_carry_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (parent_id, fork_id, grandchild_id) = {
        let journal = Journal::open(&db).unwrap();
        let parent = journal.create_session().unwrap();
        for n in 0..20 {
            parent.append(custom(n)).unwrap();
        }
        let fork = parent.fork(9).unwrap();
        fork.append(custom(100)).unwrap();
        let grandchild = fork.fork(11).unwrap();
        grandchild.append(custom(200)).unwrap();
        assert_eq!(journal.forks_of(parent.id()).unwrap(), vec![(fork.id(), 9)]);
        assert_eq!(
            journal.lineage(grandchild.id()).unwrap(),
            vec![parent.id(), fork.id(), grandchild.id()]
        );
        let refused = journal.delete_session(parent.id(), true);
        assert!(
            matches!(&refused, Err(Error::InvalidInput(m)) if m.contains(&fork.id().to_string())),
            "{refused:?}"
        );
        (parent.id(), fork.id(), grandchild.id())
    };
    // Exported through the CLI, the grandchild brings its ancestors.
    let file = dir.path().join("grandchild.ajournal");
    let out = run_cli(
        &db,
        &[
            "export",
            &grandchild_id.to_string(),
            "--format",
            "journal",
            "-o",
            path_str(&file),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = dir.path().join("other");
    let out = run_cli(&other, &["import", path_str(&file), "--format", "journal"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_cli(&other, &["--json", "log", &grandchild_id.to_string()]);
    let lines = crate::common::json_lines(&out.stdout);
    let lines = lines.as_array().unwrap();
    assert_eq!(
        lines.len(),
        14,
        "0..=11 read through two parents, its marker, its event"
    );
    assert_eq!(lines[0]["session"], parent_id.to_string());
    assert_eq!(
        lines[10]["session"],
        fork_id.to_string(),
        "the fork's marker"
    );
    assert_eq!(lines[12]["type"], "forked");
    assert!(run_cli(&other, &["verify"]).status.success());

    // The fork alone (its parent left out): an error naming the parent,
    // never a short history.
    let alone = dir.path().join("alone.ajournal");
    Journal::open(&db)
        .unwrap()
        .export_journal(&[fork_id], &alone, |_| {})
        .unwrap();
    let third = dir.path().join("third");
    assert!(
        run_cli(&third, &["import", path_str(&alone), "--format", "journal"])
            .status
            .success()
    );
    let out = run_cli(&third, &["log", &fork_id.to_string()]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&parent_id.to_string()));
    let out = run_cli(&third, &["verify"]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn waiting_for_a_forks_events_counts_its_prefix() {
    for b in backends() {
        let parent = b.journal.create_session().expect(b.name);
        for n in 0..6 {
            parent.append(custom(n)).expect(b.name);
        }
        let fork = parent.fork(5).expect(b.name);
        assert_eq!(fork.head(), 7);
        let short = std::time::Duration::from_millis(20);
        // Nothing new: the length as the fork's seqs count it.
        assert_eq!(
            b.journal
                .wait_for_events(fork.id(), 7, short)
                .expect(b.name),
            7
        );
        fork.append(custom(9)).expect(b.name);
        assert_eq!(
            b.journal
                .wait_for_events(fork.id(), 7, short)
                .expect(b.name),
            8,
            "{}",
            b.name
        );
    }
}
