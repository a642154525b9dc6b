//! The base protocol's framing: `Content-Length: N\r\n\r\n` then `N` bytes of JSON.
//!
//! Pure code, no IO: [`Decoder::push`] takes whatever bytes a read returned and [`Decoder::next_frame`] yields
//! the complete bodies. Both sizes are bounded: a header block longer than [`Decoder::MAX_HEADER_BYTES`] or a
//! `Content-Length` over the configured body limit is an error, and so is anything that is not a header block
//! (garbage on stdout, a missing or unparsable `Content-Length`). An error is final: the decoder refuses every
//! later frame too, since the stream can no longer be trusted to be in step.

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
    /// `Content-Length` is over the body limit.
    TooLarge {
        /// The announced length.
        length: u64,
        /// The limit.
        limit: usize,
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
    buf: Vec<u8>,
    /// Where the unconsumed bytes of `buf` start.
    start: usize,
    /// The body length of the frame whose header has been read.
    body: Option<usize>,
    max_body: usize,
    failed: Option<FrameError>,
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
            max_body,
            failed: None,
        }
    }

    /// Appends bytes read from the stream. After an error, bytes are dropped.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
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
    }

    /// Whether more bytes are wanted right now: false once a complete frame is waiting to be taken, so that a
    /// reader can stop reading until [`Decoder::next_frame`] has been called (this is what bounds the buffer).
    pub fn wants_more(&self) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let pending = &self.buf[self.start..];
        match self.body {
            Some(n) => pending.len() < n,
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
                self.start = 0;
                Err(err)
            }
        }
    }

    fn step(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if self.body.is_none() {
            let pending = &self.buf[self.start..];
            let Some(end) = find_blank_line(pending) else {
                if pending.len() >= Self::MAX_HEADER_BYTES {
                    return Err(FrameError::HeaderTooLong);
                }
                // Bytes that cannot start a header are garbage already: say so now rather than wait.
                if let Some(&first) = pending.first() {
                    if !first.is_ascii_alphabetic() {
                        return Err(FrameError::BadHeader(lossy_prefix(pending)));
                    }
                }
                return Ok(None);
            };
            if end > Self::MAX_HEADER_BYTES {
                return Err(FrameError::HeaderTooLong);
            }
            let length = parse_headers(&pending[..end - 4])?;
            if length > self.max_body as u64 {
                return Err(FrameError::TooLarge {
                    length,
                    limit: self.max_body,
                });
            }
            self.start += end;
            self.body = Some(length as usize);
        }
        let n = self.body.expect("set above");
        if self.buf.len() - self.start < n {
            return Ok(None);
        }
        let frame = self.buf[self.start..self.start + n].to_vec();
        self.start += n;
        self.body = None;
        if self.start == self.buf.len() {
            // After a large message, give its memory back rather than hold it for the server's life.
            if self.buf.capacity() > 1 << 20 {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
            self.start = 0;
        }
        Ok(Some(frame))
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

    #[test]
    fn garbage_is_refused_at_once_and_for_good() {
        let mut d = Decoder::new(100);
        d.push(b"{\"jsonrpc\":\"2.0\"}\r\n");
        assert!(matches!(d.next_frame(), Err(FrameError::BadHeader(_))));
        d.push(&encode(b"{}"));
        assert!(matches!(d.next_frame(), Err(FrameError::BadHeader(_))));
        assert_eq!(d.buffered(), 0);
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
            (b"Content-Length: 101\r\n\r\n", "large"),
            (b"Content Length: 1\r\n\r\n", "header"),
            (b"Content-Length 1\r\n\r\n", "header"),
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
            };
            assert_eq!(kind, want, "{:?}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn endless_header_is_bounded() {
        let mut d = Decoder::new(100);
        d.push(b"X-Header: ");
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
    fn a_short_body_waits_and_the_next_header_is_read_as_body() {
        // A Content-Length one too long swallows the next frame's first byte: the stream is out of step.
        let mut d = Decoder::new(100);
        let mut wire = b"Content-Length: 3\r\n\r\n{}".to_vec();
        wire.extend(encode(b"{}"));
        d.push(&wire);
        assert_eq!(d.next_frame().unwrap().as_deref(), Some(&b"{}C"[..]));
        // What is left, "ontent-Length: 2", is a header of another name.
        assert_eq!(d.next_frame(), Err(FrameError::MissingLength));
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

        #[test]
        fn bodies_over_the_limit_are_refused(extra in 1usize..1000) {
            let mut d = Decoder::new(100);
            d.push(&encode(&vec![b' '; 100 + extra]));
            let refused = matches!(d.next_frame(), Err(FrameError::TooLarge { length, limit: 100 }) if length == (100 + extra) as u64);
            prop_assert!(refused);
        }
    }
}
