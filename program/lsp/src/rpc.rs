//! JSON-RPC bookkeeping for one server, as pure code, typed in both directions by lsp-types'
//! `Request` and `Notification` traits (each message's `METHOD`, `Params` and `Result`): reading a
//! frame's body into an [`Incoming`] message, writing requests, notifications and responses, and
//! the answers to the requests servers send to the client ([`answer_server_request`]). Where
//! lsp-types' types would build what the client passes over, the trait is implemented by a lean
//! view (`messages.rs`).

use std::sync::Arc;

use lsp_types::notification::Notification;
use lsp_types::request::{self as req, Request};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::codec;
use crate::messages::{RegisterCapability, UnregisterCapability, WorkspaceConfiguration};

/// JSON-RPC's "invalid request" error code.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "method not found" error code.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params" error code.
pub const INVALID_PARAMS: i64 = -32602;
/// The most items a `workspace/configuration` request is answered for (servers ask for a few).
pub const MAX_CONFIGURATION_ITEMS: usize = 1024;

/// A message read from a server, its parts that are JSON values borrowed from the body it was
/// read from (a large message is not copied to be read).
#[derive(Debug)]
pub enum Incoming<'a> {
    /// The answer to one of our requests.
    Response {
        /// Our request's id (we only send integer ids; other ids are answers to nothing).
        id: i64,
        /// The result, or the server's error.
        result: Result<&'a RawValue, ResponseError>,
    },
    /// A request the server sends us, to be answered.
    Request {
        /// Its id, echoed in the answer (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: &'a RawValue,
    },
    /// A request the server sends that is not one (its `method` is not a string): answered
    /// with JSON-RPC's "invalid request" error and the reason.
    Invalid {
        /// Its id, echoed in the answer.
        id: Value,
        /// Why it is not a request.
        why: String,
    },
    /// An answer to no request of ours, or a message that is neither an answer nor a request
    /// that can be answered, with what it said (for the log).
    Stray(String),
    /// A notification from the server.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: &'a RawValue,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResponseError {
    /// The code.
    pub code: i64,
    /// The message.
    pub message: String,
}

/// A message's members as read. `method` and `result` are kept as they were given, `null`
/// included: present is what tells a request from an answer (JSON-RPC 2.0, sections 4 and 5).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ResponseError>,
}

/// A member that is there, whatever its value (`null` too); an absent one is `None` by default.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn null() -> &'static RawValue {
    serde_json::from_str("null").expect("null is JSON")
}

/// Reads one body. `Err` says why it is not a JSON-RPC message (the server is then out of order).
pub fn parse(body: &[u8]) -> Result<Incoming<'_>, String> {
    // An object (serde would read a struct from an array too).
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("not a JSON-RPC message: not an object".to_owned());
    }
    let env: Envelope =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON-RPC message: {e}"))?;
    let id = env.id.filter(|id| !id.is_null());
    let method = env
        .method
        .map(|m| serde_json::from_str::<String>(m.get()).map_err(|_| m));
    match (method, id) {
        (Some(Ok(method)), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: env.params.unwrap_or_else(|| null()),
        }),
        (Some(Ok(method)), None) => Ok(Incoming::Notification {
            method,
            params: env.params.unwrap_or_else(|| null()),
        }),
        // A request or notification whose method is not a string: the request is answered
        // with an error, a notification cannot be.
        (Some(Err(method)), Some(id)) => Ok(Incoming::Invalid {
            id,
            why: format!(
                "invalid request: its method is not a string: {}",
                clip(method.get())
            ),
        }),
        (Some(Err(method)), None) => Ok(Incoming::Stray(format!(
            "a notification whose method is not a string: {}",
            clip(method.get())
        ))),
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                // Answers to nothing we sent (a string id, or `null` for a message the server could not
                // read): told, not fatal.
                let what = env
                    .error
                    .map_or_else(String::new, |e| format!(": {} ({})", e.message, e.code));
                return Ok(Incoming::Stray(format!("an answer with id {id}{what}")));
            };
            let result = match (env.error, env.result) {
                (Some(error), _) => Err(error),
                (None, Some(result)) => Ok(result),
                // Neither: not an answer (`result` is required on success), so not taken for
                // one; the request it names waits on, for an answer or its time limit.
                (None, None) => {
                    return Ok(Incoming::Stray(format!(
                        "a message with id {id} and neither method, result nor error"
                    )))
                }
            };
            Ok(Incoming::Response { id, result })
        }
        // `"id": null` reads as no id: an answer to a message the server could not read.
        (None, None) if env.error.is_some() || env.result.is_some() => {
            let what = env
                .error
                .map_or_else(String::new, |e| format!(": {} ({})", e.message, e.code));
            Ok(Incoming::Stray(format!("an answer without id{what}")))
        }
        (None, None) => Err("a message with neither method nor id".to_owned()),
    }
}

/// At most 64 bytes of `text` (for a log line about a value a server sent).
fn clip(text: &str) -> &str {
    crate::log::prefix(text, 64)
}

/// A message the client writes: a request (with an id) or a notification.
#[derive(Serialize)]
struct Outgoing<'a, P: 'static> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    method: &'static str,
    #[serde(skip_serializing_if = "without_params")]
    params: &'a P,
}

/// Whether a method takes no params (`shutdown`, `exit`: lsp-types' `()`, which serde writes as
/// `null`): its message leaves the member out. JSON-RPC 2.0 allows `params` only as an array or
/// an object, and a strict server refuses `null` (TypeScript 7's: "expected no params, got
/// null", so it was never told to shut down in order).
fn without_params<P: 'static>(_: &&P) -> bool {
    std::any::TypeId::of::<P>() == std::any::TypeId::of::<()>()
}

/// The answer to a server's request: its result or an error.
#[derive(Serialize)]
struct Response<'a, T> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject<'a>>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
}

fn to_body(message: &impl Serialize) -> Vec<u8> {
    // lsp-types' params and results, and this crate's, are plain data: maps keyed by strings.
    serde_json::to_vec(message).expect("a message serialises")
}

/// The body of request `id` of `R`.
pub fn request<R: Request>(id: i64, params: &R::Params) -> Vec<u8> {
    to_body(&Outgoing {
        jsonrpc: "2.0",
        id: Some(id),
        method: R::METHOD,
        params,
    })
}

/// The body of a notification of `N`.
pub fn notification<N: Notification>(params: &N::Params) -> Vec<u8> {
    to_body(&Outgoing {
        jsonrpc: "2.0",
        id: None,
        method: N::METHOD,
        params,
    })
}

/// The body of the answer `result` to a server's request `id` of `R`.
pub fn response<R: Request>(id: &Value, result: &R::Result) -> Vec<u8> {
    to_body(&Response {
        jsonrpc: "2.0",
        id,
        result: Some(result),
        error: None,
    })
}

/// The body of an error in answer to a server's request `id`, whatever its method.
pub fn error_response(id: &Value, code: i64, message: &str) -> Vec<u8> {
    to_body(&Response::<()> {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(ErrorObject { code, message }),
    })
}

/// The result of an answer to our request of `R`, as `R` types it.
pub fn decode<R: Request>(answer: &RawValue) -> Result<R::Result, String> {
    decode_with::<R, _>(answer, |raw| serde_json::from_str(raw.get()))
}

/// The result of an answer to our request of `R`, as `read` reads it (a reader that keeps only
/// part of a large answer, or a type of the bridge's own for it); an error names the request.
pub fn decode_with<R: Request, T>(
    answer: &RawValue,
    read: impl FnOnce(&RawValue) -> serde_json::Result<T>,
) -> Result<T, String> {
    read(answer).map_err(|e| format!("unreadable answer to {}: {e}", R::METHOD))
}

/// The params of a notification of `N` a server sent, as `N` types them.
pub fn params<N: Notification>(params: &RawValue) -> Result<N::Params, String> {
    serde_json::from_str(params.get()).map_err(|e| format!("unreadable {}: {e}", N::METHOD))
}

/// The URI the client names a file by in what it sends (`None`: none can name it, which the
/// percent-encoding of `file_uri` makes impossible for a path).
pub fn uri(path: &str) -> Option<lsp_types::Uri> {
    claude_ide_bridge::file_uri(path).parse().ok()
}

/// Stands in a notification's params for the text of a file ([`Frame::text_notification`]):
/// control characters, escaped in JSON, that no URI or language id holds (a URI is
/// percent-encoded, a language id is a word).
pub const TEXT_MARK: &str = "\u{1}claude-ide-bridge:text\u{1}";

/// A message waiting to be written, framed: its bytes, or, for one that carries a file's text,
/// the bytes before and after the text and the text itself (shared by the messages of one sync),
/// escaped as a JSON string only while it is written. A text is so held once, at its own size,
/// whatever JSON makes of it (a control character takes six bytes, `\u0001`).
#[derive(Debug)]
pub enum Frame {
    /// The whole frame.
    Bytes(Vec<u8>),
    /// The header and the JSON up to the text's opening quote, the text, and the JSON from its
    /// closing quote.
    Text {
        head: Vec<u8>,
        text: Arc<str>,
        tail: Vec<u8>,
    },
}

/// How much of a text is escaped at a time while it is written (at most six times as many bytes).
const TEXT_CHUNK: usize = 64 * 1024;

/// A file's text as the messages of one sync carry it: shared, and with its length escaped as
/// JSON counted once (a walk over the whole text) for all of them.
#[derive(Debug, Clone)]
pub struct SyncText {
    pub(crate) text: Arc<str>,
    escaped_len: usize,
}

impl SyncText {
    /// `text`, shared, with its escaped length counted.
    pub fn new(text: &str) -> SyncText {
        SyncText {
            escaped_len: escaped_len(text),
            text: Arc::from(text),
        }
    }

    /// Its length in bytes (as held, not escaped).
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A text handed to the servers of a language's set: made into one [`SyncText`] (one copy held,
/// its escaped length counted once) the first time a server needs it, shared by the others,
/// and hashed once; nothing is made for servers that already have it.
pub struct SharedText<'a> {
    text: &'a str,
    pub(crate) sync: std::sync::OnceLock<SyncText>,
    hash: std::sync::OnceLock<u64>,
}

impl<'a> SharedText<'a> {
    /// `text`, nothing made yet.
    pub fn new(text: &'a str) -> SharedText<'a> {
        SharedText {
            text,
            sync: std::sync::OnceLock::new(),
            hash: std::sync::OnceLock::new(),
        }
    }

    /// A text already held as a [`SyncText`].
    pub fn held(text: &'a SyncText) -> SharedText<'a> {
        SharedText {
            text: text.as_str(),
            sync: text.clone().into(),
            hash: std::sync::OnceLock::new(),
        }
    }

    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// The one [`SyncText`] of it.
    pub fn sync_text(&self) -> &SyncText {
        self.sync.get_or_init(|| SyncText::new(self.text))
    }

    /// Its hash, by `hash`, worked out once.
    pub fn hash(&self, hash: impl FnOnce(&str) -> u64) -> u64 {
        *self.hash.get_or_init(|| hash(self.text))
    }
}

impl Frame {
    /// A notification of `N` that carries `text`: `params` hold [`TEXT_MARK`] where the text goes
    /// (exactly once). The message is written with the mark, then held as the bytes before and
    /// after it beside the text, escaped only as it is written.
    pub fn text_notification<N: Notification>(params: &N::Params, text: &SyncText) -> Frame {
        let body = notification::<N>(params);
        let mark = serde_json::to_vec(TEXT_MARK).expect("a string serialises");
        let at = body
            .windows(mark.len())
            .position(|w| w == mark)
            .expect("the params hold the text's mark");
        // From the opening quote to the closing one, both kept.
        let (head, tail) = (&body[..=at], &body[at + mark.len() - 1..]);
        let mut framed = codec::header(head.len() + text.escaped_len + tail.len());
        framed.extend_from_slice(head);
        Frame::Text {
            head: framed,
            text: text.text.clone(),
            tail: tail.to_vec(),
        }
    }

    /// The bytes it holds besides a text.
    pub fn held(&self) -> usize {
        match self {
            Frame::Bytes(bytes) => bytes.len(),
            Frame::Text { head, tail, .. } => head.len() + tail.len(),
        }
    }

    /// Hands its bytes to `put` in order, a piece at a time (a text a chunk at a time, escaped);
    /// stops, answering `Ok(false)`, when `put` does.
    pub fn write(
        &self,
        mut put: impl FnMut(&[u8]) -> std::io::Result<bool>,
    ) -> std::io::Result<bool> {
        let (head, text, tail) = match self {
            Frame::Bytes(bytes) => return put(bytes),
            Frame::Text { head, text, tail } => (head, text, tail),
        };
        if !put(head)? {
            return Ok(false);
        }
        let mut escaped = Vec::new();
        for chunk in chunks(text) {
            escaped.clear();
            serde_json::to_writer(&mut escaped, chunk).expect("a string serialises into memory");
            // Without the quotes that make it a JSON string of its own.
            if !put(&escaped[1..escaped.len() - 1])? {
                return Ok(false);
            }
        }
        put(tail)
    }

    /// Its first `max` bytes (all of them for the tests; the start of a message for the trace).
    pub fn start(&self, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.write(|piece| {
            out.extend_from_slice(&piece[..piece.len().min(max - out.len())]);
            Ok(out.len() < max)
        });
        out
    }
}

/// A text in pieces of about [`TEXT_CHUNK`] bytes, each ending at a character's end.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len().min(TEXT_CHUNK);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, after) = rest.split_at(cut);
        rest = after;
        Some(chunk)
    })
}

/// The length of `text` escaped as the contents of a JSON string (without its quotes), counted
/// without being written anywhere.
fn escaped_len(text: &str) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, text).expect("a string serialises");
    count.0 - 2
}

/// What a server's request to the client changes on our side, besides its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// `client/registerCapability`: registration id and method (such as `textDocument/diagnostic`).
    Added(String, String),
    /// `client/registerCapability` of `workspace/didChangeWatchedFiles`: registration id, and
    /// its globs (or why they cannot be read).
    Watch(String, Result<Vec<crate::messages::FileWatcher>, String>),
    /// `client/unregisterCapability`: registration id and method.
    Removed(String, String),
}

/// A registration the client keeps: the globs of `workspace/didChangeWatchedFiles` read from
/// its options, any other as its id and method.
fn registration(r: crate::messages::Registered) -> Registration {
    if r.method != lsp_types::notification::DidChangeWatchedFiles::METHOD {
        return Registration::Added(r.id, r.method);
    }
    let watchers = match r.options {
        Some(options) => serde_json::from_str::<crate::messages::WatchOptions>(options.get())
            .map(|o| o.watchers)
            .map_err(|e| format!("unreadable watchers: {e}")),
        None => Err("no watchers".to_owned()),
    };
    Registration::Watch(r.id, watchers)
}

/// The answer to a server's request: its body, the registrations it adds or removes, and why it
/// was refused, if it was (for the log).
#[derive(Debug)]
pub struct Answer {
    /// The response's body.
    pub body: Vec<u8>,
    /// What it registered or unregistered.
    pub registrations: Vec<Registration>,
    /// The error's message, when the answer is one.
    pub refused: Option<String>,
}

/// The answer `result` to request `id` of `R`.
fn reply<R: Request>(id: &Value, result: &R::Result) -> Answer {
    Answer {
        body: response::<R>(id, result),
        registrations: Vec::new(),
        refused: None,
    }
}

/// The error `code` with `message` in answer to request `id`.
fn refuse(id: &Value, code: i64, message: String) -> Answer {
    Answer {
        body: error_response(id, code, &message),
        registrations: Vec::new(),
        refused: Some(message),
    }
}

/// Request `id` of `R` answered by `answer` from its params, read as `R` types them (params that
/// cannot be read are refused as invalid).
fn answer_with<R: Request>(
    id: &Value,
    params: &RawValue,
    answer: impl FnOnce(R::Params) -> Result<(R::Result, Vec<Registration>), (i64, String)>,
) -> Answer {
    let read = serde_json::from_str::<R::Params>(params.get())
        .map_err(|e| (INVALID_PARAMS, format!("bad {} params: {e}", R::METHOD)));
    match read.and_then(answer) {
        Ok((result, registrations)) => Answer {
            registrations,
            ..reply::<R>(id, &result)
        },
        Err((code, message)) => refuse(id, code, message),
    }
}

/// The answer to request `id` of `method` a server sends to the client, and the registrations it
/// adds or removes. Every request gets an answer, so that no server stalls waiting for one, typed
/// by its method's `Request`: `workspace/configuration` gets one `null` per item (the server's
/// defaults), `workspace/workspaceFolders` the folders, the progress and refresh requests and
/// registrations `null`, `workspace/applyEdit` and `window/showDocument` a refusal in their
/// result, params that cannot be read `InvalidParams`, and an unknown method `MethodNotFound`.
/// Params the answer does not depend on are not read.
pub fn answer_server_request(
    id: &Value,
    method: &str,
    params: &RawValue,
    folders: &[lsp_types::WorkspaceFolder],
) -> Answer {
    match method {
        WorkspaceConfiguration::METHOD => {
            answer_with::<WorkspaceConfiguration>(id, params, |p| {
                let n = p.items.len();
                // Each item costs a value of 32 bytes (and 5 in the answer) for 2 in the
                // request: more than any server asks for is refused.
                if n > MAX_CONFIGURATION_ITEMS {
                    return Err((
                        INVALID_PARAMS,
                        format!("more than {MAX_CONFIGURATION_ITEMS} configuration items ({n})"),
                    ));
                }
                Ok((vec![Value::Null; n], Vec::new()))
            })
        }
        // Read as ids and methods: `registerOptions` (any JSON) is kept unread, and read only
        // for the files a server watches.
        RegisterCapability::METHOD => answer_with::<RegisterCapability>(id, params, |p| {
            let added = p.registrations.into_iter();
            Ok(((), added.map(registration).collect()))
        }),
        UnregisterCapability::METHOD => answer_with::<UnregisterCapability>(id, params, |p| {
            let removed = p.unregisterations.into_iter();
            Ok((
                (),
                removed
                    .map(|r| Registration::Removed(r.id, r.method))
                    .collect(),
            ))
        }),
        req::WorkDoneProgressCreate::METHOD => reply::<req::WorkDoneProgressCreate>(id, &()),
        req::ShowMessageRequest::METHOD => reply::<req::ShowMessageRequest>(id, &None),
        req::WorkspaceDiagnosticRefresh::METHOD => {
            reply::<req::WorkspaceDiagnosticRefresh>(id, &())
        }
        req::SemanticTokensRefresh::METHOD => reply::<req::SemanticTokensRefresh>(id, &()),
        req::InlayHintRefreshRequest::METHOD => reply::<req::InlayHintRefreshRequest>(id, &()),
        req::InlineValueRefreshRequest::METHOD => reply::<req::InlineValueRefreshRequest>(id, &()),
        req::CodeLensRefresh::METHOD => reply::<req::CodeLensRefresh>(id, &()),
        req::WorkspaceFoldersRequest::METHOD => {
            reply::<req::WorkspaceFoldersRequest>(id, &Some(folders.to_vec()))
        }
        req::ApplyWorkspaceEdit::METHOD => reply::<req::ApplyWorkspaceEdit>(
            id,
            &lsp_types::ApplyWorkspaceEditResponse {
                applied: false,
                failure_reason: Some("this client does not apply edits".to_owned()),
                failed_change: None,
            },
        ),
        req::ShowDocument::METHOD => {
            reply::<req::ShowDocument>(id, &lsp_types::ShowDocumentResult { success: false })
        }
        _ => refuse(
            id,
            METHOD_NOT_FOUND,
            format!("method not supported by this client: {method}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A text frame is the JSON of its message, with a header of its exact length, the text
    /// escaped a chunk at a time: control characters, quotes, backslashes, and characters of
    /// several bytes across the chunks' ends (the pattern is 11 bytes: 65,536 cuts into the emoji).
    #[test]
    fn a_text_frame_is_its_messages_json() {
        let text = "a\u{1}é\"\\😀\n".repeat(30_000);
        let params = lsp_types::DidSaveTextDocumentParams {
            text_document: lsp_types::TextDocumentIdentifier {
                uri: uri("/w/a.py").unwrap(),
            },
            text: Some(TEXT_MARK.to_owned()),
        };
        let frame = Frame::text_notification::<lsp_types::notification::DidSaveTextDocument>(
            &params,
            &SyncText::new(&text),
        );
        let bytes = frame.start(usize::MAX);
        let mut decoder = codec::Decoder::new(usize::MAX);
        decoder.push(&bytes);
        let body = decoder.next_frame().unwrap().unwrap();
        assert_eq!(decoder.buffered(), 0);
        let message: Value = serde_json::from_slice(&body).unwrap();
        let expected = json!({"jsonrpc": "2.0", "method": "textDocument/didSave",
            "params": {"textDocument": {"uri": "file:///w/a.py"}, "text": text}});
        assert_eq!(message, expected);
        assert_eq!(frame.start(100), bytes[..100]);
        // It holds its head and tail beside the text, not the text escaped.
        assert!(frame.held() < 200, "{}", frame.held());
    }

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":{"a":1}}"#),
            Ok(Incoming::Response { id: 3, result: Ok(r) }) if r.get() == r#"{"a":1}"#
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32800,"message":"cancelled"}}"#),
            Ok(Incoming::Response {
                id: 4,
                result: Err(ResponseError { code: -32800, .. })
            })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"x","method":"workspace/configuration","params":{"items":[]}}"#),
            Ok(Incoming::Request { method, .. }) if method == "workspace/configuration"
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"$/progress"}"#),
            Ok(Incoming::Notification { method, params }) if method == "$/progress" && params.get() == "null"
        ));
        assert!(parse(b"[1,2]").is_err());
        assert!(parse(b"{}").is_err());
        assert!(matches!(
            parse(br#"{"id":"s","result":1}"#),
            Ok(Incoming::Stray(_))
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#),
            Ok(Incoming::Stray(what)) if what.contains("parse error")
        ));
        assert!(parse(b"\xff").is_err());
        assert!(parse(b" [1,\"m\"]").is_err());
        // Present but null is present: an answer with a null result, a request whose method
        // is not a string (answered with an error), a notification that cannot be answered.
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":5,"result":null}"#),
            Ok(Incoming::Response { id: 5, result: Ok(r) }) if r.get() == "null"
        ));
        for method in ["null", "7", "{}"] {
            let request = format!(r#"{{"jsonrpc":"2.0","id":2,"method":{method}}}"#);
            assert!(matches!(
                parse(request.as_bytes()),
                Ok(Incoming::Invalid { id, why }) if id == 2 && why.ends_with(method)
            ));
            let notification = format!(r#"{{"jsonrpc":"2.0","method":{method},"params":{{}}}}"#);
            assert!(matches!(
                parse(notification.as_bytes()),
                Ok(Incoming::Stray(what)) if what.contains("not a string")
            ));
        }
        // Neither result nor error: not an answer, so it does not end the request it names.
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":6}"#),
            Ok(Incoming::Stray(what)) if what.contains("neither")
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":null,"result":null}"#),
            Ok(Incoming::Stray(what)) if what.contains("without id")
        ));
    }

    /// The answer to request `id` of `method`: its JSON, and its registrations.
    fn ask(
        method: &str,
        params: &str,
        folders: &[lsp_types::WorkspaceFolder],
    ) -> (Value, Vec<Registration>) {
        let answer = answer_server_request(&json!("s1"), method, &raw(params), folders);
        let body: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], "s1");
        assert_eq!(
            answer.refused.as_deref(),
            body["error"]["message"].as_str(),
            "{body}"
        );
        (body, answer.registrations)
    }

    #[test]
    fn too_many_configuration_items_are_refused() {
        let items = vec!["{}"; MAX_CONFIGURATION_ITEMS + 1].join(",");
        let (answer, _) = ask(
            "workspace/configuration",
            &format!(r#"{{"items":[{items}]}}"#),
            &[],
        );
        assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{answer}");
    }

    #[test]
    fn configuration_gets_one_null_per_item() {
        let (answer, regs) = ask(
            "workspace/configuration",
            r#"{"items":[{"section":"python"},{"section":"python.analysis"},{}]}"#,
            &[],
        );
        assert_eq!(answer["result"], json!([null, null, null]));
        assert!(regs.is_empty());
        let (answer, _) = ask("workspace/configuration", "null", &[]);
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn registrations_are_reported() {
        let (answer, regs) = ask(
            "client/registerCapability",
            r#"{"registrations":[{"id":"1","method":"textDocument/diagnostic","registerOptions":{}}]}"#,
            &[],
        );
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": "s1", "result": null})
        );
        assert_eq!(
            regs,
            vec![Registration::Added(
                "1".into(),
                "textDocument/diagnostic".into()
            )]
        );
        let (_, regs) = ask(
            "client/unregisterCapability",
            r#"{"unregisterations":[{"id":"1","method":"textDocument/formatting"}]}"#,
            &[],
        );
        assert_eq!(
            regs,
            vec![Registration::Removed(
                "1".into(),
                "textDocument/formatting".into()
            )]
        );
    }

    #[test]
    fn folders_and_unknown_methods() {
        let folder = lsp_types::WorkspaceFolder {
            uri: "file:///w".parse().unwrap(),
            name: "w".into(),
        };
        let (answer, _) = ask("workspace/workspaceFolders", "null", &[folder]);
        assert_eq!(answer["result"], json!([{"uri": "file:///w", "name": "w"}]));
        for (method, result) in [
            ("window/workDoneProgress/create", json!(null)),
            ("window/showMessageRequest", json!(null)),
            ("workspace/diagnostic/refresh", json!(null)),
            ("workspace/codeLens/refresh", json!(null)),
            ("window/showDocument", json!({"success": false})),
            (
                "workspace/applyEdit",
                json!({"applied": false, "failureReason": "this client does not apply edits"}),
            ),
        ] {
            // Their params are not read: any will do.
            let (answer, _) = ask(method, r#"{"any":[1,2]}"#, &[]);
            assert_eq!(answer["result"], result, "{method}: {answer}");
            assert!(answer.get("error").is_none());
        }
        let (answer, _) = ask("custom/thing", "{}", &[]);
        assert_eq!(answer["error"]["code"], METHOD_NOT_FOUND);
        assert!(answer.get("result").is_none());
        // Registrations that cannot be read are refused, not taken for none.
        let (answer, regs) = ask("client/registerCapability", r#"{"registrations":5}"#, &[]);
        assert_eq!(answer["error"]["code"], INVALID_PARAMS);
        assert!(regs.is_empty());
    }

    /// What the client sends is its method's params as lsp-types types them.
    #[test]
    fn requests_and_notifications_are_their_methods_params() {
        // A method without params leaves the member out (JSON-RPC allows no `null` there).
        let body = request::<lsp_types::request::Shutdown>(7, &());
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "shutdown"})
        );
        let body = notification::<lsp_types::notification::Exit>(&());
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"jsonrpc": "2.0", "method": "exit"})
        );
        // One whose params are an empty object still sends it.
        let body =
            notification::<lsp_types::notification::Initialized>(&lsp_types::InitializedParams {});
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        );
        let cancel = lsp_types::CancelParams {
            id: lsp_types::NumberOrString::Number(7),
        };
        let body = notification::<lsp_types::notification::Cancel>(&cancel);
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}})
        );
        let edits = raw(
            r#"[{"range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}},"newText":"x"}]"#,
        );
        let edits = decode::<lsp_types::request::Formatting>(&edits)
            .unwrap()
            .unwrap();
        assert_eq!(edits[0].new_text, "x");
        let err = decode::<lsp_types::request::Formatting>(&raw("5")).unwrap_err();
        assert!(
            err.starts_with("unreadable answer to textDocument/formatting"),
            "{err}"
        );
    }
}
