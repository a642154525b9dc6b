//! The WebSocket layer (RFC 6455, server role), from just after the `101 Switching Protocols`.
//!
//! Sans-IO: bytes in through [`Receiver::receive`] (or [`Receiver::read_buf`] + [`Receiver::commit`]), messages
//! out of [`WebSocket::poll`], bytes to write in [`Sender::output`]. After each read, poll until `Ok(None)`, then
//! write out what is queued:
//!
//! ```
//! use claude_ide_bridge::ws::{encode_frame, Message, OpCode, WebSocket};
//! use claude_ide_bridge::Limits;
//!
//! let mut ws = WebSocket::new(Limits::default().ws());
//! let mut wire = Vec::new(); // what a client sent
//! encode_frame(&mut wire, OpCode::Text, true, Some([1, 2, 3, 4]), b"hi");
//!
//! ws.receiver.receive(&wire); // or: ws.receiver.read_buf(4096) + socket read + ws.receiver.commit(n)
//! let mut echoed = Vec::new();
//! while let Some(msg) = ws.receiver.poll(&mut ws.sender).expect("peer fault: a Close is queued") {
//!     if let Message::Text(t) = msg {
//!         echoed.push(t.to_owned());
//!     }
//! }
//! for t in &echoed {
//!     ws.sender.send_text(t).unwrap();
//! }
//! assert_eq!(ws.sender.output(), b"\x81\x02hi"); // write this to the socket, then:
//! let n = ws.sender.output().len();
//! ws.sender.advance(n);
//! assert!(!ws.is_finished()); // once true, close the TCP connection after flushing
//! ```
//!
//! Protocol rules (docs/protocol.md, "Framing"): client frames must be masked; RSV bits, reserved opcodes,
//! fragmented or long control frames, stray or missing continuations and non-minimal lengths are close 1002; text
//! that is not UTF-8 is close 1007, detected at the first impossible byte even in the middle of a frame; messages
//! over `max_message_size` or `max_fragments` are close 1009, decided from the declared length before any payload
//! is buffered. Memory stays within the limits plus a small constant, and an idle connection holds a few KiB.

#![warn(missing_docs)]

pub mod echo;
mod error;
mod frame;
mod receiver;
mod sender;
mod utf8;

#[cfg(test)]
mod tests;

pub use error::{is_valid_close_code, ProtocolError, ProtocolErrorKind, SendError};
pub use frame::{
    apply_mask, decode_header, encode_frame, header_len, FrameHeader, OpCode, MAX_CONTROL_PAYLOAD,
    MAX_HEADER_LEN,
};
pub use receiver::Receiver;
pub use sender::Sender;
pub use utf8::str_from_utf8;

/// Capacity a buffer is shrunk back to once a large message has gone through.
const IDLE_CAPACITY: usize = 8 * 1024;

/// Buffers larger than this are shrunk to [`IDLE_CAPACITY`] when they empty between messages.
const SHRINK_ABOVE: usize = 16 * 1024;

/// Limits of the WebSocket layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsLimits {
    /// Largest message across all fragments.
    pub max_message_size: usize,
    /// Most fragments in one message.
    pub max_fragments: usize,
    /// Largest outbound queue.
    pub max_outbound: usize,
}

/// A message (or control frame) received from the peer, borrowed from the receiver's buffers until the next
/// poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A complete text message, valid UTF-8.
    Text(&'a str),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// A Ping; its Pong is already queued.
    Ping(&'a [u8]),
    /// A Pong.
    Pong(&'a [u8]),
    /// A Close, with its code and reason if it had a payload; the echo is already queued unless a Close had been
    /// sent first.
    Close(Option<(u16, &'a str)>),
}

/// One WebSocket connection: the inbound and outbound halves, usable separately.
#[derive(Debug, Clone)]
pub struct WebSocket {
    /// The inbound half.
    pub receiver: Receiver,
    /// The outbound half.
    pub sender: Sender,
}

impl WebSocket {
    /// A connection that has just completed its upgrade.
    pub fn new(limits: WsLimits) -> Self {
        WebSocket {
            receiver: Receiver::new(limits),
            sender: Sender::new(limits.max_outbound),
        }
    }

    /// Process buffered input: `self.receiver.poll(&mut self.sender)`.
    pub fn poll(&mut self) -> Result<Option<Message<'_>>, ProtocolError> {
        self.receiver.poll(&mut self.sender)
    }

    /// True when the TCP connection should be closed once [`Sender::output`] is flushed: Close frames were
    /// both sent and received, or the connection failed or was aborted (for an abort, nothing is left to flush).
    pub fn is_finished(&self) -> bool {
        self.receiver.is_failed()
            || self.sender.is_aborted()
            || (self.sender.close_sent() && self.receiver.close_received())
    }

    /// Bytes held by both halves' buffers.
    pub fn memory(&self) -> usize {
        self.receiver.memory() + self.sender.memory()
    }
}
