//! An in-memory client and a fake clock driving a `Server` without sockets.
#![allow(dead_code)]

use claude_ide_bridge::ws::{decode_header, encode_frame, OpCode};
use claude_ide_bridge::{AuthToken, Config, ConnectionId, Event, Server};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub mod harness;

pub const TOKEN: &str = "test-token-0123456789abcdefghijklmnopqrstuv";
pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The upgrade request the real client (2.1.330) sends, with the given token.
pub fn real_request(token: Option<&str>) -> String {
    let mut r = String::from(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:40000\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\
         User-Agent: claude-code/2.1.330 (cli)\r\n",
    );
    if let Some(t) = token {
        r.push_str(&format!("X-Claude-Code-Ide-Authorization: {t}\r\n"));
    }
    r.push_str("\r\n");
    r
}

pub struct Pair {
    pub server: Server,
    pub now: Instant,
    /// Bytes the server sent to each connection, not yet consumed by the test.
    pub inbox: HashMap<ConnectionId, Vec<u8>>,
    pub closed: Vec<ConnectionId>,
    pub events: Vec<Event>,
    mask: u32,
}

impl Pair {
    pub fn new() -> Self {
        Self::with_config(|_| {})
    }

    pub fn with_config(f: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::new(AuthToken::from_string(TOKEN.to_string()));
        f(&mut config);
        Pair {
            server: Server::new(config),
            now: Instant::now(),
            inbox: HashMap::new(),
            closed: Vec::new(),
            events: Vec::new(),
            mask: 0x1234_5678,
        }
    }

    /// Drain every output of the server, the way a runtime would.
    pub fn pump(&mut self) {
        while let Some(e) = self.server.poll_event() {
            self.events.push(e);
        }
        while let Some(c) = self.server.poll_transmit_ready() {
            let bytes = self.server.transmit(c).to_vec();
            self.server.advance_transmit(c, bytes.len());
            self.inbox.entry(c).or_default().extend_from_slice(&bytes);
            if self.server.should_close(c) {
                self.server.handle_close(c);
                self.closed.push(c);
            }
        }
        while let Some(e) = self.server.poll_event() {
            self.events.push(e);
        }
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        self.pump();
        std::mem::take(&mut self.events)
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.server.handle_timeout(self.now);
        self.pump();
    }

    pub fn raw(&mut self, conn: ConnectionId, bytes: &[u8]) {
        self.server.handle_input(conn, bytes, self.now);
        self.pump();
    }

    /// Accept a socket and send `request`; returns the connection and the response head.
    pub fn handshake(&mut self, request: &str) -> (ConnectionId, String) {
        let conn = self.server.accept(self.now);
        self.raw(conn, request.as_bytes());
        let bytes = self.inbox.remove(&conn).unwrap_or_default();
        (conn, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Connect with the real client's request and check the 101.
    pub fn connect(&mut self) -> ConnectionId {
        let (conn, head) = self.handshake(&real_request(Some(TOKEN)));
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        conn
    }

    /// Connect and run initialize + notifications/initialized.
    pub fn connect_initialized(&mut self) -> ConnectionId {
        self.connect_initialized_at("2025-06-18")
    }

    /// [`Pair::connect_initialized`] in protocol `version` (2025-03-26 and older take batches).
    pub fn connect_initialized_at(&mut self, version: &str) -> ConnectionId {
        let conn = self.connect();
        let r = self.request(
            conn,
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.1.330"}}),
        );
        assert_eq!(r["result"]["protocolVersion"], version);
        self.send_json(
            conn,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        self.take_events();
        conn
    }

    pub fn next_mask(&mut self) -> [u8; 4] {
        self.mask = self.mask.wrapping_mul(1_103_515_245).wrapping_add(12345);
        self.mask.to_be_bytes()
    }

    /// A client frame, masked, not yet handed to the server (for a test that feeds it itself).
    pub fn masked_frame(&mut self, opcode: OpCode, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        let mask = self.next_mask();
        encode_frame(&mut f, opcode, fin, Some(mask), payload);
        f
    }

    pub fn send_frame(&mut self, conn: ConnectionId, opcode: OpCode, fin: bool, payload: &[u8]) {
        let f = self.masked_frame(opcode, fin, payload);
        self.raw(conn, &f);
    }

    pub fn send_text(&mut self, conn: ConnectionId, text: &str) {
        self.send_frame(conn, OpCode::Text, true, text.as_bytes());
    }

    pub fn send_json(&mut self, conn: ConnectionId, v: &Value) {
        self.send_text(conn, &v.to_string());
    }

    /// Frames the server sent on `conn`: (opcode, payload).
    pub fn frames(&mut self, conn: ConnectionId) -> Vec<(u8, Vec<u8>)> {
        self.pump();
        self.inbox_frames(conn)
    }

    /// JSON messages the server sent on `conn`, written out for it alone: the other connections'
    /// output stays queued (clients that do not read).
    pub fn read_one(&mut self, conn: ConnectionId) -> Vec<Value> {
        let bytes = self.server.transmit(conn).to_vec();
        self.server.advance_transmit(conn, bytes.len());
        self.inbox
            .entry(conn)
            .or_default()
            .extend_from_slice(&bytes);
        (self.inbox_frames(conn).into_iter())
            .filter(|(op, _)| *op == 1)
            .map(|(_, p)| serde_json::from_slice(&p).expect("server sends JSON"))
            .collect()
    }

    /// The frames in `conn`'s inbox, taken out of it.
    fn inbox_frames(&mut self, conn: ConnectionId) -> Vec<(u8, Vec<u8>)> {
        let buf = self.inbox.remove(&conn).unwrap_or_default();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let (h, n) = decode_header(&buf[pos..])
                .expect("server frames are valid")
                .expect("server frames are complete");
            assert!(h.mask.is_none(), "server frames are never masked");
            let len = h.payload_len as usize;
            out.push((h.opcode, buf[pos + n..pos + n + len].to_vec()));
            pos += n + len;
        }
        out
    }

    /// JSON messages the server sent on `conn` (text frames only).
    pub fn messages(&mut self, conn: ConnectionId) -> Vec<Value> {
        self.frames(conn)
            .into_iter()
            .filter(|(op, _)| *op == 1)
            .map(|(_, p)| serde_json::from_slice(&p).expect("server sends JSON"))
            .collect()
    }

    /// Send a request and return the single message the server answered.
    pub fn request(&mut self, conn: ConnectionId, id: Value, method: &str, params: Value) -> Value {
        self.send_json(
            conn,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        let mut m = self.messages(conn);
        assert_eq!(m.len(), 1, "one answer expected: {m:?}");
        m.remove(0)
    }

    pub fn call_tool(&mut self, conn: ConnectionId, id: i64, name: &str, args: Value) {
        self.send_json(
            conn,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": args, "_meta": {"progressToken": id, "claudecode/toolUseId": "toolu_1"}}}),
        );
    }
}

/// The text items of an MCP tool result.
pub fn texts(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .expect("content array")
        .iter()
        .map(|c| c["text"].as_str().expect("text item").to_string())
        .collect()
}

/// One masked client frame.
pub fn masked(opcode: OpCode, fin: bool, mask: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    encode_frame(&mut f, opcode, fin, Some(mask), payload);
    f
}

/// The tab name of the fragmented `openDiff` in [`real_client_stream`].
pub const FRAGMENTED_TAB: &str = "✻ [Claude Code] main.rs (4f025d) ⧉";

/// A realistic client session, as one byte stream: the real client's upgrade request, then masked
/// frames carrying initialize, notifications/initialized, tools/list, a Ping, tools/call openDiff
/// and getDiagnostics, a JSON-RPC ping, an `openDiff` split in three fragments (cut inside
/// multi-byte characters, a Ping between two fragments), a cancellation of the getDiagnostics
/// call, and a Close 1000. Pending: the two `openDiff` calls (ids 2 and 5).
pub fn real_client_stream() -> Vec<u8> {
    let mut s = real_request(Some(TOKEN)).into_bytes();
    let mut n = 0u8;
    let mut mask = || {
        n = n.wrapping_add(1);
        [0x37 ^ n, 0xfa, 0x21 ^ n.wrapping_mul(7), 0x3d]
    };
    let text = |v: Value, m: [u8; 4]| masked(OpCode::Text, true, m, v.to_string().as_bytes());
    s.extend(text(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
            "clientInfo": {"name": "claude-code", "version": "2.1.330"}}}),
        mask(),
    ));
    s.extend(text(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        mask(),
    ));
    s.extend(text(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        mask(),
    ));
    s.extend(masked(OpCode::Ping, true, mask(), b"keepalive"));
    s.extend(text(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "openDiff", "arguments": {
                "old_file_path": "/ws/src/lib.rs", "new_file_path": "/ws/src/lib.rs",
                "new_file_contents": "pub fn f() {}\n", "tab_name": "✻ [Claude Code] lib.rs (0a1b2c) ⧉"},
            "_meta": {"progressToken": 2, "claudecode/toolUseId": "toolu_01"}}}),
        mask(),
    ));
    s.extend(text(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "getDiagnostics", "arguments": {"uri": "file:///ws/src/main.rs"}}}),
        mask(),
    ));
    s.extend(text(
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        mask(),
    ));
    let diff = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {
            "old_file_path": "/ws/src/main.rs", "new_file_path": "/ws/src/main.rs",
            "new_file_contents": "fn main() { println!(\"grüße ✻\"); }\n", "tab_name": FRAGMENTED_TAB}}})
    .to_string();
    let b = diff.as_bytes();
    // Cut inside the first "✻" (3 bytes) and inside "ü" (2 bytes).
    let star = diff.find('✻').expect("a star") + 1;
    let umlaut = diff.find('ü').expect("an umlaut") + 1;
    let (c1, c2) = (star.min(umlaut), star.max(umlaut));
    s.extend(masked(OpCode::Text, false, mask(), &b[..c1]));
    s.extend(masked(OpCode::Continuation, false, mask(), &b[c1..c2]));
    s.extend(masked(OpCode::Ping, true, mask(), b""));
    s.extend(masked(OpCode::Continuation, true, mask(), &b[c2..]));
    s.extend(text(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 3, "reason": "interrupted"}}),
        mask(),
    ));
    s.extend(masked(OpCode::Close, true, mask(), b"\x03\xe8bye"));
    s
}
