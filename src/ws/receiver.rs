//! The inbound half: bytes in, validated messages out.

use super::error::{is_valid_close_code, ProtocolError, ProtocolErrorKind};
use super::frame::{
    apply_mask, decode_header, FrameHeader, OpCode, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN,
};
use super::sender::Sender;
use super::utf8::str_from_utf8;
use super::{Message, WsLimits, IDLE_CAPACITY, SHRINK_ABOVE};
use claude_ide_bridge_text::TextBuf;

/// Smallest size the input buffer grows to.
const MIN_GROW: usize = 4096;

/// Reads larger than this count as this large for [`Receiver::read_hint`].
const MAX_READ_HINT: usize = 64 * 1024;

/// What the payload being received belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    /// An unfragmented Text (`true`) or Binary (`false`) message: kept in the input buffer, unmasked in place.
    /// A Text frame that does not arrive whole is received as a [`Fragment`](Self::Fragment) instead.
    Single(bool),
    /// A frame of a fragmented message, or a text frame arriving over several reads: moved into the message
    /// buffer as it arrives.
    Fragment,
    /// A control frame: waited for whole (at most 125 bytes).
    Control(OpCode),
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Waiting for a frame header at `head`.
    Header,
    /// Receiving a payload of `len` bytes whose first `done` bytes were processed.
    Payload {
        kind: FrameKind,
        mask: [u8; 4],
        len: usize,
        done: usize,
        fin: bool,
    },
}

/// A message found by `step`, as ranges, turned into a borrowed [`Message`] by `poll`.
#[derive(Debug, Clone, Copy)]
enum Ready {
    /// Text in `buf[start..end]`, not validated yet.
    Text(usize, usize),
    /// Binary in `buf[start..end]`.
    Binary(usize, usize),
    /// The text message assembled (and validated) in `text`.
    TextMsg,
    /// The binary message assembled in `msg`.
    BinaryMsg,
    /// Ping payload in `buf[start..end]`.
    Ping(usize, usize),
    /// Pong payload in `buf[start..end]`.
    Pong(usize, usize),
    /// A Close with no payload.
    CloseEmpty,
    /// A Close with a code and its reason in `buf[start..end]`.
    Close(u16, usize, usize),
}

/// The inbound half of a connection.
///
/// Feed bytes with [`receive`](Self::receive) (or [`read_buf`](Self::read_buf) and [`commit`](Self::commit)),
/// then call [`poll`](Self::poll) until it returns `Ok(None)`. Call `poll` after every read: bytes are
/// processed (and the input buffer drained) there, so the memory bound holds for a host that reads in bounded
/// chunks and polls in between. (The one exception, text arriving after the start of its message, goes from
/// `receive` straight into the message; see [`receive`](Self::receive).)
#[derive(Debug, Clone)]
pub struct Receiver {
    limits: WsLimits,
    /// Input bytes; `buf.len()` is the initialised (zeroed or written) part, data is `buf[head..tail]`.
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    state: State,
    /// A fragmented message is in progress.
    in_msg: bool,
    msg_text: bool,
    msg_frags: usize,
    /// The binary message assembled so far.
    msg: Vec<u8>,
    /// The text message assembled so far: unmasked, validated and stored in one pass as it arrives, so it is
    /// a `&str` without a second pass.
    text: TextBuf,
    /// `msg` or `text` was handed out by the last poll and is to be cleared.
    msg_delivered: bool,
    /// An error found by [`receive`](Self::receive) while taking text straight from its input, reported by
    /// the next [`poll`](Self::poll).
    pending_error: Option<ProtocolErrorKind>,
    /// The largest read seen (capped at [`MAX_READ_HINT`]): the input buffer keeps room for one such read when
    /// it shrinks, so that a busy connection does not shrink and regrow it at every read.
    read_hint: usize,
    close_received: bool,
    failed: bool,
}

impl Receiver {
    /// An empty receiver enforcing `limits`.
    pub fn new(limits: WsLimits) -> Self {
        Receiver {
            limits,
            buf: Vec::new(),
            head: 0,
            tail: 0,
            state: State::Header,
            in_msg: false,
            msg_text: false,
            msg_frags: 0,
            msg: Vec::new(),
            text: TextBuf::new(),
            msg_delivered: false,
            pending_error: None,
            read_hint: 0,
            close_received: false,
            failed: false,
        }
    }

    /// Copy received bytes into the input buffer. Ignored once a Close was received or the connection failed.
    ///
    /// One exception: while a text message arrives over several reads and nothing is buffered before it, its
    /// bytes are unmasked, validated and appended to the message straight from `data`, in one pass, without a
    /// copy into the input buffer first. Invalid UTF-8 found that way is reported by the next `poll`.
    pub fn receive(&mut self, mut data: &[u8]) {
        if self.is_done() {
            return;
        }
        self.read_hint = self.read_hint.max(data.len().min(MAX_READ_HINT));
        if let State::Payload {
            kind: FrameKind::Fragment,
            mask,
            len,
            done,
            fin,
        } = self.state
        {
            if self.msg_text && self.head == self.tail && self.pending_error.is_none() {
                let take = data.len().min(len - done);
                self.reserve_text(take, len, done, fin);
                if self.text.push_masked(&data[..take], mask, done).is_err() {
                    self.pending_error = Some(ProtocolErrorKind::InvalidUtf8);
                    return;
                }
                self.state = State::Payload {
                    kind: FrameKind::Fragment,
                    mask,
                    len,
                    done: done + take,
                    fin,
                };
                data = &data[take..];
                if data.is_empty() {
                    return;
                }
            }
        }
        if self.buf.len() - self.tail < data.len() {
            self.compact();
        }
        if self.buf.len() - self.tail >= data.len() {
            self.buf[self.tail..self.tail + data.len()].copy_from_slice(data);
        } else {
            // Grow without zeroing: the new bytes are the data itself.
            self.buf.truncate(self.tail);
            self.reserve_input(data.len());
            self.buf.extend_from_slice(data);
        }
        self.tail += data.len();
    }

    /// A writable slice of at least `min_len` bytes at the end of the input buffer, for the socket to read into;
    /// then call [`commit`](Self::commit) with the number of bytes written.
    ///
    /// The buffer is compacted or grown only when too small. Safe code can only hand out initialised bytes, so
    /// bytes are zeroed, but each byte of capacity only once, just before it is first handed out (while it is
    /// in cache, `min_len` bytes at a time), never the whole capacity on growth. The slice is all the
    /// initialised free space, which may be more than `min_len`. Ask for a few KiB up to 64 KiB: the buffer
    /// shrinks back to 8 KiB between messages.
    pub fn read_buf(&mut self, min_len: usize) -> &mut [u8] {
        self.read_hint = self.read_hint.max(min_len.min(MAX_READ_HINT));
        if self.buf.capacity() - self.tail < min_len {
            self.compact();
            self.reserve_input(min_len);
        }
        let want = self.tail + min_len;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.tail..]
    }

    /// Mark `n` bytes of the slice from [`read_buf`](Self::read_buf) as received (clamped to its length).
    /// Ignored once a Close was received or the connection failed.
    pub fn commit(&mut self, n: usize) {
        debug_assert!(n <= self.buf.len() - self.tail, "commit past read_buf");
        if !self.is_done() {
            self.tail += n.min(self.buf.len() - self.tail);
        }
    }

    /// Process buffered bytes and return the next message, or `Ok(None)` when more bytes are needed.
    ///
    /// An unfragmented Text or Binary message is unmasked in place and borrowed from the input buffer; a
    /// fragmented one is assembled in a message buffer. A Ping queues its Pong on `tx`, a Close queues the echo
    /// (same code, no reason; an empty Close for an empty one) unless a Close was already sent; both are
    /// returned too. A protocol error queues a Close with its code (unless one was already sent), fails the
    /// connection and is returned; later polls return `Ok(None)`, as they do after a Close was received.
    pub fn poll(&mut self, tx: &mut Sender) -> Result<Option<Message<'_>>, ProtocolError> {
        if self.msg_delivered {
            self.msg_delivered = false;
            self.msg.clear();
            if self.msg.capacity() > IDLE_CAPACITY {
                self.msg = Vec::new();
            }
            self.text.clear();
            if self.text.capacity() > IDLE_CAPACITY {
                self.text = TextBuf::new();
            }
        }
        if self.is_done() {
            if self.memory() > 0 {
                self.release();
            }
            return Ok(None);
        }
        let ready = match self.step(tx) {
            Ok(Some(ready)) => ready,
            Ok(None) => {
                self.idle();
                return Ok(None);
            }
            Err(e) => return Err(self.fail(tx, e)),
        };
        // A text frame that arrived whole is validated here, in one pass; one that arrived in pieces was
        // validated piece by piece (to fail fast) as it was appended to `text`.
        let checked = match ready {
            Ready::Text(s, e) => {
                str_from_utf8(&self.buf[s..e]).ok_or(ProtocolErrorKind::InvalidUtf8)
            }
            Ready::TextMsg => self
                .text
                .finish()
                .map_err(|_| ProtocolErrorKind::InvalidUtf8),
            _ => Ok(""),
        };
        let msg = match ready {
            Ready::Text(..) | Ready::TextMsg => match checked {
                Ok(t) => Message::Text(t),
                Err(kind) => {
                    // The field-wise version of `fail`: `self.buf` is borrowed by the other arm.
                    self.failed = true;
                    self.head = self.tail;
                    let e = ProtocolError::from(kind);
                    let _ = tx.close_frame(Some((e.close_code(), e.reason().as_bytes())));
                    return Err(e);
                }
            },
            Ready::Binary(s, e) => Message::Binary(&self.buf[s..e]),
            Ready::BinaryMsg => Message::Binary(&self.msg),
            Ready::Ping(s, e) => Message::Ping(&self.buf[s..e]),
            Ready::Pong(s, e) => Message::Pong(&self.buf[s..e]),
            Ready::CloseEmpty => Message::Close(None),
            // The reason was validated by `step`; an empty reason stands in if it somehow were not.
            Ready::Close(code, s, e) => Message::Close(Some((
                code,
                std::str::from_utf8(&self.buf[s..e]).unwrap_or(""),
            ))),
        };
        Ok(Some(msg))
    }

    /// Bytes currently held: the capacity of the input and message buffers.
    pub fn memory(&self) -> usize {
        self.buf.capacity() + self.msg.capacity() + self.text.capacity()
    }

    /// True once a Close frame was received.
    pub fn close_received(&self) -> bool {
        self.close_received
    }

    /// True once a protocol error failed the connection.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// True while a message is partly received (a fragmented message, or a frame whose payload is incomplete).
    pub fn in_message(&self) -> bool {
        self.in_msg || !matches!(self.state, State::Header)
    }

    /// Payload bytes of the data frame being received that have not arrived yet: reading them
    /// gives no message (0 between frames, and for a control frame).
    pub(crate) fn frame_left(&self) -> usize {
        let buffered = self.tail - self.head;
        match self.state {
            State::Header
            | State::Payload {
                kind: FrameKind::Control(_),
                ..
            } => 0,
            // Kept in the input buffer from `head` as it arrives (`done` of it unmasked).
            State::Payload {
                kind: FrameKind::Single(_),
                len,
                ..
            } => len.saturating_sub(buffered),
            // Moved out of the input buffer as it arrives (`done` of it), the rest buffered.
            State::Payload { len, done, .. } => (len - done).saturating_sub(buffered),
        }
    }

    fn is_done(&self) -> bool {
        self.failed || self.close_received
    }

    fn fail(&mut self, tx: &mut Sender, e: ProtocolError) -> ProtocolError {
        self.failed = true;
        // With the rule broken as its reason (at most 55 bytes, within a Close's 123): a peer
        // told 1002 alone cannot tell which of the framing rules it broke.
        let _ = tx.close_frame(Some((e.close_code(), e.reason().as_bytes())));
        self.release();
        e
    }

    /// Drop every buffer (the connection is over).
    fn release(&mut self) {
        self.buf = Vec::new();
        self.msg = Vec::new();
        self.text = TextBuf::new();
        self.pending_error = None;
        self.head = 0;
        self.tail = 0;
        self.in_msg = false;
        self.state = State::Header;
    }

    /// Called when `poll` needs more bytes: reset an empty input buffer, and shrink a large one that holds
    /// little (unless an unfragmented frame is accumulating in it), so that a fragmented message or an idle
    /// connection does not keep the capacity a large frame needed.
    ///
    /// The buffer keeps room for one read of the largest size seen (up to 64 KiB) plus a quarter for a partial
    /// frame, and only shrinks when it is over twice that: a connection read 16 KiB at a time keeps about
    /// 20 KiB and never shrinks and regrows between reads, one that only ever saw small reads goes back to
    /// 8 KiB.
    fn idle(&mut self) {
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
        let accumulating = matches!(
            self.state,
            State::Payload {
                kind: FrameKind::Single(_),
                ..
            }
        );
        let keep = IDLE_CAPACITY.max(self.read_hint + self.read_hint / 4);
        if self.buf.capacity() > SHRINK_ABOVE.max(2 * keep)
            && self.tail - self.head <= keep / 2
            && !accumulating
        {
            self.compact();
            self.buf.truncate(keep);
            self.buf.shrink_to(keep);
        }
    }

    /// Move unprocessed bytes to the start of the input buffer.
    fn compact(&mut self) {
        if self.head > 0 {
            self.buf.copy_within(self.head..self.tail, 0);
            self.tail -= self.head;
            self.head = 0;
        }
    }

    /// Reserve capacity for `additional` bytes past `tail`: doubling, but capped near the largest frame the
    /// limits allow so that the capacity never overshoots the limit by a factor of two.
    ///
    /// While an unfragmented frame accumulates, growth also stops at the end of that frame (its declared
    /// length, already checked against the limit): a 16 MiB frame ends in a buffer of about 16 MiB, not 32. The
    /// declared length is never reserved up front: each step at most doubles the capacity, which is about
    /// what has actually arrived, so a peer that declares a large frame and sends little gets little memory.
    fn reserve_input(&mut self, additional: usize) {
        let needed = self.tail + additional;
        if self.buf.capacity() >= needed {
            return;
        }
        let mut cap_limit = self
            .limits
            .max_message_size
            .saturating_add(MAX_HEADER_LEN + IDLE_CAPACITY);
        if let State::Payload {
            kind: FrameKind::Single(_),
            len,
            ..
        } = self.state
        {
            // The payload starts at `head` (it is consumed only when complete).
            cap_limit = cap_limit.min(self.head + len);
        }
        let target = needed.max(
            self.buf
                .capacity()
                .saturating_mul(2)
                .max(MIN_GROW)
                .min(cap_limit),
        );
        // `Vec::reserve_exact` takes the room wanted past `len`, which may be short of or past `tail`.
        self.buf.reserve_exact(target - self.buf.len());
    }

    /// Make room in `text` for `take` more bytes of a frame of `len` bytes of which `done` were received.
    fn reserve_text(&mut self, take: usize, len: usize, done: usize, fin: bool) {
        // Where the message ends if this is its last frame (the length was checked against the limit by
        // `check_header`).
        let last_end = fin.then_some(self.text.len() + (len - done));
        let more = self.msg_reserve(self.text.len(), self.text.capacity(), take, last_end);
        self.text.reserve_exact(more);
    }

    /// The room to reserve in a message buffer of length `len` and capacity `cap` for `additional` more bytes:
    /// doubling up to `max_message_size`, and during the last frame of a message up to its end (`last_end`),
    /// so that a 16 MiB message ends in a buffer of about 16 MiB, not 32. (Earlier frames double freely: a
    /// message of many small fragments is still assembled in O(n).)
    fn msg_reserve(
        &self,
        len: usize,
        cap: usize,
        additional: usize,
        last_end: Option<usize>,
    ) -> usize {
        let needed = len + additional;
        if cap >= needed {
            return 0;
        }
        let limit = last_end.map_or(self.limits.max_message_size, |end| {
            end.min(self.limits.max_message_size)
        });
        let target = needed.max(cap.saturating_mul(2).max(256).min(limit));
        target - len
    }

    /// Check a header against the rules of RFC 6455 and the limits, returning what its payload is.
    fn check_header(&mut self, h: &FrameHeader) -> Result<FrameKind, ProtocolErrorKind> {
        use ProtocolErrorKind::*;
        if h.rsv != 0 {
            return Err(ReservedBits);
        }
        let op = OpCode::from_u8(h.opcode).ok_or(UnknownOpcode)?;
        if h.mask.is_none() {
            return Err(Unmasked);
        }
        if op.is_control() {
            if !h.fin {
                return Err(FragmentedControl);
            }
            if h.payload_len > MAX_CONTROL_PAYLOAD as u64 {
                return Err(ControlTooLong);
            }
            return Ok(FrameKind::Control(op));
        }
        let max = self.limits.max_message_size as u64;
        if op == OpCode::Continuation {
            if !self.in_msg {
                return Err(UnexpectedContinuation);
            }
            if self.msg_frags >= self.limits.max_fragments {
                return Err(TooManyFragments);
            }
            // What the message holds so far (for text, with the bytes of an incomplete last character).
            let held = self.msg.len() + self.text.len();
            if h.payload_len > max - held as u64 {
                return Err(MessageTooBig);
            }
            self.msg_frags += 1;
            return Ok(FrameKind::Fragment);
        }
        if self.in_msg {
            return Err(ExpectedContinuation);
        }
        if h.payload_len > max {
            return Err(MessageTooBig);
        }
        let text = op == OpCode::Text;
        if h.fin {
            return Ok(FrameKind::Single(text));
        }
        if self.limits.max_fragments == 0 {
            return Err(TooManyFragments);
        }
        self.in_msg = true;
        self.msg_text = text;
        self.msg_frags = 1;
        self.msg.clear();
        self.text.clear();
        Ok(FrameKind::Fragment)
    }

    /// Process buffered bytes until a message is ready (`Some`) or more bytes are needed (`None`).
    fn step(&mut self, tx: &mut Sender) -> Result<Option<Ready>, ProtocolError> {
        if let Some(kind) = self.pending_error.take() {
            return Err(kind.into());
        }
        loop {
            let State::Payload {
                kind,
                mask,
                len,
                done,
                fin,
            } = self.state
            else {
                let Some((h, n)) = decode_header(&self.buf[self.head..self.tail])? else {
                    return Ok(None);
                };
                let kind = self.check_header(&h)?;
                self.head += n;
                // The common case first: a whole unfragmented message already in the buffer is
                // unmasked and returned at once, without going through the payload state.
                if let FrameKind::Single(text) = kind {
                    let (s, len) = (self.head, h.payload_len as usize);
                    if self.tail - s >= len {
                        apply_mask(&mut self.buf[s..s + len], h.mask.unwrap_or([0; 4]), 0);
                        self.head += len;
                        return Ok(Some(if text {
                            Ready::Text(s, s + len)
                        } else {
                            Ready::Binary(s, s + len)
                        }));
                    }
                }
                self.state = State::Payload {
                    kind,
                    mask: h.mask.unwrap_or([0; 4]),
                    // `check_header` bounded it by `max_message_size` or 125, so it fits a usize.
                    len: h.payload_len as usize,
                    done: 0,
                    fin: h.fin,
                };
                continue;
            };
            let avail = self.tail - self.head;
            match kind {
                FrameKind::Control(op) => {
                    if avail < len {
                        return Ok(None);
                    }
                    let (s, e) = (self.head, self.head + len);
                    apply_mask(&mut self.buf[s..e], mask, 0);
                    self.head = e;
                    self.state = State::Header;
                    return self.control(op, s, e, tx).map(Some);
                }
                FrameKind::Single(text) => {
                    let s = self.head;
                    if done == 0 && avail >= len {
                        // The whole frame is here: unmask in one pass; `poll` validates text in one pass.
                        apply_mask(&mut self.buf[s..s + len], mask, 0);
                        self.head += len;
                        self.state = State::Header;
                        return Ok(Some(if text {
                            Ready::Text(s, s + len)
                        } else {
                            Ready::Binary(s, s + len)
                        }));
                    }
                    if text {
                        // Text arriving over several reads: validated and appended to `text` piece by piece,
                        // as a one-fragment message. Each piece is unmasked and validated while in cache,
                        // the input buffer stays the size of a read, and the whole is never validated twice.
                        self.in_msg = true;
                        self.msg_text = true;
                        self.msg_frags = 1;
                        self.text.clear();
                        self.state = State::Payload {
                            kind: FrameKind::Fragment,
                            mask,
                            len,
                            done,
                            fin,
                        };
                        continue;
                    }
                    // Binary: accumulates in the input buffer, unmasked as it arrives.
                    let upto = avail.min(len);
                    if upto > done {
                        apply_mask(&mut self.buf[s + done..s + upto], mask, done);
                        self.state = State::Payload {
                            kind,
                            mask,
                            len,
                            done: upto,
                            fin,
                        };
                    }
                    if upto < len {
                        return Ok(None);
                    }
                    self.head += len;
                    self.state = State::Header;
                    return Ok(Some(Ready::Binary(s, s + len)));
                }
                FrameKind::Fragment => {
                    let take = avail.min(len - done);
                    if take > 0 {
                        let s = self.head;
                        if self.msg_text {
                            // Unmasked, validated and stored in one pass.
                            self.reserve_text(take, len, done, fin);
                            self.text
                                .push_masked(&self.buf[s..s + take], mask, done)
                                .map_err(|_| ProtocolErrorKind::InvalidUtf8)?;
                        } else {
                            apply_mask(&mut self.buf[s..s + take], mask, done);
                            // Where the message ends if this is its last frame (the length was checked
                            // against the limit by `check_header`).
                            let last_end = fin.then_some(self.msg.len() + (len - done));
                            let more = self.msg_reserve(
                                self.msg.len(),
                                self.msg.capacity(),
                                take,
                                last_end,
                            );
                            self.msg.reserve_exact(more);
                            self.msg.extend_from_slice(&self.buf[s..s + take]);
                        }
                        self.head += take;
                    }
                    let done = done + take;
                    if done < len {
                        self.state = State::Payload {
                            kind,
                            mask,
                            len,
                            done,
                            fin,
                        };
                        return Ok(None);
                    }
                    self.state = State::Header;
                    if fin {
                        if self.msg_text && self.text.is_incomplete() {
                            return Err(ProtocolErrorKind::InvalidUtf8.into());
                        }
                        self.in_msg = false;
                        self.msg_delivered = true;
                        return Ok(Some(if self.msg_text {
                            Ready::TextMsg
                        } else {
                            Ready::BinaryMsg
                        }));
                    }
                }
            }
        }
    }

    /// Handle a complete, unmasked control frame in `buf[s..e]`.
    fn control(
        &mut self,
        op: OpCode,
        s: usize,
        e: usize,
        tx: &mut Sender,
    ) -> Result<Ready, ProtocolError> {
        match op {
            OpCode::Ping => {
                if !tx.close_sent() && !tx.is_aborted() {
                    let _ = tx.send_pong(&self.buf[s..e]);
                }
                Ok(Ready::Ping(s, e))
            }
            OpCode::Pong => Ok(Ready::Pong(s, e)),
            _ => {
                let ready = match e - s {
                    0 => Ready::CloseEmpty,
                    1 => return Err(ProtocolErrorKind::InvalidClosePayload.into()),
                    _ => {
                        let code = u16::from_be_bytes([self.buf[s], self.buf[s + 1]]);
                        if !is_valid_close_code(code) {
                            return Err(ProtocolErrorKind::InvalidCloseCode.into());
                        }
                        if std::str::from_utf8(&self.buf[s + 2..e]).is_err() {
                            return Err(ProtocolErrorKind::InvalidCloseReason.into());
                        }
                        Ready::Close(code, s + 2, e)
                    }
                };
                let echo = match ready {
                    Ready::Close(code, _, _) => Some((code, &[][..])),
                    _ => None,
                };
                let _ = tx.close_frame(echo);
                self.close_received = true;
                // Further input is ignored; the buffers are kept only for the borrow being returned.
                self.head = self.tail;
                self.in_msg = false;
                Ok(ready)
            }
        }
    }
}
