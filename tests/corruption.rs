//! The corruption campaign: seeded random damage to a real exported journal
//! and to two real databases of demo-like sessions, many cases per kind of
//! damage: one closed cleanly, and one whose writer was killed (SIGKILL) in
//! the middle of `Synced` appends (its truth is what was acknowledged; its
//! write-ahead log still holds the records of its current generation).
//!
//! Every case must end in one of these ways: the input opens and reads with
//! the damage reported at its place (a torn tail, `Journal::losses()`,
//! `file_damage()` with its byte offset) and everything returned is a
//! prefix of the original, event for event; or it fails with
//! `Error::Corruption` carrying the seq or the byte offset; or nothing is
//! lost (the write-ahead log gave back what sled lost, or the damage
//! touched nothing needed). Never a panic (each case runs under
//! `catch_unwind`, or in a child process), never wrong data, and never a
//! silent loss: an acknowledged event missing that nothing reports. `verify`
//! through the binary exits 3 naming the place, and `salvage --to` writes a
//! database that verifies clean and holds every record that was not
//! damaged.
//!
//! Each kind prints one line, `[kind] damaged inputs: N / detected or
//! recovered: N / panics: 0 / silent losses: 0 (detail)`, and fails on any
//! panic, silent loss, wrong data or other broken promise; the long run
//! ends with the grand total over all kinds.
//!
//! This file makes the damage (one function per kind) and holds the tests.
//! The rest, under `corruption/`: `fixture.rs` (the sessions and their
//! export), `killed.rs` (the killed database, built once per test run by a
//! child process that is killed), `file_cases.rs`, `db_cases.rs` and
//! `killed_cases.rs` (what a damaged export or database must give),
//! `sled_file.rs` (damage to sled's own file, read in a child process),
//! `observe.rs` (what the library shows of a database, judged against what
//! was acknowledged), `verdict.rs` (judging and counting the outcomes),
//! `process.rs` (runs with a time limit) and `bugs.rs` (one small
//! deterministic test per finding of the campaign).
//!
//! `AJ_CORRUPT_CASES` sets the cases per kind (the defaults keep the suite
//! fast), `AJ_CORRUPT_SEED` the seed (the killed database also depends on
//! the moment of the kill: what it holds is printed). The long variant is
//! ignored:
//! `AJ_CORRUPT_CASES=2000 cargo test --release --test integration -- --ignored --nocapture corruption::long`.

mod bugs;
mod db_cases;
mod file_cases;
mod fixture;
mod killed;
mod killed_cases;
mod observe;
mod process;
mod sled_file;
mod verdict;

use agent_journal::SessionId;

use crate::common::Rng;
use db_cases::{DbDamage, apply, check_db};
use file_cases::{Depth, check_file};
use fixture::Fixture;
use killed::Killed;
use sled_file::Target;
use verdict::Tally;

/// Cases per damage kind: `AJ_CORRUPT_CASES`, else `default`.
fn cases(default: usize) -> usize {
    std::env::var("AJ_CORRUPT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The campaign's seed: `AJ_CORRUPT_SEED`, else a constant.
fn seed() -> u64 {
    std::env::var("AJ_CORRUPT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00A6_E47C_0FFE)
}

/// A damaged copy of the export: its bytes, the records still whole in it,
/// and what was done.
struct FileDamage {
    bytes: Vec<u8>,
    intact: Vec<(SessionId, u64)>,
    what: String,
}

type MakeFile = fn(&Fixture, &mut Rng) -> Option<FileDamage>;

fn rng_for(kind: &str) -> Rng {
    let salt = kind.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    Rng::new(seed() ^ salt)
}

/// Runs `n` cases of one kind of file damage. One case in 10 also runs
/// `verify` and `salvage_file`, one in 50 `salvage` through the binary.
fn file_campaign(fx: &Fixture, kind: &str, n: usize, make: MakeFile) -> Tally {
    let mut rng = rng_for(kind);
    let mut tally = Tally::new(kind);
    let mut case = 0;
    let mut attempts = 0;
    while case < n && attempts < n * 10 {
        attempts += 1;
        let Some(d) = make(fx, &mut rng) else {
            continue;
        };
        if d.bytes == fx.bytes {
            continue;
        }
        let depth = match case {
            c if c % 50 == 0 => Depth::Cli,
            c if c % 10 == 0 => Depth::Verify,
            _ => Depth::Open,
        };
        tally.case(
            || format!("{kind} #{case} ({})", d.what),
            |_| check_file(fx, &d.bytes, &d.intact, depth),
        );
        case += 1;
    }
    tally
}

fn all_records(fx: &Fixture) -> Vec<(SessionId, u64)> {
    fx.records.iter().map(|r| (r.session, r.seq)).collect()
}

fn bit_flips(fx: &Fixture, rng: &mut Rng) -> Option<FileDamage> {
    let mut bytes = fx.bytes.clone();
    let mut what = Vec::new();
    for _ in 0..rng.between(1, 3) {
        let at = rng.below(bytes.len());
        let bit = 1u8 << rng.below(8);
        bytes[at] ^= bit;
        what.push(format!("byte {at} ^ {bit:#04x}"));
    }
    Some(FileDamage {
        intact: fx.intact_in_place(&bytes),
        bytes,
        what: what.join(", "),
    })
}

fn zeroed_range(fx: &Fixture, rng: &mut Rng) -> Option<FileDamage> {
    let mut bytes = fx.bytes.clone();
    let start = rng.below(bytes.len());
    let len = if rng.below(4) == 0 {
        rng.between(65, 600)
    } else {
        rng.between(1, 64)
    };
    let end = (start + len).min(bytes.len());
    bytes[start..end].fill(0);
    Some(FileDamage {
        intact: fx.intact_in_place(&bytes),
        bytes,
        what: format!("zeroed {start}..{end}"),
    })
}

fn duplicated_record(fx: &Fixture, rng: &mut Rng) -> Option<FileDamage> {
    let r = fx.records[rng.below(fx.records.len())];
    let at_index = rng.below(fx.records.len() + 1);
    let at = fx
        .records
        .get(at_index)
        .map(|x| x.start)
        .unwrap_or(fx.bytes.len());
    let mut bytes = fx.bytes[..at].to_vec();
    bytes.extend_from_slice(&fx.bytes[r.start..r.end]);
    bytes.extend_from_slice(&fx.bytes[at..]);
    Some(FileDamage {
        bytes,
        intact: all_records(fx),
        what: format!("copy of {} seq {} inserted at byte {at}", r.session, r.seq),
    })
}

fn swapped_records(fx: &Fixture, rng: &mut Rng) -> Option<FileDamage> {
    let i = rng.below(fx.records.len());
    let j = rng.below(fx.records.len());
    if i == j {
        return None;
    }
    let (i, j) = (i.min(j), i.max(j));
    let (a, b) = (fx.records[i], fx.records[j]);
    let mut bytes = fx.bytes[..a.start].to_vec();
    bytes.extend_from_slice(&fx.bytes[b.start..b.end]);
    bytes.extend_from_slice(&fx.bytes[a.end..b.start]);
    bytes.extend_from_slice(&fx.bytes[a.start..a.end]);
    bytes.extend_from_slice(&fx.bytes[b.end..]);
    Some(FileDamage {
        bytes,
        intact: all_records(fx),
        what: format!(
            "records {i} ({} seq {}) and {j} ({} seq {}) exchanged",
            a.session, a.seq, b.session, b.seq
        ),
    })
}

fn garbage_appended(fx: &Fixture, rng: &mut Rng) -> Option<FileDamage> {
    let mut bytes = fx.bytes.clone();
    let r = fx.records[rng.below(fx.records.len())];
    let what = match rng.below(4) {
        0 => {
            let n = rng.between(1, 600);
            bytes.extend(rng.bytes(n));
            format!("{n} random bytes")
        }
        1 => {
            // A plausible length, then fewer or other bytes than it says.
            let n = rng.between(0, 300);
            bytes.extend_from_slice(&(rng.between(0, 400) as u32).to_le_bytes());
            bytes.extend(rng.bytes(n));
            format!("a length prefix and {n} random bytes")
        }
        2 => {
            // A record copied only in part (a torn copy).
            let cut = rng.between(r.start + 1, r.end - 1);
            bytes.extend_from_slice(&fx.bytes[r.start..cut]);
            format!(
                "the first {} bytes of {} seq {}",
                cut - r.start,
                r.session,
                r.seq
            )
        }
        _ => {
            // A whole copy of a record with one bit flipped.
            let mut rec = fx.bytes[r.start..r.end].to_vec();
            let at = rng.between(4, rec.len() - 1);
            rec[at] ^= 1 << rng.below(8);
            bytes.extend(rec);
            format!("a copy of {} seq {} with a flipped bit", r.session, r.seq)
        }
    };
    Some(FileDamage {
        bytes,
        intact: all_records(fx),
        what,
    })
}

/// Every length from 0 to the whole file minus one.
fn truncations(fx: &Fixture) -> Tally {
    let mut tally = Tally::new("ajournal: truncated at every length");
    let len = fx.bytes.len();
    for (i, cut) in (0..len).enumerate() {
        let bytes = &fx.bytes[..cut];
        let intact: Vec<(SessionId, u64)> = fx
            .records
            .iter()
            .filter(|r| r.end <= cut)
            .map(|r| (r.session, r.seq))
            .collect();
        // Every length through the parser; one in 13, and every cut next
        // to a record boundary, through `Journal::open`; one in 400 also
        // through `verify` and `salvage`.
        let near_boundary = fx
            .records
            .iter()
            .any(|r| r.start.abs_diff(cut) <= 1 || r.start + 5 == cut);
        let depth = match i {
            i if i % 2000 == 0 => Depth::Cli,
            i if i % 400 == 0 => Depth::Verify,
            i if (i % 13 == 0 || near_boundary) => Depth::Open,
            _ => Depth::Parse,
        };
        tally.case(
            || format!("cut at {cut} of {len}"),
            |_| check_file(fx, bytes, &intact, depth),
        );
    }
    tally
}

/// Picks the damage of one database case among the frames sled holds:
/// each session with how many events sled holds of it.
type MakeDb = fn(&[(SessionId, u64)], &mut Rng) -> Vec<DbDamage>;

/// Runs `n` database cases, each on a fresh copy of the fixture database.
fn db_campaign(fx: &Fixture, kind: &str, n: usize, make: MakeDb) -> Tally {
    let mut rng = rng_for(kind);
    let mut tally = Tally::new(kind);
    let stored = sessions(fx);
    for case in 0..n {
        let damages = make(&stored, &mut rng);
        let db = fx.copy_db(&format!("db-case-{case}"));
        apply(&db, &damages, &mut rng);
        tally.case(
            || format!("{kind} #{case}: {damages:?}"),
            |_| check_db(fx, &db, &damages),
        );
        let _ = std::fs::remove_dir_all(&db);
        let _ = std::fs::remove_dir_all(db.with_extension("work"));
    }
    tally
}

/// The same kinds of damage to copies of the killed database (`kind` is
/// prefixed with "killed database: "). Half the cases also salvage.
fn killed_db_campaign(kind: &str, n: usize, make: MakeDb) -> Tally {
    let kf = Killed::get();
    let kind = format!("killed database: {kind}");
    let mut rng = rng_for(&kind);
    let mut tally = Tally::new(&kind);
    let scratch = tempfile::tempdir().expect("tempdir");
    // Sessions with at least 3 frames in sled (the makers pick a seq below
    // the last one, or the last two).
    let stored = kf.stored(3);
    for case in 0..n {
        let damages = make(&stored, &mut rng);
        let db = scratch.path().join(format!("case-{case}"));
        kf.copy_db(&db);
        apply(&db, &damages, &mut rng);
        tally.case(
            || format!("{kind} #{case}: {damages:?}"),
            |notes| killed_cases::check_killed_db(kf, &db, &damages, case % 2 == 0, notes),
        );
        let _ = std::fs::remove_dir_all(&db);
        let _ = std::fs::remove_dir_all(db.with_extension("work"));
    }
    tally
}

/// The last records of the killed database's write-ahead log damaged: a
/// byte of the last or the second-to-last record flipped, the file cut
/// inside it, or the record zeroed from a point to its end (a torn write).
/// One case in three also salvages.
fn wal_campaign(n: usize) -> Tally {
    let kf = Killed::get();
    let kind = "killed database: last write-ahead-log records damaged";
    let mut rng = rng_for(kind);
    let mut tally = Tally::new(kind);
    let scratch = tempfile::tempdir().expect("tempdir");
    for case in 0..n {
        let db = scratch.path().join(format!("wal-case-{case}"));
        kf.copy_db(&db);
        let mut notes = verdict::Notes::default();
        let what = killed_cases::damage_wal(kf, &db, &mut rng, &mut notes);
        tally.case(
            || format!("{kind} #{case}: {what}"),
            |n| {
                n.sled.append(&mut notes.sled);
                killed_cases::check_wal(kf, &db, case % 3 == 0)
            },
        );
        let _ = std::fs::remove_dir_all(&db);
        let _ = std::fs::remove_dir_all(db.with_extension("work"));
    }
    tally
}

/// Every session of the fixture with its length.
fn sessions(fx: &Fixture) -> Vec<(SessionId, u64)> {
    fx.truth
        .iter()
        .map(|(id, t)| (*id, t.len() as u64))
        .collect()
}

fn pick_session(stored: &[(SessionId, u64)], rng: &mut Rng) -> (SessionId, u64) {
    stored[rng.below(stored.len())]
}

fn middle_flips(stored: &[(SessionId, u64)], rng: &mut Rng) -> Vec<DbDamage> {
    let mut out: Vec<DbDamage> = Vec::new();
    for _ in 0..rng.between(1, 3) {
        let (id, len) = pick_session(stored, rng);
        let seq = rng.below(len as usize - 1) as u64;
        if !out
            .iter()
            .any(|d| matches!(d, DbDamage::Flip(i, s) if *i == id && *s == seq))
        {
            out.push(DbDamage::Flip(id, seq));
        }
    }
    out
}

fn last_flips(stored: &[(SessionId, u64)], rng: &mut Rng) -> Vec<DbDamage> {
    let mut out = Vec::new();
    for &(id, len) in stored {
        if rng.below(2) == 0 {
            continue;
        }
        out.push(DbDamage::Flip(id, len - 1));
        if rng.below(3) == 0 {
            out.push(DbDamage::Flip(id, len - 2));
        }
    }
    if out.is_empty() {
        let (id, len) = pick_session(stored, rng);
        out.push(DbDamage::Flip(id, len - 1));
    }
    out
}

fn gaps(stored: &[(SessionId, u64)], rng: &mut Rng) -> Vec<DbDamage> {
    let (id, len) = pick_session(stored, rng);
    vec![DbDamage::Remove(id, rng.below(len as usize - 1) as u64)]
}

fn swaps(stored: &[(SessionId, u64)], rng: &mut Rng) -> Vec<DbDamage> {
    loop {
        let (a, la) = pick_session(stored, rng);
        let (b, lb) = pick_session(stored, rng);
        let x = (a, rng.below(la as usize) as u64);
        let y = (b, rng.below(lb as usize) as u64);
        if x != y {
            return vec![DbDamage::Swap(x, y)];
        }
    }
}

fn sled_file_campaign(kind: &str, t: &Target, n: usize) -> Tally {
    let mut rng = rng_for(kind);
    let mut tally = Tally::new(kind);
    for case in 0..n {
        tally.case(
            || format!("{kind} #{case}"),
            |notes| sled_file::sled_file_case(t, &mut rng, case, notes),
        );
    }
    tally
}

/// Flipped bytes in the clean fixture's sled file: every event of it was
/// acknowledged (flushed, then the journal closed).
const SLED_FILE: &str = "database: flipped bytes in sled's db file";
const COMPRESSED_SLED_FILE: &str = "compressed database: flipped bytes in sled's db file";

fn clean_sled_file_campaign(fx: &Fixture, name: &str, n: usize) -> Tally {
    let acked = sessions(fx).into_iter().collect();
    let t = Target {
        db: &fx.db,
        scratch: fx.dir.path(),
        truth: &fx.truth,
        acked: &acked,
    };
    sled_file_campaign(name, &t, n)
}

fn killed_sled_file_campaign(n: usize) -> Tally {
    let kf = Killed::get();
    let scratch = tempfile::tempdir().expect("tempdir");
    let t = Target {
        db: &kf.db,
        scratch: scratch.path(),
        truth: &kf.truth,
        acked: &kf.acked,
    };
    sled_file_campaign("killed database: flipped bytes in sled's db file", &t, n)
}

#[test]
fn ajournal_bit_flips() {
    let fx = Fixture::new();
    file_campaign(&fx, "ajournal: bit flips", cases(300), bit_flips).finish();
}

#[test]
fn ajournal_truncated_at_every_length() {
    // Two sessions: the strict reader looks for a readable record after a
    // damaged one, so a debug build pays O(n^2) over every cut of n bytes;
    // the long variant cuts the whole export.
    let fx = Fixture::exporting(2);
    truncations(&fx).finish();
}

#[test]
fn ajournal_zeroed_ranges() {
    let fx = Fixture::new();
    file_campaign(&fx, "ajournal: zeroed ranges", cases(200), zeroed_range).finish();
}

#[test]
fn ajournal_duplicated_records() {
    let fx = Fixture::new();
    file_campaign(
        &fx,
        "ajournal: duplicated records",
        cases(100),
        duplicated_record,
    )
    .finish();
}

#[test]
fn ajournal_swapped_records() {
    let fx = Fixture::new();
    file_campaign(
        &fx,
        "ajournal: swapped records",
        cases(100),
        swapped_records,
    )
    .finish();
}

#[test]
fn ajournal_garbage_appended() {
    let fx = Fixture::new();
    file_campaign(
        &fx,
        "ajournal: garbage appended",
        cases(100),
        garbage_appended,
    )
    .finish();
}

#[test]
fn database_flipped_middle_frames() {
    let fx = Fixture::new();
    db_campaign(
        &fx,
        "database: flipped middle frames",
        cases(8),
        middle_flips,
    )
    .finish();
}

#[test]
fn database_flipped_last_frames() {
    let fx = Fixture::new();
    db_campaign(&fx, "database: flipped last frames", cases(6), last_flips).finish();
}

#[test]
fn database_gaps() {
    let fx = Fixture::new();
    db_campaign(&fx, "database: a middle key removed", cases(6), gaps).finish();
}

#[test]
fn database_swapped_values() {
    let fx = Fixture::new();
    db_campaign(&fx, "database: two values swapped", cases(6), swaps).finish();
}

#[test]
fn sled_db_file_flips() {
    let fx = Fixture::new();
    clean_sled_file_campaign(&fx, SLED_FILE, cases(6)).finish();
}

/// The same campaigns on a database whose pages are compressed: sled's
/// zstd frames damaged in its file, and frames damaged through sled.
#[test]
fn compressed_sled_db_file_flips() {
    let fx = Fixture::compressed();
    clean_sled_file_campaign(&fx, COMPRESSED_SLED_FILE, cases(6)).finish();
}

#[test]
fn compressed_database_flipped_middle_frames() {
    let fx = Fixture::compressed();
    db_campaign(
        &fx,
        "compressed database: flipped middle frames",
        cases(6),
        middle_flips,
    )
    .finish();
}

#[test]
fn killed_database_flipped_middle_frames() {
    killed_db_campaign("flipped middle frames", cases(4), middle_flips).finish();
}

#[test]
fn killed_database_flipped_last_frames() {
    killed_db_campaign("flipped last frames", cases(4), last_flips).finish();
}

#[test]
fn killed_database_gaps() {
    killed_db_campaign("a middle key removed", cases(4), gaps).finish();
}

#[test]
fn killed_database_swapped_values() {
    killed_db_campaign("two values swapped", cases(4), swaps).finish();
}

#[test]
fn killed_database_sled_db_file_flips() {
    killed_sled_file_campaign(cases(4)).finish();
}

/// Damage to the last records of the write-ahead log of a killed database
/// (each record is in the log twice: either copy gives it back; see
/// `bugs::a_damaged_last_wal_record_is_reported`).
#[test]
fn killed_database_last_wal_records_damaged() {
    wal_campaign(cases(12)).finish();
}

/// The child process of `sled_db_file_flips` (see `corruption/sled_file.rs`),
/// which runs it with `--ignored --exact`. Does nothing unless started by
/// it.
#[test]
#[ignore = "the child process of sled_db_file_flips; runs only when started by it"]
fn child_reads_a_damaged_database() {
    let (Some(db), Some(out)) = (
        std::env::var_os(sled_file::CHILD_DB),
        std::env::var_os(sled_file::CHILD_OUT),
    ) else {
        return;
    };
    crate::common::quiet_sled_panics();
    let seen = observe::observe(std::path::Path::new(&db));
    let json = serde_json::to_string(&seen).expect("the child's report as JSON");
    std::fs::write(out, json).expect("write the child's report");
}

/// The writer of the killed database (see `corruption/killed.rs`), which
/// its parent kills; runs it with `--ignored --exact`. Does nothing unless
/// started by it.
#[test]
#[ignore = "the child process of the killed database fixture; runs only when started by it"]
fn child_records_until_killed() {
    let (Some(db), Some(acks)) = (
        std::env::var_os(killed::CHILD_DB),
        std::env::var_os(killed::CHILD_ACKS),
    ) else {
        return;
    };
    killed::child(std::path::Path::new(&db), std::path::Path::new(&acks));
}

/// Every kind at once, many cases (`AJ_CORRUPT_CASES`, default 2000 per
/// file kind and 1/10 of it per database kind); run in release. Prints
/// each kind's summary line, then the grand total over all kinds.
#[test]
#[ignore = "long: run explicitly, in release"]
fn long_campaign() {
    let n = cases(2000);
    let fx = Fixture::new();
    let mut parts = vec![
        truncations(&fx),
        file_campaign(&fx, "ajournal: bit flips", n, bit_flips),
        file_campaign(&fx, "ajournal: zeroed ranges", n, zeroed_range),
        file_campaign(&fx, "ajournal: duplicated records", n, duplicated_record),
        file_campaign(&fx, "ajournal: swapped records", n, swapped_records),
        file_campaign(&fx, "ajournal: garbage appended", n, garbage_appended),
    ];
    let m = (n / 10).max(1);
    parts.push(db_campaign(
        &fx,
        "database: flipped middle frames",
        m,
        middle_flips,
    ));
    parts.push(db_campaign(
        &fx,
        "database: flipped last frames",
        m,
        last_flips,
    ));
    parts.push(db_campaign(&fx, "database: a middle key removed", m, gaps));
    parts.push(db_campaign(&fx, "database: two values swapped", m, swaps));
    parts.push(clean_sled_file_campaign(&fx, SLED_FILE, m));
    let packed = Fixture::compressed();
    parts.push(db_campaign(
        &packed,
        "compressed database: flipped middle frames",
        m,
        middle_flips,
    ));
    parts.push(db_campaign(
        &packed,
        "compressed database: a middle key removed",
        m,
        gaps,
    ));
    parts.push(clean_sled_file_campaign(&packed, COMPRESSED_SLED_FILE, m));
    parts.push(killed_db_campaign("flipped middle frames", m, middle_flips));
    parts.push(killed_db_campaign("flipped last frames", m, last_flips));
    parts.push(killed_db_campaign("a middle key removed", m, gaps));
    parts.push(killed_db_campaign("two values swapped", m, swaps));
    parts.push(killed_sled_file_campaign(m));
    parts.push(wal_campaign(m));
    let mut total = Tally::new("grand total, all kinds");
    total.kinds = 0;
    for p in parts {
        eprintln!("{}", p.summary());
        total.add(p);
    }
    total.kind = format!("grand total, {} kinds", total.kinds);
    total.finish();
}
