//! The store contract, run against sled and memory alike.

use agent_journal::{Error, Event, Journal, JournalConfig, SessionId};

use crate::common::{backends, backends_with, custom};

#[test]
fn a_new_session_starts_with_session_opened_at_seq_0() {
    for b in backends() {
        let s = b
            .journal
            .create_session_with_labels(vec![("agent".into(), "t".into())])
            .expect(b.name);
        assert_eq!(s.head(), 1, "{}", b.name);
        let evs = s.events(..).expect(b.name);
        assert!(
            matches!(&evs[0].event, Event::SessionOpened { labels } if labels[0].1 == "t"),
            "{}",
            b.name
        );
        assert_eq!(evs[0].seq, 0);
        assert_eq!(evs[0].session, s.id());
    }
}

#[test]
fn appends_get_consecutive_seqs_and_read_back_equal() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        for n in 0..50 {
            assert_eq!(s.append(custom(n)).expect(b.name), n + 1, "{}", b.name);
        }
        let evs = s.events(1..51).expect(b.name);
        assert_eq!(evs.len(), 50);
        for (i, e) in evs.iter().enumerate() {
            assert_eq!(e.seq, i as u64 + 1);
            assert_eq!(e.event, custom(i as u64), "{}", b.name);
        }
        assert_eq!(s.events(10..=12).expect(b.name).len(), 3);
        assert_eq!(s.events(51..51).expect(b.name).len(), 0);
    }
}

#[test]
fn a_range_past_the_head_is_an_error_naming_the_session() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        s.append(custom(1)).expect(b.name);
        let r = s.events(0..5);
        assert!(
            matches!(r, Err(Error::SeqOutOfRange { session, len: 2, .. }) if session == s.id()),
            "{}: {r:?}",
            b.name
        );
        assert!(
            matches!(s.state_at(2), Err(Error::SeqOutOfRange { seq: 2, .. })),
            "{}",
            b.name
        );
        let msg = s.events(3..).map(|_| ()).unwrap_err().to_string();
        assert!(msg.contains(&s.id().to_string()), "{msg}");
    }
}

#[test]
fn a_stale_writer_gets_conflict_and_writes_nothing() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        assert_eq!(s.append_expected(1, custom(1)).expect(b.name), 1);
        let r = s.append_expected(1, custom(2));
        assert!(
            matches!(
                r,
                Err(Error::Conflict {
                    expected: 1,
                    found: 2,
                    ..
                })
            ),
            "{}: {r:?}",
            b.name
        );
        assert_eq!(s.head(), 2);
        assert_eq!(s.events(..).expect(b.name).len(), 2);
    }
}

#[test]
fn racing_writers_on_one_session_each_seq_is_won_exactly_once() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        let wins = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let s = s.clone();
                let wins = &wins;
                scope.spawn(move || {
                    let mut mine = 0;
                    while mine < 50 {
                        let head = s.head();
                        match s.append_expected(head, custom(t)) {
                            Ok(seq) => {
                                wins.lock().expect("lock").push(seq);
                                mine += 1;
                            }
                            Err(Error::Conflict { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                });
            }
        });
        let mut w = wins.into_inner().expect("lock");
        w.sort_unstable();
        assert_eq!(w, (1..=200).collect::<Vec<u64>>(), "{}", b.name);
        assert_eq!(s.events(..).expect(b.name).len(), 201);
    }
}

#[test]
fn an_oversized_event_in_a_batch_writes_nothing_at_all() {
    let small = || JournalConfig {
        max_event_bytes: 1024,
        ..JournalConfig::default()
    };
    for b in backends_with(small) {
        let s = b.journal.create_session().expect(b.name);
        let big = Event::Custom {
            kind: "big".into(),
            payload: vec![0u8; 4096],
        };
        let r = s.append_batch(vec![custom(1), big.clone(), custom(2)]);
        assert!(
            matches!(r, Err(Error::TooLarge { limit: 1024, .. })),
            "{}: {r:?}",
            b.name
        );
        assert!(matches!(s.append(big), Err(Error::TooLarge { .. })));
        assert_eq!(s.head(), 1, "{}", b.name);
        assert_eq!(s.events(..).expect(b.name).len(), 1);
        // The session still works.
        assert_eq!(s.append(custom(3)).expect(b.name), 1);
    }
}

#[test]
fn batches_are_atomic_and_consecutive() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        let (first, last) = s.append_batch((0..10).map(custom).collect()).expect(b.name);
        assert_eq!((first, last), (1, 10));
        assert_eq!(s.append_batch(vec![]).expect(b.name), (11, 11));
        assert_eq!(s.head(), 11);
    }
}

#[test]
fn unknown_sessions_are_reported() {
    for b in backends() {
        let id = SessionId::new();
        let r = b.journal.session(id);
        assert!(
            matches!(r, Err(Error::SessionNotFound(x)) if x == id),
            "{}",
            b.name
        );
    }
}

#[test]
fn sessions_are_listed_in_creation_order() {
    for b in backends() {
        let ids: Vec<SessionId> = (0..5)
            .map(|_| b.journal.create_session().expect(b.name).id())
            .collect();
        assert_eq!(b.journal.sessions().expect(b.name), ids, "{}", b.name);
    }
}

#[test]
fn many_threads_on_their_own_sessions_lose_nothing() {
    for b in backends() {
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let j = b.journal.clone();
                scope.spawn(move || {
                    let s = j.create_session().expect("create");
                    for n in 0..200 {
                        s.append(custom(n)).expect("append");
                    }
                });
            }
        });
        let ids = b.journal.sessions().expect(b.name);
        assert_eq!(ids.len(), 8);
        for id in ids {
            let s = b.journal.session(id).expect(b.name);
            assert_eq!(s.head(), 201);
            assert_eq!(s.events(..).expect(b.name).len(), 201);
        }
    }
}

#[test]
fn synced_appends_survive_reopen_and_share_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut ids = Vec::new();
    {
        let j = Journal::open(&path).expect("open");
        assert_eq!(j.config().durability, agent_journal::Durability::Synced);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let j = j.clone();
                    scope.spawn(move || {
                        let s = j.create_session().expect("create");
                        for n in 0..25 {
                            s.append(custom(n)).expect("append");
                        }
                        s.id()
                    })
                })
                .collect();
            ids = handles
                .into_iter()
                .map(|h| h.join().expect("join"))
                .collect();
        });
    }
    let j = Journal::open(&path).expect("reopen");
    for id in ids {
        let s = j.session(id).expect("session");
        let evs = s.events(..).expect("events");
        assert_eq!(evs.len(), 26);
        assert_eq!(evs[25].event, custom(24));
    }
}

#[test]
fn a_second_opener_is_told_the_database_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let _first = Journal::open(&path).expect("open");
    let r = Journal::open(&path);
    match r {
        Err(e @ Error::Locked { .. }) => {
            assert!(e.to_string().contains(&path.display().to_string()))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[test]
fn paths_that_are_not_databases_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hello").expect("write");
    assert!(matches!(
        Journal::open(&file),
        Err(Error::NotAJournal { .. })
    ));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "hello");

    let other = dir.path().join("project");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("Cargo.toml"), "x").expect("write");
    assert!(matches!(
        Journal::open(&other),
        Err(Error::NotAJournal { .. })
    ));
    assert_eq!(
        std::fs::read_dir(&other).expect("ls").count(),
        1,
        "nothing was created in it"
    );

    let missing = dir.path().join("missing");
    let cfg = JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    assert!(matches!(
        Journal::open_with(&missing, cfg),
        Err(Error::NotAJournal { .. })
    ));
    assert!(!missing.exists());
}
