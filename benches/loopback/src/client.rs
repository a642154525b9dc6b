//! The load client, the same for every server: a blocking WebSocket client on the core's frame
//! codec, one request at a time or several in flight.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use claude_ide_bridge::ws::{apply_mask, decode_header, encode_frame, OpCode};

use crate::TIMEOUT;

/// The integer id of a JSON-RPC response (`"id":N`), if `text` has one.
pub(crate) fn response_id(text: &str) -> Option<u64> {
    let at = text.find(r#""id":"#)? + 5;
    let digits = text[at..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(&text[at..], |end| &text[at..at + end]);
    digits.parse().ok()
}

pub(crate) const GET_DIAGNOSTICS: &str = r#""method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///home/me/project/src/main.rs"}}"#;

/// The call made of the program (`serve`), whose `getDiagnostics` would ask language servers: a
/// tool it answers from memory, as the bench's hosts answer `getDiagnostics`.
pub(crate) const GET_WORKSPACE_FOLDERS: &str =
    r#""method":"tools/call","params":{"name":"getWorkspaceFolders","arguments":{}}"#;

/// A blocking WebSocket client on the core's frame codec.
pub(crate) struct Client {
    stream: TcpStream,
    /// Received bytes; unread from `head` on.
    buf: Vec<u8>,
    head: usize,
    out: Vec<u8>,
    /// Where reads land (allocated once: zeroing 64 KiB per read would be most of the client's cost).
    chunk: Box<[u8]>,
    next_id: u64,
    mask: u32,
}

impl Client {
    pub(crate) fn connect(port: u16, token: &str) -> io::Result<Client> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Protocol: mcp\r\nX-Claude-Code-Ide-Authorization: {token}\r\n\r\n"
        )?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::other("closed during the upgrade"));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        if !buf.starts_with(b"HTTP/1.1 101") {
            return Err(io::Error::other(
                String::from_utf8_lossy(&buf[..end]).into_owned(),
            ));
        }
        buf.drain(..end);
        Ok(Client {
            stream,
            buf,
            head: 0,
            out: Vec::new(),
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
            next_id: 1,
            mask: 0x9E37_79B9,
        })
    }

    pub(crate) fn send(&mut self, text: &str) -> io::Result<()> {
        self.out.clear();
        self.encode(text);
        self.stream.write_all(&self.out)
    }

    /// Append a masked text frame to `out`.
    fn encode(&mut self, text: &str) {
        self.mask = self
            .mask
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        encode_frame(
            &mut self.out,
            OpCode::Text,
            true,
            Some(self.mask.to_be_bytes()),
            text.as_bytes(),
        );
    }

    /// `n` requests `{"jsonrpc":"2.0","id":N,<members>}`, keeping `in_flight` outstanding: whenever
    /// responses free room, the requests that fill it again go out in one write. Returns round trips
    /// per second and each request's latency (from its write to its response).
    pub(crate) fn pipelined(
        &mut self,
        members: &str,
        n: usize,
        in_flight: usize,
    ) -> io::Result<(f64, Vec<Duration>)> {
        let base = self.next_id;
        let mut sent_at: Vec<Option<Instant>> = vec![None; n];
        let mut lat = Vec::with_capacity(n);
        let (mut sent, mut done) = (0usize, 0usize);
        let start = Instant::now();
        while done < n {
            if sent - done < in_flight && sent < n {
                self.out.clear();
                while sent - done < in_flight && sent < n {
                    let id = base + sent as u64;
                    self.encode(&format!(r#"{{"jsonrpc":"2.0","id":{id},{members}}}"#));
                    sent += 1;
                }
                let now = Instant::now();
                for at in &mut sent_at[done..sent] {
                    at.get_or_insert(now);
                }
                self.stream.write_all(&self.out)?;
            }
            // Wait for one answer, then take every other one already received before refilling the
            // window, so that the refill is one write however many answers came in one read.
            let mut next = Some(self.next_text()?);
            while let Some(text) = next {
                if text.contains(r#""error""#) {
                    return Err(io::Error::other(text));
                }
                if let Some(id) = response_id(&text) {
                    let at = id
                        .checked_sub(base)
                        .and_then(|i| sent_at.get_mut(i as usize))
                        .and_then(Option::take)
                        .ok_or_else(|| io::Error::other(format!("unexpected response {text}")))?;
                    lat.push(at.elapsed());
                    done += 1;
                }
                next = self.buffered_text()?;
            }
            if start.elapsed() > TIMEOUT {
                return Err(io::Error::other("pipelined round trips timed out"));
            }
        }
        self.next_id = base + n as u64;
        Ok((n as f64 / start.elapsed().as_secs_f64(), lat))
    }

    /// Send `{"jsonrpc":"2.0","id":N,<members>}` and wait for the response with that id.
    pub(crate) fn request(&mut self, members: &str) -> io::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},{members}}}"#))?;
        let want = format!(r#""id":{id},"#);
        loop {
            let text = self.next_text()?;
            if text.contains(&want) {
                if text.contains(r#""error""#) {
                    return Err(io::Error::other(text));
                }
                return Ok(());
            }
        }
    }

    /// The next text message already received, if a whole one is (server frames are unmasked and,
    /// here, unfragmented).
    fn buffered_text(&mut self) -> io::Result<Option<String>> {
        loop {
            let avail = &self.buf[self.head..];
            let Some((h, n)) = decode_header(avail).map_err(|e| io::Error::other(e.to_string()))?
            else {
                return Ok(None);
            };
            let len = h.payload_len as usize;
            if avail.len() < n + len {
                return Ok(None);
            }
            let mut payload = avail[n..n + len].to_vec();
            if let Some(m) = h.mask {
                apply_mask(&mut payload, m, 0);
            }
            self.head += n + len;
            match h.opcode {
                1 => {
                    return String::from_utf8(payload)
                        .map(Some)
                        .map_err(io::Error::other)
                }
                8 => return Err(io::Error::other("server closed")),
                _ => continue, // ping and pong: not expected in so short a run
            }
        }
    }

    /// The next text message, reading as needed.
    pub(crate) fn next_text(&mut self) -> io::Result<String> {
        loop {
            if let Some(text) = self.buffered_text()? {
                return Ok(text);
            }
            self.buf.drain(..self.head);
            self.head = 0;
            let r = self.stream.read(&mut self.chunk)?;
            if r == 0 {
                return Err(io::Error::other("connection closed"));
            }
            self.buf.extend_from_slice(&self.chunk[..r]);
        }
    }
}
