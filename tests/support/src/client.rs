//! A tiny blocking WebSocket test client on the core's frame codec, used by the runtime
//! crates' and the program's tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use claude_ide_bridge::ws::{apply_mask, decode_header, encode_frame, OpCode};
use serde_json::{json, Value};

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    next_id: u64,
    /// Why the last receive ended without a message, when it was not a timeout (for the message
    /// of a failing test); see [`Client::why`].
    ended: Option<String>,
}

/// The upgrade request [`connect`] sends to `port`, with `token` when given.
pub fn upgrade_request(port: u16, token: Option<&str>) -> String {
    upgrade_request_to("127.0.0.1", port, token)
}

/// The upgrade request [`connect_to`] sends to `host` (as claude writes it in its URL: an IPv6
/// address in brackets) and `port`.
fn upgrade_request_to(host: &str, port: u16, token: Option<&str>) -> String {
    let mut req = format!(
        "GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: mcp\r\n"
    );
    if let Some(t) = token {
        req.push_str(&format!("X-Claude-Code-Ide-Authorization: {t}\r\n"));
    }
    req.push_str("\r\n");
    req
}

/// Connects and sends the upgrade; returns the HTTP status and, for 101, the client.
pub fn connect(port: u16, token: Option<&str>) -> (u16, Option<Client>) {
    connect_to("127.0.0.1", port, token).expect("connect")
}

/// [`connect`] to `host` as claude does when `CLAUDE_CODE_IDE_HOST_OVERRIDE` names it
/// (`[::1]`, `127.0.0.2`): `None` when nothing listens there.
pub fn connect_to(host: &str, port: u16, token: Option<&str>) -> Option<(u16, Option<Client>)> {
    let mut stream = TcpStream::connect(format!("{host}:{port}")).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(upgrade_request_to(host, port, token).as_bytes())
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match stream.read(&mut chunk) {
            // A signal arriving during the read: read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => return Some((0, None)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if status != 101 {
        return Some((status, None));
    }
    buf.drain(..end);
    let client = Client {
        stream,
        buf,
        next_id: 1,
        ended: None,
    };
    Some((status, Some(client)))
}

impl Client {
    pub fn send_frame(&mut self, op: OpCode, payload: &[u8]) {
        let mut out = Vec::new();
        encode_frame(&mut out, op, true, Some([7, 3, 9, 1]), payload);
        self.stream.write_all(&out).unwrap();
    }

    pub fn send_json(&mut self, v: &Value) {
        self.send_frame(OpCode::Text, v.to_string().as_bytes());
    }

    /// The next frame `(opcode, payload)`, or `None` on timeout, EOF or error.
    pub fn recv_frame(&mut self, timeout: Duration) -> Option<(u8, Vec<u8>)> {
        let give_up = Instant::now() + timeout;
        loop {
            if let Ok(Some((h, n))) = decode_header(&self.buf) {
                let len = h.payload_len as usize;
                if self.buf.len() >= n + len {
                    let mut payload = self.buf[n..n + len].to_vec();
                    if let Some(m) = h.mask {
                        apply_mask(&mut payload, m, 0);
                    }
                    self.buf.drain(..n + len);
                    return Some((h.opcode, payload));
                }
            }
            let now = Instant::now();
            if now >= give_up {
                return None;
            }
            self.stream.set_read_timeout(Some(give_up - now)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                // A signal arriving during the read (EINTR): read again, within the same time.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) => {
                    self.ended = Some("the server closed the connection (EOF)".into());
                    return None;
                }
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) {
                        self.ended = Some(format!("read failed: {e}"));
                    }
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// The next text message as JSON, answering pings on the way.
    pub fn recv_json(&mut self, timeout: Duration) -> Option<Value> {
        self.ended = None;
        let give_up = Instant::now() + timeout;
        loop {
            let left = give_up.checked_duration_since(Instant::now())?;
            let (op, payload) = self.recv_frame(left)?;
            match op {
                1 => {
                    let v = serde_json::from_slice(&payload).ok();
                    if v.is_none() {
                        let text = String::from_utf8_lossy(&payload);
                        let cut: String = text.chars().take(300).collect();
                        self.ended = Some(format!("a text message that is not JSON: {cut}"));
                    }
                    return v;
                }
                9 => self.send_frame(OpCode::Pong, &payload),
                8 => {
                    let code = close_code(&payload);
                    let reason = String::from_utf8_lossy(payload.get(2..).unwrap_or_default());
                    self.ended = Some(format!("a Close frame: {code:?} {reason}"));
                    return None;
                }
                _ => {}
            }
        }
    }

    /// The next JSON message for which `pred` holds (others are skipped).
    pub fn recv_until(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let give_up = Instant::now() + timeout;
        loop {
            let left = give_up.checked_duration_since(Instant::now())?;
            let v = self.recv_json(left)?;
            if pred(&v) {
                return Some(v);
            }
        }
    }

    /// Why receiving ended early, or that it timed out.
    pub fn why(&self) -> &str {
        self.ended.as_deref().unwrap_or("timed out")
    }

    /// Sends a request; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    pub fn response(&mut self, id: u64) -> Value {
        self.recv_until(Duration::from_secs(5), |v| v["id"] == json!(id))
            .unwrap_or_else(|| panic!("no response to request {id} ({})", self.why()))
    }

    /// initialize + notifications/initialized.
    pub fn init(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test-client", "version": "1"}}),
        );
        self.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    /// Sends `tools/call` requests for `calls` (name, arguments) in one write; returns their ids.
    pub fn call_tools_at_once(&mut self, calls: &[(&str, Value)]) -> Vec<u64> {
        let (out, ids) = self.encode_tool_calls(calls);
        self.stream.write_all(&out).unwrap();
        ids
    }

    /// The frames of `tools/call` requests for `calls`, to write later; and their ids.
    pub fn encode_tool_calls(&mut self, calls: &[(&str, Value)]) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let mut ids = Vec::new();
        for (name, args) in calls {
            let id = self.next_id;
            self.next_id += 1;
            let v = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": name, "arguments": args}});
            push_text_frame(&mut out, v.to_string().as_bytes());
            ids.push(id);
        }
        (out, ids)
    }

    pub fn call_tool(&mut self, name: &str, args: Value) -> u64 {
        self.send_request("tools/call", json!({"name": name, "arguments": args}))
    }

    /// Sends a Close frame with `code` (the closing handshake's first half).
    pub fn close(&mut self, code: u16) {
        self.send_frame(OpCode::Close, &code.to_be_bytes());
    }

    /// Waits until the server closes the connection (Close frame or EOF).
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let give_up = Instant::now() + timeout;
        loop {
            let Some(left) = give_up.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.recv_frame(left) {
                None => return Instant::now() < give_up,
                Some((8, _)) => return true,
                Some(_) => {}
            }
        }
    }
}

/// Appends to `out` one masked, unfragmented Text frame of `text`, as a client sends it (for a
/// scenario that writes frames itself: many at once, or one larger than a socket takes).
pub fn push_text_frame(out: &mut Vec<u8>, text: &[u8]) {
    encode_frame(out, OpCode::Text, true, Some([7, 3, 9, 1]), text);
}

/// The status code of a Close frame's payload (its first two bytes), `None` for an empty one.
pub fn close_code(payload: &[u8]) -> Option<u16> {
    payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// The text items of a tool result (`result.content[].text`); panics when it has no content.
pub fn texts(resp: &Value) -> Vec<String> {
    resp["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {resp}"))
        .iter()
        .map(|c| c["text"].as_str().unwrap_or("").to_string())
        .collect()
}
