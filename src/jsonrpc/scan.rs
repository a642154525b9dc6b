//! The fast path of the one JSON-RPC decoder (docs/protocol.md, "JSON-RPC"): a scanner that reads
//! the objects of the common request (`tools/call` with plain members) without serde, and gives up
//! on anything it does not fully understand. Giving up is never an error: the caller then decodes
//! the text with the general decoder, which reads every valid message and words every refusal.
//!
//! What it accepts is a strict subset of JSON, checked as strictly as serde_json checks it: strings
//! without escapes or control characters, numbers in JSON's own grammar, `true`/`false`/`null`, and
//! objects and arrays of those up to [`MAX_DEPTH`] deep, with JSON's whitespace between tokens. A
//! string with an escape is given up on, so a key such as `"\u0069d"` can never be taken for a
//! different key than the general decoder reads.

/// Nesting this scanner follows before it gives up (serde_json's own limit is 128).
const MAX_DEPTH: usize = 32;

/// A position in a JSON text. Every method returns `None` to give up, leaving the scanner
/// somewhere in the middle: the caller then drops it.
pub(crate) struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scanner { text, at: 0 }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    #[inline(always)]
    fn ws(&mut self) {
        let bytes = self.text.as_bytes();
        // Whitespace is rare between the tokens of a message: one comparison decides most calls.
        while let Some(&b) = bytes.get(self.at) {
            if b > b' ' || !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.at += 1;
        }
    }

    /// Whitespace, then `c`.
    #[inline(always)]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next_byte()? == c).then(|| self.at += 1)
    }

    /// The next byte after whitespace (not taken).
    #[inline(always)]
    pub(crate) fn next_byte(&mut self) -> Option<u8> {
        self.ws();
        self.peek()
    }

    /// The text from here on, for a reader of its own (see [`Scanner::advance`]).
    pub(crate) fn rest(&self) -> &'a str {
        self.text.get(self.at..).unwrap_or_default()
    }

    /// `n` bytes of [`Scanner::rest`] were read by another reader.
    pub(crate) fn advance(&mut self, n: usize) {
        self.at = (self.at + n).min(self.text.len());
    }

    /// Whitespace to the end of the text: nothing may follow the value.
    pub(crate) fn end(mut self) -> Option<()> {
        self.ws();
        (self.at == self.text.len()).then_some(())
    }

    /// A string without escapes or control characters; its contents.
    #[inline(always)]
    pub(crate) fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = string_stop(&self.text.as_bytes()[start..])?;
        self.at = start + len + 1;
        // The quotes are ASCII, so both ends fall on character boundaries.
        self.text.get(start..start + len)
    }

    /// The members of an object, one at a time: `f` is called with each key (after its `:`) and
    /// must read the member's value. `None` from `f` gives up.
    #[inline(always)]
    pub(crate) fn object(
        &mut self,
        mut f: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.items(b'{', b'}', |s| {
            let key = s.plain_str()?;
            s.eat(b':')?;
            f(s, key)
        })
    }

    /// `open`, items separated by commas (each read by `item`), `close`.
    #[inline(always)]
    fn items(
        &mut self,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(open)?;
        if self.next_byte()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.next_byte()? {
                b',' => self.at += 1,
                c if c == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any value of the accepted subset, checked and passed over; the text it spans.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.at;
        self.skip(0)?;
        self.text.get(start..self.at)
    }

    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.plain_str().map(drop),
            b'{' => self.object(|s, _| s.ws_skip(depth + 1)),
            b'[' => self.items(b'[', b']', |s| s.ws_skip(depth + 1)),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => self.number().map(drop),
        }
    }

    fn ws_skip(&mut self, depth: usize) -> Option<()> {
        self.ws();
        self.skip(depth)
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word.as_bytes())
            .then(|| self.at += word.len())
    }

    /// A number in JSON's grammar, `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; the text it
    /// spans. Called after the whitespace before it.
    fn number(&mut self) -> Option<&'a str> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        self.text.get(start..self.at)
    }

    fn digits(&mut self) {
        let rest = &self.text.as_bytes()[self.at..];
        self.at += rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

/// The length of a string's contents at the start of `rest` (after its opening quote), when they
/// end with `"` before any `\\` or control character.
#[inline(always)]
fn string_stop(rest: &[u8]) -> Option<usize> {
    // Eight bytes at a time: in the mask, the lowest set high bit marks the first byte that is the
    // quote, the backslash, or below 0x20 (bytes of 0x80 and above, UTF-8, never match); bits
    // above the first may be spurious, so only the lowest is used.
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v;
    let mut at = 0;
    while at + 8 <= rest.len() {
        let mut word = [0; 8];
        word.copy_from_slice(&rest[at..at + 8]);
        let x = u64::from_le_bytes(word);
        let found = (zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if found != 0 {
            at += found.trailing_zeros() as usize / 8;
            return (rest[at] == b'"').then_some(at);
        }
        at += 8;
    }
    while at < rest.len() {
        match rest[at] {
            b'"' => return Some(at),
            b'\\' | 0..=0x1f => return None,
            _ => at += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the scanner accepts `text` as one whole value.
    fn accepts(text: &str) -> bool {
        let mut s = Scanner::new(text);
        s.value().is_some() && s.end().is_some()
    }

    #[test]
    fn what_it_accepts_is_json() {
        for t in [
            "0",
            "-0",
            "12.5e-3",
            "1E+2",
            r#""""#,
            r#""héllo /""#,
            "true",
            " [ 1 , [ ] , { } , null ] ",
            r#"{"a":{"b":[false,"c"]},"":1}"#,
        ] {
            assert!(accepts(t), "{t}");
            assert!(serde_json::from_str::<serde_json::Value>(t).is_ok(), "{t}");
        }
    }

    #[test]
    fn it_gives_up_on_what_it_does_not_read_and_on_what_is_not_json() {
        for t in [
            "01",
            "-",
            "1.",
            ".5",
            "1e",
            "+1",
            "tru",
            "nul",
            "[1,]",
            "[1 2]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{1:2}",
            "\"a",
            "\"\\n\"",
            "\"\u{1}\"",
            "[",
            "{",
            "",
            "1 2",
            "{}}",
        ] {
            assert!(!accepts(t), "{t:?}");
        }
        // Too deep for the scanner, although JSON: the general decoder reads it.
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(!accepts(&deep));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(accepts(&fine));
    }

    #[test]
    fn strings_end_at_the_first_quote_unless_a_backslash_or_control_character_comes_first() {
        for stop in [b'"', b'\\', 0, 0x1f] {
            for at in 0..20 {
                for len in at + 1..24 {
                    let mut bytes = vec![b'a'; len];
                    // Bytes around the stop that must not stop it: 0x20, 0x7f, UTF-8.
                    if at > 0 {
                        bytes[at - 1] = 0xe9;
                    }
                    bytes[at] = stop;
                    if at + 1 < len {
                        bytes[at + 1] = b'"';
                    }
                    let want = (stop == b'"').then_some(at);
                    assert_eq!(string_stop(&bytes), want, "{bytes:?}");
                }
            }
        }
        assert_eq!(string_stop("é ~\u{7f}abcdefghijk".as_bytes()), None);
        assert_eq!(string_stop(b""), None);
    }

    #[test]
    fn objects_hand_over_each_member() {
        let mut s = Scanner::new(r#" { "a" : 1 , "b":"x" } "#);
        let mut seen = Vec::new();
        s.object(|s, k| {
            seen.push((k, s.value()?));
            Some(())
        })
        .unwrap();
        assert!(s.end().is_some());
        assert_eq!(seen, [("a", "1"), ("b", "\"x\"")]);
    }
}
