//! The server: admits connections, drives each from the first byte of its upgrade request to the
//! closed state, runs the MCP lifecycle, and turns tool calls into events the host answers.
//!
//! See the crate documentation for the drive loop.

use crate::discovery::AuthToken;
use crate::handshake::{self, HeadReader, HeadStatus, Policy, Rejection};
use crate::jsonrpc::{self, Decoded, Frame, Message, RpcError};
use crate::limits::Limits;
use crate::notify::Notification;
use crate::paths;
use crate::tools::CompatRequest;
use crate::tools::{CallParams as CallParamsSeed, ToolCall, ToolResult, ToolSet};
use crate::ws::{self, SendError, Sender, WebSocket};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Instant;

/// MCP protocol versions this server speaks, oldest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// How the server is set up. [`Config::new`] takes the token; everything else has defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// The token clients must send in `X-Claude-Code-Ide-Authorization`.
    pub auth_token: AuthToken,
    /// Limits and timers.
    pub limits: Limits,
    /// `serverInfo.name` in the `initialize` result.
    pub server_name: String,
    /// `serverInfo.version` in the `initialize` result.
    pub server_version: String,
    /// The tools offered in `tools/list` and accepted by `tools/call`.
    pub tools: ToolSet,
    /// `Origin` values allowed to connect (a request without `Origin` is always allowed).
    pub allowed_origins: Vec<String>,
    /// Refuse upgrades whose `Host` is not a loopback name (DNS rebinding). Turn off only when
    /// deliberately listening on a non-loopback address.
    pub check_host: bool,
    /// Answer the compatibility methods (`readFile`, `files/read`, ...; docs/protocol.md,
    /// "Compatibility methods").
    pub compat_methods: bool,
    /// The workspace folders (absolute paths), for path checks of compatibility methods.
    pub workspace_folders: Vec<String>,
    /// Report every JSON-RPC message in and out as [`Event::Message`] (a wire log for
    /// debugging and tests; costs a copy of each message).
    pub trace_messages: bool,
}

impl Config {
    /// A configuration with the given token, every tool offered, and default limits.
    pub fn new(auth_token: AuthToken) -> Self {
        Config {
            auth_token,
            limits: Limits::default(),
            server_name: "claude-ide-bridge".to_string(),
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            tools: ToolSet::all(),
            allowed_origins: Vec::new(),
            check_host: true,
            compat_methods: false,
            workspace_folders: Vec::new(),
            trace_messages: false,
        }
    }
}

/// Names one connection for as long as the server lives; never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The handle of a request the host answers, now or much later, with [`Server::respond`] (tool
/// calls) or [`Server::respond_compat`] (compatibility methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId {
    /// The connection the call came from.
    pub conn: ConnectionId,
    seq: u64,
}

/// Why a pending call will not be answered by the host (or was answered by the engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// The client sent `notifications/cancelled`; no answer is sent.
    Cancelled,
    /// `close_tab` named this diff's tab; it was answered `DIFF_REJECTED`.
    TabClosed,
    /// `closeAllDiffTabs`; it was answered `DIFF_REJECTED`.
    AllDiffTabsClosed,
    /// A new `openDiff` reused the tab name; this one was answered `DIFF_REJECTED`.
    Replaced,
    /// The connection is gone.
    Disconnected,
    /// The server is stopping; a diff was answered `DIFF_REJECTED`, other calls an error.
    ServerStopped,
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisconnectReason {
    /// The upgrade was refused: the HTTP response sent ([`Rejection::status`] is its status).
    Refused(Rejection),
    /// The request head did not arrive before the handshake deadline.
    HandshakeTimeout,
    /// Dropped to make room for a newer socket still in its handshake.
    Evicted,
    /// A clean close handshake; the code the peer sent, if any.
    Closed(Option<u16>),
    /// The peer broke the WebSocket protocol: what it did, and the close code we sent
    /// ([`ws::ProtocolError::close_code`]).
    ProtocolError(ws::ProtocolError),
    /// Nothing arrived for two ping intervals.
    PingTimeout,
    /// The peer stopped reading and the outbound queue filled up.
    OutboundFull,
    /// The socket closed or failed under us.
    TransportClosed,
    /// The host closed it.
    ClosedByHost,
    /// The server is stopping.
    ServerStopped,
}

/// What the engine tells the host. Drain them with [`Server::poll_event`] after every input.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A client completed the upgrade (token checked) and is now a WebSocket connection.
    Connected {
        /// The connection.
        conn: ConnectionId,
        /// The request path (the client has used `/` and `/mcp`).
        path: String,
        /// The client's `User-Agent`, if sent.
        user_agent: Option<String>,
    },
    /// The client finished the MCP handshake (`notifications/initialized`).
    Initialized {
        /// The connection.
        conn: ConnectionId,
        /// The negotiated protocol version.
        protocol_version: String,
        /// `clientInfo.name`, if sent.
        client_name: Option<String>,
        /// `clientInfo.version`, if sent.
        client_version: Option<String>,
    },
    /// `ide_connected`: the client told us its pid.
    IdeConnected {
        /// The connection.
        conn: ConnectionId,
        /// The client's process id.
        pid: Option<u32>,
    },
    /// A tool call for the host; answer with [`Server::respond`].
    ToolCall {
        /// The handle to answer through.
        call: CallId,
        /// The typed call.
        tool: ToolCall,
    },
    /// A compatibility method for the host (only with [`Config::compat_methods`]); answer with
    /// [`Server::respond_compat`]. Paths were already checked against the workspace folders
    /// lexically; the host must still resolve symlinks and re-check with [`paths::is_within`].
    CompatRequest {
        /// The handle to answer through.
        call: CallId,
        /// The request.
        request: CompatRequest,
    },
    /// A pending call the host must no longer answer (any UI for it should go away).
    CallCancelled {
        /// The call.
        call: CallId,
        /// Why.
        reason: CancelReason,
    },
    /// The client asked to close a tab (`close_tab`); answered by the engine.
    TabClosed {
        /// The connection.
        conn: ConnectionId,
        /// The tab name.
        tab_name: String,
    },
    /// A JSON-RPC message crossed the wire (only with [`Config::trace_messages`]).
    Message {
        /// The connection.
        conn: ConnectionId,
        /// True for client → server.
        incoming: bool,
        /// The message text.
        text: String,
    },
    /// The connection is gone; its pending calls were cancelled just before this event.
    Disconnected {
        /// The connection.
        conn: ConnectionId,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Which connections a notification goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every initialized connection.
    All,
    /// One connection (ignored unless it is initialized).
    Connection(ConnectionId),
}

/// A misuse of the API by the host (never a peer fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// The call is not pending: answered, cancelled, or its connection is gone.
    NotPending,
    /// No such live connection.
    UnknownConnection,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiError::NotPending => "the call is no longer pending",
            ApiError::UnknownConnection => "no such connection",
        })
    }
}

impl std::error::Error for ApiError {}

struct Pending {
    seq: u64,
    /// The JSON-RPC id, raw.
    id: Box<str>,
    /// `Some` for `openDiff`: its tab name.
    tab: Option<String>,
    /// Tool call (MCP content result) or compatibility method (plain result).
    compat: bool,
    batch: Option<u64>,
}

struct Batch {
    id: u64,
    /// Entries still waiting for the host.
    remaining: usize,
    /// Still being decoded: not sent even when `remaining` is 0.
    open: bool,
    /// The JSON array under construction (starts with `[`).
    body: Vec<u8>,
    entries: usize,
}

enum Phase {
    Handshake(HeadReader),
    Open(Box<Session>),
}

struct Session {
    ws: WebSocket,
    m: Mcp,
}

/// The MCP state of one connection (apart from its WebSocket, so a message borrowed from the
/// receiver can be handled while replies are queued on the sender).
struct Mcp {
    initialize_seen: bool,
    initialized: bool,
    protocol_version: &'static str,
    client_name: Option<String>,
    client_version: Option<String>,
    pending: Vec<Pending>,
    batches: Vec<Batch>,
    next_batch: u64,
    /// Close handshake started by us at this instant.
    closing_since: Option<Instant>,
    /// Outgoing messages not yet reported as events (`Some` only when tracing).
    trace: Option<Vec<String>>,
}

struct Connection {
    phase: Phase,
    /// Bytes to send before (or instead of) the WebSocket's output: the 101 or a refusal.
    pre_out: Vec<u8>,
    pre_sent: usize,
    created: Instant,
    last_rx: Instant,
    next_ping: Instant,
    /// Set when the connection must be dropped once `pre_out`/ws output is flushed.
    finished: Option<DisconnectReason>,
    /// Drop without flushing.
    abort: bool,
    in_dirty: bool,
}

/// The sans-IO server. One per listening socket; see the crate docs for the drive loop.
pub struct Server {
    config: Config,
    conns: BTreeMap<u64, Connection>,
    next_conn: u64,
    next_seq: u64,
    events: VecDeque<Event>,
    dirty: VecDeque<ConnectionId>,
    mentions: VecDeque<(Instant, Notification)>,
    stopping: bool,
    scratch: Vec<u8>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("connections", &self.conns.len())
            .field("stopping", &self.stopping)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
    #[serde(rename = "clientInfo", default)]
    client_info: Option<ClientInfo>,
}

#[derive(Deserialize)]
struct ClientInfo {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
}

#[derive(Deserialize)]
struct IdeConnectedParams {
    #[serde(default)]
    pid: Option<u32>,
}

/// What the message loop decided for one request, written after the frame borrow ends.
enum Reply {
    None,
    Result(Vec<u8>),
}

impl Server {
    /// A server with this configuration and no connections.
    pub fn new(config: Config) -> Self {
        Server {
            config,
            conns: BTreeMap::new(),
            next_conn: 1,
            next_seq: 1,
            events: VecDeque::new(),
            dirty: VecDeque::new(),
            mentions: VecDeque::new(),
            stopping: false,
            scratch: Vec::new(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new socket was accepted. If too many sockets are still in their handshake, the oldest
    /// of them is dropped to make room (an idle local process must not lock out the client).
    pub fn accept(&mut self, now: Instant) -> ConnectionId {
        let handshaking: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Handshake(_)) && c.finished.is_none())
            .map(|(k, _)| *k)
            .collect();
        if handshaking.len() >= self.config.limits.max_pending_handshakes.max(1) {
            let oldest = handshaking
                .iter()
                .min_by_key(|k| (self.conns[k].created, **k))
                .copied();
            if let Some(k) = oldest {
                self.abort(ConnectionId(k), DisconnectReason::Evicted);
            }
        }
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Connection {
                phase: Phase::Handshake(HeadReader::new(self.config.limits.max_head_bytes)),
                pre_out: Vec::new(),
                pre_sent: 0,
                created: now,
                last_rx: now,
                next_ping: now + self.config.limits.ping_interval,
                finished: None,
                abort: false,
                in_dirty: false,
            },
        );
        ConnectionId(id)
    }

    /// Bytes arrived on a connection. Unknown or finished connections ignore input.
    pub fn handle_input(&mut self, conn: ConnectionId, mut data: &[u8], now: Instant) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        if c.finished.is_some() || data.is_empty() {
            return;
        }
        c.last_rx = now;
        if let Phase::Handshake(reader) = &mut c.phase {
            let (used, status) = reader.feed(data);
            data = &data[used..];
            match status {
                HeadStatus::Partial => return,
                HeadStatus::TooLarge => {
                    self.refuse(conn, Rejection::HeadersTooLarge);
                    return;
                }
                HeadStatus::Complete => {}
            }
            if let Err(rejection) = self.upgrade(conn, now) {
                self.refuse(conn, rejection);
                return;
            }
        }
        if let Some(Connection {
            phase: Phase::Open(s),
            ..
        }) = self.conns.get_mut(&conn.0)
        {
            if !data.is_empty() {
                s.ws.receiver.receive(data);
            }
        }
        self.process(conn, now);
    }

    /// Zero-copy input: a buffer to read into, when the connection is a WebSocket (during the
    /// handshake use [`Server::handle_input`]). Follow with [`Server::commit_read`].
    pub fn read_buf(&mut self, conn: ConnectionId, min_len: usize) -> Option<&mut [u8]> {
        match self.conns.get_mut(&conn.0) {
            Some(Connection {
                phase: Phase::Open(s),
                finished: None,
                ..
            }) => Some(s.ws.receiver.read_buf(min_len)),
            _ => None,
        }
    }

    /// `n` bytes were read into the buffer from [`Server::read_buf`].
    pub fn commit_read(&mut self, conn: ConnectionId, n: usize, now: Instant) {
        if let Some(Connection {
            phase: Phase::Open(s),
            last_rx,
            finished: None,
            ..
        }) = self.conns.get_mut(&conn.0)
        {
            s.ws.receiver.commit(n);
            if n > 0 {
                *last_rx = now;
            }
            self.process(conn, now);
        }
    }

    fn upgrade(&mut self, conn: ConnectionId, now: Instant) -> Result<(), Rejection> {
        let live = self.live_connections();
        let c = self.conns.get_mut(&conn.0).expect("live connection");
        let Phase::Handshake(reader) = &c.phase else {
            unreachable!("upgrade outside the handshake")
        };
        let req = handshake::parse_upgrade(reader.head(), self.config.limits.max_headers)?;
        handshake::authorize(
            &req,
            &Policy {
                token: Some(self.config.auth_token.as_str()),
                allowed_origins: &self.config.allowed_origins,
                check_host: self.config.check_host,
            },
        )?;
        if self.stopping || live >= self.config.limits.max_connections {
            return Err(Rejection::ServiceUnavailable);
        }
        let proto = req.offers_protocol("mcp").then_some("mcp");
        handshake::write_accept(&mut c.pre_out, &req, proto);
        c.phase = Phase::Open(Box::new(Session {
            ws: WebSocket::new(self.config.limits.ws()),
            m: Mcp {
                initialize_seen: false,
                initialized: false,
                protocol_version: SUPPORTED_PROTOCOL_VERSIONS
                    [SUPPORTED_PROTOCOL_VERSIONS.len() - 1],
                client_name: None,
                client_version: None,
                pending: Vec::new(),
                batches: Vec::new(),
                next_batch: 1,
                closing_since: None,
                trace: self.config.trace_messages.then(Vec::new),
            },
        }));
        c.last_rx = now;
        c.next_ping = now + self.config.limits.ping_interval;
        self.mark_dirty(conn);
        self.events.push_back(Event::Connected {
            conn,
            path: req.path.clone(),
            user_agent: req.user_agent.clone(),
        });
        Ok(())
    }

    fn refuse(&mut self, conn: ConnectionId, rejection: Rejection) {
        if let Some(c) = self.conns.get_mut(&conn.0) {
            rejection.write_response(&mut c.pre_out);
            c.finished = Some(DisconnectReason::Refused(rejection));
            self.mark_dirty(conn);
        }
    }

    fn live_connections(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.phase, Phase::Open(_)) && c.finished.is_none())
            .count()
    }

    fn mark_dirty(&mut self, conn: ConnectionId) {
        if let Some(c) = self.conns.get_mut(&conn.0) {
            // Every path that queues output marks the connection: report traced messages here.
            if let Phase::Open(s) = &mut c.phase {
                if let Some(t) = &mut s.m.trace {
                    for text in t.drain(..) {
                        self.events.push_back(Event::Message {
                            conn,
                            incoming: false,
                            text,
                        });
                    }
                }
            }
            if !c.in_dirty {
                c.in_dirty = true;
                self.dirty.push_back(conn);
            }
        }
    }

    /// Run the WebSocket and MCP layers over whatever input is buffered.
    fn process(&mut self, conn: ConnectionId, now: Instant) {
        loop {
            let Some(c) = self.conns.get_mut(&conn.0) else {
                return;
            };
            let Phase::Open(s) = &mut c.phase else { return };
            if c.finished.is_some() {
                return;
            }
            let session: &mut Session = s;
            let before = session.ws.sender.queued();
            let was_initialized = session.m.initialized;
            // Decide what to do with the next message while it is borrowed; act after.
            let ws = &mut session.ws;
            let step = match ws.receiver.poll(&mut ws.sender) {
                Err(e) => Step::Failed(e),
                Ok(None) => Step::Idle,
                Ok(Some(ws::Message::Text(text))) => handle_text(
                    &self.config,
                    &mut self.next_seq,
                    &mut self.events,
                    conn,
                    &mut session.m,
                    &mut ws.sender,
                    text,
                ),
                Ok(Some(ws::Message::Binary(_))) => Step::Unsupported,
                Ok(Some(ws::Message::Close(code))) => Step::PeerClosed(code.map(|(c, _)| c)),
                Ok(Some(ws::Message::Ping(_))) | Ok(Some(ws::Message::Pong(_))) => Step::Continue,
            };
            let c = self.conns.get_mut(&conn.0).expect("connection");
            let Phase::Open(session) = &mut c.phase else {
                return;
            };
            if !was_initialized && session.m.initialized {
                // Deliver the at-mentions queued while nobody was connected.
                let ttl = self.config.limits.mention_ttl;
                for (t, n) in self.mentions.drain(..) {
                    if now.saturating_duration_since(t) <= ttl {
                        let mut frame = Vec::new();
                        n.write_json(&mut frame);
                        let _ = emit(&mut session.m, &mut session.ws.sender, &frame);
                    }
                }
            }
            match step {
                Step::Idle => {
                    if session.ws.sender.queued() != before {
                        self.mark_dirty(conn);
                    }
                    self.after_output(conn);
                    return;
                }
                Step::Continue => {}
                Step::Send(out) => {
                    if let Err(e) = emit(&mut session.m, &mut session.ws.sender, &out) {
                        self.on_send_error(conn, e);
                        return;
                    }
                }
                Step::Unsupported => {
                    let _ = session
                        .ws
                        .sender
                        .send_close(1003, "binary messages are not supported");
                    session.m.closing_since = Some(now);
                }
                Step::Failed(error) => {
                    c.finished = Some(DisconnectReason::ProtocolError(error));
                }
                Step::PeerClosed(code) => {
                    c.finished = Some(DisconnectReason::Closed(code));
                }
            }
            self.mark_dirty(conn);
        }
    }

    fn after_output(&mut self, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        if let Phase::Open(s) = &c.phase {
            if s.ws.sender.is_aborted() {
                c.finished.get_or_insert(DisconnectReason::OutboundFull);
                c.abort = true;
                self.mark_dirty(conn);
            } else if c.finished.is_none() && s.ws.is_finished() {
                c.finished = Some(DisconnectReason::Closed(None));
                self.mark_dirty(conn);
            }
        }
    }

    fn on_send_error(&mut self, conn: ConnectionId, e: SendError) {
        if let Some(c) = self.conns.get_mut(&conn.0) {
            match e {
                SendError::OutboundFull => {
                    c.finished.get_or_insert(DisconnectReason::OutboundFull);
                    c.abort = true;
                }
                SendError::Closed => {}
            }
            self.mark_dirty(conn);
        }
    }

    /// The next event for the host, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next connection that has new bytes to send or must be closed; each is reported once
    /// until [`Server::transmit`] is emptied for it.
    pub fn poll_transmit_ready(&mut self) -> Option<ConnectionId> {
        while let Some(conn) = self.dirty.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn.0) {
                c.in_dirty = false;
                return Some(conn);
            }
        }
        None
    }

    /// The bytes to write to this connection's socket now (empty when there are none).
    pub fn transmit(&self, conn: ConnectionId) -> &[u8] {
        let Some(c) = self.conns.get(&conn.0) else {
            return &[];
        };
        if c.abort {
            return &[];
        }
        if c.pre_sent < c.pre_out.len() {
            return &c.pre_out[c.pre_sent..];
        }
        match &c.phase {
            Phase::Open(s) => s.ws.sender.output(),
            Phase::Handshake(_) => &[],
        }
    }

    /// `n` bytes of [`Server::transmit`] were written.
    pub fn advance_transmit(&mut self, conn: ConnectionId, n: usize) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        let mut n = n;
        if c.pre_sent < c.pre_out.len() {
            let k = n.min(c.pre_out.len() - c.pre_sent);
            c.pre_sent += k;
            n -= k;
            if c.pre_sent == c.pre_out.len() {
                c.pre_out = Vec::new();
                c.pre_sent = 0;
            }
        }
        if n > 0 {
            if let Phase::Open(s) = &mut c.phase {
                s.ws.sender.advance(n);
            }
        }
        // More to send (the WebSocket's bytes behind the 101): report the connection again.
        if !self.transmit(conn).is_empty() {
            self.mark_dirty(conn);
        }
    }

    /// True when the socket should be closed now: the engine is done with this connection and
    /// everything it had to send was written (or the connection is aborted). Then call
    /// [`Server::handle_close`].
    pub fn should_close(&self, conn: ConnectionId) -> bool {
        match self.conns.get(&conn.0) {
            None => true,
            Some(c) => c.finished.is_some() && (c.abort || self.transmit(conn).is_empty()),
        }
    }

    /// The socket is closed (EOF, error, or after [`Server::should_close`]). Pending calls are
    /// cancelled and [`Event::Disconnected`] is queued. Unknown ids are ignored.
    pub fn handle_close(&mut self, conn: ConnectionId) {
        let Some(c) = self.conns.remove(&conn.0) else {
            return;
        };
        let reason = c.finished.unwrap_or(DisconnectReason::TransportClosed);
        if let Phase::Open(s) = c.phase {
            for p in s.m.pending {
                self.events.push_back(Event::CallCancelled {
                    call: CallId { conn, seq: p.seq },
                    reason: CancelReason::Disconnected,
                });
            }
            self.events.push_back(Event::Disconnected { conn, reason });
        } else if !matches!(reason, DisconnectReason::TransportClosed) {
            // Refused or timed-out handshakes are reported too, for logging.
            self.events.push_back(Event::Disconnected { conn, reason });
        }
    }

    /// Close a connection from the host side (WebSocket close 1000, or dropped in handshake).
    pub fn close(&mut self, conn: ConnectionId, now: Instant) -> Result<(), ApiError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(ApiError::UnknownConnection)?;
        match &mut c.phase {
            Phase::Handshake(_) => {
                c.finished.get_or_insert(DisconnectReason::ClosedByHost);
                c.abort = true;
            }
            Phase::Open(s) => {
                if s.m.closing_since.is_none() {
                    let _ = s.ws.sender.send_close(1000, "closed by the IDE");
                    s.m.closing_since = Some(now);
                }
            }
        }
        self.mark_dirty(conn);
        Ok(())
    }

    fn abort(&mut self, conn: ConnectionId, reason: DisconnectReason) {
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.finished.get_or_insert(reason);
            c.abort = true;
            self.mark_dirty(conn);
        }
    }

    /// The earliest instant at which [`Server::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .keys()
            .filter_map(|k| self.connection_deadline(ConnectionId(*k)))
            .min()
    }

    /// The earliest deadline one connection needs.
    pub fn connection_deadline(&self, conn: ConnectionId) -> Option<Instant> {
        let c = self.conns.get(&conn.0)?;
        if c.finished.is_some() {
            return None;
        }
        let l = &self.config.limits;
        match &c.phase {
            Phase::Handshake(_) => Some(c.created + l.handshake_timeout),
            Phase::Open(s) => {
                let mut d = c.next_ping.min(c.last_rx + 2 * l.ping_interval);
                if let Some(t) = s.m.closing_since {
                    d = d.min(t + l.close_timeout);
                }
                Some(d)
            }
        }
    }

    /// Timers: handshake deadline, pings, the dead-peer deadline, the close deadline. A wake-up
    /// later than a deadline by more than one ping interval means the host slept (laptop lid):
    /// deadlines restart from `now` instead of dropping healthy connections.
    pub fn handle_timeout(&mut self, now: Instant) {
        let interval = self.config.limits.ping_interval;
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        for k in keys {
            let conn = ConnectionId(k);
            let Some(deadline) = self.connection_deadline(conn) else {
                continue;
            };
            if now < deadline {
                continue;
            }
            let l = self.config.limits.clone();
            let c = self.conns.get_mut(&k).expect("connection");
            match &mut c.phase {
                Phase::Handshake(_) => {
                    c.finished = Some(DisconnectReason::HandshakeTimeout);
                    c.abort = true;
                }
                Phase::Open(s) => {
                    if let Some(t) = s.m.closing_since {
                        if now >= t + l.close_timeout {
                            c.finished.get_or_insert(DisconnectReason::Closed(None));
                            c.abort = true;
                            self.mark_dirty(conn);
                            continue;
                        }
                    }
                    let slept = now > deadline + interval;
                    if slept {
                        c.last_rx = now;
                    } else if now >= c.last_rx + 2 * interval {
                        c.finished = Some(DisconnectReason::PingTimeout);
                        c.abort = true;
                        self.mark_dirty(conn);
                        continue;
                    }
                    if now >= c.next_ping || slept {
                        c.next_ping = now + interval;
                        if s.m.closing_since.is_none() {
                            if let Err(e) = s.ws.sender.send_ping(b"") {
                                self.on_send_error(conn, e);
                                continue;
                            }
                        }
                    }
                }
            }
            self.mark_dirty(conn);
        }
    }

    /// Answer a tool call. `openDiff` answers are normally [`ToolResult::file_saved`],
    /// [`ToolResult::tab_closed`] or [`ToolResult::diff_rejected`].
    pub fn respond(&mut self, call: CallId, result: ToolResult) -> Result<(), ApiError> {
        // The result is written into the reused scratch buffer, and from there into the output queue.
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        result.write_json(&mut body);
        let r = self.finish_call(call, Ok(&body), false);
        self.scratch = body;
        r
    }

    /// Answer a compatibility request with a JSON result or a JSON-RPC error.
    pub fn respond_compat(
        &mut self,
        call: CallId,
        result: Result<serde_json::Value, RpcError>,
    ) -> Result<(), ApiError> {
        let r = result.map(|v| serde_json::to_vec(&v).unwrap_or_else(|_| b"null".to_vec()));
        self.finish_call(call, r.as_deref(), true)
    }

    fn finish_call(
        &mut self,
        call: CallId,
        body: Result<&[u8], &RpcError>,
        compat: bool,
    ) -> Result<(), ApiError> {
        let c = self
            .conns
            .get_mut(&call.conn.0)
            .ok_or(ApiError::NotPending)?;
        if c.finished.is_some() {
            return Err(ApiError::NotPending);
        }
        let Phase::Open(s) = &mut c.phase else {
            return Err(ApiError::NotPending);
        };
        let idx =
            s.m.pending
                .iter()
                .position(|p| p.seq == call.seq && p.compat == compat)
                .ok_or(ApiError::NotPending)?;
        let p = s.m.pending.remove(idx);
        let res = answer(&mut s.m, &mut s.ws.sender, &p, body);
        if let Err(e) = res {
            self.on_send_error(call.conn, e);
        } else {
            self.mark_dirty(call.conn);
            self.after_output(call.conn);
        }
        Ok(())
    }

    /// Send a notification to every initialized connection or to one. Returns how many
    /// connections it was queued for. An `at_mentioned` sent to [`Target::All`] while no client
    /// is initialized is kept (bounded, expiring) and delivered when one initializes.
    pub fn notify(&mut self, target: Target, notification: &Notification, now: Instant) -> usize {
        self.scratch.clear();
        notification.write_json(&mut self.scratch);
        let frame = std::mem::take(&mut self.scratch);
        let mut reached = 0;
        let keys: Vec<u64> = match target {
            Target::All => self.conns.keys().copied().collect(),
            Target::Connection(c) => vec![c.0],
        };
        for k in keys {
            let conn = ConnectionId(k);
            let Some(c) = self.conns.get_mut(&k) else {
                continue;
            };
            if c.finished.is_some() {
                continue;
            }
            let Phase::Open(s) = &mut c.phase else {
                continue;
            };
            if !s.m.initialized || s.m.closing_since.is_some() {
                continue;
            }
            match emit(&mut s.m, &mut s.ws.sender, &frame) {
                Ok(()) => {
                    reached += 1;
                    self.mark_dirty(conn);
                }
                Err(e) => self.on_send_error(conn, e),
            }
        }
        self.scratch = frame;
        if reached == 0
            && target == Target::All
            && matches!(notification, Notification::AtMentioned(_))
        {
            self.expire_mentions(now);
            if self.config.limits.max_queued_mentions > 0 {
                while self.mentions.len() >= self.config.limits.max_queued_mentions {
                    self.mentions.pop_front();
                }
                self.mentions.push_back((now, notification.clone()));
            }
        }
        reached
    }

    fn expire_mentions(&mut self, now: Instant) {
        let ttl = self.config.limits.mention_ttl;
        while let Some((t, _)) = self.mentions.front() {
            if now.saturating_duration_since(*t) > ttl {
                self.mentions.pop_front();
            } else {
                break;
            }
        }
    }

    /// Change the offered tools; initialized clients are sent `notifications/tools/list_changed`.
    pub fn set_tools(&mut self, tools: ToolSet, now: Instant) {
        if tools == self.config.tools {
            return;
        }
        self.config.tools = tools;
        self.notify(Target::All, &Notification::ToolsListChanged, now);
    }

    /// Change the workspace folders used for path checks.
    pub fn set_workspace_folders(&mut self, folders: Vec<String>) {
        self.config.workspace_folders = folders;
    }

    /// Live connections: upgraded, not yet closed.
    pub fn connections(&self) -> Vec<ConnectionId> {
        self.conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Open(_)) && c.finished.is_none())
            .map(|(k, _)| ConnectionId(*k))
            .collect()
    }

    /// Whether a connection finished the MCP handshake.
    pub fn is_initialized(&self, conn: ConnectionId) -> bool {
        matches!(self.conns.get(&conn.0), Some(Connection { phase: Phase::Open(s), finished: None, .. }) if s.m.initialized)
    }

    /// Stop: pending diffs are answered `DIFF_REJECTED`, other pending calls an error; every
    /// WebSocket is sent Close 1001 and new upgrades are refused with 503. The runtime keeps
    /// driving the server until [`Server::is_idle`].
    pub fn shutdown(&mut self, now: Instant) {
        self.stopping = true;
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        for k in keys {
            let conn = ConnectionId(k);
            let c = self.conns.get_mut(&k).expect("connection");
            match &mut c.phase {
                Phase::Handshake(_) => {
                    c.finished.get_or_insert(DisconnectReason::ServerStopped);
                    c.abort = true;
                }
                Phase::Open(s) => {
                    let pending = std::mem::take(&mut s.m.pending);
                    let mut failed = None;
                    for p in pending {
                        let body = match &p.tab {
                            Some(tab) => {
                                let mut b = Vec::new();
                                ToolResult::diff_rejected(tab.clone()).write_json(&mut b);
                                Ok(b)
                            }
                            None => Err(RpcError::internal("the IDE is shutting down")),
                        };
                        if let Err(e) = answer(&mut s.m, &mut s.ws.sender, &p, body.as_deref()) {
                            failed = Some(e);
                        }
                        self.events.push_back(Event::CallCancelled {
                            call: CallId { conn, seq: p.seq },
                            reason: CancelReason::ServerStopped,
                        });
                    }
                    if s.m.closing_since.is_none() {
                        let _ = s.ws.sender.send_close(1001, "the IDE is shutting down");
                        s.m.closing_since = Some(now);
                    }
                    if let Some(e) = failed {
                        self.on_send_error(conn, e);
                    }
                }
            }
            self.mark_dirty(conn);
        }
    }

    /// True when no connection is left (after [`Server::shutdown`], the runtime can exit).
    pub fn is_idle(&self) -> bool {
        self.conns.is_empty()
    }

    /// Bytes held by one connection's buffers (for tests of memory bounds).
    pub fn connection_memory(&self, conn: ConnectionId) -> usize {
        match self.conns.get(&conn.0) {
            None => 0,
            Some(c) => {
                c.pre_out.capacity()
                    + match &c.phase {
                        Phase::Handshake(r) => r.buffered(),
                        Phase::Open(s) => s.ws.receiver.memory() + s.ws.sender.queued(),
                    }
            }
        }
    }
}

enum Step {
    Idle,
    Continue,
    Send(Vec<u8>),
    Unsupported,
    Failed(ws::ProtocolError),
    PeerClosed(Option<u16>),
}

/// Queue one JSON-RPC message on the sender, keeping a copy when tracing.
fn emit(m: &mut Mcp, tx: &mut Sender, json: &[u8]) -> Result<(), SendError> {
    if let Some(t) = &mut m.trace {
        t.push(String::from_utf8_lossy(json).into_owned());
    }
    tx.send_text_with(|b| b.extend_from_slice(json))
}

/// Write the response for a finished pending call, into its batch or as its own frame.
fn answer(
    s: &mut Mcp,
    tx: &mut Sender,
    p: &Pending,
    body: Result<&[u8], &RpcError>,
) -> Result<(), SendError> {
    let write = |out: &mut Vec<u8>| match body {
        Ok(b) => jsonrpc::write_result(out, &p.id, |o| o.extend_from_slice(b)),
        Err(e) => jsonrpc::write_error(out, Some(&p.id), e),
    };
    if p.batch.is_none() && s.trace.is_none() {
        // The common case: straight into the output queue, no intermediate buffer.
        return tx.send_text_with(write);
    }
    let mut out = Vec::with_capacity(64 + body.map(|b| b.len()).unwrap_or(0));
    write(&mut out);
    match p.batch {
        None => emit(s, tx, &out),
        Some(bid) => {
            if let Some(batch) = s.batches.iter_mut().find(|b| b.id == bid) {
                push_batch_entry(batch, &out);
                batch.remaining -= 1;
            }
            match take_if_done(s, bid) {
                Some(body) => emit(s, tx, &body),
                None => Ok(()),
            }
        }
    }
}

fn push_batch_entry(batch: &mut Batch, entry: &[u8]) {
    if batch.entries > 0 {
        batch.body.push(b',');
    }
    batch.body.extend_from_slice(entry);
    batch.entries += 1;
}

/// Handle one text message. Immediate replies are collected in `out` (one frame) and returned as
/// [`Step::Send`]; deferred calls become pending entries and events.
fn handle_text(
    config: &Config,
    next_seq: &mut u64,
    events: &mut VecDeque<Event>,
    conn: ConnectionId,
    s: &mut Mcp,
    tx: &mut Sender,
    text: &str,
) -> Step {
    if s.trace.is_some() {
        events.push_back(Event::Message {
            conn,
            incoming: true,
            text: text.to_string(),
        });
    }
    let frame = match jsonrpc::decode_with(text, "tools/call", CallParamsSeed(config.tools)) {
        Decoded::Expected { id, params: call } => {
            let mut ctx = Ctx {
                config,
                next_seq,
                events,
                conn,
                tx,
                batch: None,
            };
            let result = if s.initialize_seen {
                ctx.dispatch_tool(s, id, call)
            } else {
                Err(not_initialized())
            };
            let mut out = Vec::new();
            match result {
                Ok(None) => return Step::Continue,
                Ok(Some(body)) => {
                    jsonrpc::write_result(&mut out, id.get(), |o| o.extend_from_slice(&body))
                }
                Err(e) => jsonrpc::write_error(&mut out, Some(id.get()), &e),
            }
            return Step::Send(out);
        }
        Decoded::Frame(frame) => frame,
    };
    match frame {
        Frame::Single(msg) => {
            let mut ctx = Ctx {
                config,
                next_seq,
                events,
                conn,
                tx,
                batch: None,
            };
            match ctx.handle(s, msg) {
                Reply::None => Step::Continue,
                Reply::Result(b) => Step::Send(b),
            }
        }
        Frame::Batch(items) => {
            let batching_allowed = s.initialize_seen && s.protocol_version <= "2025-03-26";
            if !batching_allowed || items.is_empty() || items.len() > config.limits.max_batch {
                let msg = if items.is_empty() {
                    "empty batch".to_string()
                } else if !batching_allowed {
                    format!(
                        "batches are not supported in protocol version {}",
                        s.protocol_version
                    )
                } else {
                    format!("batch larger than {} entries", config.limits.max_batch)
                };
                let mut out = Vec::new();
                jsonrpc::write_error(
                    &mut out,
                    None,
                    &RpcError::new(jsonrpc::INVALID_REQUEST, msg),
                );
                return Step::Send(out);
            }
            let bid = s.next_batch;
            s.next_batch += 1;
            s.batches.push(Batch {
                id: bid,
                remaining: 0,
                open: true,
                body: vec![b'['],
                entries: 0,
            });
            for raw in items {
                let msg = jsonrpc::decode_value(raw);
                let mut ctx = Ctx {
                    config,
                    next_seq,
                    events,
                    conn,
                    tx: &mut *tx,
                    batch: Some(bid),
                };
                if let Reply::Result(b) = ctx.handle(s, msg) {
                    if let Some(batch) = s.batches.iter_mut().find(|b| b.id == bid) {
                        push_batch_entry(batch, &b);
                    }
                }
            }
            if let Some(batch) = s.batches.iter_mut().find(|b| b.id == bid) {
                batch.open = false;
            }
            match take_if_done(s, bid) {
                Some(body) => Step::Send(body),
                None => Step::Continue,
            }
        }
    }
}

/// The finished JSON array of a batch whose entries are all answered (None while some are
/// pending, or when it held only notifications: then nothing is sent).
fn take_if_done(s: &mut Mcp, bid: u64) -> Option<Vec<u8>> {
    let i = s.batches.iter().position(|b| b.id == bid)?;
    let b = &s.batches[i];
    if b.open || b.remaining > 0 {
        return None;
    }
    let mut b = s.batches.remove(i);
    if b.entries == 0 {
        return None;
    }
    b.body.push(b']');
    Some(b.body)
}

struct Ctx<'c> {
    config: &'c Config,
    next_seq: &'c mut u64,
    events: &'c mut VecDeque<Event>,
    conn: ConnectionId,
    tx: &'c mut Sender,
    batch: Option<u64>,
}

impl Ctx<'_> {
    /// Returns the complete response bytes for a request answered now, or `Reply::None` when
    /// there is nothing to send now (notifications, deferred calls).
    fn handle(&mut self, s: &mut Mcp, msg: Message<'_>) -> Reply {
        match msg {
            Message::Response { .. } => Reply::None,
            Message::Invalid { id, error } => {
                let mut out = Vec::new();
                jsonrpc::write_error(&mut out, id.map(|i| i.get()), &error);
                Reply::Result(out)
            }
            Message::Notification { method, params } => {
                self.notification(s, &method, params);
                Reply::None
            }
            Message::Request { id, method, params } => {
                let result = self.request(s, id, &method, params);
                let mut out = Vec::new();
                match result {
                    Ok(Some(body)) => {
                        jsonrpc::write_result(&mut out, id.get(), |o| o.extend_from_slice(&body))
                    }
                    Ok(None) => return Reply::None,
                    Err(e) => jsonrpc::write_error(&mut out, Some(id.get()), &e),
                }
                Reply::Result(out)
            }
        }
    }

    fn notification(&mut self, s: &mut Mcp, method: &str, params: Option<&RawValue>) {
        match method {
            "notifications/initialized" | "initialized" if s.initialize_seen && !s.initialized => {
                s.initialized = true;
                self.events.push_back(Event::Initialized {
                    conn: self.conn,
                    protocol_version: s.protocol_version.to_string(),
                    client_name: s.client_name.take(),
                    client_version: s.client_version.take(),
                });
            }
            "notifications/cancelled" => {
                let Some(p) =
                    params.and_then(|p| serde_json::from_str::<CancelledParams>(p.get()).ok())
                else {
                    return;
                };
                let rid = p.request_id.get();
                if let Some(i) = s.pending.iter().position(|x| jsonrpc::same_id(&x.id, rid)) {
                    let p = s.pending.remove(i);
                    if let Some(bid) = p.batch {
                        // A cancelled entry of a batch is left out of the batch's answer.
                        if let Some(b) = s.batches.iter_mut().find(|b| b.id == bid) {
                            b.remaining -= 1;
                        }
                        if let Some(body) = take_if_done(s, bid) {
                            let _ = emit(s, self.tx, &body);
                        }
                    }
                    self.events.push_back(Event::CallCancelled {
                        call: CallId {
                            conn: self.conn,
                            seq: p.seq,
                        },
                        reason: CancelReason::Cancelled,
                    });
                }
            }
            "ide_connected" => {
                let pid = params
                    .and_then(|p| serde_json::from_str::<IdeConnectedParams>(p.get()).ok())
                    .and_then(|p| p.pid);
                self.events.push_back(Event::IdeConnected {
                    conn: self.conn,
                    pid,
                });
            }
            _ => {}
        }
    }

    fn request(
        &mut self,
        s: &mut Mcp,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        if method == "ping" {
            return Ok(Some(b"{}".to_vec()));
        }
        if method == "initialize" {
            return self.initialize(s, params).map(Some);
        }
        if !s.initialize_seen {
            return Err(not_initialized());
        }
        match method {
            "tools/list" => {
                let mut out = Vec::new();
                crate::tools::write_tools_list(&mut out, self.config.tools);
                Ok(Some(out))
            }
            "resources/list" => Ok(Some(br#"{"resources":[]}"#.to_vec())),
            "resources/templates/list" => Ok(Some(br#"{"resourceTemplates":[]}"#.to_vec())),
            "prompts/list" => Ok(Some(br#"{"prompts":[]}"#.to_vec())),
            "tools/call" => self.tool_call(s, id, params),
            _ if self.config.compat_methods => match CompatRequest::parse(method, params) {
                None => Err(method_not_found(method)),
                Some(Err(msg)) => Err(RpcError::invalid_params(msg)),
                Some(Ok(request)) => {
                    if let Some(path) = request.path() {
                        paths::resolve_in_workspace(path, &self.config.workspace_folders)?;
                    }
                    let seq = self.push_pending(s, id, None, true)?;
                    self.events.push_back(Event::CompatRequest {
                        call: CallId {
                            conn: self.conn,
                            seq,
                        },
                        request,
                    });
                    Ok(None)
                }
            },
            _ => Err(method_not_found(method)),
        }
    }

    fn initialize(&mut self, s: &mut Mcp, params: Option<&RawValue>) -> Result<Vec<u8>, RpcError> {
        if s.initialize_seen {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "already initialized",
            ));
        }
        let p: InitializeParams<'_> = params
            .ok_or_else(|| RpcError::invalid_params("initialize needs params"))
            .and_then(|p| {
                serde_json::from_str(p.get()).map_err(|e| {
                    RpcError::invalid_params(format!("invalid initialize params: {e}"))
                })
            })?;
        let version = SUPPORTED_PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == p.protocol_version)
            .copied()
            .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[SUPPORTED_PROTOCOL_VERSIONS.len() - 1]);
        s.protocol_version = version;
        s.initialize_seen = true;
        if let Some(info) = p.client_info {
            s.client_name = info.name;
            s.client_version = info.version;
        }
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"protocolVersion\":\"");
        out.extend_from_slice(version.as_bytes());
        out.extend_from_slice(
            b"\",\"capabilities\":{\"tools\":{\"listChanged\":true},\"prompts\":{},\"resources\":{}},\"serverInfo\":{\"name\":",
        );
        jsonrpc::write_json_string(&mut out, &self.config.server_name);
        out.extend_from_slice(b",\"version\":");
        jsonrpc::write_json_string(&mut out, &self.config.server_version);
        out.extend_from_slice(b"}}");
        Ok(out)
    }

    fn tool_call(
        &mut self,
        s: &mut Mcp,
        id: &RawValue,
        params: Option<&RawValue>,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        let params = params.ok_or_else(|| RpcError::invalid_params("tools/call needs params"))?;
        let p: CallParams<'_> = serde_json::from_str(params.get())
            .map_err(|e| RpcError::invalid_params(format!("invalid tools/call params: {e}")))?;
        self.config.tools.resolve(&p.name)?;
        let tool = ToolCall::parse(&p.name, p.arguments)?;
        self.dispatch_tool(s, id, tool)
    }

    /// Run or hand over a parsed tool call of an offered tool (either decoding path checked it
    /// with `ToolSet::resolve`).
    fn dispatch_tool(
        &mut self,
        s: &mut Mcp,
        id: &RawValue,
        tool: ToolCall,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        match tool {
            ToolCall::CloseTab(args) => {
                if let Some(i) = s
                    .pending
                    .iter()
                    .position(|x| x.tab.as_deref() == Some(args.tab_name.as_str()))
                {
                    let p = s.pending.remove(i);
                    self.reject_diff(s, p, CancelReason::TabClosed);
                }
                self.events.push_back(Event::TabClosed {
                    conn: self.conn,
                    tab_name: args.tab_name,
                });
                Ok(Some(result_body(&ToolResult::tab_closed())))
            }
            ToolCall::CloseAllDiffTabs => {
                let diffs: Vec<usize> = (0..s.pending.len())
                    .filter(|i| s.pending[*i].tab.is_some())
                    .collect();
                let n = diffs.len();
                for i in diffs.into_iter().rev() {
                    let p = s.pending.remove(i);
                    self.reject_diff(s, p, CancelReason::AllDiffTabsClosed);
                }
                Ok(Some(result_body(&ToolResult::closed_diff_tabs(n))))
            }
            tool => {
                // A second openDiff with the same tab name first rejects the earlier one.
                let tab = match &tool {
                    ToolCall::OpenDiff(args) => Some(args.tab_name.clone()),
                    _ => None,
                };
                if let Some(i) = tab
                    .as_deref()
                    .and_then(|t| s.pending.iter().position(|x| x.tab.as_deref() == Some(t)))
                {
                    let p = s.pending.remove(i);
                    self.reject_diff(s, p, CancelReason::Replaced);
                }
                let seq = self.push_pending(s, id, tab, false)?;
                self.events.push_back(Event::ToolCall {
                    call: CallId {
                        conn: self.conn,
                        seq,
                    },
                    tool,
                });
                Ok(None)
            }
        }
    }

    fn reject_diff(&mut self, s: &mut Mcp, p: Pending, reason: CancelReason) {
        let tab = p.tab.clone().unwrap_or_default();
        let body = result_body(&ToolResult::diff_rejected(tab));
        // A failure to queue (outbound full) is noticed by the caller through the sender state.
        let _ = answer(s, self.tx, &p, Ok(&body));
        self.events.push_back(Event::CallCancelled {
            call: CallId {
                conn: self.conn,
                seq: p.seq,
            },
            reason,
        });
    }

    /// Record a call handed to the host, or refuse it when
    /// [`Limits::max_pending_calls`](crate::Limits::max_pending_calls) are already in progress.
    fn push_pending(
        &mut self,
        s: &mut Mcp,
        id: &RawValue,
        tab: Option<String>,
        compat: bool,
    ) -> Result<u64, RpcError> {
        let max = self.config.limits.max_pending_calls;
        if s.pending.len() >= max {
            return Err(RpcError::new(
                jsonrpc::TOO_MANY_CALLS,
                format!("too many calls in progress on this connection (limit {max}): wait for some to be answered"),
            ));
        }
        let seq = *self.next_seq;
        *self.next_seq += 1;
        if let Some(bid) = self.batch {
            if let Some(b) = s.batches.iter_mut().find(|b| b.id == bid) {
                b.remaining += 1;
            }
        }
        s.pending.push(Pending {
            seq,
            id: id.get().into(),
            tab,
            compat,
            batch: self.batch,
        });
        Ok(seq)
    }
}

fn result_body(r: &ToolResult) -> Vec<u8> {
    let mut b = Vec::new();
    r.write_json(&mut b);
    b
}

fn not_initialized() -> RpcError {
    RpcError::new(
        jsonrpc::NOT_INITIALIZED,
        "the server is not initialized: send initialize first",
    )
}

fn method_not_found(method: &str) -> RpcError {
    RpcError::new(
        jsonrpc::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
    )
}

#[cfg(test)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<Server>();
}
