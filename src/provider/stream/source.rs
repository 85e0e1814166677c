//! Where a conversation's text comes from ([`Source`]: a file read in
//! passes, or a pipe read once) and the reader every record of it is
//! parsed through, which fails past [`MAX_RECORD_BYTES`] ([`capped`],
//! [`Budget`]).

use std::cell::Cell;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::provider::input::{Input, MAX_RECORD_BYTES, check_input};

/// Where the text comes from: a file read in passes, or the bytes of a
/// pipe read once.
#[derive(Clone)]
pub(crate) enum Source {
    /// A regular file.
    File(PathBuf),
    /// Text already read.
    Bytes(Arc<[u8]>),
}

impl Source {
    /// The input `path` ([`check_input`]): a regular file of at most
    /// `limit` bytes, read later in passes; or standard input, read now
    /// (no further than `limit`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] past the limit or for a path that is not a
    /// regular file; [`Error::Io`] if it cannot be read.
    pub(crate) fn of(path: &Path, limit: u64) -> Result<Source> {
        let too_big = || {
            Error::InvalidInput(format!(
                "{}: larger than the limit of {limit} bytes (--max-bytes); nothing was imported",
                path.display()
            ))
        };
        let io = |e| Error::io(format!("reading {}", path.display()), e);
        if let Input::File { len } = check_input(path)? {
            if len > limit {
                return Err(too_big());
            }
            return Ok(Source::File(path.to_owned()));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(limit.saturating_add(1)).read_to_end(&mut bytes))
            .map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(too_big());
        }
        Ok(Source::Bytes(bytes.into()))
    }

    pub(crate) fn open(&self) -> Result<Box<dyn Read + Send>> {
        match self {
            Source::File(p) => Ok(Box::new(BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(p)
                    .map_err(|e| Error::io(format!("reading {}", p.display()), e))?,
            ))),
            Source::Bytes(b) => Ok(Box::new(std::io::Cursor::new(b.clone()))),
        }
    }
}

/// An error of JSON text, with its line and column.
pub(crate) fn json_error(e: &serde_json::Error) -> Error {
    Error::InvalidInput(format!(
        "invalid JSON at line {} column {}: {e}",
        e.line(),
        e.column()
    ))
}

/// The bytes read of the record being parsed, shared by a [`Capped`]
/// reader and the visitors that start each record.
pub(crate) struct Budget {
    used: Cell<u64>,
    /// The record being read (`messages[3]`, `tools`), once it is over.
    over: Cell<Option<usize>>,
    /// The place of the record being read: an element's index, or
    /// `usize::MAX` for a member of the request.
    at: Cell<usize>,
}

impl Budget {
    pub(crate) fn new() -> Rc<Self> {
        Rc::new(Budget {
            used: Cell::new(0),
            over: Cell::new(None),
            at: Cell::new(usize::MAX),
        })
    }

    /// A new record starts, at place `at`.
    pub(crate) fn start(&self, at: usize) {
        self.used.set(0);
        self.at.set(at);
    }

    /// True once a record went over the limit (the parse then fails).
    pub(crate) fn is_over(&self) -> bool {
        self.over.get().is_some()
    }

    /// The error of a parse that failed: the record over the limit if the
    /// reader stopped it, else the JSON error.
    pub(crate) fn error(&self, e: &serde_json::Error, list: &str) -> Error {
        match self.over.get() {
            Some(usize::MAX) => Error::InvalidInput(format!(
                "a member of the request near line {} is over the limit of {MAX_RECORD_BYTES} bytes for one record; nothing was imported",
                e.line()
            )),
            Some(i) => Error::InvalidInput(format!(
                "{list}[{i}]: over the limit of {MAX_RECORD_BYTES} bytes for one record (an event holds at most 16 MiB); nothing was imported"
            )),
            None => json_error(e),
        }
    }
}

/// A reader that fails once the record being parsed passes
/// [`MAX_RECORD_BYTES`] (see [`Budget`]).
pub(crate) struct Capped<R> {
    pub(crate) inner: R,
    pub(crate) budget: Rc<Budget>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let used = self.budget.used.get() + n as u64;
        self.budget.used.set(used);
        if used > MAX_RECORD_BYTES {
            self.budget.over.set(Some(self.budget.at.get()));
            return Err(std::io::Error::other("a record over the limit"));
        }
        Ok(n)
    }
}

/// A JSON deserializer whose records are capped ([`Capped`]).
pub(crate) type CappedDeserializer =
    serde_json::Deserializer<serde_json::de::IoRead<Capped<Box<dyn Read + Send>>>>;

/// A JSON deserializer over `source` whose records are capped.
pub(crate) fn capped(source: &Source) -> Result<(CappedDeserializer, Rc<Budget>)> {
    let budget = Budget::new();
    let reader = Capped {
        inner: source.open()?,
        budget: budget.clone(),
    };
    Ok((serde_json::Deserializer::from_reader(reader), budget))
}
