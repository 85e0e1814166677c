//! A server-sent-events parser (the WHATWG `text/event-stream` format), pure:
//! it is fed bytes as they arrive, in chunks cut anywhere, and gives out the
//! events they complete. No I/O, no panics, whatever the bytes.

/// One event of a server-sent-events stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (the event type); `None` for the default,
    /// `"message"`.
    pub event: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
    /// The last `id:` seen in the stream so far, if any.
    pub id: Option<String>,
}

/// Splits a byte stream into [`SseEvent`]s.
///
/// Lines end with `\n`, `\r\n` or `\r`, even when a chunk ends between the
/// `\r` and the `\n`. A line is decoded as UTF-8 with invalid sequences
/// replaced by U+FFFD (as the format says); a byte-order mark at the start
/// is dropped. `:` lines are comments (keep-alives); `retry:` and unknown
/// fields are ignored. An event is dispatched at a blank line, and only if
/// it has a `data:` field.
///
/// Memory: it holds the current line and the current event's data, so a
/// caller that does not trust the stream bounds the bytes it feeds.
///
/// ```
/// use agent_journal::conversation::http::SseParser;
///
/// let mut parser = SseParser::new();
/// assert!(parser.push(b"event: ping\ndata: {\"a\"").is_empty());
/// let events = parser.push(b":1}\r\n\r\ndata: [DONE]\n\n");
/// assert_eq!(events[0].event.as_deref(), Some("ping"));
/// assert_eq!(events[0].data, "{\"a\":1}");
/// assert_eq!(events[1].data, "[DONE]");
/// ```
#[derive(Clone, Debug)]
pub struct SseParser {
    /// The bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The last byte fed was a `\r`: a `\n` right after it ends no line.
    after_cr: bool,
    /// No line was completed yet (a byte-order mark may lead the first).
    first_line: bool,
    /// The current event's type.
    event: Option<String>,
    /// The current event's data.
    data: String,
    /// The current event has a `data:` field.
    has_data: bool,
    /// The last id.
    id: Option<String>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
        }
    }

    /// Feeds the next bytes of the stream; returns the events they complete,
    /// in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
                None => {
                    self.line.extend_from_slice(rest);
                    break;
                }
                Some(i) => {
                    self.line.extend_from_slice(&rest[..i]);
                    self.after_cr = rest[i] == b'\r';
                    rest = &rest[i + 1..];
                    self.end_line(&mut out);
                }
            }
        }
        out
    }

    /// Ends the stream: an unfinished last line is taken as a line, and an
    /// event that only lacks its closing blank line is dispatched (servers
    /// that close right after their last `data:` line are common, if not
    /// conforming). The parser is then at the start of a new stream.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            // A non-blank line dispatches nothing.
            self.end_line(&mut Vec::new());
        }
        let last = self.has_data.then(|| self.take_event());
        *self = Self::new();
        last
    }

    /// The current line is complete: interpret it.
    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let mut raw = std::mem::take(&mut self.line);
        if self.first_line {
            self.first_line = false;
            if raw.starts_with(b"\xEF\xBB\xBF") {
                raw.drain(..3);
            }
        }
        if raw.is_empty() {
            if self.has_data {
                out.push(self.take_event());
            } else {
                self.event = None;
            }
            return;
        }
        let line = String::from_utf8_lossy(&raw);
        let (field, value) = match line.find(':') {
            Some(0) => return, // a comment
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&*line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        // Keep the line's buffer for the next line.
        raw.clear();
        self.line = raw;
    }

    /// The current event, which is then reset.
    fn take_event(&mut self) -> SseEvent {
        self.has_data = false;
        SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out: Vec<SseEvent> = chunks.iter().flat_map(|c| p.push(c)).collect();
        out.extend(p.finish());
        out
    }

    #[test]
    fn line_endings_and_chunk_boundaries() {
        let text: &[u8] = b"\xEF\xBB\xBFdata: a\r\ndata:b\r\rid: 7\nevent: x\ndata\n\n: c\n\n";
        let whole = all(&[text]);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].data, "a\nb");
        assert_eq!(whole[1].data, "");
        assert_eq!(whole[1].event.as_deref(), Some("x"));
        assert_eq!(whole[1].id.as_deref(), Some("7"));
        for cut in 0..text.len() {
            assert_eq!(all(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(all(&bytes), whole);
    }

    #[test]
    fn invalid_utf8_and_unterminated_end() {
        let events = all(&[b"data: \xFF\xFEok\n\ndata: last"]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "\u{FFFD}\u{FFFD}ok");
        assert_eq!(events[1].data, "last");
        assert!(all(&[b"event: only\n\n"]).is_empty());
    }
}
