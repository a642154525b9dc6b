//! The seed corpora, generated from the real client's traffic. `fuzz/corpus/<target>/seed-*`
//! must match these (a test checks it); `FUZZ_WRITE_SEEDS=1 cargo test` rewrites them.

use crate::common::harness::{rpc, Op};
use crate::common::{masked, real_client_stream, real_request, TOKEN};
use crate::encode_ops;
use claude_ide_bridge::ws::OpCode;
use serde_json::json;
use std::time::Duration;

/// One seed: the target, a file name, the bytes.
pub struct Seed {
    /// `upgrade`, `frames`, `jsonrpc`, `server`, `text` or `lsp`.
    pub target: &'static str,
    /// The file name in `fuzz/corpus/<target>/`.
    pub name: &'static str,
    /// The contents.
    pub bytes: Vec<u8>,
}

fn seed(target: &'static str, name: &'static str, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name,
        bytes,
    }
}

fn with(prefix: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut v = prefix.to_vec();
    v.extend_from_slice(rest);
    v
}

/// The WebSocket part of the realistic session (after the upgrade head).
fn real_frames() -> Vec<u8> {
    let s = real_client_stream();
    let end = s.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    s[end..].to_vec()
}

/// Every seed.
pub fn all() -> Vec<Seed> {
    let real = real_request(Some(TOKEN));
    let frames = real_frames();
    let m = [0x37, 0xfa, 0x21, 0x3d];
    let mut seeds = vec![
        seed(
            "upgrade",
            "seed-real-client",
            with(&[0, 255], real.as_bytes()),
        ),
        seed(
            "upgrade",
            "seed-real-client-bytewise",
            with(&[0, 0], real.as_bytes()),
        ),
        seed(
            "upgrade",
            "seed-real-client-pipelined-frame",
            with(
                &[0, 40],
                &with(
                    real.as_bytes(),
                    &masked(
                        OpCode::Text,
                        true,
                        m,
                        br#"{"jsonrpc":"2.0","id":0,"method":"initialize"}"#,
                    ),
                ),
            ),
        ),
        seed(
            "upgrade",
            "seed-no-token",
            with(&[0, 255], real_request(None).as_bytes()),
        ),
        seed(
            "upgrade",
            "seed-version-8",
            with(
                &[0, 255],
                real.replace("Version: 13", "Version: 8").as_bytes(),
            ),
        ),
        seed(
            "upgrade",
            "seed-evil-origin",
            with(
                &[16, 255],
                real.replace(
                    "\r\n\r\n",
                    "\r\nOrigin: https://evil.example\r\nHost: evil.example\r\n\r\n",
                )
                .as_bytes(),
            ),
        ),
        seed(
            "upgrade",
            "seed-rfc6455-example",
            with(
                &[4 | 8, 255],
                b"GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n\
                  Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                  Origin: http://example.com\r\nSec-WebSocket-Protocol: chat, superchat\r\n\
                  Sec-WebSocket-Version: 13\r\n\r\n",
            ),
        ),
        seed(
            "upgrade",
            "seed-too-large",
            with(
                &[1 | 2, 255],
                real.replace(
                    "\r\n\r\n",
                    &format!("\r\nX-Fill: {}\r\n\r\n", "a".repeat(300)),
                )
                .as_bytes(),
            ),
        ),
        // frames: [cfg, n, sizes..., stream]
        seed("frames", "seed-real-session", with(&[4, 0], &frames)),
        seed(
            "frames",
            "seed-real-session-bytewise",
            with(&[2, 1, 0], &frames),
        ),
        seed(
            "frames",
            "seed-real-session-odd-chunks",
            with(&[4 | 8, 3, 0, 6, 2], &frames),
        ),
        seed(
            "frames",
            "seed-oversized-fragmented",
            with(&[1 | 16, 1, 99], &{
                let mut f = Vec::new();
                for i in 0..12u8 {
                    let op = if i == 0 {
                        OpCode::Text
                    } else {
                        OpCode::Continuation
                    };
                    f.extend(masked(op, i == 11, m, &[b'a' + i; 100]));
                }
                f
            }),
        ),
        seed(
            "frames",
            "seed-protocol-errors",
            with(&[4, 0], &{
                let mut f = masked(OpCode::Ping, true, m, &[b'p'; 125]);
                f.extend(masked(OpCode::Text, false, m, "grü".as_bytes()));
                f.extend(masked(OpCode::Continuation, true, m, &[0xc3, 0x28]));
                f
            }),
        ),
        seed(
            "frames",
            "seed-close-with-reason",
            with(
                &[0, 0],
                &masked(OpCode::Close, true, m, b"\x03\xe9going away"),
            ),
        ),
    ];
    let messages = [
        ("seed-initialize", rpc(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "claude-code", "version": "2.1.330"}}))),
        ("seed-initialized", r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string()),
        ("seed-tools-list", rpc(1, "tools/list", json!({}))),
        ("seed-open-diff", rpc(2, "tools/call", json!({"name": "openDiff", "arguments": {"old_file_path": "/ws/src/main.rs", "new_file_path": "/ws/src/main.rs", "new_file_contents": "fn main() {}\n", "tab_name": "✻ [Claude Code] main.rs (4f025d) ⧉"}, "_meta": {"progressToken": 2}}))),
        ("seed-get-diagnostics", rpc(3, "tools/call", json!({"name": "getDiagnostics", "arguments": {"uri": "file:///ws/src/main.rs"}}))),
        ("seed-open-file-args", r#"{"filePath":"/ws/src/lib.rs","preview":false,"startText":"fn","endText":"}","makeFrontmost":false,"startLine":1}"#.to_string()),
        ("seed-cancelled", r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"abc","reason":"x"}}"#.to_string()),
        ("seed-batch", r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"},7,{"jsonrpc":"2.0","id":null,"method":"y"}]"#.to_string()),
        ("seed-read-file", rpc(4, "readFile", json!({"path": "../outside/../src/main.rs"}))),
        ("seed-write-file", r#"{"path":"/ws/a.txt","content":"hi"}"#.to_string()),
        ("seed-invalid", r#"{"jsonrpc":"2.0","id":{"x":1},"method":7,"params":[]}"#.to_string()),
        ("seed-response", r#"{"jsonrpc":"2.0","id":9,"result":{"ok":true}}"#.to_string()),
        // The fast path of `tools/call`: the real client's member order, with `_meta`; spaces and
        // nested ignored members; a key written with an escape, which only the general decoder reads.
        ("seed-real-client-call", r#"{"method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///ws/src/main.rs"},"_meta":{"progressToken":5,"claudecode/toolUseId":"toolu_01"}},"jsonrpc":"2.0","id":5}"#.to_string()),
        ("seed-spaced-call", "{ \"jsonrpc\" : \"2.0\" ,\n \"id\" : \"a b\" , \"method\":\"tools/call\",\t\"params\": { \"name\":\"close_tab\", \"arguments\": {\"tab_name\":\"t\",\"x\":[1,{\"y\":null},-0.5e3]} } }".to_string()),
        ("seed-escaped-key-call", r#"{"jsonrpc":"2.0","\u0069d":7,"method":"tools/call","params":{"name":"getDiagnostics"}}"#.to_string()),
    ];
    for (name, text) in messages {
        seeds.push(seed("jsonrpc", name, text.into_bytes()));
    }
    let send = |conn, msg, id| Op::Send {
        conn,
        msg,
        id,
        feed: usize::MAX,
    };
    let opening = vec![Op::Accept, send(0, 0, 0), send(0, 3, 2), send(0, 4, 0)];
    let session = [
        opening.clone(),
        vec![
            send(0, 5, 1),
            send(0, 7, 2),
            send(0, 8, 3),
            Op::Respond { call: 1, result: 3 },
            Op::Advance(Duration::from_secs(30)),
            send(0, 15, 0),
            Op::Respond { call: 0, result: 0 },
            Op::Notify {
                kind: 1,
                target: None,
            },
            send(0, 16, 0),
        ],
    ]
    .concat();
    let sleep = [
        opening.clone(),
        vec![
            send(0, 7, 1),
            Op::Advance(Duration::from_secs(86_400)),
            Op::Advance(Duration::from_secs(30)),
            Op::Advance(Duration::from_secs(600)),
        ],
    ]
    .concat();
    let shutdown = [
        opening.clone(),
        vec![
            send(0, 7, 0),
            send(0, 7, 1),
            send(0, 9, 2),
            Op::Accept,
            Op::Send {
                conn: 1,
                msg: 0,
                id: 0,
                feed: 100,
            },
            Op::Shutdown,
            Op::Feed {
                conn: 1,
                n: usize::MAX,
            },
            Op::Respond { call: 0, result: 0 },
        ],
    ]
    .concat();
    let batch_and_tabs = [
        vec![Op::Accept, send(0, 0, 0), send(0, 3, 1), send(0, 4, 0)],
        vec![
            send(0, 13, 3),
            send(0, 10, 5),
            send(0, 12, 4),
            send(0, 18, 6),
            send(0, 11, 0),
            Op::Respond { call: 2, result: 1 },
        ],
    ]
    .concat();
    let crowd = {
        let mut v = Vec::new();
        for i in 0..6 {
            v.push(Op::Accept);
            v.push(Op::Send {
                conn: i,
                msg: 0,
                id: 0,
                feed: 50,
            });
        }
        v.push(Op::Advance(Duration::from_secs(5)));
        v.push(Op::Feed {
            conn: 5,
            n: usize::MAX,
        });
        v.push(Op::Advance(Duration::from_secs(6)));
        v
    };
    let slow_reader = [
        opening,
        vec![
            Op::WriteBudget(Some(7)),
            send(0, 5, 1),
            send(0, 5, 2),
            send(0, 22, 0),
            Op::Hangup(0),
        ],
    ]
    .concat();
    seeds.push(seed(
        "server",
        "seed-session",
        with(&[0], &encode_ops(&session)),
    ));
    seeds.push(seed(
        "server",
        "seed-sleep",
        with(&[0], &encode_ops(&sleep)),
    ));
    seeds.push(seed(
        "server",
        "seed-shutdown",
        with(&[2], &encode_ops(&shutdown)),
    ));
    seeds.push(seed(
        "server",
        "seed-batch-and-tabs",
        with(&[1], &encode_ops(&batch_and_tabs)),
    ));
    seeds.push(seed(
        "server",
        "seed-crowd",
        with(&[4], &encode_ops(&crowd)),
    ));
    seeds.push(seed(
        "server",
        "seed-slow-reader",
        with(&[4], &encode_ops(&slow_reader)),
    ));
    seeds.extend(text_seeds());
    seeds.extend(lsp_seeds());
    seeds
}

/// `lsp`: `[cfg, chunk]` then what a server writes, framed: the messages of a pyright session as the
/// client's tests saw them (initialize answer, its requests, registrations, progress, diagnostics),
/// then the same with faults (garbage, a wrong Content-Length, a message over the small limit).
fn lsp_seeds() -> Vec<Seed> {
    let frame = |v: serde_json::Value| {
        let body = serde_json::to_vec(&v).expect("JSON");
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend(body);
        out
    };
    let range = json!({"start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 14}});
    let session: Vec<u8> = [
        json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"textDocumentSync": 2, "documentFormattingProvider": true}}}),
        json!({"jsonrpc": "2.0", "id": 0, "method": "client/registerCapability", "params": {"registrations": [{"id": "d1", "method": "textDocument/diagnostic", "registerOptions": {"identifier": "Pyright"}}]}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "workspace/configuration", "params": {"items": [{"scopeUri": "file:///w", "section": "python"}]}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "workspace/diagnostic/refresh"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "window/workDoneProgress/create", "params": {"token": "t"}}),
        json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "t", "value": {"kind": "begin", "title": ""}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "client/unregisterCapability", "params": {"unregisterations": [{"id": "d1", "method": "textDocument/diagnostic"}]}}),
        json!({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "No source files found."}}),
        json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///w/a.py", "version": 1, "diagnostics": [{"range": range, "message": "Type \"Literal['one']\" is not assignable to declared type \"int\"", "severity": 1, "code": "reportAssignmentType", "source": "Pyright"}]}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "workspace/workspaceFolders"}),
        json!({"jsonrpc": "2.0", "id": "s", "method": "unknown/request", "params": {}}),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}}),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"kind": "full", "resultId": "3", "items": []}}),
    ]
    .into_iter()
    .flat_map(frame)
    .collect();
    let mut garbage = session.clone();
    garbage.extend_from_slice(b"Starting server on stdio...\r\n\r\n");
    let mut short = frame(json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}}));
    short.extend(b"Content-Length: 10\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}");
    let big = frame(
        json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///w/a.py", "diagnostics": [{"range": range, "message": "x".repeat(400)}]}}),
    );
    // typescript-language-server checked on request (cfg 8 | 4: its check of /w/a.py asked as ids
    // 2-4): a publish without a version, the three passes answered (one cancelled), a later publish.
    let tsserver_diag = json!({"start": {"line": 1, "offset": 10}, "end": {"line": 1, "offset": 15}, "text": "'Operator' is deprecated.", "code": 6385, "category": "suggestion", "reportsDeprecated": true});
    let tsserver: Vec<u8> = [
        json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///w/a.py", "diagnostics": []}}),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"seq": 0, "type": "response", "command": "syntacticDiagnosticsSync", "request_seq": 5, "success": true, "body": []}}),
        json!({"jsonrpc": "2.0", "id": 3, "result": {"type": "cancelled", "reason": "r"}}),
        json!({"jsonrpc": "2.0", "id": 4, "result": {"seq": 0, "type": "response", "command": "suggestionDiagnosticsSync", "request_seq": 7, "success": true, "body": [tsserver_diag]}}),
        json!({"jsonrpc": "2.0", "id": 5, "result": null}),
        json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///w/a.py", "diagnostics": [{"range": range, "message": "'Operator' is deprecated.", "severity": 4, "code": 6385, "source": "typescript"}]}}),
    ]
    .into_iter()
    .flat_map(frame)
    .collect();
    vec![
        seed("lsp", "seed-tsserver-check", with(&[12, 255], &tsserver)),
        seed("lsp", "seed-pyright-session", with(&[4, 255], &session)),
        seed(
            "lsp",
            "seed-pyright-session-bytewise",
            with(&[4, 0], &session),
        ),
        seed(
            "lsp",
            "seed-running-pull",
            with(&[6, 31], &session[session.len() / 2..]),
        ),
        seed(
            "lsp",
            "seed-garbage-after-session",
            with(&[0, 63], &garbage),
        ),
        seed("lsp", "seed-short-length", with(&[0, 255], &short)),
        seed("lsp", "seed-over-small-limit", with(&[3, 255], &big)),
    ]
}

/// `text`: the key, cuts, then text: source with multi-byte characters cut inside them and across
/// 64-byte blocks, and invalid bytes of each kind.
fn text_seeds() -> Vec<Seed> {
    let mut code = String::new();
    for i in 0..12 {
        code.push_str(&format!("let é{i} = \"ünïcödé € 😀\"; // línea {i}\n"));
    }
    let header = |cuts: &[u16]| {
        let mut h = vec![0x37, 0xfa, 0x21, 0x3d, cuts.len() as u8];
        for c in cuts {
            h.extend_from_slice(&c.to_le_bytes());
        }
        h
    };
    let code = code.into_bytes();
    // Offsets inside characters: a lead byte, then the byte after it.
    let lead = code
        .iter()
        .position(|b| *b >= 0xF0)
        .expect("a 4-byte character") as u16;
    let mut seeds = vec![
        seed("text", "seed-source", with(&header(&[]), &code)),
        seed(
            "text",
            "seed-source-cut",
            with(&header(&[lead + 1, 63, 130]), &code),
        ),
    ];
    for (name, bad) in [
        ("seed-surrogate", &[0xED, 0xA0, 0x80][..]),
        ("seed-overlong", &[0xE0, 0x80, 0xAF]),
        ("seed-too-large", &[0xF4, 0x90, 0x80, 0x80]),
        ("seed-lone-continuation", &[0x80]),
        ("seed-truncated", &[0xE2, 0x82]),
    ] {
        let mut bytes = code[..100].to_vec();
        bytes.extend_from_slice(bad);
        bytes.extend_from_slice(&code[100..200]);
        seeds.push(seed("text", name, with(&header(&[101]), &bytes)));
    }
    seeds
}
