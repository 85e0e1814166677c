//! The record area of a store: a few small durable key-value records kept
//! beside the sessions, never inside their events (the demo's sandbox
//! registry, the intents of copies). Each store keeps it its own way: the
//! PostgreSQL store in a table, memory in a map, an exported file has none,
//! and a sled database in the file `records` of its directory, here.
//!
//! That file is outside sled on purpose ("trust sled for speed, not for
//! truth": sled can roll its own log back after damage, and a copy intent
//! rolled back with it would show a half-copied session as whole), and so
//! that a process reading the database through another's read service
//! reads it too. It is written whole under a temporary name, synced and
//! renamed (the directory synced after), so it is there whole or not at
//! all:
//!
//! ```text
//! b"AJRECS01"
//! u32 LE  number of records
//! per record: u32 LE length ++ namespace (UTF-8), u32 LE length ++ key
//!             (UTF-8), u32 LE length ++ value
//! u32 LE  crc32 (crc32fast) of every byte before it
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::store::atomic;

/// The file's name in a database directory.
pub(crate) const FILE: &str = "records";

const MAGIC: &[u8; 8] = b"AJRECS01";

/// The longest namespace or key, in bytes.
pub(crate) const MAX_NAME: usize = 1024;
/// The largest value, in bytes.
pub(crate) const MAX_VALUE: usize = 1 << 20;

/// One record: namespace, key, value.
pub(crate) type Record = (String, String, Vec<u8>);

/// One write of [`Store::write_records`](crate::store::Store::write_records):
/// namespace, key, and the new value (`None` removes the record).
pub(crate) type RecordWrite = (String, String, Option<Vec<u8>>);

/// Every record, by namespace and key.
pub(crate) type RecordMap = BTreeMap<(String, String), Vec<u8>>;

/// Refuses a namespace, key or value past the limits.
pub(crate) fn check(writes: &[RecordWrite]) -> Result<()> {
    for (ns, key, value) in writes {
        if ns.len() > MAX_NAME || key.len() > MAX_NAME {
            return Err(Error::InvalidInput(format!(
                "a record's namespace and key hold at most {MAX_NAME} bytes ({ns:?}, {key:?})"
            )));
        }
        if value.as_ref().is_some_and(|v| v.len() > MAX_VALUE) {
            return Err(Error::InvalidInput(format!(
                "the record {ns:?}/{key:?} is larger than {MAX_VALUE} bytes"
            )));
        }
    }
    Ok(())
}

/// Applies `writes` to `map`.
pub(crate) fn apply(map: &mut RecordMap, writes: &[RecordWrite]) {
    for (ns, key, value) in writes {
        match value {
            Some(v) => {
                map.insert((ns.clone(), key.clone()), v.clone());
            }
            None => {
                map.remove(&(ns.clone(), key.clone()));
            }
        }
    }
}

/// The records of `map` as a list.
pub(crate) fn list(map: &RecordMap) -> Vec<Record> {
    map.iter()
        .map(|((ns, k), v)| (ns.clone(), k.clone(), v.clone()))
        .collect()
}

fn encode(map: &RecordMap) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(map.len() as u32).to_le_bytes());
    for ((ns, key), value) in map {
        for part in [ns.as_bytes(), key.as_bytes(), value.as_slice()] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> std::result::Result<RecordMap, String> {
    if bytes.len() < MAGIC.len() + 8 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("it does not start with AJRECS01".into());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32fast::hash(body) != crc {
        return Err("its checksum does not match".into());
    }
    let mut at = MAGIC.len();
    let u32_at = |at: &mut usize| -> std::result::Result<usize, String> {
        let b = body
            .get(*at..*at + 4)
            .ok_or_else(|| "it ends inside a record".to_owned())?;
        *at += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = u32_at(&mut at)?;
    let mut map = RecordMap::new();
    for _ in 0..count {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(3);
        for _ in 0..3 {
            let n = u32_at(&mut at)?;
            let part = body
                .get(at..at.saturating_add(n))
                .ok_or_else(|| "it ends inside a record".to_owned())?;
            at += n;
            parts.push(part);
        }
        let text =
            |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "a name is not UTF-8".to_owned());
        map.insert((text(parts[0])?, text(parts[1])?), parts[2].to_vec());
    }
    if at != body.len() {
        return Err("it has bytes after its last record".into());
    }
    Ok(map)
}

/// Reads the record file at `path` (no file: no records).
///
/// # Errors
/// [`Error::Corruption`] naming the file if it does not read whole;
/// [`Error::Io`] if it cannot be read.
pub(crate) fn read(path: &Path) -> Result<RecordMap> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RecordMap::new()),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    decode(&bytes).map_err(|why| {
        Error::corruption(
            None,
            None,
            None,
            format!(
                "{}: the journal's records (sandbox registry, copy intents) are unreadable \
                 ({why})",
                path.display()
            ),
        )
    })
}

/// The record file of a database directory, cached by the one process that
/// writes it (a sled database is open in one process at a time), or read
/// afresh at every call by a reader of another process's database.
pub(crate) struct RecordFile {
    path: PathBuf,
    /// The records, once read, when this process is the writer.
    cache: Option<Mutex<Option<RecordMap>>>,
}

impl RecordFile {
    /// The record file of the database directory `dir`, which this process
    /// writes.
    pub(crate) fn writer(dir: &Path) -> RecordFile {
        RecordFile {
            path: dir.join(FILE),
            cache: Some(Mutex::new(None)),
        }
    }

    /// The record file of the database directory `dir`, which another
    /// process writes.
    pub(crate) fn reader(dir: &Path) -> RecordFile {
        RecordFile {
            path: dir.join(FILE),
            cache: None,
        }
    }

    /// Every record.
    pub(crate) fn records(&self) -> Result<Vec<Record>> {
        match &self.cache {
            None => Ok(list(&read(&self.path)?)),
            Some(cache) => {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.is_none() {
                    *cache = Some(read(&self.path)?);
                }
                Ok(cache.as_ref().map(list).unwrap_or_default())
            }
        }
    }

    /// Applies `writes`, all or none, durably: the file is replaced whole
    /// (written, synced, renamed, its directory synced) before this returns.
    pub(crate) fn write(&self, writes: &[RecordWrite]) -> Result<()> {
        check(writes)?;
        let Some(cache) = &self.cache else {
            return Err(Error::Unsupported(
                "this journal is read-only: its records are written by the process that has \
                 it open"
                    .into(),
            ));
        };
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut map = match cache.take() {
            Some(m) => m,
            None => read(&self.path)?,
        };
        let before = map.clone();
        apply(&mut map, writes);
        if map == before && (self.path.exists() || map.is_empty()) {
            *cache = Some(map);
            return Ok(());
        }
        let bytes = encode(&map);
        match atomic::replace_file(&self.path, |f, tmp| atomic::write_bytes(f, tmp, &bytes)) {
            Ok(()) => {
                *cache = Some(map);
                Ok(())
            }
            Err(e) => {
                // What the file holds now is not known: read it again next.
                *cache = None;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_any_cut_or_flip_is_refused() {
        let mut map = RecordMap::new();
        map.insert(("a".into(), "k".into()), b"v\n\0".to_vec());
        map.insert(("b".into(), "".into()), Vec::new());
        let bytes = encode(&map);
        assert_eq!(decode(&bytes), Ok(map.clone()));
        assert_eq!(decode(&encode(&RecordMap::new())), Ok(RecordMap::new()));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode(&b).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn a_record_file_writes_durably_and_a_reader_sees_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = RecordFile::writer(dir.path());
        let r = RecordFile::reader(dir.path());
        assert!(r.records().expect("read").is_empty());
        w.write(&[
            ("n".into(), "x".into(), Some(b"1".to_vec())),
            ("n".into(), "y".into(), Some(b"2".to_vec())),
        ])
        .expect("write");
        w.write(&[("n".into(), "x".into(), None)]).expect("remove");
        let want = vec![("n".to_owned(), "y".to_owned(), b"2".to_vec())];
        assert_eq!(r.records().expect("read"), want);
        assert_eq!(
            RecordFile::writer(dir.path()).records().expect("read"),
            want
        );
        assert!(r.write(&[]).is_err());
        assert!(
            w.write(&[("n".into(), "z".into(), Some(vec![0; MAX_VALUE + 1]))])
                .is_err()
        );
    }
}
