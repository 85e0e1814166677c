//! The client side of the read service: a read-only [`Store`] over the
//! service of the process that has the database open.

use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::{CHUNK, HELLO, MAX_FRAME, SOCKET};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::{Durability, SharedBytes, Store, Visit};

/// How long the client waits for an answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The client side: a read-only [`Store`] over the read service of the
/// process that has the database open. Requests are idempotent reads, so
/// a connection the service closed (idle for longer than
/// [`IDLE`](super::IDLE)) is opened again, once, for the next request.
pub(crate) struct RemoteStore {
    dir: PathBuf,
    socket: PathBuf,
    conn: Mutex<Option<Conn>>,
    /// The database's record area: its file, read directly.
    records: crate::store::records::RecordFile,
}

type Conn = (BufReader<UnixStream>, BufWriter<UnixStream>);

/// One item of an answer.
enum Item {
    Session(SessionId),
    Number(u64),
    Frame(u64, Vec<u8>),
}

/// What one item read from the socket is.
enum Answer {
    Done,
    Error(String),
    Item(Item),
}

/// How a request went.
enum Exchange {
    /// Answered whole (`D` or `E`): the visitor's result, or the error the
    /// service gave.
    Answered(Result<()>),
    /// The connection failed; `retry` when it failed before any item was
    /// handed over, in a way a closed connection fails.
    Broken { error: std::io::Error, retry: bool },
}

impl RemoteStore {
    /// Connects to the read service of the database folder `dir`.
    ///
    /// # Errors
    /// [`Error::Locked`] when no process serves it (no socket, or one
    /// nobody listens on); [`Error::Io`] when connecting is refused
    /// otherwise (permission denied: this user may not read the
    /// database); [`Error::Unsupported`] with the service's reason when it
    /// refuses (busy with too many readers).
    pub(crate) fn connect(dir: &Path) -> Result<RemoteStore> {
        let store = RemoteStore {
            dir: dir.to_owned(),
            socket: dir.join(SOCKET),
            conn: Mutex::new(None),
            records: crate::store::records::RecordFile::reader(dir),
        };
        let conn = store.open()?;
        *store.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn);
        Ok(store)
    }

    /// A new connection, greeted.
    fn open(&self) -> Result<Conn> {
        let io = |e: std::io::Error| {
            Error::io(
                format!(
                    "reading {} through its read service ({})",
                    self.dir.display(),
                    self.socket.display()
                ),
                e,
            )
        };
        let conn = UnixStream::connect(&self.socket).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => Error::Locked {
                path: self.dir.clone(),
            },
            _ => io(e),
        })?;
        conn.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
        conn.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
        let mut conn = (
            BufReader::new(conn.try_clone().map_err(io)?),
            BufWriter::new(conn),
        );
        match self.exchange(&mut conn, HELLO, &mut |_| Ok(())) {
            Exchange::Answered(r) => r.map(|()| conn),
            Exchange::Broken { error, .. } => Err(io(error)),
        }
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::io(format!("reading through {}", self.socket.display()), e)
    }

    /// Sends `request` and hands each item of the answer to `item`, over
    /// the open connection or, when the service closed that one, a new one.
    fn request(&self, request: &str, mut item: impl FnMut(Item) -> Result<()>) -> Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let fresh = conn.is_none();
            let c = match &mut *conn {
                Some(c) => c,
                None => conn.insert(self.open()?),
            };
            match self.exchange(c, request, &mut item) {
                Exchange::Answered(r) => return r,
                Exchange::Broken { error, retry } => {
                    *conn = None;
                    if fresh || !retry {
                        return Err(self.io(error));
                    }
                }
            }
        }
    }

    fn exchange(
        &self,
        (input, out): &mut Conn,
        request: &str,
        item: &mut dyn FnMut(Item) -> Result<()>,
    ) -> Exchange {
        let sent = out
            .write_all(request.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        // Even when sending failed, an answer may be waiting: the refusal
        // of a busy service.
        let mut first: Result<()> = Ok(());
        let mut delivered = false;
        loop {
            let next = match read_answer(input) {
                Ok(Answer::Done) if sent.is_ok() => return Exchange::Answered(first),
                Ok(Answer::Error(text)) => {
                    return Exchange::Answered(Err(Error::Unsupported(format!(
                        "the read service of the process that has the database open: {text}"
                    ))));
                }
                Ok(Answer::Item(i)) if sent.is_ok() => i,
                Ok(_) => {
                    return Exchange::Broken {
                        error: sent
                            .err()
                            .unwrap_or_else(|| std::io::Error::other("no request")),
                        retry: !delivered,
                    };
                }
                Err(e) => {
                    let error = sent.err().unwrap_or(e);
                    let retry = !delivered
                        && matches!(
                            error.kind(),
                            std::io::ErrorKind::UnexpectedEof
                                | std::io::ErrorKind::BrokenPipe
                                | std::io::ErrorKind::ConnectionReset
                                | std::io::ErrorKind::ConnectionAborted
                        );
                    return Exchange::Broken { error, retry };
                }
            };
            delivered = true;
            // After the visitor fails or stops, the rest is read and dropped.
            if first.is_ok() {
                first = item(next);
            }
        }
    }

    fn read_only() -> Error {
        Error::Unsupported(
            "this journal is read-only: another process has the database open, and this one reads it through that process's read service".into(),
        )
    }
}

/// Reads one item of an answer.
fn read_answer(input: &mut impl Read) -> std::io::Result<Answer> {
    let mut tag = [0u8; 1];
    input.read_exact(&mut tag)?;
    Ok(match tag[0] {
        b'D' => Answer::Done,
        b'E' => {
            let n = read_u64(input)?.min(1 << 16);
            Answer::Error(String::from_utf8_lossy(&read_bytes(input, n)?).into_owned())
        }
        b'S' => {
            let mut b = [0u8; 16];
            input.read_exact(&mut b)?;
            Answer::Item(Item::Session(SessionId::from_bytes(b)))
        }
        b'L' => Answer::Item(Item::Number(read_u64(input)?)),
        b'F' => {
            let seq = read_u64(input)?;
            let n = read_u64(input)?;
            if n > MAX_FRAME {
                return Err(std::io::Error::other(format!(
                    "a frame of {n} bytes in the answer"
                )));
            }
            Answer::Item(Item::Frame(seq, read_bytes(input, n)?))
        }
        t => {
            return Err(std::io::Error::other(format!(
                "unknown answer item {t:#04x}"
            )));
        }
    })
}

fn read_u64(input: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    input.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_bytes(input: &mut impl Read, n: u64) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::new();
    input.take(n).read_to_end(&mut b)?;
    if b.len() as u64 != n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(b)
}

impl Store for RemoteStore {
    fn kind(&self) -> &'static str {
        "sled (read service)"
    }

    fn append(&self, _: SessionId, _: u64, _: &[Vec<u8>]) -> Result<()> {
        Err(Self::read_only())
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let mut len = None;
        self.request(&format!("len {session}"), |i| {
            if let Item::Number(n) = i {
                len = Some(n);
            }
            Ok(())
        })?;
        Ok(len)
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let mut start = from;
        while start < to {
            let end = start.saturating_add(CHUNK).min(to);
            let mut stopped = false;
            let mut last = None;
            self.request(&format!("scan {session} {start} {end}"), |i| {
                if let Item::Frame(seq, frame) = i {
                    last = Some(seq);
                    if visit(seq, &frame)?.is_break() {
                        stopped = true;
                        return Err(Error::InvalidInput(String::new()));
                    }
                }
                Ok(())
            })
            .or_else(|e| if stopped { Ok(()) } else { Err(e) })?;
            // A chunk that ends short is the end of the stream.
            if stopped || last.is_none_or(|l| l + 1 < end) {
                return Ok(());
            }
            start = end;
        }
        Ok(())
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        let mut out = Vec::new();
        self.request("sessions", |i| {
            if let Item::Session(s) = i {
                out.push(s);
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn put_snapshot(&self, _: SessionId, _: u64, _: Vec<u8>) -> Result<()> {
        // A reader's snapshot is a cache it may skip.
        Ok(())
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        let mut snap = None;
        self.request(&format!("snapshot {session}"), |i| {
            if let Item::Frame(seq, frame) = i {
                snap = Some((seq, SharedBytes::from(frame)));
            }
            Ok(())
        })?;
        Ok(snap)
    }

    fn truncate(&self, _: SessionId, _: u64) -> Result<()> {
        Err(Self::read_only())
    }

    fn delete_session(&self, _: SessionId) -> Result<()> {
        Err(Self::read_only())
    }

    fn drop_snapshots(&self, _: SessionId) -> Result<()> {
        Ok(())
    }

    fn flush(&self, _: Durability) -> Result<()> {
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        let mut size = 0;
        self.request("size", |i| {
            if let Item::Number(n) = i {
                size = n;
            }
            Ok(())
        })?;
        Ok(size)
    }

    fn read_only(&self) -> bool {
        true
    }

    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        self.records.records()
    }

    fn write_records(&self, _: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        Err(Self::read_only())
    }
}
