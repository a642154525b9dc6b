//! A model host that drives a `Server` through a sequence of operations and checks the engine's
//! invariants after every one of them.
//!
//! Shared by `tests/properties.rs` (operations drawn by proptest) and by the `server` fuzz target
//! (operations decoded from the fuzzer's bytes; `fuzz/src/lib.rs` includes this file by path), so
//! both check exactly the same things. It depends only on the engine, `serde_json` and `std`.
#![allow(dead_code)]

use claude_ide_bridge::ws::{decode_header, encode_frame, OpCode};
use claude_ide_bridge::RpcError;
use claude_ide_bridge::{
    ApiError, AuthToken, CallId, Config, ConnectionId, Event, Limits, Server, Target, ToolName,
    ToolResult, ToolSet,
};
use claude_ide_bridge::{AtMentioned, LogEvent, Notification, SelectionChanged};
use claude_ide_bridge::{Position, Selection};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The token the harness's server expects.
pub const HARNESS_TOKEN: &str = "harness-token-0123456789abcdefghijklmnop";

/// How far above `max_message_size + max_head_bytes` one connection's buffers may go: the input
/// buffer's idle capacity, a frame header, the 101 or refusal response and the replies a single
/// read can produce before the host drains them.
pub const MEMORY_SLACK: usize = 64 * 1024;

/// Kinds of client message, chosen by `Op::Send { msg, .. }` modulo this count.
pub const MSG_KINDS: u8 = 28;

/// Tab names used by `openDiff` and `close_tab` (few, so they collide).
pub const TABS: [&str; 3] = [
    "✻ [Claude Code] main.rs (4f025d) ⧉",
    "✻ [Claude Code] lib.rs (0a1b2c) ⧉",
    "plain tab",
];

/// One thing the host, the client or the clock does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A socket is accepted.
    Accept,
    /// The client of connection `conn` (modulo the connections accepted so far) queues message
    /// kind `msg` with JSON-RPC id `id`, then `feed` bytes of its queue reach the server.
    Send {
        /// Which connection.
        conn: usize,
        /// Message kind, modulo [`MSG_KINDS`].
        msg: u8,
        /// JSON-RPC id (small, so that ids collide and cancellations hit).
        id: u8,
        /// Bytes of the client's queue delivered now.
        feed: usize,
    },
    /// Arbitrary bytes are queued by the client, then `feed` bytes of its queue are delivered.
    Raw {
        /// Which connection.
        conn: usize,
        /// The bytes.
        bytes: Vec<u8>,
        /// Bytes of the client's queue delivered now.
        feed: usize,
    },
    /// `n` more bytes of the client's queue are delivered.
    Feed {
        /// Which connection.
        conn: usize,
        /// How many.
        n: usize,
    },
    /// The clock moves forward and the timers run.
    Advance(Duration),
    /// The host answers call `call` (modulo the calls seen so far, answered or not).
    Respond {
        /// Which call.
        call: usize,
        /// Which kind of result.
        result: u8,
    },
    /// The host sends a notification to everyone (`None`) or to one connection.
    Notify {
        /// Which notification.
        kind: u8,
        /// To whom.
        target: Option<usize>,
    },
    /// The host closes a connection.
    Close(usize),
    /// The socket of a connection fails or reaches EOF.
    Hangup(usize),
    /// The host changes the offered tools (all but one, or all).
    SetTools(u8),
    /// The host writes at most this many bytes per drive round (`None`: everything).
    WriteBudget(Option<usize>),
    /// The server is stopped.
    Shutdown,
}

/// The model host.
pub struct Harness {
    /// The engine under test.
    pub server: Server,
    /// The fake clock.
    pub now: Instant,
    limits: Limits,
    accepted: Vec<ConnectionId>,
    connected: BTreeSet<ConnectionId>,
    disconnected: BTreeSet<ConnectionId>,
    /// Bytes each client has queued and not yet delivered.
    client_queue: BTreeMap<ConnectionId, Vec<u8>>,
    /// Bytes each connection's socket received from the server.
    received: BTreeMap<ConnectionId, Vec<u8>>,
    /// Every call seen, in order, and whether it is a compatibility request.
    calls: Vec<(CallId, bool)>,
    answered: BTreeSet<CallId>,
    cancelled: BTreeSet<CallId>,
    write_budget: Option<usize>,
    /// Output queued while writes were limited may still wait: set with a write budget, cleared by
    /// a pump that wrote everything.
    slow_backlog: bool,
    mask: u32,
    /// Events seen so far (for the properties' own checks).
    pub events: Vec<Event>,
    /// Every `at_mentioned` sent, by its number (its `lineStart`), and to whom (`None`: to all).
    mentions: Vec<Option<ConnectionId>>,
}

impl Harness {
    /// A server with these limits, compatibility methods on or off.
    pub fn new(limits: Limits, compat: bool) -> Self {
        let mut config = Config::new(AuthToken::from_string(HARNESS_TOKEN.to_string()));
        config.limits = limits.clone();
        config.compat_methods = compat;
        config.workspace_folders = vec!["/ws".to_string()];
        Harness {
            server: Server::new(config),
            now: Instant::now(),
            limits,
            accepted: Vec::new(),
            connected: BTreeSet::new(),
            disconnected: BTreeSet::new(),
            client_queue: BTreeMap::new(),
            received: BTreeMap::new(),
            calls: Vec::new(),
            answered: BTreeSet::new(),
            cancelled: BTreeSet::new(),
            write_budget: None,
            slow_backlog: false,
            mask: 0x9e37_79b9,
            events: Vec::new(),
            mentions: Vec::new(),
        }
    }

    /// Small limits, so that random input reaches them.
    pub fn small_limits() -> Limits {
        Limits {
            max_head_bytes: 2048,
            max_headers: 24,
            max_connections: 3,
            max_pending_handshakes: 4,
            max_message_size: 8 * 1024,
            max_fragments: 16,
            max_outbound: 128 * 1024,
            max_batch: 8,
            max_queued_mentions: 4,
            max_pending_calls: 4,
            ..Limits::default()
        }
    }

    /// The most one connection may hold.
    pub fn memory_bound(&self) -> usize {
        let base = self.limits.max_message_size + self.limits.max_head_bytes + MEMORY_SLACK;
        if self.write_budget.is_some() || self.slow_backlog {
            // A host that writes slowly leaves up to a full outbound queue, until it has written it.
            base + self.limits.max_outbound
        } else {
            base
        }
    }

    /// Run a whole sequence, then stop the server and check that it winds down.
    pub fn run(ops: &[Op], limits: Limits, compat: bool, answer_closes: bool) {
        let mut h = Harness::new(limits, compat);
        for op in ops {
            h.apply(op);
        }
        h.finish(answer_closes);
    }

    fn conn(&self, i: usize) -> Option<ConnectionId> {
        if self.accepted.is_empty() {
            None
        } else {
            Some(self.accepted[i % self.accepted.len()])
        }
    }

    fn next_mask(&mut self) -> [u8; 4] {
        self.mask = self.mask.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        self.mask.to_be_bytes()
    }

    /// Apply one operation, drive the outputs, and check the invariants.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Accept => {
                let c = self.server.accept(self.now);
                assert!(
                    !self.accepted.contains(&c),
                    "connection ids are never reused"
                );
                self.accepted.push(c);
            }
            Op::Send {
                conn,
                msg,
                id,
                feed,
            } => {
                if let Some(c) = self.conn(*conn) {
                    let bytes = self.message(*msg, *id);
                    self.client_queue.entry(c).or_default().extend(bytes);
                    self.deliver(c, *feed);
                }
            }
            Op::Raw { conn, bytes, feed } => {
                if let Some(c) = self.conn(*conn) {
                    self.client_queue
                        .entry(c)
                        .or_default()
                        .extend_from_slice(bytes);
                    self.deliver(c, *feed);
                }
            }
            Op::Feed { conn, n } => {
                if let Some(c) = self.conn(*conn) {
                    self.deliver(c, *n);
                }
            }
            Op::Advance(d) => {
                self.now += *d;
                self.server.handle_timeout(self.now);
            }
            Op::Respond { call, result } => self.respond(*call, *result),
            Op::Notify { kind, target } => {
                let target = match target {
                    None => Target::All,
                    Some(i) => match self.conn(*i) {
                        Some(c) => Target::Connection(c),
                        None => Target::All,
                    },
                };
                let n = notification(*kind, self.mentions.len() as u32);
                if matches!(n, Notification::AtMentioned(_)) {
                    self.mentions.push(match target {
                        Target::All => None,
                        Target::Connection(c) => Some(c),
                    });
                }
                self.server.notify(target, &n, self.now);
            }
            Op::Close(i) => {
                if let Some(c) = self.conn(*i) {
                    let r = self.server.close(c, self.now);
                    if self.disconnected.contains(&c) {
                        assert_eq!(r, Err(ApiError::UnknownConnection));
                    }
                }
            }
            Op::Hangup(i) => {
                if let Some(c) = self.conn(*i) {
                    self.server.handle_close(c);
                }
            }
            Op::SetTools(b) => {
                let tools = if *b as usize >= ToolName::ALL.len() {
                    ToolSet::all()
                } else {
                    ToolSet::all().without(ToolName::ALL[*b as usize])
                };
                self.server.set_tools(tools, self.now);
            }
            Op::WriteBudget(b) => {
                self.write_budget = *b;
                self.slow_backlog |= b.is_some();
            }
            Op::Shutdown => self.server.shutdown(self.now),
        }
        self.check_memory();
        self.pump();
        self.check_memory();
    }

    fn deliver(&mut self, c: ConnectionId, n: usize) {
        let q = self.client_queue.entry(c).or_default();
        let n = n.min(q.len());
        if n == 0 {
            return;
        }
        let chunk: Vec<u8> = q.drain(..n).collect();
        // A runtime reads in bounded chunks; so does this one.
        for piece in chunk.chunks(4096) {
            self.server.handle_input(c, piece, self.now);
            self.check_memory();
        }
    }

    fn check_memory(&self) {
        // Every connection the server holds (one it has let go holds nothing); not every one
        // ever accepted, which made long runs quadratic.
        let bound = self.memory_bound();
        for (c, m) in claude_ide_bridge::hooks::connections_memory(&self.server) {
            assert!(m <= bound, "connection {c} holds {m} bytes, over {bound}");
        }
    }

    /// Drain events and output the way a runtime does, writing at most the budget.
    pub fn pump(&mut self) {
        self.drain_events();
        let mut budget = self.write_budget.unwrap_or(usize::MAX);
        while budget > 0 {
            let Some(c) = self.server.poll_transmit_ready() else {
                break;
            };
            let bytes = self.server.transmit(c);
            let n = bytes.len().min(budget);
            self.received
                .entry(c)
                .or_default()
                .extend_from_slice(&bytes[..n]);
            self.server.advance_transmit(c, n);
            budget -= n;
            if self.server.should_close(c) {
                self.server.handle_close(c);
            }
        }
        if self.write_budget.is_none() {
            // Everything queued was written.
            self.slow_backlog = false;
        }
        self.drain_events();
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.server.poll_event() {
            self.check_event(&e);
            self.events.push(e);
        }
    }

    fn check_event(&mut self, e: &Event) {
        match e {
            Event::Connected { conn, .. } => {
                assert!(self.accepted.contains(conn));
                assert!(self.connected.insert(*conn), "{conn} connected twice");
                assert!(!self.disconnected.contains(conn));
            }
            Event::Initialized { conn, .. }
            | Event::IdeConnected { conn, .. }
            | Event::TabClosed { conn, .. }
            | Event::Message { conn, .. } => {
                assert!(self.connected.contains(conn) && !self.disconnected.contains(conn));
            }
            Event::ToolCall { call, .. } | Event::CompatRequest { call, .. } => {
                assert!(
                    self.connected.contains(&call.conn) && !self.disconnected.contains(&call.conn)
                );
                assert!(
                    self.calls.iter().all(|(c, _)| c != call),
                    "call {call:?} announced twice"
                );
                let compat = matches!(e, Event::CompatRequest { .. });
                self.calls.push((*call, compat));
            }
            Event::CallCancelled { call, .. } => {
                assert!(
                    self.calls.iter().any(|(c, _)| c == call),
                    "unknown call cancelled"
                );
                assert!(
                    !self.answered.contains(call),
                    "call {call:?} cancelled after the host answered it"
                );
                assert!(
                    self.cancelled.insert(*call),
                    "call {call:?} cancelled twice"
                );
            }
            Event::Disconnected { conn, .. } => {
                assert!(self.accepted.contains(conn));
                assert!(self.disconnected.insert(*conn), "{conn} disconnected twice");
                // Its pending calls were cancelled just before.
                for (call, _) in &self.calls {
                    if call.conn == *conn {
                        assert!(
                            self.answered.contains(call) || self.cancelled.contains(call),
                            "{call:?} still open when {conn} disconnected"
                        );
                    }
                }
            }
            // A kind of event this harness does not know: its invariants are not checked, so the
            // run must not pass as if they held.
            other => panic!("an event the harness does not check: {other:?}"),
        }
    }

    fn respond(&mut self, i: usize, result: u8) {
        if self.calls.is_empty() {
            return;
        }
        let (call, compat) = self.calls[i % self.calls.len()];
        // Sometimes answer through the wrong method: it must be refused.
        let wrong = result % 11 == 10;
        let r = if compat != wrong {
            let v = if result.is_multiple_of(3) {
                Err(RpcError::new(-32000, "no such file"))
            } else {
                Ok(json!({"content": "x".repeat(result as usize * 7)}))
            };
            self.server.respond_compat(call, v)
        } else {
            self.server.respond(call, tool_result(result))
        };
        let closed = self.answered.contains(&call) || self.cancelled.contains(&call);
        if closed {
            assert_eq!(
                r,
                Err(ApiError::NotPending),
                "{call:?} answered out of turn"
            );
        } else if wrong {
            // Still pending, of the other kind (or on a connection closing, where nothing goes).
            assert!(
                matches!(r, Err(ApiError::WrongKind | ApiError::NotPending)),
                "{call:?} answered as the other kind: {r:?}"
            );
        }
        // An answer replaced by -32000 (it did not fit) answered the call too.
        if matches!(r, Ok(()) | Err(ApiError::AnswerTooLarge)) {
            assert!(self.answered.insert(call), "{call:?} answered twice");
        }
    }

    /// Stop the server, let the close handshakes (or their timeout) finish, and check that the
    /// server ends idle with every call either answered or cancelled, exactly once.
    pub fn finish(&mut self, answer_closes: bool) {
        self.write_budget = None;
        self.server.shutdown(self.now);
        self.check_memory();
        self.pump();
        if answer_closes {
            for c in self.accepted.clone() {
                if self.connected.contains(&c) && !self.disconnected.contains(&c) {
                    // Whatever the client still had queued, then its Close.
                    let mut f = std::mem::take(self.client_queue.entry(c).or_default());
                    let mask = self.next_mask();
                    encode_frame(&mut f, OpCode::Close, true, Some(mask), &[0x03, 0xe8]);
                    for piece in f.chunks(4096) {
                        self.server.handle_input(c, piece, self.now);
                    }
                    self.pump();
                }
            }
        }
        let mut rounds = 0;
        while !self.server.is_idle() {
            rounds += 1;
            assert!(
                rounds <= 4,
                "the server does not become idle after shutdown"
            );
            let step = self.limits.close_timeout + Duration::from_millis(1);
            self.now += step;
            self.server.handle_timeout(self.now);
            self.pump();
        }
        assert!(self.server.poll_timeout().is_none());
        assert!(self.server.poll_event().is_none());
        for (call, _) in &self.calls {
            let a = self.answered.contains(call);
            let c = self.cancelled.contains(call);
            assert!(a != c, "{call:?}: answered {a}, cancelled {c}");
        }
        for c in &self.connected {
            assert!(self.disconnected.contains(c), "{c} never disconnected");
        }
        for (c, bytes) in &self.received {
            let messages = check_server_output(*c, bytes);
            self.check_mentions(*c, &messages);
        }
    }

    /// The at-mentions a connection was written: each once, in the order they were sent, and
    /// only those sent to all or to it.
    fn check_mentions(&self, c: ConnectionId, messages: &[Value]) {
        let mut last = None;
        for m in messages {
            if m["method"] != "at_mentioned" {
                continue;
            }
            let n = m["params"]["lineStart"].as_u64().expect("lineStart") as usize;
            assert!(n < self.mentions.len(), "{c}: at-mention {n} never sent");
            let to = self.mentions[n];
            assert!(
                to.is_none_or(|t| t == c),
                "{c}: written at-mention {n}, sent to {to:?} alone"
            );
            assert!(
                last.is_none_or(|l| l < n),
                "{c}: at-mention {n} written after {last:?}"
            );
            last = Some(n);
        }
    }

    /// The wire bytes of one client message.
    pub fn message(&mut self, kind: u8, id: u8) -> Vec<u8> {
        let kind = kind % MSG_KINDS;
        let mask = self.next_mask();
        let mut out = Vec::new();
        let text = |out: &mut Vec<u8>, s: &str| {
            encode_frame(out, OpCode::Text, true, Some(mask), s.as_bytes());
        };
        let call = |name: &str, args: Value| {
            rpc(
                id,
                "tools/call",
                json!({"name": name, "arguments": args, "_meta": {"progressToken": id}}),
            )
        };
        let tab = TABS[id as usize % TABS.len()];
        match kind {
            0 => out.extend_from_slice(request(Some(HARNESS_TOKEN), "").as_bytes()),
            1 => out.extend_from_slice(request(Some("wrong-token"), "").as_bytes()),
            2 => out.extend_from_slice(
                request(Some(HARNESS_TOKEN), "Origin: https://evil.example\r\n").as_bytes(),
            ),
            3 => {
                let versions = [
                    "2024-11-05",
                    "2025-03-26",
                    "2025-06-18",
                    "2025-11-25",
                    "1999-01-01",
                ];
                let v = versions[id as usize % versions.len()];
                text(
                    &mut out,
                    &rpc(
                        id,
                        "initialize",
                        json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.1.330"}}),
                    ),
                );
            }
            4 => text(
                &mut out,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            ),
            5 => text(&mut out, &rpc(id, "tools/list", json!({}))),
            6 => text(&mut out, &rpc(id, "ping", Value::Null)),
            7 => text(
                &mut out,
                &call(
                    "openDiff",
                    json!({"old_file_path": "/ws/src/main.rs", "new_file_path": "/ws/src/main.rs",
                           "new_file_contents": "fn main() {}\n", "tab_name": tab}),
                ),
            ),
            8 => text(
                &mut out,
                &call("getDiagnostics", json!({"uri": "file:///ws/src/main.rs"})),
            ),
            9 => text(
                &mut out,
                &call(
                    "openFile",
                    json!({"filePath": "/ws/src/lib.rs", "preview": false, "startText": "fn", "makeFrontmost": false}),
                ),
            ),
            10 => text(&mut out, &call("close_tab", json!({"tab_name": tab}))),
            11 => text(&mut out, &call("closeAllDiffTabs", json!({}))),
            12 => text(
                &mut out,
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "user interrupted"}})
                .to_string(),
            ),
            13 => {
                let batch = json!([
                    {"jsonrpc": "2.0", "id": id, "method": "ping"},
                    {"jsonrpc": "2.0", "id": id.wrapping_add(1), "method": "tools/call",
                     "params": {"name": "getDiagnostics", "arguments": {}}},
                    {"jsonrpc": "2.0", "method": "notifications/progress"},
                    {"jsonrpc": "2.0", "id": id.wrapping_add(2), "method": "tools/call",
                     "params": {"name": "openDiff", "arguments": {"old_file_path": "/ws/a", "new_file_path": "/ws/a",
                                "new_file_contents": "", "tab_name": tab}}},
                    7
                ]);
                text(&mut out, &batch.to_string());
            }
            14 => text(
                &mut out,
                &rpc(id, "readFile", json!({"path": "src/main.rs"})),
            ),
            15 => encode_frame(&mut out, OpCode::Ping, true, Some(mask), b"hb"),
            16 => encode_frame(&mut out, OpCode::Close, true, Some(mask), b"\x03\xe8bye"),
            17 => encode_frame(&mut out, OpCode::Binary, true, Some(mask), b"\x00\x01"),
            18 => {
                // openDiff in three fragments, cut inside the tab name's multi-byte characters,
                // with a Ping between two of them.
                let m = call(
                    "openDiff",
                    json!({"old_file_path": "/ws/b.rs", "new_file_path": "/ws/b.rs",
                           "new_file_contents": "ü✻\n", "tab_name": TABS[0]}),
                );
                let b = m.as_bytes();
                let cut1 = b.len() / 3;
                let cut2 = 2 * b.len() / 3;
                encode_frame(&mut out, OpCode::Text, false, Some(mask), &b[..cut1]);
                encode_frame(
                    &mut out,
                    OpCode::Continuation,
                    false,
                    Some(mask),
                    &b[cut1..cut2],
                );
                encode_frame(&mut out, OpCode::Ping, true, Some(mask), b"");
                encode_frame(&mut out, OpCode::Continuation, true, Some(mask), &b[cut2..]);
            }
            19 => text(&mut out, &rpc(id, "no/such/method", json!({}))),
            20 => text(&mut out, r#"{"jsonrpc":"2.0","id":1,"method":"#),
            21 => text(
                &mut out,
                r#"{"jsonrpc":"2.0","method":"ide_connected","params":{"pid":4242}}"#,
            ),
            22 => {
                // A frame declaring more than any limit allows, then a few bytes of it.
                out.extend_from_slice(&[0x81, 0xff, 0, 0, 0, 1, 0, 0, 0, 0]);
                out.extend_from_slice(&mask);
                out.extend_from_slice(b"{\"jsonrpc\"");
            }
            23 => text(&mut out, &call("noSuchTool", json!({}))),
            24 => text(
                &mut out,
                &rpc(
                    id,
                    "writeFile",
                    json!({"path": "../../etc/passwd", "content": "x"}),
                ),
            ),
            25 => text(
                &mut out,
                &json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string(),
            ),
            26 => text(&mut out, &rpc(id, "prompts/list", json!({}))),
            _ => text(&mut out, &rpc(id, "resources/list", json!({}))),
        }
        out
    }
}

/// The upgrade request of the real client (2.1.330) with `extra` header lines.
pub fn request(token: Option<&str>, extra: &str) -> String {
    let mut r = String::from(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:40000\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\
         User-Agent: claude-code/2.1.330 (cli)\r\n",
    );
    if let Some(t) = token {
        r.push_str(&format!("X-Claude-Code-Ide-Authorization: {t}\r\n"));
    }
    r.push_str(extra);
    r.push_str("\r\n");
    r
}

/// A JSON-RPC request.
pub fn rpc(id: u8, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn tool_result(kind: u8) -> ToolResult {
    match kind % 8 {
        0 => ToolResult::file_saved("fn main() {}\n"),
        1 => ToolResult::tab_closed(),
        2 => ToolResult::diff_rejected(TABS[0]),
        3 => ToolResult::text("ok"),
        4 => ToolResult::error("something failed"),
        5 => ToolResult::text("y".repeat(3000)),
        6 => ToolResult::json(&json!({"success": true, "filePath": "/ws/src/main.rs"})),
        _ => ToolResult::ok(),
    }
}

/// Notification `kind`; an `at_mentioned` carries `mention` as its `lineStart`.
fn notification(kind: u8, mention: u32) -> Notification {
    match kind % 5 {
        0 => Notification::SelectionChanged(SelectionChanged {
            text: "fn main".into(),
            file_path: "/ws/src/main.rs".into(),
            file_url: "file:///ws/src/main.rs".into(),
            selection: Selection::new(Position::new(0, 0), Position::new(0, 7)),
        }),
        1 => Notification::AtMentioned(AtMentioned {
            file_path: "/ws/src/main.rs".into(),
            line_start: Some(mention),
            line_end: Some(mention + u32::from(kind)),
        }),
        2 => Notification::LogEvent(LogEvent {
            event_name: "e".into(),
            event_data: json!({"n": kind}),
        }),
        3 => Notification::ToolsListChanged,
        _ => Notification::SelectionChanged(SelectionChanged {
            text: "é".repeat(kind as usize * 40),
            file_path: "/ws/a b.rs".into(),
            file_url: "file:///ws/a%20b.rs".into(),
            selection: Selection::new(Position::new(2, 0), Position::new(9, 1)),
        }),
    }
}

/// What a connection's socket received must be a response head (a 101 followed by well-formed,
/// unmasked server frames carrying JSON text, nothing after a Close; or a refusal), possibly cut
/// short where the connection was aborted or hung up. Returns the JSON messages of its whole
/// text frames.
pub fn check_server_output(c: ConnectionId, bytes: &[u8]) -> Vec<Value> {
    let mut messages = Vec::new();
    if bytes.is_empty() {
        return messages;
    }
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    assert!(
        bytes.starts_with(b"HTTP/1.1 ") || b"HTTP/1.1 ".starts_with(bytes),
        "{c}: output does not start with a status line"
    );
    let Some(end) = head_end else {
        return messages;
    };
    if !bytes.starts_with(b"HTTP/1.1 101 ") {
        // A refusal: a head, a one-line body, nothing more.
        let body = &bytes[end + 4..];
        assert!(body.len() <= 128 && !body.starts_with(b"\x81"), "{c}");
        return messages;
    }
    let mut pos = end + 4;
    let mut closed = false;
    while pos < bytes.len() {
        let (h, n) = match decode_header(&bytes[pos..]) {
            Ok(Some(x)) => x,
            Ok(None) => return messages, // cut short
            Err(e) => panic!("{c}: invalid server frame: {e:?}"),
        };
        assert!(h.mask.is_none(), "{c}: server frames are never masked");
        assert!(!closed, "{c}: a frame after the server's Close");
        let len = h.payload_len as usize;
        if pos + n + len > bytes.len() {
            return messages; // cut short
        }
        let payload = &bytes[pos + n..pos + n + len];
        match h.opcode {
            1 => {
                let v: Result<Value, _> = serde_json::from_slice(payload);
                assert!(v.is_ok(), "{c}: a text frame that is not JSON");
                messages.extend(v.ok());
            }
            8 => closed = true,
            9 | 10 => {}
            op => panic!("{c}: unexpected server opcode {op}"),
        }
        pos += n + len;
    }
    messages
}
