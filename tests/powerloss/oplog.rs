//! The operation log the shim writes (`shim.c` has the byte layout), and the
//! shim itself: compiled at run time with the system C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `PLR1`, little-endian.
const MAGIC: u32 = 0x3152_4c50;
const HEADER: usize = 48;

/// One record of the log. Paths are relative to the recorded directory
/// (`""` is the directory itself); data are byte ranges of the log.
#[derive(Clone, Debug)]
pub enum Op {
    /// A tracked path was opened (`fd`, open flags).
    Open { fd: i32, flags: i32, path: String },
    /// A write to `fd` started.
    WriteBegin { fd: i32, id: u64 },
    /// The write `id` returned: `ok`, at `off`, the bytes `data` of the log.
    WriteEnd {
        id: u64,
        ok: bool,
        off: u64,
        data: std::ops::Range<usize>,
    },
    /// `ftruncate(fd, len)` (an `O_TRUNC` open is an `Open`).
    Truncate { fd: i32, len: u64 },
    /// A sync started: of `fd`'s file, or of everything (`fd` < 0).
    SyncBegin { fd: i32, id: u64 },
    /// The sync `id` returned (`ok`: it succeeded).
    SyncEnd { id: u64, ok: bool },
    /// `sync_file_range`: logged, and no barrier.
    Range,
    /// `rename(from, to)`.
    Rename { from: String, to: String },
    /// `unlink(path)`.
    Unlink { path: String },
    /// `mkdir(path)`.
    Mkdir { path: String },
    /// `rmdir(path)`.
    Rmdir { path: String },
    /// `close(fd)`.
    Close { fd: i32 },
    /// A line the child wrote to the mark file.
    Mark { text: String },
    /// `fallocate(fd, mode, off, len)`.
    Fallocate {
        fd: i32,
        mode: i32,
        off: u64,
        len: u64,
    },
    /// `new` now refers to the file of `old`.
    Dup { new: i32, old: i32 },
    /// Something the model does not cover (`what`, and the path if any).
    Unsupported { what: String },
    /// A name change or truncation is about to be made (its record follows
    /// at once if it succeeds).
    Intent,
}

/// A parsed log: its bytes (write data are ranges of them) and records.
pub struct OpLog {
    pub bytes: Vec<u8>,
    pub ops: Vec<Op>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses the log at `path`, recorded under the directory `root`. A last
/// record cut short (the child was killed while it was written) is
/// dropped; anything else malformed is a bug of the shim and panics.
pub fn read(path: &Path, root: &Path) -> OpLog {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let root = root.to_str().expect("utf-8 root").trim_end_matches('/');
    let rel = |p: &[u8]| -> String {
        let p = std::str::from_utf8(p).expect("utf-8 path in the log");
        match p.strip_prefix(root) {
            Some(rest) => rest.trim_start_matches('/').to_owned(),
            None => p.to_owned(),
        }
    };
    let mut ops = Vec::new();
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        assert_eq!(u32_at(&bytes, at), MAGIC, "bad record magic at {at}");
        let op = bytes[at + 4];
        let fd = i32_at(&bytes, at + 8);
        let arg = i32_at(&bytes, at + 12);
        let id = u64_at(&bytes, at + 16);
        let off = u64_at(&bytes, at + 24);
        let len = u64_at(&bytes, at + 32);
        let p1 = u32_at(&bytes, at + 40) as usize;
        let p2 = u32_at(&bytes, at + 44) as usize;
        let data_len = if op == 3 || op == 13 { len as usize } else { 0 };
        let end = at + HEADER + p1 + p2 + data_len;
        if end > bytes.len() {
            break; // cut short by the kill
        }
        let path1 = &bytes[at + HEADER..at + HEADER + p1];
        let path2 = &bytes[at + HEADER + p1..at + HEADER + p1 + p2];
        let data = at + HEADER + p1 + p2..end;
        ops.push(match op {
            1 => Op::Open {
                fd,
                flags: arg,
                path: rel(path1),
            },
            2 => Op::WriteBegin { fd, id },
            3 => Op::WriteEnd {
                id,
                ok: arg >= 0,
                off,
                data,
            },
            4 => Op::Truncate { fd, len },
            5 => Op::SyncBegin { fd, id },
            6 => Op::SyncEnd { id, ok: arg == 0 },
            7 => Op::Range,
            8 => Op::Rename {
                from: rel(path1),
                to: rel(path2),
            },
            9 => Op::Unlink { path: rel(path1) },
            10 => Op::Mkdir { path: rel(path1) },
            11 => Op::Rmdir { path: rel(path1) },
            12 => Op::Close { fd },
            13 => Op::Mark {
                text: String::from_utf8_lossy(&bytes[data]).into_owned(),
            },
            14 => Op::Fallocate {
                fd,
                mode: arg,
                off,
                len,
            },
            15 => Op::Dup { new: fd, old: arg },
            16 => Op::Unsupported {
                what: format!(
                    "{} {}",
                    String::from_utf8_lossy(path1),
                    String::from_utf8_lossy(path2)
                ),
            },
            17 => Op::Intent,
            other => panic!("unknown op {other} at {at}"),
        });
        at = end;
    }
    OpLog { bytes, ops }
}

/// Compiles `shim.c` into `dir/shim.so` with the system C compiler (`$CC`,
/// else `cc`, `gcc` or `clang`); `None` if there is none.
pub fn build_shim(dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/powerloss/shim.c");
    let out = dir.join("shim.so");
    let compilers: Vec<String> = match std::env::var("CC") {
        Ok(cc) if !cc.is_empty() => vec![cc],
        _ => vec!["cc".into(), "gcc".into(), "clang".into()],
    };
    for cc in compilers {
        let run = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .output();
        match run {
            Ok(o) if o.status.success() => return Some(out),
            // The compiler is there and fails: that is a bug, not a skip.
            Ok(o) => panic!(
                "{cc} failed to build the power-loss shim:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(_) => continue,
        }
    }
    None
}
