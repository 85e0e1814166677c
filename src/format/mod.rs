//! The bytes: event frames, the one set of bincode options, shared buffers,
//! and exported journal files (`.ajournal`). Public for tools and fuzzing;
//! an application needs none of it (the journal encodes and checks frames
//! itself). `docs/format.md` describes every format byte by byte.

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
