//! Arbitrary bytes (lossy UTF-8) as a Claude Code session log.
//!
//! Properties: reading never panics; whatever it accepts has at least one
//! thread, every thread is an evaluation whose messages export to an
//! Anthropic request the validator accepts and that imports back to the
//! same export (a fixed point), and the whole log imports as a session
//! whose evaluations are its threads.
#![no_main]

use agent_journal::provider::{claude_code, validate};
use agent_journal::{ConversationFormat, Journal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(log) = claude_code::parse(&text) else {
        return;
    };
    assert!(!log.threads.is_empty(), "an accepted log has a thread");
    let anthropic = ConversationFormat::Anthropic;
    for t in &log.threads {
        assert!(!t.messages.is_empty());
        assert!(t.messages.iter().all(|m| m.evaluation_id == t.evaluation_id));
        let request = anthropic.to_json(&t.messages);
        validate::anthropic(&request)
            .unwrap_or_else(|e| panic!("a thread exports to an invalid request: {e}\n{request}"));
        let again = anthropic
            .parse(&request.to_string(), t.evaluation_id, "ns", "key")
            .unwrap_or_else(|e| panic!("an exported thread does not import: {e}\n{request}"));
        assert_eq!(anthropic.to_json(&again), request, "export(import(export(x))) != export(x)");
    }
    let journal = Journal::memory();
    let s = journal
        .import_claude_code_text(&text, "fuzz.jsonl")
        .unwrap_or_else(|e| panic!("a log that reads does not import: {e}"));
    assert_eq!(s.state().evaluations().iter().count(), log.threads.len());
});
