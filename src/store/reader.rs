//! The read service: live reads of a database another process writes.
//!
//! sled lets one process open a database. While a process has one open
//! (and so holds sled's lock), it serves the database's frames, read-only,
//! to other local processes over a Unix socket in the database folder,
//! `<db>/readers.sock` ([`ReadService`]); [`RemoteStore`] is the client, a
//! read-only [`Store`] that [`Journal::attach`](crate::Journal::attach)
//! opens. The writer's appends never wait for a reader: each reader has its
//! own thread, which reads sled as any other reader of the process does.
//!
//! Frames travel as they are stored and are decoded and checked by the
//! reader's own codec, so `verify` through the service checks every byte.
//! A reader sees what the writer has stored, which for an append in flight
//! may be an event a moment before its appender is told it is durable.
//!
//! The socket grants nothing the files do not: it only reads, and its
//! permissions are those of the database's `db` file, with write permission
//! (which connecting needs) given to whoever may read that file.
//!
//! Protocol (version 1): the client sends one request a line, the server
//! answers with tagged items ending with `D` (done) or `E` (error):
//! `hello agent-journal-readers 1`; `sessions` (`S` + 16-byte id each);
//! `len ID` (`L` + u64, absent if no such session); `scan ID FROM TO` (`F` +
//! u64 seq + u64 length + bytes, each frame); `snapshot ID` (one `F`, absent
//! if none); `size` (`L` + u64). Integers are little-endian.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Durability, SharedBytes, Store, Visit};
use crate::error::{Error, Result};
use crate::model::SessionId;

/// The socket's name in the database folder.
pub const SOCKET: &str = "readers.sock";
const HELLO: &str = "hello agent-journal-readers 1";
/// Frames asked for in one `scan` request, so that a visitor that stops
/// early wastes at most one chunk.
const CHUNK: u64 = 4096;
/// The largest frame a client accepts (a snapshot of a huge state).
const MAX_FRAME: u64 = 4 << 30;

/// The server side: a thread accepting readers on `<db>/readers.sock`, and
/// one thread per reader. Dropping it stops them and removes the socket.
pub(crate) struct ReadService {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    readers: Arc<Mutex<Vec<UnixStream>>>,
}

impl ReadService {
    /// Starts serving `store` from the database folder `dir`; `None` when
    /// the socket cannot be made there (a folder the process may not write,
    /// a path longer than a socket address allows): the database then
    /// simply has no live readers.
    pub(crate) fn start(dir: &Path, store: Weak<dyn Store>) -> Option<ReadService> {
        let path = dir.join(SOCKET);
        // A socket left by a process that was killed: this process holds
        // sled's lock, so no live service uses it.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).ok()?;
        set_mode(dir, &path);
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stop, readers) = (stop.clone(), readers.clone());
            std::thread::Builder::new()
                .name("agent-journal-readers".into())
                .spawn(move || accept_loop(listener, store, &stop, &readers))
                .ok()?
        };
        Some(ReadService {
            path,
            stop,
            accept: Some(accept),
            readers,
        })
    }
}

impl Drop for ReadService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // A connection wakes the accept loop, which then sees `stop`. When
        // the socket cannot be reached (the folder was moved or deleted
        // while open), the thread is left waiting: it holds no database,
        // only the socket's descriptor.
        // (Or another process's socket now has this path: it is given up
        // on after a second.)
        let woken = UnixStream::connect(&self.path).is_ok();
        if let Some(t) = self.accept.take() {
            for _ in 0..if woken { 1000 } else { 0 } {
                if t.is_finished() {
                    let _ = t.join();
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for r in self
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = r.shutdown(std::net::Shutdown::Both);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Write permission (to connect) for whoever may read the `db` file.
fn set_mode(dir: &Path, socket: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let read = std::fs::metadata(dir.join("db"))
        .map(|m| m.permissions().mode() & 0o444)
        .unwrap_or(0o400);
    let mode = read | (read >> 1);
    let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode));
}

fn accept_loop(
    listener: UnixListener,
    store: Weak<dyn Store>,
    stop: &AtomicBool,
    readers: &Mutex<Vec<UnixStream>>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else {
            // A failing listener (shut down, out of descriptors): back off.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if let Ok(handle) = conn.try_clone() {
            let mut list = readers.lock().unwrap_or_else(|p| p.into_inner());
            // Forget readers that left (a shutdown of a closed socket fails).
            list.retain(|r| r.peer_addr().is_ok());
            list.push(handle);
        }
        let store = store.clone();
        let _ = std::thread::Builder::new()
            .name("agent-journal-reader".into())
            .spawn(move || {
                let _ = serve(conn, store);
            });
    }
}

/// Answers one reader's requests until it hangs up or the journal closes.
fn serve(conn: UnixStream, store: Weak<dyn Store>) -> std::io::Result<()> {
    let mut input = BufReader::new(conn.try_clone()?);
    let mut out = BufWriter::new(conn);
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        // The journal closed: this reader is done.
        let Some(store) = store.upgrade() else {
            return Ok(());
        };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answer(&*store, line.trim_end(), &mut out)
        }));
        drop(store);
        match answer {
            Ok(Ok(())) => out.write_all(b"D")?,
            Ok(Err(Reply::Io(e))) => return Err(e),
            Ok(Err(Reply::Store(e))) => error_item(&mut out, &e.to_string())?,
            Err(_) => error_item(&mut out, "the database panicked while reading")?,
        }
        out.flush()?;
    }
}

enum Reply {
    /// Writing to the reader failed: it is gone.
    Io(std::io::Error),
    /// The store refused: told to the reader.
    Store(Error),
}

impl From<std::io::Error> for Reply {
    fn from(e: std::io::Error) -> Self {
        Reply::Io(e)
    }
}

impl From<Error> for Reply {
    fn from(e: Error) -> Self {
        Reply::Store(e)
    }
}

fn error_item(out: &mut impl Write, message: &str) -> std::io::Result<()> {
    out.write_all(b"E")?;
    out.write_all(&(message.len() as u64).to_le_bytes())?;
    out.write_all(message.as_bytes())
}

fn frame_item(out: &mut impl Write, seq: u64, frame: &[u8]) -> std::io::Result<()> {
    out.write_all(b"F")?;
    out.write_all(&seq.to_le_bytes())?;
    out.write_all(&(frame.len() as u64).to_le_bytes())?;
    out.write_all(frame)
}

fn answer(store: &dyn Store, request: &str, out: &mut impl Write) -> Result<(), Reply> {
    let bad = || Reply::Store(Error::InvalidInput(format!("bad request {request:?}")));
    let words: Vec<&str> = request.split(' ').collect();
    let id = |i: usize| -> Result<SessionId, Reply> {
        words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad)
    };
    let num = |i: usize| -> Result<u64, Reply> {
        words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad)
    };
    match words[0] {
        "hello" if request == HELLO => {}
        "sessions" => {
            for s in store.sessions()? {
                out.write_all(b"S")?;
                out.write_all(s.as_bytes())?;
            }
        }
        "len" => {
            if let Some(n) = store.len(id(1)?)? {
                out.write_all(b"L")?;
                out.write_all(&n.to_le_bytes())?;
            }
        }
        "scan" => {
            let (session, from, to) = (id(1)?, num(2)?, num(3)?);
            let mut failed = None;
            store.scan(
                session,
                from,
                to,
                &mut |seq, frame| match frame_item(out, seq, frame) {
                    Ok(()) => Ok(Visit::Continue(())),
                    Err(e) => {
                        failed = Some(e);
                        Ok(Visit::Break(()))
                    }
                },
            )?;
            if let Some(e) = failed {
                return Err(Reply::Io(e));
            }
        }
        "snapshot" => {
            if let Some((seq, frame)) = store.latest_snapshot(id(1)?)? {
                frame_item(out, seq, &frame)?;
            }
        }
        "size" => {
            out.write_all(b"L")?;
            out.write_all(&store.size_on_disk()?.to_le_bytes())?;
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// The client side: a read-only [`Store`] over the read service of the
/// process that has the database open.
pub(crate) struct RemoteStore {
    socket: PathBuf,
    conn: Mutex<(BufReader<UnixStream>, BufWriter<UnixStream>)>,
    /// The database's record area: its file, read directly.
    records: crate::store::records::RecordFile,
}

/// One item of an answer.
enum Item {
    Session(SessionId),
    Number(u64),
    Frame(u64, Vec<u8>),
}

impl RemoteStore {
    /// Connects to the read service of the database folder `dir`.
    ///
    /// # Errors
    /// [`Error::Locked`] (with the reason in the message of the I/O error
    /// beneath) when no process serves it.
    pub(crate) fn connect(dir: &Path) -> Result<RemoteStore> {
        let socket = dir.join(SOCKET);
        let io = |e: std::io::Error| {
            Error::io(
                format!(
                    "reading {} through its read service ({})",
                    dir.display(),
                    socket.display()
                ),
                e,
            )
        };
        let conn = UnixStream::connect(&socket).map_err(io)?;
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(io)?;
        let store = RemoteStore {
            conn: Mutex::new((
                BufReader::new(conn.try_clone().map_err(io)?),
                BufWriter::new(conn),
            )),
            socket,
            records: crate::store::records::RecordFile::reader(dir),
        };
        store.request(HELLO, |_| Ok(()))?;
        Ok(store)
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::io(format!("reading through {}", self.socket.display()), e)
    }

    /// Sends `request` and hands each item of the answer to `item`.
    fn request(&self, request: &str, mut item: impl FnMut(Item) -> Result<()>) -> Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let (input, out) = &mut *conn;
        out.write_all(request.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .map_err(|e| self.io(e))?;
        let mut first: Result<()> = Ok(());
        loop {
            let mut tag = [0u8; 1];
            input.read_exact(&mut tag).map_err(|e| self.io(e))?;
            let next = match tag[0] {
                b'D' => return first,
                b'E' => {
                    let n = self.u64(input)?.min(1 << 16);
                    let text = self.bytes(input, n)?;
                    return Err(Error::Unsupported(format!(
                        "the process that has the database open could not read it: {}",
                        String::from_utf8_lossy(&text)
                    )));
                }
                b'S' => {
                    let mut b = [0u8; 16];
                    input.read_exact(&mut b).map_err(|e| self.io(e))?;
                    Item::Session(SessionId::from_bytes(b))
                }
                b'L' => Item::Number(self.u64(input)?),
                b'F' => {
                    let seq = self.u64(input)?;
                    let n = self.u64(input)?;
                    if n > MAX_FRAME {
                        return Err(self.io(std::io::Error::other(format!(
                            "a frame of {n} bytes in the answer"
                        ))));
                    }
                    Item::Frame(seq, self.bytes(input, n)?)
                }
                t => {
                    return Err(self.io(std::io::Error::other(format!(
                        "unknown answer item {t:#04x}"
                    ))));
                }
            };
            // After the visitor fails or stops, the rest is read and dropped.
            if first.is_ok() {
                first = item(next);
            }
        }
    }

    fn u64(&self, input: &mut impl Read) -> Result<u64> {
        let mut b = [0u8; 8];
        input.read_exact(&mut b).map_err(|e| self.io(e))?;
        Ok(u64::from_le_bytes(b))
    }

    fn bytes(&self, input: &mut impl Read, n: u64) -> Result<Vec<u8>> {
        let mut b = Vec::new();
        input.take(n).read_to_end(&mut b).map_err(|e| self.io(e))?;
        if b.len() as u64 != n {
            return Err(self.io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(b)
    }

    fn read_only() -> Error {
        Error::Unsupported(
            "this journal is read-only: another process has the database open, and this one reads it through that process's read service".into(),
        )
    }
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
