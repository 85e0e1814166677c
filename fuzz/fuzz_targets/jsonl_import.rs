//! Arbitrary bytes (lossy UTF-8) as JSONL InnerMessages.
//!
//! Properties: the import never panics; what it accepts writes back to JSONL
//! that imports to equal messages.
#![no_main]

use agent_journal::provider::jsonl;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(messages) = jsonl::from_jsonl(&text) else {
        return;
    };
    let out = jsonl::to_jsonl(&messages);
    let back = jsonl::from_jsonl(&out).unwrap_or_else(|e| panic!("to_jsonl wrote what from_jsonl refuses: {e}\n{out}"));
    assert_eq!(back, messages, "from_jsonl(to_jsonl(m)) != m");
});
