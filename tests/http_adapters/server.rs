//! A scripted HTTP/1.1 server on 127.0.0.1 for the adapter tests: it
//! answers each connection, in the order they come, with the next
//! [`Reply`] of its script (one request per connection, `Connection:
//! close`), records what it received, and stops by itself when the script
//! is done or when no connection came for a while.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a server waits for its next connection before it gives up.
const ACCEPT_DEADLINE: Duration = Duration::from_secs(20);

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A whole response.
    Full {
        status: u16,
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
    /// A response announcing `Content-Length: declared` that sends only
    /// `body` and closes.
    Cut { declared: usize, body: Vec<u8> },
    /// A response written in `parts` with `pause` between them, then
    /// `stall` before closing: with `Transfer-Encoding: chunked` (each part
    /// a chunk; the closing empty chunk only if `complete`), or else
    /// without a length, ended by closing.
    Parts {
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        parts: Vec<Vec<u8>>,
        pause: Duration,
        stall: Duration,
        chunked: bool,
        complete: bool,
    },
    /// Nothing for `delay`, then a small JSON response.
    Slow { delay: Duration },
}

impl Reply {
    /// A 200 JSON response with `x-request-id` and `request-id` headers.
    pub fn json(body: &Value, request_id: &str) -> Reply {
        Reply::status(200, body, request_id)
    }

    /// A JSON response with status `status` and the request-id headers.
    pub fn status(status: u16, body: &Value, request_id: &str) -> Reply {
        Reply::Full {
            status,
            content_type: "application/json",
            headers: request_ids(request_id),
            body: body.to_string().into_bytes(),
        }
    }

    /// A response of `status` with `body` as plain text.
    pub fn text(status: u16, body: &str, request_id: &str) -> Reply {
        Reply::Full {
            status,
            content_type: "text/html",
            headers: request_ids(request_id),
            body: body.as_bytes().to_vec(),
        }
    }

    /// An event stream of `body`, chunked as servers send it, in chunks of
    /// `piece` bytes (so events and lines are cut between reads).
    pub fn sse(body: &str, piece: usize, request_id: &str) -> Reply {
        Reply::Parts {
            content_type: "text/event-stream",
            headers: request_ids(request_id),
            parts: body.as_bytes().chunks(piece).map(<[u8]>::to_vec).collect(),
            pause: Duration::from_millis(2),
            stall: Duration::ZERO,
            chunked: true,
            complete: true,
        }
    }

    /// The same, chunked, but the connection closes before the last chunk.
    pub fn sse_dropped(body: &str, piece: usize, request_id: &str) -> Reply {
        let mut reply = Reply::sse(body, piece, request_id);
        if let Reply::Parts { complete, .. } = &mut reply {
            *complete = false;
        }
        reply
    }

    /// An event stream of `body` without a length, ended by closing.
    pub fn sse_closing(body: &str, piece: usize, request_id: &str) -> Reply {
        Reply::Parts {
            content_type: "text/event-stream",
            headers: request_ids(request_id),
            parts: body.as_bytes().chunks(piece).map(<[u8]>::to_vec).collect(),
            pause: Duration::from_millis(2),
            stall: Duration::ZERO,
            chunked: false,
            complete: true,
        }
    }
}

fn request_ids(id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-request-id", id.to_owned()),
        ("request-id", id.to_owned()),
    ]
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Null` if it is not JSON).
    pub body: Value,
}

impl Received {
    /// The header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// A running scripted server.
pub struct Server {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server on 127.0.0.1 (a free port) answering with `script`.
    pub fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        // Each connection is served on a thread of its own, so a slow
        // reply does not hold up the next one.
        let thread = thread::spawn(move || {
            let mut handlers = Vec::new();
            for reply in script {
                let Some(stream) = accept(&listener) else {
                    break;
                };
                let log = Arc::clone(&log);
                handlers.push(thread::spawn(move || serve(stream, &reply, &log)));
            }
            for h in handlers {
                let _ = h.join();
            }
        });
        Server {
            addr,
            received,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, a base URL for the adapters.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("log").clone()
    }

    /// Waits for the script to be played out, then the requests.
    pub fn finish(mut self) -> Vec<Received> {
        if let Some(t) = self.thread.take() {
            t.join().expect("server thread");
        }
        self.received()
    }
}

/// The next connection, or none after [`ACCEPT_DEADLINE`].
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    let deadline = Instant::now() + ACCEPT_DEADLINE;
    while Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).ok()?;
                return Some(stream);
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
    None
}

/// Reads one request, records it, writes `reply` (write errors ignored:
/// the client may have given up, which some tests want).
fn serve(mut stream: TcpStream, reply: &Reply, log: &Mutex<Vec<Received>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    if let Some(request) = read_request(&mut stream) {
        log.lock().expect("log").push(request);
    }
    let _ = write_reply(&mut stream, reply);
    let _ = stream.flush();
}

fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = serde_json::from_slice(&data[head_end..]).unwrap_or(Value::Null);
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A response's status line and headers.
fn head(
    status: u16,
    content_type: &str,
    headers: &[(&str, String)],
    length: Option<usize>,
    chunked: bool,
) -> Vec<u8> {
    let mut h = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\nconnection: close\r\n",
        reason(status)
    );
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(l) = length {
        h.push_str(&format!("content-length: {l}\r\n"));
    }
    if chunked {
        h.push_str("transfer-encoding: chunked\r\n");
    }
    h.push_str("\r\n");
    h.into_bytes()
}

fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    match reply {
        Reply::Full {
            status,
            content_type,
            headers,
            body,
        } => {
            stream.write_all(&head(
                *status,
                content_type,
                headers,
                Some(body.len()),
                false,
            ))?;
            stream.write_all(body)
        }
        Reply::Cut { declared, body } => {
            stream.write_all(&head(200, "application/json", &[], Some(*declared), false))?;
            stream.write_all(body)
        }
        Reply::Parts {
            content_type,
            headers,
            parts,
            pause,
            stall,
            chunked,
            complete,
        } => {
            stream.write_all(&head(200, content_type, headers, None, *chunked))?;
            for p in parts {
                if *chunked {
                    stream.write_all(format!("{:x}\r\n", p.len()).as_bytes())?;
                    stream.write_all(p)?;
                    stream.write_all(b"\r\n")?;
                } else {
                    stream.write_all(p)?;
                }
                stream.flush()?;
                thread::sleep(*pause);
            }
            thread::sleep(*stall);
            if *chunked && *complete {
                stream.write_all(b"0\r\n\r\n")?;
            }
            Ok(())
        }
        Reply::Slow { delay } => {
            thread::sleep(*delay);
            stream.write_all(&head(200, "application/json", &[], Some(2), false))?;
            stream.write_all(b"{}")
        }
    }
}
