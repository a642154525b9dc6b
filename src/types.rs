//! The engine's shared types: what the host configures ([`Config`]), the names it is given
//! ([`ConnectionId`], [`CallId`]), what it is told ([`Event`] and its reasons) and the misuses it
//! is refused for ([`ApiError`]); and [`EndpointCx`], the part of the server a connection works
//! on. The server (`server.rs`), a connection (`connection.rs`) and its MCP session (`mcp.rs`) all
//! use them; this module uses none of those, so they depend on it and not on each other in a
//! circle: `types` ← `mcp` ← `connection` ← `server`.

use crate::discovery::AuthToken;
use crate::handshake::Rejection;
use crate::limits::Limits;
use crate::notify::Notification;
use crate::tools::{CompatRequest, ToolCall, ToolSet};
use crate::ws;
use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

/// How the server is set up. [`Config::new`] takes the token; everything else has defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The token clients must send in `X-Claude-Code-Ide-Authorization`.
    pub auth_token: AuthToken,
    /// Limits and timers.
    pub limits: Limits,
    /// `serverInfo.name` in the `initialize` result.
    pub server_name: String,
    /// `serverInfo.version` in the `initialize` result.
    pub server_version: String,
    /// The tools offered in `tools/list` and accepted by `tools/call`. With `openDiff`, the
    /// server also offers `close_tab` and `closeAllDiffTabs`, which the engine answers itself:
    /// claude closes with them a diff the user decided in its terminal, and a diff never closed
    /// would hold one of the connection's pending calls for good.
    pub tools: ToolSet,
    /// `Origin` values allowed to connect (a request without `Origin` is always allowed).
    pub allowed_origins: Vec<String>,
    /// Refuse upgrades whose `Host` is not a loopback name (DNS rebinding), nor one of
    /// `allowed_hosts`. Turn off only when deliberately listening on a non-loopback address.
    pub check_host: bool,
    /// Names the `Host` may also carry while `check_host` is on (an explicit opt-in, such as
    /// `host.docker.internal` for a client in a container); the token is still required.
    pub allowed_hosts: Vec<String>,
    /// Answer the compatibility methods (`readFile`, `files/read`, ...; docs/protocol.md,
    /// "Compatibility methods").
    pub compat_methods: bool,
    /// The workspace folders (absolute paths, POSIX or Windows), for path checks of
    /// compatibility methods: every form a client may name a file by (a folder given through a
    /// link, and the folder it resolves to), as the lock file lists them.
    pub workspace_folders: Vec<String>,
    /// Report every JSON-RPC message in and out as [`Event::Message`] (a wire log for
    /// debugging and tests; costs a copy of each message).
    pub trace_messages: bool,
    /// What a stop ([`Server::shutdown`](crate::Server::shutdown)) answers each pending
    /// `openDiff`: `Some(text)` a tool error with `text` (the default: [`UNDECIDED_AT_STOP`], as
    /// the runtimes answer), for a stop that is nobody's decision; `None` `DIFF_REJECTED`, as a
    /// closed tab. The real `claude` takes `DIFF_REJECTED` as the user's no and ends its turn, and
    /// after an error keeps its own accept prompt in its terminal, where the user still decides
    /// (docs/protocol.md, "Pending calls").
    ///
    /// ```
    /// use claude_ide_bridge::{AuthToken, Config, UNDECIDED_AT_STOP};
    /// let mut config = Config::new(AuthToken::from_string("t"));
    /// assert_eq!(config.diff_error_at_stop.as_deref(), Some(UNDECIDED_AT_STOP));
    /// config.diff_error_at_stop = Some("MyEditor quit before the change was decided".into());
    /// ```
    pub diff_error_at_stop: Option<String>,
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
            allowed_hosts: Vec::new(),
            compat_methods: false,
            workspace_folders: Vec::new(),
            trace_messages: false,
            diff_error_at_stop: Some(UNDECIDED_AT_STOP.to_string()),
        }
    }
}

/// What a stop answers a pending `openDiff` by default ([`Config::diff_error_at_stop`]): a tool
/// error, which leaves the decision to `claude`'s own prompt.
pub const UNDECIDED_AT_STOP: &str =
    "the IDE stopped before the change was decided (nothing was accepted or written)";

/// Names one connection for as long as the server lives; never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The handle of a request the host answers, now or much later, with
/// [`Server::respond`](crate::Server::respond) (tool calls) or
/// [`Server::respond_compat`](crate::Server::respond_compat) (compatibility methods).
///
/// Unique within the [`Server`](crate::Server) that made it, not across servers: a host running
/// several (one per window, say) keeps their calls apart by server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId {
    /// The connection the call came from.
    pub conn: ConnectionId,
    pub(crate) seq: u64,
    pub(crate) asker: Asker,
}

impl CallId {
    /// Who asked for this tool call, as the real client marks it in the call's `_meta`: the
    /// model's calls name its tool use (`claudecode/toolUseId`); the client's own (the
    /// `getDiagnostics` checks around an edit, which it bounds at 500 ms before the write and 2 s
    /// after) carry a `_meta` without one. [`Asker::Unknown`] for a call without `_meta` (other
    /// clients) and for a compatibility method.
    ///
    /// ```
    /// use claude_ide_bridge::{Asker, Event, Server};
    /// # fn asked(server: &mut Server) {
    /// while let Some(event) = server.poll_event() {
    ///     if let Event::ToolCall { call, .. } = event {
    ///         // The client's own check may get a shorter wait than the model's question.
    ///         let _brief = call.asker() == Asker::Client;
    ///     }
    /// }
    /// # }
    /// ```
    pub fn asker(&self) -> Asker {
        self.asker
    }
}

/// Who asked for a tool call ([`CallId::asker`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Asker {
    /// The model: the call's `_meta` names its tool use (`claudecode/toolUseId`, a string).
    Model,
    /// The client itself: the call has a `_meta` object naming no tool use.
    Client,
    /// Not told: the call has no `_meta` object.
    Unknown,
}

/// Why a pending call will not be answered by the host (or was answered by the engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The server is stopping; a diff was answered as [`Config::diff_error_at_stop`] says (a
    /// tool error by default), other calls an error.
    ServerStopped,
}

/// The reason's name in logs and lines for editors: `cancelled`, `tab_closed`,
/// `all_diff_tabs_closed`, `replaced`, `disconnected`, `server_stopped`.
///
/// ```
/// use claude_ide_bridge::CancelReason;
/// assert_eq!(CancelReason::AllDiffTabsClosed.to_string(), "all_diff_tabs_closed");
/// ```
impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CancelReason::Cancelled => "cancelled",
            CancelReason::TabClosed => "tab_closed",
            CancelReason::AllDiffTabsClosed => "all_diff_tabs_closed",
            CancelReason::Replaced => "replaced",
            CancelReason::Disconnected => "disconnected",
            CancelReason::ServerStopped => "server_stopped",
        })
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The upgrade was refused: the HTTP response sent ([`Rejection::status`] is its status).
    Refused(Rejection),
    /// The request head did not arrive before the handshake deadline.
    HandshakeTimeout,
    /// Dropped to make room for a newer socket still in its handshake.
    Evicted,
    /// A close handshake the peer began (or answered, after our Close for a message MCP does not
    /// take): the code the peer sent, if any. One the host or a stop began is
    /// [`DisconnectReason::ClosedByHost`] or [`DisconnectReason::ServerStopped`], answered or not.
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
    /// The host closed it ([`Server::close`](crate::Server::close)), whether the peer answered the
    /// Close or not.
    ClosedByHost,
    /// The server is stopping, whether the peer answered the Close or not.
    ServerStopped,
    /// We sent a Close (the peer sent a binary message: 1003) and no answer came within the close
    /// timeout.
    CloseTimeout,
}

/// The reason's name, as docs/protocol.md's "Disconnect reasons" gives it (and the program's wire
/// log and `--stdio` lines print it): `refused_<status>`, `handshake_timeout`, `evicted`,
/// `closed`, `protocol_error_<close code>`, `ping_timeout`, `outbound_full`, `transport_closed`,
/// `closed_by_host`, `server_stopped`, `close_timeout`.
///
/// ```
/// use claude_ide_bridge::DisconnectReason;
/// assert_eq!(DisconnectReason::Closed(Some(1000)).to_string(), "closed");
/// assert_eq!(DisconnectReason::PingTimeout.to_string(), "ping_timeout");
/// ```
impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisconnectReason::Refused(rejection) => write!(f, "refused_{}", rejection.status()),
            DisconnectReason::HandshakeTimeout => f.write_str("handshake_timeout"),
            DisconnectReason::Evicted => f.write_str("evicted"),
            DisconnectReason::Closed(_) => f.write_str("closed"),
            DisconnectReason::ProtocolError(e) => write!(f, "protocol_error_{}", e.close_code()),
            DisconnectReason::PingTimeout => f.write_str("ping_timeout"),
            DisconnectReason::OutboundFull => f.write_str("outbound_full"),
            DisconnectReason::TransportClosed => f.write_str("transport_closed"),
            DisconnectReason::ClosedByHost => f.write_str("closed_by_host"),
            DisconnectReason::ServerStopped => f.write_str("server_stopped"),
            DisconnectReason::CloseTimeout => f.write_str("close_timeout"),
        }
    }
}

/// What the engine tells the host. Drain them with
/// [`Server::poll_event`](crate::Server::poll_event) after every input.
///
/// ```
/// use claude_ide_bridge::{Event, Server};
///
/// fn after_input(server: &mut Server) {
///     while let Some(event) = server.poll_event() {
///         match event {
///             Event::Initialized { conn, client_name, .. } => {
///                 println!("{conn:?}: {} is ready", client_name.as_deref().unwrap_or("a client"));
///             }
///             // Answer with `Server::respond` now or later; until then the call is pending.
///             Event::ToolCall { call, tool } => println!("{call:?} asks {}", tool.name()),
///             // A pending call's UI (a diff shown, say) goes away.
///             Event::CallCancelled { call, reason } => println!("{call:?} withdrawn: {reason:?}"),
///             Event::Disconnected { conn, reason } => println!("{conn:?} gone: {reason:?}"),
///             _ => {}
///         }
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// A tool call for the host; answer with [`Server::respond`](crate::Server::respond).
    ToolCall {
        /// The handle to answer through.
        call: CallId,
        /// The typed call.
        tool: ToolCall,
    },
    /// A compatibility method for the host (only with [`Config::compat_methods`]); answer with
    /// [`Server::respond_compat`](crate::Server::respond_compat). Paths were already checked
    /// against the workspace folders lexically; the host must still resolve symlinks and re-check
    /// with [`crate::paths::resolve_in_workspace`] (see [`CompatRequest`]).
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
    /// The connection is gone; its pending calls were cancelled just before this event. Also for
    /// a socket refused or timed out during its upgrade ([`DisconnectReason::Refused`],
    /// [`DisconnectReason::HandshakeTimeout`]), which had no [`Event::Connected`]: a host that
    /// keeps state by connection may meet an id it never saw (only a socket the peer closed
    /// during its upgrade goes without any event).
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

/// Why the host's answer or request was not taken as given: a misuse of the API (a call not
/// pending, of the other kind, a connection unknown), or an answer that did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// The call is not pending: answered, cancelled, or its connection is gone or closing (then
    /// nothing more can be sent on it; the call is withdrawn when the connection ends).
    NotPending,
    /// The call is pending but of the other kind: a [`Event::CompatRequest`] is answered with
    /// [`Server::respond_compat`](crate::Server::respond_compat), a [`Event::ToolCall`] with
    /// [`Server::respond`](crate::Server::respond). It stays pending.
    WrongKind,
    /// No such live connection.
    UnknownConnection,
    /// The answer did not fit in the connection's output queue (its
    /// [`Limits::max_outbound`](crate::Limits::max_outbound) with what waits to be read, or its
    /// share of [`Limits::max_outbound_total`](crate::Limits::max_outbound_total)): the client
    /// was answered with [`RpcError::ANSWER_TOO_LARGE`](crate::RpcError::ANSWER_TOO_LARGE)
    /// saying so instead, and the call is no longer pending.
    AnswerTooLarge,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiError::NotPending => "the call is no longer pending",
            ApiError::WrongKind => "the call is pending but was answered as the other kind of call",
            ApiError::UnknownConnection => "no such connection",
            ApiError::AnswerTooLarge => {
                "the answer did not fit in the connection's output queue: the client was told so \
                 with an error instead"
            }
        })
    }
}

impl std::error::Error for ApiError {}

/// The endpoint's state that a connection touches while it works (its context, `cx`, lent by the
/// [`Server`](crate::Server), which is the endpoint): the configuration, the queues
/// of events and of connections to transmit, the call numbering and the queued at-mentions.
pub(crate) struct EndpointCx<'a> {
    pub(crate) config: &'a Config,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) dirty: &'a mut VecDeque<ConnectionId>,
    pub(crate) next_seq: &'a mut u64,
    pub(crate) mentions: &'a mut VecDeque<Mention>,
    /// The last `selection_changed` sent to all, which a new client is sent once it is ready.
    pub(crate) selection: &'a Option<Notification>,
}

/// An `at_mentioned` kept for a client not ready for it (queued by the server while no client
/// takes it, or held by a client until its welcome).
#[derive(Clone)]
pub(crate) struct Mention {
    /// Its number among the at-mentions the server was given (one sent to several clients has
    /// one number): the order they were sent in, and which are the same when clients that held
    /// it give it back.
    pub(crate) seq: u64,
    /// When it was sent: its time to live counts from then.
    pub(crate) at: Instant,
    pub(crate) notification: Notification,
}
