//! The server side of the read service: a thread accepting readers on
//! `<db>/readers.sock`, and one thread per admitted reader, with the
//! bounds of the module's documentation.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{CHUNK, HELLO, IDLE, MAX_BAD, MAX_LINE, MAX_READERS, SOCKET};
use crate::error::Error;
use crate::model::SessionId;
use crate::store::{Store, Visit};

/// The server side. Dropping it stops its threads and removes the socket.
pub(crate) struct ReadService {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
}

impl ReadService {
    /// Starts serving `store` from the database folder `dir`; `None` when
    /// the socket cannot be made there with the right mode (a folder the
    /// process may not write, a path longer than a socket address allows):
    /// the database then simply has no live readers.
    pub(crate) fn start(dir: &Path, store: Weak<dyn Store>) -> Option<ReadService> {
        let path = dir.join(SOCKET);
        let listener = bind(dir, &path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Readers::default());
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
        // The readers' threads wake, see the journal gone and end.
        for r in self.readers.lock().1.values() {
            let _ = r.shutdown(std::net::Shutdown::Both);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket at `path` with the mode of [`socket_mode`] before it
/// appears there: it is made in a private folder (mode 0700, so no other
/// user can connect to it meanwhile), given its mode, then renamed into
/// place. A socket left at `path` by a process that was killed is
/// replaced (this process holds sled's lock, so no live service uses it).
fn bind(dir: &Path, path: &Path) -> Option<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    // Short, since a socket address holds ~108 bytes.
    let private = dir.join(format!(".r{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .ok()?;
    let made = (|| {
        let tmp = private.join("s");
        let listener = UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(socket_mode(dir)))?;
        std::fs::rename(&tmp, path)?;
        Ok::<_, std::io::Error>(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    made.ok()
}

/// Write permission (to connect) for whoever may read the `db` file
/// (the owner only when it cannot be read).
fn socket_mode(dir: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    let read = std::fs::metadata(dir.join("db"))
        .map(|m| m.permissions().mode() & 0o444)
        .unwrap_or(0o400);
    read | (read >> 1)
}

/// The connections being served, so that they are counted and closing the
/// journal can shut them down. A connection leaves when its thread ends.
#[derive(Default)]
struct Readers {
    open: Mutex<(u64, HashMap<u64, UnixStream>)>,
}

impl Readers {
    fn lock(&self) -> MutexGuard<'_, (u64, HashMap<u64, UnixStream>)> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for `conn`, or `None` when [`MAX_READERS`] are served (or
    /// the process is out of descriptors).
    fn admit(self: &Arc<Self>, conn: &UnixStream) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.1.len() >= MAX_READERS {
            return None;
        }
        let handle = conn.try_clone().ok()?;
        open.0 += 1;
        let id = open.0;
        open.1.insert(id, handle);
        Some(Admitted {
            readers: self.clone(),
            id,
        })
    }
}

/// A served connection's place; given back when dropped.
struct Admitted {
    readers: Arc<Readers>,
    id: u64,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.readers.lock().1.remove(&self.id);
    }
}

fn accept_loop(
    listener: UnixListener,
    store: Weak<dyn Store>,
    stop: &AtomicBool,
    readers: &Arc<Readers>,
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
        let Some(place) = readers.admit(&conn) else {
            refuse(conn);
            continue;
        };
        let store = store.clone();
        // When no thread can be made, the closure is dropped: the
        // connection closes and its place is given back.
        let _ = std::thread::Builder::new()
            .name("agent-journal-reader".into())
            .spawn(move || {
                let _place = place;
                let _ = serve(&conn, store);
            });
    }
}

/// Tells a reader beyond [`MAX_READERS`] so, without waiting on it.
fn refuse(conn: UnixStream) {
    let _ = conn.set_nonblocking(true);
    let _ = error_item(
        &mut &conn,
        &format!("the read service is busy ({MAX_READERS} readers are connected); try again later"),
    );
}

/// What [`read_request`] read.
enum Line {
    /// A whole line, newline excluded.
    Request,
    /// The reader hung up (at a line's start or in the middle of one).
    End,
    /// Longer than [`MAX_LINE`]: the rest is not read.
    TooLong,
}

/// Reads one request line into `line`, at most [`MAX_LINE`] bytes, which
/// must arrive whole within [`IDLE`].
///
/// # Errors
/// The socket's, and `TimedOut` when [`IDLE`] passes first.
fn read_request(input: &mut BufReader<&UnixStream>, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let deadline = Instant::now() + IDLE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        input.get_ref().set_read_timeout(Some(left))?;
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(Line::End);
        }
        let (take, whole) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_LINE {
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&buf[..take]);
        input.consume(take);
        if whole {
            line.pop();
            return Ok(Line::Request);
        }
    }
}

/// Answers one reader's requests until it hangs up, breaks a bound, or the
/// journal closes.
fn serve(conn: &UnixStream, store: Weak<dyn Store>) -> std::io::Result<()> {
    conn.set_write_timeout(Some(IDLE))?;
    let mut input = BufReader::with_capacity(MAX_LINE, conn);
    let mut out = BufWriter::new(conn);
    let mut line = Vec::with_capacity(128);
    let mut bad = 0;
    loop {
        match read_request(&mut input, &mut line)? {
            Line::Request => {}
            Line::End => return Ok(()),
            Line::TooLong => {
                error_item(
                    &mut out,
                    &format!("a request line longer than {MAX_LINE} bytes; closing"),
                )?;
                return out.flush();
            }
        }
        // The journal closed: this reader is done.
        let Some(store) = store.upgrade() else {
            return Ok(());
        };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match std::str::from_utf8(&line) {
                Ok(request) => answer(&*store, request.trim_end_matches('\r'), &mut out),
                Err(_) => Err(Reply::Bad("a request that is not UTF-8".into())),
            }
        }));
        drop(store);
        match answer {
            Ok(Ok(())) => out.write_all(b"D")?,
            Ok(Err(Reply::Io(e))) => return Err(e),
            Ok(Err(Reply::Store(e))) => error_item(&mut out, &e.to_string())?,
            Ok(Err(Reply::Bad(what))) => {
                bad += 1;
                if bad >= MAX_BAD {
                    error_item(
                        &mut out,
                        &format!("{what}; {MAX_BAD} bad requests, closing"),
                    )?;
                    return out.flush();
                }
                error_item(&mut out, &what)?;
            }
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
    /// The request is not one of the protocol's: told to the reader, and
    /// counted against [`MAX_BAD`].
    Bad(String),
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

/// Answers `request` on `out`, frames written as the store hands them over
/// (`out` is a small buffer over the socket, never the whole answer).
fn answer(store: &dyn Store, request: &str, out: &mut impl Write) -> Result<(), Reply> {
    let bad = || {
        let shown: String = request.chars().take(80).collect();
        Reply::Bad(format!("bad request {shown:?}"))
    };
    let words: Vec<&str> = request.split(' ').collect();
    let id = |i: usize| -> Result<SessionId, Reply> {
        words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad)
    };
    let num = |i: usize| -> Result<u64, Reply> {
        words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad)
    };
    match words.first().copied().unwrap_or("") {
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
            let (session, from) = (id(1)?, num(2)?);
            let to = num(3)?.min(from.saturating_add(CHUNK));
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
