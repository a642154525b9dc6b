//! Streaming UTF-8 validation for text messages that arrive in pieces.

use claude_ide_bridge_text::incomplete_suffix_len;

/// The bytes are not UTF-8 (close code 1007): the same error as the text crate's.
pub use claude_ide_bridge_text::InvalidUtf8;

/// Inputs at least this long are validated with SIMD instructions (`simdutf8`, which picks AVX2 or SSE4.2 at
/// run time); shorter ones with `std::str::from_utf8`. Measured on an AVX2 machine: on ASCII (nearly every
/// JSON-RPC message) `std` is as fast or faster up to about 400 bytes (`simdutf8` pays a fixed cost for a
/// last partial 64-byte block: 9 ns for 100 bytes against 5 for `std`); on text with many non-ASCII letters
/// `simdutf8` wins from 64 bytes, but below this length the difference is tens of nanoseconds.
/// `frame_decode/ours/small` ran 7 % faster with 256 than with 64.
const SIMD_MIN: usize = 256;

/// `bytes` as a `&str`, or `None` if they are not UTF-8.
///
/// Long inputs go through `simdutf8`, several times faster than `std::str::from_utf8` on text that is not
/// plain ASCII (source code with a few accented letters: about 20 GB/s against 4). Validation is the largest
/// cost of receiving a large text frame, and safe code can only turn bytes into a `&str` through a validator.
#[inline]
pub fn str_from_utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.len() < SIMD_MIN {
        std::str::from_utf8(bytes).ok()
    } else {
        simdutf8::basic::from_utf8(bytes).ok()
    }
}

/// A streaming UTF-8 validator.
///
/// It carries an incomplete trailing sequence (at most 3 bytes) from one [`feed`](Self::feed) to the next, and
/// reports an error as soon as a byte arrives that can never be part of valid UTF-8 (an invalid lead byte, a bad
/// continuation, an overlong form, a surrogate, a code point past U+10FFFF), not only when the input ends.
/// Bulk input goes through a SIMD validator (see [`str_from_utf8`]).
///
/// ```
/// use claude_ide_bridge::ws::Utf8Validator;
/// let mut v = Utf8Validator::new();
/// let euro = "€".as_bytes();
/// assert!(v.feed(&euro[..1]).is_ok());
/// assert!(v.feed(&euro[1..]).is_ok());
/// assert!(v.finish().is_ok());
/// assert!(v.feed(&[0xF4, 0x90]).is_err()); // past U+10FFFF: fails at the second byte
/// ```
#[derive(Debug, Clone, Default)]
pub struct Utf8Validator {
    pending: [u8; 4],
    len: usize,
}

impl Utf8Validator {
    /// A validator at the start of a text.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validate the next bytes of the text.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), InvalidUtf8> {
        self.feed_with(bytes, |_| {})
    }

    /// Validate the next bytes of the text and append them to `out`, in one pass: bytes of a sequence cut by
    /// the end of `bytes` are held back and appended once the rest of the sequence arrives. Nothing is appended
    /// from an input that fails (the part before the failure may have been).
    ///
    /// This assembles a text that arrives in pieces into a `String` without validating it again at the end.
    ///
    /// ```
    /// use claude_ide_bridge::ws::Utf8Validator;
    /// let mut v = Utf8Validator::new();
    /// let mut text = String::new();
    /// let euro = "a€".as_bytes();
    /// v.feed_into(&euro[..2], &mut text).unwrap();
    /// assert_eq!(text, "a");
    /// v.feed_into(&euro[2..], &mut text).unwrap();
    /// v.finish().unwrap();
    /// assert_eq!(text, "a€");
    /// ```
    pub fn feed_into(&mut self, bytes: &[u8], out: &mut String) -> Result<(), InvalidUtf8> {
        self.feed_with(bytes, |s| out.push_str(s))
    }

    /// Validate `bytes`, giving each validated part to `sink` in order.
    fn feed_with(&mut self, bytes: &[u8], mut sink: impl FnMut(&str)) -> Result<(), InvalidUtf8> {
        let mut bytes = bytes;
        if self.len > 0 {
            // Complete the sequence carried over, a byte at a time (at most 3).
            loop {
                let Some((&b, rest)) = bytes.split_first() else {
                    return Ok(());
                };
                bytes = rest;
                self.pending[self.len] = b;
                self.len += 1;
                match std::str::from_utf8(&self.pending[..self.len]) {
                    Ok(s) => {
                        sink(s);
                        break;
                    }
                    Err(e) if e.error_len().is_some() => return Err(InvalidUtf8),
                    Err(_) if self.len >= 4 => return Err(InvalidUtf8),
                    Err(_) => {}
                }
            }
            self.len = 0;
        }
        // Hold back a sequence cut by the end, validate the rest in one pass (SIMD when long).
        let (body, tail) = bytes.split_at(bytes.len() - incomplete_suffix_len(bytes));
        sink(str_from_utf8(body).ok_or(InvalidUtf8)?);
        match std::str::from_utf8(tail) {
            // Only a lead byte whose sequence is longer than the tail is held back.
            Ok(s) => sink(s),
            // The start of a sequence that can still be completed: keep it.
            Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => {
                self.pending[..tail.len()].copy_from_slice(tail);
                self.len = tail.len();
            }
            // An impossible byte (a bad continuation, an overlong form, past U+10FFFF): fail now.
            Err(_) => return Err(InvalidUtf8),
        }
        Ok(())
    }

    /// The text ended: fails if it ended inside a sequence. Resets the validator either way.
    pub fn finish(&mut self) -> Result<(), InvalidUtf8> {
        let complete = self.len == 0;
        self.reset();
        if complete {
            Ok(())
        } else {
            Err(InvalidUtf8)
        }
    }

    /// Forget any incomplete sequence and start a new text.
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// True when the bytes fed so far end inside a multi-byte sequence.
    pub fn is_incomplete(&self) -> bool {
        self.len > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> bool {
        let mut v = Utf8Validator::new();
        v.feed(bytes).is_ok() && v.finish().is_ok()
    }

    fn bytewise(bytes: &[u8]) -> bool {
        let mut v = Utf8Validator::new();
        bytes
            .iter()
            .all(|b| v.feed(std::slice::from_ref(b)).is_ok())
            && v.finish().is_ok()
    }

    #[test]
    fn agrees_with_std() {
        let cases: &[&[u8]] = &[
            b"",
            b"hello",
            "κόσμε".as_bytes(),
            "𝄞 and €".as_bytes(),
            &[0xC0, 0x80],
            &[0xED, 0xA0, 0x80],
            &[0xF4, 0x90, 0x80, 0x80],
            &[0xF0, 0x9F, 0x98],
            &[0xFF],
            &[0xE2, 0x82],
            &[
                0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80,
            ],
        ];
        for c in cases {
            let std_ok = std::str::from_utf8(c).is_ok();
            assert_eq!(whole(c), std_ok, "{c:?}");
            assert_eq!(bytewise(c), std_ok, "{c:?}");
        }
    }

    #[test]
    fn fails_at_first_impossible_byte() {
        let mut v = Utf8Validator::new();
        assert!(v.feed(&[0xF4]).is_ok());
        assert!(v.feed(&[0x90]).is_err());
        let mut v = Utf8Validator::new();
        assert!(v.feed(b"ok\xED").is_ok());
        assert!(v.feed(&[0xA0]).is_err());
        let mut v = Utf8Validator::new();
        assert!(v.feed(&[0xE0, 0x80]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_split_matches_std(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), cut in 0usize..64) {
            let cut = cut.min(bytes.len());
            let mut v = Utf8Validator::new();
            let ok = v.feed(&bytes[..cut]).is_ok() && v.feed(&bytes[cut..]).is_ok() && v.finish().is_ok();
            proptest::prop_assert_eq!(ok, std::str::from_utf8(&bytes).is_ok());
            proptest::prop_assert_eq!(bytewise(&bytes), std::str::from_utf8(&bytes).is_ok());
            // Byte by byte into a String: the same verdict, the same text.
            let mut v = Utf8Validator::new();
            let mut out = String::new();
            let ok = bytes.iter().all(|b| v.feed_into(std::slice::from_ref(b), &mut out).is_ok())
                && v.finish().is_ok();
            proptest::prop_assert_eq!(ok, std::str::from_utf8(&bytes).is_ok());
            if ok {
                proptest::prop_assert_eq!(out.as_bytes(), &bytes[..]);
            }
        }

        /// Long inputs (the SIMD path): text with multi-byte characters, one byte possibly replaced, fed in
        /// three pieces cut anywhere.
        #[test]
        fn long_inputs_any_split_match_std(
            text in "[a-zé€😀\\n]{0,200}",
            corrupt in proptest::option::of((0usize..1000, proptest::prelude::any::<u8>())),
            cuts in (0usize..1000, 0usize..1000),
        ) {
            let mut bytes = text.into_bytes();
            if let (Some((at, b)), false) = (corrupt, bytes.is_empty()) {
                let at = at % bytes.len();
                bytes[at] = b;
            }
            let (a, b) = (cuts.0.min(bytes.len()), cuts.1.min(bytes.len()));
            let (a, b) = (a.min(b), a.max(b));
            let mut v = Utf8Validator::new();
            let ok = v.feed(&bytes[..a]).is_ok()
                && v.feed(&bytes[a..b]).is_ok()
                && v.feed(&bytes[b..]).is_ok()
                && v.finish().is_ok();
            let std_ok = std::str::from_utf8(&bytes).is_ok();
            proptest::prop_assert_eq!(ok, std_ok);
            proptest::prop_assert_eq!(str_from_utf8(&bytes).is_some(), std_ok);
            // The same pieces assembled into a String: accepted exactly as often, and equal to the input.
            let mut v = Utf8Validator::new();
            let mut out = String::new();
            let ok = v.feed_into(&bytes[..a], &mut out).is_ok()
                && v.feed_into(&bytes[a..b], &mut out).is_ok()
                && v.feed_into(&bytes[b..], &mut out).is_ok()
                && v.finish().is_ok();
            proptest::prop_assert_eq!(ok, std_ok);
            if ok {
                proptest::prop_assert_eq!(out.as_bytes(), &bytes[..]);
            }
        }
    }
}
