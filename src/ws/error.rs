//! Errors of the WebSocket layer: peer faults ([`ProtocolError`]) and sends that cannot happen ([`SendError`]).

use std::fmt;

/// Whether `code` may appear in a Close frame on the wire (RFC 6455 §7.4).
///
/// Accepted: 1000-1003, 1007-1014 and 3000-4999. Rejected: below 1000, 1004-1006 and 1015 (reserved, never
/// sent), 1016-2999 (unassigned) and 5000 upwards.
///
/// ```
/// use claude_ide_bridge::ws::is_valid_close_code;
/// assert!(is_valid_close_code(1000) && is_valid_close_code(4999));
/// assert!(!is_valid_close_code(1005) && !is_valid_close_code(2000));
/// ```
pub fn is_valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// What exactly the peer did wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolErrorKind {
    /// A client frame without a mask (1002).
    Unmasked,
    /// An RSV bit set with no extension negotiated (1002).
    ReservedBits,
    /// A reserved opcode (1002).
    UnknownOpcode,
    /// A control frame without FIN (1002).
    FragmentedControl,
    /// A control frame with more than 125 payload bytes (1002).
    ControlTooLong,
    /// A continuation frame with no fragmented message in progress (1002).
    UnexpectedContinuation,
    /// A new Text or Binary frame while a fragmented message is in progress (1002).
    ExpectedContinuation,
    /// A length not in its shortest encoding (1002).
    NonMinimalLength,
    /// A 64-bit length with its most significant bit set (1002).
    LengthMsbSet,
    /// A Close frame with a one-byte payload (1002).
    InvalidClosePayload,
    /// A Close frame with a code that may not be sent (1002).
    InvalidCloseCode,
    /// A text message that is not UTF-8 (1007).
    InvalidUtf8,
    /// A Close reason that is not UTF-8 (1007).
    InvalidCloseReason,
    /// A message larger than `max_message_size` (1009).
    MessageTooBig,
    /// A message in more than `max_fragments` frames (1009).
    TooManyFragments,
}

/// A fault of the peer; the connection fails with the close code [`close_code`](Self::close_code).
///
/// ```
/// use claude_ide_bridge::ws::{ProtocolError, ProtocolErrorKind};
/// let e = ProtocolError::from(ProtocolErrorKind::InvalidUtf8);
/// assert_eq!(e.close_code(), 1007);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolError {
    kind: ProtocolErrorKind,
}

impl ProtocolError {
    /// What went wrong.
    pub fn kind(&self) -> ProtocolErrorKind {
        self.kind
    }

    /// The close code sent to the peer: 1002 protocol error, 1007 invalid UTF-8, 1009 too big.
    pub fn close_code(&self) -> u16 {
        use ProtocolErrorKind::*;
        match self.kind {
            InvalidUtf8 | InvalidCloseReason => 1007,
            MessageTooBig | TooManyFragments => 1009,
            Unmasked
            | ReservedBits
            | UnknownOpcode
            | FragmentedControl
            | ControlTooLong
            | UnexpectedContinuation
            | ExpectedContinuation
            | NonMinimalLength
            | LengthMsbSet
            | InvalidClosePayload
            | InvalidCloseCode => 1002,
        }
    }

    /// A short human-readable description.
    pub fn reason(&self) -> &'static str {
        use ProtocolErrorKind::*;
        match self.kind {
            Unmasked => "client frame not masked",
            ReservedBits => "reserved bits set",
            UnknownOpcode => "reserved opcode",
            FragmentedControl => "fragmented control frame",
            ControlTooLong => "control frame payload over 125 bytes",
            UnexpectedContinuation => "continuation frame without a message in progress",
            ExpectedContinuation => "new data frame inside a fragmented message",
            NonMinimalLength => "payload length not minimally encoded",
            LengthMsbSet => "64-bit payload length with the most significant bit set",
            InvalidClosePayload => "close frame with a one-byte payload",
            InvalidCloseCode => "invalid close code",
            InvalidUtf8 => "text message is not valid UTF-8",
            InvalidCloseReason => "close reason is not valid UTF-8",
            MessageTooBig => "message too big",
            TooManyFragments => "too many fragments",
        }
    }
}

impl From<ProtocolErrorKind> for ProtocolError {
    fn from(kind: ProtocolErrorKind) -> Self {
        ProtocolError { kind }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (close {})", self.reason(), self.close_code())
    }
}

impl std::error::Error for ProtocolError {}

/// A frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendError {
    /// A Close was already sent, or the connection failed or was aborted.
    Closed,
    /// The frame would have taken the outbound queue past `max_outbound`: the connection is now aborted and its
    /// queued output discarded.
    OutboundFull,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Closed => "connection closed",
            SendError::OutboundFull => "outbound queue full: connection aborted",
        })
    }
}

impl std::error::Error for SendError {}
