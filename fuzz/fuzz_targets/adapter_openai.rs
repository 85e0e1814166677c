//! Arbitrary bytes as an OpenAI chat-completions response: the same bytes
//! go to the body parser, the error parser and the server-sent-events
//! stream parser (whole, and cut in three pieces where the data says).
//!
//! Properties (`fuzz_common::adapters`): no panic, typed errors; an
//! accepted body's or stream's `raw` read again as a body gives the same
//! result; a stream gives the same result, error or chunks wherever it is
//! cut, and its text deltas are the message's text.
#![no_main]

use fuzz_common::adapters::{check, openai};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check(data, &openai());
});
