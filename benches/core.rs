//! Core benchmarks (in memory, no sockets): the frame layer against tungstenite and memcpy, the
//! full stack against bare serde_json, and outbound encoding. Ratios within one run are what count.

use claude_ide_bridge::ws::{apply_mask, encode_frame, str_from_utf8, OpCode, WebSocket, WsLimits};
use claude_ide_bridge::{AuthToken, Config, Event, Server, ToolCall, ToolResult};
use claude_ide_bridge::{Notification, SelectionChanged};
use claude_ide_bridge::{OpenDiffArgs, Position, Selection};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde::Deserialize;
use std::hint::black_box;
use std::io::{self, Read, Write};
use std::time::Instant;

const BIG: usize = 16 * 1024 * 1024;

fn limits() -> WsLimits {
    WsLimits {
        max_message_size: 64 * 1024 * 1024,
        max_fragments: 65_536,
        max_outbound: 64 * 1024 * 1024,
    }
}

/// 100,000 masked client text frames of 20-400 bytes, a mix like real traffic.
fn small_stream() -> (Vec<u8>, usize) {
    let samples = [
        r#"{"jsonrpc":"2.0","id":12,"method":"ping"}"#.to_string(),
        r#"{"method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///home/me/project/src/main.rs"},"_meta":{"progressToken":12,"claudecode/toolUseId":"toolu_01ABCDEF"}},"jsonrpc":"2.0","id":12}"#.to_string(),
        format!(
            r#"{{"jsonrpc":"2.0","method":"selection_changed","params":{{"text":"{}","filePath":"/home/me/project/src/lib.rs","fileUrl":"file:///home/me/project/src/lib.rs","selection":{{"start":{{"line":10,"character":0}},"end":{{"line":14,"character":3}},"isEmpty":false}}}}}}"#,
            "fn main() { println!(\\\"hi\\\"); } ".repeat(4)
        ),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ];
    let mut out = Vec::new();
    let mut payload = 0;
    for i in 0..100_000u32 {
        let s = &samples[i as usize % samples.len()];
        let mask = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
        encode_frame(&mut out, OpCode::Text, true, Some(mask), s.as_bytes());
        payload += s.len();
    }
    (out, payload)
}

fn large_stream() -> Vec<u8> {
    let line = "let x = \"some code\"; // ünïcödé\n";
    let text = line.repeat(BIG / line.len());
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        OpCode::Text,
        true,
        Some([0x11, 0x22, 0x33, 0x44]),
        text.as_bytes(),
    );
    out
}

/// A Read+Write stream over a byte slice for tungstenite.
struct Mem<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Read for Mem<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.input.len() - self.pos);
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        buf[..n].copy_from_slice(&self.input[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Mem<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tungstenite_config() -> tungstenite::protocol::WebSocketConfig {
    tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20))
}

/// Decode with tungstenite; returns total text bytes.
fn tungstenite_decode(bytes: &[u8]) -> usize {
    let mut ws = tungstenite::WebSocket::from_raw_socket(
        Mem {
            input: bytes,
            pos: 0,
        },
        tungstenite::protocol::Role::Server,
        Some(tungstenite_config()),
    );
    let mut total = 0;
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Text(t)) => total += t.len(),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    total
}

/// Decode with ours, handing over the bytes in 64 KiB reads with `receive`, as the runtimes do (they pass
/// each read of the socket to `Server::handle_input`); with `zero_copy`, through `read_buf` and `commit`
/// instead, where the bench's copy into the slice stands for the socket's read into it, so one more copy
/// of the whole input is timed.
fn ours_decode_with(bytes: &[u8], zero_copy: bool) -> usize {
    let mut ws = WebSocket::new(limits());
    let mut total = 0;
    for chunk in bytes.chunks(64 * 1024) {
        if zero_copy {
            let buf = ws.receiver.read_buf(chunk.len());
            buf[..chunk.len()].copy_from_slice(chunk);
            ws.receiver.commit(chunk.len());
        } else {
            ws.receiver.receive(chunk);
        }
        while let Ok(Some(m)) = ws.poll() {
            if let claude_ide_bridge::ws::Message::Text(t) = m {
                total += t.len();
            }
        }
    }
    total
}

fn ours_decode(bytes: &[u8]) -> usize {
    ours_decode_with(bytes, false)
}

fn ours_decode_read_buf(bytes: &[u8]) -> usize {
    ours_decode_with(bytes, true)
}

fn frame_decode(c: &mut Criterion) {
    let (small, payload) = small_stream();
    assert_eq!(ours_decode(&small), payload);
    assert_eq!(tungstenite_decode(&small), payload);
    let mut g = c.benchmark_group("frame_decode");
    g.throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function("ours/small", |b| b.iter(|| black_box(ours_decode(&small))));
    g.bench_function("tungstenite/small", |b| {
        b.iter(|| black_box(tungstenite_decode(&small)))
    });
    let large = large_stream();
    let big = large.len() - 14;
    assert_eq!(ours_decode(&large), big);
    assert_eq!(ours_decode_read_buf(&large), big);
    assert_eq!(tungstenite_decode(&large), big);
    g.throughput(Throughput::Bytes(large.len() as u64));
    g.sample_size(20);
    g.bench_function("ours/large", |b| b.iter(|| black_box(ours_decode(&large))));
    g.bench_function("tungstenite/large", |b| {
        b.iter(|| black_box(tungstenite_decode(&large)))
    });
    g.bench_function("ours_read_buf/large", |b| {
        b.iter(|| black_box(ours_decode_read_buf(&large)))
    });
    let mut dst = vec![0u8; large.len()];
    g.bench_function("memcpy/large", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&large));
            black_box(dst[dst.len() / 2])
        })
    });
    // Not targets, the parts of the work, to read the ratio to memcpy against: UTF-8 validation of
    // the unmasked payload alone (SIMD, whole), and the least any decoder that copies the bytes
    // once must do: copy into a warm buffer, unmask, validate once.
    let mut text = large[14..].to_vec();
    apply_mask(&mut text, [0x11, 0x22, 0x33, 0x44], 0);
    g.bench_function("utf8_only/large", |b| {
        b.iter(|| black_box(str_from_utf8(black_box(&text)).map(str::len)))
    });
    g.bench_function("copy_unmask_utf8/large", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&large));
            apply_mask(&mut dst[14..], [0x11, 0x22, 0x33, 0x44], 0);
            black_box(str_from_utf8(&dst[14..]).map(str::len))
        })
    });
    g.finish();
}

const TOKEN: &str = "bench-token";

fn initialized_server() -> (Server, claude_ide_bridge::ConnectionId, Instant) {
    let mut config = Config::new(AuthToken::from_string(TOKEN.to_string()));
    config.limits.max_message_size = 64 << 20;
    let mut server = Server::new(config);
    let now = Instant::now();
    let conn = server.accept(now);
    let req = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: mcp\r\nX-Claude-Code-Ide-Authorization: {TOKEN}\r\n\r\n"
    );
    server.handle_input(conn, req.as_bytes(), now);
    let mut f = Vec::new();
    encode_frame(&mut f, OpCode::Text, true, Some([1, 2, 3, 4]), br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#);
    encode_frame(
        &mut f,
        OpCode::Text,
        true,
        Some([1, 2, 3, 4]),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    server.handle_input(conn, &f, now);
    drain(&mut server, conn);
    (server, conn, now)
}

fn drain(server: &mut Server, conn: claude_ide_bridge::ConnectionId) {
    while server.poll_event().is_some() {}
    let n = server.transmit(conn).len();
    server.advance_transmit(conn, n);
    while server.poll_transmit_ready().is_some() {}
}

/// A `tools/call openDiff` with members in the order the real client sends them.
fn open_diff_body(size: usize) -> String {
    let contents: String = "fn main() {\n    println!(\"hello\");\n}\n"
        .chars()
        .cycle()
        .take(size)
        .collect();
    let contents = serde_json::to_string(&contents).unwrap();
    format!(
        r#"{{"method":"tools/call","params":{{"name":"openDiff","arguments":{{"old_file_path":"/home/me/project/src/main.rs","new_file_path":"/home/me/project/src/main.rs","new_file_contents":{contents},"tab_name":"✻ [Claude Code] main.rs (4f025d) ⧉"}},"_meta":{{"progressToken":7,"claudecode/toolUseId":"toolu_01"}}}},"jsonrpc":"2.0","id":7}}"#
    )
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct FloorRequest {
    jsonrpc: String,
    id: u64,
    method: String,
    params: FloorParams,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct FloorParams {
    name: String,
    arguments: OpenDiffArgs,
}

fn full_stack(c: &mut Criterion) {
    let mut g = c.benchmark_group("full_stack");
    for (label, size) in [("opendiff_1k", 1024), ("opendiff_1m", 1 << 20)] {
        let body = open_diff_body(size);
        let mut frame = Vec::new();
        encode_frame(
            &mut frame,
            OpCode::Text,
            true,
            Some([9, 8, 7, 6]),
            body.as_bytes(),
        );
        g.throughput(Throughput::Bytes(body.len() as u64));
        // A request on a live connection (it has answered one before): each request is timed
        // alone, from the frame's bytes to the typed event; answering it, so that calls do not
        // pile up, is not timed. The two clock reads per request (about 50 ns here) are counted
        // against ours.
        g.bench_function(format!("ours/{label}"), |b| {
            let (mut server, conn, now) = initialized_server();
            let one = |server: &mut Server| {
                let t = Instant::now();
                server.handle_input(conn, &frame, now);
                let event = server.poll_event();
                let took = t.elapsed();
                match event {
                    Some(Event::ToolCall {
                        call,
                        tool: ToolCall::OpenDiff(a),
                    }) => {
                        black_box(a.new_file_contents.len());
                        server.respond(call, ToolResult::text("")).unwrap();
                    }
                    e => panic!("{e:?}"),
                }
                drain(server, conn);
                took
            };
            one(&mut server);
            b.iter_custom(|iters| (0..iters).map(|_| one(&mut server)).sum())
        });
        // The same request as the first on each of thousands of fresh connections, set up in
        // batches beforehand (their state is out of cache): this id's method until 2026-11-22.
        g.bench_function(format!("ours_fresh/{label}"), |b| {
            b.iter_batched_ref(
                initialized_server,
                |(server, conn, now)| {
                    server.handle_input(*conn, &frame, *now);
                    match server.poll_event() {
                        Some(Event::ToolCall {
                            tool: ToolCall::OpenDiff(a),
                            ..
                        }) => black_box(a.new_file_contents.len()),
                        e => panic!("{e:?}"),
                    }
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("serde_json/{label}"), |b| {
            b.iter(|| {
                let r: FloorRequest = serde_json::from_str(black_box(&body)).unwrap();
                black_box(r.params.arguments.new_file_contents.len())
            })
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let n = Notification::SelectionChanged(SelectionChanged {
        text: "fn main() {}".into(),
        file_path: "/home/me/project/src/main.rs".into(),
        file_url: "file:///home/me/project/src/main.rs".into(),
        selection: Selection::new(Position::new(1, 0), Position::new(1, 12)),
    });
    let mut json = Vec::new();
    n.write_json(&mut json);
    let text = String::from_utf8(json).unwrap();
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(1));
    let mut tx = claude_ide_bridge::ws::Sender::new(usize::MAX);
    g.bench_function("ours/selection_changed", |b| {
        b.iter(|| {
            tx.send_text_with(|out| n.write_json(out)).unwrap();
            let len = tx.output().len();
            tx.advance(len);
            black_box(len)
        })
    });
    let mut out = Vec::new();
    g.bench_function("tungstenite/selection_changed", |b| {
        b.iter(|| {
            let mut v = Vec::with_capacity(text.len());
            n.write_json(&mut v);
            let v = String::from_utf8(v).unwrap();
            let frame = tungstenite::protocol::frame::Frame::message(
                tungstenite::Message::text(v).into_data(),
                tungstenite::protocol::frame::coding::OpCode::Data(
                    tungstenite::protocol::frame::coding::Data::Text,
                ),
                true,
            );
            out.clear();
            frame.format(&mut out).unwrap();
            black_box(out.len())
        })
    });
    g.finish();
    let _ = ToolResult::ok();
}

criterion_group!(benches, frame_decode, full_stack, encode);
criterion_main!(benches);
