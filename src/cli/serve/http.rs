//! The HTTP side of `serve`: a bounded, blocking HTTP/1.1 server for one
//! `GET` a connection, its requests parsed by `httparse` (see Cargo.toml
//! for why not a whole server crate).
//!
//! Whatever a client sends, it costs the server a bounded amount:
//! - [`WORKERS`] threads serve connections; [`QUEUE`] more wait for one;
//!   any further connection is answered `503` at once and closed (no
//!   thread, no wait);
//! - the request head (request line and headers) is read into a buffer of
//!   [`MAX_HEAD`] bytes with at most [`MAX_HEADERS`] headers: a longer
//!   one is answered `431` and the connection closed, its rest unread;
//! - the head must arrive whole within [`IDLE`] (`408` otherwise, however
//!   slowly it trickles), and a client must take the answer within
//!   [`IDLE`];
//! - a request with a body is refused (`413`): no route takes one;
//! - a failing `accept` (out of descriptors) is waited out, never the end
//!   of the server.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Threads serving connections.
pub(crate) const WORKERS: usize = 16;
/// Accepted connections waiting for a worker; more are answered `503`.
pub(crate) const QUEUE: usize = 64;
/// The largest request head read (request line and headers).
pub(crate) const MAX_HEAD: usize = 16 << 10;
/// The most headers a request may have.
pub(crate) const MAX_HEADERS: usize = 64;
/// How long a request head may take to arrive, and an answer to be taken.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// A parsed request: what the routes need.
pub(crate) struct Request {
    /// The method (`GET`).
    pub(crate) method: String,
    /// The request target (`/s/ID?x=y`).
    pub(crate) target: String,
    /// The `Host` header, if any.
    pub(crate) host: Option<String>,
}

/// A response: status line, content type, body.
pub(crate) struct Reply(
    pub(crate) &'static str,
    pub(crate) &'static str,
    pub(crate) Vec<u8>,
);

/// A plain-text response.
pub(crate) fn text(status: &'static str, body: impl Into<String>) -> Reply {
    Reply(
        status,
        "text/plain; charset=utf-8",
        body.into().into_bytes(),
    )
}

/// Serves `listener` with `handle` until the process ends.
pub(crate) fn run<H>(listener: TcpListener, handle: H)
where
    H: Fn(Request) -> Reply + Send + Sync + 'static,
{
    let handle = Arc::new(handle);
    let (queue, waiting) = sync_channel::<TcpStream>(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    for _ in 0..WORKERS {
        let (waiting, handle) = (waiting.clone(), handle.clone());
        // A worker that cannot be made leaves the others.
        let _ = std::thread::Builder::new()
            .name("serve-worker".into())
            .spawn(move || worker(&waiting, &*handle));
    }
    accept(&listener, &queue);
}

fn accept(listener: &TcpListener, queue: &SyncSender<TcpStream>) {
    loop {
        match listener.accept() {
            Ok((conn, _)) => match queue.try_send(conn) {
                Ok(()) => {}
                Err(TrySendError::Full(conn)) => {
                    let _ = conn.set_nonblocking(true);
                    let _ = respond(&conn, &text("503 Service Unavailable", "busy\n"));
                }
                Err(TrySendError::Disconnected(_)) => return,
            },
            // Out of descriptors, or a connection reset before it was
            // accepted: wait a moment and go on.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn worker(waiting: &Mutex<Receiver<TcpStream>>, handle: &(dyn Fn(Request) -> Reply + Sync)) {
    loop {
        let next = waiting.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(conn) = next else {
            return;
        };
        let reply = match read_request(&conn) {
            Ok(request) => {
                let answer =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(request)));
                answer
                    .unwrap_or_else(|_| text("500 Internal Server Error", "the server panicked\n"))
            }
            Err(Some(reply)) => {
                // The client may still be sending (a head too long):
                // closing now would reset the connection before it reads
                // the refusal, so some of the rest is read and dropped.
                if respond(&conn, &reply).is_ok() {
                    drain(&conn);
                }
                continue;
            }
            Err(None) => continue,
        };
        let _ = respond(&conn, &reply);
    }
}

/// Reads and drops what the client still sends, for at most half a second
/// and 1 MiB.
fn drain(conn: &TcpStream) {
    let until = Instant::now() + Duration::from_millis(500);
    let mut sink = [0u8; 16 << 10];
    let mut dropped = 0;
    while dropped < (1 << 20) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match (&*conn).read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => dropped += n,
        }
    }
}

/// Reads and parses one request head from `conn`: the refusal to send
/// instead, or `None` when the client left.
fn read_request(conn: &TcpStream) -> Result<Request, Option<Reply>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut filled = 0;
    let deadline = Instant::now() + IDLE;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..filled]) {
            Ok(httparse::Status::Complete(_)) => return accept_head(&req),
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Some(text(
                    "431 Request Header Fields Too Large",
                    format!("more than {MAX_HEADERS} headers\n"),
                )));
            }
            Err(e) => return Err(Some(text("400 Bad Request", format!("{e}\n")))),
        }
        if filled == buf.len() {
            return Err(Some(text(
                "431 Request Header Fields Too Large",
                format!("a request head longer than {MAX_HEAD} bytes\n"),
            )));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return Err(Some(text("408 Request Timeout", "too slow\n")));
        }
        match (&*conn).read(&mut buf[filled..]) {
            Ok(0) => return Err(None),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Some(text("408 Request Timeout", "too slow\n")));
            }
            Err(_) => return Err(None),
        }
    }
}

/// The parts of a whole head the routes need; a request with a body is
/// refused.
fn accept_head(req: &httparse::Request<'_, '_>) -> Result<Request, Option<Reply>> {
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
    };
    let has_body =
        header("transfer-encoding").is_some() || header("content-length").is_some_and(|n| n != "0");
    if has_body {
        return Err(Some(text(
            "413 Content Too Large",
            "no request body here\n",
        )));
    }
    Ok(Request {
        method: req.method.unwrap_or("").to_owned(),
        target: req.path.unwrap_or("").to_owned(),
        host: header("host"),
    })
}

/// Writes `reply` and closes the connection (one request a connection).
fn respond(conn: &TcpStream, reply: &Reply) -> std::io::Result<()> {
    let Reply(status, kind, body) = reply;
    let _ = conn.set_write_timeout(Some(IDLE));
    let mut out = std::io::BufWriter::new(conn);
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()?;
    // The client's unread bytes would make closing reset the connection
    // before it reads the answer: stop sending, and let it read.
    conn.shutdown(std::net::Shutdown::Write)
}
