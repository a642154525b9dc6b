//! The bodies of the fuzz targets, as plain functions: the libFuzzer binaries in `fuzz_targets/`
//! call them, and `cargo test` replays every committed corpus file through them on stable Rust.
//!
//! Every target asserts more than "no panic": memory bounds, the framing of what the engine
//! writes, and the invariants of the model host in `tests/common/harness.rs` for the whole server.

#![forbid(unsafe_code)]

use claude_ide_bridge::hooks::handshake::{
    self, accept_key, authorize, parse_upgrade, HeadReader, HeadStatus, Policy, Rejection,
};
use claude_ide_bridge::hooks::jsonrpc::{self, Decoded, Frame, Message};
use claude_ide_bridge::ws::{self, decode_header, WebSocket, WsLimits};
use claude_ide_bridge::{
    is_within, normalize, resolve_in_workspace, to_posix, uri_to_path, uri_to_windows_path, Limits,
};
use claude_ide_bridge::{CompatRequest, ToolCall, ToolName};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::time::Duration;

/// The in-memory client and the model host of the engine's own tests, shared by path.
#[path = "../../tests/common/mod.rs"]
mod common;

pub mod seeds;

use common::harness::{Harness, Op};

/// The token the `upgrade` target's policy expects (the seeds carry it).
pub const UPGRADE_TOKEN: &str = common::TOKEN;

// ---- upgrade ---------------------------------------------------------------------------------

/// `[cfg, chunk, head...]`: the head is fed to a [`HeadReader`] in chunks of `chunk + 1` bytes,
/// then parsed, authorized, and answered. `cfg` bits: 1 small head limit, 2 few headers,
/// 4 no token required, 8 no Host check, 16 an allowed Origin.
pub fn upgrade(data: &[u8]) {
    let [cfg, chunk, input @ ..] = data else {
        return;
    };
    let max_head = if cfg & 1 != 0 { 256 } else { 16 * 1024 };
    let max_headers = if cfg & 2 != 0 { 8 } else { 64 };
    let mut reader = HeadReader::new(max_head);
    let mut status = HeadStatus::Partial;
    let mut consumed = 0;
    for piece in input.chunks(*chunk as usize + 1) {
        let (used, st) = reader.feed(piece);
        assert!(used <= piece.len());
        if st == HeadStatus::Partial {
            assert_eq!(used, piece.len(), "a partial head consumes all its input");
        }
        assert!(reader.buffered() <= max_head);
        assert_eq!(reader.bytes_scanned(), reader.buffered());
        consumed += used;
        status = st;
        if st != HeadStatus::Partial {
            break;
        }
    }
    assert_eq!(reader.head(), &input[..consumed]);
    let mut out = Vec::new();
    match status {
        HeadStatus::Partial => return,
        HeadStatus::TooLarge => {
            assert_eq!(reader.buffered(), max_head);
            Rejection::HeadersTooLarge.write_response(&mut out);
            check_refusal(&out, 431);
            return;
        }
        HeadStatus::Complete => {
            let head = reader.head();
            // Two CRs in a row end a head too, which no valid request holds: refused, 400 for
            // the bare CR unless an earlier check of the documented order refuses it first (505
            // for another HTTP version, 431 for too many headers), and answered well.
            if head.ends_with(b"\r\r") {
                let refused = parse_upgrade(head, max_headers);
                let rejection = refused.expect_err("a head ending in two CRs is refused");
                assert!(
                    matches!(
                        rejection,
                        Rejection::BadRequest(_)
                            | Rejection::VersionNotSupported
                            | Rejection::HeadersTooLarge
                    ),
                    "{rejection:?}"
                );
                rejection.write_response(&mut out);
                check_refusal(&out, rejection.status());
                return;
            }
            // A first byte no request line starts with (TLS's ClientHello, 0x16) ends it at
            // once: refused, 400.
            if let [first] = head {
                if !(first.is_ascii_alphabetic() || *first == b'\r' || *first == b'\n') {
                    let rejection = parse_upgrade(head, max_headers)
                        .expect_err("a head of one byte that starts no request is refused");
                    assert!(
                        matches!(rejection, Rejection::BadRequest(_)),
                        "{rejection:?}"
                    );
                    rejection.write_response(&mut out);
                    check_refusal(&out, rejection.status());
                    return;
                }
            }
            assert!(head.ends_with(b"\n\n") || head.ends_with(b"\n\r\n"));
        }
    }
    let origins = if cfg & 16 != 0 {
        vec!["vscode-webview://abc".to_string()]
    } else {
        Vec::new()
    };
    let policy = Policy {
        token: (cfg & 4 == 0).then_some(UPGRADE_TOKEN),
        allowed_origins: &origins,
        check_host: cfg & 8 == 0,
        allowed_hosts: &[],
    };
    let verdict = parse_upgrade(reader.head(), max_headers).and_then(|req| {
        authorize(&req, &policy)?;
        Ok(req)
    });
    match verdict {
        Ok(req) => {
            if policy.check_host {
                assert!(req.host.as_deref().is_some_and(handshake::is_loopback_host));
            }
            if policy.token.is_some() {
                assert_eq!(req.auth_token(), Some(UPGRADE_TOKEN));
            }
            handshake::write_accept(&mut out, &req, Some("mcp"));
            let text = std::str::from_utf8(&out).expect("the 101 is ASCII");
            assert!(text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
            assert!(text.ends_with("\r\n\r\n"));
            assert!(text.contains(&accept_key(&req.key)));
            assert_eq!(
                text.contains("Sec-WebSocket-Protocol: mcp\r\n"),
                req.offers_protocol("mcp")
            );
            assert!(!text.to_ascii_lowercase().contains("extensions"));
            // Exactly one blank line: nothing a peer sent is reflected into the head.
            assert_eq!(text.matches("\r\n\r\n").count(), 1);
        }
        Err(rejection) => {
            rejection.write_response(&mut out);
            check_refusal(&out, rejection.status());
        }
    }
}

fn check_refusal(out: &[u8], status: u16) {
    let text = std::str::from_utf8(out).expect("refusals are UTF-8");
    assert!(text.starts_with(&format!("HTTP/1.1 {status} ")));
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .expect("a number");
    assert_eq!(length, body.len());
    // A 426 lists `Upgrade` too, as it names the protocol it requires (RFC 9110).
    let connection = if status == 426 {
        "Connection: Upgrade, close"
    } else {
        "Connection: close"
    };
    assert!(head.lines().any(|l| l == connection), "{head}");
}

// ---- text ------------------------------------------------------------------------------------

/// `[k0, k1, k2, k3, n, cuts[n % 4] (2 bytes each)..., text...]`: the text, masked with the key
/// `k0..k3`, is pushed to a [`TextBuf`](claude_ide_bridge_text::TextBuf) in pieces cut at the given
/// offsets (modulo its length + 1), each with its phase. A differential check against `std`, for the
/// crate's `unsafe` SIMD path (the one this CPU runs): after every piece the push succeeds exactly when
/// the bytes so far can still be the start of valid UTF-8 (it fails at the first impossible byte,
/// not later), `as_str` is exactly their longest complete prefix, and at the end `finish` gives the
/// whole text exactly when `std` accepts it.
pub fn text(data: &[u8]) {
    let [k0, k1, k2, k3, n, rest @ ..] = data else {
        return;
    };
    let key = [*k0, *k1, *k2, *k3];
    let n = (*n as usize % 4).min(rest.len() / 2);
    let (cut_bytes, text) = rest.split_at(2 * n);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (text.len() + 1))
        .collect();
    cuts.push(text.len());
    cuts.sort_unstable();
    let masked: Vec<u8> = text
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ key[i % 4])
        .collect();
    let mut buf = claude_ide_bridge_text::TextBuf::new();
    let mut at = 0;
    for end in cuts {
        let pushed = buf.push_masked(&masked[at..end], key, at);
        // What `std` says of the bytes so far: valid, a valid prefix cut inside a character, or an
        // impossible byte.
        let so_far = std::str::from_utf8(&text[..end]);
        let possible = so_far
            .as_ref()
            .map_or_else(|e| e.error_len().is_none(), |_| true);
        assert_eq!(pushed.is_ok(), possible, "push of {at}..{end}");
        if !possible {
            return;
        }
        let complete = so_far.map_or_else(|e| e.valid_up_to(), str::len);
        assert_eq!(buf.as_str().as_bytes(), &text[..complete]);
        assert_eq!(buf.len(), end);
        assert_eq!(buf.is_incomplete(), complete < end);
        at = end;
    }
    match std::str::from_utf8(text) {
        Ok(s) => assert_eq!(buf.finish(), Ok(s)),
        Err(_) => assert!(buf.finish().is_err()),
    }
}

// ---- frames ----------------------------------------------------------------------------------

/// `[cfg, n, sizes[n % 9]..., stream...]`: the stream is fed to a server-side [`WebSocket`] in
/// chunks cycling through `sizes` (each `(size + 1) * 16` with cfg bit 8, else `size + 1`; one
/// 4096-byte chunk size when there are none). cfg bits: 1 small limits, 2 zero-copy reads,
/// 4 echo messages back, 16 never drain the output.
pub fn frames(data: &[u8]) {
    let [cfg, n, rest @ ..] = data else {
        return;
    };
    let n = (*n as usize % 9).min(rest.len());
    let (size_bytes, stream) = rest.split_at(n);
    let scale = if cfg & 8 != 0 { 16 } else { 1 };
    let sizes: Vec<usize> = if size_bytes.is_empty() {
        vec![4096]
    } else {
        size_bytes
            .iter()
            .map(|b| (*b as usize + 1) * scale)
            .collect()
    };
    let max_chunk = sizes.iter().copied().max().unwrap_or(1);
    let limits = if cfg & 1 != 0 {
        WsLimits {
            max_message_size: 1024,
            max_fragments: 8,
            max_outbound: 8 * 1024,
        }
    } else {
        Limits::default().ws()
    };
    let (zero_copy, echo, drain) = (cfg & 2 != 0, cfg & 4 != 0, cfg & 16 == 0);
    // The input buffer's idle capacity and a header on top of a largest message and a chunk.
    let bound = limits.max_message_size + 2 * max_chunk + 32 * 1024;
    let mut ws = WebSocket::new(limits);
    let mut written = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    let mut failed = false;
    while pos < stream.len() {
        let end = (pos + sizes[i % sizes.len()]).min(stream.len());
        let chunk = &stream[pos..end];
        pos = end;
        i += 1;
        if zero_copy {
            let buf = ws.receiver.read_buf(chunk.len());
            assert!(buf.len() >= chunk.len());
            buf[..chunk.len()].copy_from_slice(chunk);
            ws.receiver.commit(chunk.len());
        } else {
            ws.receiver.receive(chunk);
        }
        let mut echoes: Vec<(bool, Vec<u8>)> = Vec::new();
        loop {
            let queued = ws.sender.queued();
            let polled = ws.receiver.poll(&mut ws.sender);
            // A failure is final: nothing that arrives after it is a message or another error.
            assert!(
                !failed || matches!(polled, Ok(None)),
                "{polled:?} after a failure"
            );
            match polled {
                Ok(None) => break,
                Ok(Some(ws::Message::Text(t))) => echoes.push((true, t.as_bytes().to_vec())),
                Ok(Some(ws::Message::Binary(b))) => echoes.push((false, b.to_vec())),
                Ok(Some(ws::Message::Ping(p))) => {
                    assert!(p.len() <= ws::MAX_CONTROL_PAYLOAD);
                    if !ws.sender.close_sent() && !ws.sender.is_aborted() {
                        assert!(ws.sender.queued() > queued, "a Ping is answered");
                    }
                }
                Ok(Some(ws::Message::Pong(p))) => assert!(p.len() <= ws::MAX_CONTROL_PAYLOAD),
                Ok(Some(ws::Message::Close(c))) => {
                    if let Some((code, _)) = c {
                        assert!(ws::is_valid_close_code(code));
                    }
                    assert!(ws.receiver.close_received());
                }
                Err(e) => {
                    failed = true;
                    assert!(ws.receiver.is_failed());
                    assert!(ws::is_valid_close_code(e.close_code()));
                    assert!(matches!(ws.receiver.poll(&mut ws.sender), Ok(None)));
                    assert!(ws.is_finished());
                    break;
                }
            }
        }
        if echo {
            for (text, payload) in echoes {
                let r = if text {
                    ws.sender
                        .send_text(std::str::from_utf8(&payload).expect("text is UTF-8"))
                } else {
                    ws.sender.send_binary(&payload)
                };
                if r.is_err() {
                    assert!(ws.sender.close_sent() || ws.sender.is_aborted());
                }
            }
        }
        let m = ws.receiver.memory();
        assert!(m <= bound, "receiver holds {m} bytes, over {bound}");
        assert!(ws.sender.queued() <= limits.max_outbound);
        if drain {
            written.extend_from_slice(ws.sender.output());
            let k = ws.sender.output().len();
            ws.sender.advance(k);
        }
    }
    written.extend_from_slice(ws.sender.output());
    check_frames(&written);
}

/// Server output: complete, unmasked frames with valid opcodes, control frames short and whole,
/// nothing after a Close.
fn check_frames(mut out: &[u8]) {
    let mut closed = false;
    while !out.is_empty() {
        let (h, n) = decode_header(out)
            .expect("server frames are valid")
            .expect("server frames are complete");
        assert!(!closed, "a frame after the Close");
        assert!(h.mask.is_none() && h.rsv == 0 && h.fin);
        let op = ws::OpCode::from_u8(h.opcode).expect("a known opcode");
        if op.is_control() {
            assert!(h.payload_len as usize <= ws::MAX_CONTROL_PAYLOAD);
        }
        closed |= op == ws::OpCode::Close;
        let len = h.payload_len as usize;
        assert!(n + len <= out.len(), "server frames are complete");
        if op == ws::OpCode::Text {
            assert!(std::str::from_utf8(&out[n..n + len]).is_ok());
        }
        out = &out[n + len..];
    }
}

// ---- jsonrpc ---------------------------------------------------------------------------------

/// Any string through the JSON-RPC decoder, the tool-call and compatibility parsers, and the
/// response writers (whose output must be JSON).
pub fn jsonrpc(data: &[u8]) {
    let text: Cow<'_, str> = String::from_utf8_lossy(data);
    match jsonrpc::decode(&text) {
        Frame::Single(m) => check_message(m),
        Frame::Batch(items) => {
            for raw in items {
                check_message(jsonrpc::decode_value(raw));
            }
        }
    }
    // The fast path reads only what the general decoder reads as the same request, and its params
    // reader only the call that the general rules read from those params.
    if let Decoded::Expected { id, params } = jsonrpc::decode_fast(&text, "tools/call") {
        match jsonrpc::decode(&text) {
            Frame::Single(Message::Request {
                id: general,
                method,
                params: Some(p),
            }) => {
                assert_eq!((general.get(), &*method), (id, "tools/call"));
                assert_eq!(p.get(), params);
            }
            other => panic!("read by the fast path, but the general decoder says {other:?}"),
        }
        if let Some(call) = jsonrpc::scan_call_params(params) {
            assert_eq!(jsonrpc::parse_call_params(params), Ok(call));
        }
    }
    let raw: Option<&RawValue> = serde_json::from_str(&text).ok();
    if let Some(raw) = raw {
        check_message(jsonrpc::decode_value(raw));
    }
    for tool in ToolName::ALL {
        if let Ok(call) = ToolCall::parse(tool.as_str(), raw) {
            assert_eq!(call.name(), tool);
        }
    }
    let by_name = ToolCall::parse(&text, raw);
    if ToolName::from_name(&text).is_none() {
        assert!(by_name.is_err(), "an unknown tool name parses");
    }
    if let Some(e) = by_name.err() {
        let _ = e.to_string();
    }
    for method in CompatRequest::METHODS {
        check_compat(method, raw);
    }
    check_compat(&text, raw);
    let _ = resolve_in_workspace(&text, &["/ws".to_string()]);
    let wire = uri_to_path(&text);
    if let Some(windows) = uri_to_windows_path(&text) {
        // The Windows reading names the file the wire reading does, separators aside.
        let wire = wire.expect("a URI with a Windows path has a wire path");
        assert_eq!(
            normalize(&wire.replace('\\', "/")),
            normalize(&to_posix(&windows).replace('\\', "/")),
            "{text:?}: {windows:?} against {wire:?}"
        );
    }
}

fn check_compat(method: &str, params: Option<&RawValue>) {
    match CompatRequest::parse(method, params) {
        None => assert!(!CompatRequest::METHODS.contains(&method)),
        Some(Ok(r)) => {
            assert_eq!(r.method(), method);
            if let Some(path) = r.path() {
                if let Ok(p) = resolve_in_workspace(path, &["/ws".to_string()]) {
                    assert!(is_within(&p, "/ws"), "{path:?} resolved outside: {p:?}");
                }
            }
        }
        Some(Err(_)) => {}
    }
}

fn check_message(m: Message<'_>) {
    let mut out = Vec::new();
    match m {
        Message::Request { id, method, params } => {
            jsonrpc::write_result(&mut out, id.get(), |o| o.extend_from_slice(b"{}"));
            assert_json(&out);
            assert!(jsonrpc::same_id(id.get(), id.get()));
            if method == "tools/call" {
                let parsed: Option<Value> = params.and_then(|p| serde_json::from_str(p.get()).ok());
                if let Some(name) = parsed.as_ref().and_then(|v| v["name"].as_str()) {
                    let args = parsed.as_ref().map(|v| v["arguments"].to_string());
                    let args = args.and_then(|a| RawValue::from_string(a).ok());
                    let _ = ToolCall::parse(name, args.as_deref());
                }
            }
            check_compat(&method, params);
        }
        Message::Notification { method, params } => check_compat(&method, params),
        Message::Response { .. } => {}
        Message::Invalid { id, error } => {
            jsonrpc::write_error(&mut out, id.map(|i| i.get()), &error);
            assert_json(&out);
        }
    }
}

fn assert_json(out: &[u8]) {
    let v: Result<Value, _> = serde_json::from_slice(out);
    assert!(v.is_ok(), "not JSON: {}", String::from_utf8_lossy(out));
}

// ---- server ----------------------------------------------------------------------------------

/// `[flags, ops...]`: a sequence of [`Op`]s for the model host of the engine's tests, which
/// checks its invariants after each; then shutdown, and the server must become idle. Flags:
/// 1 compatibility methods, 2 the clients answer the server's Close, 4 small limits.
pub fn server(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let ops = decode_ops(rest);
    let limits = if flags & 4 != 0 {
        Harness::small_limits()
    } else {
        Limits::default()
    };
    Harness::run(&ops, limits, flags & 1 != 0, flags & 2 != 0);
}

/// Durations that `Op::Advance` bytes 250..=255 stand for: sleeps and the timers' edges.
const JUMPS: [Duration; 6] = [
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(600),
    Duration::from_secs(3600),
    Duration::from_secs(86_400),
    Duration::from_secs(7 * 86_400),
];

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    fn feed(&mut self) -> usize {
        match self.u16() {
            u16::MAX => usize::MAX,
            n => n as usize,
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }
}

/// Decode operations; [`encode_ops`] is its inverse.
pub fn decode_ops(data: &[u8]) -> Vec<Op> {
    let mut r = Reader(data);
    let mut ops = Vec::new();
    while !r.0.is_empty() {
        let op = match r.u8() % 12 {
            0 => Op::Accept,
            1 => Op::Send {
                conn: r.u8() as usize,
                msg: r.u8(),
                id: r.u8(),
                feed: r.feed(),
            },
            2 => {
                let conn = r.u8() as usize;
                let n = r.u8() as usize;
                let bytes = r.bytes(n);
                Op::Raw {
                    conn,
                    bytes,
                    feed: r.feed(),
                }
            }
            3 => Op::Feed {
                conn: r.u8() as usize,
                n: r.feed(),
            },
            4 => Op::Advance(match r.u8() {
                d @ 0..=199 => Duration::from_millis(d as u64 * 10),
                d @ 200..=249 => Duration::from_secs((d as u64 - 200) * 2),
                d => JUMPS[d as usize - 250],
            }),
            5 => Op::Respond {
                call: r.u8() as usize,
                result: r.u8(),
            },
            6 => Op::Notify {
                kind: r.u8(),
                target: match r.u8() {
                    u8::MAX => None,
                    t => Some(t as usize),
                },
            },
            7 => Op::Close(r.u8() as usize),
            8 => Op::Hangup(r.u8() as usize),
            9 => Op::SetTools(r.u8()),
            10 => Op::WriteBudget(match r.u16() {
                u16::MAX => None,
                n => Some(n as usize),
            }),
            _ => Op::Shutdown,
        };
        ops.push(op);
    }
    ops
}

/// Encode operations (for seeds). Values out of the encodable range are clamped.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    let small = |n: usize| n.min(254) as u8;
    let feed = |out: &mut Vec<u8>, n: usize| {
        let v = if n >= u16::MAX as usize {
            u16::MAX
        } else {
            n as u16
        };
        out.extend_from_slice(&v.to_be_bytes());
    };
    for op in ops {
        match op {
            Op::Accept => out.push(0),
            Op::Send {
                conn,
                msg,
                id,
                feed: f,
            } => {
                out.extend_from_slice(&[1, small(*conn), *msg, *id]);
                feed(&mut out, *f);
            }
            Op::Raw {
                conn,
                bytes,
                feed: f,
            } => {
                let b = &bytes[..bytes.len().min(255)];
                out.extend_from_slice(&[2, small(*conn), b.len() as u8]);
                out.extend_from_slice(b);
                feed(&mut out, *f);
            }
            Op::Feed { conn, n } => {
                out.extend_from_slice(&[3, small(*conn)]);
                feed(&mut out, *n);
            }
            Op::Advance(d) => {
                let b = if let Some(j) = JUMPS.iter().position(|j| j == d) {
                    250 + j as u8
                } else if d.as_millis() < 2000 {
                    (d.as_millis() / 10) as u8
                } else {
                    200 + (d.as_secs() / 2).min(49) as u8
                };
                out.extend_from_slice(&[4, b]);
            }
            Op::Respond { call, result } => out.extend_from_slice(&[5, small(*call), *result]),
            Op::Notify { kind, target } => {
                out.extend_from_slice(&[6, *kind, target.map_or(u8::MAX, small)])
            }
            Op::Close(c) => out.extend_from_slice(&[7, small(*c)]),
            Op::Hangup(c) => out.extend_from_slice(&[8, small(*c)]),
            Op::SetTools(t) => out.extend_from_slice(&[9, *t]),
            Op::WriteBudget(b) => {
                out.push(10);
                feed(&mut out, b.unwrap_or(usize::MAX));
            }
            Op::Shutdown => out.push(11),
        }
    }
    out
}

// ---- lsp -------------------------------------------------------------------------------------

/// `[cfg, chunk, output...]`: what a language server writes, through the LSP client's codec into one
/// server's state (`claude_ide_bridge_lsp::fuzzing` says which invariants are checked).
pub fn lsp(data: &[u8]) {
    claude_ide_bridge_lsp::fuzzing::server_output(data);
}
