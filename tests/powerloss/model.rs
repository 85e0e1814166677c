//! The file-system model: from the directory as it was before the child and
//! the child's operation log, the on-disk states a power cut could leave.
//!
//! What a cut at record `cut` of the log keeps (records before it happened,
//! records from it on did not):
//!
//! - **File data**, per file (inode): a write is complete at its END record.
//!   A sync of the file (`fsync`, `fdatasync`) or of everything (`syncfs`,
//!   `sync`) whose END is before the cut makes every write that completed
//!   before its BEGIN durable; a write to a descriptor opened `O_DSYNC` or
//!   `O_SYNC` is durable once it completed. Durable writes are there whole.
//!   Every other write that completed before the cut, and every write in
//!   flight at the cut (BEGIN before it, END after), is unsynced: the policy
//!   of the state (below) keeps it, drops it or tears it, at the granularity
//!   of 512-byte sectors. A sector holds one *version*: its content after
//!   some write (or before them all), and always at least the last durable
//!   one; so a sector is never a mix of a later write without an earlier one
//!   that the page cache had already merged into it. The file's length is
//!   the length after the latest write kept anywhere in it (sectors of
//!   dropped writes inside it read as what was there before, zeros if
//!   nothing). `sync_file_range` is no barrier. `ftruncate` is a write of the
//!   length (durable by the same rules), `fallocate` (mode 0) likewise.
//! - **Names**: creating a file (`open` with `O_CREAT` of a new name),
//!   `mkdir`, `rename`, `unlink` and `rmdir` change a directory; they are
//!   durable once an `fsync` of that directory (or `syncfs`) that began after
//!   them has ended (a rename needs both directories). An fsync of a file
//!   does not make its name durable. Other name changes are kept or not as
//!   the policy says, each as a whole (a rename is atomic), applied in log
//!   order, and skipped when they no longer apply (a rename of a name that
//!   was not kept, a file created in a directory that was not).
//!
//! Policies, one per state, drawn at random:
//!
//! - `KeepAll`: every completed operation is kept (the page cache reached
//!   the disk just before the cut); writes in flight are kept, dropped or
//!   torn at random.
//! - `DropAll`: nothing unsynced is kept: only durable data and names.
//! - `PerOp`: each unsynced write is kept (40 %), dropped (30 %) or torn
//!   (30 %: a random run of its first sectors), each name change kept at
//!   even odds, all independently.
//! - `PerSector`: each sector of each unsynced write is kept or dropped at
//!   even odds, independently (versions still as above); names as `PerOp`.
//! - `Ordered`: everything up to a random earlier point of the log is kept,
//!   the writes in flight there torn, nothing later (an ordered journaling
//!   file system: names and data in order).
//!
//! Two more, chosen by the tests rather than at random: `Completed`
//! (everything that completed kept, nothing in flight: what the page cache
//! held, the reference a failing state is compared with) and
//! `DropWrite(n)` (as `Completed`, but the one write whose END is record
//! `n` dropped: the smallest reordering a device's write cache can make).
//!
//! Not modelled: time (no writeback after 30 s: unsynced data stays
//! unsynced however old); a device that lies about flushes; bit rot;
//! damage to data that was durable (that is the corruption campaign's);
//! which unsynced data a journaling file system commits along with a sync
//! of another file (ext4 `data=ordered` keeps more: a subset of the states
//! here); writes through a shared `mmap`, `copy_file_range`, `sendfile`,
//! `splice`, links, renames of directories or across the recorded
//! directory's edge, `O_TMPFILE`, `pwritev2` flags (the shim logs those as
//! unsupported and the test fails: the journal, sled and std use none of
//! them). A name change the child was killed while making (its INTENT
//! record is the log's last) is taken as not made.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

use super::oplog::OpLog;
use crate::common::Rng;

mod replay;

/// Sector size: the unit of a torn write.
const SECTOR: u64 = 512;

/// A directory tree in memory: relative path -> a directory or a file's
/// bytes. The root (`""`) is implicit.
pub type Image = BTreeMap<String, Entry>;

/// An entry of an [`Image`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(Vec<u8>),
}

/// Reads the tree under `dir` into an [`Image`].
pub fn read_image(dir: &Path) -> Image {
    fn walk(dir: &Path, prefix: &str, out: &mut Image) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let name = entry.file_name().into_string().expect("utf-8 name");
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if entry.file_type().expect("file type").is_dir() {
                out.insert(rel.clone(), Entry::Dir);
                walk(&entry.path(), &rel, out);
            } else if entry.file_type().expect("file type").is_file() {
                // (Not the read service's socket of an open database.)
                out.insert(rel, Entry::File(std::fs::read(entry.path()).expect("read")));
            }
        }
    }
    let mut out = Image::new();
    if dir.exists() {
        walk(dir, "", &mut out);
    }
    out
}

/// Writes `image` under `dir` (which must not exist yet).
pub fn write_image(image: &Image, dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    // BTreeMap order puts a directory before everything in it.
    for (rel, entry) in image {
        let p = dir.join(rel);
        match entry {
            Entry::Dir => std::fs::create_dir_all(&p).expect("mkdir"),
            Entry::File(bytes) => std::fs::write(&p, bytes).expect("write"),
        }
    }
}

/// The parent directory of a relative path (`""` for a top-level name).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File(usize),
}

#[derive(Clone, Debug)]
enum DataKind {
    Write { off: u64, data: Range<usize> },
    Truncate(u64),
    Extend(u64),
}

#[derive(Clone, Debug)]
struct DataOp {
    begin: usize,
    /// `None` while in flight at the end of the log (or failed): never kept.
    end: Option<usize>,
    dsync: bool,
    kind: DataKind,
}

#[derive(Default)]
struct Inode {
    base: Vec<u8>,
    ops: Vec<DataOp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Inode(usize),
    Dir(String),
    All,
}

struct Sync {
    target: Target,
    begin: usize,
    end: usize,
}

#[derive(Clone, Debug)]
enum NameKind {
    Create { path: String, ino: usize },
    Mkdir { path: String },
    Rename { from: String, to: String },
    Unlink { path: String },
    Rmdir { path: String },
}

struct NameOp {
    at: usize,
    kind: NameKind,
}

impl NameOp {
    fn dirs(&self) -> Vec<&str> {
        match &self.kind {
            NameKind::Create { path, .. }
            | NameKind::Mkdir { path }
            | NameKind::Unlink { path }
            | NameKind::Rmdir { path } => vec![parent(path)],
            NameKind::Rename { from, to } => vec![parent(from), parent(to)],
        }
    }
}

/// How a state treats what was not synced (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    KeepAll,
    DropAll,
    PerOp,
    PerSector,
    Ordered,
    /// Everything that completed before the cut kept, nothing in flight:
    /// what the page cache held (the reference a failing state is
    /// compared with).
    Completed,
    /// Everything that completed kept but the one write whose END is
    /// record `n` (dropped whole), and nothing in flight: the smallest
    /// reordering a device's write cache can make.
    DropWrite(usize),
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::KeepAll,
        Policy::DropAll,
        Policy::PerOp,
        Policy::PerSector,
        Policy::Ordered,
    ];
}

/// What a write keeps of itself.
#[derive(Clone, Copy, Debug)]
enum Keep {
    Whole,
    Dropped,
    /// Its first `n` sectors.
    Prefix(u64),
    /// Each sector at even odds.
    Sectors,
}

/// The child's run, replayed: every file's operations, the syncs, the name
/// changes and the marks, with the record index of each.
pub struct Timeline {
    inodes: Vec<Inode>,
    syncs: Vec<Sync>,
    names: Vec<NameOp>,
    initial: BTreeMap<String, Node>,
    /// `(record index, text)` of each line the child wrote to its mark file.
    pub marks: Vec<(usize, String)>,
    /// The first record from which the database is fully created and
    /// durable (`Some(0)` if it was there before the child).
    pub created_at: Option<usize>,
    /// Operations the model does not cover.
    pub unsupported: Vec<String>,
    /// Writes and syncs begun and never ended (the child was killed).
    pub unfinished: usize,
    /// How often the child did what the states must cover (see
    /// [`Timeline::new`]).
    pub coverage: BTreeMap<&'static str, u64>,
}

impl Timeline {
    /// The latest BEGIN of a sync of `target` (or of everything) that ended
    /// before `cut`: everything that completed before it is durable.
    fn barrier(&self, target: &Target, cut: usize) -> Option<usize> {
        self.syncs
            .iter()
            .filter(|s| s.end < cut && (s.target == *target || s.target == Target::All))
            .map(|s| s.begin)
            .max()
    }

    /// The on-disk state a power cut at record `cut` leaves under `policy`.
    pub fn state(&self, log: &OpLog, cut: usize, policy: Policy, rng: &mut Rng) -> Image {
        // The point up to which an ordered file system kept everything.
        let ordered_upto = rng.below(cut + 1);
        // Names.
        let mut dir_barriers: HashMap<&str, Option<usize>> = HashMap::new();
        let mut ns = self.initial.clone();
        for op in self.names.iter().filter(|n| n.at < cut) {
            let durable = op.dirs().iter().all(|d| {
                dir_barriers
                    .entry(*d)
                    .or_insert_with(|| self.barrier(&Target::Dir((*d).to_owned()), cut))
                    .is_some_and(|b| op.at < b)
            });
            let kept = durable
                || match policy {
                    Policy::KeepAll | Policy::Completed | Policy::DropWrite(_) => true,
                    Policy::DropAll => false,
                    Policy::PerOp | Policy::PerSector => rng.below(2) == 0,
                    Policy::Ordered => op.at < ordered_upto,
                };
            if kept {
                apply_name(&mut ns, &op.kind);
            }
        }
        // Data of the files that have a name.
        let mut out = Image::new();
        for (path, node) in ns {
            let entry = match node {
                Node::Dir => Entry::Dir,
                Node::File(ino) => {
                    Entry::File(self.content(log, ino, cut, policy, ordered_upto, rng))
                }
            };
            out.insert(path, entry);
        }
        out
    }

    /// The bytes of file `ino` after a cut at `cut`.
    fn content(
        &self,
        log: &OpLog,
        ino: usize,
        cut: usize,
        policy: Policy,
        ordered_upto: usize,
        rng: &mut Rng,
    ) -> Vec<u8> {
        let inode = &self.inodes[ino];
        let barrier = self.barrier(&Target::Inode(ino), cut);
        // Completed operations in the order they completed, then those in
        // flight at the cut in the order they began.
        let mut ops: Vec<(&DataOp, bool)> = inode
            .ops
            .iter()
            .filter(|o| o.begin < cut && o.end.is_some())
            .map(|o| {
                let end = o.end.unwrap_or(usize::MAX);
                let completed = end < cut;
                let durable = completed && (o.dsync || barrier.is_some_and(|b| end < b));
                (o, durable)
            })
            .collect();
        ops.sort_by_key(|(o, _)| {
            let end = o.end.unwrap_or(usize::MAX);
            if end < cut { end } else { cut + o.begin }
        });
        // Lengths after each operation, applied whole.
        let mut len = inode.base.len() as u64;
        let mut max_len = len;
        let mut lens = Vec::with_capacity(ops.len());
        let mut truncated_from = Vec::with_capacity(ops.len());
        for (o, _) in &ops {
            truncated_from.push(len);
            len = match &o.kind {
                DataKind::Write { off, data } => len.max(off + data.len() as u64),
                DataKind::Truncate(l) => *l,
                DataKind::Extend(l) => len.max(*l),
            };
            max_len = max_len.max(len);
            lens.push(len);
        }
        // The sectors of each operation, and what it keeps of them.
        let sectors = |j: usize| -> Range<u64> {
            match &ops[j].0.kind {
                DataKind::Write { off, data } => {
                    off / SECTOR..(off + data.len() as u64).div_ceil(SECTOR)
                }
                DataKind::Truncate(l) => l / SECTOR..truncated_from[j].div_ceil(SECTOR),
                DataKind::Extend(_) => 0..0,
            }
        };
        let mut version: HashMap<u64, usize> = HashMap::new();
        let mut latest: Option<usize> = None;
        for (j, (o, durable)) in ops.iter().enumerate() {
            let end = o.end.unwrap_or(usize::MAX);
            let in_flight = end >= cut;
            let torn = |rng: &mut Rng| match rng.below(3) {
                0 => Keep::Whole,
                1 => Keep::Dropped,
                _ => Keep::Prefix(rng.below(sectors(j).count().max(1)) as u64),
            };
            let keep = if *durable {
                Keep::Whole
            } else {
                match policy {
                    Policy::KeepAll if in_flight => torn(rng),
                    Policy::KeepAll => Keep::Whole,
                    Policy::DropAll => Keep::Dropped,
                    Policy::PerOp => match rng.below(10) {
                        0..=3 => Keep::Whole,
                        4..=6 => Keep::Dropped,
                        _ => Keep::Prefix(rng.below(sectors(j).count().max(1)) as u64),
                    },
                    Policy::PerSector => Keep::Sectors,
                    Policy::Ordered if end < ordered_upto => Keep::Whole,
                    Policy::Ordered if o.begin < ordered_upto => torn(rng),
                    Policy::Ordered => Keep::Dropped,
                    Policy::Completed if in_flight => Keep::Dropped,
                    Policy::DropWrite(n) if in_flight || end == n => Keep::Dropped,
                    Policy::Completed | Policy::DropWrite(_) => Keep::Whole,
                }
            };
            let range = sectors(j);
            let kept: Vec<u64> = match keep {
                Keep::Whole => range.collect(),
                Keep::Dropped => Vec::new(),
                Keep::Prefix(n) => range.take(n as usize).collect(),
                Keep::Sectors => range.filter(|_| rng.below(2) == 0).collect(),
            };
            let any = matches!(keep, Keep::Whole) || !kept.is_empty();
            for s in kept {
                let v = version.entry(s).or_insert(j);
                *v = (*v).max(j);
            }
            if any {
                latest = Some(j);
            }
        }
        let mut buf = inode.base.clone();
        buf.resize(max_len as usize, 0);
        for (j, (o, _)) in ops.iter().enumerate() {
            for s in sectors(j) {
                if version.get(&s).is_none_or(|v| *v < j) {
                    continue;
                }
                let lo = s * SECTOR;
                let hi = (s + 1) * SECTOR;
                match &o.kind {
                    DataKind::Write { off, data } => {
                        let from = lo.max(*off);
                        let to = hi.min(off + data.len() as u64);
                        let src =
                            data.start + (from - off) as usize..data.start + (to - off) as usize;
                        buf[from as usize..to as usize].copy_from_slice(&log.bytes[src]);
                    }
                    DataKind::Truncate(l) => {
                        let from = lo.max(*l) as usize;
                        let to = (hi as usize).min(buf.len());
                        if from < to {
                            buf[from..to].fill(0);
                        }
                    }
                    DataKind::Extend(_) => {}
                }
            }
        }
        let len = latest.map_or(inode.base.len() as u64, |j| lens[j]);
        buf.truncate(len as usize);
        buf
    }
}

impl Timeline {
    /// The file first known by the name `path` (there before the child, or
    /// created by it).
    fn inode_named(&self, path: &str) -> Option<usize> {
        match self.initial.get(path) {
            Some(Node::File(ino)) => Some(*ino),
            Some(Node::Dir) => None,
            None => self.names.iter().find_map(|n| match &n.kind {
                NameKind::Create { path: p, ino } if p == path => Some(*ino),
                _ => None,
            }),
        }
    }

    /// The END records of the successful syncs of the file or directory
    /// `path`, in order.
    pub fn sync_ends(&self, path: &str) -> Vec<usize> {
        let target = match self.inode_named(path) {
            Some(ino) => Target::Inode(ino),
            None => Target::Dir(path.to_owned()),
        };
        self.syncs
            .iter()
            .filter(|s| s.target == target)
            .map(|s| s.end)
            .collect()
    }

    /// The END records of the writes to the file first named `path` that
    /// completed before `cut` and are not durable there.
    pub fn unsynced_writes(&self, path: &str, cut: usize) -> Vec<usize> {
        let Some(ino) = self.inode_named(path) else {
            return Vec::new();
        };
        let barrier = self.barrier(&Target::Inode(ino), cut);
        self.inodes[ino]
            .ops
            .iter()
            .filter(|o| matches!(o.kind, DataKind::Write { .. }) && !o.dsync)
            .filter_map(|o| o.end)
            .filter(|end| *end < cut && barrier.is_none_or(|b| *end >= b))
            .collect()
    }
}

/// Applies a name change to `ns`, if it still applies.
fn apply_name(ns: &mut BTreeMap<String, Node>, kind: &NameKind) {
    let dir_exists =
        |ns: &BTreeMap<String, Node>, d: &str| d.is_empty() || ns.get(d) == Some(&Node::Dir);
    match kind {
        NameKind::Create { path, ino } => {
            if dir_exists(ns, parent(path)) && !ns.contains_key(path) {
                ns.insert(path.clone(), Node::File(*ino));
            }
        }
        NameKind::Mkdir { path } => {
            if dir_exists(ns, parent(path)) && !ns.contains_key(path) {
                ns.insert(path.clone(), Node::Dir);
            }
        }
        NameKind::Rename { from, to } => {
            if let Some(Node::File(ino)) = ns.get(from).copied()
                && dir_exists(ns, parent(to))
                && ns.get(to) != Some(&Node::Dir)
            {
                ns.remove(from);
                ns.insert(to.clone(), Node::File(ino));
            }
        }
        NameKind::Unlink { path } => {
            if let Some(Node::File(_)) = ns.get(path) {
                ns.remove(path);
            }
        }
        NameKind::Rmdir { path } => {
            let prefix = format!("{path}/");
            if ns.get(path) == Some(&Node::Dir) && !ns.keys().any(|k| k.starts_with(&prefix)) {
                ns.remove(path);
            }
        }
    }
}
