//! Payload tagging (see [the module docs](super#payload-tagging)): a
//! message's `provider_payload` is its original JSON tagged with the
//! provider it came from, written by [`tag`] and read back by [`tagged`].

use serde_json::{Map, Value};

use crate::model::{InnerMessage, MessageId};

pub(crate) const OPENAI: &str = "openai";
pub(crate) const ANTHROPIC: &str = "anthropic";

/// A provider payload, once its tag has been read.
pub(crate) enum Tagged {
    /// The original message.
    Message(Map<String, Value>),
    /// The original top-level system value (Anthropic).
    System(Value),
    /// Part of the message whose payload is on the message with this id.
    PartOf(MessageId),
}

/// Tags `value` as coming from `provider`, under `key`: the text of
/// `{"provider": provider, key: value}` (members in key order), written
/// from the borrowed value into a buffer of its exact size (a message's
/// payload is as long as the message: no copy of the value, no buffer
/// grown by doubling).
pub(crate) fn tag(provider: &str, key: &str, value: &Value) -> String {
    /// The tagged object, serialized as a map of its two members.
    struct Tag<'a>(&'a str, &'a str, &'a Value);
    impl serde::Serialize for Tag<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let Tag(provider, key, value) = *self;
            let mut m = s.serialize_map(Some(2))?;
            if key < "provider" {
                m.serialize_entry(key, value)?;
                m.serialize_entry("provider", provider)?;
            } else {
                m.serialize_entry("provider", provider)?;
                m.serialize_entry(key, value)?;
            }
            m.end()
        }
    }
    /// Counts the bytes written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let tagged = Tag(provider, key, value);
    let mut size = Count(0);
    // Writing a `Value` (string keys) to memory cannot fail.
    let _ = serde_json::to_writer(&mut size, &tagged);
    let mut out = Vec::with_capacity(size.0);
    let _ = serde_json::to_writer(&mut out, &tagged);
    String::from_utf8(out).unwrap_or_default()
}

/// The payload of `msg` if it was tagged as coming from `provider`.
pub(crate) fn tagged(msg: &InnerMessage, provider: &str) -> Option<Tagged> {
    let text = msg.provider_payload.as_deref()?;
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    if map.get("provider").and_then(Value::as_str) != Some(provider) {
        return None;
    }
    if let Some(Value::Object(m)) = map.remove("message") {
        return Some(Tagged::Message(m));
    }
    if let Some(s) = map.remove("system") {
        return Some(Tagged::System(s));
    }
    match map.get("part_of").and_then(Value::as_str) {
        Some(id) => id.parse().ok().map(Tagged::PartOf),
        None => None,
    }
}

/// The original message in `msg`'s payload, if tagged with `provider`.
pub(crate) fn tagged_message(msg: &InnerMessage, provider: &str) -> Option<Map<String, Value>> {
    match tagged(msg, provider)? {
        Tagged::Message(m) => Some(m),
        _ => None,
    }
}
