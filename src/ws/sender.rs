//! The outbound half: server frames queued into one output buffer.

use super::error::{is_valid_close_code, SendError};
use super::frame::{
    encode_frame, header_len, write_header, OpCode, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN,
};
use super::{IDLE_CAPACITY, SHRINK_ABOVE};

/// Longest header of an unmasked (server) frame.
const MAX_SERVER_HEADER: usize = 10;

/// The outbound half of a connection: frames are appended to one output buffer that the host writes to the
/// socket ([`output`](Self::output), then [`advance`](Self::advance)).
///
/// The queue is bounded by `max_outbound`: a send that would exceed it aborts the connection (the output is
/// discarded, [`is_aborted`](Self::is_aborted) turns true and every later send fails with
/// [`SendError::Closed`]), so a peer that stops reading cannot make the server buffer forever.
#[derive(Debug, Clone)]
pub struct Sender {
    out: Vec<u8>,
    pos: usize,
    max_outbound: usize,
    close_sent: bool,
    aborted: bool,
}

impl Sender {
    /// An empty sender whose queue holds at most `max_outbound` bytes.
    pub fn new(max_outbound: usize) -> Self {
        Sender {
            out: Vec::new(),
            pos: 0,
            max_outbound,
            close_sent: false,
            aborted: false,
        }
    }

    /// Queue a text message in one frame.
    pub fn send_text(&mut self, payload: &str) -> Result<(), SendError> {
        self.send_data(OpCode::Text, payload.as_bytes())
    }

    /// Queue a binary message in one frame.
    pub fn send_binary(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.send_data(OpCode::Binary, payload)
    }

    /// Queue a Ping. A payload longer than 125 bytes is truncated to its first 125 bytes.
    pub fn send_ping(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.push(
            OpCode::Ping,
            &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)],
        )
    }

    /// Queue a Pong. A payload longer than 125 bytes is truncated to its first 125 bytes.
    pub fn send_pong(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.push(
            OpCode::Pong,
            &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)],
        )
    }

    /// Queue a Close with `code` (checked by `debug_assert!` against [`is_valid_close_code`]) and `reason`,
    /// truncated at a character boundary to fit in 123 bytes. Afterwards every send fails with
    /// [`SendError::Closed`].
    pub fn send_close(&mut self, code: u16, reason: &str) -> Result<(), SendError> {
        debug_assert!(is_valid_close_code(code), "invalid close code {code}");
        let mut end = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        self.close_frame(Some((code, &reason.as_bytes()[..end])))
    }

    /// Queue a text frame whose payload `f` appends directly to the output buffer (say, JSON serialised
    /// straight into it). `f` must only append, and must append valid UTF-8.
    ///
    /// The maximum header is reserved before `f` runs and the header written afterwards; if it turns out
    /// shorter the payload is moved back by at most 8 bytes, which only happens for payloads under 64 KiB.
    ///
    /// ```
    /// use claude_ide_bridge::ws::Sender;
    /// let mut tx = Sender::new(1 << 20);
    /// tx.send_text_with(|out| out.extend_from_slice(b"{}")).unwrap();
    /// assert_eq!(tx.output(), b"\x81\x02{}");
    /// ```
    pub fn send_text_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> Result<(), SendError> {
        self.check_open()?;
        self.compact_before_append();
        let start = self.out.len();
        self.out.extend_from_slice(&[0u8; MAX_SERVER_HEADER]);
        f(&mut self.out);
        debug_assert!(
            self.out.len() >= start + MAX_SERVER_HEADER,
            "send_text_with: f must only append"
        );
        if self.out.len() < start + MAX_SERVER_HEADER {
            self.out.resize(start + MAX_SERVER_HEADER, 0);
        }
        let len = self.out.len() - start - MAX_SERVER_HEADER;
        let hl = header_len(len, false);
        if start - self.pos + hl + len > self.max_outbound {
            self.abort();
            return Err(SendError::OutboundFull);
        }
        let mut hdr = [0u8; MAX_HEADER_LEN];
        write_header(&mut hdr, OpCode::Text, true, None, len);
        let shift = MAX_SERVER_HEADER - hl;
        self.out[start + shift..start + MAX_SERVER_HEADER].copy_from_slice(&hdr[..hl]);
        if shift > 0 {
            self.out.copy_within(start + shift.., start);
            self.out.truncate(self.out.len() - shift);
        }
        Ok(())
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        &self.out[self.pos..]
    }

    /// Mark the first `n` bytes of [`output`](Self::output) as written (`n` is clamped to what is queued).
    ///
    /// Compaction is amortised: the buffer is reset when it drains, and otherwise only moved once more has been
    /// written than is left.
    pub fn advance(&mut self, n: usize) {
        self.pos += n.min(self.out.len() - self.pos);
        if self.pos == self.out.len() {
            self.out.clear();
            self.pos = 0;
            if self.out.capacity() > SHRINK_ABOVE {
                self.out.shrink_to(IDLE_CAPACITY);
            }
        }
    }

    /// Number of bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.out.len() - self.pos
    }

    /// True once a Close frame has been queued.
    pub fn close_sent(&self) -> bool {
        self.close_sent
    }

    /// True once the outbound limit was hit: the connection must be dropped without writing anything more.
    pub fn is_aborted(&self) -> bool {
        self.aborted
    }

    /// Bytes held by the output buffer (its capacity), for memory accounting.
    pub fn memory(&self) -> usize {
        self.out.capacity()
    }

    fn check_open(&self) -> Result<(), SendError> {
        if self.close_sent || self.aborted {
            Err(SendError::Closed)
        } else {
            Ok(())
        }
    }

    fn send_data(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.push(opcode, payload)
    }

    /// Queue a Close frame, with `None` for an empty payload. Fails only if closed, aborted or full.
    pub(crate) fn close_frame(&mut self, body: Option<(u16, &[u8])>) -> Result<(), SendError> {
        self.check_open()?;
        let mut payload = [0u8; MAX_CONTROL_PAYLOAD];
        let n = match body {
            None => 0,
            Some((code, reason)) => {
                payload[..2].copy_from_slice(&code.to_be_bytes());
                payload[2..2 + reason.len()].copy_from_slice(reason);
                2 + reason.len()
            }
        };
        self.close_sent = true;
        self.push(OpCode::Close, &payload[..n])
    }

    fn push(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), SendError> {
        if self.queued() + header_len(payload.len(), false) + payload.len() > self.max_outbound {
            self.abort();
            return Err(SendError::OutboundFull);
        }
        self.compact_before_append();
        encode_frame(&mut self.out, opcode, true, None, payload);
        Ok(())
    }

    /// Drop the written prefix when it is at least as long as what remains (amortised O(1) per byte).
    fn compact_before_append(&mut self) {
        if self.pos > 0 && self.pos >= self.out.len() - self.pos {
            self.out.drain(..self.pos);
            self.pos = 0;
        }
    }

    fn abort(&mut self) {
        self.aborted = true;
        self.out = Vec::new();
        self.pos = 0;
    }
}
