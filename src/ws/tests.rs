//! Tests of the WebSocket layer: RFC 6455 vectors, every rule of docs/protocol.md, "Framing", limits and
//! properties.

use super::*;
use proptest::prelude::*;

const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

fn limits() -> WsLimits {
    WsLimits {
        max_message_size: 1 << 20,
        max_fragments: 64,
        max_outbound: 1 << 20,
    }
}

/// A masked client frame.
fn client(op: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let opcode = OpCode::from_u8(op).expect("test opcode");
    encode_frame(&mut out, opcode, fin, Some(KEY), payload);
    out
}

/// An owned copy of what `poll` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
    Err(u16),
}

impl Ev {
    fn of(m: Message<'_>) -> Ev {
        match m {
            Message::Text(t) => Ev::Text(t.to_owned()),
            Message::Binary(b) => Ev::Binary(b.to_vec()),
            Message::Ping(b) => Ev::Ping(b.to_vec()),
            Message::Pong(b) => Ev::Pong(b.to_vec()),
            Message::Close(c) => Ev::Close(c.map(|(code, r)| (code, r.to_owned()))),
        }
    }
}

/// Poll until nothing more comes out, recording events.
fn drain(ws: &mut WebSocket, evs: &mut Vec<Ev>) {
    loop {
        match ws.poll() {
            Ok(Some(m)) => evs.push(Ev::of(m)),
            Ok(None) => return,
            Err(e) => {
                evs.push(Ev::Err(e.close_code()));
                return;
            }
        }
    }
}

/// Feed `chunks` one by one, polling after each; returns the events and all output bytes.
fn run<'a>(limits: WsLimits, chunks: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Ev>, Vec<u8>) {
    let mut ws = WebSocket::new(limits);
    let mut evs = Vec::new();
    let mut out = Vec::new();
    for c in chunks {
        ws.receiver.receive(c);
        drain(&mut ws, &mut evs);
        out.extend_from_slice(ws.sender.output());
        let n = ws.sender.queued();
        ws.sender.advance(n);
    }
    (evs, out)
}

fn run_whole(bytes: &[u8]) -> (Vec<Ev>, Vec<u8>) {
    run(limits(), [bytes])
}

fn close_bytes(code: u16) -> Vec<u8> {
    let [a, b] = code.to_be_bytes();
    vec![0x88, 0x02, a, b]
}

/// Whether `out` is exactly one Close frame failing the connection with `code`, its reason the
/// rule broken (a peer told 1002 alone cannot tell which rule).
fn is_fail_close(out: &[u8], code: u16) -> bool {
    let [a, b] = code.to_be_bytes();
    match out {
        [0x88, n, x, y, reason @ ..] => {
            usize::from(*n) == 2 + reason.len()
                && (*x, *y) == (a, b)
                && !reason.is_empty()
                && reason.len() <= 123
                && std::str::from_utf8(reason).is_ok()
        }
        _ => false,
    }
}

/// The stream fails with `code` and exactly that Close frame is queued.
fn assert_fails(bytes: &[u8], code: u16) {
    let (evs, out) = run_whole(bytes);
    assert_eq!(evs.last(), Some(&Ev::Err(code)), "events: {evs:?}");
    assert!(is_fail_close(&out, code), "{out:?}");
}

// ---- RFC 6455 §5.7 examples ----

#[test]
fn rfc_single_frame_unmasked_text() {
    let mut out = Vec::new();
    encode_frame(&mut out, OpCode::Text, true, None, b"Hello");
    assert_eq!(out, [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
    let (h, n) = decode_header(&out).unwrap().unwrap();
    assert_eq!(
        (h.fin, h.rsv, h.opcode, h.mask, h.payload_len, n),
        (true, 0, 1, None, 5, 2)
    );
    // A server must reject it from a client.
    assert_fails(&out, 1002);
}

#[test]
fn rfc_single_frame_masked_text() {
    let wire = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(client(1, true, b"Hello"), wire);
    let (evs, out) = run_whole(&wire);
    assert_eq!(evs, [Ev::Text("Hello".into())]);
    assert!(out.is_empty());
}

#[test]
fn rfc_fragmented_text() {
    let mut unmasked = Vec::new();
    encode_frame(&mut unmasked, OpCode::Text, false, None, b"Hel");
    encode_frame(&mut unmasked, OpCode::Continuation, true, None, b"lo");
    assert_eq!(
        unmasked,
        [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f]
    );
    let mut wire = client(1, false, b"Hel");
    wire.extend(client(0, true, b"lo"));
    assert_eq!(run_whole(&wire).0, [Ev::Text("Hello".into())]);
}

#[test]
fn rfc_ping_and_pong() {
    let mut ping = Vec::new();
    encode_frame(&mut ping, OpCode::Ping, true, None, b"Hello");
    assert_eq!(ping, [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let (evs, out) = run_whole(&pong);
    assert_eq!(evs, [Ev::Pong(b"Hello".to_vec())]);
    assert!(out.is_empty());
    // A client ping is answered with the same payload.
    let (evs, out) = run_whole(&client(9, true, b"Hello"));
    assert_eq!(evs, [Ev::Ping(b"Hello".to_vec())]);
    assert_eq!(out, [0x8a, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
}

#[test]
fn rfc_length_encodings() {
    let mut out = Vec::new();
    encode_frame(&mut out, OpCode::Binary, true, None, &[7u8; 256]);
    assert_eq!(out[..4], [0x82, 0x7E, 0x01, 0x00]);
    assert_eq!(out.len(), 4 + 256);
    out.clear();
    encode_frame(&mut out, OpCode::Binary, true, None, &vec![7u8; 65536]);
    assert_eq!(out[..10], [0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00]);
    assert_eq!(out.len(), 10 + 65536);
    for len in [256usize, 65536] {
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        assert_eq!(
            run_whole(&client(2, true, &payload)).0,
            [Ev::Binary(payload)]
        );
    }
}

// ---- the rules of docs/protocol.md, "Framing", with the Close frame queued ----

#[test]
fn unmasked_frame_is_1002() {
    assert_fails(&[0x81, 0x02, b'h', b'i'], 1002);
    assert_eq!(close_bytes(1002), [0x88, 0x02, 0x03, 0xEA]);
}

#[test]
fn rsv_bits_are_1002() {
    for rsv in [0x40u8, 0x20, 0x10, 0x70] {
        let mut f = client(1, true, b"hi");
        f[0] |= rsv;
        assert_fails(&f, 1002);
    }
}

#[test]
fn reserved_opcodes_are_1002() {
    for op in (3u8..=7).chain(0xB..=0xF) {
        let mut f = client(1, true, b"");
        f[0] = 0x80 | op;
        assert_fails(&f, 1002);
    }
}

#[test]
fn fragmented_control_is_1002() {
    assert_fails(&client(9, false, b"x"), 1002);
    assert_fails(&client(8, false, &[0x03, 0xE8]), 1002);
}

#[test]
fn long_control_is_1002() {
    assert_fails(&client(9, true, &[0u8; 126]), 1002);
    assert_eq!(
        run_whole(&client(9, true, &[1u8; 125])).0,
        [Ev::Ping(vec![1; 125])]
    );
}

#[test]
fn continuation_without_start_is_1002() {
    assert_fails(&client(0, true, b"x"), 1002);
    assert_fails(&client(0, false, b"x"), 1002);
}

#[test]
fn new_data_frame_inside_fragmented_message_is_1002() {
    let mut wire = client(1, false, b"a");
    wire.extend(client(1, true, b"b"));
    assert_fails(&wire, 1002);
    let mut wire = client(2, false, b"a");
    wire.extend(client(2, false, b"b"));
    assert_fails(&wire, 1002);
}

#[test]
fn non_minimal_lengths_are_1002() {
    // 5 bytes in the 16-bit form, the mask key not even sent yet: fails from the length alone.
    assert_fails(&[0x82, 0xFE, 0x00, 0x05], 1002);
    // 200 bytes in the 64-bit form.
    assert_fails(&[0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0, 200], 1002);
    // MSB set.
    assert_fails(&[0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], 1002);
    assert_eq!(
        decode_header(&[0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0])
            .unwrap_err()
            .kind(),
        ProtocolErrorKind::LengthMsbSet
    );
}

#[test]
fn invalid_utf8_text_is_1007() {
    assert_fails(&client(1, true, &[0xC0, 0x80]), 1007);
    assert_eq!(close_bytes(1007), [0x88, 0x02, 0x03, 0xEF]);
    // Incomplete at the end of a fragmented message.
    let mut wire = client(1, false, b"ok");
    wire.extend(client(0, true, &[0xE2, 0x82]));
    assert_fails(&wire, 1007);
    // Binary is not checked.
    assert_eq!(
        run_whole(&client(2, true, &[0xC0])).0,
        [Ev::Binary(vec![0xC0])]
    );
}

#[test]
fn close_payload_rules() {
    assert_fails(&client(8, true, &[0x03]), 1002);
    for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
        assert_fails(&client(8, true, &code.to_be_bytes()), 1002);
    }
    let mut bad_reason = 1000u16.to_be_bytes().to_vec();
    bad_reason.extend([0xCE, 0xBA, 0xFF]);
    assert_fails(&client(8, true, &bad_reason), 1007);
}

#[test]
fn close_codes() {
    for code in 0..=u16::MAX {
        let ok = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
        assert_eq!(is_valid_close_code(code), ok, "{code}");
    }
}

#[test]
fn close_is_echoed_and_later_input_ignored() {
    let mut payload = 1000u16.to_be_bytes().to_vec();
    payload.extend_from_slice("bye é".as_bytes());
    let mut wire = client(8, true, &payload);
    wire.extend(client(1, true, b"ignored"));
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire);
    assert_eq!(
        ws.poll().unwrap(),
        Some(Message::Close(Some((1000, "bye é"))))
    );
    assert_eq!(ws.sender.output(), [0x88, 0x02, 0x03, 0xE8]);
    assert!(ws.is_finished());
    assert_eq!(ws.poll().unwrap(), None);
    ws.receiver.receive(&client(1, true, b"more"));
    assert_eq!(ws.poll().unwrap(), None);
    assert!(ws.receiver.memory() <= 64);
    assert_eq!(ws.sender.send_text("x"), Err(SendError::Closed));

    let (evs, out) = run_whole(&client(8, true, b""));
    assert_eq!(evs, [Ev::Close(None)]);
    assert_eq!(out, [0x88, 0x00]);
    let (evs, out) = run_whole(&client(8, true, &4000u16.to_be_bytes()));
    assert_eq!(evs, [Ev::Close(Some((4000, String::new())))]);
    assert_eq!(out, close_bytes(4000));
}

#[test]
fn server_initiated_close_handshake() {
    let mut ws = WebSocket::new(limits());
    ws.sender.send_close(1001, "going away").unwrap();
    assert_eq!(ws.sender.output()[..4], [0x88, 12, 0x03, 0xE9]);
    assert_eq!(ws.sender.send_ping(b""), Err(SendError::Closed));
    assert!(!ws.is_finished());
    // Data still arriving is delivered; the peer's Close is not echoed.
    ws.receiver.receive(&client(1, true, b"late"));
    ws.receiver
        .receive(&client(8, true, &1001u16.to_be_bytes()));
    assert_eq!(ws.poll().unwrap(), Some(Message::Text("late")));
    assert_eq!(ws.poll().unwrap(), Some(Message::Close(Some((1001, "")))));
    assert_eq!(ws.sender.queued(), 14);
    assert!(ws.is_finished());
}

#[test]
fn error_fails_connection_once() {
    let mut wire = client(1, true, b"fine");
    wire.extend([0x81, 0x01, b'x']);
    wire.extend(client(1, true, b"never"));
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire);
    assert_eq!(ws.poll().unwrap(), Some(Message::Text("fine")));
    let e = ws.poll().unwrap_err();
    assert_eq!(
        (e.close_code(), e.kind()),
        (1002, ProtocolErrorKind::Unmasked)
    );
    assert!(!e.reason().is_empty() && e.to_string().contains("1002"));
    assert!(ws.is_finished() && ws.receiver.is_failed());
    assert_eq!(ws.poll().unwrap(), None);
    assert!(is_fail_close(ws.sender.output(), 1002));
    // No second Close after a Close was already sent.
    let mut ws = WebSocket::new(limits());
    ws.sender.send_close(1000, "").unwrap();
    ws.receiver.receive(&[0x81, 0x00]);
    assert!(ws.poll().is_err());
    assert_eq!(ws.sender.output(), close_bytes(1000));
}

#[test]
fn control_frames_interleaved_in_fragmented_message() {
    let mut wire = client(1, false, b"He");
    wire.extend(client(9, true, b"p1"));
    wire.extend(client(0, false, b"ll"));
    wire.extend(client(10, true, b"p2"));
    wire.extend(client(0, true, b"o"));
    let (evs, out) = run_whole(&wire);
    assert_eq!(
        evs,
        [
            Ev::Ping(b"p1".to_vec()),
            Ev::Pong(b"p2".to_vec()),
            Ev::Text("Hello".into())
        ]
    );
    assert_eq!(out, [0x8a, 0x02, b'p', b'1']);
}

#[test]
fn empty_messages() {
    let mut wire = client(1, true, b"");
    wire.extend(client(2, true, b""));
    wire.extend(client(1, false, b""));
    wire.extend(client(0, false, b""));
    wire.extend(client(0, true, b""));
    let (evs, _) = run_whole(&wire);
    assert_eq!(
        evs,
        [
            Ev::Text(String::new()),
            Ev::Binary(vec![]),
            Ev::Text(String::new())
        ]
    );
}

// ---- UTF-8 fails fast ----

#[test]
fn utf8_fails_mid_frame() {
    let mut payload = vec![b'a'; 100];
    payload[5] = 0xFF;
    let wire = client(1, true, &payload);
    let header = 6;
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire[..header + 10]);
    let e = ws.poll().unwrap_err();
    assert_eq!(e.close_code(), 1007);
    assert!(is_fail_close(ws.sender.output(), 1007));

    // Same inside a fragmented message.
    let mut wire = client(1, false, b"ok");
    wire.extend(client(0, true, &payload));
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire[..8 + header + 10]);
    assert_eq!(ws.poll().unwrap_err().close_code(), 1007);

    // A sequence that can never complete (an overlong lead) fails at its second byte.
    let mut ws = WebSocket::new(limits());
    ws.receiver
        .receive(&client(1, true, &[0xE0, 0x80, b'a', b'b'])[..header + 2]);
    assert_eq!(ws.poll().unwrap_err().close_code(), 1007);
}

/// Text that continues in a later read goes straight from the read into the message (`receive`'s one-pass
/// path): an impossible byte there is reported by the next poll, and the bytes after the frame's end in the
/// same read are still parsed.
#[test]
fn text_taken_straight_from_later_reads() {
    let mut payload = "é".repeat(200).into_bytes();
    let header = 4; // 400 bytes: 2-byte length
    let wire = client(1, true, &payload);
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire[..header + 10]);
    assert_eq!(ws.poll(), Ok(None));
    ws.receiver.receive(&wire[header + 10..header + 100]);
    assert_eq!(ws.poll(), Ok(None));
    // The rest of the frame, a ping and a second text in one read.
    let mut rest = wire[header + 100..].to_vec();
    rest.extend(client(9, true, b"p"));
    rest.extend(client(1, true, b"next"));
    ws.receiver.receive(&rest);
    let mut evs = Vec::new();
    drain(&mut ws, &mut evs);
    assert_eq!(
        evs,
        [
            Ev::Text("é".repeat(200)),
            Ev::Ping(b"p".to_vec()),
            Ev::Text("next".into())
        ]
    );

    // An impossible byte in the second read fails the connection at the poll after it.
    payload[150] = 0xFF;
    let wire = client(1, true, &payload);
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire[..header + 100]);
    assert_eq!(ws.poll(), Ok(None));
    ws.receiver.receive(&wire[header + 100..header + 160]);
    assert_eq!(ws.poll().unwrap_err().close_code(), 1007);
    assert!(is_fail_close(ws.sender.output(), 1007));
    ws.receiver.receive(&wire[header + 160..]);
    assert_eq!(ws.poll(), Ok(None));

    // A character cut by the end of the frame's last read fails when the frame ends.
    let mut cut = b"a".repeat(100);
    cut.push("é".as_bytes()[0]);
    let wire = client(1, true, &cut);
    let mut ws = WebSocket::new(limits());
    ws.receiver.receive(&wire[..header + 50]);
    assert_eq!(ws.poll(), Ok(None));
    ws.receiver.receive(&wire[header + 50..wire.len() - 1]);
    assert_eq!(ws.poll(), Ok(None));
    ws.receiver.receive(&wire[wire.len() - 1..]);
    assert_eq!(ws.poll().unwrap_err().close_code(), 1007);
}

#[test]
fn utf8_char_split_across_fragments_and_reads() {
    let s = "a😀b";
    let bytes = s.as_bytes();
    // 😀 is bytes 1..5: split it across two fragments.
    let mut wire = client(1, false, &bytes[..3]);
    wire.extend(client(0, true, &bytes[3..]));
    for chunk in 1..wire.len() {
        let (evs, out) = run(limits(), wire.chunks(chunk));
        assert_eq!(evs, [Ev::Text(s.into())], "chunk {chunk}");
        assert!(out.is_empty());
    }
    // And across reads of a single frame.
    let wire = client(1, true, bytes);
    let (evs, _) = run(limits(), wire.chunks(1));
    assert_eq!(evs, [Ev::Text(s.into())]);
}

// ---- Limits and memory ----

#[test]
fn declared_length_over_limit_fails_before_payload() {
    let lim = WsLimits {
        max_message_size: 1000,
        ..limits()
    };
    let wire = client(2, true, &[0u8; 1001]);
    let mut ws = WebSocket::new(lim);
    ws.receiver.receive(&wire[..8]); // header only
    assert_eq!(
        ws.poll().unwrap_err().kind(),
        ProtocolErrorKind::MessageTooBig
    );
    assert!(is_fail_close(ws.sender.output(), 1009));
    assert_eq!(close_bytes(1009), [0x88, 0x02, 0x03, 0xF1]);

    // A peer declaring 2^62 bytes gets 1009 and nothing is reserved.
    let mut ws = WebSocket::new(lim);
    ws.receiver
        .receive(&[0x82, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    assert_eq!(ws.poll().unwrap_err().close_code(), 1009);
    assert!(ws.receiver.memory() < 4096);

    // Across fragments: 600 + 401 > 1000, known from the second header.
    let mut wire = client(2, false, &[0u8; 600]);
    wire.extend(&client(0, true, &[0u8; 401])[..8]);
    let (evs, out) = run(lim, [&wire[..]]);
    assert_eq!(evs, [Ev::Err(1009)]);
    assert!(is_fail_close(&out, 1009), "{out:?}");
    // Exactly at the limit is fine.
    let mut wire = client(2, false, &[0u8; 600]);
    wire.extend(client(0, true, &[0u8; 400]));
    assert_eq!(run(lim, [&wire[..]]).0, [Ev::Binary(vec![0; 1000])]);
}

#[test]
fn too_many_fragments_is_1009() {
    let lim = WsLimits {
        max_fragments: 3,
        ..limits()
    };
    let mut wire = client(1, false, b"a");
    wire.extend(client(0, false, b"b"));
    wire.extend(client(0, true, b"c"));
    assert_eq!(run(lim, [&wire[..]]).0, [Ev::Text("abc".into())]);
    let mut wire = client(1, false, b"a");
    wire.extend(client(0, false, b"b"));
    wire.extend(client(0, false, b"c"));
    wire.extend(client(0, true, b"d"));
    let (evs, out) = run(lim, [&wire[..]]);
    assert_eq!(evs, [Ev::Err(1009)]);
    assert!(is_fail_close(&out, 1009), "{out:?}");
}

#[test]
fn many_small_fragments_assemble_linearly() {
    let lim = WsLimits {
        max_message_size: 16 << 20,
        max_fragments: 65_536,
        max_outbound: 64 << 20,
    };
    let mut wire = Vec::with_capacity(65_536 * 70);
    let chunk: Vec<u8> = (0..64u8).map(|i| b'a' + i % 26).collect();
    for i in 0..65_536 {
        let op = if i == 0 { 1 } else { 0 };
        wire.extend(client(op, i == 65_535, &chunk));
    }
    let mut ws = WebSocket::new(lim);
    let mut peak = 0;
    let mut got = None;
    for part in wire.chunks(4096) {
        ws.receiver.receive(part);
        while let Some(m) = ws.poll().unwrap() {
            if let Message::Text(t) = m {
                got = Some(t.len());
                assert!(t.as_bytes().chunks(64).all(|c| c == chunk));
            }
        }
        peak = peak.max(ws.receiver.memory());
    }
    assert_eq!(got, Some(65_536 * 64));
    assert!(peak <= 65_536 * 64 + 64 * 1024, "peak {peak}");
}

#[test]
fn memory_stays_bounded_and_idle_is_small() {
    let lim = WsLimits {
        max_message_size: 1 << 20,
        max_fragments: 1024,
        max_outbound: 4 << 20,
    };
    let big = vec![b'x'; 1 << 20];
    // The same text again, in 64 KiB fragments.
    let mut frag = Vec::new();
    let parts: Vec<&[u8]> = big.chunks(64 * 1024).collect();
    for (i, p) in parts.iter().enumerate() {
        frag.extend(client(if i == 0 { 1 } else { 0 }, i + 1 == parts.len(), p));
    }
    let mut wire = client(1, true, &big);
    wire.extend(frag);
    let mut ws = WebSocket::new(lim);
    let mut count = 0;
    let mut peak = 0;
    for part in wire.chunks(8192) {
        let buf = ws.receiver.read_buf(part.len());
        buf[..part.len()].copy_from_slice(part);
        ws.receiver.commit(part.len());
        while let Some(m) = ws.poll().unwrap() {
            assert_eq!(m, Message::Text(std::str::from_utf8(&big).unwrap()));
            count += 1;
        }
        peak = peak.max(ws.receiver.memory());
    }
    assert_eq!(count, 2);
    assert!(peak <= lim.max_message_size + 32 * 1024, "peak {peak}");
    // Idle afterwards.
    assert_eq!(ws.poll().unwrap(), None);
    assert!(ws.memory() <= 16 * 1024, "idle {}", ws.memory());
}

#[test]
fn declared_length_is_not_reserved_up_front() {
    let lim = WsLimits {
        max_message_size: 16 << 20,
        ..limits()
    };
    let wire = client(1, true, &vec![b'a'; 8 << 20]);
    let mut ws = WebSocket::new(lim);
    let mut fed = 0;
    for part in wire[..256 * 1024].chunks(16 * 1024) {
        let buf = ws.receiver.read_buf(part.len());
        buf[..part.len()].copy_from_slice(part);
        ws.receiver.commit(part.len());
        fed += part.len();
        assert_eq!(ws.poll().unwrap(), None);
        // At most about twice what arrived, never the declared 8 MiB.
        assert!(
            ws.receiver.memory() <= 2 * fed + 16 * 1024,
            "{}",
            ws.receiver.memory()
        );
    }
    // Growth stops at the end of the frame: the whole frame ends in a buffer of about its size.
    let mut ws = WebSocket::new(lim);
    for part in wire.chunks(64 * 1024) {
        let buf = ws.receiver.read_buf(part.len());
        buf[..part.len()].copy_from_slice(part);
        ws.receiver.commit(part.len());
        if let Some(m) = ws.poll().unwrap() {
            assert!(matches!(m, Message::Text(t) if t.len() == 8 << 20));
            assert!(
                ws.receiver.memory() <= (8 << 20) + 64 * 1024,
                "{}",
                ws.receiver.memory()
            );
        }
    }
}

#[test]
fn read_buf_does_not_rezero_and_commits() {
    let mut ws = WebSocket::new(limits());
    let wire = client(1, true, b"hello");
    let buf = ws.receiver.read_buf(3);
    assert!(buf.len() >= 3);
    buf[..3].copy_from_slice(&wire[..3]);
    ws.receiver.commit(3);
    assert_eq!(ws.poll().unwrap(), None);
    let rest = &wire[3..];
    let buf = ws.receiver.read_buf(rest.len());
    buf[..rest.len()].copy_from_slice(rest);
    ws.receiver.commit(rest.len());
    assert_eq!(ws.poll().unwrap(), Some(Message::Text("hello")));
}

// ---- Output queue ----

#[test]
fn outbound_full_aborts() {
    let mut tx = Sender::new(100);
    tx.send_binary(&[0u8; 90]).unwrap();
    assert_eq!(tx.queued(), 92);
    assert_eq!(tx.send_text("123456789"), Err(SendError::OutboundFull));
    assert!(tx.is_aborted());
    assert!(tx.output().is_empty());
    assert_eq!(tx.send_text("x"), Err(SendError::Closed));
    assert_eq!(tx.send_close(1000, ""), Err(SendError::Closed));

    let mut ws = WebSocket::new(WsLimits {
        max_outbound: 10,
        ..limits()
    });
    assert_eq!(
        ws.sender
            .send_text_with(|o| o.extend_from_slice(&[b'a'; 9])),
        Err(SendError::OutboundFull)
    );
    assert!(ws.is_finished());
    // A pong that does not fit aborts too.
    let mut ws = WebSocket::new(WsLimits {
        max_outbound: 10,
        ..limits()
    });
    ws.receiver.receive(&client(9, true, &[0; 20]));
    assert_eq!(ws.poll().unwrap(), Some(Message::Ping(&[0; 20])));
    assert!(ws.sender.is_aborted() && ws.is_finished());
}

#[test]
fn output_advance_and_compaction() {
    let mut tx = Sender::new(1 << 20);
    let mut written = Vec::new();
    let mut expected = Vec::new();
    for i in 0..1000u32 {
        let s = i.to_string();
        tx.send_text(&s).unwrap();
        encode_frame(&mut expected, OpCode::Text, true, None, s.as_bytes());
        let n = (tx.queued() / 2).max(1);
        written.extend_from_slice(&tx.output()[..n]);
        tx.advance(n);
    }
    written.extend_from_slice(tx.output());
    let n = tx.queued();
    tx.advance(n + 5);
    assert_eq!(written, expected);
    assert_eq!(tx.queued(), 0);
}

#[test]
fn send_text_with_every_length_class() {
    for len in [0usize, 1, 125, 126, 127, 65535, 65536, 70000] {
        let mut tx = Sender::new(1 << 20);
        tx.send_ping(b"p").unwrap();
        tx.advance(1);
        let payload: String = (0..len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        tx.send_text_with(|out| out.extend_from_slice(payload.as_bytes()))
            .unwrap();
        let mut expected = vec![0x01, b'p'];
        encode_frame(&mut expected, OpCode::Text, true, None, payload.as_bytes());
        assert_eq!(tx.output(), expected, "len {len}");
    }
}

#[test]
fn send_close_truncates_reason_at_char_boundary() {
    let mut tx = Sender::new(1 << 20);
    let reason = "é".repeat(100); // 200 bytes
    tx.send_close(1000, &reason).unwrap();
    let out = tx.output();
    let (h, n) = decode_header(out).unwrap().unwrap();
    assert_eq!(h.payload_len, 124);
    assert!(std::str::from_utf8(&out[n + 2..]).is_ok());
    assert!(tx.close_sent());
    assert_eq!(tx.send_binary(b""), Err(SendError::Closed));

    let mut tx = Sender::new(1 << 20);
    tx.send_ping(&[1; 200]).unwrap();
    assert_eq!(
        decode_header(tx.output()).unwrap().unwrap().0.payload_len,
        125
    );
}

#[test]
fn opcodes_round_trip() {
    for v in 0u8..=255 {
        if let Some(op) = OpCode::from_u8(v) {
            assert_eq!(op.as_u8(), v);
            assert_eq!(op.is_control(), v >= 8);
        } else {
            assert!(matches!(v, 3..=7 | 0xB..));
        }
    }
}

#[test]
fn apply_mask_matches_bytewise() {
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    for phase in 0..8 {
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 130, 300] {
            let mut fast = data[..len].to_vec();
            apply_mask(&mut fast, KEY, phase);
            let slow: Vec<u8> = data[..len]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ KEY[(i + phase) % 4])
                .collect();
            assert_eq!(fast, slow, "phase {phase} len {len}");
        }
    }
}

// ---- Properties ----

/// A generated client frame: mostly valid, sometimes not.
fn arb_frame() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![
        6 => Just(1u8),
        4 => Just(2u8),
        4 => Just(0u8),
        2 => Just(9u8),
        1 => Just(10u8),
        1 => Just(8u8),
    ];
    let payload = prop_oneof![
        6 => "[a-zé😀]{0,40}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..300),
    ];
    (op, any::<bool>(), payload, any::<[u8; 4]>()).prop_map(|(op, fin, mut payload, mask)| {
        let opcode = OpCode::from_u8(op).expect("valid opcode");
        if opcode.is_control() {
            payload.truncate(125);
        }
        if opcode == OpCode::Close && payload.len() >= 2 {
            payload[..2].copy_from_slice(&1000u16.to_be_bytes());
        }
        let mut out = Vec::new();
        encode_frame(
            &mut out,
            opcode,
            fin || opcode.is_control(),
            Some(mask),
            &payload,
        );
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn split_invariance(frames in proptest::collection::vec(arb_frame(), 0..12), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20)) {
        let wire: Vec<u8> = frames.concat();
        let lim = WsLimits { max_message_size: 600, max_fragments: 5, max_outbound: 1 << 20 };
        let whole = run(lim, [&wire[..]]);
        let bytewise = run(lim, wire.chunks(1));
        prop_assert_eq!(&whole, &bytewise);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
        points.push(0);
        points.push(wire.len());
        points.sort_unstable();
        let pieces: Vec<&[u8]> = points.windows(2).map(|w| &wire[w[0]..w[1]]).collect();
        prop_assert_eq!(&whole, &run(lim, pieces));
    }

    #[test]
    fn encode_decode_round_trip(
        len in prop_oneof![0usize..=125, 126usize..=65535, 65536usize..=70_000],
        mask in proptest::option::of(any::<[u8; 4]>()),
        op in prop::sample::select(vec![OpCode::Continuation, OpCode::Text, OpCode::Binary, OpCode::Close, OpCode::Ping, OpCode::Pong]),
        fin in any::<bool>(),
        seed in any::<u8>(),
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let mut out = Vec::new();
        encode_frame(&mut out, op, fin, mask, &payload);
        let (h, n) = decode_header(&out).unwrap().unwrap();
        prop_assert_eq!(n, header_len(len, mask.is_some()));
        prop_assert_eq!(h, FrameHeader { fin, rsv: 0, opcode: op.as_u8(), mask, payload_len: len as u64 });
        prop_assert_eq!(out.len(), n + len);
        // Every proper prefix of the header needs more bytes.
        for cut in 0..n {
            prop_assert_eq!(decode_header(&out[..cut]).unwrap(), None);
        }
        let mut body = out[n..].to_vec();
        if let Some(m) = mask {
            apply_mask(&mut body, m, 0);
        }
        prop_assert_eq!(body, payload);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000), chunk in 1usize..300) {
        let lim = WsLimits { max_message_size: 4096, max_fragments: 8, max_outbound: 1024 };
        let mut ws = WebSocket::new(lim);
        for part in bytes.chunks(chunk) {
            ws.receiver.receive(part);
            while let Ok(Some(_)) = ws.poll() {}
            prop_assert!(ws.receiver.memory() <= lim.max_message_size + 2 * chunk + 16 * 1024);
            let n = ws.sender.queued();
            ws.sender.advance(n);
        }
        // Also with the peer's mask bit forced on, so more bytes reach payload processing.
        let mut masked = bytes.clone();
        for (i, b) in masked.iter_mut().enumerate() {
            if i % 7 == 1 {
                *b |= 0x80;
            }
        }
        let mut ws = WebSocket::new(lim);
        for part in masked.chunks(chunk) {
            ws.receiver.receive(part);
            while let Ok(Some(_)) = ws.poll() {}
            prop_assert!(ws.receiver.memory() <= lim.max_message_size + 2 * chunk + 16 * 1024);
        }
    }
}

#[test]
fn text_in_pieces_ends_in_a_buffer_of_its_size() {
    // Characters cut by the ends of the reads (65,536 is not a multiple of 3): the validator holds
    // their first bytes back, and the message still ends in one buffer of exactly its size, with the
    // input buffer the size of a read.
    let text = "€".repeat(1 << 18);
    let wire = client(1, true, text.as_bytes());
    let mut ws = WebSocket::new(limits());
    let mut got = None;
    for part in wire.chunks(64 * 1024) {
        let buf = ws.receiver.read_buf(part.len());
        buf[..part.len()].copy_from_slice(part);
        ws.receiver.commit(part.len());
        if let Some(m) = ws.poll().unwrap() {
            let Message::Text(t) = m else { panic!("{m:?}") };
            assert!(t == text, "the text arrived changed");
            got = Some(ws.receiver.memory());
        }
    }
    let held = got.expect("the message arrived");
    assert!(
        held <= text.len() + 64 * 1024 + 4096,
        "{held} held for {}",
        text.len()
    );
}

#[test]
fn message_limit_counts_a_character_cut_between_fragments() {
    // 1,000 bytes allowed. The first fragment ends with the first byte of "€" (held back by the
    // validator, not yet in the text); a continuation that would bring the message to 1,001
    // bytes is refused, one that brings it to exactly 1,000 is accepted.
    let lim = WsLimits {
        max_message_size: 1000,
        ..limits()
    };
    let euro = "€".as_bytes();
    let mut first = vec![b'a'; 997];
    first.push(euro[0]);
    for (rest, ok) in [(2 + 1, false), (2, true)] {
        let mut last = euro[1..].to_vec();
        last.resize(rest, b'b');
        let mut wire = client(1, false, &first);
        wire.extend(client(0, true, &last));
        let mut ws = WebSocket::new(lim);
        ws.receiver.receive(&wire);
        match ws.poll() {
            Ok(Some(Message::Text(t))) if ok => assert_eq!(t.len(), 1000),
            Err(e) if !ok => assert_eq!(e.kind(), ProtocolErrorKind::MessageTooBig),
            other => panic!("{rest}: {other:?}"),
        }
    }
}
