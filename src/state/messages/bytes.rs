//! Reading and writing bincode 1.3's encoding by hand (`DefaultOptions`:
//! varint integers, little endian): the message bodies are checked with it,
//! and the messages section of a binary snapshot is written and read with it.

/// Why bytes are refused: the field, and what is wrong.
pub(super) struct Bad(pub(super) &'static str, pub(super) &'static str);

/// Appends bincode's varint of `v`: one byte below 251, else a marker (251,
/// 252, 253) and 2, 4 or 8 little-endian bytes.
pub(super) fn write_varint(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else if let Ok(v) = u16::try_from(v) {
        out.push(251);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = u32::try_from(v) {
        out.push(252);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(253);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub(super) struct Reader<'a> {
    b: &'a [u8],
    len: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(b: &'a [u8]) -> Self {
        Reader { b, len: b.len() }
    }

    /// Bytes read so far.
    pub(super) fn pos(&self) -> usize {
        self.len - self.b.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Bad> {
        match self.b.split_at_checked(n) {
            Some((head, tail)) => {
                self.b = tail;
                Ok(head)
            }
            None => Err(Bad(what, "unexpected end")),
        }
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Bad> {
        <[u8; N]>::try_from(self.take(N, what)?).map_err(|_| Bad(what, "unexpected end"))
    }

    #[inline]
    pub(super) fn byte(&mut self, what: &'static str) -> Result<u8, Bad> {
        match self.b.split_first() {
            Some((&b, tail)) => {
                self.b = tail;
                Ok(b)
            }
            None => Err(Bad(what, "unexpected end")),
        }
    }

    /// bincode's varint: one byte below 251, else a marker and 2, 4 or 8
    /// little-endian bytes (a 16-byte one never fits a `u64`).
    #[inline]
    pub(super) fn varint(&mut self, what: &'static str) -> Result<u64, Bad> {
        Ok(match self.byte(what)? {
            b @ 0..=250 => u64::from(b),
            251 => u64::from(u16::from_le_bytes(self.array(what)?)),
            252 => u64::from(u32::from_le_bytes(self.array(what)?)),
            253 => u64::from_le_bytes(self.array(what)?),
            _ => return Err(Bad(what, "invalid varint marker")),
        })
    }

    #[inline]
    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, Bad> {
        u32::try_from(self.varint(what)?).map_err(|_| Bad(what, "out of range for u32"))
    }

    #[inline]
    pub(super) fn i64(&mut self, what: &'static str) -> Result<i64, Bad> {
        let n = self.varint(what)?;
        // Zigzag.
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    #[inline]
    pub(super) fn len(&mut self, what: &'static str) -> Result<usize, Bad> {
        usize::try_from(self.varint(what)?).map_err(|_| Bad(what, "length out of range"))
    }

    #[inline]
    pub(super) fn string(&mut self, what: &'static str) -> Result<(), Bad> {
        let n = self.len(what)?;
        let bytes = self.take(n, what)?;
        // ASCII (the common case, checked a word at a time) is UTF-8.
        if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
            Ok(())
        } else {
            Err(Bad(what, "invalid UTF-8"))
        }
    }

    /// A string's bytes, skipped unchecked.
    #[inline]
    pub(super) fn skip_string(&mut self, what: &'static str) -> Result<(), Bad> {
        let n = self.len(what)?;
        self.take(n, what).map(|_| ())
    }

    /// A UUID: bytes, which must be 16.
    #[inline]
    pub(super) fn uuid(&mut self, what: &'static str) -> Result<[u8; 16], Bad> {
        if self.len(what)? != 16 {
            return Err(Bad(what, "a UUID has 16 bytes"));
        }
        self.array(what)
    }

    /// A unit variant's index.
    #[inline]
    pub(super) fn variant<T: Copy>(
        &mut self,
        variants: &[T],
        what: &'static str,
    ) -> Result<T, Bad> {
        let i = self.u32(what)?;
        usize::try_from(i)
            .ok()
            .and_then(|i| variants.get(i).copied())
            .ok_or(Bad(what, "unknown variant"))
    }

    #[inline]
    pub(super) fn option(&mut self, what: &'static str) -> Result<bool, Bad> {
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Bad(what, "invalid option tag")),
        }
    }
}

#[cfg(test)]
mod tests {
    use bincode::Options;

    use super::*;
    use crate::format::codec;

    #[test]
    fn varints_match_bincode() {
        for v in [
            0u64,
            1,
            250,
            251,
            255,
            65_535,
            65_536,
            u32::MAX.into(),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out, codec(u64::MAX).serialize(&v).expect("u64"));
            let mut r = Reader::new(&out);
            assert!(matches!(r.varint("v"), Ok(x) if x == v));
            assert!(r.is_empty());
        }
    }
}
