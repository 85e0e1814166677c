//! Arbitrary bytes (lossy UTF-8) as OpenAI Responses API input items: the properties of
//! `fuzz_common::provider_fixed_point` (no panic; export, import and export
//! again give the same; a valid chat-completions history).
#![no_main]

use agent_journal::provider::ConversationFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzz_common::provider_fixed_point(ConversationFormat::OpenAiResponses, data);
});
