use proptest::prelude::*;

use super::*;
use crate::format::{DEFAULT_MAX_EVENT_BYTES, decode_frame, encode_frame};

fn call(arguments: &str) -> ToolCallRecord {
    ToolCallRecord::new(CallId("call_1".into()), "lookup", arguments)
}

#[test]
fn escape_writes_json_strings_as_serde_json_does() {
    for s in [
        "",
        "plain",
        "quote \" and \\ backslash",
        "controls \u{0}\u{1}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1f} end",
        "unicode é 漢字 🚀 / slash \u{7f}",
    ] {
        assert_eq!(escape(s), serde_json::to_string(s).expect("json"), "{s:?}");
    }
}

#[test]
fn an_openai_message_stores_its_content_and_arguments_once() {
    let content = "Where is order #100042? The tracking page says 'label created'.";
    let arguments = r#"{"order_id":"100042"}"#;
    let payload = serde_json::json!({
        "provider": "openai",
        "message": {"role": "assistant", "content": content, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "lookup", "arguments": arguments}}]},
    })
    .to_string();
    let calls = [call(arguments)];
    let fields = Fields::new(content, None, None, &calls);
    let (rest, splices) = cut(&fields, &payload).expect("repeats found");
    assert_eq!(splices.len(), 2, "{rest}");
    assert!(
        !rest.contains("tracking page") && !rest.contains("100042"),
        "{rest}"
    );
    assert_eq!(rebuild(&fields, &rest, &splices).expect("rebuild"), payload);
    // Raw JSON arguments (Anthropic's tool_use `input`) are found as they are.
    let raw = format!(r#"{{"type":"tool_use","id":"call_1","name":"lookup","input":{arguments}}}"#);
    let fields = Fields::new("", None, None, &calls);
    let (rest, splices) = cut(&fields, &raw).expect("raw arguments");
    assert_eq!(splices, [Splice { at: 57, what: 7 }], "{rest}");
    assert_eq!(rebuild(&fields, &rest, &splices).expect("rebuild"), raw);
    // Call ids and tool names too.
    let calls = [ToolCallRecord::new(
        CallId("call_0123456789abcdef".into()),
        "lookup_order",
        "{}",
    )];
    let fields = Fields::new(
        "",
        Some("call_0123456789abcdef"),
        Some("lookup_order"),
        &calls,
    );
    let payload = r#"{"tool_call_id":"call_0123456789abcdef","name":"lookup_order"}"#;
    let (rest, splices) = cut(&fields, payload).expect("ids");
    assert_eq!(rest, r#"{"tool_call_id":,"name":}"#);
    assert_eq!(rebuild(&fields, &rest, &splices).expect("rebuild"), payload);
}

#[test]
fn forged_splices_are_errors_not_panics() {
    let calls = [call("{\"a\":1}")];
    let rest = "héllo";
    for splices in [
        vec![Splice { at: 99, what: 0 }],
        vec![Splice { at: 2, what: 0 }], // inside 'é'
        vec![Splice { at: 3, what: 0 }, Splice { at: 1, what: 0 }],
        vec![Splice { at: 0, what: 17 }],
        vec![Splice { at: 0, what: 2 }], // no tool_call_id
        vec![Splice {
            at: u64::MAX,
            what: u64::MAX,
        }],
    ] {
        let fields = Fields::new("content", None, None, &calls);
        assert!(rebuild(&fields, rest, &splices).is_err(), "{splices:?}");
        assert!(check(&fields, rest, &splices).is_err(), "{splices:?}");
    }
}

fn message(content: String, args: Vec<String>, payload: Option<String>) -> InnerMessage {
    let mut m = InnerMessage::new(Role::Assistant, content, EvaluationId::new(), 3);
    m.tool_calls = args.iter().map(|a| call(a)).collect();
    m.provider_payload = payload;
    m
}

#[test]
fn json_sees_the_payload_whole_and_bincode_stores_it_once() {
    let content = "a long enough content with \"quotes\" and\nnewlines".to_owned();
    let payload = serde_json::json!({"role": "user", "content": content}).to_string();
    let m = message(content, vec![], Some(payload.clone()));
    let json = serde_json::to_value(&m).expect("json");
    assert_eq!(json["provider_payload"], payload.as_str());
    let back: InnerMessage = serde_json::from_value(json).expect("from json");
    assert_eq!(back, m);
    let cut_frame = encode_frame(&m, DEFAULT_MAX_EVENT_BYTES).expect("encode");
    let once = cut_frame
        .windows(11)
        .filter(|w| w == b"long enough")
        .count();
    assert_eq!(once, 1, "the content is in the frame once");
    let back: InnerMessage = decode_frame(&cut_frame, DEFAULT_MAX_EVENT_BYTES).expect("decode");
    assert_eq!(back, m);
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z \"\\\\\n\t]{0,40}",
        any::<String>(),
        "\\{\"[a-z]{1,8}\":\"[a-z0-9]{0,12}\"\\}",
    ]
}

proptest! {
    /// Whatever the fields and however the payload repeats them (as JSON
    /// strings, as they are, several times, overlapping, or not at all),
    /// a message reads back exactly.
    #[test]
    fn any_message_round_trips_exactly(
        content in text(),
        args in prop::collection::vec(text(), 0..3),
        pieces in prop::collection::vec((0usize..7, text()), 0..6),
        ids in (text(), text()),
        none in any::<bool>(),
    ) {
        let mut payload = String::new();
        for (k, filler) in &pieces {
            payload.push_str(filler);
            match *k {
                0 => payload.push_str(&escape(&content)),
                1 => payload.push_str(&content),
                2 => if let Some(a) = args.first() { payload.push_str(&escape(a)) },
                3 => if let Some(a) = args.last() { payload.push_str(a) },
                4 => payload.push_str(&escape(&ids.0)),
                5 => payload.push_str(&ids.1),
                _ => {}
            }
        }
        let mut m = message(content, args, (!none).then_some(payload));
        m.tool_call_id = Some(CallId(ids.0));
        m.tool_name = Some(ids.1);
        let frame = encode_frame(&m, DEFAULT_MAX_EVENT_BYTES).expect("encode");
        let back: InnerMessage = decode_frame(&frame, DEFAULT_MAX_EVENT_BYTES).expect("decode");
        prop_assert_eq!(&back, &m);
        if let Some(p) = &m.provider_payload
            && let Some((rest, splices)) = cut(&Fields::of(&m), p)
        {
            prop_assert!(rest.len() < p.len());
            prop_assert_eq!(rebuild(&Fields::of(&m), &rest, &splices).expect("rebuild"), p.clone());
        }
    }
}

/// Found by `fuzz/fuzz_targets/event_behind_crc.rs`: a frame whose splices
/// name one field several times decoded to a payload many times its size
/// (149 bytes to 1,002; a field of 1 MiB named a thousand times would be a
/// gigabyte). Only the cut a writer makes is taken now.
#[test]
fn splices_a_writer_would_not_make_are_refused() {
    let content = "a content long enough to cut";
    let fields = Fields::new(content, None, None, &[]);
    let payload = format!("{{\"content\":{}}}", escape(content));
    let (rest, splices) = cut(&fields, &payload).expect("cut");
    assert_eq!(
        rebuild(&fields, &rest, &splices).expect("canonical"),
        payload
    );
    let twice = vec![
        splices[0],
        Splice {
            at: rest.len() as u64,
            what: 0,
        },
    ];
    let e = rebuild(&fields, &rest, &twice).expect_err("named twice");
    assert!(e.contains("twice"), "{e}");
    // Fits, names each field once, but is not where a writer cuts (the
    // text form where the JSON string form is there): refused.
    let raw = vec![Splice {
        at: splices[0].at + 1,
        what: 1,
    }];
    let quoted = format!(
        "{}\"\"{}",
        &rest[..splices[0].at as usize],
        &rest[splices[0].at as usize..]
    );
    assert!(rebuild(&fields, &quoted, &raw).is_err());
    assert!(check(&fields, &quoted, &raw).is_err());
    // The fuzzer's input, sealed as a frame: decoding it either fails or
    // gives a message that re-encodes no larger.
    let body = include_bytes!("../../../fuzz/seeds/event_behind_crc/splice-named-twice");
    let frame = crate::format::seal(body);
    if let Ok(env) = decode_frame::<crate::event::Envelope>(&frame, 1 << 16) {
        let again = encode_frame(&env, 1 << 16).expect("encode");
        assert!(
            again.len() <= frame.len(),
            "{} > {}",
            again.len(),
            frame.len()
        );
    }
}
