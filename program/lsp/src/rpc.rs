//! JSON-RPC bookkeeping for one server, as pure code: reading a frame's body into an [`Incoming`] message,
//! writing requests, notifications and responses, and the answers to the requests servers send to the client.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::codec;

/// JSON-RPC's "method not found" error code.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params" error code.
pub const INVALID_PARAMS: i64 = -32602;
/// The most items a `workspace/configuration` request is answered for (servers ask for a few).
pub const MAX_CONFIGURATION_ITEMS: usize = 1024;

/// A message read from a server.
#[derive(Debug)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        /// Our request's id (we only send integer ids; other ids are answers to nothing).
        id: i64,
        /// The result, or the server's error.
        result: Result<Box<RawValue>, ResponseError>,
    },
    /// A request the server sends us, to be answered.
    Request {
        /// Its id, echoed in the answer (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Box<RawValue>,
    },
    /// An answer to no request of ours, with what it said (for the log).
    Stray(String),
    /// A notification from the server.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Box<RawValue>,
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

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ResponseError>,
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// Reads one body. `Err` says why it is not a JSON-RPC message (the server is then out of order).
pub fn parse(body: &[u8]) -> Result<Incoming, String> {
    let env: Envelope =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON-RPC message: {e}"))?;
    match (env.method, env.id) {
        (Some(method), Some(id)) if !id.is_null() => Ok(Incoming::Request {
            id,
            method,
            params: env.params.unwrap_or_else(null),
        }),
        (Some(method), _) => Ok(Incoming::Notification {
            method,
            params: env.params.unwrap_or_else(null),
        }),
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                // Answers to nothing we sent (a string id, or `null` for a message the server could not
                // read): told, not fatal.
                let what = env
                    .error
                    .map_or_else(String::new, |e| format!(": {} ({})", e.message, e.code));
                return Ok(Incoming::Stray(format!("an answer with id {id}{what}")));
            };
            let result = match env.error {
                Some(error) => Err(error),
                None => Ok(env.result.unwrap_or_else(null)),
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

/// The body of a request.
pub fn request(id: i64, method: &str, params: impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .expect("request params serialise")
}

/// The body of a notification.
pub fn notification(method: &str, params: impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
        .expect("notification params serialise")
}

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
    text: Arc<str>,
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
}

impl Frame {
    /// A notification whose params end with a text member: `params_head` is the params' JSON
    /// before the text's value, `params_tail` what follows it.
    pub fn text_notification(
        method: &str,
        params_head: &str,
        text: &SyncText,
        params_tail: &str,
    ) -> Frame {
        let head = format!(
            r#"{{"jsonrpc":"2.0","method":{},"params":{params_head}""#,
            Value::from(method)
        );
        let tail = format!(r#""{params_tail}}}"#);
        let mut framed = codec::header(head.len() + text.escaped_len + tail.len());
        framed.extend_from_slice(head.as_bytes());
        Frame::Text {
            head: framed,
            text: text.text.clone(),
            tail: tail.into_bytes(),
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

/// The body of the answer to a server's request.
pub fn response(id: &Value, answer: Result<Value, (i64, String)>) -> Vec<u8> {
    let msg = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    serde_json::to_vec(&msg).expect("a response serialises")
}

/// What a server's request to the client changes on our side, besides its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// `client/registerCapability`: registration id and method (such as `textDocument/diagnostic`).
    Added(String, String),
    /// `client/unregisterCapability`: registration id and method.
    Removed(String, String),
}

/// The answer to a request a server sends to the client, and the registrations it adds or removes.
///
/// Every request gets an answer, so that no server stalls waiting for one: `workspace/configuration` gets one
/// `null` per item (the server's defaults), `workspace/workspaceFolders` the folders, the progress and
/// registration requests `null`, and an unknown method `MethodNotFound`.
pub fn answer_server_request(
    method: &str,
    params: &RawValue,
    folders: &[lsp_types::WorkspaceFolder],
) -> (Result<Value, (i64, String)>, Vec<Registration>) {
    match method {
        "workspace/configuration" => {
            #[derive(Deserialize)]
            struct Items {
                items: Vec<serde::de::IgnoredAny>,
            }
            match serde_json::from_str::<Items>(params.get()) {
                // Each item would cost a value of 32 bytes (and 5 in the answer) for 2 in the
                // request: more than any server asks for is refused.
                Ok(items) if items.items.len() > MAX_CONFIGURATION_ITEMS => (
                    Err((
                        INVALID_PARAMS,
                        format!(
                            "more than {MAX_CONFIGURATION_ITEMS} configuration items ({})",
                            items.items.len()
                        ),
                    )),
                    vec![],
                ),
                Ok(items) => (
                    Ok(Value::Array(vec![Value::Null; items.items.len()])),
                    vec![],
                ),
                Err(e) => (
                    Err((INVALID_PARAMS, format!("bad configuration params: {e}"))),
                    vec![],
                ),
            }
        }
        // Read as ids and methods only: `registerOptions` (any JSON) is passed over, not built.
        "client/registerCapability" => {
            let regs = serde_json::from_str::<Registrations>(params.get())
                .map(|p| {
                    p.registrations
                        .into_iter()
                        .map(|r| Registration::Added(r.id, r.method))
                        .collect()
                })
                .unwrap_or_default();
            (Ok(Value::Null), regs)
        }
        "client/unregisterCapability" => {
            let regs = serde_json::from_str::<Unregistrations>(params.get())
                .map(|p| {
                    p.unregisterations
                        .into_iter()
                        .map(|r| Registration::Removed(r.id, r.method))
                        .collect()
                })
                .unwrap_or_default();
            (Ok(Value::Null), regs)
        }
        "window/workDoneProgress/create"
        | "window/showMessageRequest"
        | "workspace/diagnostic/refresh"
        | "workspace/semanticTokens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/inlineValue/refresh"
        | "workspace/codeLens/refresh" => (Ok(Value::Null), vec![]),
        "workspace/workspaceFolders" => (
            Ok(serde_json::to_value(folders).expect("folders serialise")),
            vec![],
        ),
        "workspace/applyEdit" => (
            Ok(json!({"applied": false, "failureReason": "this client does not apply edits"})),
            vec![],
        ),
        "window/showDocument" => (Ok(json!({"success": false})), vec![]),
        _ => (
            Err((
                METHOD_NOT_FOUND,
                format!("method not supported by this client: {method}"),
            )),
            vec![],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text frame is the JSON of its message, with a header of its exact length, the text
    /// escaped a chunk at a time: control characters, quotes, backslashes, and characters of
    /// several bytes across the chunks' ends (the pattern is 11 bytes: 65,536 cuts into the emoji).
    #[test]
    fn a_text_frame_is_its_messages_json() {
        let text = "a\u{1}é\"\\😀\n".repeat(30_000);
        let frame = Frame::text_notification(
            "textDocument/didSave",
            r#"{"textDocument":{"uri":"file:///w/a.py"},"text":"#,
            &SyncText::new(&text),
            "}",
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
    }

    #[test]
    fn too_many_configuration_items_are_refused() {
        let items = vec!["{}"; MAX_CONFIGURATION_ITEMS + 1].join(",");
        let (answer, _) = answer_server_request(
            "workspace/configuration",
            &raw(&format!(r#"{{"items":[{items}]}}"#)),
            &[],
        );
        assert!(matches!(answer, Err((INVALID_PARAMS, _))), "{answer:?}");
    }

    #[test]
    fn configuration_gets_one_null_per_item() {
        let (answer, regs) = answer_server_request(
            "workspace/configuration",
            &raw(r#"{"items":[{"section":"python"},{"section":"python.analysis"},{}]}"#),
            &[],
        );
        assert_eq!(answer, Ok(json!([null, null, null])));
        assert!(regs.is_empty());
        let (answer, _) = answer_server_request("workspace/configuration", &raw("null"), &[]);
        assert_eq!(answer.unwrap_err().0, INVALID_PARAMS);
    }

    #[test]
    fn registrations_are_reported() {
        let (answer, regs) = answer_server_request(
            "client/registerCapability",
            &raw(
                r#"{"registrations":[{"id":"1","method":"textDocument/diagnostic","registerOptions":{}}]}"#,
            ),
            &[],
        );
        assert_eq!(answer, Ok(Value::Null));
        assert_eq!(
            regs,
            vec![Registration::Added(
                "1".into(),
                "textDocument/diagnostic".into()
            )]
        );
        let (_, regs) = answer_server_request(
            "client/unregisterCapability",
            &raw(r#"{"unregisterations":[{"id":"1","method":"textDocument/formatting"}]}"#),
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
        let (answer, _) =
            answer_server_request("workspace/workspaceFolders", &raw("null"), &[folder]);
        assert_eq!(answer, Ok(json!([{"uri": "file:///w", "name": "w"}])));
        let (answer, _) = answer_server_request(
            "window/workDoneProgress/create",
            &raw(r#"{"token":1}"#),
            &[],
        );
        assert_eq!(answer, Ok(Value::Null));
        let (answer, _) = answer_server_request("custom/thing", &raw("{}"), &[]);
        assert_eq!(answer.unwrap_err().0, METHOD_NOT_FOUND);
        let body = response(&json!("s1"), Err((METHOD_NOT_FOUND, "no".into())));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], "s1");
        assert_eq!(v["error"]["code"], METHOD_NOT_FOUND);
    }
}

/// A registration or unregistration, without its options.
#[derive(Deserialize)]
struct IdAndMethod {
    id: String,
    method: String,
}

#[derive(Deserialize)]
struct Registrations {
    registrations: Vec<IdAndMethod>,
}

/// (`unregisterations`: the protocol's own spelling.)
#[derive(Deserialize)]
struct Unregistrations {
    unregisterations: Vec<IdAndMethod>,
}

/// A diagnostic as a server sends it, with only what the client keeps: `data`, `relatedInformation`,
/// `tags` and `codeDescription` (any JSON, which `lsp_types` builds as values, about 16 times the bytes of a
/// long `[0,0,...]`) are passed over without being built.
#[derive(Debug, Deserialize)]
pub struct ServerDiagnostic {
    /// Where.
    pub range: lsp_types::Range,
    /// How bad (absent: an error).
    #[serde(default)]
    pub severity: Option<lsp_types::DiagnosticSeverity>,
    /// The server's code for it.
    #[serde(default)]
    pub code: Option<lsp_types::NumberOrString>,
    /// Who says so (`rustc`, `pyright`).
    #[serde(default)]
    pub source: Option<String>,
    /// What.
    pub message: String,
}

/// `textDocument/publishDiagnostics`' params, read as [`ServerDiagnostic`]s.
#[derive(Debug, Deserialize)]
pub struct Published {
    /// The file.
    pub uri: String,
    /// The document version they are for, if the server says.
    #[serde(default)]
    pub version: Option<i32>,
    /// Its diagnostics.
    pub diagnostics: Vec<ServerDiagnostic>,
}

/// A `textDocument/diagnostic` answer, read as [`ServerDiagnostic`]s and without buffering: `lsp_types` reads
/// it as an untagged enum of internally tagged ones, which builds the whole answer in memory first. Related
/// documents are passed over (the client asks for one file); a report without `kind` is a partial one.
#[derive(Debug, Deserialize)]
pub struct PullReport {
    /// `full`, `unchanged`, or absent (a partial result).
    #[serde(default)]
    pub kind: Option<String>,
    /// The id to send back as `previousResultId`.
    #[serde(rename = "resultId", default)]
    pub result_id: Option<String>,
    /// A full report's diagnostics.
    #[serde(default)]
    pub items: Vec<ServerDiagnostic>,
}
