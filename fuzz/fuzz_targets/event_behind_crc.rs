//! Arbitrary bytes sealed with a valid version and checksum, so every input
//! reaches the bincode decoder: it never panics, and a decoded envelope is
//! stable under decode -> encode -> decode.
#![no_main]

use agent_journal::{Envelope};
use agent_journal::format::{FrameError, decode_frame, seal, verify_frame};
use fuzz_common::{LIMIT, check_decoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let frame = seal(body);
    assert_eq!(
        verify_frame(&frame),
        Ok(body),
        "seal() must pass verification"
    );
    match decode_frame::<Envelope>(&frame, LIMIT) {
        Ok(env) => check_decoded(&env, &frame, body.len()),
        // Behind a good checksum only the body can be at fault.
        Err(e) => assert!(matches!(e, FrameError::Decode(_)), "unexpected {e:?}"),
    }
});
