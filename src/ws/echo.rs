//! A sans-IO WebSocket echo connection (no token, no MCP), for conformance servers such as the
//! runtimes' `echo-*` examples run under the Autobahn suite.

use crate::handshake::{authorize, parse_upgrade, HeadRead, Policy, Rejection, Upgrade};
use crate::limits::Limits;
use crate::ws::{Message, WebSocket};

/// One echo connection: the upgrade (any path, no token, no `Host` check), then every text and
/// binary message sent back; pings are answered and closes echoed by the WebSocket layer.
///
/// ```
/// use claude_ide_bridge::ws::echo::EchoConnection;
/// use claude_ide_bridge::ws::{encode_frame, OpCode};
/// use claude_ide_bridge::Limits;
///
/// let mut c = EchoConnection::new(&Limits::conformance());
/// c.handle_input(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
///     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
/// let n = c.transmit().len();
/// assert!(c.transmit().starts_with(b"HTTP/1.1 101"));
/// c.advance_transmit(n);
/// let mut frame = Vec::new();
/// encode_frame(&mut frame, OpCode::Text, true, Some([1, 2, 3, 4]), b"hi");
/// c.handle_input(&frame);
/// assert_eq!(c.transmit(), b"\x81\x02hi");
/// assert!(!c.should_close());
/// ```
#[derive(Debug)]
pub struct EchoConnection {
    upgrade: Upgrade,
    max_headers: usize,
    ws: WebSocket,
}

impl EchoConnection {
    /// A connection that has just been accepted.
    pub fn new(limits: &Limits) -> Self {
        EchoConnection {
            upgrade: Upgrade::new(limits.max_head_bytes),
            max_headers: limits.max_headers,
            ws: WebSocket::new(limits.ws()),
        }
    }

    /// Bytes arrived from the socket.
    pub fn handle_input(&mut self, mut data: &[u8]) {
        if self.upgrade.is_refused() {
            return;
        }
        if self.upgrade.is_reading() {
            data = match self.upgrade.read_head(data) {
                HeadRead::Partial => return,
                HeadRead::TooLarge => return self.upgrade.refuse(Rejection::HeadersTooLarge),
                HeadRead::Complete(rest) => rest,
            };
            let policy = Policy {
                token: None,
                allowed_origins: &[],
                check_host: false,
                allowed_hosts: &[],
            };
            match parse_upgrade(self.upgrade.head(), self.max_headers)
                .and_then(|req| authorize(&req, &policy).map(|()| req))
            {
                Ok(req) => self.upgrade.accept(&req, None),
                Err(rejection) => return self.upgrade.refuse(rejection),
            }
        }
        if !data.is_empty() {
            self.ws.receiver.receive(data);
        }
        let ws = &mut self.ws;
        // A protocol error ends the loop; its Close is already queued.
        while let Ok(Some(message)) = ws.receiver.poll(&mut ws.sender) {
            let sent = match message {
                Message::Text(t) => ws.sender.send_text(t),
                Message::Binary(b) => ws.sender.send_binary(b),
                Message::Ping(_) | Message::Pong(_) | Message::Close(_) => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
    }

    /// The bytes to write now.
    pub fn transmit(&self) -> &[u8] {
        self.upgrade.transmit(self.ws.sender.output())
    }

    /// `n` bytes of [`EchoConnection::transmit`] were written.
    pub fn advance_transmit(&mut self, n: usize) {
        let n = self.upgrade.advance(n);
        if n > 0 {
            self.ws.sender.advance(n);
        }
    }

    /// True when the socket should be closed: everything was written and the connection is
    /// done (refused, or the WebSocket closed or failed).
    pub fn should_close(&self) -> bool {
        (self.upgrade.is_refused() || self.ws.is_finished()) && self.transmit().is_empty()
    }
}
