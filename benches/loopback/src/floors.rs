//! The floors the servers are measured against: a TCP echo, the bare WebSocket server (`bare-ws`,
//! with the calibration variants `bare-ws-wide` and `bare-ws-narrow`) and the same bare server on
//! smol's reactor (`bare-ws-smol`); and, between the floor and the runtimes, the engine driven
//! with no runtime (`engine-alone`, calibration).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Instant;

use claude_ide_bridge::ws::{apply_mask, decode_header, encode_frame, OpCode};
use claude_ide_bridge::{AuthToken, Config, Event, ToolResult};

use crate::client::response_id;
use crate::servers::Server;

/// The floor: a thread that writes back whatever it reads, after a `101` for the upgrade. The client's
/// masked frames come back as they were sent; it unmasks them and finds its id.
pub(crate) fn start_echo() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let _ = s.set_nodelay(true);
        let mut buf = [0u8; 64 * 1024];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
    Server::floor(port)
}

/// The floor of a WebSocket server: a thread that does the least a server must do for a call, with
/// nothing else (no MCP session, no tools, no notifications, no limits): it answers the upgrade
/// (`101` with the `Sec-WebSocket-Accept` of the client's key), then for each masked text frame
/// read, takes the request's id from the unmasked payload and writes one fixed `getDiagnostics`
/// answer (the same bytes as the real servers' `[]`) with that id; the answers to the frames of one
/// read leave in one write. The sequential round trips through the runtimes are measured against
/// it (item 8 of issue 13 asks for at least 0.9× of its calls/s).
pub(crate) fn start_bare_ws(extra: Extra) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let _ = bare_ws_session(s, extra);
        }
    });
    Server::floor(port)
}

fn bare_ws_session(mut s: TcpStream, extra: Extra) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut bare = Bare::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        let out = bare.input(&chunk[..n])?;
        extra.run(n as u64);
        if !out.is_empty() {
            s.write_all(out)?;
        }
    }
}

/// Work added to the bare server on every read, to tell what the sequential round trip follows
/// (BENCHMARKS.md, "Item 8, fourth session of 2026-11-23"): `Wide` runs 512 distinct small
/// functions (about 5 k instructions over about 28 KiB of code more than `bare-ws`), `Narrow` the
/// same shape of function 512 times with its constant passed at run time (more instructions, in
/// one small function). Neither is in the default list.
#[derive(Clone, Copy)]
pub(crate) enum Extra {
    None,
    Wide,
    Narrow,
}

impl Extra {
    fn run(self, seed: u64) {
        let mut x = seed;
        match self {
            Extra::None => return,
            Extra::Wide => {
                // 2^9 calls of step::<K>, K from 512 to 1023: each K its own copy of the code.
                macro_rules! steps {
                    ($k:expr, []) => { x = step::<{ $k }>(x); };
                    ($k:expr, [_ $($more:tt)*]) => {
                        steps!($k * 2, [$($more)*]);
                        steps!($k * 2 + 1, [$($more)*]);
                    };
                }
                steps!(1, [_ _ _ _ _ _ _ _ _]);
            }
            Extra::Narrow => {
                for k in 512..1024 {
                    x = step_at(x, std::hint::black_box(k));
                }
            }
        }
        std::hint::black_box(x);
    }
}

/// One step of [`Extra::Wide`]; `black_box` keeps every copy and its result.
#[inline(never)]
fn step<const K: u64>(x: u64) -> u64 {
    mix(x, K)
}

/// [`step`] with `k` known only at run time: the one function of [`Extra::Narrow`].
#[inline(never)]
fn step_at(x: u64, k: u64) -> u64 {
    mix(x, k)
}

/// The work of one step, inlined into each: with `k` a constant in [`step`], a variable in
/// [`step_at`].
#[inline(always)]
fn mix(x: u64, k: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(k | 1).rotate_left((k % 61) as u32 + 1) ^ (k * 0x9E37_79B9))
}

/// The same bare server on smol's reactor (async-io), as the smol runtime reads: a read first,
/// a wait for readiness only when it would block. What any server on that reactor pays per call
/// on this machine: the floor of the smol runtime.
pub(crate) fn start_bare_ws_smol() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        smol::block_on(async move {
            let listener = smol::Async::new(listener)?;
            let (s, _) = listener.accept().await?;
            s.get_ref().set_nodelay(true)?;
            let mut bare = Bare::default();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match s.get_ref().read(&mut chunk) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        s.readable().await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let out = bare.input(&chunk[..n])?;
                if !out.is_empty() {
                    smol::io::AsyncWriteExt::write_all(&mut &s, out).await?;
                }
            }
        })
        .unwrap_or_else(|e: io::Error| eprintln!("bare-ws-smol: {e}"))
    });
    Server::floor(port)
}

/// What a bare WebSocket server does with the bytes it reads: the upgrade, then a fixed answer to
/// each request.
#[derive(Default)]
struct Bare {
    upgraded: bool,
    buf: Vec<u8>,
    payload: Vec<u8>,
    out: Vec<u8>,
}

impl Bare {
    /// Bytes read; what to write back (maybe nothing).
    fn input(&mut self, bytes: &[u8]) -> io::Result<&[u8]> {
        use base64::Engine;
        use sha1::Digest;
        self.buf.extend_from_slice(bytes);
        self.out.clear();
        if !self.upgraded {
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(&self.out);
            };
            let head = String::from_utf8_lossy(&self.buf[..end + 4]).into_owned();
            let key = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("sec-websocket-key")
                        .then(|| value.trim())
                })
                .unwrap_or_default();
            let digest = sha1::Sha1::digest(format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11"));
            let accept = base64::engine::general_purpose::STANDARD.encode(digest);
            write!(
                self.out,
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"
            )?;
            self.buf.drain(..end + 4);
            self.upgraded = true;
        }
        let mut at = 0;
        while let Some((h, n)) =
            decode_header(&self.buf[at..]).map_err(|e| io::Error::other(e.to_string()))?
        {
            let len = h.payload_len as usize;
            if self.buf.len() - at < n + len {
                break;
            }
            self.payload.clear();
            self.payload
                .extend_from_slice(&self.buf[at + n..at + n + len]);
            if let Some(m) = h.mask {
                apply_mask(&mut self.payload, m, 0);
            }
            at += n + len;
            // Requests get the fixed answer; notifications (no id) none.
            if let Some(id) = std::str::from_utf8(&self.payload)
                .ok()
                .and_then(response_id)
            {
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"[]"}}]}}}}"#
                );
                encode_frame(&mut self.out, OpCode::Text, true, None, reply.as_bytes());
            }
        }
        self.buf.drain(..at);
        Ok(&self.out)
    }
}

/// Calibration, not in the default list (`engine-alone`): the engine with no runtime, driven by
/// one blocking thread as the least an embedder could write: read, [`Server::handle_input`],
/// answer each tool call at once with the runtimes' answer (`[]`), write what the engine has to
/// send, ask for the next deadline. No lock, no handler delivery, no writer: between `bare-ws`
/// and `threads`, it tells the engine's share of the gap from the runtime's (BENCHMARKS.md, "Item
/// 8, second session of 2026-11-24").
///
/// [`Server::handle_input`]: claude_ide_bridge::Server::handle_input
pub(crate) fn start_engine_alone() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let _ = engine_session(s);
        }
    });
    Server::floor(port)
}

fn engine_session(mut s: TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let token = AuthToken::from_string(crate::TOKEN.to_string());
    let mut server = claude_ide_bridge::Server::new(Config::new(token));
    let conn = server.accept(Instant::now());
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        server.handle_input(conn, &chunk[..n], Instant::now());
        while let Some(event) = server.poll_event() {
            if let Event::ToolCall { call, .. } = event {
                let _ = server.respond(call, ToolResult::text("[]"));
            }
        }
        while server.poll_transmit_ready().is_some() {}
        let out = server.transmit(conn);
        if !out.is_empty() {
            let n = out.len();
            s.write_all(out)?;
            server.advance_transmit(conn, n);
        }
        if server.should_close(conn) {
            return Ok(());
        }
        // A real embedder sets its read timeout from this; the bench's calls never reach it.
        std::hint::black_box(server.poll_timeout());
    }
}
