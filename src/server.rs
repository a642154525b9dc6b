//! The server: the endpoint. It accepts sockets, bounds the connections, routes input, host
//! calls and timeouts to each connection's state machine (`connection.rs`, with its MCP session in
//! `mcp.rs`), queues at-mentions while nobody is connected, and broadcasts notifications. The
//! types it shares with them live in `types.rs`.
//!
//! See the crate documentation for the drive loop.

use crate::connection::{Answered, Connection};
use crate::handshake::Rejection;
use crate::jsonrpc::RpcError;
use crate::limits::Pressure;
use crate::notify::Notification;
use crate::paths::ClientPaths;
use crate::tools::{ToolResult, ToolSet};
use crate::types::{
    ApiError, CallId, Config, ConnectionId, DisconnectReason, EndpointCx, Event, Mention, Target,
};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Instant;

/// The largest scratch buffer kept between answers: the answers and notifications of most calls
/// fit, a large one's buffer is freed after it.
const SCRATCH_KEPT_BYTES: usize = 16 * 1024;

/// The sans-IO server. One per listening socket; see the crate docs for the drive loop.
pub struct Server {
    config: Config,
    conns: BTreeMap<u64, Connection>,
    next_conn: u64,
    next_seq: u64,
    events: VecDeque<Event>,
    dirty: VecDeque<ConnectionId>,
    mentions: VecDeque<Mention>,
    /// The number the next at-mention sent is given ([`Mention::seq`]).
    next_mention: u64,
    /// The last `selection_changed` sent to all (see [`Server::notify`]).
    selection: Option<Notification>,
    stopping: bool,
    scratch: Vec<u8>,
    /// The earliest deadline of all connections ([`Server::poll_timeout`]'s answer), kept up to
    /// date by every method that can move one, so that asking for it after every step costs a
    /// read instead of a walk over the connections (BENCHMARKS.md, "Issue 32, item
    /// 5 (2026-11-28, fourth session)").
    timer: Option<Instant>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("connections", &self.conns.len())
            .field("stopping", &self.stopping)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server with this configuration and no connections. Durations in its limits longer than
    /// [`Limits::LONGEST`](crate::Limits::LONGEST) are taken as that, and a tool set with
    /// `openDiff` offers the tools that close diffs too (see [`Config::tools`]).
    pub fn new(mut config: Config) -> Self {
        config.limits = config.limits.bounded();
        config.tools = config.tools.with_diff_closers();
        Server {
            config,
            conns: BTreeMap::new(),
            next_conn: 1,
            next_seq: 1,
            events: VecDeque::new(),
            dirty: VecDeque::new(),
            mentions: VecDeque::new(),
            next_mention: 0,
            selection: None,
            stopping: false,
            scratch: Vec::new(),
            timer: None,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The connections and the endpoint state they may touch, borrowed apart.
    fn parts(&mut self) -> (&mut BTreeMap<u64, Connection>, EndpointCx<'_>) {
        (
            &mut self.conns,
            EndpointCx {
                config: &self.config,
                events: &mut self.events,
                dirty: &mut self.dirty,
                next_seq: &mut self.next_seq,
                mentions: &mut self.mentions,
                selection: &self.selection,
            },
        )
    }

    /// Run `f` on one connection, if it exists.
    fn with<R>(
        &mut self,
        conn: ConnectionId,
        f: impl FnOnce(&mut Connection, &mut EndpointCx<'_>) -> R,
    ) -> Option<R> {
        let (conns, mut cx) = self.parts();
        conns.get_mut(&conn.0).map(|c| f(c, &mut cx))
    }

    /// [`Server::with`] for what moves no deadline unless it changes the connection's state (an
    /// answer, written bytes: their only effect on timers is ending the connection, or its close
    /// handshake): the timer is computed again only then. The same lookup as `with`, with the
    /// state compared around `f`.
    fn with_same_timers<R>(
        &mut self,
        conn: ConnectionId,
        f: impl FnOnce(&mut Connection, &mut EndpointCx<'_>) -> R,
    ) -> Option<R> {
        let mut moved = false;
        let r = self.with(conn, |c, cx| {
            let before = c.timer_state();
            let r = f(c, cx);
            moved = c.timer_state() != before;
            r
        })?;
        if moved {
            self.refresh_timer();
        }
        Some(r)
    }

    /// The earliest deadline of all connections, computed.
    fn earliest_deadline(&self) -> Option<Instant> {
        let limits = &self.config.limits;
        self.conns.values().filter_map(|c| c.deadline(limits)).min()
    }

    /// [`Server::timer`] computed again, after a step that may have moved a deadline.
    fn refresh_timer(&mut self) {
        self.timer = self.earliest_deadline();
    }

    /// A new socket was accepted. If too many sockets are still in their handshake, the oldest
    /// of them is dropped to make room (an idle local process must not lock out the client).
    pub fn accept(&mut self, now: Instant) -> ConnectionId {
        let handshaking: Vec<(Instant, u64)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_upgrading())
            .map(|(k, c)| (c.created(), *k))
            .collect();
        if handshaking.len() >= self.config.limits.max_pending_handshakes.max(1) {
            if let Some(&(_, k)) = handshaking.iter().min() {
                self.with(ConnectionId(k), |c, cx| {
                    c.drop_now(DisconnectReason::Evicted, cx)
                });
            }
        }
        let id = ConnectionId(self.next_conn);
        self.next_conn += 1;
        self.conns
            .insert(id.0, Connection::new(id, &self.config.limits, now));
        self.refresh_timer();
        id
    }

    /// Bytes arrived on a connection. Unknown or finished connections ignore input. Returns
    /// [`Server::wants_input`] for the connection after it (from the same look-up): whether to
    /// read more of it now.
    pub fn handle_input(&mut self, conn: ConnectionId, data: &[u8], now: Instant) -> bool {
        // Room for one more live connection, should this input complete an upgrade.
        let upgrading = self
            .conns
            .get(&conn.0)
            .is_some_and(Connection::is_upgrading);
        let refuse = match upgrading {
            false => None,
            true if self.stopping => Some(Rejection::ShuttingDown),
            true if self.live_connections() >= self.config.limits.max_connections => {
                Some(Rejection::ServiceUnavailable)
            }
            true => None,
        };
        let above = self.config.limits.pause_input_above;
        let wants = self.with(conn, |c, cx| {
            c.input(data, now, refuse, cx);
            c.wants_input(above)
        });
        self.refresh_timer();
        wants.unwrap_or(true)
    }

    fn live_connections(&self) -> usize {
        self.conns.values().filter(|c| c.is_live()).count()
    }

    /// The next event for the host, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next connection that has new bytes to send or must be closed; each is reported once
    /// until [`Server::transmit`] is emptied for it, and again after an
    /// [`advance_transmit`](Server::advance_transmit) that left some of its bytes.
    pub fn poll_transmit_ready(&mut self) -> Option<ConnectionId> {
        while let Some(conn) = self.dirty.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn.0) {
                c.take_dirty();
                return Some(conn);
            }
        }
        None
    }

    /// The bytes to write to this connection's socket now (empty when there are none).
    pub fn transmit(&self, conn: ConnectionId) -> &[u8] {
        self.conns.get(&conn.0).map_or(&[], Connection::transmit)
    }

    /// Whether the host should read more of `conn`'s input now: `false` while the output queued
    /// for it is above [`Limits::pause_input_above`](crate::Limits::pause_input_above) (its peer
    /// sends requests faster than it reads the answers). A runtime that stops reading then, until
    /// [`Server::advance_transmit`] has taken the queue back under it, holds such a peer to that
    /// much output instead of [`Limits::max_outbound`](crate::Limits::max_outbound): what it
    /// sends meanwhile waits in its socket. `true` for an unknown connection (its input is
    /// ignored), and while the peer is inside a data frame with more than 64 KiB still to come
    /// (reads of at most 64 KiB there give no output, and a client writing a large message
    /// before it reads would otherwise block in its write).
    ///
    /// [`Server::handle_input`] returns it too.
    ///
    /// ```
    /// use claude_ide_bridge::{ConnectionId, Server};
    /// use std::time::Instant;
    ///
    /// /// Reads `conn`'s socket only while the engine wants its input.
    /// fn read_some(server: &mut Server, conn: ConnectionId, read: impl Fn() -> Vec<u8>) -> bool {
    ///     if !server.wants_input(conn) {
    ///         return false; // written out first: read again after `advance_transmit`
    ///     }
    ///     server.handle_input(conn, &read(), Instant::now())
    /// }
    /// ```
    pub fn wants_input(&self, conn: ConnectionId) -> bool {
        let above = self.config.limits.pause_input_above;
        (self.conns.get(&conn.0)).is_none_or(|c| c.wants_input(above))
    }

    /// `n` bytes of [`Server::transmit`] were written.
    pub fn advance_transmit(&mut self, conn: ConnectionId, n: usize) {
        self.with_same_timers(conn, |c, cx| c.advance_transmit(n, cx));
    }

    /// True when the socket should be closed now: the engine is done with this connection and
    /// everything it had to send was written (or the connection is aborted). Then call
    /// [`Server::handle_close`].
    pub fn should_close(&self, conn: ConnectionId) -> bool {
        self.conns.get(&conn.0).is_none_or(Connection::should_close)
    }

    /// The socket is closed (EOF, error, or after [`Server::should_close`]). Pending calls are
    /// cancelled and [`Event::Disconnected`] is queued, unless the peer closed the socket during
    /// its upgrade (nothing was connected: no event, as none came for its `accept`). Unknown ids
    /// are ignored.
    pub fn handle_close(&mut self, conn: ConnectionId) {
        if let Some(mut c) = self.conns.remove(&conn.0) {
            // At-mentions it held unwritten that were sent to all, and no other client was
            // written, wait for the next client again, in the order they were sent among those
            // other clients gave back (once: two clients that held the same one both give it
            // back).
            let held: Vec<_> = (c.take_held())
                .filter(|m| self.mentions.iter().all(|q| q.seq != m.seq))
                .collect();
            if !held.is_empty() {
                self.mentions.extend(held);
                (self.mentions.make_contiguous()).sort_by_key(|m| m.seq);
                let most = self.config.limits.max_queued_mentions;
                while self.mentions.len() > most {
                    self.mentions.pop_front();
                }
            }
            c.closed(&mut self.events);
            self.refresh_timer();
        }
    }

    /// Close a connection from the host side (WebSocket close 1000, or dropped in handshake).
    pub fn close(&mut self, conn: ConnectionId, now: Instant) -> Result<(), ApiError> {
        let r = self
            .with(conn, |c, cx| c.close(now, cx))
            .ok_or(ApiError::UnknownConnection);
        self.refresh_timer();
        r
    }

    /// The earliest instant at which [`Server::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        debug_assert_eq!(self.timer, self.earliest_deadline());
        self.timer
    }

    /// Timers: handshake deadline, pings, the dead-peer deadline, the close deadline. A wake-up
    /// later than a deadline by more than one ping interval means the host slept (laptop lid):
    /// deadlines restart from `now` instead of dropping healthy connections.
    pub fn handle_timeout(&mut self, now: Instant) {
        let (conns, mut cx) = self.parts();
        for c in conns.values_mut() {
            c.timeout(now, &mut cx);
        }
        self.refresh_timer();
    }

    /// Answer a tool call. `openDiff` answers are normally [`ToolResult::file_saved`],
    /// [`ToolResult::tab_closed`] or [`ToolResult::diff_rejected`].
    ///
    /// `Ok` once the answer is taken. An answer that would pass the connection's `max_outbound`
    /// with what already waits (or its share of
    /// [`Limits::max_outbound_total`](crate::Limits::max_outbound_total) while all
    /// connections' output is past that) is replaced by the error
    /// [`RpcError::ANSWER_TOO_LARGE`] saying so, and the host told
    /// [`ApiError::AnswerTooLarge`] (the call is answered all the same: an `openDiff` accepted
    /// so was not accepted); one that cannot be queued even then (the client stopped reading)
    /// drops the connection instead, reported by an [`Event::Disconnected`] with
    /// [`DisconnectReason::OutboundFull`]. The other errors: see [`ApiError`].
    ///
    /// ```
    /// use claude_ide_bridge::{Event, Server, ToolCall, ToolResult};
    ///
    /// /// After an input: every call the engine announced, answered at once.
    /// fn answer_calls(server: &mut Server) {
    ///     while let Some(event) = server.poll_event() {
    ///         let Event::ToolCall { call, tool } = event else { continue };
    ///         let result = match tool {
    ///             // An error, not `diff_rejected` (the user's no, which ends claude's turn):
    ///             // claude then asks in its own prompt.
    ///             ToolCall::OpenDiff(_) => ToolResult::error("this editor shows no diffs"),
    ///             _ => ToolResult::error("not in this editor"),
    ///         };
    ///         // Refused only for a call that is gone (cancelled, its connection closed).
    ///         let _ = server.respond(call, result);
    ///     }
    /// }
    /// ```
    pub fn respond(&mut self, call: CallId, result: ToolResult) -> Result<(), ApiError> {
        // The result is written into the reused scratch buffer, and from there into the output queue.
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        result.write_json(&mut body);
        let r = self.finish_call(call, Ok(&body), false);
        self.keep_scratch(body);
        r
    }

    /// Keeps `buf` as the scratch buffer for the next answer or notification, unless a large one
    /// made it large: a server that once sent a large answer does not hold its size for its life.
    fn keep_scratch(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= SCRATCH_KEPT_BYTES {
            self.scratch = buf;
        }
    }

    /// The host does not read `conn` now (its events wait for a host that is behind): what the
    /// peer sent meanwhile, the answers to the keepalive's Pings among them, waits unread, and
    /// its silence until `now` does not count against it (docs/protocol.md, "Keepalive and
    /// timers"). A runtime calls it while it holds a reader back; a peer kept waiting so was
    /// dropped as `ping_timeout` after 60 s.
    ///
    /// ```
    /// use std::time::Instant;
    /// use claude_ide_bridge::{ConnectionId, Server};
    ///
    /// /// A reader held back while the host catches up, looking again every few milliseconds.
    /// fn hold_reader(server: &mut Server, conn: ConnectionId, host_behind: impl Fn() -> bool) {
    ///     while host_behind() {
    ///         server.reading_held(conn, Instant::now());
    ///         std::thread::sleep(std::time::Duration::from_millis(10));
    ///     }
    /// }
    /// ```
    pub fn reading_held(&mut self, conn: ConnectionId, now: Instant) {
        if self.with(conn, |c, _| c.reading_held(now)).is_some() {
            self.refresh_timer();
        }
    }

    /// Whether `call` still waits for its answer: `false` once it was answered, cancelled or
    /// withdrawn, or its connection closes. A host asks before slow work for a call (reading a
    /// large file), which a client gone meanwhile no longer wants; an answer is refused then
    /// anyway ([`ApiError::NotPending`]).
    ///
    /// ```
    /// use claude_ide_bridge::{CallId, Server, ToolResult};
    ///
    /// /// Slow work for a call, skipped when nobody waits for it any more.
    /// fn answer_read(server: &mut Server, call: CallId, read: impl FnOnce() -> String) {
    ///     if !server.is_pending(call) {
    ///         return; // cancelled, or its client closed
    ///     }
    ///     let _ = server.respond(call, ToolResult::text(read()));
    /// }
    /// ```
    pub fn is_pending(&self, call: CallId) -> bool {
        (self.conns.get(&call.conn.0)).is_some_and(|c| c.is_pending(call.seq))
    }

    /// Answer a compatibility request with a JSON result or a JSON-RPC error; as
    /// [`Server::respond`] otherwise.
    pub fn respond_compat(
        &mut self,
        call: CallId,
        result: Result<serde_json::Value, RpcError>,
    ) -> Result<(), ApiError> {
        self.respond_encoded(call, EncodedAnswer::compat(result))
    }

    /// Answers `call` with an answer encoded ahead ([`EncodedAnswer`]); as [`Server::respond`]
    /// or [`Server::respond_compat`] otherwise (a tool call's answer to a compatibility request
    /// is refused, [`ApiError::WrongKind`], and the other way round).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use claude_ide_bridge::{CallId, EncodedAnswer, Server, ToolResult};
    ///
    /// /// An answer from another thread: megabytes written out as JSON before the lock is taken,
    /// /// so that the server's other connections do not wait for it.
    /// fn answer_from_a_job(server: &Mutex<Server>, call: CallId, contents: String) {
    ///     let answer = EncodedAnswer::tool(&ToolResult::text(contents));
    ///     let _ = server.lock().unwrap().respond_encoded(call, answer);
    /// }
    /// ```
    pub fn respond_encoded(&mut self, call: CallId, answer: EncodedAnswer) -> Result<(), ApiError> {
        let body = answer.body.as_deref();
        self.finish_call(call, body, answer.compat)
    }

    fn finish_call(
        &mut self,
        call: CallId,
        body: Result<&[u8], &RpcError>,
        compat: bool,
    ) -> Result<(), ApiError> {
        // The output queued for every connection is added up only for an answer that could pass
        // its connection's share of `max_outbound_total` (then the answer is given again, once:
        // with the total known, `answer` always answers).
        let mut pressure = None;
        loop {
            let answered = self.with_same_timers(call.conn, |c, cx| {
                c.answer(call.seq, compat, body, pressure, cx)
            });
            match answered {
                Some(Ok(Answered::Taken)) => return Ok(()),
                Some(Ok(Answered::Replaced)) => return Err(ApiError::AnswerTooLarge),
                Some(Ok(Answered::Count)) => pressure = Some(self.pressure()),
                Some(Err(e)) => return Err(e),
                None => return Err(ApiError::NotPending),
            }
        }
    }

    /// The output queued for every connection now, against `max_outbound_total`.
    #[cold]
    #[inline(never)]
    fn pressure(&self) -> Pressure {
        let (mut total, mut holders) = (0usize, 0);
        for c in self.conns.values() {
            let own = c.outbound();
            total = total.saturating_add(own);
            holders += usize::from(own > 0);
        }
        Pressure {
            total,
            holders,
            max_total: self.config.limits.max_outbound_total,
        }
    }

    /// Send a notification to every initialized connection or to one. Returns how many
    /// connections it was queued for: not one whose unwritten output would pass half of
    /// `max_outbound` with it (a peer that does not read misses news, not its connection). An
    /// `at_mentioned` sent to [`Target::All`] that no connection takes (none is initialized, or
    /// none has room) is kept (bounded, expiring) for the next one that initializes, and written
    /// to it once it is ready for it, by [`Server::handle_timeout`]: 300 ms after it sent
    /// `ide_connected` and was answered `tools/list`, `prompts/list` and `resources/list`
    /// (`claude` drops one that comes before), or 3 s after it initialized if that does not come
    /// first; named as the client names files then (the host has had the
    /// [`Event::IdeConnected`] and may have called
    /// [`set_client_paths`](Server::set_client_paths)). Every client waits so: an at-mention sent
    /// to one in that time is held (counted as queued for it) and written after those; if its
    /// socket closes first, those sent to all that no other connection was written wait for the
    /// next client again (not those sent to it alone). The last
    /// `selection_changed` sent to [`Target::All`] is kept (until
    /// [`Server::forget_selection`]), and a client is sent it when it is ready in the same way (before those at-mentions): the editor's selection as it stands shows
    /// at once in a `claude` started after it was made. A client sent a selection of its own
    /// since it initialized is sent that one instead, unless one to all came after it: the newest
    /// it was sent.
    /// A `notifications/tools/list_changed` that a connection past `initialize` cannot take now (it
    /// has not sent `notifications/initialized`, or has no room) is sent to it once it can: when it
    /// initializes, or when enough of its output is written; it is not counted here.
    ///
    /// ```
    /// use claude_ide_bridge::{Notification, SelectionChanged, Selection, Position, Server, Target};
    /// use std::time::Instant;
    ///
    /// /// The editor's selection moved: every connected `claude` is told.
    /// fn selection_moved(server: &mut Server, path: &str, line: u32, text: &str) -> usize {
    ///     let at = Position { line, character: 0 };
    ///     let moved = Notification::SelectionChanged(SelectionChanged {
    ///         text: text.to_string(),
    ///         file_path: path.to_string(),
    ///         file_url: claude_ide_bridge::file_uri(path),
    ///         selection: Selection { start: at, end: at, is_empty: text.is_empty() },
    ///     });
    ///     server.notify(Target::All, &moved, Instant::now())
    /// }
    /// ```
    pub fn notify(&mut self, target: Target, notification: &Notification, now: Instant) -> usize {
        let mention = matches!(notification, Notification::AtMentioned(_)).then(|| {
            self.next_mention += 1;
            Mention {
                seq: self.next_mention,
                at: now,
                notification: notification.clone(),
            }
        });
        self.scratch.clear();
        notification.write_json(&mut self.scratch);
        let frame = std::mem::take(&mut self.scratch);
        let mut reached = 0;
        let pressure = self.pressure();
        {
            let tools = matches!(notification, Notification::ToolsListChanged);
            let to_all = target == Target::All;
            let (conns, mut cx) = self.parts();
            let most_mentions = cx.config.limits.max_queued_mentions;
            // The frame for clients that name files otherwise ([`Server::set_client_paths`]),
            // written when the first such client is sent it.
            let mut theirs: Option<(ClientPaths, Vec<u8>)> = None;
            // The clients that hold it (not ready for it yet), and whether another was written it.
            let (mut holders, mut written) = (Vec::new(), false);
            let mut send = |c: &mut Connection| {
                if (mention.as_ref()).is_some_and(|m| c.hold_mention(m, to_all, most_mentions)) {
                    holders.push(c.id);
                    return 1;
                }
                let paths = c.paths();
                let frame = match paths {
                    ClientPaths::AsGiven => &frame,
                    _ => match notification.for_client(paths) {
                        None => &frame,
                        Some(n) => {
                            if theirs.as_ref().is_none_or(|(p, _)| *p != paths) {
                                let mut f = Vec::new();
                                n.write_json(&mut f);
                                theirs = Some((paths, f));
                            }
                            theirs.as_ref().map_or(&frame, |(_, f)| f)
                        }
                    },
                };
                let sent = if tools {
                    c.notify_tools_changed(frame, &mut cx)
                } else {
                    c.notify(frame, Some(pressure), &mut cx)
                };
                written |= sent;
                usize::from(sent)
            };
            match target {
                Target::All => {
                    for c in conns.values_mut() {
                        reached += send(c);
                    }
                }
                Target::Connection(id) => {
                    if let Some(c) = conns.get_mut(&id.0) {
                        reached += send(c);
                    }
                }
            }
            if written {
                for id in holders {
                    if let Some(c) = conns.get_mut(&id.0) {
                        c.held_mention_seen();
                    }
                }
            }
        }
        self.keep_scratch(frame);
        self.refresh_timer();
        if matches!(notification, Notification::SelectionChanged(_)) {
            // The newest selection each client was sent is the one its welcome gives.
            match target {
                Target::All => {
                    self.selection = Some(notification.clone());
                    for c in self.conns.values_mut() {
                        c.selection_sent(None);
                    }
                }
                Target::Connection(id) => {
                    if let Some(c) = self.conns.get_mut(&id.0) {
                        c.selection_sent(Some(notification));
                    }
                }
            }
        }
        if let Some(m) = mention.filter(|_| reached == 0 && target == Target::All) {
            self.expire_mentions(now);
            if self.config.limits.max_queued_mentions > 0 {
                while self.mentions.len() >= self.config.limits.max_queued_mentions {
                    self.mentions.pop_front();
                }
                self.mentions.push_back(m);
            }
        }
        reached
    }

    /// Forgets the editor's selection: no client ready after this is sent the last
    /// `selection_changed` sent to all, nor one sent to it alone before (see [`Server::notify`]),
    /// which are otherwise kept for as long as the server runs. For an editor whose user turned
    /// sharing the selection off, closed the file, or selected something secret: its text went
    /// to every `claude` started later. What clients already got stays theirs.
    ///
    /// ```
    /// use claude_ide_bridge::Server;
    ///
    /// /// The user turned "share my selection with claude" off.
    /// fn stop_sharing(server: &mut Server) {
    ///     server.forget_selection();
    /// }
    /// ```
    pub fn forget_selection(&mut self) {
        self.selection = None;
        for c in self.conns.values_mut() {
            c.selection_sent(None);
        }
    }

    fn expire_mentions(&mut self, now: Instant) {
        let ttl = self.config.limits.mention_ttl;
        while let Some(m) = self.mentions.front() {
            if now.saturating_duration_since(m.at) > ttl {
                self.mentions.pop_front();
            } else {
                break;
            }
        }
    }

    /// Change the offered tools; initialized clients are sent `notifications/tools/list_changed`,
    /// and clients past `initialize` that cannot take it now are sent it when they can (see
    /// [`Server::notify`]).
    /// A set with `openDiff` also offers `close_tab` and `closeAllDiffTabs` (see [`Config::tools`]).
    pub fn set_tools(&mut self, tools: ToolSet, now: Instant) {
        let tools = tools.with_diff_closers();
        if tools == self.config.tools {
            return;
        }
        self.config.tools = tools;
        self.notify(Target::All, &Notification::ToolsListChanged, now);
    }

    /// Name files `paths`' way in what `conn` is sent from now on: the paths and URIs of
    /// `selection_changed`, `at_mentioned` and `diagnostics_changed` (and of the `at_mentioned`s
    /// queued for it, written once it is ready: see [`Server::notify`]). Returns whether
    /// `conn` is a live connection. A host on Windows sets [`ClientPaths::WslMounts`] for a
    /// `claude` running in WSL, which reads no `C:\...` path (the runtimes do: `ide_connected`'s
    /// pid names no Windows process).
    ///
    /// ```
    /// use claude_ide_bridge::{ClientPaths, ConnectionId, Server};
    ///
    /// /// The client on `conn` told us its pid: one that is no process here runs in WSL.
    /// fn ide_connected(server: &mut Server, conn: ConnectionId, pid_is_here: bool) {
    ///     if !pid_is_here {
    ///         server.set_client_paths(conn, ClientPaths::WslMounts);
    ///     }
    /// }
    /// ```
    pub fn set_client_paths(&mut self, conn: ConnectionId, paths: ClientPaths) -> bool {
        match self.conns.get_mut(&conn.0) {
            Some(c) if c.is_live() => {
                c.set_paths(paths);
                true
            }
            _ => false,
        }
    }

    /// How `conn` names files ([`Server::set_client_paths`]); `None` for no live connection.
    pub fn client_paths(&self, conn: ConnectionId) -> Option<ClientPaths> {
        self.conns
            .get(&conn.0)
            .filter(|c| c.is_live())
            .map(|c| c.paths())
    }

    /// Change the workspace folders the compatibility methods' paths are checked against
    /// ([`Config::workspace_folders`]). The tools' paths (an `openDiff`'s) are handed to the host
    /// as the client sent them: the host checks them ([`crate::resolve_in_workspace`]).
    pub fn set_workspace_folders(&mut self, folders: Vec<String>) {
        self.config.workspace_folders = folders;
    }

    /// Live connections: upgraded, not yet closed.
    pub fn connections(&self) -> Vec<ConnectionId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.is_live())
            .map(|(k, _)| ConnectionId(*k))
            .collect()
    }

    /// Whether a connection finished the MCP handshake.
    pub fn is_initialized(&self, conn: ConnectionId) -> bool {
        self.conns
            .get(&conn.0)
            .is_some_and(Connection::is_initialized)
    }

    /// Stop: pending diffs are answered as [`Config::diff_error_at_stop`] says (a tool error by
    /// default, `DIFF_REJECTED` when `None`), other pending calls an error; every
    /// WebSocket is sent Close 1001 and new upgrades are refused with 503. The runtime keeps
    /// driving the server until [`Server::is_idle`].
    pub fn shutdown(&mut self, now: Instant) {
        self.stopping = true;
        let (conns, mut cx) = self.parts();
        for c in conns.values_mut() {
            c.shutdown(now, &mut cx);
        }
        self.refresh_timer();
    }

    /// True when no connection is left (after [`Server::shutdown`], the runtime can exit).
    pub fn is_idle(&self) -> bool {
        self.conns.is_empty()
    }

    /// Bytes held by the server's own buffers, outside its connections (for tests of memory
    /// bounds).
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub(crate) fn own_memory(&self) -> usize {
        self.scratch.capacity()
    }

    /// Bytes held by one connection's buffers (for tests of memory bounds).
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub(crate) fn connection_memory(&self, conn: ConnectionId) -> usize {
        self.conns.get(&conn.0).map_or(0, Connection::memory)
    }

    /// Every connection the server holds, with the bytes its buffers hold (for tests of memory
    /// bounds).
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))] // only `hooks` uses it
    pub(crate) fn connections_memory(&self) -> impl Iterator<Item = (ConnectionId, usize)> + '_ {
        self.conns
            .iter()
            .map(|(&k, c)| (ConnectionId(k), c.memory()))
    }
}

#[cfg(test)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<Server>();
}

/// An answer to a call, written out as JSON ahead of [`Server::respond_encoded`]: a host sharing
/// its server between threads (both runtimes do) encodes it before it takes the lock, so that a
/// large answer (a file of megabytes, its escapes) does not hold up the other connections while
/// it is written out. [`Server::respond`] and [`Server::respond_compat`] encode under the caller's
/// borrow instead.
///
/// ```
/// use claude_ide_bridge::{EncodedAnswer, RpcError, ToolResult};
/// let read = EncodedAnswer::compat(Ok(serde_json::json!({"content": "fn main() {}"})));
/// let refused = EncodedAnswer::compat(Err(RpcError::invalid_params("no such file")));
/// let tool = EncodedAnswer::tool(&ToolResult::text("[]"));
/// # let _ = (read, refused, tool);
/// ```
#[derive(Debug, Clone)]
pub struct EncodedAnswer {
    body: Result<Vec<u8>, RpcError>,
    compat: bool,
}

impl EncodedAnswer {
    /// A tool call's answer.
    pub fn tool(result: &ToolResult) -> EncodedAnswer {
        let mut body = Vec::new();
        result.write_json(&mut body);
        EncodedAnswer {
            body: Ok(body),
            compat: false,
        }
    }

    /// A compatibility request's answer: its JSON result, or a JSON-RPC error.
    pub fn compat(result: Result<serde_json::Value, RpcError>) -> EncodedAnswer {
        EncodedAnswer {
            body: result.map(|v| serde_json::to_vec(&v).unwrap_or_else(|_| b"null".to_vec())),
            compat: true,
        }
    }
}
