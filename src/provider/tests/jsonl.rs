//! JSONL: one `InnerMessage` per line, round trip and numbered errors.

use serde_json::Value;

use super::helpers::{an, anthropic_conversation};
use crate::error::Error;
use crate::provider::jsonl;

#[test]
fn jsonl_round_trips_and_numbers_its_errors() {
    let msgs = an(&anthropic_conversation());
    let text = jsonl::to_jsonl(&msgs);
    assert_eq!(text.lines().count(), msgs.len());
    assert!(text.ends_with('\n'));
    let first: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    assert!(
        first["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(jsonl::from_jsonl(&text).expect("parses"), msgs);
    assert_eq!(
        jsonl::from_jsonl(&format!("\n{text}\n\n")).expect("parses"),
        msgs
    );
    assert_eq!(jsonl::from_jsonl("").expect("empty"), Vec::new());

    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"role\": \"robot\"}";
    match jsonl::from_jsonl(&lines.join("\n")) {
        Err(Error::InvalidInput(r)) => assert!(r.starts_with("line 3: "), "{r}"),
        other => panic!("{other:?}"),
    }
}
