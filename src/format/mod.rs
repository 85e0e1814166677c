//! The bytes: event frames, the one set of bincode options, shared buffers,
//! timestamps at the precision stored, and exported journal files
//! (`.ajournal`). Public for tools and fuzzing; an application needs little
//! of it (the journal encodes and checks frames itself). `docs/format.md`
//! describes every format byte by byte.
//!
//! ```
//! use agent_journal::format::{DEFAULT_MAX_EVENT_BYTES, decode_frame, encode_frame, now};
//! use agent_journal::{Envelope, Event, SessionId};
//!
//! let event = Event::Custom { kind: "note".into(), payload: b"hello".to_vec() };
//! let envelope = Envelope { session: SessionId::new(), seq: 0, at: now(), event };
//! let frame = encode_frame(&envelope, DEFAULT_MAX_EVENT_BYTES)?;
//! let back: Envelope = decode_frame(&frame, DEFAULT_MAX_EVENT_BYTES).expect("a whole frame");
//! assert_eq!(back, envelope);
//! # Ok::<(), agent_journal::Error>(())
//! ```

pub mod ajournal;
mod bytes;
mod frame;
pub(crate) mod message;
pub(crate) mod splice;
mod tail;

pub use bytes::SharedBytes;
pub(crate) use frame::seal_in_place;
pub use frame::{
    DEFAULT_MAX_EVENT_BYTES, FRAME_HEADER_LEN, FRAME_VERSION, FrameError, codec, decode_frame,
    encode_frame, seal, verify_frame,
};
pub use tail::{TailDamage, TailUnit};

pub use crate::model::{now, ts};
