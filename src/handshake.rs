//! The HTTP/1.1 → WebSocket upgrade, server side (RFC 6455 §4; docs/protocol.md, "Upgrade" and
//! "Upgrade refusals").
//!
//! Bytes flow through four steps, none of which does any IO:
//!
//! 1. [`HeadReader`] collects the request head. It scans for the blank line that ends it once, byte by byte, remembering how
//!    far it got, and never holds more than the head-size limit.
//! 2. [`parse_upgrade`] parses that head once with `httparse` and checks that it is a well-formed WebSocket
//!    upgrade request, else refuses it as docs/protocol.md's "Upgrade refusals" says (431, 505,
//!    405 or 501, 400, 417, 426: [`parse_upgrade`] lists each, in its order).
//! 3. [`authorize`] applies the host's [`Policy`]: the `Host` must be a loopback name (DNS rebinding), an
//!    `Origin`, when present, must be on the allow-list (browser pages), and the token must match (403, 401).
//! 4. [`write_accept`] writes the `101 Switching Protocols` response, or [`Rejection::write_response`] writes
//!    a plain HTTP refusal with `Connection: close`.
//!
//! ```
//! use claude_ide_bridge::hooks::handshake::{
//!     authorize, parse_upgrade, write_accept, HeadReader, HeadStatus, Policy,
//! };
//!
//! let wire = b"GET / HTTP/1.1\r\n\
//!     Host: 127.0.0.1:4242\r\n\
//!     Connection: Upgrade\r\n\
//!     Upgrade: websocket\r\n\
//!     Sec-WebSocket-Version: 13\r\n\
//!     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
//!     Sec-WebSocket-Protocol: mcp\r\n\
//!     X-Claude-Code-Ide-Authorization: s3cret\r\n\
//!     \r\n";
//!
//! let mut reader = HeadReader::new(16 * 1024);
//! let (used, status) = reader.feed(wire);
//! assert_eq!((used, status), (wire.len(), HeadStatus::Complete));
//!
//! let policy = Policy { token: Some("s3cret"), allowed_origins: &[], check_host: true, allowed_hosts: &[] };
//! let mut out = Vec::new();
//! match parse_upgrade(reader.head(), 64).and_then(|req| authorize(&req, &policy).map(|()| req)) {
//!     Ok(req) => {
//!         let subprotocol = req.offers_protocol("mcp").then_some("mcp");
//!         write_accept(&mut out, &req, subprotocol);
//!     }
//!     Err(rejection) => rejection.write_response(&mut out),
//! }
//! assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
//! ```

use std::fmt;
// Address parsing only (`core::net`): no sockets here.
use core::net::{Ipv4Addr, Ipv6Addr};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha1::{Digest, Sha1};

/// The GUID that RFC 6455 §1.3 appends to the client's key before hashing.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The header carrying the authentication token (docs/protocol.md, "Auth token").
pub const AUTH_HEADER: &str = "X-Claude-Code-Ide-Authorization";

/// What [`HeadReader::feed`] has seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadStatus {
    /// No blank line yet and still under the limit: feed more bytes.
    Partial,
    /// The head, up to and including the blank line that ends it, is in [`HeadReader::head`].
    Complete,
    /// The limit was reached without a blank line: answer 431 ([`Rejection::HeadersTooLarge`]) and close.
    TooLarge,
}

/// Accumulates an HTTP request head, up to and including the blank line that ends it.
///
/// A line ends with `\r\n` or with a bare `\n` (RFC 9112, section 2.2 lets a recipient take a single LF as a line
/// terminator, and [`parse_upgrade`] reads lines as that section allows), so the head ends at the first empty line:
/// `\r\n\r\n`, or `\n\n`, `\n\r\n`, `\r\n\n`. The search is a four-state matcher that looks at every byte exactly once and carries its
/// state from one [`feed`](Self::feed) to the next, so feeding a head one byte at a time costs the same as
/// feeding it whole (re-scanning the whole buffer on every read was CVE-2023-43669). The reader never holds
/// more than `max_head_bytes` bytes, and a head of exactly `max_head_bytes` bytes is accepted.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::{HeadReader, HeadStatus};
///
/// let mut reader = HeadReader::new(1024);
/// assert_eq!(reader.feed(b"GET / HTTP/1.1\r\nHost: localhost\r\n"), (33, HeadStatus::Partial));
/// // The rest of the head, then the start of the first WebSocket frame.
/// assert_eq!(reader.feed(b"\r\n\x81\x85"), (2, HeadStatus::Complete));
/// assert_eq!(reader.head(), b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
/// ```
#[derive(Debug, Clone)]
pub struct HeadReader {
    buf: Vec<u8>,
    max: usize,
    /// Where the end of `buf` stands: 0 inside a line, 1 after a `\r` inside a line, 2 at the start of a line,
    /// 3 after a `\r` at the start of a line, 4 after the empty line that ends the head. This is the remembered
    /// search state: the scan resumes at `buf.len()` with it.
    matched: u8,
    /// Bytes examined by the scan, over the reader's life (equals `buf.len()`: each byte is looked at once).
    scanned: usize,
    status: HeadStatus,
}

impl HeadReader {
    /// A reader that accepts heads of at most `max_head_bytes` bytes, terminator included.
    pub fn new(max_head_bytes: usize) -> Self {
        HeadReader {
            buf: Vec::new(),
            max: max_head_bytes,
            matched: 0,
            scanned: 0,
            status: HeadStatus::Partial,
        }
    }

    /// Consumes bytes from `input` up to and including the end of the head.
    ///
    /// Returns how many bytes of `input` were consumed and the status afterwards:
    ///
    /// - [`HeadStatus::Partial`]: all of `input` was consumed; feed more.
    /// - [`HeadStatus::Complete`]: the bytes after the head are *not* consumed (a client may pipeline its
    ///   first frame right behind the head); hand `input[consumed..]` to the WebSocket layer.
    /// - [`HeadStatus::TooLarge`]: only the bytes up to the limit were consumed and kept.
    ///
    /// Once the status is `Complete` or `TooLarge`, later calls consume nothing and return it again.
    pub fn feed(&mut self, input: &[u8]) -> (usize, HeadStatus) {
        if self.status != HeadStatus::Partial {
            return (0, self.status);
        }
        let room = self.max - self.buf.len();
        let window = &input[..input.len().min(room)];
        let mut taken = window.len();
        for (i, &byte) in window.iter().enumerate() {
            self.scanned += 1;
            // No request line starts so (a method is letters; an empty line before it may be
            // taken, RFC 9112 2.2): TLS's ClientHello (0x16), a client of `wss://`, is refused
            // at once rather than at the head's timeout.
            if self.scanned == 1 && !(byte.is_ascii_alphabetic() || byte == b'\r' || byte == b'\n')
            {
                taken = i + 1;
                self.status = HeadStatus::Complete;
                break;
            }
            self.matched = match (self.matched, byte) {
                (2, b'\r') => 3,
                // Two CRs in a row end no valid head: what came is refused now (400 for the
                // bare CR, or what `parse_upgrade`'s order finds first: 505, 431) rather than at
                // the head's timeout (a head of bare-CR lines never ends). At a line's start too
                // (`\r\n\r\r\n`: the second CR was taken for a new line's, and the head waited).
                (1 | 3, b'\r') => 4,
                (_, b'\r') => 1,
                (0 | 1, b'\n') => 2,
                (_, b'\n') => 4,
                _ => 0,
            };
            if self.matched == 4 {
                taken = i + 1;
                self.status = HeadStatus::Complete;
                break;
            }
        }
        self.append(&window[..taken]);
        if self.status == HeadStatus::Partial && self.buf.len() >= self.max {
            // A full buffer without the empty line: any complete head would be longer than the limit.
            self.status = HeadStatus::TooLarge;
        }
        (taken, self.status)
    }

    /// Appends to the buffer without letting its capacity grow past the limit.
    fn append(&mut self, bytes: &[u8]) {
        let needed = self.buf.len() + bytes.len();
        if needed > self.buf.capacity() {
            let target = needed
                .max(self.buf.capacity().saturating_mul(2))
                .min(self.max);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes kept so far: the whole head, terminator included, once the status is `Complete`.
    pub fn head(&self) -> &[u8] {
        &self.buf
    }

    /// How many bytes are held (never more than `max_head_bytes`).
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The status after the last [`feed`](Self::feed) (`Partial` before the first).
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub fn status(&self) -> HeadStatus {
        self.status
    }

    /// How many bytes the terminator search has examined in total. Each byte is examined once, so this
    /// equals [`buffered`](Self::buffered): the work done is linear in the head's length however it is split.
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub fn bytes_scanned(&self) -> usize {
        self.scanned
    }
}

/// What the upgrade request said, parsed once by [`parse_upgrade`].
///
/// The authentication token is kept private and read through [`auth_token`](Self::auth_token); `Debug`
/// shows it as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct UpgradeRequest {
    /// The request target's path and query, as sent (any path is accepted); of an absolute
    /// target, the part after its authority (`/` when there is none).
    pub path: String,
    /// The `Host` header, or an absolute target's authority, which takes its place (always
    /// present after [`parse_upgrade`]).
    pub host: Option<String>,
    /// The `Origin` header; browsers send it, the real client does not.
    pub origin: Option<String>,
    /// The `Sec-WebSocket-Key`, checked to be base64 of 16 bytes.
    pub key: String,
    /// Every `Sec-WebSocket-Protocol` token, from all occurrences of the header, in order.
    pub protocols: Vec<String>,
    /// Whether the client offered any extension (every extension is declined).
    pub extensions_offered: bool,
    /// The `User-Agent` header, if any (invalid UTF-8 replaced).
    pub user_agent: Option<String>,
    auth_token: Option<String>,
}

impl UpgradeRequest {
    /// The value of the `X-Claude-Code-Ide-Authorization` header, if sent.
    pub fn auth_token(&self) -> Option<&str> {
        self.auth_token.as_deref()
    }

    /// Whether the client offered the subprotocol `name` (compared exactly, as RFC 6455 tokens are).
    pub fn offers_protocol(&self, name: &str) -> bool {
        self.protocols.iter().any(|p| p == name)
    }
}

impl fmt::Debug for UpgradeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpgradeRequest")
            .field("path", &self.path)
            .field("host", &self.host)
            .field("origin", &self.origin)
            .field("key", &self.key)
            .field("protocols", &self.protocols)
            .field("extensions_offered", &self.extensions_offered)
            .field("user_agent", &self.user_agent)
            .field("auth_token", &self.auth_token.as_ref().map(|_| Redacted))
            .finish()
    }
}

/// Stands in for a secret in `Debug` output.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Why an upgrade is refused, as a plain HTTP response sent before any WebSocket exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// 400: malformed request, missing or bad headers; the text says which.
    BadRequest(&'static str),
    /// 401: the token is missing or wrong.
    Unauthorized,
    /// 403: `Host` not loopback, or `Origin` not allowed; the text says which.
    Forbidden(&'static str),
    /// 405: a method other than `GET` that HTTP defines (the response says `Allow: GET`).
    MethodNotAllowed,
    /// 417: an `Expect` other than `100-continue`.
    ExpectationFailed,
    /// 426: `Sec-WebSocket-Version` missing or not 13 (the response says `Sec-WebSocket-Version: 13`).
    UpgradeRequired,
    /// 431: the head is over the size limit or has too many headers.
    HeadersTooLarge,
    /// 501: a method HTTP does not define.
    NotImplemented,
    /// 503: the connection limit is reached.
    ServiceUnavailable,
    /// 503: the server is stopping (a client reconnecting at once after the Close 1001 of a
    /// stop is told so, not "too many connections").
    ShuttingDown,
    /// 505: an HTTP major version other than 1.
    VersionNotSupported,
}

impl Rejection {
    /// The HTTP status code: 400, 401, 403, 405, 417, 426, 431, 501, 503 or 505.
    pub fn status(&self) -> u16 {
        match self {
            Rejection::BadRequest(_) => 400,
            Rejection::Unauthorized => 401,
            Rejection::Forbidden(_) => 403,
            Rejection::MethodNotAllowed => 405,
            Rejection::ExpectationFailed => 417,
            Rejection::UpgradeRequired => 426,
            Rejection::HeadersTooLarge => 431,
            Rejection::NotImplemented => 501,
            Rejection::ServiceUnavailable | Rejection::ShuttingDown => 503,
            Rejection::VersionNotSupported => 505,
        }
    }

    /// The reason phrase of the status line.
    pub fn reason_phrase(&self) -> &'static str {
        match self {
            Rejection::BadRequest(_) => "Bad Request",
            Rejection::Unauthorized => "Unauthorized",
            Rejection::Forbidden(_) => "Forbidden",
            Rejection::MethodNotAllowed => "Method Not Allowed",
            Rejection::ExpectationFailed => "Expectation Failed",
            Rejection::UpgradeRequired => "Upgrade Required",
            Rejection::HeadersTooLarge => "Request Header Fields Too Large",
            Rejection::NotImplemented => "Not Implemented",
            Rejection::ServiceUnavailable | Rejection::ShuttingDown => "Service Unavailable",
            Rejection::VersionNotSupported => "HTTP Version Not Supported",
        }
    }

    /// What is wrong, in a few words (the response body, without its trailing newline).
    pub fn detail(&self) -> &'static str {
        match self {
            Rejection::BadRequest(why) | Rejection::Forbidden(why) => why,
            Rejection::Unauthorized => "missing or wrong authentication token",
            Rejection::MethodNotAllowed => "method must be GET",
            Rejection::ExpectationFailed => "only the expectation 100-continue is met",
            Rejection::UpgradeRequired => "only WebSocket version 13 is supported",
            Rejection::HeadersTooLarge => "request head too large or too many headers",
            Rejection::NotImplemented => "unknown method; only GET is served",
            Rejection::ServiceUnavailable => "too many connections",
            Rejection::ShuttingDown => "the IDE is shutting down",
            Rejection::VersionNotSupported => "only HTTP/1.1 is served",
        }
    }

    /// Appends the full HTTP/1.1 response to `out`: the status line, `Connection: close`,
    /// `Content-Type: text/plain; charset=utf-8`, `Content-Length`, and a one-line body saying what is wrong;
    /// a 426 also carries `Sec-WebSocket-Version: 13` and the protocol it requires
    /// (`Upgrade: websocket`, with `Connection: Upgrade, close`: RFC 9110 §15.5.22), a 401 the
    /// scheme of its token (`WWW-Authenticate: X-Claude-Code-Ide-Authorization`, the challenge
    /// RFC 9110 §15.5.2 asks a 401 for), a 405 the method it allows (`Allow: GET`). Close the
    /// connection after writing it.
    ///
    /// ```
    /// use claude_ide_bridge::Rejection;
    ///
    /// let mut out = Vec::new();
    /// Rejection::Unauthorized.write_response(&mut out);
    /// assert!(out.starts_with(b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n"));
    /// ```
    pub fn write_response(&self, out: &mut Vec<u8>) {
        self.write(out, true);
    }

    /// [`Rejection::write_response`], without the body when `with_body` is false (the answer to
    /// a `HEAD`, which has none: RFC 9110 §9.3.2); its `Content-Length` is the same.
    fn write(&self, out: &mut Vec<u8>, with_body: bool) {
        let body = self.detail();
        let connection = match self {
            Rejection::UpgradeRequired => "Upgrade, close",
            _ => "close",
        };
        let head = format!(
            "HTTP/1.1 {} {}\r\nConnection: {connection}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
            self.status(),
            self.reason_phrase(),
            body.len() + 1,
        );
        out.extend_from_slice(head.as_bytes());
        match self {
            Rejection::UpgradeRequired => {
                out.extend_from_slice(b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n")
            }
            Rejection::Unauthorized => out.extend_from_slice(
                b"WWW-Authenticate: X-Claude-Code-Ide-Authorization realm=\"claude-ide-bridge\"\r\n",
            ),
            Rejection::MethodNotAllowed => out.extend_from_slice(b"Allow: GET\r\n"),
            _ => {}
        }
        out.extend_from_slice(b"\r\n");
        if with_body {
            out.extend_from_slice(body.as_bytes());
            out.push(b'\n');
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status(),
            self.reason_phrase(),
            self.detail()
        )
    }
}

impl std::error::Error for Rejection {}

/// Trims HTTP optional whitespace (spaces and tabs) from both ends.
fn trim_ows(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Whether a `Content-Length` value says 0: one or more zero digits (`1*DIGIT`, RFC 9110 §8.6),
/// around optional whitespace.
fn is_zero_length(value: &[u8]) -> bool {
    let digits = value.trim_ascii();
    !digits.is_empty() && digits.iter().all(|&b| b == b'0')
}

/// Whether a comma-separated header list contains `token`, ASCII case-insensitively.
fn list_has_token(values: &[&str], token: &str) -> bool {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token))
}

/// A header that must appear at most once: its value, or `Err` if duplicated or not UTF-8.
fn single<'h>(
    headers: &[httparse::Header<'h>],
    name: &str,
    duplicate: &'static str,
) -> Result<Option<&'h str>, Rejection> {
    let mut found = None;
    for h in headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name)) {
        if found.is_some() {
            return Err(Rejection::BadRequest(duplicate));
        }
        let value = std::str::from_utf8(h.value)
            .map_err(|_| Rejection::BadRequest("header value is not valid UTF-8"))?;
        found = Some(trim_ows(value));
    }
    Ok(found)
}

/// Every occurrence of a list-valued header; values that are not UTF-8 are skipped.
fn all<'h>(headers: &[httparse::Header<'h>], name: &str) -> Vec<&'h str> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .collect()
}

/// Parses a complete request head (as collected by [`HeadReader`]) and checks that it is a WebSocket
/// upgrade request. The head is parsed once.
///
/// Header names are compared case-insensitively. Refusals, in the order they are checked:
///
/// - 431 [`Rejection::HeadersTooLarge`]: more than `max_headers` headers (counted after the request
///   line is read: a major version other than 1 is answered 505 whatever their number).
/// - 505 [`Rejection::VersionNotSupported`]: a major version other than 1 (a later `HTTP/1.x` is
///   read as `HTTP/1.1`, RFC 9112 §2.3).
/// - 405 [`Rejection::MethodNotAllowed`] for a method HTTP defines other than `GET`, 501
///   [`Rejection::NotImplemented`] for another.
/// - 400 [`Rejection::BadRequest`]: malformed (including a head that ends before its last byte, or an
///   incomplete one), `HTTP/1.0`, a request target that is neither a path nor an absolute
///   `http`/`https`/`ws`/`wss` URI, or that holds a fragment or a malformed `%` escape (bytes
///   clients send unescaped though a URI does not hold them, `[`, `|`, non-ASCII, are taken); a body
///   announced (`Transfer-Encoding`, a `Content-Length` other than 0: the bytes after the head
///   are the WebSocket's).
/// - 417 [`Rejection::ExpectationFailed`]: an `Expect` other than `100-continue`.
/// - 400 again: `Host` missing, empty, duplicated or not `host[:port]`; `Upgrade` without the
///   token `websocket`; `Connection` without the token `upgrade`; `Sec-WebSocket-Key` missing, duplicated, or
///   not base64 of exactly 16 bytes; `Origin`, `Sec-WebSocket-Version` or the token header duplicated; any
///   of these single-valued headers not UTF-8.
/// - 426 [`Rejection::UpgradeRequired`]: `Sec-WebSocket-Version` missing or not exactly `13`.
///
/// An absolute target's host is the request's [`UpgradeRequest::host`] (RFC 9112 §3.2.2: it
/// takes `Host`'s place), and its path the [`UpgradeRequest::path`].
///
/// Any request path is accepted (`/`, `/mcp`, with a query). The token is not checked here: that is
/// [`authorize`]'s job.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::{parse_upgrade, Rejection};
///
/// let head = b"GET /mcp HTTP/1.1\r\nHost: localhost:9000\r\nUpgrade: websocket\r\n\
///     Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
///     Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp, other\r\n\r\n";
/// let req = parse_upgrade(head, 64).unwrap();
/// assert_eq!(req.path, "/mcp");
/// assert_eq!(req.protocols, ["mcp", "other"]);
/// assert_eq!(req.auth_token(), None);
///
/// let old = b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
/// assert_eq!(parse_upgrade(old, 64).unwrap_err().status(), 400);
/// ```
pub fn parse_upgrade(head: &[u8], max_headers: usize) -> Result<UpgradeRequest, Rejection> {
    let mut storage = vec![httparse::EMPTY_HEADER; max_headers];
    let mut request = httparse::Request::new(&mut storage);
    match request.parse(head) {
        Ok(httparse::Status::Complete(len)) if len == head.len() => {}
        Ok(httparse::Status::Complete(_)) => {
            return Err(Rejection::BadRequest(
                "bytes after the end of the request head",
            ))
        }
        Ok(httparse::Status::Partial) => {
            return Err(Rejection::BadRequest("incomplete request head"))
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Rejection::HeadersTooLarge),
        Err(httparse::Error::Version) => return parse_other_version(head, max_headers),
        Err(_) => return Err(Rejection::BadRequest("malformed HTTP request")),
    }
    match request.method {
        Some("GET") => {}
        Some(m) if HTTP_METHODS.contains(&m) => return Err(Rejection::MethodNotAllowed),
        _ => return Err(Rejection::NotImplemented),
    }
    if request.version != Some(1) {
        return Err(Rejection::BadRequest("HTTP/1.1 required"));
    }
    let (path, authority) = request_target(request.path.unwrap_or("/"))?;
    let headers: &[httparse::Header<'_>] = request.headers;
    // Read as bytes: a value with a byte past ASCII (obs-text, which httparse takes) announces a
    // body as much as any other.
    if headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("Transfer-Encoding")
            || (h.name.eq_ignore_ascii_case("Content-Length") && !is_zero_length(h.value))
    }) {
        return Err(Rejection::BadRequest("an upgrade request has no body"));
    }
    // With no body (refused above) a 100-continue is met by the answer itself
    // (RFC 9110 §10.1.1); no other expectation is known. Empty list elements are no
    // expectation (RFC 9110 §5.6.1.2: a recipient accepts them).
    if all(headers, "Expect")
        .iter()
        .flat_map(|v| v.split(','))
        .map(trim_ows)
        .any(|e| !e.is_empty() && !e.eq_ignore_ascii_case("100-continue"))
        || headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("Expect") && std::str::from_utf8(h.value).is_err())
    {
        return Err(Rejection::ExpectationFailed);
    }

    let host = single(headers, "Host", "duplicate Host header")?;
    let host = match host {
        Some(h) if !h.is_empty() => h,
        _ => return Err(Rejection::BadRequest("missing Host header")),
    };
    if !is_host_syntax(host) {
        return Err(Rejection::BadRequest("Host is not a host[:port]"));
    }
    // An absolute target names the host in Host's place (RFC 9112 §3.2.2); Host must still
    // be there and well formed (RFC 9112 §3.2).
    let host = authority.unwrap_or(host).to_owned();
    if !list_has_token(&all(headers, "Upgrade"), "websocket") {
        return Err(Rejection::BadRequest("Upgrade header must name websocket"));
    }
    if !list_has_token(&all(headers, "Connection"), "upgrade") {
        return Err(Rejection::BadRequest(
            "Connection header must contain upgrade",
        ));
    }
    let key = single(
        headers,
        "Sec-WebSocket-Key",
        "duplicate Sec-WebSocket-Key header",
    )?
    .ok_or(Rejection::BadRequest("missing Sec-WebSocket-Key header"))?;
    if key.len() != 24 || STANDARD.decode(key).map(|k| k.len()) != Ok(16) {
        return Err(Rejection::BadRequest(
            "Sec-WebSocket-Key must be base64 of 16 bytes",
        ));
    }
    let origin = single(headers, "Origin", "duplicate Origin header")?.map(str::to_owned);
    let auth_token =
        single(headers, AUTH_HEADER, "duplicate authorization header")?.map(str::to_owned);
    let version = single(
        headers,
        "Sec-WebSocket-Version",
        "duplicate Sec-WebSocket-Version header",
    )?;

    let protocols = all(headers, "Sec-WebSocket-Protocol")
        .iter()
        .flat_map(|v| v.split(','))
        .map(trim_ows)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let extensions_offered = headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("Sec-WebSocket-Extensions") && !h.value.is_empty());
    let user_agent = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("User-Agent"))
        .map(|h| trim_ows(&String::from_utf8_lossy(h.value)).to_owned());

    if version != Some("13") {
        return Err(Rejection::UpgradeRequired);
    }
    Ok(UpgradeRequest {
        path,
        host: Some(host),
        origin,
        key: key.to_owned(),
        protocols,
        extensions_offered,
        user_agent,
        auth_token,
    })
}

/// The methods HTTP defines (RFC 9110 §9, and `PATCH`, RFC 5789): one of them other than `GET`
/// is answered 405, any other 501.
const HTTP_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A request line whose version httparse does not read: `HTTP/1.x` with x above 1 is read as
/// HTTP/1.1 (RFC 9112 §2.3: a higher minor version is taken as the highest one served); another
/// major version is 505, anything else malformed.
fn parse_other_version(head: &[u8], max_headers: usize) -> Result<UpgradeRequest, Rejection> {
    let start = head.len() - head.trim_ascii_start().len();
    let line_end = head[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head.len(), |i| start + i);
    let line = head[start..line_end].trim_ascii_end();
    // Method, target and version, one space apart (RFC 9112 §3): anything else is malformed.
    let spaces: Vec<usize> = (0..line.len()).filter(|&i| line[i] == b' ').collect();
    let [_, at] = spaces[..] else {
        return Err(Rejection::BadRequest("malformed HTTP request"));
    };
    match line[at + 1..] {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor]
            if minor.is_ascii_digit() && minor > b'1' =>
        {
            let mut as_11 = head.to_vec();
            as_11[start + at + 8] = b'1';
            parse_upgrade(&as_11, max_headers)
        }
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(Rejection::VersionNotSupported)
        }
        _ => Err(Rejection::BadRequest("malformed HTTP request")),
    }
}

/// The request target as a path (with its query) and, for the absolute form, the authority it
/// names. The origin form (`/path?query`) is what a client sends; the absolute form
/// (`http://host:port/path`, also `https`, `ws`, `wss`) a server must take too
/// (RFC 9112 §3.2.2); the authority form and `*` belong to CONNECT and OPTIONS. A fragment or a
/// malformed `%` escape is refused (RFC 9112 §3.2.1, RFC 6455 §3); the bytes of
/// [`TARGET_LENIENT`] and those past ASCII are taken.
fn request_target(target: &str) -> Result<(String, Option<&str>), Rejection> {
    let (path, authority) = if target.starts_with('/') {
        (target, None)
    } else {
        let scheme_end = target.find("://").ok_or(Rejection::BadRequest(
            "the request target must be a path or an absolute URI",
        ))?;
        let scheme = &target[..scheme_end];
        if !["http", "https", "ws", "wss"]
            .iter()
            .any(|s| s.eq_ignore_ascii_case(scheme))
        {
            return Err(Rejection::BadRequest(
                "the request target's scheme must be http or ws",
            ));
        }
        let rest = &target[scheme_end + 3..];
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if !is_host_syntax(authority) {
            return Err(Rejection::BadRequest(
                "the request target's host is not a host[:port]",
            ));
        }
        (&rest[end..], Some(authority))
    };
    if !is_target_text(path, true) {
        return Err(Rejection::BadRequest(
            "the request target holds a fragment or a malformed escape",
        ));
    }
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    Ok((path, authority))
}

/// Whether `s` is made of what a path and query may hold: unreserved and sub-delims characters,
/// `:`, `@`, `/`, `?`, and `%` followed by two hex digits (RFC 3986 §3.3, §3.4).
fn is_uri_text(s: &str) -> bool {
    is_target_text(s, false)
}

/// [`is_uri_text`]; `lenient`, also taking the bytes of [`TARGET_LENIENT`] and those past ASCII
/// as they come.
fn is_target_text(s: &str, lenient: bool) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if b.len() > i + 2
                && b[i + 1].is_ascii_hexdigit()
                && b[i + 2].is_ascii_hexdigit() =>
            {
                i += 2
            }
            c if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&c) => {}
            c if lenient && (c >= 0x80 || TARGET_LENIENT.contains(&c)) => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

/// Bytes a URI does not hold that clients send unescaped in a path or query all the same
/// (browsers and Node's `ws` write `[`, `]` and `|` as they are; WHATWG's URL keeps them): taken
/// in a request target, as most servers take them. A fragment's `#` is not among them.
const TARGET_LENIENT: &[u8] = b"[]|{}^`\\\"<>";

/// Whether a `Host` value (or an absolute target's authority) is `uri-host [":" port]`
/// (RFC 9112 §3.2, RFC 3986 §3.2.2): a bracketed IP literal or a name of unreserved,
/// sub-delims and percent-encoded characters, then an optional port of digits. No user info.
fn is_host_syntax(h: &str) -> bool {
    let (host_ok, port) = if let Some(rest) = h.strip_prefix('[') {
        let Some((literal, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after {
            "" => "",
            _ => match after.strip_prefix(':') {
                Some(port) => port,
                None => return false,
            },
        };
        let literal_ok = !literal.is_empty()
            && literal
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b":.-_~!$&'()*+,;=".contains(&c));
        (literal_ok, port)
    } else {
        let (name, port) = h.split_once(':').unwrap_or((h, ""));
        // A name, not an empty one (RFC 9110 §4.2.1: an http URI with an empty host is invalid).
        let name_ok =
            !name.is_empty() && is_uri_text(name) && !name.bytes().any(|c| b"@/?".contains(&c));
        (name_ok, port)
    };
    host_ok && port.bytes().all(|c| c.is_ascii_digit())
}

/// What [`authorize`] checks an upgrade request against.
#[derive(Clone, Copy)]
pub struct Policy<'a> {
    /// The token the client must send in `X-Claude-Code-Ide-Authorization`; `None` disables the check
    /// (only for a conformance echo server, never for a real host). An empty token refuses every
    /// request (401), as [`AuthToken::matches`](crate::AuthToken::matches) matches nothing with it.
    pub token: Option<&'a str>,
    /// Origins allowed when the request carries an `Origin` header (ASCII case-insensitive, exact).
    /// A request without `Origin` is not affected: the real client sends none.
    pub allowed_origins: &'a [String],
    /// Refuse a `Host` that is not a loopback name or address (DNS rebinding defence), nor one of
    /// `allowed_hosts`.
    pub check_host: bool,
    /// Names a `Host` may also carry when `check_host` is set, with any port (see
    /// [`is_allowed_host`]): an explicit opt-in for a client that reaches the host by another name,
    /// such as `host.docker.internal` from a container. Empty: loopback names only.
    pub allowed_hosts: &'a [String],
}

impl fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("token", &self.token.map(|_| Redacted))
            .field("allowed_origins", &self.allowed_origins)
            .field("check_host", &self.check_host)
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

/// Checks a parsed upgrade request against the host's policy, in this order:
///
/// 1. When `check_host` is set, the `Host` must be loopback (see [`is_loopback_host`]) or one of
///    `allowed_hosts` (see [`is_allowed_host`]), else 403.
/// 2. An `Origin`, when present, must equal one of `allowed_origins` (ASCII case-insensitive), else 403.
/// 3. When a token is set, `X-Claude-Code-Ide-Authorization` must equal it (compared in constant time),
///    else 401.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::{authorize, parse_upgrade, Policy, Rejection};
///
/// let head = b"GET / HTTP/1.1\r\nHost: evil.example:8080\r\nUpgrade: websocket\r\n\
///     Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
///     Sec-WebSocket-Version: 13\r\n\r\n";
/// let req = parse_upgrade(head, 64).unwrap();
/// let policy = Policy { token: None, allowed_origins: &[], check_host: true, allowed_hosts: &[] };
/// assert_eq!(authorize(&req, &policy).unwrap_err().status(), 403);
/// // Named on purpose: accepted (the token, when set, is still checked).
/// let named = ["evil.example".to_string()];
/// assert!(authorize(&req, &Policy { allowed_hosts: &named, ..policy }).is_ok());
/// ```
pub fn authorize(req: &UpgradeRequest, policy: &Policy<'_>) -> Result<(), Rejection> {
    if policy.check_host
        && !req
            .host
            .as_deref()
            .is_some_and(|h| is_loopback_host(h) || is_allowed_host(h, policy.allowed_hosts))
    {
        return Err(Rejection::Forbidden(if policy.allowed_hosts.is_empty() {
            "Host is not a loopback address"
        } else {
            "Host is neither a loopback address nor an allowed name"
        }));
    }
    if let Some(origin) = &req.origin {
        if !policy
            .allowed_origins
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(origin))
        {
            return Err(Rejection::Forbidden("Origin not allowed"));
        }
    }
    if let Some(expected) = policy.token {
        let sent = req.auth_token().unwrap_or("");
        // Evaluate both so a missing header and a wrong one take the same path.
        let matches = constant_time_eq(sent.as_bytes(), expected.as_bytes());
        // An empty token (a variable that was not set, say) lets nobody in.
        if req.auth_token.is_none() || !matches || expected.is_empty() {
            return Err(Rejection::Unauthorized);
        }
    }
    Ok(())
}

/// Whether a `Host` header value names the loopback interface, ASCII case-insensitively, with an optional
/// `:port` (decimal, at most 65535, or empty, which RFC 9110 takes as the default port):
///
/// - `localhost` and `localhost.`;
/// - any IPv4 address in `127.0.0.0/8`, in dotted-quad form (`127.0.0.1`, `127.1.2.3`; not `127.1`, not
///   octal, not `127.0.0.1.evil.com`);
/// - a bracketed IPv6 loopback: `[::1]` (any spelling of it, such as `[0:0:0:0:0:0:0:1]`), and also an
///   IPv4-mapped loopback such as `[::ffff:127.0.0.1]` = `[::ffff:7f00:1]`. These literals are allowed on
///   purpose: they denote loopback, and an IP literal cannot come from a DNS rebinding attack, which is what
///   this check stops.
///
/// Anything else, including other names under `localhost` and the unbracketed `::1`, is not loopback.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::is_loopback_host;
///
/// assert!(is_loopback_host("127.0.0.1:51234"));
/// assert!(is_loopback_host("LocalHost"));
/// assert!(is_loopback_host("[::1]:80"));
/// assert!(!is_loopback_host("127.0.0.1.evil.com"));
/// ```
pub fn is_loopback_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some((literal, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after.strip_prefix(':') {
            Some(port) => Some(port),
            None if after.is_empty() => None,
            None => return false,
        };
        let loopback = literal.parse::<Ipv6Addr>().is_ok_and(|ip| {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        });
        if !loopback {
            return false;
        }
        (None, port)
    } else {
        match host.split_once(':') {
            Some((name, port)) => (Some(name), Some(port)),
            None => (Some(host), None),
        }
    };
    if !port.is_none_or(is_port) {
        return false;
    }
    match name {
        None => true,
        Some(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name.eq_ignore_ascii_case("localhost.")
                || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// Whether the text after a `Host` header's `:` is a port: decimal digits for at most 65535, or nothing (RFC 3986's
/// `port = *DIGIT`, leading zeros included: `065535` is 65535, as `08080` was taken; RFC 9110, section 4.2.3
/// takes an empty port as the scheme's default).
fn is_port(port: &str) -> bool {
    port.is_empty() || (port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok())
}

/// Whether a `Host` header value is one of `names` (ASCII case-insensitively, a trailing `.` on either
/// side ignored), with an optional `:port` (decimal, at most 65535, or empty). A bracketed IPv6 literal is
/// compared with its brackets (`[fd00::1]`). An empty name never matches.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::is_allowed_host;
///
/// let names = ["host.docker.internal".to_string()];
/// assert!(is_allowed_host("host.docker.internal:41234", &names));
/// assert!(is_allowed_host("Host.Docker.Internal.", &names));
/// assert!(!is_allowed_host("host.docker.internal.evil.com", &names));
/// assert!(!is_allowed_host("host.docker.internal:99999", &names));
/// ```
pub fn is_allowed_host(host: &str, names: &[String]) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((literal, after)) => (&host[..literal.len() + 2], after.strip_prefix(':')),
            None => return false,
        },
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    if name.len() + port.map_or(0, |p| p.len() + 1) != host.len() {
        return false; // Something after `]` that is not `:port`.
    }
    if !port.is_none_or(is_port) {
        return false;
    }
    let bare = |n: &str| n.strip_suffix('.').unwrap_or(n).to_string();
    let name = bare(name);
    !name.is_empty()
        && names
            .iter()
            .any(|n| !n.is_empty() && bare(n).eq_ignore_ascii_case(&name))
}

/// Compares two byte strings without exiting early: the time taken depends on their lengths, never on
/// where they differ. Strings of different lengths are unequal.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::constant_time_eq;
///
/// assert!(constant_time_eq(b"token", b"token"));
/// assert!(!constant_time_eq(b"token", b"tokex"));
/// assert!(!constant_time_eq(b"token", b"token2"));
/// ```
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The `Sec-WebSocket-Accept` value for a client's key: `base64(sha1(key + GUID))` (RFC 6455 §4.2.2).
///
/// ```
/// use claude_ide_bridge::hooks::handshake::accept_key;
///
/// assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
/// ```
pub fn accept_key(key: &str) -> String {
    let mut sha = Sha1::new();
    sha.update(key.as_bytes());
    sha.update(WEBSOCKET_GUID.as_bytes());
    STANDARD.encode(sha.finalize())
}

/// Appends the `101 Switching Protocols` response to `out`: `Upgrade: websocket`, `Connection: Upgrade`,
/// `Sec-WebSocket-Accept`, and `Sec-WebSocket-Protocol: <p>` when `subprotocol` is `Some(p)`.
///
/// A subprotocol the client did not offer is never answered (RFC 6455 §4.2.2; the client would fail the
/// connection): pass `Some("mcp")` when [`UpgradeRequest::offers_protocol`] says so, which the real client
/// requires. No `Sec-WebSocket-Extensions` header is ever written: every extension is declined.
///
/// ```
/// use claude_ide_bridge::hooks::handshake::{parse_upgrade, write_accept};
///
/// let head = b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
///     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
/// let mut out = Vec::new();
/// write_accept(&mut out, &parse_upgrade(head, 64).unwrap(), None);
/// assert_eq!(
///     out,
///     b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
///       Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
/// );
/// ```
pub fn write_accept(out: &mut Vec<u8>, req: &UpgradeRequest, subprotocol: Option<&str>) {
    out.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    out.extend_from_slice(accept_key(&req.key).as_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(protocol) = subprotocol.filter(|p| req.offers_protocol(p)) {
        out.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        out.extend_from_slice(protocol.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// One socket's side of the upgrade, shared by the MCP connection and the echo connection: the
/// request head while it is being read, then the response (the `101` or a refusal), which is
/// written ahead of anything the WebSocket queues.
#[derive(Debug)]
pub(crate) struct Upgrade {
    /// `Some` until the head is complete and answered.
    reader: Option<HeadReader>,
    refused: bool,
    /// The response, and how much of it was written.
    out: Vec<u8>,
    sent: usize,
}

/// What [`Upgrade::read_head`] made of some input.
pub(crate) enum HeadRead<'d> {
    /// The head is not complete yet: all the input was taken.
    Partial,
    /// The head is over the size limit: refuse with 431.
    TooLarge,
    /// The head is complete ([`Upgrade::head`]); these bytes came after it (a pipelined first frame).
    Complete(&'d [u8]),
}

impl Upgrade {
    /// The upgrade of a socket just accepted.
    pub(crate) fn new(max_head_bytes: usize) -> Self {
        Upgrade {
            reader: Some(HeadReader::new(max_head_bytes)),
            refused: false,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// Whether the head is still being read (neither accepted nor refused).
    pub(crate) fn is_reading(&self) -> bool {
        self.reader.is_some() && !self.refused
    }

    /// Whether the upgrade was refused.
    pub(crate) fn is_refused(&self) -> bool {
        self.refused
    }

    /// Feed bytes of the request head.
    pub(crate) fn read_head<'d>(&mut self, data: &'d [u8]) -> HeadRead<'d> {
        let Some(reader) = &mut self.reader else {
            return HeadRead::Complete(data);
        };
        let (used, status) = reader.feed(data);
        match status {
            HeadStatus::Partial => HeadRead::Partial,
            HeadStatus::TooLarge => HeadRead::TooLarge,
            HeadStatus::Complete => HeadRead::Complete(&data[used..]),
        }
    }

    /// The complete head (empty once answered).
    pub(crate) fn head(&self) -> &[u8] {
        self.reader.as_ref().map_or(&[], HeadReader::head)
    }

    /// Answer `101 Switching Protocols`; the head is dropped.
    pub(crate) fn accept(&mut self, req: &UpgradeRequest, subprotocol: Option<&str>) {
        write_accept(&mut self.out, req, subprotocol);
        self.reader = None;
    }

    /// Answer with a refusal; nothing else is ever written after it. A `HEAD` request's has no
    /// body.
    pub(crate) fn refuse(&mut self, rejection: Rejection) {
        let head_request = self.head().trim_ascii_start().starts_with(b"HEAD ");
        rejection.write(&mut self.out, !head_request);
        self.reader = None;
        self.refused = true;
    }

    /// The bytes to write now: the rest of the response, then (once accepted) `ws_output`.
    pub(crate) fn transmit<'a>(&'a self, ws_output: &'a [u8]) -> &'a [u8] {
        if self.sent < self.out.len() {
            &self.out[self.sent..]
        } else if self.refused || self.reader.is_some() {
            &[]
        } else {
            ws_output
        }
    }

    /// `n` bytes of [`Upgrade::transmit`] were written; returns how many of them were the
    /// WebSocket's output.
    pub(crate) fn advance(&mut self, n: usize) -> usize {
        let k = n.min(self.out.len() - self.sent);
        self.sent += k;
        if k > 0 && self.sent == self.out.len() {
            self.out = Vec::new();
            self.sent = 0;
        }
        n - k
    }

    /// Bytes held: the head being read and the response not yet written.
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub(crate) fn memory(&self) -> usize {
        self.out.capacity() + self.reader.as_ref().map_or(0, HeadReader::buffered)
    }
}

#[cfg(test)]
mod tests;
