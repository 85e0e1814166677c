//! The first pass over a Claude Code log: each record's links and place,
//! then the threads they make (`scan`), and which records each thread's
//! conversion reads (`plan`).

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::PathBuf;

use super::record::{at, check_message, fields, over, text};
use super::{ClaudeCodeFile, Place, Plan, Record, ThreadKind};
use crate::error::{Error, Result};
use crate::provider::input::MAX_RECORD_BYTES;

impl ClaudeCodeFile {
    /// The first pass: each record's links and place, then the threads.
    pub(super) fn scan(
        mut input: impl BufRead,
        limit: u64,
        name: String,
        path: Option<PathBuf>,
    ) -> Result<Self> {
        let mut log = ClaudeCodeFile {
            name,
            path,
            records: Vec::new(),
            session_id: None,
            cwd: None,
            version: None,
            summaries: Vec::new(),
            system: Vec::new(),
            other: Vec::new(),
            threads: Vec::new(),
            off_thread: 0,
            messages: 0,
            warnings: Vec::new(),
            labels: Vec::new(),
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut parents: Vec<Option<String>> = Vec::new();
        let (mut buf, mut offset, mut line) = (Vec::new(), 0u64, 0usize);
        let mut input = (&mut input).take(limit.saturating_add(1));
        loop {
            buf.clear();
            let n = input
                .read_until(b'\n', &mut buf)
                .map_err(|e| Error::io(format!("reading {} (line {})", log.name, line + 1), e))?;
            if n == 0 {
                break;
            }
            line += 1;
            let start = offset;
            offset += n as u64;
            if offset > limit {
                return Err(Error::TooLarge {
                    size: offset,
                    limit,
                });
            }
            let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            let raw =
                std::str::from_utf8(bytes).map_err(|e| at(line, format!("not UTF-8: {e}")))?;
            if raw.trim().is_empty() {
                continue;
            }
            let place = Place {
                line,
                offset: start,
                len: bytes.len(),
                crc: crc32fast::hash(bytes),
            };
            let r = fields(raw).map_err(|e| at(line, e))?;
            let kind = r.kind.as_deref().ok_or_else(|| at(line, "no \"type\""))?;
            for (value, slot) in [
                (&r.session_id, &mut log.session_id),
                (&r.cwd, &mut log.cwd),
                (&r.version, &mut log.version),
            ] {
                if slot.is_none() {
                    *slot = value.clone();
                }
            }
            let assistant = match kind {
                "user" | "assistant" => {
                    check_message(r.message, kind, line)?;
                    Some(kind == "assistant")
                }
                "system" => {
                    if bytes.len() as u64 > MAX_RECORD_BYTES {
                        return Err(over(line, "a system record", bytes.len()));
                    }
                    log.system.push(place);
                    None
                }
                "summary" => {
                    if let Some(s) = text(r.summary) {
                        if s.len() as u64 > MAX_RECORD_BYTES {
                            return Err(over(line, "a summary", s.len()));
                        }
                        log.summaries.push(s);
                    }
                    continue;
                }
                "file-history-snapshot" | "queue-operation" => continue,
                other => {
                    if bytes.len() as u64 > MAX_RECORD_BYTES {
                        return Err(over(line, "a record", bytes.len()));
                    }
                    if !log.other.iter().any(|(_, t)| t == other) {
                        log.warnings.push(format!(
                            "line {line}: record type {other:?} is not modeled; kept as it is (and so are the later ones of its type)"
                        ));
                    }
                    log.other.push((place, other.to_owned()));
                    None
                }
            };
            // A system record without a uuid links nothing.
            let Some(uuid) = r.uuid else {
                if assistant.is_some() {
                    return Err(at(line, "a message record without a \"uuid\""));
                }
                continue;
            };
            let uuid = uuid.as_str();
            let parent = match r.parent {
                None => None,
                Some(p) => Some(
                    serde_json::from_str::<String>(p.get())
                        .map_err(|_| at(line, "\"parentUuid\" must be a string or null"))?,
                ),
            };
            if let Some(&first) = index.get(uuid) {
                return Err(at(
                    line,
                    format!(
                        "uuid {uuid:?} used twice (first at line {})",
                        log.records[first].at.line
                    ),
                ));
            }
            index.insert(uuid.to_owned(), log.records.len());
            // A compaction boundary continues what `logicalParentUuid`
            // names, which the file may hold or not.
            let continues = parent.is_none() && r.logical_parent.is_some();
            parents.push(parent);
            log.records.push(Record {
                at: place,
                parent: None,
                sidechain: r
                    .sidechain
                    .and_then(|b| serde_json::from_str::<bool>(b.get()).ok())
                    .unwrap_or(false),
                assistant,
                continues,
            });
        }
        // A parent the file does not hold: the record starts a thread.
        for (r, p) in log.records.iter_mut().zip(parents) {
            if let Some(p) = p {
                match index.get(&p) {
                    Some(&i) => r.parent = Some(i),
                    None => {
                        r.continues = true;
                        log.warnings.push(format!(
                            "line {}: parentUuid {p:?} names no record of the file (a resumed session, a partial log or a sub-agent's file): a thread starts here",
                            r.at.line
                        ));
                    }
                }
            }
        }
        drop(index);
        log.plan()?;
        Ok(log)
    }

    /// Each root's path to its latest leaf (records are in line order),
    /// in the order of the roots.
    fn plan(&mut self) -> Result<()> {
        let records = &self.records;
        let n = records.len();
        let mut has_child = vec![false; n];
        for r in records {
            if let Some(p) = r.parent {
                has_child[p] = true;
            }
        }
        const UNKNOWN: usize = usize::MAX;
        let mut root_of = vec![UNKNOWN; n];
        let mut chain = Vec::new();
        for i in 0..n {
            chain.clear();
            let mut j = i;
            let root = loop {
                if root_of[j] != UNKNOWN {
                    break root_of[j];
                }
                if chain.len() > n {
                    return Err(at(records[j].at.line, "parentUuid links loop"));
                }
                chain.push(j);
                match records[j].parent {
                    Some(p) => j = p,
                    None => break j,
                }
            };
            for &c in &chain {
                root_of[c] = root;
            }
        }
        let mut leaf_of_root = vec![UNKNOWN; n];
        for i in (0..n).filter(|&i| !has_child[i]) {
            leaf_of_root[root_of[i]] = i;
        }
        let mut on_thread = 0usize;
        for (root, &leaf) in leaf_of_root.iter().enumerate() {
            if leaf == UNKNOWN {
                continue;
            }
            let mut path = Vec::new();
            let mut j = Some(leaf);
            while let Some(i) = j {
                if records[i].assistant.is_some() {
                    path.push(i);
                }
                j = records[i].parent;
            }
            path.reverse();
            on_thread += path.len();
            let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
                continue;
            };
            self.threads.push(Plan {
                continues: records[root].continues,
                kind: if records[root].sidechain {
                    ThreadKind::Sidechain
                } else {
                    ThreadKind::Main
                },
                lines: (records[first].at.line, records[last].at.line),
                path,
            });
        }
        let messages = records.iter().filter(|r| r.assistant.is_some()).count();
        self.off_thread = messages - on_thread;
        if self.threads.is_empty() {
            return Err(Error::InvalidInput(
                "the log holds no user or assistant message".into(),
            ));
        }
        Ok(())
    }
}
