//! The frame format and the one set of bincode options used everywhere.
//!
//! ```text
//! u8      format version (1)
//! u32 LE  crc32 (crc32fast) of the body
//! body    bincode 1.3.3 (DefaultOptions + with_limit) of the value
//! ```
//!
//! Decoding never allocates more than the limit, whatever the input: a body
//! over the limit is refused before decoding, and bincode allocates at most
//! in proportion to the bytes it is given.

use bincode::Options;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The frame format version written by this build.
pub const FRAME_VERSION: u8 = 1;

/// Bytes before the body: version and crc.
pub const FRAME_HEADER_LEN: usize = 5;

/// Default limit for one encoded event: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: u64 = 16 << 20;

/// The bincode options used for every body: varint integers, little endian,
/// trailing bytes rejected, and a size limit in bytes.
pub fn codec(limit: u64) -> impl Options + Copy {
    bincode::DefaultOptions::new()
        .with_limit(limit)
        .reject_trailing_bytes()
}

/// Why a frame could not be decoded. Callers add the location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than a header.
    Truncated {
        /// How many bytes there were.
        len: usize,
    },
    /// A version byte this build does not know.
    UnknownVersion(u8),
    /// The body does not match its checksum.
    BadChecksum {
        /// The crc stored in the header.
        stored: u32,
        /// The crc of the body as read.
        actual: u32,
    },
    /// The checksum matched but the body is not a valid value.
    Decode(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Truncated { len } => write!(
                f,
                "frame truncated ({len} bytes, header needs {FRAME_HEADER_LEN})"
            ),
            FrameError::UnknownVersion(v) => write!(
                f,
                "unknown frame version {v} (this build reads version {FRAME_VERSION})"
            ),
            FrameError::BadChecksum { stored, actual } => {
                write!(
                    f,
                    "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
                )
            }
            FrameError::Decode(e) => write!(f, "undecodable body: {e}"),
        }
    }
}

/// Encodes `value` as a frame. Fails with [`Error::TooLarge`] (having
/// allocated nothing) when the body would be over `limit`.
///
/// Two walks of the value: the first sizes it (bincode's
/// `serialized_size`, which only adds lengths), so the frame is written
/// into a buffer of its exact size: a buffer grown by doubling holds up to
/// twice the frame (a 31 MB frame of a 15 MB message at the peak of an
/// import).
pub fn encode_frame<T: Serialize + ?Sized>(value: &T, limit: u64) -> Result<Vec<u8>> {
    let options = bincode::DefaultOptions::new().reject_trailing_bytes();
    let size = options
        .serialized_size(value)
        .map_err(|e| Error::InvalidInput(format!("cannot encode value: {e}")))?;
    if size > limit {
        return Err(Error::TooLarge { size, limit });
    }
    let len = usize::try_from(size)
        .ok()
        .and_then(|n| n.checked_add(FRAME_HEADER_LEN))
        .ok_or(Error::TooLarge { size, limit })?;
    let mut buf = Vec::with_capacity(len);
    buf.extend_from_slice(&[FRAME_VERSION, 0, 0, 0, 0]);
    options
        .serialize_into(&mut buf, value)
        .map_err(|e| Error::InvalidInput(format!("cannot encode value: {e}")))?;
    let crc = crc32fast::hash(&buf[FRAME_HEADER_LEN..]);
    buf[1..FRAME_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(buf)
}

/// Seals an arbitrary body as a frame (valid version and crc). Used to test
/// and fuzz the decoder behind the checksum.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(body.len() + FRAME_HEADER_LEN);
    buf.push(FRAME_VERSION);
    buf.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    buf.extend_from_slice(body);
    buf
}

/// Makes `buf` a frame: its first [`FRAME_HEADER_LEN`] bytes (reserved by
/// the caller) become the header of the body after them.
pub(crate) fn seal_in_place(buf: &mut [u8]) {
    if buf.len() < FRAME_HEADER_LEN {
        return;
    }
    let crc = crc32fast::hash(&buf[FRAME_HEADER_LEN..]);
    buf[0] = FRAME_VERSION;
    buf[1..FRAME_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// Checks a frame's header and checksum and returns its body.
pub fn verify_frame(frame: &[u8]) -> std::result::Result<&[u8], FrameError> {
    if frame.len() < FRAME_HEADER_LEN {
        return Err(FrameError::Truncated { len: frame.len() });
    }
    if frame[0] != FRAME_VERSION {
        return Err(FrameError::UnknownVersion(frame[0]));
    }
    let stored = u32::from_le_bytes([frame[1], frame[2], frame[3], frame[4]]);
    let body = &frame[FRAME_HEADER_LEN..];
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(FrameError::BadChecksum { stored, actual });
    }
    Ok(body)
}

/// Verifies and decodes a frame.
pub fn decode_frame<T: DeserializeOwned>(
    frame: &[u8],
    limit: u64,
) -> std::result::Result<T, FrameError> {
    let body = verify_frame(frame)?;
    // bincode 1.3.3 drops the size limit when deserializing from a slice, so
    // enforce it here: the body is exactly the encoded size (trailing bytes
    // are rejected), and allocation is bounded by the body's length.
    if body.len() as u64 > limit {
        return Err(FrameError::Decode(format!(
            "body of {} bytes is over the limit of {limit}",
            body.len()
        )));
    }
    codec(limit)
        .deserialize(body)
        .map_err(|e| FrameError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trips_and_detects_every_single_bit_flip() {
        let value = ("hello".to_owned(), 42u64, vec![1u8, 2, 3]);
        let frame = encode_frame(&value, DEFAULT_MAX_EVENT_BYTES).expect("encode");
        let back: (String, u64, Vec<u8>) =
            decode_frame(&frame, DEFAULT_MAX_EVENT_BYTES).expect("decode");
        assert_eq!(back, value);
        for byte in 0..frame.len() {
            for bit in 0..8 {
                let mut damaged = frame.clone();
                damaged[byte] ^= 1 << bit;
                let r: std::result::Result<(String, u64, Vec<u8>), _> =
                    decode_frame(&damaged, DEFAULT_MAX_EVENT_BYTES);
                assert!(r.is_err(), "flip of byte {byte} bit {bit} went undetected");
            }
        }
    }

    #[test]
    fn truncated_and_unknown_version_are_reported() {
        assert_eq!(verify_frame(&[1, 2]), Err(FrameError::Truncated { len: 2 }));
        let mut f = seal(b"x");
        f[0] = 9;
        assert_eq!(verify_frame(&f), Err(FrameError::UnknownVersion(9)));
    }

    #[test]
    fn over_limit_is_refused_with_its_size() {
        let big = vec![7u8; 1000];
        match encode_frame(&big, 100) {
            Err(Error::TooLarge { size, limit }) => {
                assert_eq!(limit, 100);
                assert!(size > 1000);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn hostile_length_prefix_does_not_allocate_past_the_limit() {
        // A Vec<u8> whose varint length claims u64::MAX elements.
        let body = [0xFFu8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        let frame = seal(&body);
        let r: std::result::Result<Vec<u8>, _> = decode_frame(&frame, 1 << 20);
        assert!(matches!(r, Err(FrameError::Decode(_))));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut body = codec(1024).serialize(&5u32).expect("encode");
        body.push(0);
        let r: std::result::Result<u32, _> = decode_frame(&seal(&body), 1024);
        assert!(matches!(r, Err(FrameError::Decode(_))));
    }
}
