//! A message's content stored once: the provider's message
//! (`InnerMessage::provider_payload`, JSON text) usually repeats the
//! message's neutral fields, its `content`, call ids, tool names and each
//! tool call's `arguments`, as JSON strings (or, for arguments, as the JSON
//! itself).
//! In the binary encoding (frames) those repeats are cut out of the
//! payload and put back on read, byte for byte.
//!
//! The cut payload is the payload without the repeated ranges; each
//! [`Splice`] says where in it a range goes back (`at`, a byte offset in the
//! cut payload, non-decreasing) and what it is (`what`: field × 2 + form;
//! fields are numbered as [`Fields`] says; form 0 is the field as a JSON string, written by [`escape`], form 1 the
//! field's text as it is). Putting them back is exact by construction: a
//! range is cut only where those very bytes were found.
//!
//! In bincode, `provider_payload` keeps its `Option` encoding (tag 0 none,
//! tag 1 and a string) and adds tag 2: the cut payload (a string), then the
//! splices (a length, then per splice `at` and `what`, varints). A
//! human-readable serializer (JSON) sees the payload whole, as before.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, Role, ToolCallRecord};

/// Fields shorter than this are not worth a splice (a splice costs 2-4
/// bytes, and a short string may well occur by chance).
const MIN_SPLICED: usize = 8;

/// Where a cut range goes back into the payload, and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Splice {
    /// Byte offset in the cut payload.
    pub(crate) at: u64,
    /// Field × 2 + form (see the module's doc).
    pub(crate) what: u64,
}

/// `text` as a JSON string: quoted, with `"` and `\` escaped, `\b`, `\f`,
/// `\n`, `\r` and `\t` for those controls and `\u00xx` (lowercase hex) for
/// the others, everything else as it is (as `serde_json` writes strings).
/// Fixed here, not borrowed from a JSON library: stored payloads are
/// rebuilt with it, so it may never change.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The fields of a message a payload may repeat, by number: 0 `content`,
/// 1 `tool_call_id`, 2 `tool_name`, then for tool call `i`: `3 + 3i` its
/// `arguments`, `4 + 3i` its `call_id`, `5 + 3i` its `name`.
pub(crate) struct Fields<'a> {
    pub(crate) content: &'a str,
    pub(crate) tool_call_id: Option<&'a str>,
    pub(crate) tool_name: Option<&'a str>,
    /// Per call: arguments, call id, name.
    pub(crate) calls: Vec<[&'a str; 3]>,
}

impl<'a> Fields<'a> {
    /// The fields of `m`.
    pub(crate) fn of(m: &'a InnerMessage) -> Self {
        Self::new(
            &m.content,
            m.tool_call_id.as_ref().map(|c| c.0.as_str()),
            m.tool_name.as_deref(),
            &m.tool_calls,
        )
    }

    fn new(
        content: &'a str,
        tool_call_id: Option<&'a str>,
        tool_name: Option<&'a str>,
        calls: &'a [ToolCallRecord],
    ) -> Self {
        Fields {
            content,
            tool_call_id,
            tool_name,
            calls: calls
                .iter()
                .map(|c| [c.arguments.as_str(), c.call_id.0.as_str(), c.name.as_str()])
                .collect(),
        }
    }

    /// How many fields there are (some may be absent).
    fn count(&self) -> u64 {
        3 + 3 * self.calls.len() as u64
    }

    /// The text of field `f`, if the message has it.
    fn get(&self, f: u64) -> Option<&'a str> {
        match f {
            0 => Some(self.content),
            1 => self.tool_call_id,
            2 => self.tool_name,
            f => {
                let i = usize::try_from((f - 3) / 3).ok()?;
                self.calls.get(i).map(|c| c[((f - 3) % 3) as usize])
            }
        }
    }
}

/// Builds into `out` the payload `splices` make of `rest`, checking each.
fn walk(
    fields: &Fields<'_>,
    rest: &str,
    splices: &[Splice],
    out: &mut String,
) -> Result<(), String> {
    let mut from = 0usize;
    for s in splices {
        let at = usize::try_from(s.at).unwrap_or(usize::MAX);
        if at < from || at > rest.len() || !rest.is_char_boundary(at) {
            return Err(format!(
                "splice at byte {} of a {}-byte payload",
                s.at,
                rest.len()
            ));
        }
        let text = fields
            .get(s.what / 2)
            .ok_or_else(|| format!("splice of field {}, which the message lacks", s.what / 2))?;
        out.push_str(&rest[from..at]);
        match s.what % 2 {
            0 => out.push_str(&escape(text)),
            _ => out.push_str(text),
        }
        from = at;
    }
    out.push_str(&rest[from..]);
    Ok(())
}

/// Checks that `splices` fit `rest` and `fields`: exactly when
/// [`rebuild`] succeeds (it is that call).
pub(crate) fn check(fields: &Fields<'_>, rest: &str, splices: &[Splice]) -> Result<(), String> {
    rebuild(fields, rest, splices).map(|_| ())
}

/// Cuts the repeats of `fields` out of `payload`; `None` if there is none.
pub(crate) fn cut(fields: &Fields<'_>, payload: &str) -> Option<(String, Vec<Splice>)> {
    // (start, len, what) of each range cut, at most one per field.
    let mut ranges: Vec<(usize, usize, u64)> = Vec::new();
    for f in 0..fields.count() {
        let Some(text) = fields.get(f).filter(|t| t.len() >= MIN_SPLICED) else {
            continue;
        };
        let escaped = escape(text);
        for (form, needle) in [(0, escaped.as_str()), (1, text)] {
            let free = payload.match_indices(needle).find(|(at, _)| {
                ranges
                    .iter()
                    .all(|&(s, l, _)| at + needle.len() <= s || s + l <= *at)
            });
            if let Some((at, _)) = free {
                ranges.push((at, needle.len(), f * 2 + form));
                break;
            }
        }
    }
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let mut rest = String::with_capacity(payload.len() - ranges.iter().map(|r| r.1).sum::<usize>());
    let mut splices = Vec::with_capacity(ranges.len());
    let mut from = 0;
    for (start, len, what) in ranges {
        rest.push_str(&payload[from..start]);
        splices.push(Splice {
            at: rest.len() as u64,
            what,
        });
        from = start + len;
    }
    rest.push_str(&payload[from..]);
    Some((rest, splices))
}

/// Puts the cut ranges back: the payload exactly as it was given to
/// [`cut`]. An error names what does not fit (damaged or forged bytes).
///
/// Only what [`cut`] writes is taken: the rebuilt payload, cut again, must
/// give back `rest` and `splices`. So a field goes back at most once (a
/// frame of a few bytes cannot name a 1 MiB field a thousand times and
/// decode to a gigabyte), and a message has one encoding.
pub(crate) fn rebuild(
    fields: &Fields<'_>,
    rest: &str,
    splices: &[Splice],
) -> Result<String, String> {
    // A cut never names a field twice: refused before anything is built.
    let mut named: Vec<u64> = splices.iter().map(|s| s.what / 2).collect();
    named.sort_unstable();
    if named.windows(2).any(|w| w[0] == w[1]) {
        return Err("a splice names a field twice".into());
    }
    let mut out = String::with_capacity(rest.len() + fields.content.len() + 16);
    walk(fields, rest, splices, &mut out)?;
    match cut(fields, &out) {
        Some((again, s)) if again == rest && s == splices => Ok(out),
        _ => Err("the splices are not the ones a writer makes of this payload".into()),
    }
}

/// `provider_payload` as it is written: see the module's doc.
enum PayloadOut<'a> {
    Whole(Option<&'a str>),
    Cut(String, Vec<Splice>),
}

impl Serialize for PayloadOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PayloadOut::Whole(p) => p.serialize(s),
            PayloadOut::Cut(rest, splices) => {
                let mut t = s.serialize_tuple(3)?;
                t.serialize_element(&2u8)?;
                t.serialize_element(rest)?;
                t.serialize_element(splices)?;
                t.end()
            }
        }
    }
}

/// `provider_payload` as it is read.
enum PayloadIn {
    Whole(Option<String>),
    Cut(String, Vec<Splice>),
}

impl<'de> Deserialize<'de> for PayloadIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return Option::<String>::deserialize(d).map(PayloadIn::Whole);
        }
        struct Tagged;
        impl<'de> Visitor<'de> for Tagged {
            type Value = PayloadIn;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a provider payload: tag 0, 1 or 2")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PayloadIn, A::Error> {
                let missing = || A::Error::custom("provider payload cut short");
                match seq.next_element::<u8>()?.ok_or_else(missing)? {
                    0 => Ok(PayloadIn::Whole(None)),
                    1 => Ok(PayloadIn::Whole(Some(
                        seq.next_element()?.ok_or_else(missing)?,
                    ))),
                    2 => Ok(PayloadIn::Cut(
                        seq.next_element()?.ok_or_else(missing)?,
                        seq.next_element()?.ok_or_else(missing)?,
                    )),
                    t => Err(A::Error::custom(format!("provider payload tag {t}"))),
                }
            }
        }
        // bincode reads a tuple's elements one by one, and as many as
        // asked: the tag says how many follow.
        d.deserialize_tuple(3, Tagged)
    }
}

fn ts_ref<S: Serializer>(t: &&DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    crate::model::ts::serialize(t, s)
}

/// `InnerMessage` as it is written: its fields in order, by reference.
#[derive(Serialize)]
#[serde(rename = "InnerMessage")]
struct MessageOut<'a> {
    role: &'a Role,
    content: &'a str,
    evaluation_id: &'a EvaluationId,
    sequence: u64,
    tool_calls: &'a [ToolCallRecord],
    tool_call_id: &'a Option<CallId>,
    tool_name: &'a Option<String>,
    turn: u32,
    prompt_ns: &'a str,
    prompt_key: &'a str,
    #[serde(serialize_with = "ts_ref")]
    created_at: &'a DateTime<Utc>,
    message_id: &'a MessageId,
    provider_payload: PayloadOut<'a>,
}

/// `InnerMessage` as it is read.
#[derive(Deserialize)]
#[serde(rename = "InnerMessage", deny_unknown_fields)]
struct MessageIn {
    role: Role,
    content: String,
    evaluation_id: EvaluationId,
    sequence: u64,
    tool_calls: Vec<ToolCallRecord>,
    tool_call_id: Option<CallId>,
    tool_name: Option<String>,
    turn: u32,
    prompt_ns: String,
    prompt_key: String,
    #[serde(with = "crate::model::ts")]
    created_at: DateTime<Utc>,
    message_id: MessageId,
    provider_payload: PayloadIn,
}

impl Serialize for InnerMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let payload = self.provider_payload.as_deref();
        let provider_payload = match payload {
            Some(p) if !s.is_human_readable() => match cut(&Fields::of(self), p) {
                Some((rest, splices)) => PayloadOut::Cut(rest, splices),
                None => PayloadOut::Whole(payload),
            },
            _ => PayloadOut::Whole(payload),
        };
        MessageOut {
            role: &self.role,
            content: &self.content,
            evaluation_id: &self.evaluation_id,
            sequence: self.sequence,
            tool_calls: &self.tool_calls,
            tool_call_id: &self.tool_call_id,
            tool_name: &self.tool_name,
            turn: self.turn,
            prompt_ns: &self.prompt_ns,
            prompt_key: &self.prompt_key,
            created_at: &self.created_at,
            message_id: &self.message_id,
            provider_payload,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for InnerMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = MessageIn::deserialize(d)?;
        let provider_payload = match m.provider_payload {
            PayloadIn::Whole(p) => p,
            PayloadIn::Cut(rest, splices) => {
                let fields = Fields::new(
                    &m.content,
                    m.tool_call_id.as_ref().map(|c| c.0.as_str()),
                    m.tool_name.as_deref(),
                    &m.tool_calls,
                );
                Some(rebuild(&fields, &rest, &splices).map_err(D::Error::custom)?)
            }
        };
        Ok(InnerMessage {
            role: m.role,
            content: m.content,
            evaluation_id: m.evaluation_id,
            sequence: m.sequence,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
            tool_name: m.tool_name,
            turn: m.turn,
            prompt_ns: m.prompt_ns,
            prompt_key: m.prompt_key,
            created_at: m.created_at,
            message_id: m.message_id,
            provider_payload,
        })
    }
}

#[cfg(test)]
mod tests;
