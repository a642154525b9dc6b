//! Frame headers, masking and frame encoding (RFC 6455 §5.2-§5.3).

use super::error::{ProtocolError, ProtocolErrorKind};

/// XOR with the masking key, from the text crate (which also unmasks text in its one-pass loop).
pub use claude_ide_bridge_text::apply_mask;

/// Longest possible frame header: 2 bytes, an 8-byte extended length and a 4-byte mask key.
pub const MAX_HEADER_LEN: usize = 14;

/// Largest payload of a control frame (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// A frame opcode (RFC 6455 §5.2). Reserved opcodes have no variant: [`OpCode::from_u8`] rejects them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpCode {
    /// `0x0`: a continuation of a fragmented message.
    Continuation,
    /// `0x1`: the first frame of a text message.
    Text,
    /// `0x2`: the first frame of a binary message.
    Binary,
    /// `0x8`: connection close.
    Close,
    /// `0x9`: ping.
    Ping,
    /// `0xA`: pong.
    Pong,
}

impl OpCode {
    /// The opcode for the 4-bit value `v`, or `None` for reserved values (3-7, 0xB-0xF) and values above 0xF.
    pub fn from_u8(v: u8) -> Option<OpCode> {
        match v {
            0x0 => Some(OpCode::Continuation),
            0x1 => Some(OpCode::Text),
            0x2 => Some(OpCode::Binary),
            0x8 => Some(OpCode::Close),
            0x9 => Some(OpCode::Ping),
            0xA => Some(OpCode::Pong),
            _ => None,
        }
    }

    /// The 4-bit wire value of this opcode.
    pub fn as_u8(self) -> u8 {
        match self {
            OpCode::Continuation => 0x0,
            OpCode::Text => 0x1,
            OpCode::Binary => 0x2,
            OpCode::Close => 0x8,
            OpCode::Ping => 0x9,
            OpCode::Pong => 0xA,
        }
    }

    /// True for Close, Ping and Pong.
    pub fn is_control(self) -> bool {
        self.as_u8() & 0x8 != 0
    }
}

/// A decoded frame header, as found on the wire (nothing is validated beyond the length encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The FIN bit: this frame ends its message.
    pub fin: bool,
    /// The three RSV bits, RSV1 as the most significant (`0b100`).
    pub rsv: u8,
    /// The raw 4-bit opcode; see [`OpCode::from_u8`].
    pub opcode: u8,
    /// The masking key, present on client-to-server frames.
    pub mask: Option<[u8; 4]>,
    /// The declared payload length.
    pub payload_len: u64,
}

/// Parse a frame header from the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, `Ok(Some((header, header_len)))` once the whole header is
/// present, and an error (close code 1002) for a non-minimal length encoding or a 64-bit length with its most
/// significant bit set. The length encoding is checked as soon as its bytes are present, before the mask key.
///
/// ```
/// use claude_ide_bridge::ws::decode_header;
/// let (h, n) = decode_header(&[0x81, 0x05, b'H']).unwrap().unwrap();
/// assert_eq!((h.fin, h.opcode, h.payload_len, h.mask, n), (true, 1, 5, None, 2));
/// assert_eq!(decode_header(&[0x81]).unwrap(), None);
/// ```
pub fn decode_header(buf: &[u8]) -> Result<Option<(FrameHeader, usize)>, ProtocolError> {
    let (b0, b1) = match buf {
        [b0, b1, ..] => (*b0, *b1),
        _ => return Ok(None),
    };
    let (payload_len, mut pos) = match b1 & 0x7F {
        126 => {
            let Some(ext) = buf.get(2..4) else {
                return Ok(None);
            };
            let len = u64::from(u16::from_be_bytes([ext[0], ext[1]]));
            if len < 126 {
                return Err(ProtocolErrorKind::NonMinimalLength.into());
            }
            (len, 4)
        }
        127 => {
            let Some(ext) = buf.get(2..10) else {
                return Ok(None);
            };
            let mut b = [0u8; 8];
            b.copy_from_slice(ext);
            let len = u64::from_be_bytes(b);
            if len >> 63 != 0 {
                return Err(ProtocolErrorKind::LengthMsbSet.into());
            }
            if len <= 0xFFFF {
                return Err(ProtocolErrorKind::NonMinimalLength.into());
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };
    let mask = if b1 & 0x80 != 0 {
        let Some(key) = buf.get(pos..pos + 4) else {
            return Ok(None);
        };
        pos += 4;
        Some([key[0], key[1], key[2], key[3]])
    } else {
        None
    };
    let header = FrameHeader {
        fin: b0 & 0x80 != 0,
        rsv: (b0 >> 4) & 0x7,
        opcode: b0 & 0x0F,
        mask,
        payload_len,
    };
    Ok(Some((header, pos)))
}

/// Length of the header of a frame with a `payload_len`-byte payload (minimal length encoding).
pub fn header_len(payload_len: usize, masked: bool) -> usize {
    let base = if payload_len < 126 {
        2
    } else if payload_len <= 0xFFFF {
        4
    } else {
        10
    };
    if masked {
        base + 4
    } else {
        base
    }
}

/// Write a frame header into `hdr`, returning its length.
pub(crate) fn write_header(
    hdr: &mut [u8; MAX_HEADER_LEN],
    opcode: OpCode,
    fin: bool,
    mask: Option<[u8; 4]>,
    payload_len: usize,
) -> usize {
    hdr[0] = (u8::from(fin) << 7) | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut n = if payload_len < 126 {
        // `payload_len < 126` makes this cast lossless.
        hdr[1] = mask_bit | payload_len as u8;
        2
    } else if let Ok(len16) = u16::try_from(payload_len) {
        hdr[1] = mask_bit | 126;
        hdr[2..4].copy_from_slice(&len16.to_be_bytes());
        4
    } else {
        hdr[1] = mask_bit | 127;
        hdr[2..10].copy_from_slice(&(payload_len as u64).to_be_bytes());
        10
    };
    if let Some(m) = mask {
        hdr[n..n + 4].copy_from_slice(&m);
        n += 4;
    }
    n
}

/// Append one frame to `out`, with the minimal length encoding.
///
/// `mask: Some(key)` masks the payload as a client must; servers pass `None`.
///
/// ```
/// use claude_ide_bridge::ws::{encode_frame, OpCode};
/// let mut out = Vec::new();
/// encode_frame(&mut out, OpCode::Text, true, Some([0x37, 0xfa, 0x21, 0x3d]), b"Hello");
/// assert_eq!(out, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
/// ```
pub fn encode_frame(
    out: &mut Vec<u8>,
    opcode: OpCode,
    fin: bool,
    mask: Option<[u8; 4]>,
    payload: &[u8],
) {
    let mut hdr = [0u8; MAX_HEADER_LEN];
    let n = write_header(&mut hdr, opcode, fin, mask, payload.len());
    out.reserve(n + payload.len());
    out.extend_from_slice(&hdr[..n]);
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(m) = mask {
        apply_mask(&mut out[start..], m, 0);
    }
}
