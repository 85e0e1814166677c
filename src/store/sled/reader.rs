//! The read service: live reads of a database another process writes.
//!
//! sled lets one process open a database. While a process has one open
//! (and so holds sled's lock), it serves the database's frames, read-only,
//! to other local processes over a Unix socket in the database folder,
//! `<db>/readers.sock` ([`ReadService`]); [`RemoteStore`] is the client, a
//! read-only [`Store`](super::Store) that
//! [`Journal::attach`](crate::Journal::attach) opens. The writer's appends
//! never wait for a reader: each reader has its own thread, which reads sled
//! as any other reader of the process does.
//!
//! Frames travel as they are stored and are decoded and checked by the
//! reader's own codec, so `verify` through the service checks every byte.
//! A reader sees what the writer has stored, which for an append in flight
//! may be an event a moment before its appender is told it is durable.
//!
//! The socket grants nothing the files do not: it only reads, and its
//! permissions are those of the database's `db` file, with write permission
//! (which connecting needs) given to whoever may read that file. It is
//! given that mode before it appears under its name, so that no one else
//! can connect in between.
//!
//! A reader costs the writing process a bounded amount, whatever it sends
//! (`reader/service.rs` has the limits): at most [`MAX_READERS`] connections are
//! served at once (one more is answered with an `E` item and closed, with
//! no thread); a request line longer than [`MAX_LINE`] bytes is answered
//! with `E` and the connection closed; [`MAX_BAD`] bad requests close it;
//! a line must arrive whole within [`IDLE`] of the previous answer, and an
//! answer the reader does not take within [`IDLE`] closes the connection.
//! Answers are written as they are read from the store, through a small
//! buffer, and a `scan` answers at most [`CHUNK`] frames.
//!
//! Protocol (version 1): the client sends one request a line, the server
//! answers with tagged items ending with `D` (done) or `E` (error):
//! `hello agent-journal-readers 1`; `sessions` (`S` + 16-byte id each);
//! `len ID` (`L` + u64, absent if no such session); `scan ID FROM TO` (`F` +
//! u64 seq + u64 length + bytes, each frame, at most [`CHUNK`] of them);
//! `snapshot ID` (one `F`, absent if none); `size` (`L` + u64). Integers
//! are little-endian; `E` is followed by a u64 length and UTF-8 text. The
//! server may close a connection that stayed idle for [`IDLE`]: the client
//! then connects again for its next request.

mod remote;
mod service;

use std::time::Duration;

pub(crate) use remote::RemoteStore;
pub(crate) use service::ReadService;

/// The socket's name in the database folder.
pub const SOCKET: &str = "readers.sock";
const HELLO: &str = "hello agent-journal-readers 1";
/// Frames asked for (and at most answered) in one `scan` request, so that
/// a visitor that stops early wastes at most one chunk and one request
/// never makes the writer work for long.
const CHUNK: u64 = 4096;
/// The largest frame a client accepts (a snapshot of a huge state).
const MAX_FRAME: u64 = 4 << 30;
/// Reader connections served at once; more are refused.
pub(crate) const MAX_READERS: usize = 64;
/// The longest request line (with its newline) the service reads.
pub(crate) const MAX_LINE: usize = 4096;
/// Bad requests (unknown, malformed, not UTF-8) after which the service
/// closes a connection.
pub(crate) const MAX_BAD: u32 = 3;
/// How long the service waits for a whole request line (after the previous
/// answer), and for a reader to take an answer, before closing the
/// connection.
pub(crate) const IDLE: Duration = Duration::from_secs(30);
