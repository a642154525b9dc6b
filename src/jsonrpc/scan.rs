//! The fast path of the one JSON-RPC decoder (docs/protocol.md, "JSON-RPC"): a scanner that reads
//! the objects of the common request (`tools/call` with plain members) without serde, and gives up
//! on anything it does not fully understand. Giving up is never an error: the caller then decodes
//! the text with the general decoder, which reads every valid message and words every refusal.
//!
//! What it accepts is a strict subset of JSON, checked as strictly as serde_json checks it: strings
//! without escapes or control characters, numbers in JSON's own grammar, `true`/`false`/`null`, and
//! objects and arrays of those up to [`MAX_DEPTH`] deep, with JSON's whitespace between tokens. A
//! key or a passed-over string with an escape is given up on, so a key such as `"\u0069d"` can
//! never be taken for a different key than the general decoder reads. The one place escapes are
//! read is a string value handed to a type (the deserializer below): serde_json decodes that
//! token, since a file's contents in `openDiff` are full of `\n`.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, Visitor};

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

    /// Whitespace to the end of the text: nothing may follow the value.
    pub(crate) fn end(mut self) -> Option<()> {
        self.ws();
        (self.at == self.text.len()).then_some(())
    }

    /// A string without escapes or control characters; its contents.
    ///
    /// Not inlined: a `tools/call` reads about ten strings, and one copy of this body instead of
    /// one per call site is 3.6 KiB less code per call, which the round trip follows
    /// (BENCHMARKS.md, "Item 8, session of 2026-11-25 (afternoon)").
    #[inline(never)]
    pub(crate) fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = string_stop(&self.text.as_bytes()[start..])?;
        self.at = start + len + 1;
        // The quotes are ASCII, so both ends fall on character boundaries.
        self.text.get(start..start + len)
    }

    /// A string that may hold escapes (called at its opening quote), decoded by serde_json in one
    /// pass from where it stands, so that an escape means what it means to the general decoder.
    /// `None` for a control character, a bad escape or a lone surrogate.
    fn escaped_str(&mut self) -> Option<String> {
        let mut strings =
            serde_json::Deserializer::from_str(self.text.get(self.at..)?).into_iter::<String>();
        let decoded = strings.next()?.ok()?;
        self.at += strings.byte_offset();
        Some(decoded)
    }

    /// The members of an object, one at a time: `f` is called with each key (after its `:`) and
    /// must read the member's value. `None` from `f` gives up.
    #[inline(always)]
    pub(crate) fn object(&mut self, f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.object_with_keys(&[], f)
    }

    /// [`Scanner::object`] for an object whose keys are nearly always among `known`: such a key
    /// is taken by comparing the text with it in its quotes, which gives what
    /// [`Scanner::plain_str`] gives for it without searching for its end (about 80 instructions
    /// a key less, BENCHMARKS.md "Issue 32, item 5 (2026-11-28, fourth session)"); any other key
    /// is read by `plain_str`. The known keys are plain: no quote, backslash or control character.
    #[inline(always)]
    pub(crate) fn object_with_keys(
        &mut self,
        known: &[&'static str],
        mut f: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.items(b'{', b'}', |s| {
            let key = match s.known_str(known) {
                Some(key) => key,
                None => s.plain_str()?,
            };
            s.eat(b':')?;
            f(s, key)
        })
    }

    /// The string here (after whitespace) when it is one of `known` in quotes, taken; `None`,
    /// having taken nothing, when it is not. For a plain `known`, exactly what
    /// [`Scanner::plain_str`] reads and gives when that gives one of them.
    #[inline(always)]
    pub(crate) fn known_str(&mut self, known: &[&'static str]) -> Option<&'a str> {
        self.ws();
        let rest = self.text.as_bytes().get(self.at..)?.strip_prefix(b"\"")?;
        for &word in known {
            debug_assert!(!word.bytes().any(|b| matches!(b, b'"' | b'\\' | 0..=0x1f)));
            if rest.get(word.len()) == Some(&b'"') && rest.starts_with(word.as_bytes()) {
                self.at += word.len() + 2;
                return Some(word);
            }
        }
        None
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
        let mut items = Items::new(self, close);
        while items.more().ok()? {
            item(items.s)?;
        }
        Some(())
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

/// The scanner gave up: the value is outside its subset, or is not what the type reading it
/// wants. It carries no words: the general decoder reads the text again and words the refusal.
#[derive(Debug)]
pub(crate) struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left to the general decoder")
    }
}

impl std::error::Error for GiveUp {}

impl de::Error for GiveUp {
    fn custom<T: fmt::Display>(_: T) -> Self {
        GiveUp
    }
}

/// The scanner as a serde deserializer of its subset, so that a type's derived `Deserialize`
/// reads a value where it stands (the `arguments` of a `tools/call`) without serde_json. What
/// it hands the visitor is what serde_json hands it for the same text: borrowed strings (owned
/// ones, decoded by serde_json itself, when they hold escapes), `bool`s,
/// unit for `null`, maps and sequences; of numbers only non-negative integers that fit a `u64`,
/// as serde_json reads them (`visit_u64`); any other number gives up, since serde_json reads
/// `-0`, fractions and large integers as floats. Every other difference from serde_json is a
/// refusal here, never another value.
impl<'de> de::Deserializer<'de> for &mut Scanner<'de> {
    type Error = GiveUp;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, GiveUp> {
        match self.next_byte().ok_or(GiveUp)? {
            b'"' => {
                let start = self.at;
                match self.plain_str() {
                    Some(plain) => v.visit_borrowed_str(plain),
                    // Escapes, as in a file's contents with its line breaks.
                    None => {
                        self.at = start;
                        v.visit_string(self.escaped_str().ok_or(GiveUp)?)
                    }
                }
            }
            b't' => self
                .literal("true")
                .ok_or(GiveUp)
                .and_then(|()| v.visit_bool(true)),
            b'f' => self
                .literal("false")
                .ok_or(GiveUp)
                .and_then(|()| v.visit_bool(false)),
            b'n' => self
                .literal("null")
                .ok_or(GiveUp)
                .and_then(|()| v.visit_unit()),
            b'{' => self.deserialize_map(v),
            b'[' => self.deserialize_seq(v),
            _ => {
                let digits = self.number().ok_or(GiveUp)?;
                v.visit_u64(digits.parse().map_err(|_| GiveUp)?)
            }
        }
    }

    /// An object, and only an object (serde_json would let a struct be read from an array too;
    /// the arguments of a tool must be an object).
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, GiveUp> {
        self.eat(b'{').ok_or(GiveUp)?;
        let mut items = Items::new(self, b'}');
        let value = v.visit_map(&mut items)?;
        items.finished(value)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, GiveUp> {
        self.eat(b'[').ok_or(GiveUp)?;
        let mut items = Items::new(self, b']');
        let value = v.visit_seq(&mut items)?;
        items.finished(value)
    }

    /// An object whose keys are nearly always the struct's `fields`: taken by
    /// `Scanner::known_str`.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, GiveUp> {
        self.eat(b'{').ok_or(GiveUp)?;
        let mut items = Items::new(self, b'}');
        items.keys = fields;
        let value = v.visit_map(&mut items)?;
        items.finished(value)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, GiveUp> {
        if self.next_byte() == Some(b'n') {
            self.literal("null").ok_or(GiveUp)?;
            v.visit_none()
        } else {
            v.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, GiveUp> {
        v.visit_newtype_struct(self)
    }

    /// Checked and passed over, as any value of the subset.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, GiveUp> {
        self.value().ok_or(GiveUp)?;
        v.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct tuple tuple_struct enum identifier
    }
}

/// The members of an object or the elements of an array, after the opening bracket, up to
/// `close`, separated by commas: for a visitor, and for [`Scanner::items`].
struct Items<'s, 'de> {
    s: &'s mut Scanner<'de>,
    close: u8,
    /// The keys an object's members nearly always have (a struct's fields), for
    /// [`Scanner::known_str`].
    keys: &'static [&'static str],
    first: bool,
    done: bool,
}

impl<'s, 'de> Items<'s, 'de> {
    fn new(s: &'s mut Scanner<'de>, close: u8) -> Self {
        Items {
            s,
            close,
            keys: &[],
            first: true,
            done: false,
        }
    }

    /// Whether another item follows (its comma taken), or the closing bracket (taken).
    fn more(&mut self) -> Result<bool, GiveUp> {
        let c = self.s.next_byte().ok_or(GiveUp)?;
        if c == self.close {
            self.s.at += 1;
            self.done = true;
            return Ok(false);
        }
        if !std::mem::take(&mut self.first) {
            if c != b',' {
                return Err(GiveUp);
            }
            self.s.at += 1;
        }
        Ok(true)
    }

    /// The visitor's value, once the closing bracket is taken: a visitor that stops before the
    /// last item leaves the rest, which serde_json refuses and so does this.
    fn finished<T>(self, value: T) -> Result<T, GiveUp> {
        if !self.done {
            self.s.eat(self.close).ok_or(GiveUp)?;
        }
        Ok(value)
    }
}

impl<'de> de::MapAccess<'de> for Items<'_, 'de> {
    type Error = GiveUp;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, GiveUp> {
        if !self.more()? {
            return Ok(None);
        }
        let key = match self.s.known_str(self.keys) {
            Some(key) => key,
            None => self.s.plain_str().ok_or(GiveUp)?,
        };
        self.s.eat(b':').ok_or(GiveUp)?;
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, GiveUp> {
        seed.deserialize(&mut *self.s)
    }
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
    type Error = GiveUp;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, GiveUp> {
        if !self.more()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.s).map(Some)
    }
}

/// The length of a string's contents at the start of `rest` (after its opening quote), when they
/// end with `"` before any `\\` or control character.
#[inline(always)]
fn string_stop(rest: &[u8]) -> Option<usize> {
    first_stop(rest).filter(|&at| rest[at] == b'"')
}

/// Where the first `"`, `\\` or control character of `rest` is.
#[inline(always)]
fn first_stop(rest: &[u8]) -> Option<usize> {
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
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    rest[at..]
        .iter()
        .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1f))
        .map(|n| at + n)
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
    fn known_strings_are_read_as_plain_str_reads_them() {
        let known = ["id", "idx", "jsonrpc", ""];
        for text in [
            r#""id""#,
            r#" "idx":1"#,
            r#""i""#,
            r#""id"#,
            r#""idy""#,
            r#"  "jsonrpc""#,
            r#""json\u0072pc""#,
            r#""""#,
            r#""id\"""#,
            "",
            " ",
            "id",
            "\"id\u{1}\"",
            "\"é\"",
        ] {
            let (mut a, mut b) = (Scanner::new(text), Scanner::new(text));
            let plain = b.plain_str();
            match a.known_str(&known) {
                Some(k) => {
                    assert_eq!(Some(k), plain, "{text:?}");
                    assert_eq!(a.at, b.at, "{text:?}");
                }
                None => {
                    assert!(plain.is_none_or(|p| !known.contains(&p)), "{text:?}");
                    // Nothing taken but the whitespace.
                    assert_eq!(a.at, text.len() - text.trim_start().len(), "{text:?}");
                }
            }
        }
        // An object read with known keys hands over the same members as one read without.
        for text in [
            r#"{"id":1,"idx":2,"ids":3,"":4, "jsonrpc" :5}"#,
            r#"{"i\u0064":1}"#,
            r#"{"id":1,}"#,
        ] {
            let members = |with: bool| {
                let mut s = Scanner::new(text);
                let mut seen = Vec::new();
                let read = |s: &mut Scanner<'static>, k: &'static str| {
                    seen.push((k, s.value()?));
                    Some(())
                };
                let r = if with {
                    s.object_with_keys(&known, read)
                } else {
                    s.object(read)
                };
                (r, seen, s.at)
            };
            assert_eq!(members(true), members(false), "{text}");
        }
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

    /// `T` read by the scanner as a serde deserializer, the whole text.
    fn read<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Option<T> {
        let mut s = Scanner::new(text);
        let value = T::deserialize(&mut s).ok()?;
        s.end().map(|()| value)
    }

    #[test]
    fn as_a_deserializer_it_reads_what_serde_json_reads_or_gives_up() {
        use crate::tools::OpenFileArgs;
        fn agree<'a, T>(text: &'a str) -> bool
        where
            T: serde::Deserialize<'a> + PartialEq + std::fmt::Debug,
        {
            let ours = read::<T>(text);
            if let Some(v) = &ours {
                assert_eq!(
                    Some(v),
                    serde_json::from_str::<T>(text).ok().as_ref(),
                    "{text}"
                );
            }
            ours.is_some()
        }
        let open_file =
            r#" { "filePath" : "/a" , "startLine":3,"preview":false,"x":[{"y":null}]} "#;
        assert!(agree::<OpenFileArgs>(open_file));
        assert!(agree::<Vec<String>>(r#"["a", "b"]"#));
        assert!(agree::<Option<u64>>("null"));
        assert!(agree::<u64>("18446744073709551615"));
        assert!(agree::<bool>("true"));
        // serde_json reads these numbers as floats (or refuses them): the scanner gives up.
        for n in ["-0", "-1", "1.0", "1e2", "18446744073709551616"] {
            assert!(!agree::<Option<u64>>(n), "{n}");
            assert!(!agree::<serde_json::Value>(n), "{n}");
        }
        for t in [
            "{\"filePath\":\"/a\",}",
            r#"{"filePath":"/a" "x":1}"#,
            r#"{"fil\u0065Path":"/a"}"#,
        ] {
            assert!(!agree::<OpenFileArgs>(t), "{t}");
        }
        // Escapes in a string value mean what serde_json says they mean.
        assert!(agree::<OpenFileArgs>(
            r#"{"filePath":"\u0061\n\"b\" \\ \ud83d\ude00 \/"}"#
        ));
        assert_eq!(
            read::<String>(r#""a\tb\u00e9""#).as_deref(),
            Some("a\tb\u{e9}")
        );
        for t in [
            r#""\ud800""#,
            r#""\x""#,
            "\"a\u{1}\\n\"",
            r#""\"#,
            r#""\u12""#,
        ] {
            assert!(!agree::<String>(t), "{t}");
        }
    }

    #[test]
    fn as_a_deserializer_it_reads_structs_only_from_objects_and_only_whole() {
        // serde_json reads a struct from an array too; the arguments of a tool must be an object.
        assert!(serde_json::from_str::<crate::tools::CloseTabArgs>(r#"["t"]"#).is_ok());
        assert!(read::<crate::tools::CloseTabArgs>(r#"["t"]"#).is_none());
        // A visitor that stops before the closing brace: serde_json refuses the rest, so does this.
        struct FirstKey;
        impl<'de> serde::Deserialize<'de> for FirstKey {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = FirstKey;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: de::MapAccess<'de>>(
                        self,
                        mut m: A,
                    ) -> Result<FirstKey, A::Error> {
                        m.next_entry::<de::IgnoredAny, de::IgnoredAny>()?;
                        Ok(FirstKey)
                    }
                }
                d.deserialize_map(V)
            }
        }
        assert!(read::<FirstKey>(r#"{"a":1}"#).is_some());
        assert!(read::<FirstKey>(r#"{"a":1,"b":2}"#).is_none());
        assert!(serde_json::from_str::<FirstKey>(r#"{"a":1,"b":2}"#).is_err());
    }
}
