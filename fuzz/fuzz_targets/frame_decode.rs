//! Arbitrary bytes as a frame: decoding never panics, and whatever decodes
//! re-encodes to a frame that decodes equal (see `fuzz_common::check_decoded`).
//! Most inputs stop at the checksum; `event_behind_crc` goes past it.
#![no_main]

use agent_journal::{Envelope};
use agent_journal::format::{FRAME_HEADER_LEN, decode_frame, verify_frame};
use fuzz_common::{LIMIT, check_decoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = decode_frame::<Envelope>(data, LIMIT);
    // Decoding fails exactly when the header/checksum does or the body does.
    if verify_frame(data).is_err() {
        assert!(decoded.is_err(), "a frame that fails verification decoded");
    }
    if let Ok(env) = decoded {
        check_decoded(&env, data, data.len() - FRAME_HEADER_LEN);
    }
});
