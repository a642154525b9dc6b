//! One connection's state machine, from the first byte of its upgrade request to the closed
//! socket: the upgrade, then the WebSocket and the MCP session over it, with the connection's own
//! timers (docs/protocol.md, "Keepalive and timers"). The server routes input, host calls and timeouts to it and
//! keeps only the endpoint's work.

use crate::handshake::{self, HeadRead, Policy, Rejection, Upgrade};
use crate::jsonrpc::RpcError;
use crate::limits::{Limits, Pressure};
use crate::mcp::{self, Mcp, McpPhase};
use crate::notify::Notification;
use crate::paths::ClientPaths;
use crate::types::{ApiError, ConnectionId, DisconnectReason, EndpointCx, Event, Mention};
use crate::ws::{self, SendError, WebSocket};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Where a connection is in its life. Every transition is a method of [`Connection`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lifecycle {
    /// Reading the upgrade request.
    Upgrading,
    /// Upgraded: the WebSocket is open and the MCP session at this phase.
    Open(McpPhase),
    /// We sent a Close at `since` and wait for the peer's (bounded by the close timeout); the
    /// session keeps its phase.
    Closing {
        /// When our Close was queued.
        since: Instant,
        /// The MCP session's phase.
        mcp: McpPhase,
        /// Why our Close was sent: what the connection's end is reported as.
        why: CloseCause,
    },
    /// Done: write what is queued (a refusal, a Close), then close the socket.
    Draining(DisconnectReason),
    /// Done: close the socket now, without writing anything more.
    Aborted(DisconnectReason),
}

/// Why we sent the Close a connection in [`Lifecycle::Closing`] waits to have answered, which
/// decides the [`DisconnectReason`] its end is reported with, answered or not: the host's
/// [`crate::Server::close`] is [`DisconnectReason::ClosedByHost`], a stop
/// [`DisconnectReason::ServerStopped`] (a host told `Closed(1000)` could not tell its own close
/// from claude leaving).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseCause {
    /// The host closed the connection.
    Host,
    /// The server is stopping.
    Stop,
    /// The peer sent what MCP does not take (a binary message: close 1003): the peer's answer
    /// is a close handshake as any other ([`DisconnectReason::Closed`]), none in time
    /// [`DisconnectReason::CloseTimeout`].
    Refusal,
}

impl CloseCause {
    /// The reason the end is reported with: once the peer answered with `code` (`Some`), or
    /// when it did not in time (`None`).
    fn reason(self, answer: Option<Option<u16>>) -> DisconnectReason {
        match (self, answer) {
            (CloseCause::Host, _) => DisconnectReason::ClosedByHost,
            (CloseCause::Stop, _) => DisconnectReason::ServerStopped,
            (CloseCause::Refusal, Some(code)) => DisconnectReason::Closed(code),
            (CloseCause::Refusal, None) => DisconnectReason::CloseTimeout,
        }
    }
}

/// The WebSocket and the MCP session of an upgraded connection.
struct Session {
    ws: WebSocket,
    mcp: Mcp,
}

/// What the message loop found next on the WebSocket.
enum Step {
    /// Nothing more is buffered.
    Idle,
    /// A message was handled; its reply, if any, is in the option.
    Handled(Option<Vec<u8>>),
    /// A binary message: MCP is text only.
    Unsupported,
    /// The peer broke the protocol (a Close is already queued).
    Failed(ws::ProtocolError),
    /// The peer sent a Close (its echo is already queued).
    PeerClosed(Option<u16>),
}

/// Whether what the session keeps for its pending calls, with the output queued, is over the
/// outbound limit (checked only when it may have grown): a client holding calls open with huge
/// ids, tab names or batches is dropped as one that stops reading is (docs/protocol.md,
/// "Limits").
#[inline]
fn over_limit(s: &mut Session, max_outbound: usize) -> bool {
    s.mcp.grew() && s.mcp.held().saturating_add(s.ws.sender.queued()) > max_outbound
}

/// What a session's answers are measured against: its queued output, and the answers of its
/// batches held until they are whole.
fn outbound(s: &Session) -> usize {
    // (Looked at only while a batch waits: off every lone call's way.)
    let held = if s.mcp.batching() {
        s.mcp.held_now()
    } else {
        0
    };
    s.ws.sender.queued() + held
}

/// What an answer adds to its result in the output queue, at most, unless its id is long: the
/// frame's header and the JSON-RPC envelope.
const ANSWER_FRAMING: usize = 4096;

/// What became of an answer given to [`Connection::answer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Queued as given.
    Taken,
    /// Replaced by an error saying it does not fit ([`too_large`], [`over_share`]).
    Replaced,
    /// Not taken yet: the output of all connections is to be added up first.
    Count,
}

/// The error an answer too large for what the output queue has left is replaced by.
#[cold]
#[inline(never)]
fn too_large(len: usize, queued: usize, max: usize) -> RpcError {
    // Asked again, an answer larger than the whole queue does not fit either.
    let again = match len > max {
        true => "",
        false => ", or again once what waits is read",
    };
    RpcError::new(
        RpcError::ANSWER_TOO_LARGE,
        format!(
            "the answer ({len} bytes) does not fit in this connection's output queue \
             ({max} bytes at most, {queued} waiting to be read): ask for less{again}"
        ),
    )
}

/// The error an answer is replaced by when the output queued for all connections is past
/// `max_outbound_total` and the answer would take this connection past its share of it.
#[cold]
#[inline(never)]
fn over_share(len: usize, queued: usize, pressure: &Pressure) -> RpcError {
    RpcError::new(
        RpcError::ANSWER_TOO_LARGE,
        format!(
            "the answer ({len} bytes) does not fit in this connection's share of the bridge's \
             output ({} bytes, with {} waiting to be read by all its clients, {queued} by this \
             one, and {} at most): ask for less, or again once what waits is read",
            pressure.share(queued),
            pressure.total,
            pressure.max_total
        ),
    )
}

/// Queue a notification on an initialized session if its unwritten output leaves room for it
/// under half of `max_outbound` (see [`Connection::notify`]); whether it was queued. A failure to
/// queue is left for the caller to notice on the sender.
fn send_news(s: &mut Session, frame: &[u8], max_outbound: usize) -> bool {
    s.ws.sender.queued() + frame.len() <= max_outbound / 2
        && s.mcp.send(&mut s.ws.sender, frame).is_ok()
}

/// `notifications/tools/list_changed`, as [`Notification::ToolsListChanged`] writes it.
///
/// [`Notification::ToolsListChanged`]: crate::Notification::ToolsListChanged
const TOOLS_LIST_CHANGED: &[u8] =
    br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;

/// Past this much of a data frame still to come, a connection whose output is past
/// `Limits::pause_input_above` is read on: a client that writes a large message before it reads
/// (one thread that writes, then reads: an `openDiff` of a large file after a large read) would
/// otherwise block in its write with its answers unread, and be dropped as silent. A read of at
/// most this much (the runtimes read 16 KiB) cannot reach the frame's end: reading on gives no
/// message and no output, and the frame's last part waits for the mark as any input does.
const LARGE_FRAME_LEFT: usize = 64 * 1024;

/// One connection.
pub(crate) struct Connection {
    pub(crate) id: ConnectionId,
    state: Lifecycle,
    upgrade: Upgrade,
    /// `Some` once upgraded.
    session: Option<Box<Session>>,
    created: Instant,
    /// Where the handshake's time counts from: its accept, or once, the wake of a host that was
    /// paused past the deadline (the request may be in the socket, unread).
    handshake_from: Instant,
    last_rx: Instant,
    next_ping: Instant,
    /// Whether the connection is in the server's queue of connections to transmit.
    in_dirty: bool,
    /// The offered tools changed and the client, past `initialize`, was not told: it had not sent
    /// `notifications/initialized`, or its unwritten output had no room. It is told when it can
    /// ([`Connection::tell_tools_changed`]): a client that listed the tools would otherwise keep
    /// the old list.
    tools_untold: bool,
    /// A late timer ([`LATE_WAKE`]) was forgiven since the peer was last heard: the next is not.
    forgave_late: bool,
    /// The peer took some of its output since it was last heard and the timer last looked (at
    /// `output_looked`): alive then at least, when its input is not read because its output is
    /// past `pause_input_above` ([`Connection::wants_input`]).
    took_output: bool,
    output_looked: Instant,
    /// How the client names files ([`crate::Server::set_client_paths`]).
    paths: ClientPaths,
    /// From `notifications/initialized` until the client is ready for it, what it is sent then
    /// ([`Welcome`]).
    welcome: Option<Box<Welcome>>,
}

/// How long after the client is ready for the IDE's news ([`Mcp::ready_for_news`]: it said
/// `ide_connected` and was answered its lists) it is sent its [`Welcome`]: `claude` sets its
/// handlers for the IDE's notifications once it has those answers, as it updates what it shows,
/// and drops one that comes before. By then the host has also had the `ide_connected` event, from
/// which it learns how the client names files ([`crate::Server::set_client_paths`]: a `claude`
/// in WSL reads no `C:\...` path).
pub(crate) const READY_SETTLE: Duration = Duration::from_millis(300);

/// How long after `notifications/initialized` the at-mentions held for a client are written if
/// it is not ready for them before ([`Mcp::ready_for_news`]: a client that does not list all
/// three, or never says `ide_connected`); at-mentions sent to it after that go out at once.
pub(crate) const MENTION_HOLD: Duration = Duration::from_secs(3);

/// What a client is sent once it is ready for it, [`READY_SETTLE`] after it is ready: the
/// editor's selection as last sent to all, or to it alone after that (the client shows it at
/// once, rather than at the selection's next change), then the at-mentions queued while no
/// client was connected (taken when it sent `notifications/initialized`) and those sent to it
/// since, in order; the at-mentions are written [`MENTION_HOLD`] after it initialized if it is
/// not ready before. Named the way the client names files then, and sent as news is (one that
/// does not fit under half of `max_outbound` is left out).
struct Welcome {
    /// The at-mentions, in order.
    mentions: VecDeque<Held>,
    /// [`READY_SETTLE`] after the client was first seen ready for it (`None` before).
    settled: Option<Instant>,
    /// [`MENTION_HOLD`] after `notifications/initialized`: when held at-mentions are due at the
    /// latest, and from when one sent to a client still not ready is no longer held.
    hold_until: Instant,
    /// A selection sent to this client alone since it initialized, unless one was sent to all
    /// after it: the newest it was sent, which the welcome gives instead of the one kept for all
    /// (older: it took the place of the client's own, 300 ms later).
    own_selection: Option<Notification>,
}

impl Welcome {
    /// When it is sent: once settled, or once the hold is over if at-mentions wait; `None` while
    /// the client is not ready and none waits.
    fn due(&self) -> Option<Instant> {
        let held = (!self.mentions.is_empty()).then_some(self.hold_until);
        self.settled.into_iter().chain(held).min()
    }
}

/// An at-mention a client holds for its [`Welcome`].
struct Held {
    mention: Mention,
    /// If this connection goes without writing it, it is the next client's: it was sent to all
    /// (or queued for the next client) and no other connection was written it (one sent to this
    /// client alone is no other's, and one written to another client is not shown twice).
    passes_on: bool,
}

/// How late a timer may run before the wake-up is taken as a pause of the host (a stopped
/// process, a debugger, a machine too loaded to run it) rather than as the peer's silence: what
/// the peer sent meanwhile may be unread in the socket, and the timer ran first.
const LATE_WAKE: Duration = Duration::from_secs(1);

impl Connection {
    /// A socket that has just been accepted.
    pub(crate) fn new(id: ConnectionId, limits: &Limits, now: Instant) -> Self {
        Connection {
            id,
            state: Lifecycle::Upgrading,
            upgrade: Upgrade::new(limits.max_head_bytes),
            session: None,
            created: now,
            handshake_from: now,
            last_rx: now,
            next_ping: now + limits.ping_interval,
            in_dirty: false,
            tools_untold: false,
            forgave_late: false,
            took_output: false,
            output_looked: now,
            paths: ClientPaths::AsGiven,
            welcome: None,
        }
    }

    /// Holds an at-mention for a client not yet sent its [`Welcome`] (and within
    /// [`MENTION_HOLD`] of its `notifications/initialized`, or holding others), after those held
    /// before; whether it did (`false`: send it as any notification, which a closing connection
    /// is not sent). At most `most` are held, the oldest dropped first. One sent `to_all` passes
    /// on to the next client if this one goes without writing it (unless
    /// [`Connection::held_mention_seen`]).
    pub(crate) fn hold_mention(&mut self, m: &Mention, to_all: bool, most: usize) -> bool {
        if !matches!(self.state, Lifecycle::Open(McpPhase::Initialized)) {
            return false;
        }
        let Some(w) = self
            .welcome
            .as_mut()
            .filter(|w| !w.mentions.is_empty() || m.at < w.hold_until)
        else {
            return false;
        };
        while w.mentions.len() >= most.max(1) {
            w.mentions.pop_front();
        }
        w.mentions.push_back(Held {
            mention: m.clone(),
            passes_on: to_all,
        });
        true
    }

    /// A `selection_changed` was sent to this client: to it alone (`own`), or to all (the one
    /// kept for all is then the newest). Its [`Welcome`], if still to come, gives the newest.
    pub(crate) fn selection_sent(&mut self, own: Option<&Notification>) {
        if let Some(w) = self.welcome.as_mut() {
            w.own_selection = own.cloned();
        }
    }

    /// The at-mention it held last was written to another connection too
    /// ([`Connection::hold_mention`] of one sent to all).
    pub(crate) fn held_mention_seen(&mut self) {
        if let Some(h) = self.welcome.as_mut().and_then(|w| w.mentions.back_mut()) {
            h.passes_on = false;
        }
    }

    /// The at-mentions it held and did not write (its socket closed first) that pass on to the
    /// next client (sent to all, and no other connection was written them), in order.
    pub(crate) fn take_held(&mut self) -> impl Iterator<Item = Mention> {
        let held = self.welcome.take().map(|w| w.mentions).unwrap_or_default();
        held.into_iter().filter(|h| h.passes_on).map(|h| h.mention)
    }

    /// When the client's [`Welcome`] is due, if it is.
    fn welcome_due(&self) -> Option<Instant> {
        self.welcome.as_ref().and_then(|w| w.due())
    }

    /// Sends the client its [`Welcome`] (the selection only to a client that is ready), named its
    /// way, once its time came and the connection can still be sent notifications (else the
    /// at-mentions stay for [`Connection::take_held`]).
    #[cold]
    #[inline(never)]
    fn send_welcome(&mut self, now: Instant, cx: &mut EndpointCx) {
        if !matches!(self.state, Lifecycle::Open(McpPhase::Initialized)) {
            return;
        }
        let (Some(w), Some(s)) = (self.welcome.take(), self.session.as_deref_mut()) else {
            return;
        };
        let ttl = cx.config.limits.mention_ttl;
        let selection = (w.own_selection.as_ref())
            .or(cx.selection.as_ref())
            .filter(|_| s.mcp.ready_for_news());
        let mentions = w
            .mentions
            .iter()
            .filter(|h| now.saturating_duration_since(h.mention.at) <= ttl)
            .map(|h| &h.mention.notification);
        // Each as news is sent ([`Connection::notify`]): one that would take the unwritten
        // output past half of `max_outbound` is left out, not the connection.
        let max = cx.config.limits.max_outbound;
        let mut frame = Vec::new();
        let mut wrote = false;
        for n in selection.into_iter().chain(mentions) {
            frame.clear();
            n.for_client(self.paths)
                .as_ref()
                .unwrap_or(n)
                .write_json(&mut frame);
            wrote |= send_news(s, &frame, max);
        }
        if wrote {
            self.mark_dirty(cx);
        }
        self.after_output(cx);
    }

    /// How the client names files.
    pub(crate) fn paths(&self) -> ClientPaths {
        self.paths
    }

    /// Name files the client's way from now on.
    pub(crate) fn set_paths(&mut self, paths: ClientPaths) {
        self.paths = paths;
    }

    /// When the connection was accepted.
    pub(crate) fn created(&self) -> Instant {
        self.created
    }

    /// Still reading its upgrade request (and not refused or dropped).
    pub(crate) fn is_upgrading(&self) -> bool {
        matches!(self.state, Lifecycle::Upgrading)
    }

    /// The bytes queued to be written to the peer, and the answers of its batches held until
    /// they are whole: what its answers are measured against.
    pub(crate) fn outbound(&self) -> usize {
        self.session.as_deref().map_or(0, outbound)
    }

    /// Whether the host should read more of this connection's input now: not while the output
    /// queued for it, which the peer takes by reading, is above `above`
    /// (`Limits::pause_input_above`), unless the peer is inside a data frame with more than
    /// [`LARGE_FRAME_LEFT`] still to come. A batch's answers held until it is whole do not
    /// count: no write would take them under, and the client's cancel of the call they wait
    /// for must be read.
    pub(crate) fn wants_input(&self, above: usize) -> bool {
        self.session.as_deref().is_none_or(|s| {
            s.ws.sender.queued() <= above || s.ws.receiver.frame_left() > LARGE_FRAME_LEFT
        })
    }

    /// Upgraded and not finished: a live WebSocket connection.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.state, Lifecycle::Open(_) | Lifecycle::Closing { .. })
    }

    /// The host does not read this connection now ([`crate::Server::reading_held`]): the peer's
    /// silence until `now` does not count.
    pub(crate) fn reading_held(&mut self, now: Instant) {
        if self.is_live() {
            self.last_rx = self.last_rx.max(now);
        }
    }

    /// Whether the call `seq` waits for its answer here: not once answered, cancelled or
    /// withdrawn, nor once the connection is closing or gone.
    pub(crate) fn is_pending(&self, seq: u64) -> bool {
        !self.is_finished()
            && (self.session.as_deref()).is_some_and(|s| {
                !s.ws.sender.close_sent() && !s.ws.sender.is_aborted() && s.mcp.is_pending(seq)
            })
    }

    /// Live and past the MCP handshake.
    pub(crate) fn is_initialized(&self) -> bool {
        self.mcp_phase() == Some(McpPhase::Initialized)
    }

    fn mcp_phase(&self) -> Option<McpPhase> {
        match self.state {
            Lifecycle::Open(mcp) | Lifecycle::Closing { mcp, .. } => Some(mcp),
            _ => None,
        }
    }

    fn is_finished(&self) -> bool {
        matches!(self.state, Lifecycle::Draining(_) | Lifecycle::Aborted(_))
    }

    /// Done: `reason` unless it was already done for another.
    fn finish(&mut self, reason: DisconnectReason) {
        if !self.is_finished() {
            self.state = Lifecycle::Draining(reason);
        }
    }

    /// Done, and nothing more is written: `reason` unless it was already done for another.
    fn abort(&mut self, reason: DisconnectReason) {
        self.state = match std::mem::replace(&mut self.state, Lifecycle::Upgrading) {
            Lifecycle::Draining(r) | Lifecycle::Aborted(r) => Lifecycle::Aborted(r),
            _ => Lifecycle::Aborted(reason),
        };
    }

    /// Queue the connection for [`crate::Server::poll_transmit_ready`] (once), and report the
    /// messages it traced.
    fn mark_dirty(&mut self, cx: &mut EndpointCx<'_>) {
        if let Some(s) = &mut self.session {
            for text in s.mcp.take_trace() {
                cx.events.push_back(Event::Message {
                    conn: self.id,
                    incoming: false,
                    text,
                });
            }
        }
        if !self.in_dirty {
            self.in_dirty = true;
            cx.dirty.push_back(self.id);
        }
    }

    /// Taken off the server's transmit queue.
    pub(crate) fn take_dirty(&mut self) {
        self.in_dirty = false;
    }

    /// Bytes arrived. `refuse` is why the endpoint would take no more live connection now (its
    /// limit, or its stop), should this input complete the upgrade.
    pub(crate) fn input(
        &mut self,
        mut data: &[u8],
        now: Instant,
        refuse: Option<Rejection>,
        cx: &mut EndpointCx,
    ) {
        if self.is_finished() || data.is_empty() {
            return;
        }
        // A `now` older than one given before (a host that read the clock before it took a lock)
        // does not move the peer's last word back.
        self.last_rx = self.last_rx.max(now);
        self.forgave_late = false;
        self.took_output = false;
        if self.is_upgrading() {
            data = match self.upgrade.read_head(data) {
                HeadRead::Partial => return,
                HeadRead::TooLarge => return self.refuse(Rejection::HeadersTooLarge, cx),
                HeadRead::Complete(rest) => rest,
            };
            if let Err(rejection) = self.accept_upgrade(now, refuse, cx) {
                return self.refuse(rejection, cx);
            }
        }
        if let Some(s) = &mut self.session {
            if !data.is_empty() {
                s.ws.receiver.receive(data);
            }
        }
        self.process(now, cx);
    }

    fn accept_upgrade(
        &mut self,
        now: Instant,
        refuse: Option<Rejection>,
        cx: &mut EndpointCx,
    ) -> Result<(), Rejection> {
        let config = cx.config;
        let req = handshake::parse_upgrade(self.upgrade.head(), config.limits.max_headers)?;
        handshake::authorize(
            &req,
            &Policy {
                token: Some(config.auth_token.as_str()),
                allowed_origins: &config.allowed_origins,
                check_host: config.check_host,
                allowed_hosts: &config.allowed_hosts,
            },
        )?;
        if let Some(rejection) = refuse {
            return Err(rejection);
        }
        let proto = req.offers_protocol("mcp").then_some("mcp");
        self.upgrade.accept(&req, proto);
        self.session = Some(Box::new(Session {
            ws: WebSocket::new(config.limits.ws()),
            mcp: Mcp::new(config),
        }));
        self.state = Lifecycle::Open(McpPhase::AwaitingInitialize);
        self.last_rx = now;
        self.next_ping = now + config.limits.ping_interval;
        self.mark_dirty(cx);
        cx.events.push_back(Event::Connected {
            conn: self.id,
            path: req.path,
            user_agent: req.user_agent,
        });
        Ok(())
    }

    fn refuse(&mut self, rejection: Rejection, cx: &mut EndpointCx) {
        self.upgrade.refuse(rejection);
        self.state = Lifecycle::Draining(DisconnectReason::Refused(rejection));
        self.mark_dirty(cx);
    }

    /// Run the WebSocket and MCP layers over whatever input is buffered.
    fn process(&mut self, now: Instant, cx: &mut EndpointCx) {
        loop {
            let Some(s) = self.session.as_deref_mut() else {
                return;
            };
            let (phase, closing) = match &mut self.state {
                Lifecycle::Open(mcp) => (mcp, false),
                Lifecycle::Closing { mcp, .. } => (mcp, true),
                _ => return,
            };
            let before = s.ws.sender.queued();
            let was_initialized = *phase == McpPhase::Initialized;
            // Decide what to do with the next message while it is borrowed; act after.
            let ws = &mut s.ws;
            let step = match ws.receiver.poll(&mut ws.sender) {
                Err(e) => Step::Failed(e),
                Ok(None) => Step::Idle,
                // After our Close nothing more can be answered: a call is not handed to the host
                // (an `openDiff` would open a diff nobody can accept), and a binary message gets
                // no second Close.
                Ok(Some(ws::Message::Text(_) | ws::Message::Binary(_))) if closing => {
                    Step::Handled(None)
                }
                Ok(Some(ws::Message::Text(text))) => Step::Handled(mcp::handle_text(
                    cx,
                    self.id,
                    &mut s.mcp,
                    phase,
                    &mut ws.sender,
                    text,
                )),
                Ok(Some(ws::Message::Binary(_))) => Step::Unsupported,
                Ok(Some(ws::Message::Close(code))) => Step::PeerClosed(code.map(|(c, _)| c)),
                Ok(Some(ws::Message::Ping(_))) | Ok(Some(ws::Message::Pong(_))) => {
                    Step::Handled(None)
                }
            };
            let phase = *phase;
            if over_limit(s, cx.config.limits.max_outbound) {
                return self.outbound_full(cx);
            }
            if !was_initialized && phase == McpPhase::Initialized {
                // What it is sent once it is ready for it ([`Welcome`]): the at-mentions queued
                // while nobody was connected are this client's, and those sent to it until then
                // wait too (`claude` drops one that comes before).
                let mentions: VecDeque<_> = (cx.mentions.drain(..))
                    .map(|mention| Held {
                        mention,
                        passes_on: true,
                    })
                    .collect();
                self.welcome = Some(Box::new(Welcome {
                    mentions,
                    settled: None,
                    hold_until: now + MENTION_HOLD,
                    own_selection: None,
                }));
                // And a change of the tools made since `initialize` was answered.
                if self.tools_untold {
                    let max = cx.config.limits.max_outbound;
                    self.tools_untold = !send_news(s, TOOLS_LIST_CHANGED, max);
                }
            }
            // Ready for its welcome (after `initialized`, in whichever order the client said it):
            // due `READY_SETTLE` after the step that made it so (the first is kept).
            if let Some(w) = &mut self.welcome {
                if s.mcp.ready_for_news() {
                    w.settled.get_or_insert(now + READY_SETTLE);
                }
            }
            match step {
                Step::Idle => {
                    if s.ws.sender.queued() != before {
                        self.mark_dirty(cx);
                    }
                    self.after_output(cx);
                    return;
                }
                // Nothing queued (a call handed to the host, a notification): no new bytes, so
                // the connection is not put on the transmit queue for nothing.
                Step::Handled(None) if s.ws.sender.queued() == before => continue,
                Step::Handled(None) => {}
                Step::Handled(Some(out)) => {
                    if let Err(e) = s.mcp.send(&mut s.ws.sender, &out) {
                        self.on_send_error(e, cx);
                        return;
                    }
                }
                Step::Unsupported => {
                    let _ =
                        s.ws.sender
                            .send_close(1003, "binary messages are not supported");
                    self.state = Lifecycle::Closing {
                        since: now,
                        mcp: phase,
                        why: CloseCause::Refusal,
                    };
                }
                Step::Failed(error) => self.finish(DisconnectReason::ProtocolError(error)),
                Step::PeerClosed(code) => self.finish(self.closed_reason(Some(code))),
            }
            self.mark_dirty(cx);
        }
    }

    /// After output was queued: an outbound queue that overflowed aborts the connection, and a
    /// finished close handshake ends it.
    fn after_output(&mut self, cx: &mut EndpointCx) {
        let Some(s) = &self.session else { return };
        if s.ws.sender.is_aborted() {
            self.abort(DisconnectReason::OutboundFull);
            self.mark_dirty(cx);
        } else if !self.is_finished() && s.ws.is_finished() {
            self.finish(self.closed_reason(Some(None)));
            self.mark_dirty(cx);
        }
    }

    /// What a close handshake's end is reported as: `answer` is the peer's Close (with its code,
    /// if any), `None` when none came in time. The cause of our own Close, if we sent one first
    /// ([`CloseCause`]); else the peer's Close ([`DisconnectReason::Closed`]).
    fn closed_reason(&self, answer: Option<Option<u16>>) -> DisconnectReason {
        match (&self.state, answer) {
            (Lifecycle::Closing { why, .. }, answer) => why.reason(answer),
            (_, Some(code)) => DisconnectReason::Closed(code),
            (_, None) => DisconnectReason::CloseTimeout,
        }
    }

    /// Dropped for holding more than the outbound limit allows (see [`over_limit`]).
    #[cold]
    #[inline(never)]
    fn outbound_full(&mut self, cx: &mut EndpointCx) {
        self.abort(DisconnectReason::OutboundFull);
        self.mark_dirty(cx);
    }

    /// A message could not be queued. `Closed` also comes from a sender that an earlier overflow
    /// aborted without telling (a diff rejected on the way, whose failure is not returned): that
    /// ends the connection too, now rather than at its next input.
    fn on_send_error(&mut self, e: SendError, cx: &mut EndpointCx) {
        let aborted = self
            .session
            .as_ref()
            .is_some_and(|s| s.ws.sender.is_aborted());
        if e == SendError::OutboundFull || aborted {
            self.abort(DisconnectReason::OutboundFull);
        }
        self.mark_dirty(cx);
    }

    /// The bytes to write to the socket now.
    pub(crate) fn transmit(&self) -> &[u8] {
        if matches!(self.state, Lifecycle::Aborted(_)) {
            return &[];
        }
        let ws_output = self
            .session
            .as_ref()
            .map_or(&[][..], |s| s.ws.sender.output());
        self.upgrade.transmit(ws_output)
    }

    /// `n` bytes of [`Connection::transmit`] were written.
    pub(crate) fn advance_transmit(&mut self, n: usize, cx: &mut EndpointCx) {
        let n = self.upgrade.advance(n);
        if n > 0 {
            if let Some(s) = &mut self.session {
                s.ws.sender.advance(n);
                self.took_output = true;
            }
        }
        // Room again, maybe, for news it missed.
        if self.tools_untold {
            self.tell_tools_changed(cx);
        }
        // More to send (the WebSocket's bytes behind the 101): report the connection again.
        if !self.transmit().is_empty() {
            self.mark_dirty(cx);
        }
    }

    /// Done, and everything it had to write was written (or it is aborted).
    pub(crate) fn should_close(&self) -> bool {
        match self.state {
            Lifecycle::Aborted(_) => true,
            Lifecycle::Draining(_) => self.transmit().is_empty(),
            _ => false,
        }
    }

    /// The socket is closed: the reason, and the events that say so. Pending calls are
    /// cancelled. A socket closed during its upgrade is reported only when the engine ended it.
    pub(crate) fn closed(self, events: &mut std::collections::VecDeque<Event>) {
        let conn = self.id;
        let reason = match self.state {
            Lifecycle::Draining(r) | Lifecycle::Aborted(r) => r,
            // The socket gone while our Close waited for its answer: the close the host or a
            // stop began ends so, answered or not (a refusal's ends as the socket did).
            Lifecycle::Closing {
                why: why @ (CloseCause::Host | CloseCause::Stop),
                ..
            } => why.reason(None),
            _ => DisconnectReason::TransportClosed,
        };
        match self.session {
            Some(s) => {
                s.mcp.disconnected(conn, events);
                events.push_back(Event::Disconnected { conn, reason });
            }
            None if reason != DisconnectReason::TransportClosed => {
                // Refused or timed-out handshakes are reported too, for logging.
                events.push_back(Event::Disconnected { conn, reason });
            }
            None => {}
        }
    }

    /// Closed by the host: WebSocket close 1000, or dropped during the upgrade.
    pub(crate) fn close(&mut self, now: Instant, cx: &mut EndpointCx) {
        match self.state {
            Lifecycle::Open(mcp) => {
                if let Some(s) = &mut self.session {
                    let _ = s.ws.sender.send_close(1000, "closed by the IDE");
                }
                self.state = Lifecycle::Closing {
                    since: now,
                    mcp,
                    why: CloseCause::Host,
                };
            }
            Lifecycle::Closing { .. } => {}
            _ if self.session.is_none() => self.abort(DisconnectReason::ClosedByHost),
            _ => {}
        }
        self.mark_dirty(cx);
    }

    /// Dropped by the endpoint (evicted, or the server stopping during the upgrade).
    pub(crate) fn drop_now(&mut self, reason: DisconnectReason, cx: &mut EndpointCx) {
        self.abort(reason);
        self.mark_dirty(cx);
    }

    /// The earliest deadline the connection needs: the upgrade's, or the ping, dead-peer and close
    /// deadlines.
    pub(crate) fn deadline(&self, l: &Limits) -> Option<Instant> {
        match self.state {
            Lifecycle::Upgrading => Some(self.handshake_from + l.handshake_timeout),
            Lifecycle::Open(_) => {
                let keepalive = self.next_ping.min(self.last_rx + 2 * l.ping_interval);
                Some(self.welcome_due().map_or(keepalive, |u| keepalive.min(u)))
            }
            Lifecycle::Closing { since, .. } => Some(
                self.next_ping
                    .min(self.last_rx + 2 * l.ping_interval)
                    .min(since + l.close_timeout),
            ),
            // Its last bytes (a refusal, a Close) have the close timeout from the input that
            // finished it (nothing read counts after that) to be written; a peer that does not
            // read them is dropped then.
            Lifecycle::Draining(_) => Some(self.last_rx + l.close_timeout),
            Lifecycle::Aborted(_) => None,
        }
    }

    /// What, besides the instants the connection's own methods set, its [`Connection::deadline`]
    /// follows: its state (the close handshake's start is set only when the state changes).
    pub(crate) fn timer_state(&self) -> u8 {
        match self.state {
            Lifecycle::Upgrading => 0,
            Lifecycle::Open(_) => 1,
            Lifecycle::Closing { .. } => 2,
            Lifecycle::Draining(_) => 3,
            Lifecycle::Aborted(_) => 4,
        }
    }

    /// Timers at `now`. A wake-up later than a deadline by more than one ping interval means the
    /// host slept (laptop lid): deadlines restart from `now` instead of dropping a healthy peer.
    pub(crate) fn timeout(&mut self, now: Instant, cx: &mut EndpointCx) {
        if self.welcome_due().is_some_and(|u| now >= u) {
            self.send_welcome(now, cx);
        }
        let l = &cx.config.limits;
        let Some(deadline) = self.deadline(l) else {
            return;
        };
        if now < deadline {
            return;
        }
        let (interval, close_timeout) = (l.ping_interval, l.close_timeout);
        match self.state {
            // Late by more than `LATE_WAKE`: the host was paused (SIGSTOP, a debugger), and the
            // client's request may wait in the socket, unread. Its time starts again, once.
            Lifecycle::Upgrading
                if now > deadline + LATE_WAKE && self.handshake_from == self.created =>
            {
                self.handshake_from = now;
            }
            Lifecycle::Upgrading => self.abort(DisconnectReason::HandshakeTimeout),
            // Keeps the reason it finished for.
            Lifecycle::Draining(_) => self.abort(DisconnectReason::Closed(None)),
            Lifecycle::Open(_) | Lifecycle::Closing { .. } => {
                let closing = match self.state {
                    Lifecycle::Closing { since, .. } => Some(since),
                    _ => None,
                };
                if closing.is_some_and(|since| now >= since + close_timeout) {
                    self.abort(self.closed_reason(None));
                    self.mark_dirty(cx);
                    return;
                }
                // (A zero interval has no sleep to tell: it drops at the first timer.) A
                // wake-up late by more than an interval is a host that slept. One that would drop
                // the peer, late by more than `LATE_WAKE`, a host paused, perhaps with the peer's
                // answer to the last ping unread: forgiven once until the peer is heard again, so
                // that a dead peer is still dropped within an interval or two of the usual time.
                // Its input unread because its output is past `pause_input_above` (its answers to
                // the pings may wait in the socket), a peer that took some of the output since
                // the timer last looked was alive then, at least.
                if self.took_output && !self.wants_input(l.pause_input_above) {
                    self.last_rx = self.last_rx.max(self.output_looked);
                }
                self.took_output = false;
                self.output_looked = now;
                let silent = now >= self.last_rx + 2 * interval;
                let slept = !interval.is_zero()
                    && (now > deadline + interval
                        || (silent && now > deadline + LATE_WAKE && !self.forgave_late));
                if slept {
                    self.last_rx = now;
                    self.forgave_late = true;
                } else if silent {
                    self.abort(DisconnectReason::PingTimeout);
                    self.mark_dirty(cx);
                    return;
                }
                if now >= self.next_ping || slept {
                    self.next_ping = now + interval;
                    if closing.is_none() {
                        if let Some(s) = &mut self.session {
                            if let Err(e) = s.ws.sender.send_ping(b"") {
                                self.on_send_error(e, cx);
                                return;
                            }
                        }
                    }
                }
            }
            Lifecycle::Aborted(_) => {}
        }
        self.mark_dirty(cx);
    }

    /// Answer the pending call `seq`: `NotPending` when it is not pending (answered, cancelled,
    /// or the connection is done or closing), `WrongKind` when it is a call of the other kind.
    ///
    /// `pressure` is the output queued for all connections, or `None` when not added up yet:
    /// then an answer that could pass the connection's share of `max_outbound_total` (past
    /// [`Pressure::least_share`]) is not taken, and [`Answered::Count`] asks the caller to add
    /// it up and answer again (out of every small answer's way).
    pub(crate) fn answer(
        &mut self,
        seq: u64,
        compat: bool,
        body: Result<&[u8], &RpcError>,
        pressure: Option<Pressure>,
        cx: &mut EndpointCx,
    ) -> Result<Answered, ApiError> {
        if self.is_finished() {
            return Err(ApiError::NotPending);
        }
        let Some(s) = &mut self.session else {
            return Err(ApiError::NotPending);
        };
        // Closing (the host closed it, or a Close went out): nothing more can be sent, so the
        // answer is refused as for a call no longer pending (docs/protocol.md, "Pending calls"),
        // not taken and dropped; the call stays pending until the connection ends, which
        // withdraws it.
        if s.ws.sender.close_sent() || s.ws.sender.is_aborted() {
            return Err(ApiError::NotPending);
        }
        // An answer that would not fit in what the output queue has left is replaced by an
        // error saying so (the client asked for more than it can be sent now), not the
        // connection; the connection is dropped only when even that does not fit. The queue
        // holds what waits to be sent and the answers of a batch not yet whole: a batch whose
        // answers fit was dropped, its held part not counted here but by `over_limit`.
        let max = cx.config.limits.max_outbound;
        let refused;
        let given = body.is_ok();
        let body = match body {
            Ok(b) => {
                let taken = outbound(s);
                let len = b.len() + ANSWER_FRAMING;
                if len + taken > max {
                    refused = too_large(b.len(), taken, max);
                    Err(&refused)
                } else if len + taken <= Pressure::least_share(&cx.config.limits) {
                    Ok(b)
                } else {
                    match pressure {
                        None => return Ok(Answered::Count),
                        Some(p) if p.refuses(taken, len) => {
                            refused = over_share(b.len(), taken, &p);
                            Err(&refused)
                        }
                        Some(_) => Ok(b),
                    }
                }
            }
            body => body,
        };
        // An answer given that became an error is one replaced.
        let answered = match given && body.is_err() {
            true => Answered::Replaced,
            false => Answered::Taken,
        };
        let queued = s.mcp.answer_call(&mut s.ws.sender, seq, compat, body)?;
        if over_limit(s, cx.config.limits.max_outbound) {
            self.outbound_full(cx);
        } else if let Err(e) = queued {
            self.on_send_error(e, cx);
        } else {
            self.mark_dirty(cx);
            self.after_output(cx);
        }
        Ok(answered)
    }

    /// Send a notification if the connection is initialized and not closing, and its queued
    /// output leaves room for it under half of `max_outbound`; whether it was queued. A peer that
    /// does not read for a while misses news (a selection, a file's diagnostics: sent again when
    /// they change) rather than its connection: the outbound limit, past which it is dropped, is
    /// left to the answers it is owed (a language server publishing for thousands of files made
    /// a client paused for 15 s lose its connection, `outbound_full`). Nor while the output
    /// queued for all connections is past `max_outbound_total` (`pressure`, if it may count)
    /// and this one would pass its share of it.
    pub(crate) fn notify(
        &mut self,
        frame: &[u8],
        pressure: Option<Pressure>,
        cx: &mut EndpointCx,
    ) -> bool {
        if !matches!(self.state, Lifecycle::Open(McpPhase::Initialized)) {
            return false;
        }
        let Some(s) = &mut self.session else {
            return false;
        };
        if s.ws.sender.queued() + frame.len() > cx.config.limits.max_outbound / 2
            || pressure.is_some_and(|p| p.refuses(outbound(s), frame.len()))
        {
            return false;
        }
        match s.mcp.send(&mut s.ws.sender, frame) {
            Ok(()) => {
                self.mark_dirty(cx);
                true
            }
            Err(e) => {
                self.on_send_error(e, cx);
                false
            }
        }
    }

    /// [`Connection::notify`] for `notifications/tools/list_changed` (a few bytes, not counted
    /// against `max_outbound_total`): a client past `initialize` that cannot be told now (it has
    /// not sent `notifications/initialized`, or too much of its output waits) is told when it
    /// can, once (see `tools_untold`).
    pub(crate) fn notify_tools_changed(&mut self, frame: &[u8], cx: &mut EndpointCx) -> bool {
        let sent = self.notify(frame, None, cx);
        self.tools_untold = !sent
            && matches!(
                self.state,
                Lifecycle::Open(McpPhase::AwaitingInitialized | McpPhase::Initialized)
            );
        sent
    }

    /// Tell an initialized client of a change of the tools it missed, if its output has room now.
    #[cold]
    #[inline(never)]
    fn tell_tools_changed(&mut self, cx: &mut EndpointCx) {
        if self.notify(TOOLS_LIST_CHANGED, None, cx) {
            self.tools_untold = false;
        }
    }

    /// The server is stopping: pending diffs are answered `DIFF_REJECTED` (or the configured
    /// error), other pending calls an error, and the WebSocket is sent Close 1001; a connection
    /// still upgrading is dropped.
    pub(crate) fn shutdown(&mut self, now: Instant, cx: &mut EndpointCx) {
        match &mut self.session {
            None => self.abort(DisconnectReason::ServerStopped),
            Some(s) => {
                let failed = s.mcp.stop(
                    self.id,
                    &mut s.ws.sender,
                    cx.events,
                    cx.config.diff_error_at_stop.as_deref(),
                );
                if let Lifecycle::Open(mcp) = self.state {
                    let _ = s.ws.sender.send_close(1001, "the IDE is shutting down");
                    self.state = Lifecycle::Closing {
                        since: now,
                        mcp,
                        why: CloseCause::Stop,
                    };
                }
                if let Some(e) = failed {
                    self.on_send_error(e, cx);
                }
            }
        }
        self.mark_dirty(cx);
    }

    /// Bytes held by the connection's buffers.
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub(crate) fn memory(&self) -> usize {
        self.upgrade.memory()
            + self
                .session
                .as_ref()
                .map_or(0, |s| s.ws.receiver.memory() + s.ws.sender.queued())
    }
}

#[cfg(test)]
mod tests {
    use crate::notify::Notification;

    #[test]
    fn the_kept_list_changed_frame_is_the_notifications() {
        let mut frame = Vec::new();
        Notification::ToolsListChanged.write_json(&mut frame);
        assert_eq!(frame, super::TOOLS_LIST_CHANGED);
    }

    /// An answer larger than the whole queue is not told to be asked again later: it never fits.
    #[test]
    fn an_answer_larger_than_the_queue_is_not_told_to_wait() {
        let never = super::too_large(70, 0, 64);
        assert!(never.message.ends_with("ask for less"), "{}", never.message);
        let later = super::too_large(40, 30, 64);
        assert!(later.message.ends_with("or again once what waits is read"));
    }
}
