//! Images and documents across OpenAI chat completions and Anthropic
//! Messages: a user message imported from one keeps them when exported to
//! the other, as that format's content parts.
//!
//! - Anthropic `image` (base64 or url source) ↔ OpenAI `image_url` (a
//!   `data:` URL or a URL);
//! - Anthropic `document` with a base64 source ↔ OpenAI `file` (`file_data`
//!   as a `data:` URL); a document with a text source → a text part.
//!
//! What has no equivalent (a document by URL, audio, ...) is left out, and
//! `translate::translation_notes` says so.

use serde_json::{Value, json};

use super::payload::{ANTHROPIC, OPENAI, tagged_message};
use crate::model::InnerMessage;

/// The OpenAI content parts for the images and documents of `m`'s
/// Anthropic original (none when it has no Anthropic original).
pub(crate) fn anthropic_media_as_openai(m: &InnerMessage) -> Vec<Value> {
    let Some(orig) = tagged_message(m, ANTHROPIC) else {
        return Vec::new();
    };
    let Some(blocks) = orig.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks.iter().filter_map(anthropic_to_openai).collect()
}

/// One Anthropic block as an OpenAI content part, if it has one.
pub(crate) fn anthropic_to_openai(b: &Value) -> Option<Value> {
    let source = b.get("source")?;
    let kind = source.get("type").and_then(Value::as_str)?;
    match (b.get("type").and_then(Value::as_str)?, kind) {
        ("image", "base64") => {
            let mt = source.get("media_type").and_then(Value::as_str)?;
            let data = source.get("data").and_then(Value::as_str)?;
            Some(
                json!({"type": "image_url", "image_url": {"url": format!("data:{mt};base64,{data}")}}),
            )
        }
        ("image", "url") => {
            let url = source.get("url").and_then(Value::as_str)?;
            Some(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        ("document", "base64") => {
            let mt = source.get("media_type").and_then(Value::as_str)?;
            let data = source.get("data").and_then(Value::as_str)?;
            let name = b.get("title").and_then(Value::as_str).unwrap_or("document");
            Some(
                json!({"type": "file", "file": {"filename": name, "file_data": format!("data:{mt};base64,{data}")}}),
            )
        }
        ("document", "text") => {
            let text = source.get("data").and_then(Value::as_str)?;
            Some(json!({"type": "text", "text": text}))
        }
        _ => None,
    }
}

/// The Anthropic image blocks for the images of `m`'s OpenAI original.
pub(crate) fn openai_images_as_anthropic(m: &InnerMessage) -> Vec<Value> {
    let Some(orig) = tagged_message(m, OPENAI) else {
        return Vec::new();
    };
    let Some(parts) = orig.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    parts.iter().filter_map(openai_to_anthropic).collect()
}

/// One OpenAI content part as an Anthropic block, if it has one.
pub(crate) fn openai_to_anthropic(p: &Value) -> Option<Value> {
    if p.get("type").and_then(Value::as_str) == Some("file") {
        // A file given inline: a document.
        let file = p.get("file")?;
        let data = file.get("file_data").and_then(Value::as_str)?;
        let (mt, data) = data.strip_prefix("data:")?.split_once(";base64,")?;
        let mut doc = json!({"type": "document", "source": {"type": "base64", "media_type": mt, "data": data}});
        if let Some(name) = file.get("filename").and_then(Value::as_str) {
            doc["title"] = json!(name);
        }
        return Some(doc);
    }
    if p.get("type").and_then(Value::as_str) != Some("image_url") {
        return None;
    }
    let url = p
        .get("image_url")
        .and_then(|i| i.get("url"))
        .and_then(Value::as_str)?;
    if let Some(rest) = url.strip_prefix("data:") {
        let (mt, data) = rest.split_once(";base64,")?;
        return Some(
            json!({"type": "image", "source": {"type": "base64", "media_type": mt, "data": data}}),
        );
    }
    Some(json!({"type": "image", "source": {"type": "url", "url": url}}))
}
