//! Arbitrary bytes (lossy UTF-8) as a Claude Code session log.
//!
//! Properties: reading never panics; whatever it accepts has at least one
//! thread, every thread is an evaluation whose messages export to an
//! Anthropic request the validator accepts and that imports back to the
//! same export (a fixed point), and the whole log imports as a session
//! whose evaluations are its threads. Read from a file
//! (`ClaudeCodeFile::open`, the streamed import's two passes), the log is
//! accepted or refused as its text is, with the same message and the same
//! warnings, and converts to as many messages; `check_strict` refuses it
//! only as unmodeled, and only when it holds a record or block of a type
//! not modeled.
#![no_main]

use agent_journal::provider::{claude_code, validate};
use agent_journal::{Error, Journal};
use agent_journal::provider::ConversationFormat;
use agent_journal::provider::claude_code::ClaudeCodeFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = claude_code::parse(&text);
    let from_file = from_file(&text);
    let log = match (parsed, from_file) {
        (Ok(log), Ok(file)) => {
            let messages: usize = log.threads.iter().map(|t| t.messages.len()).sum();
            assert_eq!(file.messages(), messages as u64, "read from a file");
            assert_eq!(file.threads().len(), log.threads.len());
            assert_eq!(file.warnings(), log.warnings.as_slice(), "warnings");
            let opaque = !log.other.is_empty()
                || log.threads.iter().flat_map(|t| &t.messages).any(|m| {
                    !agent_journal::provider::opaque::opaque_types(m).is_empty()
                });
            match file.check_strict() {
                Ok(()) => assert!(!opaque, "strict kept an opaque record or block"),
                Err(Error::Unmodeled { .. }) => assert!(opaque, "strict refused nothing opaque"),
                Err(e) => panic!("strict refused an accepted log otherwise: {e}"),
            }
            log
        }
        (Err(Error::InvalidInput(a)), Err(Error::InvalidInput(b))) => {
            assert_eq!(b.split_once(": ").map(|(_, m)| m), Some(a.as_str()));
            return;
        }
        (a, b) => panic!("text and file read differently: {a:?} / {b:?}"),
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

/// `text` written to a file of this process, read as a log file.
fn from_file(text: &str) -> agent_journal::Result<ClaudeCodeFile> {
    let path = std::env::temp_dir().join(format!("aj-fuzz-claude-code-{}.jsonl", std::process::id()));
    std::fs::write(&path, text).expect("write the log");
    ClaudeCodeFile::open(&path, u64::MAX)
}
