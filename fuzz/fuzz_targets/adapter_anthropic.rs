//! Arbitrary bytes as an Anthropic Messages API response: the same bytes
//! go to the body parser, the error parser and the server-sent-events
//! stream parser (whole, and cut in three pieces where the data says).
//!
//! Properties (`fuzz_common::adapters`): no panic, typed errors; an
//! accepted body's or stream's `raw` read again as a body gives the same
//! result; a stream gives the same result, error or chunks wherever it is
//! cut.
#![no_main]

use fuzz_common::adapters::{anthropic, check};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(data, &anthropic());
});
