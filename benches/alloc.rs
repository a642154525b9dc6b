//! Heap allocations of the engine, counted by a global allocator that only this bench installs:
//! allocations per small frame in the frame layer (target 0), per small request through the full
//! stack (target at most 2), and heap bytes held per idle connection (target at most 16 KiB).
//!
//! `cargo bench --bench alloc`. Counts, not times: the figures are exact and repeatable.

use claude_ide_bridge::ws::{encode_frame, Message, OpCode, Sender, WebSocket, WsLimits};
use claude_ide_bridge::{AuthToken, Config, ConnectionId, Event, Server, ToolResult};
use claude_ide_bridge::{Notification, SelectionChanged};
use claude_ide_bridge::{Position, Selection};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// Counts allocations (`alloc`, and `realloc` that may move) and the bytes currently held.
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the `GlobalAlloc` contract; the
// counters are only atomics on the side.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made while running `f`.
fn count<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCS.load(Relaxed);
    let r = f();
    (ALLOCS.load(Relaxed) - before, r)
}

const FRAMES: usize = 100_000;
const TOKEN: &str = "bench-token";

fn small_payloads() -> Vec<String> {
    vec![
        r#"{"jsonrpc":"2.0","id":12,"method":"ping"}"#.to_string(),
        r#"{"method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///home/me/project/src/main.rs"}},"jsonrpc":"2.0","id":12}"#.to_string(),
        format!(
            r#"{{"jsonrpc":"2.0","method":"selection_changed","params":{{"text":"{}","filePath":"/home/me/project/src/lib.rs","fileUrl":"file:///home/me/project/src/lib.rs","selection":{{"start":{{"line":10,"character":0}},"end":{{"line":14,"character":3}},"isEmpty":false}}}}}}"#,
            "fn main() {} ".repeat(10)
        ),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ]
}

/// The frame layer: 100,000 masked small text frames fed in 64 KiB reads (after one warm-up pass on the same
/// connection, so that the input buffer has its working size), and 100,000 `selection_changed` frames sent.
fn frame_layer() {
    let samples = small_payloads();
    let mut wire = Vec::new();
    for i in 0..FRAMES {
        let mask = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes();
        encode_frame(
            &mut wire,
            OpCode::Text,
            true,
            Some(mask),
            samples[i % 4].as_bytes(),
        );
    }
    let limits = WsLimits {
        max_message_size: 1 << 20,
        max_fragments: 1024,
        max_outbound: 1 << 20,
    };
    let mut ws = WebSocket::new(limits);
    let pass = |ws: &mut WebSocket| {
        let mut n = 0;
        for chunk in wire.chunks(64 * 1024) {
            let buf = ws.receiver.read_buf(chunk.len());
            buf[..chunk.len()].copy_from_slice(chunk);
            ws.receiver.commit(chunk.len());
            while let Some(m) = ws.poll().expect("valid frames") {
                if let Message::Text(t) = m {
                    n += usize::from(!t.is_empty());
                }
            }
        }
        n
    };
    let (warm, n) = count(|| pass(&mut ws));
    assert_eq!(n, FRAMES);
    let (allocs, n) = count(|| pass(&mut ws));
    assert_eq!(n, FRAMES);
    println!(
        "frame layer, receive: {:.4} allocations per small frame ({allocs} for {FRAMES} frames; the first pass on \
         a new connection made {warm}, growing the input buffer)",
        allocs as f64 / FRAMES as f64
    );

    let note = Notification::SelectionChanged(SelectionChanged {
        text: "fn main() {}".into(),
        file_path: "/home/me/project/src/main.rs".into(),
        file_url: "file:///home/me/project/src/main.rs".into(),
        selection: Selection::new(Position::new(1, 0), Position::new(1, 12)),
    });
    let mut tx = Sender::new(1 << 20);
    let send = |tx: &mut Sender| {
        for _ in 0..FRAMES {
            tx.send_text_with(|out| note.write_json(out)).expect("room");
            let n = tx.output().len();
            tx.advance(n);
        }
    };
    let (warm, ()) = count(|| send(&mut tx));
    let (allocs, ()) = count(|| send(&mut tx));
    println!(
        "frame layer, send selection_changed: {:.4} allocations per frame ({allocs} for {FRAMES}; first pass {warm})",
        allocs as f64 / FRAMES as f64
    );
}

fn handshake(server: &mut Server, now: Instant) -> ConnectionId {
    let conn = server.accept(now);
    let req = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: mcp\r\nX-Claude-Code-Ide-Authorization: {TOKEN}\r\n\r\n"
    );
    server.handle_input(conn, req.as_bytes(), now);
    let mut f = Vec::new();
    encode_frame(&mut f, OpCode::Text, true, Some([1, 2, 3, 4]), br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.0.0"}}}"#);
    encode_frame(
        &mut f,
        OpCode::Text,
        true,
        Some([1, 2, 3, 4]),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    server.handle_input(conn, &f, now);
    drain(server);
    assert!(server.is_initialized(conn));
    conn
}

fn drain(server: &mut Server) {
    while server.poll_event().is_some() {}
    while let Some(c) = server.poll_transmit_ready() {
        let n = server.transmit(c).len();
        server.advance_transmit(c, n);
    }
}

/// The full stack: `tools/call getDiagnostics` requests in, their answers out, on one initialized connection.
fn full_stack() {
    let mut server = Server::new(Config::new(AuthToken::from_string(TOKEN.to_string())));
    let now = Instant::now();
    let conn = handshake(&mut server, now);
    let n = 10_000;
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        let body = format!(
            r#"{{"method":"tools/call","params":{{"name":"getDiagnostics","arguments":{{"uri":"file:///home/me/project/src/main.rs"}},"_meta":{{"progressToken":{i},"claudecode/toolUseId":"toolu_01ABCDEF"}}}},"jsonrpc":"2.0","id":{i}}}"#
        );
        let mut f = Vec::new();
        encode_frame(
            &mut f,
            OpCode::Text,
            true,
            Some([5, 6, 7, 8]),
            body.as_bytes(),
        );
        frames.push(f);
    }
    let mut results: Vec<ToolResult> = (0..n).map(|_| ToolResult::text("[]")).collect();
    let mut request_allocs = 0;
    let mut respond_allocs = 0;
    let mut transmit_allocs = 0;
    let round = |server: &mut Server, f: &Vec<u8>, result: ToolResult| {
        let (a, call) = count(|| {
            server.handle_input(conn, f, now);
            match server.poll_event() {
                Some(Event::ToolCall { call, tool }) => {
                    drop(tool);
                    call
                }
                e => panic!("{e:?}"),
            }
        });
        let (b, r) = count(|| server.respond(call, result));
        r.expect("pending");
        let (c, ()) = count(|| {
            while let Some(c) = server.poll_transmit_ready() {
                let len = server.transmit(c).len();
                server.advance_transmit(c, len);
            }
        });
        (a, b, c)
    };
    // Warm up on the first tenth, count the rest.
    let warm = n / 10;
    for (i, f) in frames.iter().enumerate() {
        let result = results.pop().expect("one per call");
        let (a, b, c) = round(&mut server, f, result);
        if i >= warm {
            request_allocs += a;
            respond_allocs += b;
            transmit_allocs += c;
        }
    }
    let counted = (n - warm) as f64;
    let per = (request_allocs + respond_allocs + transmit_allocs) as f64 / counted;
    println!(
        "full stack, tools/call getDiagnostics: {per:.2} allocations per request (request to event {:.2}, \
         respond {:.2}, transmit {:.2}; the ToolResult the host builds is not counted)",
        request_allocs as f64 / counted,
        respond_allocs as f64 / counted,
        transmit_allocs as f64 / counted,
    );
}

/// Heap bytes held per idle, initialized connection: 100 connections, after their buffers settled.
fn idle_connections() {
    let mut config = Config::new(AuthToken::from_string(TOKEN.to_string()));
    config.limits.max_connections = 1000;
    let mut server = Server::new(config);
    let now = Instant::now();
    // One connection first, so that what the server allocates once is not counted per connection.
    let first = handshake(&mut server, now);
    drain(&mut server);
    let before = LIVE.load(Relaxed);
    let n = 100;
    let conns: Vec<ConnectionId> = (0..n).map(|_| handshake(&mut server, now)).collect();
    drain(&mut server);
    let held = (LIVE.load(Relaxed) - before) as f64 / n as f64;
    let engine: usize = conns
        .iter()
        .map(|&c| claude_ide_bridge::hooks::connection_memory(&server, c))
        .sum::<usize>()
        / n;
    println!(
        "idle connection: {:.1} KiB of heap held per initialized connection ({} bytes; the engine's own \
         accounting says {engine} bytes of buffers)",
        held / 1024.0,
        held as i64
    );
    let _ = first;
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, which is fine: it is quick.
    frame_layer();
    full_stack();
    idle_connections();
}
