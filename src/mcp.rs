//! The MCP session of one connection (docs/protocol.md, "MCP lifecycle", "Batches", "Tool calls"
//! and "Pending calls"): `initialize` and `notifications/initialized`, the methods answered at
//! once, batches, calls handed to the host and pending until it answers, and cancellation. It sits on the byte path after the JSON-RPC
//! decoder and before the tools: a connection hands it each text message and the WebSocket
//! sender its replies go to.

use crate::jsonrpc::{self, Decoded, Frame, Message, RpcError};
use crate::paths;
use crate::tools::{
    from_object, parse_call_params, scan_call_params, CallRefused, Called, CompatRequest, ToolCall,
    ToolResult,
};
use crate::types::{
    ApiError, Asker, CallId, CancelReason, Config, ConnectionId, EndpointCx, Event,
};
use crate::ws::{SendError, Sender};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::VecDeque;

/// MCP protocol versions this server speaks, oldest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Where a session is in the MCP handshake; one part of the connection's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum McpPhase {
    /// Nothing but `initialize` (and `ping`) is served yet.
    AwaitingInitialize,
    /// `initialize` was answered; `notifications/initialized` has not arrived.
    AwaitingInitialized,
    /// Initialized (docs/protocol.md, "MCP lifecycle"): the client may be sent notifications
    /// once it is also ready for them ([`Mcp::ready_for_news`]: "Notifications").
    Initialized,
}

impl McpPhase {
    fn initialize_seen(self) -> bool {
        self != McpPhase::AwaitingInitialize
    }
}

struct Pending {
    seq: u64,
    /// The JSON-RPC id, raw.
    id: RawId,
    /// `Some` for `openDiff`: its tab name.
    tab: Option<String>,
    /// Tool call (MCP content result) or compatibility method (plain result).
    compat: bool,
    /// Who asked for it ([`CallId::asker`]).
    asker: Asker,
    batch: Option<u64>,
}

impl Pending {
    /// Its handle, as the host was given it.
    fn call(&self, conn: ConnectionId) -> CallId {
        CallId {
            conn,
            seq: self.seq,
            asker: self.asker,
        }
    }
}

/// A request's id as it was written, kept inline when short (ids are nearly always small integers),
/// so that a pending call costs no allocation.
enum RawId {
    Inline { len: u8, bytes: [u8; RawId::INLINE] },
    Boxed(Box<str>),
}

impl RawId {
    const INLINE: usize = 23;

    fn new(id: &str) -> RawId {
        match u8::try_from(id.len()) {
            Ok(len) if id.len() <= RawId::INLINE => {
                let mut bytes = [0; RawId::INLINE];
                bytes[..id.len()].copy_from_slice(id.as_bytes());
                RawId::Inline { len, bytes }
            }
            _ => RawId::Boxed(id.into()),
        }
    }

    /// The id's JSON text as bytes: what an answer writes, with no UTF-8 check per answer.
    fn as_bytes(&self) -> &[u8] {
        match self {
            RawId::Inline { len, bytes } => &bytes[..usize::from(*len)],
            RawId::Boxed(id) => id.as_bytes(),
        }
    }

    /// The bytes it keeps on the heap (none when inline).
    fn heap_len(&self) -> usize {
        match self {
            RawId::Inline { .. } => 0,
            RawId::Boxed(id) => id.len(),
        }
    }
}

impl std::ops::Deref for RawId {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            // Copied whole from a `str`, so always UTF-8.
            RawId::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            RawId::Boxed(id) => id,
        }
    }
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

/// The MCP state of one connection (apart from its WebSocket, so a message borrowed from the
/// receiver can be handled while replies are queued on the sender).
pub(crate) struct Mcp {
    protocol_version: &'static str,
    client_name: Option<String>,
    client_version: Option<String>,
    pending: Vec<Pending>,
    batches: Vec<Batch>,
    next_batch: u64,
    /// Outgoing messages not yet reported as events (`Some` only when tracing).
    trace: Option<Vec<String>>,
    /// What is kept for pending calls may have grown (a long id, a tab name, a batch's answers):
    /// the connection checks [`Mcp::held`] against its outbound limit.
    grew: bool,
    /// The client sent `ide_connected`.
    said_connected: bool,
    /// The lists the client was answered ([`LISTS`]' bits).
    listed: u8,
}

/// `tools/list`, `prompts/list` and `resources/list`, as bits of [`Mcp::listed`]: `claude` asks
/// for the three after `ide_connected`, and shows what the IDE sends only once it has them.
const LISTS: [&str; 3] = ["tools/list", "prompts/list", "resources/list"];

#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Cow<'a, str>,
    /// Read leniently ([`ClientInfo::read`]): only `protocolVersion` can make `initialize` fail.
    #[serde(rename = "clientInfo", default, borrow)]
    client_info: Option<&'a RawValue>,
}

/// `clientInfo`'s members, recorded when they are strings and ignored otherwise.
#[derive(Deserialize)]
struct ClientInfo<'a> {
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    version: Option<&'a RawValue>,
}

impl ClientInfo<'_> {
    /// The name and version that are strings, from a `clientInfo` of any shape.
    fn read(raw: &RawValue) -> (Option<String>, Option<String>) {
        let string = |r: Option<&RawValue>| r.and_then(|r| serde_json::from_str(r.get()).ok());
        match serde_json::from_str::<ClientInfo<'_>>(raw.get()) {
            Ok(info) => (string(info.name), string(info.version)),
            Err(_) => (None, None),
        }
    }
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

impl Mcp {
    /// The session of a connection that has just been upgraded.
    pub(crate) fn new(config: &Config) -> Self {
        Mcp {
            protocol_version: SUPPORTED_PROTOCOL_VERSIONS[SUPPORTED_PROTOCOL_VERSIONS.len() - 1],
            client_name: None,
            client_version: None,
            pending: Vec::new(),
            batches: Vec::new(),
            next_batch: 1,
            trace: config.trace_messages.then(Vec::new),
            grew: false,
            said_connected: false,
            listed: 0,
        }
    }

    /// Whether the client is ready for the IDE's news: it sent `ide_connected` and was answered
    /// the tools, prompts and resources. `claude` takes an `at_mentioned` (and shows a
    /// `selection_changed`) only from then on: its handlers are set once the IDE counts as
    /// connected, after those lists, and one sent before is dropped (docs/e2e.md, scenario 2).
    pub(crate) fn ready_for_news(&self) -> bool {
        self.said_connected && self.listed == (1 << LISTS.len()) - 1
    }

    /// Whether what is kept for pending calls may have grown since [`Mcp::held`] was last asked.
    #[inline]
    pub(crate) fn grew(&self) -> bool {
        self.grew
    }

    /// The bytes kept for pending calls: ids too long to keep inline, tab names, the answers of
    /// batches waiting for the host. They count towards
    /// [`Limits::max_outbound`](crate::Limits::max_outbound) with the queued output: the client's
    /// answers, held here instead of there. Asked only when [`Mcp::grew`] (out of the way of
    /// every call's code).
    #[cold]
    #[inline(never)]
    pub(crate) fn held(&mut self) -> usize {
        self.grew = false;
        self.held_now()
    }

    /// Whether the call `seq` waits for its answer.
    pub(crate) fn is_pending(&self, seq: u64) -> bool {
        self.pending.iter().any(|p| p.seq == seq)
    }

    /// Whether a batch waits for answers.
    #[inline]
    pub(crate) fn batching(&self) -> bool {
        !self.batches.is_empty()
    }

    /// [`Mcp::held`], asked without taking the growth as seen.
    pub(crate) fn held_now(&self) -> usize {
        let ids = self
            .pending
            .iter()
            .map(|p| p.id.heap_len() + p.tab.as_ref().map_or(0, String::capacity));
        // The answers' bytes (a batch's body may have room for as many again, as a `Vec` grows:
        // counted, answers that fit the limit dropped the connection).
        let batches = self.batches.iter().map(|b| b.body.len());
        ids.sum::<usize>() + batches.sum::<usize>()
    }

    /// Outgoing messages not yet reported (only when tracing), oldest first.
    pub(crate) fn take_trace(&mut self) -> impl Iterator<Item = String> + '_ {
        self.trace.iter_mut().flat_map(|t| t.drain(..))
    }

    /// Queue one message (a notification) on the sender.
    pub(crate) fn send(&mut self, tx: &mut Sender, json: &[u8]) -> Result<(), SendError> {
        emit(self, tx, json)
    }

    /// Answer the pending call `seq` of this kind (tool call or compatibility method) with a
    /// result body or an error: `NotPending` when no such call is pending, `WrongKind` when it is
    /// of the other kind (it stays pending); otherwise whether the answer could be queued.
    pub(crate) fn answer_call(
        &mut self,
        tx: &mut Sender,
        seq: u64,
        compat: bool,
        body: Result<&[u8], &RpcError>,
    ) -> Result<Result<(), SendError>, ApiError> {
        let i = self
            .pending
            .iter()
            .position(|p| p.seq == seq)
            .ok_or(ApiError::NotPending)?;
        if self.pending[i].compat != compat {
            return Err(ApiError::WrongKind);
        }
        let p = self.pending.remove(i);
        Ok(answer(self, tx, &p, body))
    }

    /// The server is stopping: every pending diff is answered the tool error `diff_error` when
    /// there is one ([`Config::diff_error_at_stop`]), else `DIFF_REJECTED`, and every other call an
    /// error, and each is reported cancelled. Returns the last failure to queue.
    ///
    /// [`Config::diff_error_at_stop`]: crate::Config::diff_error_at_stop
    pub(crate) fn stop(
        &mut self,
        conn: ConnectionId,
        tx: &mut Sender,
        events: &mut VecDeque<Event>,
        diff_error: Option<&str>,
    ) -> Option<SendError> {
        let mut failed = None;
        for p in std::mem::take(&mut self.pending) {
            let body = match (&p.tab, diff_error) {
                (Some(_), Some(text)) => Ok(result_body(&ToolResult::error(text))),
                (Some(tab), None) => Ok(result_body(&ToolResult::diff_rejected(tab.clone()))),
                (None, _) => Err(RpcError::internal("the IDE is shutting down")),
            };
            if let Err(e) = answer(self, tx, &p, body.as_deref()) {
                failed = Some(e);
            }
            events.push_back(Event::CallCancelled {
                call: p.call(conn),
                reason: CancelReason::ServerStopped,
            });
        }
        failed
    }

    /// The connection is gone: every pending call is reported cancelled.
    pub(crate) fn disconnected(self, conn: ConnectionId, events: &mut VecDeque<Event>) {
        for p in self.pending {
            events.push_back(Event::CallCancelled {
                call: p.call(conn),
                reason: CancelReason::Disconnected,
            });
        }
    }
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
        Ok(b) => jsonrpc::write_result_raw(out, p.id.as_bytes(), |o| o.extend_from_slice(b)),
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
                s.grew = true;
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

/// Handle one text message: the reply to send now (one frame), if any; deferred calls become
/// pending entries and events.
pub(crate) fn handle_text(
    cx: &mut EndpointCx<'_>,
    conn: ConnectionId,
    s: &mut Mcp,
    phase: &mut McpPhase,
    tx: &mut Sender,
    text: &str,
) -> Option<Vec<u8>> {
    let config = cx.config;
    if s.trace.is_some() {
        cx.events.push_back(Event::Message {
            conn,
            incoming: true,
            text: text.to_string(),
        });
    }
    let read_params = |s: &mut _| scan_call_params(config.tools, s);
    let max_batch = config.limits.max_batch;
    let frame = match jsonrpc::decode_with(text, "tools/call", max_batch, read_params) {
        Decoded::Expected { id, params: call } => {
            let mut ctx = Ctx::new(cx, conn, tx, phase, None);
            let result = if ctx.phase.initialize_seen() {
                ctx.dispatch_tool(s, id, call)
            } else {
                Err(not_initialized())
            };
            return reply(id, result);
        }
        Decoded::Frame(frame) => frame,
    };
    match frame {
        Frame::Single(msg) => Ctx::new(cx, conn, tx, phase, None).handle(s, msg),
        Frame::Batch(items) => {
            let batching_allowed = phase.initialize_seen() && s.protocol_version <= "2025-03-26";
            if !batching_allowed || items.is_empty() || items.len() > config.limits.max_batch {
                // An array of responses only is not answered, as no response is: answering it
                // could start two peers answering each other.
                let responses = !items.is_empty()
                    && items.len() <= config.limits.max_batch
                    && items
                        .iter()
                        .all(|raw| matches!(jsonrpc::decode_value(raw), Message::Response { .. }));
                if responses {
                    return None;
                }
                let msg = if items.is_empty() {
                    "empty batch".to_string()
                } else if !phase.initialize_seen() {
                    "batches are accepted only after initialize, in protocol version 2025-03-26 \
                     and older"
                        .to_string()
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
                return Some(out);
            }
            let bid = s.next_batch;
            s.next_batch += 1;
            s.grew = true;
            s.batches.push(Batch {
                id: bid,
                remaining: 0,
                open: true,
                body: vec![b'['],
                entries: 0,
            });
            for raw in items {
                let msg = jsonrpc::decode_value(raw);
                let mut ctx = Ctx::new(cx, conn, &mut *tx, &mut *phase, Some(bid));
                if let Some(b) = ctx.handle(s, msg) {
                    if let Some(batch) = s.batches.iter_mut().find(|b| b.id == bid) {
                        push_batch_entry(batch, &b);
                    }
                }
            }
            if let Some(batch) = s.batches.iter_mut().find(|b| b.id == bid) {
                batch.open = false;
            }
            take_if_done(s, bid)
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
    phase: &'c mut McpPhase,
    batch: Option<u64>,
}

/// The response to a request: its result body or error, addressed to `id`; `None` for a call
/// answered later.
fn reply(id: &str, result: Result<Option<Vec<u8>>, RpcError>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match result {
        Ok(None) => return None,
        Ok(Some(body)) => jsonrpc::write_result(&mut out, id, |o| o.extend_from_slice(&body)),
        Err(e) => jsonrpc::write_error(&mut out, Some(id), &e),
    }
    Some(out)
}

impl<'c> Ctx<'c> {
    fn new(
        cx: &'c mut EndpointCx<'_>,
        conn: ConnectionId,
        tx: &'c mut Sender,
        phase: &'c mut McpPhase,
        batch: Option<u64>,
    ) -> Self {
        Ctx {
            config: cx.config,
            next_seq: &mut *cx.next_seq,
            events: &mut *cx.events,
            conn,
            tx,
            phase,
            batch,
        }
    }

    /// The complete response bytes for a request answered now, or `None` when there is nothing
    /// to send now (notifications, responses, deferred calls).
    fn handle(&mut self, s: &mut Mcp, msg: Message<'_>) -> Option<Vec<u8>> {
        match msg {
            Message::Response { .. } => None,
            Message::Invalid { id, error } => {
                let mut out = Vec::new();
                jsonrpc::write_error(&mut out, id.map(|i| i.get()), &error);
                Some(out)
            }
            Message::Notification { method, params } => {
                self.notification(s, &method, params);
                None
            }
            Message::Request { id, method, params } => {
                let result = self.request(s, id, &method, params);
                reply(id.get(), result)
            }
        }
    }

    fn notification(&mut self, s: &mut Mcp, method: &str, params: Option<&RawValue>) {
        match method {
            "notifications/initialized" | "initialized"
                if *self.phase == McpPhase::AwaitingInitialized =>
            {
                *self.phase = McpPhase::Initialized;
                self.events.push_back(Event::Initialized {
                    conn: self.conn,
                    protocol_version: s.protocol_version.to_string(),
                    client_name: s.client_name.take(),
                    client_version: s.client_version.take(),
                });
            }
            "notifications/cancelled" => {
                let Some(p) = params.and_then(|p| from_object::<CancelledParams>(p.get()).ok())
                else {
                    return;
                };
                let rid = p.request_id.get();
                if let Some(i) = jsonrpc::find_id(s.pending.iter().map(|x| &*x.id), rid) {
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
                        call: p.call(self.conn),
                        reason: CancelReason::Cancelled,
                    });
                }
            }
            "ide_connected" => {
                s.said_connected = true;
                let pid = params
                    .and_then(|p| from_object::<IdeConnectedParams>(p.get()).ok())
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
        if !self.phase.initialize_seen() {
            return Err(not_initialized());
        }
        if matches!(
            method,
            "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list"
        ) {
            list_params(params)?;
        }
        if let Some(i) = LISTS.iter().position(|l| *l == method) {
            s.listed |= 1 << i;
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
            // The capabilities declare resources and prompts, and the lists are empty: a read or
            // a get names one that does not exist (MCP's answers to those, not "method not found").
            "resources/read" => {
                #[derive(Deserialize)]
                struct Read<'a> {
                    #[serde(borrow)]
                    uri: Cow<'a, str>,
                }
                let p: Read<'_> = named_params(method, params)?;
                Err(RpcError::new(
                    jsonrpc::RESOURCE_NOT_FOUND,
                    format!("resource not found: {}", jsonrpc::echoed_name(&p.uri)),
                ))
            }
            "prompts/get" => {
                #[derive(Deserialize)]
                struct Get<'a> {
                    #[serde(borrow)]
                    name: Cow<'a, str>,
                }
                let p: Get<'_> = named_params(method, params)?;
                Err(RpcError::invalid_params(format!(
                    "unknown prompt: {}",
                    jsonrpc::echoed_name(&p.name)
                )))
            }
            "tools/call" => self.tool_call(s, id.get(), params),
            _ if self.config.compat_methods => match CompatRequest::parse(method, params) {
                None => Err(method_not_found(method)),
                Some(Err(msg)) => Err(RpcError::invalid_params(msg)),
                Some(Ok(request)) => {
                    id_free(s, id.get())?;
                    if let Some(path) = request.path() {
                        paths::resolve_in_workspace(path, &self.config.workspace_folders)?;
                    }
                    let seq = self.push_pending(s, id.get(), None, true, Asker::Unknown)?;
                    self.events.push_back(Event::CompatRequest {
                        call: CallId {
                            conn: self.conn,
                            seq,
                            asker: Asker::Unknown,
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
        if self.phase.initialize_seen() {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "already initialized",
            ));
        }
        let p: InitializeParams<'_> = params
            .ok_or_else(|| RpcError::invalid_params("initialize needs params"))
            .and_then(|p| {
                from_object(p.get()).map_err(|e| {
                    RpcError::invalid_params(format!(
                        "invalid initialize params: {}",
                        jsonrpc::echoed_error(&e)
                    ))
                })
            })?;
        let version = SUPPORTED_PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == p.protocol_version)
            .copied()
            .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[SUPPORTED_PROTOCOL_VERSIONS.len() - 1]);
        s.protocol_version = version;
        *self.phase = McpPhase::AwaitingInitialized;
        if let Some(raw) = p.client_info {
            (s.client_name, s.client_version) = ClientInfo::read(raw);
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
        id: &str,
        params: Option<&RawValue>,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        let params = params.ok_or_else(|| RpcError::invalid_params("tools/call needs params"))?;
        match parse_call_params(self.config.tools, params.get()) {
            Ok(call) => self.dispatch_tool(s, id, call),
            // MCP 2025-11-25 (SEP-1303): arguments that do not fit the schema are the tool's
            // error, which the model sees and can correct; a protocol error it would not see.
            Err(CallRefused::Arguments(message)) if s.protocol_version >= "2025-11-25" => {
                Ok(Some(result_body(&ToolResult::error(message))))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Run or hand over a parsed tool call of an offered tool (either decoding path checked it
    /// with `ToolSet::resolve`).
    fn dispatch_tool(
        &mut self,
        s: &mut Mcp,
        id: &str,
        call: Called,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        let Called { tool, asker } = call;
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
                // Checked first: a call refused for its id replaces no diff.
                id_free(s, id)?;
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
                let seq = self.push_pending(s, id, tab, false, asker)?;
                self.events.push_back(Event::ToolCall {
                    call: CallId {
                        conn: self.conn,
                        seq,
                        asker,
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
            call: p.call(self.conn),
            reason,
        });
    }

    /// Record a call handed to the host, or refuse it when
    /// [`Limits::max_pending_calls`](crate::Limits::max_pending_calls) are already in progress.
    fn push_pending(
        &mut self,
        s: &mut Mcp,
        id: &str,
        tab: Option<String>,
        compat: bool,
        asker: Asker,
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
        let id = RawId::new(id);
        s.grew |= tab.is_some() || id.heap_len() > 0;
        if let Some(bid) = self.batch {
            if let Some(b) = s.batches.iter_mut().find(|b| b.id == bid) {
                b.remaining += 1;
            }
        }
        s.pending.push(Pending {
            seq,
            id,
            tab,
            compat,
            asker,
            batch: self.batch,
        });
        Ok(seq)
    }
}

/// Refuses (-32600) a call whose id is that of a call still pending on the connection: MCP forbids
/// reusing an id within a session, and the two could not be told apart (a cancel would reach only
/// the first). Cheap when nothing is pending, as is usual.
fn id_free(s: &Mcp, id: &str) -> Result<(), RpcError> {
    if jsonrpc::find_id(s.pending.iter().map(|p| &*p.id), id).is_some() {
        return Err(RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "request id already in use by a call in progress",
        ));
    }
    Ok(())
}

/// A method's params read as an object of the given shape; -32602 naming the method otherwise.
fn named_params<'a, T: Deserialize<'a>>(
    method: &str,
    params: Option<&'a RawValue>,
) -> Result<T, RpcError> {
    let p = params.ok_or_else(|| RpcError::invalid_params(format!("{method} needs params")))?;
    from_object(p.get()).map_err(|e| {
        RpcError::invalid_params(format!(
            "invalid {method} params: {}",
            jsonrpc::echoed_error(&e)
        ))
    })
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
    let name = jsonrpc::echoed_name(method);
    // MCP's notifications are methods too, but not requests: said so (a client that sent
    // `notifications/initialized` with an id stays uninitialized, and learns why).
    let message = match method.starts_with("notifications/") {
        true => format!(
            "method not found: {name} is a notification, not a request: send it without an id"
        ),
        false => format!("method not found: {name}"),
    };
    RpcError::new(jsonrpc::METHOD_NOT_FOUND, message)
}

/// The params of a list method (`tools/list`, `prompts/list`, ...): absent, or an object whose
/// `cursor`, if any, is `null` (the JSON-RPC layer refuses a scalar or `null`). This host gives
/// every list whole and so no cursor: any cursor is one it did not give, which MCP's pagination
/// answers with -32602 (docs/protocol.md, "MCP lifecycle"); so are params that are not an object.
fn list_params(params: Option<&RawValue>) -> Result<(), RpcError> {
    #[derive(Deserialize)]
    struct ListParams<'a> {
        #[serde(borrow, default)]
        cursor: Option<&'a RawValue>,
    }
    let Some(p) = params.map(|p| p.get().trim()).filter(|p| *p != "null") else {
        return Ok(());
    };
    if !p.starts_with('{') {
        return Err(RpcError::invalid_params("params must be an object"));
    }
    let read: ListParams = serde_json::from_str(p).map_err(|e| {
        RpcError::invalid_params(format!("bad params: {}", jsonrpc::echoed_error(&e)))
    })?;
    match read.cursor.map(RawValue::get) {
        None | Some("null") => Ok(()),
        Some(_) => Err(RpcError::invalid_params(
            "unknown cursor: this host gives every list whole, and no cursor",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::RawId;

    #[test]
    fn raw_ids_read_back_as_written_inline_or_not() {
        let long = format!("\"{}\"", "é".repeat(40));
        for id in [
            "7",
            "-12",
            "\"a b\"",
            "\"✻ 22 bytes of text ✻\"",
            "12345678901234567890",
            &long,
        ] {
            assert_eq!(&*RawId::new(id), id);
        }
        assert!(matches!(
            RawId::new("12345678901234567890"),
            RawId::Inline { .. }
        ));
        assert!(matches!(RawId::new(&long), RawId::Boxed(_)));
    }
}
