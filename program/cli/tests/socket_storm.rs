//! `serve` under a storm of sockets from several peers at once, each connection one episode of a
//! seeded mix: well-behaved sessions whose bytes arrive in pieces of every size (a frame split
//! anywhere, messages in fragments with Pings between them, the first frame in the upgrade's own
//! packet), upgrades the bridge must refuse, WebSocket faults, and peers that vanish in the middle
//! of anything. The client's frames are written here by hand, not by the engine's encoder, so that
//! the test does not share the code it checks.
//!
//! What must hold (docs/protocol.md, "Upgrade refusals", "Framing", "Closing"):
//!
//! - a well-behaved session gets every request answered exactly once, with the answer its method
//!   calls for, and every Ping its Pong, in order; a Close gets the same code back, then the end of
//!   the stream;
//! - each refused upgrade gets the status the table gives for it, with `Connection: close` and a
//!   body of the length it announces, then the end of the stream;
//! - each fault gets the Close code listed for it (1002, 1003, 1007, 1009), then the end;
//! - a client connected all along is answered throughout, within the usual bound;
//! - afterwards no connection is left behind: 9 more clients beside it are accepted, the
//!   eleventh is refused with 503; SIGTERM closes all ten with 1001, exits 0, nothing panicked;
//! - the wire log (`--wire-log`), written for every connection meanwhile, is one JSON object a line,
//!   with a `connected` event for each upgrade.
//!
//! Run on both runtimes. `SOCKET_STORM_SEED=N` repeats a run, `SOCKET_STORM_EPISODES=N` sets each
//! peer's number of connections.

// Unix only, as the other tests that drive the built program (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::storm::{from_env, Rng};
use common::*;
use serde_json::{json, Value};

/// Peers connecting at once, beside the client connected all along.
const PEERS: u64 = 5;

/// RFC 6455's example key and the accept value it must get (section 1.3).
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// A frame as this test writes it: every field the peer controls, the length's encoding too.
struct Frame<'a> {
    fin: bool,
    rsv: u8,
    op: u8,
    payload: &'a [u8],
    mask: Option<[u8; 4]>,
    /// The length's encoding: `None` the shortest; `Some(126 | 127)` a longer one.
    long: Option<u8>,
    /// A length declared in place of the payload's own (the payload is then cut or partial).
    declared: Option<u64>,
}

impl<'a> Frame<'a> {
    fn new(op: u8, payload: &'a [u8]) -> Frame<'a> {
        Frame {
            fin: true,
            rsv: 0,
            op,
            payload,
            mask: Some([0x5a, 0x01, 0xc3, 0x7e]),
            long: None,
            declared: None,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = vec![(u8::from(self.fin) << 7) | (self.rsv << 4) | self.op];
        let len = self.declared.unwrap_or(self.payload.len() as u64);
        let m = if self.mask.is_some() { 0x80 } else { 0 };
        match self.long {
            None if len < 126 => out.push(m | len as u8),
            None if len <= 0xffff => {
                out.push(m | 126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            Some(126) => {
                out.push(m | 126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                out.push(m | 127);
                out.extend_from_slice(&len.to_be_bytes());
            }
        }
        match self.mask {
            Some(key) => {
                out.extend_from_slice(&key);
                out.extend(self.payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
            }
            None => out.extend_from_slice(self.payload),
        }
        out
    }
}

fn text(payload: &[u8]) -> Vec<u8> {
    Frame::new(1, payload).bytes()
}

fn close_frame(code: Option<u16>, reason: &[u8]) -> Vec<u8> {
    let mut payload = code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
    payload.extend_from_slice(reason);
    Frame::new(8, &payload).bytes()
}

/// Why reading stopped.
#[derive(Debug, PartialEq)]
enum End {
    Eof,
    TimedOut,
    Failed(String),
}

/// A frame the server sent: (opcode, payload). Checked on the way: FIN set, no RSV bit, no mask.
type Got = (u8, Vec<u8>);

/// One connection, from the peer's side: raw bytes both ways.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).unwrap();
        Raw { s, buf: Vec::new() }
    }

    /// Writes `bytes` in pieces of random sizes (one byte, a few, large), now and then after a
    /// pause, so that the server's reads end anywhere: inside a header line, a frame's length, a
    /// mask, a UTF-8 sequence. An error (the server closed first) is returned, not a failure.
    fn write_pieces(&mut self, r: &mut Rng, bytes: &[u8]) -> std::io::Result<()> {
        let mut at = 0;
        while at < bytes.len() {
            let n = match r.below(4) {
                0 => 1,
                1 => 1 + r.below(8),
                2 => 1 + r.below(200),
                _ => bytes.len() - at,
            }
            .min(bytes.len() - at);
            self.s.write_all(&bytes[at..at + n])?;
            at += n;
            if r.chance(3) {
                thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Reads more bytes, waiting at most until `by`.
    fn fill(&mut self, by: Instant) -> Result<(), End> {
        let left = by
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(End::TimedOut)?;
        self.s.set_read_timeout(Some(left)).unwrap();
        let mut chunk = [0u8; 16384];
        loop {
            return match self.s.read(&mut chunk) {
                Ok(0) => Err(End::Eof),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    Err(End::TimedOut)
                }
                Err(e) => Err(End::Failed(e.to_string())),
            };
        }
    }

    /// The HTTP response's status, head and body (by its `Content-Length`).
    fn response(&mut self, by: Instant) -> Result<(u16, String, Vec<u8>), String> {
        let end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            self.fill(by)
                .map_err(|e| format!("no response head ({e:?}): {:?}", self.buf))?;
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).map_err(|e| e.to_string())?;
        self.buf.drain(..end);
        let status = (head.split(' ').nth(1).and_then(|s| s.parse().ok()))
            .ok_or_else(|| format!("no status in {head:?}"))?;
        let length = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok());
        let mut body = Vec::new();
        if let Some(length) = length {
            while self.buf.len() < length {
                self.fill(by)
                    .map_err(|e| format!("{head:?}: body cut ({e:?})"))?;
            }
            body = self.buf.drain(..length).collect();
        }
        Ok((status, head, body))
    }

    /// The next frame the server sent.
    fn frame(&mut self, by: Instant) -> Result<Got, End> {
        loop {
            if let Some((got, used)) = parse_server_frame(&self.buf).map_err(End::Failed)? {
                self.buf.drain(..used);
                return Ok(got);
            }
            self.fill(by)?;
        }
    }

    /// Reads until the end of the stream: what must follow a Close (or a refusal). More frames
    /// or bytes are a failure.
    fn eof(&mut self, by: Instant) -> Result<(), String> {
        loop {
            if !self.buf.is_empty() {
                return Err(format!("bytes after the end: {:?}", self.buf));
            }
            match self.fill(by) {
                Ok(()) => {}
                Err(End::Eof) => return Ok(()),
                // The server closed with our bytes unread: a reset is its end too.
                Err(End::Failed(e)) if e.contains("reset") => return Ok(()),
                Err(e) => return Err(format!("the stream did not end: {e:?}")),
            }
        }
    }
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A server frame at the start of `buf`, and its length; `None` when it is not all there yet.
fn parse_server_frame(buf: &[u8]) -> Result<Option<(Got, usize)>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    if b0 & 0x80 == 0 || b0 & 0x70 != 0 || b1 & 0x80 != 0 {
        return Err(format!(
            "a server frame fragmented, with an RSV bit or masked: {b0:#x} {b1:#x}"
        ));
    }
    let (len, at) = match b1 & 0x7f {
        126 if buf.len() >= 4 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().unwrap()), 10),
        126 | 127 => return Ok(None),
        n => (u64::from(n), 2),
    };
    let len = usize::try_from(len).map_err(|_| "a length past usize".to_string())?;
    if buf.len() < at + len {
        return Ok(None);
    }
    Ok(Some(((b0 & 0x0f, buf[at..at + len].to_vec()), at + len)))
}

/// The upgrade request as the real client writes it (docs/protocol.md, "Upgrade"), its lines in a
/// list so that an episode can change them.
fn request_lines(port: u16, token: &str) -> Vec<String> {
    [
        "GET / HTTP/1.1".to_string(),
        format!("Host: 127.0.0.1:{port}"),
        "Connection: Upgrade".into(),
        "Upgrade: websocket".into(),
        "Sec-WebSocket-Version: 13".into(),
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits".into(),
        format!("Sec-WebSocket-Key: {KEY}"),
        "Sec-WebSocket-Protocol: mcp".into(),
        "User-Agent: claude-code/2.0.0 (cli)".into(),
        format!("X-Claude-Code-Ide-Authorization: {token}"),
    ]
    .to_vec()
}

fn head_of(lines: &[String], eol: &str) -> Vec<u8> {
    let mut head = lines.join(eol);
    head.push_str(eol);
    head.push_str(eol);
    head.into_bytes()
}

/// A request line changed the way an accepted one may be: the header names' case, the path, the
/// Host's loopback name, bare LF line ends.
fn accepted_head(r: &mut Rng, port: u16, token: &str) -> Vec<u8> {
    let mut lines = request_lines(port, token);
    if r.chance(30) {
        lines[0] = "GET /mcp HTTP/1.1".into();
    }
    if r.chance(30) {
        lines[1] = r
            .pick(&[
                format!("Host: localhost:{port}"),
                "Host: [::1]".into(),
                format!("host: 127.0.0.2:{port}"),
            ])
            .clone();
    }
    if r.chance(30) {
        for l in lines.iter_mut().skip(1) {
            let (k, v) = l.split_once(':').unwrap();
            *l = format!("{}:{v}", k.to_ascii_lowercase());
        }
    }
    let eol = if r.chance(15) { "\n" } else { "\r\n" };
    head_of(&lines, eol)
}

/// Upgrades `raw` (head in pieces, maybe with `first` in its packet) and checks the 101.
fn upgrade(r: &mut Rng, raw: &mut Raw, port: u16, token: &str, first: &[u8]) -> Result<(), String> {
    let mut out = accepted_head(r, port, token);
    out.extend_from_slice(first);
    raw.write_pieces(r, &out)
        .map_err(|e| format!("upgrade: {e}"))?;
    let (status, head, _) = raw.response(Instant::now() + WAIT)?;
    let fine = status == 101
        && header(&head, "sec-websocket-accept") == Some(ACCEPT)
        && header(&head, "sec-websocket-protocol") == Some("mcp")
        && header(&head, "sec-websocket-extensions").is_none();
    fine.then_some(())
        .ok_or_else(|| format!("a bad 101: {head:?}"))
}

/// What a request's answer must be.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A result.
    Result,
    /// An error with this code.
    Error(i64),
}

/// A well-behaved session: upgrade, initialize, calls (whole or in fragments, with Pings between
/// fragments, large ones, some in a batch when the version agreed has them, written in pieces),
/// then one of the ways a session ends.
fn session(r: &mut Rng, port: u16, token: &str) -> Result<String, String> {
    let mut raw = Raw::connect(port);
    // Batches are taken only with a version before 2025-06-18 (docs/protocol.md, "Batches").
    let batches = r.chance(30);
    let version = if batches { "2025-03-26" } else { "2025-06-18" };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "storm", "version": "1"}}});
    // The first frame in the upgrade's own packet, now and then.
    let first = if r.chance(30) {
        text(init.to_string().as_bytes())
    } else {
        Vec::new()
    };
    upgrade(r, &mut raw, port, token, &first)?;
    if first.is_empty() {
        raw.write_pieces(r, &text(init.to_string().as_bytes()))
            .map_err(|e| e.to_string())?;
    }
    let by = Instant::now() + WAIT;
    let (op, answer) = raw.frame(by).map_err(|e| format!("initialize: {e:?}"))?;
    let answer: Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
    if op != 1 || answer["id"] != json!(0) || answer["result"]["protocolVersion"] != version {
        return Err(format!("initialize answered {op}: {answer}"));
    }
    let mut messages =
        vec![r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string()];
    let mut waiting: BTreeMap<String, Expect> = BTreeMap::new();
    let mut nulls = 0; // errors answered with `id: null`
    let mut batch: Vec<String> = Vec::new();
    for n in 0..1 + r.below(6) {
        let id = if r.chance(50) {
            json!(n + 1)
        } else {
            json!(format!("s{n}-é"))
        };
        let (message, expect) = match r.below(9) {
            0 => (
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string(),
                Some(Expect::Result),
            ),
            1 | 2 => (
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "getWorkspaceFolders", "arguments": {}}})
                .to_string(),
                Some(Expect::Result),
            ),
            3 => {
                // Now and then a large one: it crosses many reads and fragments.
                let pad = "p".repeat(*r.pick(&[0, 10, 70_000, 1_500_000]));
                (
                    json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"pad": pad}})
                        .to_string(),
                    Some(Expect::Result),
                )
            }
            4 => (
                json!({"jsonrpc": "2.0", "id": id, "method": "no/such/method"}).to_string(),
                Some(Expect::Error(-32601)),
            ),
            5 => (
                json!({"jsonrpc": "1.0", "id": id, "method": "ping"}).to_string(),
                Some(Expect::Error(-32600)),
            ),
            6 => {
                nulls += 1;
                (format!("{{\"jsonrpc\": \"2.0\", \"id\": {id}, "), None)
            }
            // A notification: never answered.
            _ => (
                json!({"jsonrpc": "2.0", "method": "notifications/whatever"}).to_string(),
                None,
            ),
        };
        if let Some(expect) = expect {
            waiting.insert(id.to_string(), expect);
        }
        // Text that is not JSON cannot be an entry of a batch (the whole batch would be).
        if batches && !message.ends_with(", ") && r.chance(60) {
            batch.push(message);
        } else {
            messages.push(message);
        }
    }
    if !batch.is_empty() {
        messages.push(format!("[{}]", batch.join(",")));
    }
    // Each message in fragments (up to 5, Pings between them) or whole.
    let mut out = Vec::new();
    let mut pongs: Vec<Vec<u8>> = Vec::new();
    for message in &messages {
        let bytes = message.as_bytes();
        if r.chance(40) && bytes.len() > 4 {
            let parts = 2 + r.below(4);
            let mut cuts: Vec<usize> = (0..parts - 1).map(|_| r.below(bytes.len())).collect();
            cuts.sort_unstable();
            let bounds: Vec<usize> = [0].into_iter().chain(cuts).chain([bytes.len()]).collect();
            for (k, w) in bounds.windows(2).enumerate() {
                let mut f = Frame::new(if k == 0 { 1 } else { 0 }, &bytes[w[0]..w[1]]);
                f.fin = k + 2 == bounds.len();
                out.extend(f.bytes());
                if r.chance(40) {
                    let ping: Vec<u8> = (0..r.below(126)).map(|i| i as u8).collect();
                    out.extend(Frame::new(9, &ping).bytes());
                    pongs.push(ping);
                }
            }
        } else {
            out.extend(text(bytes));
        }
    }
    raw.write_pieces(r, &out)
        .map_err(|e| format!("calls: {e}"))?;
    if r.chance(10) {
        // A reader slower than the answers: they wait in the server's queue.
        thread::sleep(Duration::from_millis(r.below(100) as u64));
    }
    let by = Instant::now() + WAIT;
    let mut pong_at = 0;
    let mut left = waiting.len() + nulls;
    let mut answered = |v: &Value| -> Result<(), String> {
        if v["id"].is_null() {
            if v["error"]["code"] != json!(-32700) || nulls == 0 {
                return Err(format!("an answer with no id: {v}"));
            }
            nulls -= 1;
            return Ok(());
        }
        let expect = waiting
            .remove(&v["id"].to_string())
            .ok_or_else(|| format!("an answer to no call pending: {v}"))?;
        let fine = match expect {
            Expect::Result => v["result"].is_object() && v.get("error").is_none(),
            Expect::Error(code) => v["error"]["code"] == json!(code),
        };
        fine.then_some(())
            .ok_or_else(|| format!("expected {expect:?}, got {v}"))
    };
    while left > 0 || pong_at < pongs.len() {
        let (op, payload) = raw.frame(by).map_err(|e| {
            format!(
                "{left} answers and {} pongs not come: {e:?}",
                pongs.len() - pong_at
            )
        })?;
        match op {
            10 => {
                if pongs.get(pong_at) != Some(&payload) {
                    return Err(format!("pong {pong_at} out of turn: {payload:?}"));
                }
                pong_at += 1;
            }
            9 => {} // a keepalive Ping: not in so short a session, but allowed
            1 => {
                let v: Value = serde_json::from_slice(&payload).map_err(|e| e.to_string())?;
                // A batch's answers come as one array (never an empty one).
                let each = match v {
                    Value::Array(all) if !all.is_empty() && !batch.is_empty() => all,
                    Value::Array(_) => return Err(format!("an array out of place: {v}")),
                    one => vec![one],
                };
                for v in &each {
                    answered(v)?;
                    left -= 1;
                }
            }
            _ => return Err(format!("frame {op} in a session: {payload:?}")),
        }
    }
    // Ends: a Close (echoed, then the end of the stream), a vanish, a vanish mid-frame, a
    // half-close.
    match r.below(5) {
        0 | 1 => {
            let (code, reason): (Option<u16>, &[u8]) = match r.below(4) {
                0 => (None, b""),
                1 => (Some(1000), b"bye"),
                2 => (Some(*r.pick(&[1001, 1003, 1011, 1014, 3000, 4999])), b""),
                _ => (Some(4000), "é".as_bytes()),
            };
            raw.write_pieces(r, &close_frame(code, reason))
                .map_err(|e| e.to_string())?;
            let by = Instant::now() + WAIT;
            let (op, payload) = raw.frame(by).map_err(|e| format!("no Close back: {e:?}"))?;
            let echoed = client::close_code(&payload);
            if op != 8 || echoed != code {
                return Err(format!("Close {code:?} answered {op} {payload:?}"));
            }
            raw.eof(by)?;
        }
        2 => drop(raw),
        3 => {
            let f = text(br#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#);
            let _ = raw.s.write_all(&f[..1 + r.below(f.len() - 1)]);
        }
        _ => {
            raw.s.shutdown(Shutdown::Write).map_err(|e| e.to_string())?;
            raw.eof(Instant::now() + WAIT)?;
        }
    }
    Ok("session".into())
}

/// An upgrade the bridge must refuse, and the status the table gives it.
fn refusal(r: &mut Rng, port: u16, token: &str) -> Result<String, String> {
    let mut lines = request_lines(port, token);
    let find = |lines: &[String], name: &str| {
        lines
            .iter()
            .position(|l| {
                l.to_ascii_lowercase()
                    .starts_with(&name.to_ascii_lowercase())
            })
            .unwrap()
    };
    let case = r.below(14);
    let status = match case {
        0 => {
            lines.remove(find(&lines, "X-Claude-Code-Ide-Authorization"));
            401
        }
        1 => {
            let i = find(&lines, "X-Claude-Code-Ide-Authorization");
            lines[i] = format!("X-Claude-Code-Ide-Authorization: {token}x");
            401
        }
        2 => {
            lines[1] = "Host: attacker.example".into();
            403
        }
        3 => {
            lines.push("Origin: http://attacker.example".into());
            403
        }
        4 => {
            lines[0] = "POST / HTTP/1.1".into();
            405
        }
        5 => {
            lines[0] = "BREW / HTTP/1.1".into();
            501
        }
        6 => {
            let i = find(&lines, "Sec-WebSocket-Version");
            lines[i] = "Sec-WebSocket-Version: 8".into();
            426
        }
        7 => {
            lines[0] = "GET / HTTP/1.0".into();
            400
        }
        8 => {
            lines[0] = "GET / HTTP/2.0".into();
            505
        }
        9 => {
            let i = find(&lines, "Sec-WebSocket-Key");
            if r.chance(50) {
                lines.remove(i);
            } else {
                lines[i] = "Sec-WebSocket-Key: c2hvcnQ=".into();
            }
            400
        }
        10 => {
            lines.push("Expect: the-unexpected".into());
            417
        }
        11 => {
            if r.chance(50) {
                lines.push(format!("X-Pad: {}", "a".repeat(17 * 1024)));
            } else {
                lines.extend((0..70).map(|i| format!("X-Many-{i}: {i}")));
            }
            431
        }
        12 => {
            lines.push("Transfer-Encoding: chunked".into());
            400
        }
        _ => {
            lines.push("Host: 127.0.0.1".into());
            400
        }
    };
    let mut raw = Raw::connect(port);
    // The server may answer and close before the whole head is written (431).
    let _ = raw.write_pieces(r, &head_of(&lines, "\r\n"));
    let by = Instant::now() + WAIT;
    let (got, head, body) = raw.response(by).map_err(|e| format!("case {case}: {e}"))?;
    let length = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok());
    let fine = got == status
        && header(&head, "connection").is_some_and(|c| c.to_ascii_lowercase().contains("close"))
        && length == Some(body.len())
        && !body.is_empty();
    if !fine {
        return Err(format!(
            "case {case}: expected {status}, got {head:?} {body:?}"
        ));
    }
    raw.eof(by).map_err(|e| format!("case {case}: {e}"))?;
    Ok(format!("refused {status}"))
}

/// A WebSocket fault after a good upgrade (and `initialize`, now and then), and the Close code
/// docs/protocol.md lists for it; trailing bytes after the faulty frame now and then.
fn fault(r: &mut Rng, port: u16, token: &str) -> Result<String, String> {
    let mut raw = Raw::connect(port);
    upgrade(r, &mut raw, port, token, &[])?;
    let huge = b"x".repeat(200);
    let case = r.below(16);
    let (bytes, code) = match case {
        0 => {
            let mut f = Frame::new(1, b"{}");
            f.mask = None;
            (f.bytes(), 1002)
        }
        1 => {
            let mut f = Frame::new(1, b"{}");
            f.rsv = 1 << r.below(3);
            (f.bytes(), 1002)
        }
        2 => (Frame::new(*r.pick(&[3, 7, 11, 15]), b"").bytes(), 1002),
        3 => (Frame::new(9, &huge[..126]).bytes(), 1002),
        4 => {
            let mut f = Frame::new(9, b"p");
            f.fin = false;
            (f.bytes(), 1002)
        }
        5 => (Frame::new(0, b"orphan").bytes(), 1002),
        6 => {
            let mut f = Frame::new(1, b"{\"a\":");
            f.fin = false;
            let mut out = f.bytes();
            out.extend(text(b"1}"));
            (out, 1002)
        }
        7 => {
            let mut f = Frame::new(1, b"{}");
            f.long = Some(*r.pick(&[126, 127]));
            (f.bytes(), 1002)
        }
        8 => (close_frame(None, b"x"), 1002),
        9 => (
            close_frame(
                Some(*r.pick(&[0, 999, 1004, 1005, 1006, 1015, 2000, 5000])),
                b"",
            ),
            1002,
        ),
        10 => {
            // Impossible UTF-8, at once or inside a character split across fragments.
            let bad: [&[u8]; 3] = [b"{\"a\":\"\xff\"}", b"\xed\xa0\x80", b"\xc0\xaf"];
            let bad = bad[r.below(bad.len())];
            (text(bad), 1007)
        }
        11 => (close_frame(Some(1000), b"\xff\xfe"), 1007),
        12 => {
            let mut f = Frame::new(1, b"{\"x\":\"");
            f.declared = Some(*r.pick(&[10 * 1024 * 1024 + 1, 1 << 40]));
            (f.bytes(), 1009)
        }
        13 => {
            let mut f = Frame::new(1, b"{}");
            f.long = Some(127);
            f.declared = Some(1 << 63);
            (f.bytes(), 1002)
        }
        14 => (Frame::new(2, b"\x00\x01").bytes(), 1003),
        _ => {
            // A fragmented message whose fragments pass the message limit.
            let mut f = Frame::new(1, b"[");
            f.fin = false;
            let mut out = f.bytes();
            let mut g = Frame::new(0, b"1");
            g.fin = false;
            g.declared = Some(10 * 1024 * 1024);
            out.extend(g.bytes());
            (out, 1009)
        }
    };
    let mut out = Vec::new();
    if r.chance(30) {
        out.extend(text(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"storm","version":"1"}}}"#));
    }
    let answers = usize::from(!out.is_empty());
    out.extend(&bytes);
    if r.chance(30) {
        out.extend(text(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#));
    }
    // Written after the fault: the server may have closed already.
    let _ = raw.write_pieces(r, &out);
    let by = Instant::now() + WAIT;
    let mut seen = 0;
    let (op, payload) = loop {
        let got = raw
            .frame(by)
            .map_err(|e| format!("case {case}: no Close {code} ({e:?})"))?;
        if got.0 == 1 && seen < answers {
            seen += 1;
            continue;
        }
        break got;
    };
    let got = client::close_code(&payload);
    if op != 8 || got != Some(code) {
        return Err(format!(
            "case {case}: expected Close {code}, got {op} {payload:?}"
        ));
    }
    if code == 1003 {
        // The server waits for the client's Close.
        let _ = raw.s.write_all(&close_frame(Some(1000), b""));
    }
    raw.eof(by).map_err(|e| format!("case {case}: {e}"))?;
    Ok(format!("fault {code}"))
}

/// A peer that goes away: before a byte, in the middle of its upgrade, or in the middle of a frame.
fn vanish(r: &mut Rng, port: u16, token: &str) -> Result<String, String> {
    let mut raw = Raw::connect(port);
    let head = head_of(&request_lines(port, token), "\r\n");
    match r.below(3) {
        0 => {}
        1 => {
            let cut = r.below(head.len());
            let _ = raw.write_pieces(r, &head[..cut]);
        }
        _ => {
            upgrade(r, &mut raw, port, token, &[])?;
            let f = text(&b"[".repeat(300));
            let cut = r.below(f.len());
            let _ = raw.write_pieces(r, &f[..cut]);
        }
    }
    Ok("vanished".into())
}

/// One peer: `episodes` connections, one after the other.
fn peer(
    seed: u64,
    episodes: usize,
    port: u16,
    token: String,
) -> Result<BTreeMap<String, usize>, String> {
    let mut r = Rng(seed);
    let mut tally = BTreeMap::new();
    for i in 0..episodes {
        let kind = r.below(10);
        let done = match kind {
            0..=4 => session(&mut r, port, &token),
            5 | 6 => refusal(&mut r, port, &token),
            7 | 8 => fault(&mut r, port, &token),
            _ => vanish(&mut r, port, &token),
        };
        let what = done.map_err(|e| format!("peer seed {seed}, episode {i} (kind {kind}): {e}"))?;
        *tally.entry(what).or_default() += 1;
    }
    Ok(tally)
}

fn storm(runtime: &str) {
    let seed = from_env("SOCKET_STORM_SEED", 0x50C7);
    let episodes = from_env("SOCKET_STORM_EPISODES", 120) as usize;
    let sb = Sandbox::new();
    // Every message and connection event logged as well (`--wire-log`), from all the connections.
    let wire = sb.root().join("wire.jsonl");
    let wire_arg = wire.to_string_lossy().to_string();
    let args = ["--no-lsp", "--runtime", runtime, "--wire-log", &wire_arg];
    let mut s = Served::start(&sb, &args);
    let token = s.token();
    let port = s.port;
    let mut monitor = s.client();
    let peers: Vec<_> = (0..PEERS)
        .map(|k| {
            let token = token.clone();
            let seed = seed.wrapping_add(k);
            thread::spawn(move || peer(seed, episodes, port, token))
        })
        .collect();
    // The client connected all along is served while the storm lasts.
    let mut served = 0;
    while !peers.iter().all(|p| p.is_finished()) {
        let folders = json_of(&call(&mut monitor, "getWorkspaceFolders", json!({})));
        assert_eq!(
            folders["success"], true,
            "{runtime}, seed {seed}: {folders}"
        );
        served += 1;
        thread::sleep(Duration::from_millis(5));
    }
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for p in peers {
        let counted = p
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{runtime}: {e}\nstderr:\n{}", s.stderr.text()));
        for (k, n) in counted {
            *tally.entry(k).or_default() += n;
        }
    }
    assert!(served > 0);
    // No connection left behind: 9 more beside the monitor (10 in all) are taken, the 11th is
    // refused as the limit says. A peer's socket the server has not yet seen closed may still
    // count for a moment: tried again, within the bound.
    let give_up = Instant::now() + WAIT;
    let mut clients = loop {
        let tried: Vec<_> = (0..9)
            .map(|_| client::connect(port, Some(&token)))
            .collect();
        if tried.iter().all(|(status, _)| *status == 101) {
            break tried
                .into_iter()
                .map(|(_, c)| c.unwrap())
                .collect::<Vec<_>>();
        }
        let statuses: Vec<u16> = tried.iter().map(|t| t.0).collect();
        assert!(
            Instant::now() < give_up,
            "{runtime}, seed {seed}: connections left behind: {statuses:?}"
        );
        drop(tried);
        thread::sleep(Duration::from_millis(100));
    };
    let (status, _) = client::connect(port, Some(&token));
    assert_eq!(status, 503, "{runtime}: the eleventh connection");
    let folders = json_of(&call(&mut monitor, "getWorkspaceFolders", json!({})));
    assert_eq!(folders["success"], true, "{folders}");
    // A stop closes all ten with 1001.
    s.signal("TERM");
    for c in clients.iter_mut().chain([&mut monitor]) {
        let by = Instant::now() + WAIT;
        let close = loop {
            match c.recv_frame(by.saturating_duration_since(Instant::now())) {
                Some((8, payload)) => break payload,
                Some(_) => {}
                None => panic!("{runtime}: no Close at the stop ({})", c.why()),
            }
        };
        assert_eq!(client::close_code(&close), Some(1001), "{close:?}");
    }
    assert_eq!(s.wait_exit(), 0, "stderr:\n{}", s.stderr.text());
    assert!(
        !s.stderr.text().contains("panicked"),
        "{runtime}, seed {seed}:\n{}",
        s.stderr.text()
    );
    // The wire log: one JSON object a line, whatever the connections did; a `connected` event
    // for each upgrade at least (the sessions', the faults', the monitor's and the ten's).
    let log = std::fs::read_to_string(&wire).unwrap();
    let mut connected = 0;
    for line in log.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("{runtime}: a wire log line that is not JSON ({e}): {line:.300}")
        });
        assert!(v.is_object(), "{runtime}: {line:.300}");
        connected += usize::from(v["event"] == "connected");
    }
    let upgrades = tally.get("session").copied().unwrap_or(0)
        + (tally.iter())
            .filter(|(k, _)| k.starts_with("fault"))
            .map(|(_, n)| n)
            .sum::<usize>()
        + 1
        + clients.len();
    assert!(
        connected >= upgrades,
        "{runtime}: {connected} connected events for {upgrades} upgrades"
    );
    eprintln!(
        "{runtime}, seed {seed}: {served} monitor calls; {tally:?}; {} wire log lines",
        log.lines().count()
    );
}

#[test]
fn a_storm_of_sockets_on_threads() {
    storm("threads");
}

#[test]
fn a_storm_of_sockets_on_smol() {
    storm("smol");
}
