//! Replaying the operation log: [`Timeline::new`].

use std::collections::{BTreeMap, HashMap};

use super::{
    DataKind, DataOp, Entry, Image, Inode, NameKind, NameOp, Node, Sync, Target, Timeline,
};
use crate::powerloss::oplog::{Op, OpLog};

/// `O_CREAT`, `O_TRUNC`, `O_ACCMODE`.
const O_CREAT: i32 = libc::O_CREAT;
const O_TRUNC: i32 = libc::O_TRUNC;
const O_ACCMODE: i32 = libc::O_ACCMODE;

impl Timeline {
    /// Replays `log` over the tree `before` (the recorded directory as it
    /// was when the child started). `db` is the database's path relative to
    /// the recorded directory.
    pub fn new(before: &Image, log: &OpLog, db: &str) -> Timeline {
        let mut t = Timeline {
            inodes: Vec::new(),
            syncs: Vec::new(),
            names: Vec::new(),
            initial: BTreeMap::new(),
            marks: Vec::new(),
            created_at: None,
            unsupported: Vec::new(),
            unfinished: 0,
            coverage: BTreeMap::new(),
        };
        // The first name of each file, for the coverage counts.
        let mut first_name: HashMap<usize, String> = HashMap::new();
        for (path, entry) in before {
            let node = match entry {
                Entry::Dir => Node::Dir,
                Entry::File(bytes) => {
                    t.inodes.push(Inode {
                        base: bytes.clone(),
                        ops: Vec::new(),
                    });
                    first_name.insert(t.inodes.len() - 1, path.clone());
                    Node::File(t.inodes.len() - 1)
                }
            };
            t.initial.insert(path.clone(), node);
        }
        let creating = format!("{db}/agent-journal.creating");
        if t.initial.contains_key(&format!("{db}/db")) && !t.initial.contains_key(&creating) {
            t.created_at = Some(0);
        }
        let mut ns: HashMap<String, Node> =
            t.initial.iter().map(|(p, n)| (p.clone(), *n)).collect();
        ns.insert(String::new(), Node::Dir);
        // Descriptor -> what it is open on, and whether O_DSYNC.
        let mut fds: HashMap<i32, (Target, bool)> = HashMap::new();
        let mut writes: HashMap<u64, (usize, usize)> = HashMap::new();
        let mut syncs: HashMap<u64, (Target, usize)> = HashMap::new();
        let mut creating_removed_at = None;
        for (i, op) in log.ops.iter().enumerate() {
            match op {
                Op::Open { fd, flags, path } => {
                    let dsync = flags & (libc::O_DSYNC | libc::O_SYNC) != 0;
                    let target = match ns.get(path) {
                        Some(Node::Dir) => Target::Dir(path.clone()),
                        Some(Node::File(ino)) => {
                            if flags & O_TRUNC != 0 && flags & O_ACCMODE != libc::O_RDONLY {
                                t.inodes[*ino].ops.push(DataOp {
                                    begin: i,
                                    end: Some(i),
                                    dsync: false,
                                    kind: DataKind::Truncate(0),
                                });
                            }
                            Target::Inode(*ino)
                        }
                        None if flags & O_CREAT != 0 => {
                            t.inodes.push(Inode::default());
                            let ino = t.inodes.len() - 1;
                            first_name.insert(ino, path.clone());
                            if path.starts_with(&format!("{db}/blobs/")) {
                                *t.coverage.entry("sled blob files").or_default() += 1;
                            }
                            if path.starts_with(&format!("{db}/frames/")) {
                                *t.coverage.entry("frame segment files").or_default() += 1;
                            }
                            ns.insert(path.clone(), Node::File(ino));
                            t.names.push(NameOp {
                                at: i,
                                kind: NameKind::Create {
                                    path: path.clone(),
                                    ino,
                                },
                            });
                            Target::Inode(ino)
                        }
                        None => {
                            t.unsupported
                                .push(format!("record {i}: opened {path:?}, unknown to the model"));
                            continue;
                        }
                    };
                    fds.insert(*fd, (target, dsync));
                }
                Op::WriteBegin { fd, id } => match fds.get(fd) {
                    Some((Target::Inode(ino), dsync)) => {
                        let ops = &mut t.inodes[*ino].ops;
                        ops.push(DataOp {
                            begin: i,
                            end: None,
                            dsync: *dsync,
                            kind: DataKind::Write { off: 0, data: 0..0 },
                        });
                        writes.insert(*id, (*ino, ops.len() - 1));
                    }
                    other => t
                        .unsupported
                        .push(format!("record {i}: write to fd {fd} ({other:?})")),
                },
                Op::WriteEnd { id, ok, off, data } => {
                    if let Some((ino, k)) = writes.remove(id)
                        && *ok
                        && !data.is_empty()
                    {
                        if first_name
                            .get(&ino)
                            .is_some_and(|n| *n == format!("{db}/wal"))
                        {
                            // A generation starts with a 48-byte record at
                            // 0, and its copy at 2 MiB; a half is full past
                            // 2 MiB less 64 KiB (`src/store/sled/wal.rs`).
                            let half = 2u64 << 20;
                            let at = off % half;
                            let what = if at == 0 && data.len() == 48 {
                                "write-ahead log generations"
                            } else if at + data.len() as u64 > half - (64 << 10)
                                && log.bytes[data.clone()].starts_with(b"AJW1")
                            {
                                "write-ahead log full"
                            } else {
                                "write-ahead log writes"
                            };
                            *t.coverage.entry(what).or_default() += 1;
                        }
                        let w = &mut t.inodes[ino].ops[k];
                        w.end = Some(i);
                        w.kind = DataKind::Write {
                            off: *off,
                            data: data.clone(),
                        };
                    }
                }
                Op::Truncate { fd, len }
                | Op::Fallocate {
                    fd, off: _, len, ..
                } => {
                    let kind = match op {
                        Op::Truncate { .. } => {
                            *t.coverage.entry("truncations").or_default() += 1;
                            DataKind::Truncate(*len)
                        }
                        Op::Fallocate { mode: 0, off, .. } => DataKind::Extend(off + len),
                        _ => {
                            t.unsupported.push(format!("record {i}: {op:?}"));
                            continue;
                        }
                    };
                    match fds.get(fd) {
                        Some((Target::Inode(ino), _)) => t.inodes[*ino].ops.push(DataOp {
                            begin: i,
                            end: Some(i),
                            dsync: false,
                            kind,
                        }),
                        other => t
                            .unsupported
                            .push(format!("record {i}: {op:?} on {other:?}")),
                    }
                }
                Op::SyncBegin { fd, id } => {
                    let target = if *fd < 0 {
                        Target::All
                    } else {
                        match fds.get(fd) {
                            Some((target, _)) => target.clone(),
                            None => {
                                t.unsupported
                                    .push(format!("record {i}: sync of unknown fd {fd}"));
                                continue;
                            }
                        }
                    };
                    syncs.insert(*id, (target, i));
                }
                Op::SyncEnd { id, ok } => {
                    if let Some((target, begin)) = syncs.remove(id)
                        && *ok
                    {
                        if t.created_at.is_none()
                            && creating_removed_at.is_some_and(|u| begin > u)
                            && target == Target::Dir(db.to_owned())
                        {
                            t.created_at = Some(i + 1);
                        }
                        t.syncs.push(Sync {
                            target,
                            begin,
                            end: i,
                        });
                    }
                }
                Op::Range | Op::Intent => {}
                Op::Rename { from, to } => match ns.remove(from) {
                    Some(Node::File(ino)) => {
                        let what = if to.ends_with(".frame") {
                            "snapshot files"
                        } else if to.ends_with("/acks") {
                            "acknowledgement log rewrites"
                        } else if to.contains("/snap.") {
                            "sled snapshots"
                        } else {
                            "other renames"
                        };
                        *t.coverage.entry(what).or_default() += 1;
                        ns.insert(to.clone(), Node::File(ino));
                        t.names.push(NameOp {
                            at: i,
                            kind: NameKind::Rename {
                                from: from.clone(),
                                to: to.clone(),
                            },
                        });
                    }
                    other => t
                        .unsupported
                        .push(format!("record {i}: rename of {from:?} ({other:?})")),
                },
                Op::Unlink { path } => {
                    if *path == creating {
                        creating_removed_at = Some(i);
                    }
                    ns.remove(path);
                    t.names.push(NameOp {
                        at: i,
                        kind: NameKind::Unlink { path: path.clone() },
                    });
                }
                Op::Mkdir { path } => {
                    ns.insert(path.clone(), Node::Dir);
                    t.names.push(NameOp {
                        at: i,
                        kind: NameKind::Mkdir { path: path.clone() },
                    });
                }
                Op::Rmdir { path } => {
                    ns.remove(path);
                    t.names.push(NameOp {
                        at: i,
                        kind: NameKind::Rmdir { path: path.clone() },
                    });
                }
                Op::Close { fd } => {
                    fds.remove(fd);
                }
                Op::Dup { new, old } => {
                    if let Some(v) = fds.get(old).cloned() {
                        fds.insert(*new, v);
                    }
                }
                Op::Mark { text } => t.marks.push((i, text.clone())),
                Op::Unsupported { what } => t.unsupported.push(format!("record {i}: {what}")),
            }
        }
        // (A last INTENT: killed while making a name change, maybe made.)
        t.unfinished =
            writes.len() + syncs.len() + usize::from(matches!(log.ops.last(), Some(Op::Intent)));
        t
    }
}
