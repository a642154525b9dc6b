//! The HTTP/1.1 → WebSocket upgrade, server side (RFC 6455 §4; docs/protocol.md, "Upgrade" and
//! "Upgrade refusals").
//!
//! Bytes flow through four steps, none of which does any IO:
//!
//! 1. [`HeadReader`] collects the request head. It scans for `\r\n\r\n` once, byte by byte, remembering how
//!    far it got, and never holds more than the head-size limit.
//! 2. [`parse_upgrade`] parses that head once with `httparse` and checks that it is a well-formed WebSocket
//!    upgrade request (400, 426 or 431 otherwise).
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
//! let policy = Policy { token: Some("s3cret"), allowed_origins: &[], check_host: true };
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
    /// No `\r\n\r\n` yet and still under the limit: feed more bytes.
    Partial,
    /// The head, up to and including `\r\n\r\n`, is in [`HeadReader::head`].
    Complete,
    /// The limit was reached without `\r\n\r\n`: answer 431 ([`Rejection::HeadersTooLarge`]) and close.
    TooLarge,
}

/// Accumulates an HTTP request head, up to and including the blank line that ends it.
///
/// The search for `\r\n\r\n` is a four-state matcher that looks at every byte exactly once and carries its
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
    /// How many bytes of `\r\n\r\n` the end of `buf` matches (0..=4). This is the remembered search state:
    /// the scan resumes at `buf.len()` with it.
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
            self.matched = match (self.matched, byte) {
                (2, b'\r') => 3,
                (_, b'\r') => 1,
                (1, b'\n') => 2,
                (3, b'\n') => 4,
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
            // A full buffer without the terminator: any complete head would be longer than the limit.
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
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The status after the last [`feed`](Self::feed) (`Partial` before the first).
    pub fn status(&self) -> HeadStatus {
        self.status
    }

    /// How many bytes the terminator search has examined in total. Each byte is examined once, so this
    /// equals [`buffered`](Self::buffered): the work done is linear in the head's length however it is split.
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
    /// The request target, as sent (any path is accepted).
    pub path: String,
    /// The `Host` header (always present after [`parse_upgrade`]).
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
pub enum Rejection {
    /// 400: malformed request, missing or bad headers; the text says which.
    BadRequest(&'static str),
    /// 401: the token is missing or wrong.
    Unauthorized,
    /// 403: `Host` not loopback, or `Origin` not allowed; the text says which.
    Forbidden(&'static str),
    /// 426: `Sec-WebSocket-Version` missing or not 13 (the response says `Sec-WebSocket-Version: 13`).
    UpgradeRequired,
    /// 431: the head is over the size limit or has too many headers.
    HeadersTooLarge,
    /// 503: the connection limit is reached.
    ServiceUnavailable,
}

impl Rejection {
    /// The HTTP status code: 400, 401, 403, 426, 431 or 503.
    pub fn status(&self) -> u16 {
        match self {
            Rejection::BadRequest(_) => 400,
            Rejection::Unauthorized => 401,
            Rejection::Forbidden(_) => 403,
            Rejection::UpgradeRequired => 426,
            Rejection::HeadersTooLarge => 431,
            Rejection::ServiceUnavailable => 503,
        }
    }

    /// The reason phrase of the status line.
    pub fn reason_phrase(&self) -> &'static str {
        match self {
            Rejection::BadRequest(_) => "Bad Request",
            Rejection::Unauthorized => "Unauthorized",
            Rejection::Forbidden(_) => "Forbidden",
            Rejection::UpgradeRequired => "Upgrade Required",
            Rejection::HeadersTooLarge => "Request Header Fields Too Large",
            Rejection::ServiceUnavailable => "Service Unavailable",
        }
    }

    /// What is wrong, in a few words (the response body, without its trailing newline).
    pub fn detail(&self) -> &'static str {
        match self {
            Rejection::BadRequest(why) | Rejection::Forbidden(why) => why,
            Rejection::Unauthorized => "missing or wrong authentication token",
            Rejection::UpgradeRequired => "only WebSocket version 13 is supported",
            Rejection::HeadersTooLarge => "request head too large or too many headers",
            Rejection::ServiceUnavailable => "too many connections",
        }
    }

    /// Appends the full HTTP/1.1 response to `out`: the status line, `Connection: close`,
    /// `Content-Type: text/plain; charset=utf-8`, `Content-Length`, and a one-line body saying what is wrong;
    /// a 426 also carries `Sec-WebSocket-Version: 13`. Close the connection after writing it.
    ///
    /// ```
    /// use claude_ide_bridge::Rejection;
    ///
    /// let mut out = Vec::new();
    /// Rejection::Unauthorized.write_response(&mut out);
    /// assert!(out.starts_with(b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n"));
    /// ```
    pub fn write_response(&self, out: &mut Vec<u8>) {
        let body = self.detail();
        let head = format!(
            "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
            self.status(),
            self.reason_phrase(),
            body.len() + 1,
        );
        out.extend_from_slice(head.as_bytes());
        if *self == Rejection::UpgradeRequired {
            out.extend_from_slice(b"Sec-WebSocket-Version: 13\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body.as_bytes());
        out.push(b'\n');
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
/// - 431 [`Rejection::HeadersTooLarge`]: more than `max_headers` headers.
/// - 400 [`Rejection::BadRequest`]: malformed (including a head that ends before its last byte, or an
///   incomplete one), not `GET`, not `HTTP/1.1`, `Host` missing, empty or duplicated; `Upgrade` without the
///   token `websocket`; `Connection` without the token `upgrade`; `Sec-WebSocket-Key` missing, duplicated, or
///   not base64 of exactly 16 bytes; `Origin`, `Sec-WebSocket-Version` or the token header duplicated; any
///   of these single-valued headers not UTF-8.
/// - 426 [`Rejection::UpgradeRequired`]: `Sec-WebSocket-Version` missing or not exactly `13`.
///
/// Any request path is accepted. The token is not checked here: that is [`authorize`]'s job.
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
        Err(_) => return Err(Rejection::BadRequest("malformed HTTP request")),
    }
    if request.method != Some("GET") {
        return Err(Rejection::BadRequest("method must be GET"));
    }
    if request.version != Some(1) {
        return Err(Rejection::BadRequest("HTTP/1.1 required"));
    }
    let path = request.path.unwrap_or("/").to_owned();
    let headers: &[httparse::Header<'_>] = request.headers;

    let host = single(headers, "Host", "duplicate Host header")?;
    let host = match host {
        Some(h) if !h.is_empty() => h.to_owned(),
        _ => return Err(Rejection::BadRequest("missing Host header")),
    };
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

/// What [`authorize`] checks an upgrade request against.
#[derive(Clone, Copy)]
pub struct Policy<'a> {
    /// The token the client must send in `X-Claude-Code-Ide-Authorization`; `None` disables the check
    /// (only for a conformance echo server, never for a real host).
    pub token: Option<&'a str>,
    /// Origins allowed when the request carries an `Origin` header (ASCII case-insensitive, exact).
    /// A request without `Origin` is not affected: the real client sends none.
    pub allowed_origins: &'a [String],
    /// Refuse a `Host` that is not a loopback name or address (DNS rebinding defence).
    pub check_host: bool,
}

impl fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("token", &self.token.map(|_| Redacted))
            .field("allowed_origins", &self.allowed_origins)
            .field("check_host", &self.check_host)
            .finish()
    }
}

/// Checks a parsed upgrade request against the host's policy, in this order:
///
/// 1. When `check_host` is set, the `Host` must be loopback (see [`is_loopback_host`]), else 403.
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
/// let policy = Policy { token: None, allowed_origins: &[], check_host: true };
/// assert_eq!(authorize(&req, &policy).unwrap_err().status(), 403);
/// ```
pub fn authorize(req: &UpgradeRequest, policy: &Policy<'_>) -> Result<(), Rejection> {
    if policy.check_host && !req.host.as_deref().is_some_and(is_loopback_host) {
        return Err(Rejection::Forbidden("Host is not a loopback address"));
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
        if req.auth_token.is_none() || !matches {
            return Err(Rejection::Unauthorized);
        }
    }
    Ok(())
}

/// Whether a `Host` header value names the loopback interface, ASCII case-insensitively, with an optional
/// `:port` (decimal, at most 65535):
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
    if let Some(port) = port {
        let digits =
            !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
        if !digits || port.parse::<u16>().is_err() {
            return false;
        }
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

    /// Answer with a refusal; nothing else is ever written after it.
    pub(crate) fn refuse(&mut self, rejection: Rejection) {
        rejection.write_response(&mut self.out);
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
    pub(crate) fn memory(&self) -> usize {
        self.out.capacity() + self.reader.as_ref().map_or(0, HeadReader::buffered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TOKEN: &str = "Zm9vYmFyLXRva2VuLXdpdGgtMzItcmFuZG9tLWJ5dGVz";
    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    /// The header lines the real client (2.1.330) sends, in its order.
    fn real_lines() -> Vec<String> {
        vec![
            "GET / HTTP/1.1".into(),
            "Host: 127.0.0.1:51234".into(),
            "Connection: Upgrade".into(),
            "Upgrade: websocket".into(),
            "Sec-WebSocket-Version: 13".into(),
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits".into(),
            format!("Sec-WebSocket-Key: {KEY}"),
            "Sec-WebSocket-Protocol: mcp".into(),
            "User-Agent: claude-code/2.1.330 (cli)".into(),
            format!("X-Claude-Code-Ide-Authorization: {TOKEN}"),
        ]
    }

    fn join(lines: &[String]) -> Vec<u8> {
        let mut out = lines.join("\r\n").into_bytes();
        out.extend_from_slice(b"\r\n\r\n");
        out
    }

    /// The real request with the header starting with `name` removed.
    fn without(name: &str) -> Vec<u8> {
        let lines: Vec<String> = real_lines()
            .into_iter()
            .filter(|l| !l.starts_with(&format!("{name}:")))
            .collect();
        join(&lines)
    }

    /// The real request with the header `name` replaced by `line` (or the request line if `name` is "GET").
    fn replaced(name: &str, line: &str) -> Vec<u8> {
        let lines: Vec<String> = real_lines()
            .into_iter()
            .map(|l| {
                let hit = if name == "GET" {
                    l.starts_with("GET ")
                } else {
                    l.starts_with(&format!("{name}:"))
                };
                if hit {
                    line.to_owned()
                } else {
                    l
                }
            })
            .collect();
        join(&lines)
    }

    /// The real request with `line` added at the end of the headers.
    fn with(line: &str) -> Vec<u8> {
        let mut lines = real_lines();
        lines.push(line.to_owned());
        join(&lines)
    }

    fn policy() -> Policy<'static> {
        Policy {
            token: Some(TOKEN),
            allowed_origins: &[],
            check_host: true,
        }
    }

    /// Runs the whole upgrade the way a server would and returns what it writes.
    fn respond(wire: &[u8], policy: &Policy<'_>) -> (Result<UpgradeRequest, Rejection>, Vec<u8>) {
        let mut reader = HeadReader::new(16 * 1024);
        let (_, status) = reader.feed(wire);
        let result = match status {
            HeadStatus::Complete => parse_upgrade(reader.head(), 64)
                .and_then(|req| authorize(&req, policy).map(|()| req)),
            HeadStatus::TooLarge => Err(Rejection::HeadersTooLarge),
            HeadStatus::Partial => panic!("test request is incomplete"),
        };
        let mut out = Vec::new();
        match &result {
            Ok(req) => write_accept(&mut out, req, req.offers_protocol("mcp").then_some("mcp")),
            Err(rejection) => rejection.write_response(&mut out),
        }
        (result, out)
    }

    /// Splits a response into its head lines and body, checking the framing.
    fn split_response(out: &[u8]) -> (Vec<String>, String) {
        let text = std::str::from_utf8(out).expect("response is UTF-8");
        let (head, body) = text
            .split_once("\r\n\r\n")
            .expect("response has a blank line");
        (
            head.split("\r\n").map(str::to_owned).collect(),
            body.to_owned(),
        )
    }

    /// Asserts the refusal's status, and the headers every refusal must carry.
    fn assert_refusal(out: &[u8], status_line: &str) {
        let (lines, body) = split_response(out);
        assert_eq!(lines[0], status_line);
        assert!(lines.contains(&"Connection: close".to_owned()), "{lines:?}");
        assert!(lines.contains(&"Content-Type: text/plain; charset=utf-8".to_owned()));
        assert!(lines.contains(&format!("Content-Length: {}", body.len())));
        assert!(!body.is_empty() && body.ends_with('\n'));
        assert!(!body.contains(TOKEN));
        let has_version = lines.contains(&"Sec-WebSocket-Version: 13".to_owned());
        assert_eq!(has_version, status_line.contains(" 426 "), "{lines:?}");
        assert!(!lines.iter().any(|l| l.starts_with("Upgrade:")));
    }

    #[test]
    fn rfc6455_accept_vector() {
        assert_eq!(accept_key(KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn real_client_request_is_accepted_with_mcp() {
        let wire = join(&real_lines());
        let (result, out) = respond(&wire, &policy());
        let req = result.expect("accepted");
        assert_eq!(
            out,
            b"HTTP/1.1 101 Switching Protocols\r\n\
              Upgrade: websocket\r\n\
              Connection: Upgrade\r\n\
              Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
              Sec-WebSocket-Protocol: mcp\r\n\
              \r\n"
        );
        assert_eq!(req.path, "/");
        assert_eq!(req.host.as_deref(), Some("127.0.0.1:51234"));
        assert_eq!(req.origin, None);
        assert_eq!(req.key, KEY);
        assert_eq!(req.protocols, ["mcp"]);
        assert!(req.extensions_offered);
        assert_eq!(req.user_agent.as_deref(), Some("claude-code/2.1.330 (cli)"));
        assert_eq!(req.auth_token(), Some(TOKEN));
        assert!(req.offers_protocol("mcp"));
        assert!(!req.offers_protocol("MCP"));
    }

    #[test]
    fn accept_never_declares_extensions_or_unoffered_protocols() {
        let req = parse_upgrade(&join(&real_lines()), 64).unwrap();
        let mut out = Vec::new();
        write_accept(&mut out, &req, Some("graphql-ws"));
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("Sec-WebSocket-Protocol"));
        assert!(!text.contains("Sec-WebSocket-Extensions"));
        assert!(text.ends_with("\r\n\r\n"));

        let mut out = Vec::new();
        write_accept(&mut out, &req, None);
        assert!(!String::from_utf8(out)
            .unwrap()
            .contains("Sec-WebSocket-Protocol"));
    }

    #[test]
    fn other_paths_lowercase_names_and_list_values_are_accepted() {
        let wire = b"GET /mcp?x=1 HTTP/1.1\r\nhost: LOCALHOST\r\nupgrade: WebSocket\r\n\
            connection: keep-alive,  UPGRADE \r\nsec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\
            sec-websocket-version: 13\r\nsec-websocket-protocol: a , b\r\n\
            Sec-WebSocket-Protocol: mcp\r\nSec-WebSocket-Protocol: ,\r\n\
            x-claude-code-ide-authorization: "
            .iter()
            .chain(TOKEN.as_bytes())
            .chain(b"\r\n\r\n")
            .copied()
            .collect::<Vec<u8>>();
        let (result, out) = respond(&wire, &policy());
        let req = result.expect("accepted");
        assert_eq!(req.path, "/mcp?x=1");
        assert_eq!(req.protocols, ["a", "b", "mcp"]);
        assert!(!req.extensions_offered);
        assert_eq!(req.user_agent, None);
        assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
        assert!(out.ends_with(b"Sec-WebSocket-Protocol: mcp\r\n\r\n"));
    }

    #[test]
    fn bad_requests_are_400() {
        let k15 = STANDARD.encode([7u8; 15]);
        let k17 = STANDARD.encode([7u8; 17]);
        let rows: Vec<(&str, Vec<u8>)> = vec![
            ("POST", replaced("GET", "POST / HTTP/1.1")),
            ("HTTP/1.0", replaced("GET", "GET / HTTP/1.0")),
            (
                "garbage",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n".to_vec(),
            ),
            ("bad request line", replaced("GET", "GET  /  HTTP/1.1")),
            ("bad header name", with("Bad Header: x")),
            ("no Upgrade", without("Upgrade")),
            ("Upgrade h2c", replaced("Upgrade", "Upgrade: h2c")),
            (
                "Upgrade websocketx",
                replaced("Upgrade", "Upgrade: websocketx"),
            ),
            ("no Connection", without("Connection")),
            (
                "Connection keep-alive",
                replaced("Connection", "Connection: keep-alive"),
            ),
            (
                "Connection upgraded",
                replaced("Connection", "Connection: upgraded"),
            ),
            ("no key", without("Sec-WebSocket-Key")),
            ("duplicate key", with(&format!("Sec-WebSocket-Key: {KEY}"))),
            (
                "key not base64",
                replaced(
                    "Sec-WebSocket-Key",
                    "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!==",
                ),
            ),
            (
                "key no padding",
                replaced(
                    "Sec-WebSocket-Key",
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ",
                ),
            ),
            (
                "key 15 bytes",
                replaced("Sec-WebSocket-Key", &format!("Sec-WebSocket-Key: {k15}")),
            ),
            (
                "key 17 bytes",
                replaced("Sec-WebSocket-Key", &format!("Sec-WebSocket-Key: {k17}")),
            ),
            (
                "key empty",
                replaced("Sec-WebSocket-Key", "Sec-WebSocket-Key: "),
            ),
            ("no Host", without("Host")),
            ("empty Host", replaced("Host", "Host: ")),
            ("duplicate Host", with("Host: evil.example")),
            (
                "duplicate token",
                with("x-claude-code-ide-authorization: other"),
            ),
            (
                "duplicate Origin",
                join(&{
                    let mut l = real_lines();
                    l.push("Origin: http://a".into());
                    l.push("Origin: http://b".into());
                    l
                }),
            ),
            // Structural errors come before the version check.
            ("no key, bad version", {
                let mut l: Vec<String> = real_lines();
                l.retain(|l| !l.starts_with("Sec-WebSocket-Key"));
                l[3] = "Sec-WebSocket-Version: 8".into();
                join(&l)
            }),
        ];
        for (what, wire) in rows {
            let (result, out) = respond(&wire, &policy());
            match result {
                Err(Rejection::BadRequest(_)) => {}
                other => panic!("{what}: expected 400, got {other:?}"),
            }
            assert_refusal(&out, "HTTP/1.1 400 Bad Request");
        }
    }

    #[test]
    fn head_with_trailing_or_missing_bytes_is_400() {
        let mut wire = join(&real_lines());
        wire.extend_from_slice(b"\x81\x80");
        assert!(matches!(
            parse_upgrade(&wire, 64),
            Err(Rejection::BadRequest(_))
        ));
        let wire = join(&real_lines());
        let cut = &wire[..wire.len() - 2];
        assert!(matches!(
            parse_upgrade(cut, 64),
            Err(Rejection::BadRequest(_))
        ));
        let bare_lf = b"GET / HTTP/1.1\nHost: localhost\n\n\r\n\r\n";
        assert!(matches!(
            parse_upgrade(bare_lf, 64),
            Err(Rejection::BadRequest(_))
        ));
        assert!(matches!(
            parse_upgrade(b"", 64),
            Err(Rejection::BadRequest(_))
        ));
    }

    #[test]
    fn wrong_version_is_426_with_version_header() {
        let rows = [
            without("Sec-WebSocket-Version"),
            replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 8"),
            replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 13, 8"),
            replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 013"),
            replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: "),
        ];
        for wire in rows {
            let (result, out) = respond(&wire, &policy());
            assert_eq!(result.unwrap_err(), Rejection::UpgradeRequired);
            assert_refusal(&out, "HTTP/1.1 426 Upgrade Required");
        }
        let mut out = Vec::new();
        Rejection::UpgradeRequired.write_response(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 426 Upgrade Required\r\nConnection: close\r\n\
              Content-Type: text/plain; charset=utf-8\r\nContent-Length: 39\r\n\
              Sec-WebSocket-Version: 13\r\n\r\nonly WebSocket version 13 is supported\n"
        );
    }

    #[test]
    fn too_many_headers_is_431() {
        let mut lines = real_lines();
        for i in 0..(64 - lines.len() + 2) {
            lines.push(format!("X-Filler-{i}: y"));
        }
        assert_eq!(lines.len() - 1, 65);
        let (result, out) = respond(&join(&lines), &policy());
        assert_eq!(result.unwrap_err(), Rejection::HeadersTooLarge);
        assert_refusal(&out, "HTTP/1.1 431 Request Header Fields Too Large");
        // Exactly 64 headers is fine.
        lines.pop();
        assert!(respond(&join(&lines), &policy()).0.is_ok());
    }

    #[test]
    fn oversized_head_is_431() {
        let big = with(&format!("X-Padding: {}", "a".repeat(16 * 1024)));
        let (result, out) = respond(&big, &policy());
        assert_eq!(result.unwrap_err(), Rejection::HeadersTooLarge);
        assert_refusal(&out, "HTTP/1.1 431 Request Header Fields Too Large");
    }

    #[test]
    fn token_missing_or_wrong_is_401() {
        let rows = [
            without("X-Claude-Code-Ide-Authorization"),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                "X-Claude-Code-Ide-Authorization: wrong",
            ),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                &format!(
                    "X-Claude-Code-Ide-Authorization: {}",
                    &TOKEN[..TOKEN.len() - 1]
                ),
            ),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                &format!("X-Claude-Code-Ide-Authorization: {TOKEN}x"),
            ),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                &format!(
                    "X-Claude-Code-Ide-Authorization: {}",
                    TOKEN.to_ascii_lowercase()
                ),
            ),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                "X-Claude-Code-Ide-Authorization: ",
            ),
            replaced(
                "X-Claude-Code-Ide-Authorization",
                &format!("Authorization: Bearer {TOKEN}"),
            ),
        ];
        for wire in rows {
            let (result, out) = respond(&wire, &policy());
            assert_eq!(result.unwrap_err(), Rejection::Unauthorized);
            assert_refusal(&out, "HTTP/1.1 401 Unauthorized");
        }
        // No token configured (echo server): no header needed.
        let open = Policy {
            token: None,
            ..policy()
        };
        assert!(respond(&without("X-Claude-Code-Ide-Authorization"), &open)
            .0
            .is_ok());
    }

    #[test]
    fn foreign_origin_is_403() {
        let allowed = vec!["vscode-webview://abc".to_owned()];
        let policy = Policy {
            allowed_origins: &allowed,
            ..policy()
        };
        for origin in [
            "https://evil.example",
            "null",
            "http://127.0.0.1:51234",
            "vscode-webview://abcd",
        ] {
            let (result, out) = respond(&with(&format!("Origin: {origin}")), &policy);
            assert_eq!(
                result.unwrap_err(),
                Rejection::Forbidden("Origin not allowed"),
                "{origin}"
            );
            assert_refusal(&out, "HTTP/1.1 403 Forbidden");
        }
        for origin in ["vscode-webview://abc", "VSCode-WebView://ABC"] {
            assert!(
                respond(&with(&format!("Origin: {origin}")), &policy)
                    .0
                    .is_ok(),
                "{origin}"
            );
        }
    }

    #[test]
    fn non_loopback_host_is_403() {
        let rebinding = [
            "evil.example",
            "evil.example:51234",
            "127.0.0.1.evil.com",
            "127.0.0.1.evil.com:51234",
            "127.0.0.1.nip.io",
            "localhost.evil.com",
            "localhost.:51234.evil.com",
            "evil-localhost",
            "sub.localhost",
            "0.0.0.0:51234",
            "10.0.0.1",
            "127.1",
            "127.0.0.01",
            "2130706433",
            "0x7f000001",
            "::1",
            "[::2]",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[fe80::1]:80",
            "[::ffff:10.0.0.1]",
            "localhost:",
            "localhost:65536",
            "localhost:+80",
            "localhost:80:80",
            "localhost :80",
            "127.0.0.1:51234 ",
        ];
        for host in rebinding {
            assert!(!is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example:51234",
            "127.0.0.1.evil.com",
            "localhost.evil.com",
        ] {
            let (result, out) = respond(&replaced("Host", &format!("Host: {host}")), &policy());
            assert!(matches!(result, Err(Rejection::Forbidden(_))), "{host}");
            assert_refusal(&out, "HTTP/1.1 403 Forbidden");
        }
        // With the check off, the same request only needs the token.
        let lax = Policy {
            check_host: false,
            ..policy()
        };
        assert!(respond(&replaced("Host", "Host: evil.example"), &lax)
            .0
            .is_ok());
    }

    #[test]
    fn loopback_hosts_are_accepted() {
        let loopback = [
            "localhost",
            "LOCALHOST",
            "localhost.",
            "LocalHost.:8080",
            "localhost:51234",
            "127.0.0.1",
            "127.0.0.1:51234",
            "127.255.3.4:1",
            "[::1]",
            "[::1]:51234",
            "[0:0:0:0:0:0:0:1]:80",
            "[::ffff:7f00:1]",
            "[::ffff:127.0.0.1]:51234",
        ];
        for host in loopback {
            assert!(is_loopback_host(host), "{host}");
            let wire = replaced("Host", &format!("Host: {host}"));
            assert!(respond(&wire, &policy()).0.is_ok(), "{host}");
        }
    }

    #[test]
    fn policy_checks_run_host_then_origin_then_token() {
        let all_bad = join(&{
            let mut l = real_lines();
            l[1] = "Host: evil.example".into();
            l.retain(|l| !l.starts_with("X-Claude"));
            l.push("Origin: https://evil.example".into());
            l
        });
        let req = parse_upgrade(&all_bad, 64).unwrap();
        assert_eq!(
            authorize(&req, &policy()),
            Err(Rejection::Forbidden("Host is not a loopback address"))
        );
        let no_host_check = Policy {
            check_host: false,
            ..policy()
        };
        assert_eq!(
            authorize(&req, &no_host_check),
            Err(Rejection::Forbidden("Origin not allowed"))
        );
        let allowed = vec!["https://evil.example".to_owned()];
        let origin_ok = Policy {
            allowed_origins: &allowed,
            ..no_host_check
        };
        assert_eq!(authorize(&req, &origin_ok), Err(Rejection::Unauthorized));
    }

    #[test]
    fn every_refusal_response_is_well_formed() {
        let all = [
            (
                Rejection::BadRequest("missing Host header"),
                "HTTP/1.1 400 Bad Request",
            ),
            (Rejection::Unauthorized, "HTTP/1.1 401 Unauthorized"),
            (
                Rejection::Forbidden("Origin not allowed"),
                "HTTP/1.1 403 Forbidden",
            ),
            (Rejection::UpgradeRequired, "HTTP/1.1 426 Upgrade Required"),
            (
                Rejection::HeadersTooLarge,
                "HTTP/1.1 431 Request Header Fields Too Large",
            ),
            (
                Rejection::ServiceUnavailable,
                "HTTP/1.1 503 Service Unavailable",
            ),
        ];
        for (rejection, line) in all {
            let mut out = b"kept".to_vec();
            rejection.write_response(&mut out);
            assert!(out.starts_with(b"kept"), "appends");
            assert_refusal(&out[4..], line);
            assert_eq!(line[9..12].parse::<u16>().unwrap(), rejection.status());
            assert!(rejection.to_string().starts_with(&line[9..]));
        }
        let mut out = Vec::new();
        Rejection::Unauthorized.write_response(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\
              Content-Type: text/plain; charset=utf-8\r\nContent-Length: 38\r\n\r\n\
              missing or wrong authentication token\n"
        );
    }

    #[test]
    fn debug_redacts_the_token() {
        let req = parse_upgrade(&join(&real_lines()), 64).unwrap();
        let shown = format!("{req:?} {req:#?}");
        assert!(!shown.contains(TOKEN), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(shown.contains("claude-code/2.1.330"));
        let policy = policy();
        let shown = format!("{policy:?}");
        assert!(
            !shown.contains(TOKEN) && shown.contains("<redacted>"),
            "{shown}"
        );
        let none = parse_upgrade(&without("X-Claude-Code-Ide-Authorization"), 64).unwrap();
        assert!(format!("{none:?}").contains("auth_token: None"));
    }

    #[test]
    fn constant_time_eq_compares_exactly() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(TOKEN.as_bytes(), TOKEN.as_bytes()));
        assert!(!constant_time_eq(b"a", b""));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"xbc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    fn feed_whole(max: usize, input: &[u8]) -> (usize, HeadStatus, Vec<u8>) {
        let mut reader = HeadReader::new(max);
        let (used, status) = reader.feed(input);
        (used, status, reader.head().to_vec())
    }

    fn feed_split(max: usize, input: &[u8], cuts: &[usize]) -> (usize, HeadStatus, Vec<u8>) {
        let mut reader = HeadReader::new(max);
        let mut total = 0;
        let mut status = HeadStatus::Partial;
        let mut start = 0;
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        bounds.push(input.len());
        bounds.sort_unstable();
        for end in bounds {
            let chunk = &input[start..end];
            let (used, s) = reader.feed(chunk);
            assert!(used <= chunk.len());
            if s == HeadStatus::Partial {
                assert_eq!(used, chunk.len());
            }
            assert!(reader.buffered() <= max);
            assert_eq!(reader.bytes_scanned(), reader.buffered());
            total += used;
            status = s;
            start = end;
            if s != HeadStatus::Partial {
                // The rest of the input belongs to the next layer (or is refused).
                break;
            }
        }
        (total, status, reader.head().to_vec())
    }

    #[test]
    fn byte_at_a_time_equals_whole() {
        let wire = join(&real_lines());
        let whole = feed_whole(16 * 1024, &wire);
        assert_eq!(whole, (wire.len(), HeadStatus::Complete, wire.clone()));
        let mut reader = HeadReader::new(16 * 1024);
        for (i, byte) in wire.iter().enumerate() {
            let (used, status) = reader.feed(std::slice::from_ref(byte));
            assert_eq!(used, 1);
            let expected = if i + 1 == wire.len() {
                HeadStatus::Complete
            } else {
                HeadStatus::Partial
            };
            assert_eq!(status, expected);
        }
        assert_eq!(reader.head(), &wire[..]);
        assert_eq!(reader.feed(b"more"), (0, HeadStatus::Complete));
        assert_eq!(reader.status(), HeadStatus::Complete);
    }

    #[test]
    fn pipelined_bytes_are_left_unconsumed() {
        let head = join(&real_lines());
        let frame = b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58";
        let mut wire = head.clone();
        wire.extend_from_slice(frame);
        let mut reader = HeadReader::new(16 * 1024);
        let (used, status) = reader.feed(&wire);
        assert_eq!(status, HeadStatus::Complete);
        assert_eq!(used, head.len());
        assert_eq!(&wire[used..], frame);
        assert_eq!(reader.head(), &head[..]);
        // Also when the frame arrives in the same read as the last byte of the terminator.
        let mut reader = HeadReader::new(16 * 1024);
        assert_eq!(reader.feed(&wire[..head.len() - 1]).1, HeadStatus::Partial);
        assert_eq!(
            reader.feed(&wire[head.len() - 1..]),
            (1, HeadStatus::Complete)
        );
    }

    #[test]
    fn terminator_is_found_across_reads_and_after_stray_crs() {
        let mut reader = HeadReader::new(64);
        for chunk in [&b"GET / HTTP/1.1\r"[..], b"\n", b"H: x\r\r", b"\n\r", b"\n"] {
            reader.feed(chunk);
        }
        assert_eq!(reader.status(), HeadStatus::Complete);
        assert_eq!(reader.head(), b"GET / HTTP/1.1\r\nH: x\r\r\n\r\n");
        let mut reader = HeadReader::new(64);
        assert_eq!(
            reader.feed(b"\r\n\n\r\n\r\r\n\nX"),
            (10, HeadStatus::Partial)
        );
        assert_eq!(reader.feed(b"\r\n\r\nY"), (4, HeadStatus::Complete));
    }

    #[test]
    fn stream_without_terminator_is_too_large_and_bounded() {
        let max = 16 * 1024;
        let stream = vec![b'a'; 1024 * 1024];
        let mut reader = HeadReader::new(max);
        let (used, status) = reader.feed(&stream);
        assert_eq!((used, status), (max, HeadStatus::TooLarge));
        assert_eq!(reader.buffered(), max);
        assert!(reader.buf.capacity() <= max);
        assert_eq!(reader.feed(&stream), (0, HeadStatus::TooLarge));

        // In 1000-byte reads: the same bytes kept, never more than the limit.
        let mut reader = HeadReader::new(max);
        let mut consumed = 0;
        for chunk in stream.chunks(1000) {
            let (used, status) = reader.feed(chunk);
            consumed += used;
            assert!(reader.buffered() <= max);
            assert!(reader.buf.capacity() <= max);
            if status == HeadStatus::TooLarge {
                break;
            }
        }
        assert_eq!((consumed, reader.status()), (max, HeadStatus::TooLarge));
    }

    #[test]
    fn head_of_exactly_the_limit_is_complete() {
        let wire = join(&real_lines());
        assert_eq!(feed_whole(wire.len(), &wire).1, HeadStatus::Complete);
        assert_eq!(
            feed_whole(wire.len() - 1, &wire),
            (
                wire.len() - 1,
                HeadStatus::TooLarge,
                wire[..wire.len() - 1].to_vec()
            )
        );
        assert_eq!(HeadReader::new(0).feed(b"x"), (0, HeadStatus::TooLarge));
    }

    #[test]
    fn scan_is_linear() {
        // 16 KiB one byte at a time under a larger limit: each feed examines exactly the new byte.
        let n = 16 * 1024;
        let mut reader = HeadReader::new(2 * n);
        let line = b"X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        for i in 0..n {
            let before = reader.bytes_scanned();
            let (used, status) = reader.feed(&line[i % line.len()..][..1]);
            assert_eq!((used, status), (1, HeadStatus::Partial));
            assert_eq!(reader.bytes_scanned(), before + 1);
        }
        assert_eq!(reader.bytes_scanned(), n);
        assert_eq!(reader.buffered(), n);
        // Bytes refused after completion are not examined.
        assert_eq!(reader.feed(b"\r\n\r\nGET"), (4, HeadStatus::Complete));
        reader.feed(&[b'z'; 100]);
        assert_eq!(reader.bytes_scanned(), n + 4);
    }

    fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![4 => any::<u8>(), 1 => Just(b'\r'), 1 => Just(b'\n')],
            0..600,
        )
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in wire_bytes(), max in 0usize..700, max_headers in 0usize..80) {
            let mut reader = HeadReader::new(max);
            let (used, status) = reader.feed(&bytes);
            prop_assert!(used <= bytes.len());
            prop_assert!(reader.buffered() <= max);
            if let Ok(req) = parse_upgrade(reader.head(), max_headers) {
                let _ = authorize(&req, &policy());
                let mut out = Vec::new();
                write_accept(&mut out, &req, Some("mcp"));
            }
            let _ = parse_upgrade(&bytes, max_headers).map_err(|r| r.write_response(&mut Vec::new()));
            let _ = is_loopback_host(&String::from_utf8_lossy(&bytes));
            let _ = status;
        }

        #[test]
        fn mutated_real_requests_never_panic(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        ) {
            let mut wire = join(&real_lines());
            for (at, byte) in edits {
                let i = at.index(wire.len());
                wire[i] = byte;
            }
            let (result, out) = respond_lenient(&wire);
            if let Err(rejection) = result {
                let (lines, _) = split_response(&out);
                let prefix = format!("HTTP/1.1 {} ", rejection.status());
                prop_assert!(lines[0].starts_with(&prefix));
            } else {
                prop_assert!(out.starts_with(b"HTTP/1.1 101 "));
            }
        }

        #[test]
        fn head_reader_is_split_invariant(
            bytes in wire_bytes(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
            max in 1usize..700,
        ) {
            prop_assert_eq!(feed_whole(max, &bytes), feed_split(max, &bytes, &cuts));
        }

        #[test]
        fn real_request_is_split_invariant(
            cuts in prop::collection::vec(any::<usize>(), 0..12),
            tail in prop::collection::vec(any::<u8>(), 0..32),
        ) {
            let head = join(&real_lines());
            let mut wire = head.clone();
            wire.extend_from_slice(&tail);
            let got = feed_split(16 * 1024, &wire, &cuts);
            prop_assert_eq!(got, (head.len(), HeadStatus::Complete, head));
        }
    }

    /// Like `respond`, for inputs that may be incomplete.
    fn respond_lenient(wire: &[u8]) -> (Result<UpgradeRequest, Rejection>, Vec<u8>) {
        let mut reader = HeadReader::new(16 * 1024);
        if reader.feed(wire).1 == HeadStatus::Partial {
            return (Err(Rejection::BadRequest("incomplete")), {
                let mut out = Vec::new();
                Rejection::BadRequest("incomplete").write_response(&mut out);
                out
            });
        }
        respond(wire, &policy())
    }
}
