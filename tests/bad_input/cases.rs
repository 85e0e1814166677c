//! The table of mistakes: one row per mistake, each a name and a check
//! run against the shared fixture (`Fx`). A check asserts the error's
//! variant and what its message names; the test in `bad_input.rs` then
//! asserts that the fixture's journal is unchanged.

use agent_journal::state::{JsonOptions, SessionState, SliceRegistry};
use agent_journal::{Error, EvaluationId, Journal, JournalConfig, SessionId};

use super::{Fx, LIMIT, big, config, contents, says};
use crate::common::{ajournal_records, custom, record_offsets, tree};

/// A mistake: its name, and a check that makes it and asserts its error.
pub type Case = (&'static str, Box<dyn Fn(&Fx)>);

/// Every mistake, in the order they run against one fixture.
pub fn all() -> Vec<Case> {
    vec![
        (
            "a path that does not exist, without create_if_missing",
            Box::new(|fx| {
                let p = fx.path("missing");
                let cfg = JournalConfig {
                    create_if_missing: false,
                    ..config()
                };
                let e = Journal::open_with(&p, cfg).unwrap_err();
                assert!(
                    matches!(&e, Error::NotAJournal { path, .. } if *path == p),
                    "{e:?}"
                );
                says(&e, &[&p.display().to_string()]);
                assert!(!p.exists());
            }),
        ),
        (
            "a regular file",
            Box::new(|fx| {
                let p = fx.path("notes.txt");
                std::fs::write(&p, "AGJ not a journal").expect("write");
                for create in [true, false] {
                    let cfg = JournalConfig {
                        create_if_missing: create,
                        ..config()
                    };
                    let e = Journal::open_with(&p, cfg).unwrap_err();
                    assert!(
                        matches!(&e, Error::NotAJournal { path, .. } if *path == p),
                        "{e:?}"
                    );
                    says(&e, &[&p.display().to_string()]);
                }
                assert_eq!(std::fs::read(&p).expect("read"), b"AGJ not a journal");
            }),
        ),
        (
            "a path under a regular file",
            Box::new(|fx| {
                let f = fx.path("plain");
                std::fs::write(&f, "x").expect("write");
                let p = f.join("db");
                let e = Journal::open(&p).unwrap_err();
                assert!(
                    matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotADirectory),
                    "{e:?}"
                );
                says(&e, &[&p.display().to_string()]);
                assert_eq!(std::fs::read(&f).expect("read"), b"x");
            }),
        ),
        (
            "a non-empty directory that is not a database",
            Box::new(|fx| {
                let p = fx.path("project");
                std::fs::create_dir(&p).expect("mkdir");
                std::fs::write(p.join("Cargo.toml"), "[package]").expect("write");
                let before = tree(&p);
                let e = Journal::open(&p).unwrap_err();
                assert!(
                    matches!(&e, Error::NotAJournal { path, .. } if *path == p),
                    "{e:?}"
                );
                says(&e, &[&p.display().to_string()]);
                assert_eq!(tree(&p), before);
            }),
        ),
        (
            "the database, while it is open (locked)",
            Box::new(|fx| {
                for r in [Journal::open(&fx.db), Journal::open_with(&fx.db, config())] {
                    let e = r.unwrap_err();
                    assert!(
                        matches!(&e, Error::Locked { path } if *path == fx.db),
                        "{e:?}"
                    );
                    says(&e, &[&fx.db.display().to_string(), "locked"]);
                }
            }),
        ),
        (
            "an exported journal of a future format (AGJRNL03)",
            Box::new(|fx| {
                let p =
                    fx.export_variant("future.ajournal", |b| b[..8].copy_from_slice(b"AGJRNL03"));
                let e = Journal::open(&p).unwrap_err();
                assert!(matches!(&e, Error::Unsupported(_)), "{e:?}");
                says(&e, &["AGJRNL03"]);
                let e = fx.journal.import_journal(&p).unwrap_err();
                assert!(matches!(&e, Error::Unsupported(_)), "{e:?}");
                let bytes = std::fs::read(&p).expect("read");
                let e = agent_journal::format::ajournal::parse(&bytes, LIMIT).unwrap_err();
                assert!(matches!(&e, Error::Unsupported(_)), "{e:?}");
            }),
        ),
        (
            "an exported journal with garbage after its good records",
            Box::new(|fx| {
                let good_len = std::fs::metadata(&fx.export).expect("stat").len();
                let p = fx.export_variant("garbage.ajournal", |b| {
                    b.extend_from_slice(b"garbage, not a frame at all")
                });
                let j = Journal::open_with(&p, config()).expect("opens with its tail cut");
                assert!(j.is_read_only());
                let tail = j.file_damage().expect("the garbage is reported").clone();
                assert_eq!(tail.start, good_len);
                assert_eq!(tail.len, 27);
                assert!(tail.to_string().contains(&good_len.to_string()), "{tail}");
                assert_eq!(j.sessions().expect("sessions"), fx.foreign);
                let lens: Vec<usize> = contents(&j).iter().map(|(_, e)| e.len()).collect();
                assert_eq!(lens, vec![4, 6]);
                let e = j
                    .session(fx.foreign[0])
                    .expect("s")
                    .append(custom(9))
                    .unwrap_err();
                assert!(matches!(&e, Error::Unsupported(_)), "{e:?}");
                assert_eq!(std::fs::metadata(&p).expect("stat").len(), good_len + 27);
            }),
        ),
        (
            "an exported journal with a flipped byte in its middle record",
            Box::new(|fx| {
                let bytes = std::fs::read(&fx.export).expect("read");
                let offsets = record_offsets(&bytes);
                assert_eq!(offsets.len(), 10);
                let mid = offsets[5];
                let p = fx.export_variant("flipped.ajournal", |b| b[mid + 4 + 12] ^= 0x20);
                let e = Journal::open(&p).unwrap_err();
                assert!(
                    matches!(&e, Error::Corruption { offset: Some(o), .. } if *o == mid as u64),
                    "{e:?}"
                );
                says(&e, &[&format!("byte offset {mid}")]);
                // Importing it writes none of its good records either.
                let e = fx.journal.import_journal(&p).unwrap_err();
                assert!(matches!(&e, Error::Corruption { .. }), "{e:?}");
            }),
        ),
        (
            "an import whose sessions partly exist already",
            Box::new(|fx| {
                // The foreign export, plus a copy of session `a`.
                let mine = fx.path("mine.ajournal");
                fx.journal
                    .export_journal(&[fx.a.id()], &mine, |_| {})
                    .expect("export");
                // Its records after the foreign ones, under one trailer.
                let mine = std::fs::read(&mine).expect("read");
                let extra = ajournal_records(&mine);
                let p = fx.export_variant("mixed.ajournal", |b| {
                    let foreign = ajournal_records(b).len() as u64;
                    b.truncate(b.len() - agent_journal::format::ajournal::TRAILER_LEN);
                    b.extend_from_slice(&mine[extra[0].0..extra[extra.len() - 1].1]);
                    let crc = crc32fast::hash(b);
                    b.extend_from_slice(
                        &agent_journal::format::ajournal::TRAILER_MARK.to_le_bytes(),
                    );
                    b.extend_from_slice(&(foreign + extra.len() as u64).to_le_bytes());
                    b.extend_from_slice(&crc.to_le_bytes());
                });
                let e = fx.journal.import_journal(&p).unwrap_err();
                assert!(matches!(&e, Error::InvalidInput(_)), "{e:?}");
                says(&e, &[&fx.a.id().to_string(), "already exists"]);
                for id in &fx.foreign {
                    assert!(matches!(
                        fx.journal.session(*id),
                        Err(Error::SessionNotFound(_))
                    ));
                }
            }),
        ),
        (
            "an oversized event",
            Box::new(|fx| {
                let e = fx.b.append(big()).unwrap_err();
                assert!(
                    matches!(&e, Error::TooLarge { size, limit: LIMIT } if *size > LIMIT),
                    "{e:?}"
                );
                says(&e, &[&LIMIT.to_string(), "nothing was written"]);
                let e = fx.b.append_expected(fx.b.head(), big()).unwrap_err();
                assert!(matches!(&e, Error::TooLarge { .. }), "{e:?}");
            }),
        ),
        (
            "an oversized event inside a batch",
            Box::new(|fx| {
                let e =
                    fx.b.append_batch(vec![custom(1), big(), custom(2)])
                        .unwrap_err();
                assert!(matches!(&e, Error::TooLarge { limit: LIMIT, .. }), "{e:?}");
                let eval = fx.a.evaluation(fx.eval).expect("evaluation");
                let huge = "x".repeat(2 * LIMIT as usize);
                let e = eval.tool_result("call_1", huge).unwrap_err();
                assert!(matches!(&e, Error::TooLarge { .. }), "{e:?}");
                // The recorder did not advance: the next message gets the same sequence.
                assert_eq!(eval.next_sequence(), 2);
            }),
        ),
        (
            "an unknown session id",
            Box::new(|fx| {
                let id = SessionId::new();
                let e = fx.journal.session(id).unwrap_err();
                assert!(matches!(&e, Error::SessionNotFound(x) if *x == id), "{e:?}");
                says(&e, &[&id.to_string()]);
                let e = fx.journal.verify(Some(id), |_| {}).unwrap_err();
                assert!(matches!(&e, Error::SessionNotFound(x) if *x == id), "{e:?}");
                let out = fx.path("unknown.ajournal");
                let e = fx.journal.export_journal(&[id], &out, |_| {}).unwrap_err();
                assert!(matches!(&e, Error::SessionNotFound(x) if *x == id), "{e:?}");
            }),
        ),
        (
            "a range of events past the head",
            Box::new(|fx| {
                let b = &fx.b;
                assert_eq!(b.head(), 8);
                let id = b.id().to_string();
                let e = b.events(5..100).unwrap_err();
                assert!(
                    matches!(&e, Error::SeqOutOfRange { session, len: 8, .. } if *session == b.id()),
                    "{e:?}"
                );
                says(&e, &[&id, "seq 99", "8 events"]);
                for r in [b.events(8..=8), b.events(9..), b.events(100..200)] {
                    let e = r.unwrap_err();
                    assert!(matches!(&e, Error::SeqOutOfRange { len: 8, .. }), "{e:?}");
                }
                #[allow(clippy::reversed_empty_ranges)]
                let e = b.events(6..3).unwrap_err();
                assert!(matches!(&e, Error::SeqOutOfRange { .. }), "{e:?}");
                assert!(
                    b.events(8..8)
                        .expect("an empty range at the head")
                        .is_empty()
                );
            }),
        ),
        (
            "state_at past the head",
            Box::new(|fx| {
                for seq in [8, 1000, u64::MAX] {
                    let e = fx.b.state_at(seq).unwrap_err();
                    assert!(
                        matches!(&e, Error::SeqOutOfRange { seq: s, len: 8, .. } if *s == seq),
                        "{e:?}"
                    );
                    says(&e, &[&fx.b.id().to_string(), &format!("seq {seq}")]);
                }
            }),
        ),
        (
            "fork past the head",
            Box::new(|fx| {
                for seq in [8, u64::MAX] {
                    let e = fx.b.fork(seq).unwrap_err();
                    assert!(
                        matches!(&e, Error::SeqOutOfRange { seq: s, .. } if *s == seq),
                        "{e:?}"
                    );
                    says(&e, &[&fx.b.id().to_string()]);
                }
            }),
        ),
        (
            "an append against a stale head",
            Box::new(|fx| {
                let b = &fx.b;
                let e = b.append_expected(3, custom(1)).unwrap_err();
                assert!(
                    matches!(&e, Error::Conflict { session, expected: 3, found: 8 } if *session == b.id()),
                    "{e:?}"
                );
                says(&e, &[&b.id().to_string(), "3", "8"]);
                let e = b
                    .append_batch_at(9, vec![custom(1), custom(2)])
                    .unwrap_err();
                assert!(
                    matches!(
                        &e,
                        Error::Conflict {
                            expected: 9,
                            found: 8,
                            ..
                        }
                    ),
                    "{e:?}"
                );
                // A second handle, opened separately, is just as stale.
                let other = fx.journal.session(b.id()).expect("session");
                let e = other.append_expected(0, custom(1)).unwrap_err();
                assert!(matches!(&e, Error::Conflict { expected: 0, .. }), "{e:?}");
            }),
        ),
        (
            "a tool result for a call nobody made",
            Box::new(|fx| {
                let eval = fx.a.evaluation(fx.eval).expect("evaluation");
                let e = eval.tool_result("call_nope", "out").unwrap_err();
                assert!(matches!(&e, Error::InvalidInput(_)), "{e:?}");
                says(&e, &["call_nope", &fx.eval.to_string()]);
                let e = eval.tool_started("call_nope").unwrap_err();
                assert!(matches!(&e, Error::InvalidInput(_)), "{e:?}");
                let e = eval.tool_failed("call_nope", "boom").unwrap_err();
                assert!(matches!(&e, Error::InvalidInput(_)), "{e:?}");
                // Nor is an evaluation that is not in the session.
                let e = fx.a.evaluation(EvaluationId::new()).unwrap_err();
                assert!(
                    matches!(&e, Error::ConversationNotFound(s) if *s == fx.a.id()),
                    "{e:?}"
                );
                says(&e, &[&fx.a.id().to_string()]);
            }),
        ),
        (
            "bad WINK JSON snapshots",
            Box::new(|fx| {
                let good = fx.a.state_cloned().to_json(&JsonOptions {
                    include_logs: true,
                    ..JsonOptions::default()
                });
                let registry = SliceRegistry::default();
                assert!(SessionState::from_json(&good, &registry).is_ok());
                let mut doc: serde_json::Value = serde_json::from_str(&good).expect("json");
                doc["version"] = "2".into();
                let future = doc.to_string();
                let mut doc: serde_json::Value = serde_json::from_str(&good).expect("json");
                doc["created_at"] = "yesterday".into();
                let bad_time = doc.to_string();
                let mut doc: serde_json::Value = serde_json::from_str(&good).expect("json");
                doc.as_object_mut().expect("object").remove("slices");
                let no_slices = doc.to_string();
                for (text, names) in [
                    ("", "JSON"),
                    ("{\"version\":", "JSON"),
                    ("[]", "object"),
                    ("null", "object"),
                    (future.as_str(), "version"),
                    (bad_time.as_str(), "yesterday"),
                    (no_slices.as_str(), "slices"),
                ] {
                    let e = SessionState::from_json(text, &registry).unwrap_err();
                    assert!(matches!(&e, Error::SnapshotRestore(_)), "{text:.40}: {e:?}");
                    says(&e, &[names]);
                }
            }),
        ),
    ]
}
