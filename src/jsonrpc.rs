//! JSON-RPC 2.0 framing (docs/protocol.md, "JSON-RPC" and "Batches"): decoding one message or a batch from a text
//! frame, and writing responses and errors straight into an output buffer.
//!
//! Decoding borrows from the frame: `id` and `params` stay [`RawValue`]s pointing into the text, so
//! a request is scanned once here and its parameters are parsed once, into their typed form, by
//! whoever handles the method.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

mod scan;
pub(crate) use scan::Scanner;

/// Parse error: the text is not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// The JSON is not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i32 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i32 = -32603;
/// The server is not initialized yet (or the session is closed).
pub const NOT_INITIALIZED: i32 = -32002;
/// MCP's code for a resource that does not exist (`resources/read`; the host offers none). The
/// same number as [`NOT_INITIALIZED`], which only a request before `initialize` gets.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// Too many calls in progress on this connection (`Limits::max_pending_calls`): a server error
/// (JSON-RPC's implementation-defined range), the request may be sent again later.
pub const TOO_MANY_CALLS: i32 = -32000;
/// An answer too large for what the connection's output queue has left
/// (`Limits::max_outbound`): the same server error as [`TOO_MANY_CALLS`]; the request may be sent
/// again later, or ask for less.
pub const ANSWER_TOO_LARGE: i32 = -32000;

/// A JSON-RPC error object: a code from this module's constants and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The error code.
    pub code: i32,
    /// A short human-readable message.
    pub message: Cow<'static, str>,
}

impl RpcError {
    /// Parse error: the text is not JSON (-32700).
    pub const PARSE_ERROR: i32 = PARSE_ERROR;
    /// The JSON is not a valid request object (-32600).
    pub const INVALID_REQUEST: i32 = INVALID_REQUEST;
    /// The method does not exist (-32601).
    pub const METHOD_NOT_FOUND: i32 = METHOD_NOT_FOUND;
    /// Invalid method parameters (-32602).
    pub const INVALID_PARAMS: i32 = INVALID_PARAMS;
    /// Internal error (-32603).
    pub const INTERNAL_ERROR: i32 = INTERNAL_ERROR;
    /// The server is not initialized yet (-32002).
    pub const NOT_INITIALIZED: i32 = NOT_INITIALIZED;
    /// Too many calls in progress on this connection (-32000); the request may be sent again later.
    pub const TOO_MANY_CALLS: i32 = TOO_MANY_CALLS;
    /// An answer too large for the connection's output queue (-32000); ask for less, or again later.
    pub const ANSWER_TOO_LARGE: i32 = ANSWER_TOO_LARGE;
    /// MCP's "resource not found" (-32002), after `initialize`.
    pub const RESOURCE_NOT_FOUND: i32 = RESOURCE_NOT_FOUND;

    /// An error with the given code and message.
    pub fn new(code: i32, message: impl Into<Cow<'static, str>>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    /// -32603 with a message.
    pub fn internal(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}

/// One decoded JSON-RPC message, borrowing from the text it came from.
#[derive(Debug)]
pub enum Message<'a> {
    /// A request (has an `id`).
    Request {
        /// The request id, as raw JSON (a string or a number), echoed verbatim in the response.
        id: &'a RawValue,
        /// The method name.
        method: Cow<'a, str>,
        /// The params, if present.
        params: Option<&'a RawValue>,
    },
    /// A notification (no `id`): never answered, not even with an error.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The params, if present.
        params: Option<&'a RawValue>,
    },
    /// A response from the peer (has `result` or `error`, no `method`).
    Response {
        /// The id it answers (only `hooks` reads it: a response from the client is dropped).
        #[cfg_attr(not(feature = "hooks"), allow(dead_code))]
        id: Option<&'a RawValue>,
    },
    /// A message that is not valid JSON-RPC; answer with this error, addressed to `id` (null when
    /// it could not be read).
    Invalid {
        /// The id, when one could be read.
        id: Option<&'a RawValue>,
        /// The error to send.
        error: RpcError,
    },
}

#[derive(Deserialize)]
struct Envelope<'a> {
    // Raw, like the members below: a `jsonrpc` that is not a string (`2.0`) must not stop the id
    // from being read (docs/protocol.md, "JSON-RPC").
    #[serde(borrow, default, deserialize_with = "raw_present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw_present")]
    error: Option<&'a RawValue>,
}

/// `Some(raw)` whenever the member is present, even when it is `null`.
fn raw_present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&'de RawValue as Deserialize>::deserialize(d).map(Some)
}

/// What a text frame held: one message, or a batch of raw entries to decode one by one.
#[derive(Debug)]
pub enum Frame<'a> {
    /// A single message.
    Single(Message<'a>),
    /// A JSON array: each entry is decoded with [`decode_value`].
    Batch(Vec<&'a RawValue>),
}

/// Decode one text frame: a message, a batch, or an invalid message.
///
/// ```
/// use claude_ide_bridge::hooks::jsonrpc::{decode, Frame, Message};
/// let f = decode(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
/// match f {
///     Frame::Single(Message::Request { id, method, .. }) => {
///         assert_eq!(id.get(), "7");
///         assert_eq!(method, "ping");
///     }
///     _ => panic!(),
/// }
/// ```
#[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
pub fn decode(text: &str) -> Frame<'_> {
    decode_limited(text, usize::MAX)
}

/// [`decode`], keeping at most `max_batch + 1` entries of a batch: the rest are checked as JSON
/// and counted out, never held, so a huge batch (millions of `0`s) costs no memory before it is
/// refused as larger than `max_batch`.
pub fn decode_limited(text: &str, max_batch: usize) -> Frame<'_> {
    let first = text
        .as_bytes()
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    if first == Some(&b'[') {
        let mut de = serde_json::Deserializer::from_str(text);
        let items = serde::Deserializer::deserialize_seq(
            &mut de,
            Entries {
                keep: max_batch.saturating_add(1),
            },
        )
        .and_then(|items| de.end().map(|()| items));
        return match items {
            Ok(items) => Frame::Batch(items),
            Err(e) => Frame::Single(Message::Invalid {
                id: None,
                error: parse_failure(&e),
            }),
        };
    }
    if first == Some(&b'{') {
        // One pass: the envelope is parsed straight from the text.
        return Frame::Single(decode_object(text));
    }
    Frame::Single(match serde_json::from_str::<&RawValue>(text) {
        Ok(raw) => decode_value(raw),
        Err(e) => Message::Invalid {
            id: None,
            error: parse_failure(&e),
        },
    })
}

/// A batch's entries, at most `keep` of them kept (see [`decode_limited`]).
struct Entries {
    keep: usize,
}

impl<'de> serde::de::Visitor<'de> for Entries {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while items.len() < self.keep {
            match seq.next_element::<&RawValue>()? {
                Some(raw) => items.push(raw),
                None => return Ok(items),
            }
        }
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(items)
    }
}

/// Why a peer's params could not be read, as an error message shows it: serde's message with its
/// middle cut when it is longer than 200 characters (it quotes the value it did not expect, in
/// full and escaped: a 1 MB string made a 4 MB answer), so that its start and what was expected
/// stay, then where in the params it was.
pub(crate) fn echoed_error(e: &serde_json::Error) -> String {
    const HEAD: usize = 120;
    const TAIL: usize = 60;
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(at.as_str()).unwrap_or(&text);
    let count = message.chars().count();
    if count <= HEAD + TAIL + 20 {
        return text;
    }
    let head: String = message.chars().take(HEAD).collect();
    let tail: String = message.chars().skip(count - TAIL).collect();
    // Where it was, when serde said it.
    let at = &text[message.len()..];
    format!("{head}...{tail}{at}")
}

/// A peer's method or tool name as an error message shows it: at most 64 characters, then
/// `...`. The message is kept with a pending call (a batch's answer waits for its slowest
/// entry), so a 10 MiB name must not be copied whole.
pub(crate) fn echoed_name(name: &str) -> Cow<'_, str> {
    const MAX_ECHOED_NAME: usize = 64;
    match name.char_indices().nth(MAX_ECHOED_NAME) {
        Some((cut, _)) => Cow::Owned(format!("{}...", &name[..cut])),
        None => Cow::Borrowed(name),
    }
}

fn parse_failure(e: &serde_json::Error) -> RpcError {
    use serde_json::error::Category;
    match e.classify() {
        // With where the text stops being JSON (serde's short message, of bounded length).
        Category::Syntax | Category::Eof | Category::Io => {
            RpcError::new(PARSE_ERROR, format!("parse error: {e}"))
        }
        Category::Data => RpcError::new(INVALID_REQUEST, "invalid request"),
    }
}

/// An object with a member of the envelope given twice (RFC 8259 §4: names SHOULD be unique, and
/// which one counts is up to the reader), read again member by member: a response is still never
/// answered, and a request is refused with its id when the id is given once.
fn decode_repeated(text: &str) -> Message<'_> {
    #[derive(Default)]
    struct Members<'a> {
        id: Option<&'a RawValue>,
        ids: usize,
        method: bool,
        answer: bool,
        repeated: Option<&'static str>,
    }
    impl<'de> serde::de::Visitor<'de> for Members<'de> {
        type Value = Members<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<Self, A::Error> {
            const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
            let mut seen = [false; 6];
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                let value: &'de RawValue = map.next_value()?;
                let Some(k) = ENVELOPE.iter().position(|m| *m == key) else {
                    continue;
                };
                if std::mem::replace(&mut seen[k], true) {
                    self.repeated.get_or_insert(ENVELOPE[k]);
                }
                match ENVELOPE[k] {
                    "id" => (self.ids, self.id) = (self.ids + 1, Some(value)),
                    "method" => self.method = true,
                    "result" | "error" => self.answer = true,
                    _ => {}
                }
            }
            Ok(self)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let read = serde::Deserializer::deserialize_map(&mut de, Members::default())
        .and_then(|m| de.end().map(|()| m));
    let m = match read {
        Ok(m) => m,
        Err(e) => {
            return Message::Invalid {
                id: None,
                error: parse_failure(&e),
            }
        }
    };
    let id = m.id.filter(|raw| m.ids == 1 && is_valid_id(raw));
    if !m.method && m.answer {
        return Message::Response { id };
    }
    let message = match m.repeated {
        Some(name) => format!("member \"{name}\" given more than once"),
        None => "invalid request".to_string(),
    };
    Message::Invalid {
        id,
        error: RpcError::new(INVALID_REQUEST, message),
    }
}

/// Decode one JSON value (a whole frame or one batch entry) as a JSON-RPC message.
pub fn decode_value(raw: &RawValue) -> Message<'_> {
    let text = raw.get();
    if !text.starts_with('{') {
        return Message::Invalid {
            id: None,
            error: RpcError::new(INVALID_REQUEST, "a JSON-RPC message must be an object"),
        };
    }
    decode_object(text)
}

fn decode_object(text: &str) -> Message<'_> {
    let env: Envelope<'_> = match serde_json::from_str(text) {
        Ok(env) => env,
        // Valid JSON that is no envelope: a member of it given twice.
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            return decode_repeated(text)
        }
        Err(e) => {
            return Message::Invalid {
                id: None,
                error: parse_failure(&e),
            }
        }
    };
    // A response (no method; a result or an error) is never answered, whatever else is wrong
    // with it: `"id": null` is what an error about an unreadable message carries, and answering
    // it would start two peers answering each other.
    if env.method.is_none() && (env.result.is_some() || env.error.is_some()) {
        return Message::Response {
            id: env.id.filter(|raw| is_valid_id(raw)),
        };
    }
    // The id must be a string or a number; anything else cannot be echoed back.
    let id = match env.id {
        None => None,
        Some(raw) => {
            if is_valid_id(raw) {
                Some(raw)
            } else {
                let why = match raw.get().starts_with('"') {
                    // (A lone surrogate's escape: no text, and not to be echoed back.)
                    true => "id must be a string or an integer: this string is not Unicode text",
                    false => "id must be a string or an integer",
                };
                return Message::Invalid {
                    id: None,
                    error: RpcError::new(INVALID_REQUEST, why),
                };
            }
        }
    };
    let version = env
        .jsonrpc
        .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok());
    if version.as_deref() != Some("2.0") {
        return Message::Invalid {
            id,
            error: RpcError::new(INVALID_REQUEST, "jsonrpc must be \"2.0\""),
        };
    }
    let method = match env.method {
        Some(raw) => match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
            Ok(m) => Some(m),
            Err(_) => {
                return Message::Invalid {
                    id,
                    error: RpcError::new(INVALID_REQUEST, "method must be a string"),
                }
            }
        },
        None => None,
    };
    if let Some(p) = env.params {
        let t = p.get().as_bytes()[0];
        if t != b'{' && t != b'[' {
            return Message::Invalid {
                id,
                error: RpcError::new(INVALID_REQUEST, "params must be an object or an array"),
            };
        }
    }
    match method {
        Some(method) => match id {
            Some(id) => Message::Request {
                id,
                method,
                params: env.params,
            },
            None => Message::Notification {
                method,
                params: env.params,
            },
        },
        None => Message::Invalid {
            id,
            error: RpcError::new(INVALID_REQUEST, "missing method"),
        },
    }
}

/// Whether a raw `id` can identify a request: a string, or an integer of at most 20 digits (MCP
/// ids are strings or integers; a fraction or an exponent such as `7E7620719` is refused, since
/// echoing it back would hand the client a number many JSON parsers reject as out of range). A
/// string's escapes must name characters: a lone surrogate (`"\ud800"`, which a raw value takes
/// as four hex digits) echoed back is JSON that strict parsers refuse.
pub fn is_valid_id(raw: &RawValue) -> bool {
    valid_id(raw.get())
}

fn valid_id(t: &str) -> bool {
    let b = t.as_bytes();
    if b.first() == Some(&b'"') {
        // Only an escaped string can hold a lone surrogate: decoded then, to be sure.
        return !b.contains(&b'\\') || serde_json::from_str::<String>(t).is_ok();
    }
    let t = b;
    let digits = t.strip_prefix(b"-").unwrap_or(t);
    (1..=20).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit)
}

/// Append `{"jsonrpc":"2.0","id":<id>,"result":` … `}` around what `body` writes.
pub fn write_result(out: &mut Vec<u8>, id: &str, body: impl FnOnce(&mut Vec<u8>)) {
    write_result_raw(out, id.as_bytes(), body)
}

/// [`write_result`] with the id's JSON text as bytes (a pending call keeps it so).
#[inline]
pub(crate) fn write_result_raw(out: &mut Vec<u8>, id: &[u8], body: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"result\":");
    body(out);
    out.push(b'}');
}

/// Append an error response; `id` None writes `null`.
pub fn write_error(out: &mut Vec<u8>, id: Option<&str>, error: &RpcError) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(error.code.to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    write_json_string(out, &error.message);
    out.extend_from_slice(b"}}");
}

/// Append `s` as a JSON string literal.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        // Nothing to escape (most strings): copied as it is.
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // serde_json's string escaping never fails when writing into a Vec.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Two raw ids name the same request when they are the same JSON value: the same text (`-0` is
/// `0`), or two strings of the same characters written with different escapes (`"a"` and
/// `"\u0061"`); `1` and `"1"` differ. Texts that differ are decoded only when both are strings
/// and one holds an escape (the usual ids, integers and plain strings, are compared as bytes).
#[cfg(any(test, feature = "hooks"))]
pub fn same_id(a: &str, b: &str) -> bool {
    find_id([a], b).is_some()
}

/// The position of the first of `ids` that names the same request as `id` (`same_id`), with
/// `id` read once however many it is compared with: a long id full of escapes costs one decoding
/// a search, not one a pending call.
pub(crate) fn find_id<'a>(ids: impl IntoIterator<Item = &'a str>, id: &str) -> Option<usize> {
    let probe = as_written(id);
    let probe_string = probe.starts_with('"');
    let probe_escaped = probe_string && probe.contains('\\');
    let mut decoded: Option<Option<String>> = None;
    ids.into_iter().position(|other| {
        let other = as_written(other);
        if other == probe {
            return true;
        }
        if !probe_string || !other.starts_with('"') || !(probe_escaped || other.contains('\\')) {
            return false;
        }
        let probe = decoded.get_or_insert_with(|| decode_string(probe));
        matches!((probe, decode_string(other)), (Some(a), Some(b)) if *a == b)
    })
}

/// An id's text as compared: without surrounding whitespace, `-0` (the integer 0, echoed as
/// sent) as `0`.
fn as_written(id: &str) -> &str {
    match id.trim() {
        "-0" => "0",
        t => t,
    }
}

/// A JSON string literal's string (`None` if it does not decode).
#[cold]
#[inline(never)]
fn decode_string(literal: &str) -> Option<String> {
    serde_json::from_str::<String>(literal).ok()
}

/// What the `tools/call` fast path read from a text frame ([`decode_fast`]).
#[derive(Debug)]
pub enum Decoded<'a, T> {
    /// A request for the expected method, read by the fast path: its params are already typed.
    Expected {
        /// The request id, its JSON text as sent (a string with its quotes, or an integer).
        id: &'a str,
        /// The params, as the caller's reader read them.
        params: T,
    },
    /// Anything else (another method, a batch, an unusual message, params the reader refused),
    /// read by the general decoder [`decode`], which reports any error precisely.
    Frame(Frame<'a>),
}

/// Decode one text frame, expecting a request for `method` whose params `read_params` reads.
///
/// The fast path: the expected request, written plainly (as clients write it: no escapes in its
/// strings), is read by a [`Scanner`] without serde, in one pass; `read_params` reads the params
/// where they stand. Anything else, and anything `read_params` gives up on (`None`), is read by
/// the general decoder ([`decode_limited`] with `max_batch`) instead, so there is one decoder and
/// one set of rules: the fast path only ever reads what the general decoder reads the same way.
pub(crate) fn decode_with<'a, T>(
    text: &'a str,
    method: &str,
    max_batch: usize,
    read_params: impl FnOnce(&mut Scanner<'a>) -> Option<T>,
) -> Decoded<'a, T> {
    match scan_request(text, method, read_params) {
        Some((id, params)) => Decoded::Expected { id, params },
        None => Decoded::Frame(decode_limited(text, max_batch)),
    }
}

/// The fast path with the params kept as their JSON text (for tests and fuzzing): the expected
/// request, read by the scanner, or the general decoder's reading of anything else.
///
/// ```
/// use claude_ide_bridge::hooks::jsonrpc::{decode_fast, Decoded, Frame, Message};
/// match decode_fast(r#"{"jsonrpc":"2.0","id":7,"method":"sum","params":[1, 2]}"#, "sum") {
///     Decoded::Expected { id, params } => assert_eq!((id, params), ("7", "[1, 2]")),
///     Decoded::Frame(f) => panic!("{f:?}"),
/// }
/// let other = decode_fast(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#, "sum");
/// assert!(matches!(other, Decoded::Frame(Frame::Single(Message::Request { .. }))));
/// ```
#[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
pub fn decode_fast<'a>(text: &'a str, method: &str) -> Decoded<'a, &'a str> {
    // Params by the general rule: an object or an array (the reader of a method's own params,
    // such as `tools/call`'s, asks for more).
    decode_with(text, method, usize::MAX, |s| match s.next_byte()? {
        b'{' | b'[' => s.value(),
        _ => None,
    })
}

/// The fast path's envelope: `jsonrpc` "2.0", an `id`, `method` equal to `method` and `params`,
/// in any order, each once; other members are passed over, except `result` and `error`. The id's
/// JSON text and what `read_params` read, or `None` to give up.
fn scan_request<'a, T>(
    text: &'a str,
    method: &str,
    read_params: impl FnOnce(&mut Scanner<'a>) -> Option<T>,
) -> Option<(&'a str, T)> {
    let mut s = Scanner::new(text);
    let (mut version, mut id, mut named, mut params) = (false, None, false, None);
    let mut read_params = Some(read_params);
    s.object_with_keys(&["jsonrpc", "id", "method", "params"], |s, key| {
        match key {
            // A wrong version or another method: the general decoder's business.
            "jsonrpc" if !version => version = s.known_str(&["2.0"]).is_some().then_some(true)?,
            "id" if id.is_none() => id = Some(s.value().filter(|t| valid_id(t))?),
            "method" if !named => named = (s.plain_str()? == method).then_some(true)?,
            "params" if params.is_none() => params = Some(read_params.take()?(s)?),
            "jsonrpc" | "id" | "method" | "params" | "result" | "error" => return None,
            _ => drop(s.value()?),
        }
        Some(())
    })?;
    s.end()?;
    match (version, named) {
        (true, true) => Some((id?, params?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(text: &str) -> Message<'_> {
        match decode(text) {
            Frame::Single(m) => m,
            Frame::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn request_notification_response() {
        match single(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#) {
            Message::Request { id, method, params } => {
                assert_eq!(id.get(), "\"a\"");
                assert_eq!(method, "tools/call");
                assert_eq!(params.unwrap().get(), r#"{"name":"x"}"#);
            }
            m => panic!("{m:?}"),
        }
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Message::Notification { .. }
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Message::Response { .. }
        ));
    }

    /// A member of the envelope given twice: a response is still never answered (it was refused,
    /// and answered with `id: null`), and a request is refused with its id when that is given
    /// once (it was lost). The fast path reads none of them.
    #[test]
    fn members_given_twice() {
        for text in [
            r#"{"jsonrpc":"2.0","id":7,"result":1,"result":2}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":7,"result":{}}"#,
        ] {
            match single(text) {
                Message::Response { id } => assert_eq!(id.map(RawValue::get), Some("7"), "{text}"),
                m => panic!("{text}: {m:?}"),
            }
        }
        let invalid = |text: &str| match single(text) {
            Message::Invalid { id, error } => (id.map(|i| i.get().to_owned()), error),
            m => panic!("{text}: {m:?}"),
        };
        let (id, e) = invalid(r#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"ping"}"#);
        assert_eq!(id.as_deref(), Some("3"));
        assert_eq!(e.code, INVALID_REQUEST);
        assert_eq!(e.message, r#"member "method" given more than once"#);
        // The id given twice is not known: refused without one.
        let (id, e) = invalid(r#"{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}"#);
        assert_eq!(
            (id, e.message.as_ref()),
            (None, r#"member "id" given more than once"#)
        );
        // A member outside the envelope repeated changes nothing (serde skips it), and an escaped
        // key names the same member.
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":3,"method":"ping","x":1,"x":2}"#),
            Message::Request { .. }
        ));
        let (id, _) = invalid(r#"{"jsonrpc":"2.0","id":3,"method":"ping","m\u0065thod":"ping"}"#);
        assert_eq!(id.as_deref(), Some("3"));
        // Text after the object: not JSON, as for any message.
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"} x"#,
            r#"{"jsonrpc":"2.0","id":7,"result":1,"result":2} x"#,
        ] {
            let (id, e) = invalid(text);
            assert_eq!((id, e.code), (None, PARSE_ERROR), "{text}");
        }
        let call = r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{}}"#;
        assert!(matches!(
            decode_fast(call, "tools/call"),
            Decoded::Frame(Frame::Single(Message::Invalid { id: None, .. }))
        ));
    }

    #[test]
    fn escaped_method_names_decode() {
        match single(r#"{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}"#) {
            Message::Request { method, .. } => assert_eq!(method, "ping"),
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn invalid_messages() {
        let code = |t: &str| match single(t) {
            Message::Invalid { error, .. } => error.code,
            m => panic!("{m:?}"),
        };
        assert_eq!(code("{"), PARSE_ERROR);
        assert_eq!(code("nope"), PARSE_ERROR);
        assert_eq!(code("42"), INVALID_REQUEST);
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#),
            INVALID_REQUEST
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        // The id is kept when it is readable, so the error reaches the right request, whatever
        // the wrong version is.
        for version in [r#""1.0""#, "2.0", "null", "[]", r#"{"v":2}"#] {
            let text = format!(r#"{{"jsonrpc":{version},"id":9,"method":"ping"}}"#);
            match single(&text) {
                Message::Invalid { id, error } => {
                    assert_eq!(id.map(RawValue::get), Some("9"), "{text}");
                    assert_eq!(error.code, INVALID_REQUEST, "{text}");
                }
                m => panic!("{text}: {m:?}"),
            }
        }
        // An escaped "2.0" is "2.0".
        assert!(matches!(
            single(r#"{"jsonrpc":"2\u002e0","id":9,"method":"ping"}"#),
            Message::Request { .. }
        ));
    }

    #[test]
    fn ids_are_strings_or_integers() {
        let code = |t: &str| match single(t) {
            Message::Invalid { error, .. } => Some(error.code),
            _ => None,
        };
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            Some(INVALID_REQUEST)
        );
        // Found by the jsonrpc fuzz target: echoed back, it is out of range for most parsers.
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":7E7620719,"method":"ping"}"#),
            Some(INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":123456789012345678901,"method":"ping"}"#),
            Some(INVALID_REQUEST)
        );
        // Found by a longer fuzz run: a lone surrogate's escape, echoed back, is JSON strict
        // parsers refuse; a pair, and other escapes, name characters.
        for lone in [r#""\ud800""#, r#""a\udc00""#, r#""\ud800\u0041""#] {
            let t = format!(r#"{{"jsonrpc":"2.0","id":{lone},"method":"ping"}}"#);
            assert_eq!(code(&t), Some(INVALID_REQUEST), "{t}");
            // Said to be a string that is no text, not "not a string".
            let Message::Invalid { error, .. } = single(&t) else {
                panic!("{t}");
            };
            assert!(
                error.message.contains("not Unicode text"),
                "{}",
                error.message
            );
        }
        for fine in [r#""\ud83d\ude00""#, r#""a\"b\\c\u0041""#] {
            let t = format!(r#"{{"jsonrpc":"2.0","id":{fine},"method":"ping"}}"#);
            assert_eq!(code(&t), None, "{t}");
        }
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":-12,"method":"ping"}"#), None);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a b","method":"ping"}"#),
            None
        );
    }

    /// `notifications/cancelled` finds a call by its id's value: a string is the same whatever
    /// escapes write its characters; a string and an integer are never the same.
    #[test]
    fn ids_are_the_same_when_their_values_are() {
        for (a, b) in [
            ("1", "1"),
            (" 7", "7 "),
            ("-0", "0"),
            (r#""a""#, r#""a""#),
            (r#""\u0061""#, r#""a""#),
            (r#""a""#, r#""\u0061""#),
            (r#""\u0061\/""#, r#""a\u002F""#),
            (r#""\ud83d\ude00""#, r#""😀""#),
        ] {
            assert!(same_id(a, b), "{a} {b}");
        }
        for (a, b) in [
            ("1", r#""1""#),
            (r#""\u0031""#, "1"),
            ("1", "2"),
            (r#""\u0061""#, r#""b""#),
            (r#""a\\""#, r#""a""#),
        ] {
            assert!(!same_id(a, b), "{a} {b}");
        }
    }

    /// A search among pending ids finds the first with the same value, the probe's escapes or
    /// the pending ids' read alike.
    #[test]
    fn find_id_finds_the_first_of_the_same_value() {
        let pending = ["1", r#""b""#, r#""\u0061""#, r#""a""#, "-0"];
        assert_eq!(find_id(pending, r#""a""#), Some(2));
        assert_eq!(find_id(pending, r#""\u0062""#), Some(1));
        assert_eq!(find_id(pending, "0"), Some(4));
        assert_eq!(find_id(pending, r#""\u0031""#), None);
        assert_eq!(find_id(pending, r#""\u0063""#), None);
        assert_eq!(find_id(pending, r#""\x""#), None);
        assert_eq!(find_id([], "1"), None);
    }

    #[test]
    fn batches() {
        match decode(r#" [ {"jsonrpc":"2.0","id":1,"method":"ping"}, 5 ]"#) {
            Frame::Batch(items) => {
                assert_eq!(items.len(), 2);
                assert!(matches!(decode_value(items[0]), Message::Request { .. }));
                assert!(matches!(decode_value(items[1]), Message::Invalid { .. }));
            }
            Frame::Single(m) => panic!("{m:?}"),
        }
        assert!(matches!(
            decode("[1,"),
            Frame::Single(Message::Invalid {
                error: RpcError {
                    code: PARSE_ERROR,
                    ..
                },
                ..
            })
        ));
        // A huge batch keeps one entry more than the limit, enough to refuse it; the rest are
        // read as JSON and counted out (it kept all 1,000,000 before, 16 MB for an answer of
        // one error).
        let huge = format!("[{}0]", "0,".repeat(999_999));
        match decode_limited(&huge, 64) {
            Frame::Batch(items) => assert_eq!(items.len(), 65),
            Frame::Single(m) => panic!("{m:?}"),
        }
        match decode_limited("[1, 2]", 64) {
            Frame::Batch(items) => assert_eq!(items.len(), 2),
            Frame::Single(m) => panic!("{m:?}"),
        }
        // What is not kept is still read: a syntax error past the kept entries is one.
        let broken = format!("[{}x]", "0,".repeat(100));
        assert!(matches!(
            decode_limited(&broken, 64),
            Frame::Single(Message::Invalid {
                error: RpcError {
                    code: PARSE_ERROR,
                    ..
                },
                ..
            })
        ));
    }

    #[test]
    fn responses_are_never_answered() {
        for text in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
            r#"{"id":3,"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1.5,"result":1}"#,
        ] {
            assert!(
                matches!(single(text), Message::Response { .. }),
                "{text}: {:?}",
                single(text)
            );
        }
        match single(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#) {
            Message::Response { id } => assert_eq!(id.map(|r| r.get()), Some(r#""a""#)),
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn writing() {
        let mut out = Vec::new();
        write_result(&mut out, "7", |o| o.extend_from_slice(b"{}"));
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        out.clear();
        write_error(
            &mut out,
            None,
            &RpcError::new(PARSE_ERROR, "parse \"error\""),
        );
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse \"error\""}}"#
        );
    }
}
