//! The base protocol's framing: `Content-Length: N\r\n\r\n` then `N` bytes of JSON.
//!
//! Pure code, no IO: [`Decoder::push`] takes whatever bytes a read returned and [`Decoder::next_frame`] yields
//! the complete bodies. Both sizes are bounded: a header block longer than [`Decoder::MAX_HEADER_BYTES`] or a
//! `Content-Length` over the configured body limit is an error, and so is a header block that is not one (a
//! malformed line, a missing or unparsable `Content-Length`). A body is gathered in a buffer of its own, which
//! grows with the bytes that arrive (never to the length a header announces before they do, never past it) and
//! is handed out as the frame: a large message is not copied, and its memory is not held once it is read.
//! Output between frames that does not start a header (a log line a server prints on stdout, a wrapper
//! script's echo) is skipped, as far as the next line's end or the next `Content-Length:`/`Content-Type:`, and
//! told ([`Decoder::take_skipped`]); more than [`Decoder::MAX_SKIPPED_BYTES`] of it between two frames is an
//! error. A frame over the body limit, up to [`Decoder::MAX_PASSED_OVER_FACTOR`] times it, is passed over
//! as it arrives, without being held (its first bytes kept, to tell which request it answers:
//! [`Decoder::take_passed_over`]), and the frames after it are read as before: a server that answers
//! a big file's formatting with a message too large to take is not taken for a broken stream. An
//! error is final: the decoder refuses every later frame too, since the stream can no longer be
//! trusted to be in step.

use std::fmt;

/// Why a stream of frames cannot be read any further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The header block (everything before `\r\n\r\n`) is longer than [`Decoder::MAX_HEADER_BYTES`].
    HeaderTooLong,
    /// A header line is not `Name: value` in ASCII.
    BadHeader(String),
    /// The header block has no `Content-Length`.
    MissingLength,
    /// `Content-Length` is not a decimal number, or appears twice with different values.
    BadLength(String),
    /// `Content-Length` is over what is passed over ([`Decoder::MAX_PASSED_OVER_FACTOR`] times
    /// the body limit).
    TooLarge {
        /// The announced length.
        length: u64,
        /// The limit.
        limit: usize,
    },
    /// More than [`Decoder::MAX_SKIPPED_BYTES`] of output that is not a frame came between two
    /// frames.
    NotFrames {
        /// The start of what was skipped.
        start: String,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::HeaderTooLong => write!(
                f,
                "header block longer than {} bytes (not a Content-Length frame)",
                Decoder::MAX_HEADER_BYTES
            ),
            FrameError::BadHeader(line) => write!(f, "malformed header line {line:?}"),
            FrameError::MissingLength => f.write_str("header block without Content-Length"),
            FrameError::BadLength(value) => write!(f, "bad Content-Length {value:?}"),
            FrameError::TooLarge { length, limit } => {
                write!(
                    f,
                    "message of {length} bytes is over the limit of {limit} bytes"
                )
            }
            FrameError::NotFrames { start } => write!(
                f,
                "more than {} bytes of output that is not a Content-Length frame (it began {start:?})",
                Decoder::MAX_SKIPPED_BYTES
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Splits a byte stream into message bodies, holding at most one header block plus one body.
///
/// ```
/// use claude_ide_bridge_lsp::codec::{encode, Decoder};
/// let mut wire = encode(br#"{"jsonrpc":"2.0","method":"a"}"#);
/// wire.extend(encode(b"{}"));
/// let mut decoder = Decoder::new(1024);
/// decoder.push(&wire[..7]);
/// assert_eq!(decoder.next_frame(), Ok(None));
/// decoder.push(&wire[7..]);
/// assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&br#"{"jsonrpc":"2.0","method":"a"}"#[..]));
/// assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
/// assert_eq!(decoder.next_frame(), Ok(None));
/// ```
#[derive(Debug)]
pub struct Decoder {
    /// Header blocks, and what came after the body being gathered.
    buf: Vec<u8>,
    /// Where the unconsumed bytes of `buf` start.
    start: usize,
    /// The body length of the frame whose header has been read.
    body: Option<usize>,
    /// That body, as far as it has come.
    gathered: Vec<u8>,
    max_body: usize,
    failed: Option<FrameError>,
    /// Bytes skipped since the last frame (the bound is on these).
    skipped: usize,
    /// Bytes skipped since the last [`Decoder::take_skipped`], and the start of what they said.
    told: usize,
    sample: Vec<u8>,
    /// The start of what was skipped since the last frame (told by [`FrameError::NotFrames`],
    /// whatever was taken for the log meanwhile).
    began: Vec<u8>,
    /// The frame over the body limit being passed over: its length, the bytes of it still to
    /// come, its first [`Decoder::PASSED_OVER_START`] bytes, and its top-level members as far
    /// as read.
    over: Option<(u64, u64, Vec<u8>, TopLevel)>,
    /// The frames passed over and not yet taken ([`Decoder::take_passed_over`]).
    passed: Vec<PassedOver>,
}

/// A frame over the body limit that was passed over ([`Decoder::take_passed_over`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    /// Its length, as its header announced it.
    pub length: u64,
    /// Its first bytes (at most [`Decoder::PASSED_OVER_START`]).
    pub start: Vec<u8>,
    /// The request it answers: its top-level `id` when it is an integer and the frame has a
    /// top-level `result` or `error` and no `method` (a response, wherever its members came:
    /// gopls writes `id` last), read as the frame went by.
    pub answers: Option<i64>,
    /// The server's own request it is: its top-level integer `id` when it has a top-level
    /// `method`, to be answered with an error (else the server waits for an answer for good).
    pub request: Option<i64>,
}

/// The top-level members of a JSON object read a byte at a time, as far as a response's
/// `id` goes: which keys came, and an integer `id`'s digits. Nothing is held but a key's first
/// bytes and the digits.
#[derive(Debug, Clone, Default)]
struct TopLevel {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Reading a top-level key (its first bytes), or expecting one.
    key: Option<Vec<u8>>,
    expect_key: bool,
    /// The last top-level key read.
    last_key: Vec<u8>,
    /// The `id`'s digits, while its value is read.
    digits: Option<Vec<u8>>,
    id: Option<i64>,
    method: bool,
    answer: bool,
}

impl TopLevel {
    fn read(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    match key.as_slice() {
                        b"method" => self.method = true,
                        b"result" | b"error" => self.answer = true,
                        _ => {}
                    }
                    self.last_key = key;
                }
                return;
            }
            if let Some(key) = self.key.as_mut().filter(|k| k.len() < 8) {
                key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key = Some(Vec::new());
                    self.expect_key = false;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.expect_key = self.depth == 1 && b == b'{';
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 && self.last_key == b"id" => self.digits = Some(Vec::new()),
            b',' if self.depth == 1 => {
                self.end_value();
                self.expect_key = true;
            }
            // (A float's or an exponent's characters too: no integer, no id.)
            b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' if self.depth == 1 => {
                if let Some(d) = self.digits.as_mut().filter(|d| d.len() < 24) {
                    d.push(b);
                }
            }
            _ => {}
        }
    }

    fn end_value(&mut self) {
        if let Some(d) = self.digits.take() {
            self.id = std::str::from_utf8(&d).ok().and_then(|d| d.parse().ok());
        }
        self.last_key.clear();
    }

    /// The request the object answers, once read whole.
    fn answers(&self) -> Option<i64> {
        (self.answer && !self.method).then_some(self.id).flatten()
    }

    /// The object's own request id, once read whole: a `method` with an integer `id`.
    fn request(&self) -> Option<i64> {
        self.method.then_some(self.id).flatten()
    }
}

impl Decoder {
    /// The longest header block accepted, `\r\n\r\n` included. Real servers send one or two short lines.
    pub const MAX_HEADER_BYTES: usize = 1024;

    /// A decoder refusing bodies over `max_body` bytes.
    pub fn new(max_body: usize) -> Decoder {
        Decoder {
            buf: Vec::new(),
            start: 0,
            body: None,
            gathered: Vec::new(),
            max_body,
            failed: None,
            skipped: 0,
            told: 0,
            sample: Vec::new(),
            began: Vec::new(),
            over: None,
            passed: Vec::new(),
        }
    }

    /// How many times the body limit a frame may be and still be passed over; a longer one is
    /// [`FrameError::TooLarge`] (a stream announcing it is not read on for good).
    pub const MAX_PASSED_OVER_FACTOR: u64 = 32;

    /// How much of a frame passed over is kept ([`PassedOver::start`]).
    pub const PASSED_OVER_START: usize = 256;

    /// The frames over the body limit passed over since the last call, in order.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::codec::{encode, Decoder};
    /// let mut decoder = Decoder::new(8);
    /// decoder.push(&encode(br#"{"id":7,"result":"far too long"}"#));
    /// decoder.push(&encode(b"{}"));
    /// assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
    /// let passed = decoder.take_passed_over();
    /// assert_eq!(passed[0].length, 32);
    /// assert!(passed[0].start.starts_with(br#"{"id":7,"#));
    /// assert_eq!(passed[0].answers, Some(7));
    /// assert!(decoder.take_passed_over().is_empty());
    /// ```
    pub fn take_passed_over(&mut self) -> Vec<PassedOver> {
        std::mem::take(&mut self.passed)
    }

    /// Takes what `bytes` hold of the frame being passed over; returns the rest.
    fn pass_over<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let Some((length, left, start, top)) = &mut self.over else {
            return bytes;
        };
        let take = (*left).min(bytes.len() as u64) as usize;
        let room = Self::PASSED_OVER_START.saturating_sub(start.len());
        start.extend_from_slice(&bytes[..take.min(room)]);
        top.read(&bytes[..take]);
        *left -= take as u64;
        if *left == 0 {
            self.passed.push(PassedOver {
                length: *length,
                start: std::mem::take(start),
                answers: top.answers(),
                request: top.request(),
            });
            self.over = None;
        }
        &bytes[take..]
    }

    /// The most output that is not a frame skipped between two frames: past it the stream is
    /// taken for something other than a language server's ([`FrameError::NotFrames`]).
    pub const MAX_SKIPPED_BYTES: usize = 64 * 1024;

    /// The most the buffer of headers keeps between frames: about one read's bytes (the client
    /// reads 16 KiB at a time).
    const KEPT_BYTES: usize = 16 * 1024;

    /// How much of the skipped output [`FrameError::NotFrames`] tells.
    const BEGAN_BYTES: usize = 80;

    /// How much of the skipped output [`Decoder::take_skipped`] tells.
    const SAMPLE_BYTES: usize = 200;

    /// The output skipped since the last call, other than blank lines: how many bytes, and the
    /// start of it (lossy UTF-8). `None` when nothing was.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::codec::{encode, Decoder};
    /// let mut decoder = Decoder::new(1024);
    /// decoder.push(b"server 1.2 starting\n");
    /// decoder.push(&encode(b"{}"));
    /// assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
    /// assert_eq!(decoder.take_skipped(), Some((20, "server 1.2 starting\n".to_owned())));
    /// assert_eq!(decoder.take_skipped(), None);
    /// ```
    pub fn take_skipped(&mut self) -> Option<(usize, String)> {
        let told = std::mem::take(&mut self.told);
        let sample = std::mem::take(&mut self.sample);
        (!sample.is_empty()).then(|| (told, String::from_utf8_lossy(&sample).into_owned()))
    }

    /// Appends bytes read from the stream. After an error, bytes are dropped.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if let Some(n) = self.body {
            let take = (n - self.gathered.len()).min(bytes.len());
            gather(&mut self.gathered, n, &bytes[..take]);
            bytes = &bytes[take..];
        }
        bytes = self.pass_over(bytes);
        if bytes.is_empty() {
            return;
        }
        if self.start > 0 && (self.start >= self.buf.len() / 2 || self.start > 64 * 1024) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// How many bytes are buffered and not yet returned: at most one header block plus one body (and what a
    /// single read appended after them).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
            + self.gathered.len()
            + self.over.as_ref().map_or(0, |o| o.2.len())
    }

    /// Whether more bytes are wanted right now: false once a complete frame is waiting to be taken. A
    /// reader that takes every frame after each [`Decoder::push`] (as the client's does) need not
    /// ask: the buffer is bounded by the message limit either way.
    pub fn wants_more(&self) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let pending = &self.buf[self.start..];
        match self.body {
            Some(n) => self.gathered.len() < n,
            None if self.over.is_some() => true,
            None => find_blank_line(pending).is_none() && pending.len() < Self::MAX_HEADER_BYTES,
        }
    }

    /// The next complete body, `Ok(None)` when more bytes are needed, or the error that ends the stream.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        match self.step() {
            Ok(frame) => Ok(frame),
            Err(err) => {
                self.failed = Some(err.clone());
                self.buf = Vec::new();
                self.gathered = Vec::new();
                self.start = 0;
                Err(err)
            }
        }
    }

    /// Passes over what cannot start a header block, counting it; `false` when more bytes are
    /// needed to tell.
    fn skip(&mut self) -> Result<bool, FrameError> {
        loop {
            let pending = &self.buf[self.start..];
            let n = match not_a_header(pending) {
                Skip::Header => return Ok(true),
                Skip::NeedMore => return Ok(false),
                Skip::Bytes(n) => n,
            };
            let junk = &pending[..n];
            if junk.iter().any(|b| !b.is_ascii_whitespace()) {
                let room = Self::SAMPLE_BYTES.saturating_sub(self.sample.len());
                self.sample.extend_from_slice(&junk[..n.min(room)]);
                let room = Self::BEGAN_BYTES.saturating_sub(self.began.len());
                self.began.extend_from_slice(&junk[..n.min(room)]);
                self.told += n;
            }
            self.skipped += n;
            self.start += n;
            if self.skipped > Self::MAX_SKIPPED_BYTES {
                let start = String::from_utf8_lossy(&self.began);
                return Err(FrameError::NotFrames {
                    start: start.into_owned(),
                });
            }
        }
    }

    fn step(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        while self.body.is_none() {
            if self.over.is_some() {
                let buf = std::mem::take(&mut self.buf);
                let rest = self.pass_over(&buf[self.start..]).len();
                self.start = buf.len() - rest;
                self.buf = buf;
                if self.over.is_some() {
                    return Ok(None);
                }
            }
            if !self.skip()? {
                return Ok(None);
            }
            let pending = &self.buf[self.start..];
            let Some(end) = find_blank_line(pending) else {
                if pending.len() >= Self::MAX_HEADER_BYTES {
                    return Err(FrameError::HeaderTooLong);
                }
                return Ok(None);
            };
            if end > Self::MAX_HEADER_BYTES {
                return Err(FrameError::HeaderTooLong);
            }
            let length = parse_headers(&pending[..end - 4])?;
            let most = (self.max_body as u64).saturating_mul(Self::MAX_PASSED_OVER_FACTOR);
            if length > most {
                return Err(FrameError::TooLarge {
                    length,
                    limit: self.max_body,
                });
            }
            if length > self.max_body as u64 {
                self.start += end;
                self.skipped = 0;
                self.began.clear();
                self.over = Some((length, length, Vec::new(), TopLevel::default()));
                continue;
            }
            let n = length as usize;
            self.start += end;
            self.body = Some(n);
            self.skipped = 0;
            self.began.clear();
            // What came of the body with its header moves to the body's own buffer.
            let take = (self.buf.len() - self.start).min(n);
            self.gathered = Vec::new();
            gather(
                &mut self.gathered,
                n,
                &self.buf[self.start..self.start + take],
            );
            self.start += take;
        }
        let n = self.body.expect("set above");
        if self.gathered.len() < n {
            return Ok(None);
        }
        self.body = None;
        if self.start == self.buf.len() {
            // What several frames at once took is not held for the server's life.
            if self.buf.capacity() > Self::KEPT_BYTES {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
            self.start = 0;
        }
        Ok(Some(std::mem::take(&mut self.gathered)))
    }
}

/// The header names a block may start with (lower case): the two the protocol defines.
const HEADER_NAMES: [&[u8]; 2] = [b"content-length:", b"content-type:"];

/// What the start of the pending bytes is, between frames.
enum Skip {
    /// A header block starts here.
    Header,
    /// These many bytes are not a frame: up to the end of their line, or to where a header starts.
    Bytes(usize),
    /// Too few bytes to tell.
    NeedMore,
}

/// Appends `bytes` to the body `gathered`, of `n` bytes in all: its buffer grows as a `Vec`'s
/// does, by doubling, but never past `n` (only the bytes that came are trusted to come).
fn gather(gathered: &mut Vec<u8>, n: usize, bytes: &[u8]) {
    let needed = gathered.len() + bytes.len();
    if needed > gathered.capacity() {
        let room = needed.max(2 * gathered.capacity()).min(n);
        gathered.reserve_exact(room - gathered.len());
    }
    gathered.extend_from_slice(bytes);
}

fn starts_with_ignore_case(bytes: &[u8], name: &[u8]) -> bool {
    bytes.len() >= name.len() && bytes[..name.len()].eq_ignore_ascii_case(name)
}

/// Whether `bytes` start a header block (a header name of the protocol), and if not, how many
/// of them to skip: the rest of the line, or what comes before a header name within it (a log
/// line without its newline, then a frame), keeping back a last few bytes that may be the start
/// of a name.
fn not_a_header(bytes: &[u8]) -> Skip {
    if bytes.is_empty() {
        return Skip::NeedMore;
    }
    let is_prefix_of_a_name = |tail: &[u8]| {
        HEADER_NAMES
            .iter()
            .any(|name| tail.len() < name.len() && name[..tail.len()].eq_ignore_ascii_case(tail))
    };
    if HEADER_NAMES
        .iter()
        .any(|name| starts_with_ignore_case(bytes, name))
    {
        return Skip::Header;
    }
    if is_prefix_of_a_name(bytes) {
        return Skip::NeedMore;
    }
    let line_end = bytes.iter().position(|&b| b == b'\n').map(|i| i + 1);
    let scan = line_end.unwrap_or(bytes.len());
    let name_at = (1..scan).find(|&i| {
        HEADER_NAMES
            .iter()
            .any(|name| starts_with_ignore_case(&bytes[i..], name))
    });
    if let Some(i) = name_at {
        return Skip::Bytes(i);
    }
    if let Some(end) = line_end {
        return Skip::Bytes(end);
    }
    // No line's end yet: all of it but a tail that may start a name.
    let keep = (1..bytes.len().min(16))
        .rev()
        .find(|&k| is_prefix_of_a_name(&bytes[bytes.len() - k..]))
        .unwrap_or(0);
    match bytes.len() - keep {
        0 => Skip::NeedMore,
        n => Skip::Bytes(n),
    }
}

/// The index just past the first `\r\n\r\n`.
fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

fn lossy_prefix(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned()
}

/// Reads the header lines (without the final blank line) and returns the `Content-Length`.
fn parse_headers(block: &[u8]) -> Result<u64, FrameError> {
    let mut length = None;
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line)
            .ok()
            .filter(|t| t.is_ascii())
            .ok_or_else(|| FrameError::BadHeader(lossy_prefix(line)))?;
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| FrameError::BadHeader(text.chars().take(40).collect()))?;
        if name.is_empty() || name.contains(' ') {
            return Err(FrameError::BadHeader(text.chars().take(40).collect()));
        }
        if name.eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            let n: u64 = value
                .parse()
                .ok()
                .filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| FrameError::BadLength(value.chars().take(40).collect()))?;
            if length.is_some_and(|old| old != n) {
                return Err(FrameError::BadLength(value.to_owned()));
            }
            length = Some(n);
        }
        // Content-Type and any other header are accepted and ignored (the body is always UTF-8 JSON).
    }
    length.ok_or(FrameError::MissingLength)
}

/// Frames one body: `Content-Length: N\r\n\r\n` followed by the body.
pub fn encode(body: &[u8]) -> Vec<u8> {
    let mut out = header(body.len());
    out.reserve_exact(body.len());
    out.extend_from_slice(body);
    out
}

/// The header block of a body of `len` bytes.
pub(crate) fn header(len: usize) -> Vec<u8> {
    format!("Content-Length: {len}\r\n\r\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_frames(d: &mut Decoder) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        while let Some(f) = d.next_frame()? {
            out.push(f);
        }
        Ok(out)
    }

    #[test]
    fn headers_in_any_case_with_content_type() {
        let mut d = Decoder::new(100);
        d.push(b"content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}");
        assert_eq!(all_frames(&mut d).unwrap(), vec![b"{}".to_vec()]);
    }

    /// A log line before a header is skipped and told, in whatever pieces it comes; so is one
    /// without its newline, up to the header that follows it; blank lines are skipped untold.
    #[test]
    fn output_that_is_not_a_frame_is_skipped_and_told() {
        let mut wire = b"Starting server v1.2\r\n".to_vec();
        wire.extend(encode(b"{}"));
        wire.extend(b"\r\n\n");
        wire.extend(encode(b"[]"));
        wire.extend(b"progress 50%... content-type is json ");
        wire.extend(encode(b"1"));
        for cut in 0..wire.len() {
            let mut d = Decoder::new(100);
            d.push(&wire[..cut]);
            let mut got = all_frames(&mut d).unwrap();
            d.push(&wire[cut..]);
            got.extend(all_frames(&mut d).unwrap());
            assert_eq!(got, [&b"{}"[..], b"[]", b"1"], "cut at {cut}");
            assert_eq!(d.buffered(), 0);
        }
        let mut d = Decoder::new(100);
        d.push(&wire);
        all_frames(&mut d).unwrap();
        let (n, said) = d.take_skipped().unwrap();
        assert_eq!(n, 22 + 37, "{said:?}");
        assert_eq!(
            said,
            "Starting server v1.2\r\nprogress 50%... content-type is json "
        );
        assert_eq!(d.take_skipped(), None);
    }

    /// Past the budget between two frames, output that is not frames ends the stream, saying
    /// what it began with; a frame in between starts the count again.
    #[test]
    fn too_much_output_that_is_not_frames_is_an_error() {
        let line = b"log: something happened, and more was said about it\n";
        let lines_in_budget = Decoder::MAX_SKIPPED_BYTES / line.len();
        let mut d = Decoder::new(100);
        for _ in 0..3 {
            for _ in 0..lines_in_budget {
                d.push(line);
                assert_eq!(d.next_frame(), Ok(None));
            }
            d.push(&encode(b"{}"));
            assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
        }
        // Never more than a line held while skipping.
        assert!(d.buffered() <= line.len());
        let mut err = None;
        'lines: for _ in 0..=lines_in_budget {
            // Read in two parts, and told as it goes, as the reader tells it after each read:
            // the error still tells where the run began.
            for part in [&line[..10], &line[10..]] {
                d.push(part);
                if let Err(e) = d.next_frame() {
                    err = Some(e);
                    break 'lines;
                }
                d.take_skipped();
            }
        }
        let err = err.expect("an error past the budget");
        assert!(
            matches!(&err, FrameError::NotFrames { start } if start.starts_with("log: something"))
        );
        assert!(
            err.to_string()
                .contains("65536 bytes of output that is not a Content-Length frame"),
            "{err}"
        );
        d.push(&encode(b"{}"));
        assert_eq!(d.next_frame(), Err(err));
        assert_eq!(d.buffered(), 0);
        // Endless output without a newline is bounded the same way.
        let mut d = Decoder::new(100);
        let mut failed = false;
        for _ in 0..100 {
            d.push(&[b'x'; 1000]);
            assert!(d.buffered() <= 1000);
            if d.next_frame().is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }

    /// Inside a header block, a line that is not a header is still an error.
    #[test]
    fn a_malformed_line_inside_a_header_block_is_an_error() {
        let mut d = Decoder::new(100);
        d.push(b"Content-Length: 2\r\nnot a header\r\n\r\n{}");
        assert!(matches!(d.next_frame(), Err(FrameError::BadHeader(_))));
    }

    /// The request a passed-over frame answers, read from its top-level members wherever they
    /// come: `id` first (vscode-jsonrpc, lsp-server, clangd) or last (gopls); never a server's
    /// own request (`method`, whichever comes first), nor an `id` inside the result.
    #[test]
    fn a_passed_over_frame_answers_the_request_of_its_top_level_id() {
        let answers = |body: &str| {
            let mut d = Decoder::new(16);
            // Cut anywhere: read a byte at a time.
            for b in encode(body.as_bytes()) {
                d.push(&[b]);
                while d.next_frame().unwrap().is_some() {}
            }
            let passed = d.take_passed_over();
            assert_eq!(passed.len(), 1, "{body}");
            passed[0].answers
        };
        assert_eq!(
            answers(r#"{"jsonrpc":"2.0","id":17,"result":[{"a":1}]}"#),
            Some(17)
        );
        assert_eq!(
            answers(r#"{"jsonrpc":"2.0","result":[{"id":3,"x":"}"}],"id":5}"#),
            Some(5)
        );
        assert_eq!(
            answers(r#"{ "id" : -2 , "error" : {"code":1,"message":"m"} }"#),
            Some(-2)
        );
        assert_eq!(
            answers(r#"{"jsonrpc":"2.0","id":4,"method":"workspace/applyEdit","params":{}}"#),
            None
        );
        assert_eq!(
            answers(r#"{"method":"x","id":4,"params":{"result":1}}"#),
            None
        );
        assert_eq!(
            answers(
                r#"{"jsonrpc":"2.0","method":"textDocument/publishDiagnostics","params":{"id":1}}"#
            ),
            None
        );
        assert_eq!(
            answers(r#"{"id":"a1","result":"a string id is no request of ours"}"#),
            None
        );
        assert_eq!(
            answers(r#"{"result":"\"id\":9, \"quoted\"","id":8}"#),
            Some(8)
        );
        assert_eq!(answers(r#"{"idx":3,"result":1}"#), None);
        // An id that is no integer is no request of the bridge's (it was read as its digits).
        assert_eq!(answers(r#"{"id":1e3,"result":1}"#), None);
        assert_eq!(answers(r#"{"id":2.0,"result":1}"#), None);
    }

    #[test]
    fn wrong_lengths() {
        for (wire, want) in [
            (&b"Content-Length: x1\r\n\r\n"[..], "bad"),
            (b"Content-Length: -1\r\n\r\n", "bad"),
            (b"Content-Length: +1\r\n\r\n", "bad"),
            (b"Content-Length: 99999999999999999999999\r\n\r\n", "bad"),
            (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n", "bad"),
            (b"Content-Type: a\r\n\r\n", "missing"),
            (b"Content-Length: 3201\r\n\r\n", "large"),
            (b"Content-Length: 1\r\nContent Length: 1\r\n\r\n", "header"),
            (b"Content-Type: a\r\nContent-Length 1\r\n\r\n", "header"),
        ] {
            let mut d = Decoder::new(100);
            d.push(wire);
            let err = d.next_frame().unwrap_err();
            let kind = match err {
                FrameError::BadLength(_) => "bad",
                FrameError::MissingLength => "missing",
                FrameError::TooLarge { .. } => "large",
                FrameError::BadHeader(_) => "header",
                FrameError::HeaderTooLong => "long",
                FrameError::NotFrames { .. } => "not frames",
            };
            assert_eq!(kind, want, "{:?}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn endless_header_is_bounded() {
        let mut d = Decoder::new(100);
        d.push(b"Content-Type: ");
        for _ in 0..100 {
            if !d.wants_more() {
                break;
            }
            d.push(&[b'a'; 64]);
            if d.next_frame().is_err() {
                break;
            }
        }
        assert_eq!(d.next_frame(), Err(FrameError::HeaderTooLong));
        assert!(!d.wants_more());
    }

    #[test]
    fn a_body_is_gathered_as_it_comes_and_handed_out_whole() {
        let body: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut wire = encode(&body);
        wire.extend(encode(b"{}"));
        let mut d = Decoder::new(1 << 20);
        d.push(&wire[..1000]);
        assert_eq!(d.next_frame(), Ok(None));
        // What came is held, not the length the header announced.
        assert!(d.gathered.capacity() < 2000, "{}", d.gathered.capacity());
        for piece in wire[1000..].chunks(64 * 1024) {
            d.push(piece);
            assert!(d.gathered.capacity() <= body.len());
        }
        let frame = d.next_frame().unwrap().unwrap();
        assert!(frame == body, "the body as sent");
        assert!(frame.capacity() <= body.len());
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
        // Nothing of the large message is held after it.
        assert_eq!(d.buffered(), 0);
        assert_eq!(d.gathered.capacity(), 0);
        assert!(d.buf.capacity() <= Decoder::KEPT_BYTES);
    }

    #[test]
    fn a_short_body_waits_and_the_next_header_is_read_as_body() {
        // A Content-Length one too long swallows the next frame's first byte: the stream is out of step.
        let mut d = Decoder::new(100);
        let mut wire = b"Content-Length: 3\r\n\r\n{}".to_vec();
        wire.extend(encode(b"{}"));
        d.push(&wire);
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"{}C"[..]));
        // What is left, "ontent-Length: 2" and its body, is not a frame: skipped and told.
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(
            d.take_skipped(),
            Some((20, "ontent-Length: 2\r\n{}".to_owned()))
        );
        d.push(&encode(b"[]"));
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"[]"[..]));
    }

    proptest! {
        #[test]
        fn split_invariance(bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..8),
                            cuts in prop::collection::vec(0usize..2000, 0..20)) {
            let wire: Vec<u8> = bodies.iter().flat_map(|b| encode(b)).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wire.len())).collect();
            cuts.push(0);
            cuts.push(wire.len());
            cuts.sort_unstable();
            let mut d = Decoder::new(200);
            let mut got = Vec::new();
            for pair in cuts.windows(2) {
                d.push(&wire[pair[0]..pair[1]]);
                got.extend(all_frames(&mut d).unwrap());
                // Never more than one header block plus one body is held, however the bytes arrive.
                prop_assert!(d.buffered() <= Decoder::MAX_HEADER_BYTES + 200 + wire.len().min(2000));
            }
            prop_assert_eq!(got, bodies);
            prop_assert_eq!(d.buffered(), 0);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_stay_bounded(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20)) {
            let mut d = Decoder::new(256);
            for chunk in chunks {
                // A reader only pushes while the decoder wants more.
                if !d.wants_more() {
                    if d.next_frame().is_err() { break; }
                    continue;
                }
                d.push(&chunk);
                loop {
                    match d.next_frame() {
                        Ok(Some(f)) => prop_assert!(f.len() <= 256),
                        Ok(None) => break,
                        Err(_) => break,
                    }
                }
                prop_assert!(d.buffered() <= Decoder::MAX_HEADER_BYTES + 256 + 300);
            }
        }

        /// A body over the limit is passed over as it comes, however it is cut, its start kept,
        /// and the frame after it read; one over the limit to pass over is refused.
        #[test]
        fn bodies_over_the_limit_are_passed_over(
            extra in 1usize..3000,
            cuts in proptest::collection::vec(0usize..4000, 0..6),
        ) {
            let mut d = Decoder::new(100);
            let body: Vec<u8> = (0..100 + extra).map(|i| b'a' + (i % 26) as u8).collect();
            let mut wire = encode(&body);
            wire.extend(encode(b"{}"));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wire.len())).collect();
            cuts.sort_unstable();
            let mut frames = Vec::new();
            let mut from = 0;
            for to in cuts.into_iter().chain([wire.len()]) {
                d.push(&wire[from..to]);
                from = to;
                while let Some(f) = d.next_frame().unwrap() {
                    frames.push(f);
                }
                prop_assert!(d.buffered() <= Decoder::MAX_HEADER_BYTES + 100 + Decoder::PASSED_OVER_START + 4100);
            }
            prop_assert_eq!(frames, vec![b"{}".to_vec()]);
            let passed = d.take_passed_over();
            prop_assert_eq!(passed.len(), 1);
            prop_assert_eq!(passed[0].length, (100 + extra) as u64);
            prop_assert_eq!(&passed[0].start[..], &body[..Decoder::PASSED_OVER_START.min(body.len())]);
        }

        #[test]
        fn bodies_over_what_is_passed_over_are_refused(extra in 1usize..1000) {
            let mut d = Decoder::new(100);
            let length = 100 * Decoder::MAX_PASSED_OVER_FACTOR as usize + extra;
            d.push(format!("Content-Length: {length}\r\n\r\n").as_bytes());
            let refused = matches!(d.next_frame(), Err(FrameError::TooLarge { length: l, limit: 100 }) if l == length as u64);
            prop_assert!(refused);
        }
    }
}
