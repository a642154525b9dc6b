//! Property tests of the whole engine: split invariance of a realistic session, robustness and
//! memory bounds under random bytes, and random host/client/clock operation sequences.

mod common;

use claude_ide_bridge::{CancelReason, DisconnectReason, Event, Limits, ToolCall};
use common::harness::{Harness, Op, MEMORY_SLACK, MSG_KINDS};
use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use std::time::Duration;

// ---- (1) split invariance --------------------------------------------------------------------

/// What one run of the realistic stream produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Event>,
    output: Vec<u8>,
    closed: bool,
}

/// Feed `stream` to a fresh server in the given chunks, through `handle_input`.
fn run_chunks(stream: &[u8], cuts: &[usize]) -> Outcome {
    let mut p = Pair::new();
    let conn = p.server.accept(p.now);
    let mut start = 0;
    let mut ends: Vec<usize> = cuts.iter().copied().filter(|c| *c < stream.len()).collect();
    ends.push(stream.len());
    for end in ends {
        if end <= start {
            continue;
        }
        let chunk = &stream[start..end];
        start = end;
        p.raw(conn, chunk);
    }
    let events = p.take_events();
    Outcome {
        events,
        output: p.inbox.remove(&conn).unwrap_or_default(),
        closed: p.closed.contains(&conn),
    }
}

#[test]
fn realistic_stream_fed_whole_does_the_whole_session() {
    let stream = real_client_stream();
    let o = run_chunks(&stream, &[]);
    assert!(o.closed, "the close handshake ends the connection");
    let ev = &o.events;
    assert!(matches!(ev[0], Event::Connected { .. }), "{ev:?}");
    assert!(matches!(ev[1], Event::Initialized { .. }), "{ev:?}");
    let calls: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { call, tool } => Some((*call, tool.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3, "{ev:?}");
    assert!(
        matches!(&calls[2].1, ToolCall::OpenDiff(a) if a.tab_name == FRAGMENTED_TAB
        && a.new_file_contents.contains("grüße ✻"))
    );
    let cancelled: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::CallCancelled { call, reason } => Some((*call, *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cancelled,
        vec![
            (calls[1].0, CancelReason::Cancelled),
            (calls[0].0, CancelReason::Disconnected),
            (calls[2].0, CancelReason::Disconnected),
        ]
    );
    assert_eq!(
        ev.last(),
        Some(&Event::Disconnected {
            conn: calls[0].0.conn,
            reason: DisconnectReason::Closed(Some(1000)),
        })
    );
    // 101, then: initialize, tools/list, Pong, ping result, Pong, Close echo.
    let text = String::from_utf8_lossy(&o.output);
    assert!(text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
    let body = &o.output[o.output.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
    let mut opcodes = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let (h, n) = claude_ide_bridge::ws::decode_header(&body[pos..])
            .unwrap()
            .unwrap();
        opcodes.push(h.opcode);
        pos += n + h.payload_len as usize;
    }
    assert_eq!(opcodes, vec![1, 1, 10, 1, 10, 8]);
}

#[test]
fn realistic_stream_byte_by_byte_equals_whole() {
    let stream = real_client_stream();
    let whole = run_chunks(&stream, &[]);
    let cuts: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(run_chunks(&stream, &cuts), whole);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn realistic_stream_in_random_chunks_equals_whole(
        cuts in prop::collection::vec(any::<Index>(), 0..60),
    ) {
        let stream = real_client_stream();
        let whole = run_chunks(&stream, &[]);
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(stream.len())).collect();
        cuts.sort_unstable();
        cuts.dedup();
        prop_assert_eq!(run_chunks(&stream, &cuts), whole);
    }
}

// ---- (2) random bytes ------------------------------------------------------------------------

fn small_limits() -> Limits {
    Harness::small_limits()
}

fn bound(l: &Limits) -> usize {
    l.max_message_size + l.max_head_bytes + MEMORY_SLACK
}

/// A frame with arbitrary first byte (FIN, RSV, opcode), optional mask and a length encoding that
/// may be minimal or not.
fn raw_frame(b0: u8, mask: Option<[u8; 4]>, payload: &[u8], long_form: u8) -> Vec<u8> {
    let mut f = vec![b0];
    let m = if mask.is_some() { 0x80 } else { 0 };
    let len = payload.len();
    match long_form % 3 {
        0 if len < 126 => f.push(m | len as u8),
        0 | 1 if len < 65_536 => {
            f.push(m | 126);
            f.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            f.push(m | 127);
            f.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    let mut p = payload.to_vec();
    if let Some(k) = mask {
        f.extend_from_slice(&k);
        for (i, b) in p.iter_mut().enumerate() {
            *b ^= k[i % 4];
        }
    }
    f.extend(p);
    f
}

const SNIPPETS: [&str; 8] = [
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"openDiff","arguments":{"old_file_path":"/a","new_file_path":"/a","new_file_contents":"","tab_name":"t"}}}"#,
    r#"[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"getDiagnostics"}}]"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
    "\u{3}\u{e8}",
    "grüße ✻ \u{fffd}",
];

fn piece() -> impl Strategy<Value = Vec<u8>> {
    let payload = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        (0..SNIPPETS.len(), any::<Index>()).prop_map(|(i, cut)| {
            let s = SNIPPETS[i].as_bytes();
            // Whole most of the time, cut short otherwise.
            let keep = if cut.index(4) == 0 {
                cut.index(s.len() + 1)
            } else {
                s.len()
            };
            s[..keep].to_vec()
        }),
        (1usize..20_000).prop_map(|n| vec![b' '; n]),
    ];
    let opcode = prop_oneof![
        4 => prop_oneof![Just(0u8), Just(1), Just(2), Just(8), Just(9), Just(10)],
        1 => 0u8..16,
    ];
    let frame = (
        opcode,
        any::<bool>(),
        prop_oneof![9 => Just(0u8), 1 => 0u8..8],
        prop_oneof![9 => any::<[u8; 4]>().prop_map(Some), 1 => Just(None)],
        payload,
        prop_oneof![8 => Just(0u8), 1 => Just(1), 1 => Just(2)],
    )
        .prop_map(|(op, fin, rsv, mask, payload, form)| {
            let b0 = (u8::from(fin) << 7) | (rsv << 4) | op;
            raw_frame(b0, mask, &payload, form)
        });
    prop_oneof![
        4 => frame,
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Feed bytes to one connection in chunks, checking the memory bound at every step.
fn feed_checked(
    p: &mut Pair,
    conn: claude_ide_bridge::ConnectionId,
    bytes: &[u8],
    sizes: &[usize],
    limit: usize,
) {
    let mut pos = 0;
    let mut i = 0;
    while pos < bytes.len() {
        let n = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(4096)
            .max(1);
        let end = (pos + n).min(bytes.len());
        p.server.handle_input(conn, &bytes[pos..end], p.now);
        let m = claude_ide_bridge::hooks::connection_memory(&p.server, conn);
        assert!(m <= limit, "{m} > {limit} before draining");
        p.pump();
        let m = claude_ide_bridge::hooks::connection_memory(&p.server, conn);
        assert!(m <= limit, "{m} > {limit} after draining");
        pos = end;
        i += 1;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_frames_after_a_valid_upgrade(
        pieces in prop::collection::vec(piece(), 0..24),
        sizes in prop::collection::vec(1usize..4096, 1..8),
        small in any::<bool>(),
    ) {
        let limits = if small { small_limits() } else { Limits::default() };
        let limit = bound(&limits);
        let mut p = Pair::with_config(|c| c.limits = limits.clone());
        let conn = p.connect();
        let bytes: Vec<u8> = pieces.concat();
        feed_checked(&mut p, conn, &bytes, &sizes, limit);
        let out = p.inbox.remove(&conn).unwrap_or_default();
        let mut framed = b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec();
        framed.extend(out);
        harness::check_server_output(conn, &framed);
        // Winding down still works after whatever the peer did.
        p.server.shutdown(p.now);
        p.pump();
        p.advance(limits.close_timeout + Duration::from_millis(1));
        prop_assert!(p.server.is_idle());
    }

    #[test]
    fn random_bytes_as_the_upgrade(
        bytes in prop::collection::vec(any::<u8>(), 0..6000),
        sizes in prop::collection::vec(1usize..2048, 1..8),
    ) {
        let limits = small_limits();
        let mut p = Pair::with_config(|c| c.limits = limits.clone());
        let conn = p.server.accept(p.now);
        feed_checked(&mut p, conn, &bytes, &sizes, limits.max_head_bytes + 1024);
        let out = p.inbox.remove(&conn).unwrap_or_default();
        prop_assert!(out.is_empty() || out.starts_with(b"HTTP/1.1 4"), "{:?}", String::from_utf8_lossy(&out));
        p.advance(limits.handshake_timeout);
        prop_assert!(p.server.is_idle());
    }

    #[test]
    fn mutated_real_request_as_the_upgrade(
        edits in prop::collection::vec((any::<Index>(), any::<u8>(), 0u8..3), 1..8),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let limits = small_limits();
        let mut req = real_request(Some(TOKEN)).into_bytes();
        for (at, byte, how) in edits {
            let i = at.index(req.len());
            match how {
                0 => req[i] = byte,
                1 => req.insert(i, byte),
                _ => { req.remove(i); }
            }
        }
        req.extend(tail);
        let mut p = Pair::with_config(|c| c.limits = limits.clone());
        let conn = p.server.accept(p.now);
        feed_checked(&mut p, conn, &req, &[7, 100, 1], bound(&limits));
        let out = p.inbox.remove(&conn).unwrap_or_default();
        prop_assert!(out.is_empty() || out.starts_with(b"HTTP/1.1 "));
        p.server.shutdown(p.now);
        p.pump();
        p.advance(limits.close_timeout + Duration::from_millis(1));
        prop_assert!(p.server.is_idle());
    }
}

// ---- (3) random operation sequences ----------------------------------------------------------

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        3 => (0u64..2_000).prop_map(Duration::from_millis),
        2 => prop_oneof![
            Just(Duration::from_secs(5)),
            Just(Duration::from_secs(10)),
            Just(Duration::from_secs(30)),
            Just(Duration::from_secs(60)),
        ],
        1 => (60u64..200_000).prop_map(Duration::from_secs),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let conn = 0usize..8;
    prop_oneof![
        2 => Just(Op::Accept),
        10 => (conn.clone(), 0..MSG_KINDS, 0u8..8, prop_oneof![3 => Just(usize::MAX), 1 => 0usize..400])
            .prop_map(|(conn, msg, id, feed)| Op::Send { conn, msg, id, feed }),
        1 => (conn.clone(), prop::collection::vec(any::<u8>(), 0..64), any::<usize>())
            .prop_map(|(conn, bytes, feed)| Op::Raw { conn, bytes, feed }),
        2 => (conn.clone(), 0usize..600).prop_map(|(conn, n)| Op::Feed { conn, n }),
        3 => duration().prop_map(Op::Advance),
        4 => (any::<usize>(), any::<u8>()).prop_map(|(call, result)| Op::Respond { call, result }),
        1 => (any::<u8>(), prop::option::of(conn.clone())).prop_map(|(kind, target)| Op::Notify { kind, target }),
        1 => conn.clone().prop_map(Op::Close),
        1 => conn.prop_map(Op::Hangup),
        1 => (0u8..20).prop_map(Op::SetTools),
        1 => prop::option::of(0usize..300).prop_map(Op::WriteBudget),
        1 => Just(Op::Shutdown),
    ]
}

/// A session that starts sensibly (two connections upgraded and initialized) so that random
/// operations reach the MCP layer often.
fn opening() -> Vec<Op> {
    let send = |conn, msg| Op::Send {
        conn,
        msg,
        id: 0,
        feed: usize::MAX,
    };
    vec![
        Op::Accept,
        send(0, 0),
        send(0, 3),
        send(0, 4),
        Op::Accept,
        send(1, 0),
        Op::Send {
            conn: 1,
            msg: 3,
            id: 1,
            feed: usize::MAX,
        },
        send(1, 4),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_the_invariants(
        ops in prop::collection::vec(op(), 0..80),
        opened in any::<bool>(),
        compat in any::<bool>(),
        answer_closes in any::<bool>(),
        small in any::<bool>(),
    ) {
        let limits = if small { small_limits() } else { Limits::default() };
        let mut all = if opened { opening() } else { Vec::new() };
        all.extend(ops);
        Harness::run(&all, limits, compat, answer_closes);
    }
}

/// Operations around at-mentions: clients come (initialized, and then ready for news or not),
/// and go, while the editor sends at-mentions to all or to one of them and time passes.
fn mention_ops() -> impl Strategy<Value = Vec<Op>> {
    let conn = 0usize..6;
    let action = prop_oneof![
        // A new client, its opening messages sent up to a point: 3 initialized, 4 also asked for
        // the tools, 7 ready for news (the three lists and `ide_connected`).
        3 => prop::sample::select(vec![1usize, 3, 4, 7]).prop_map(|n| (0u8, n, None)),
        // A client says more of its opening (a ready client, one listed twice: harmless).
        2 => (conn.clone(), 3usize..7).prop_map(|(c, step)| (1, step, Some(c))),
        6 => (prop_oneof![4 => Just(1u8), 1 => any::<u8>()], prop::option::of(conn.clone()))
            .prop_map(|(kind, target)| (2, kind as usize, target)),
        4 => prop_oneof![3 => 0usize..500, 1 => 500usize..4_000].prop_map(|ms| (3, ms, None)),
        1 => conn.clone().prop_map(|c| (4, 0, Some(c))),
        2 => conn.prop_map(|c| (5, 0, Some(c))),
        1 => prop::option::of(0usize..300).prop_map(|b| (6, b.unwrap_or(usize::MAX), None)),
    ];
    prop::collection::vec(action, 0..40).prop_map(|actions| {
        // Message kinds of a client's opening, in order (tests/common/harness.rs).
        const OPENING: [u8; 7] = [0, 3, 4, 5, 26, 27, 21];
        let send = |conn, msg| Op::Send {
            conn,
            msg,
            id: msg,
            feed: usize::MAX,
        };
        let mut ops = Vec::new();
        let mut clients = 0;
        for (what, n, c) in actions {
            match what {
                0 => {
                    ops.push(Op::Accept);
                    ops.extend(OPENING[..n].iter().map(|&m| send(clients, m)));
                    clients += 1;
                }
                1 => ops.push(send(c.unwrap_or(0), OPENING[n])),
                2 => ops.push(Op::Notify {
                    kind: n as u8,
                    target: c,
                }),
                3 => ops.push(Op::Advance(Duration::from_millis(n as u64))),
                4 => ops.push(Op::Close(c.unwrap_or(0))),
                5 => ops.push(Op::Hangup(c.unwrap_or(0))),
                _ => ops.push(Op::WriteBudget((n != usize::MAX).then_some(n))),
            }
        }
        ops.push(Op::WriteBudget(None));
        ops.push(Op::Advance(Duration::from_secs(4)));
        ops
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Each connection is written each at-mention once at most, in the order they were sent, and
    /// only those sent to all or to it (checked by the harness at the end).
    #[test]
    fn random_clients_and_at_mentions_keep_the_invariants(
        ops in mention_ops(),
        small in any::<bool>(),
    ) {
        let limits = if small { small_limits() } else { Limits::default() };
        Harness::run(&ops, limits, false, true);
    }
}

#[test]
fn scripted_operations_exercise_every_message_kind() {
    // Every message kind on an initialized connection, answers to all calls, then shutdown.
    // The Close (16) and the oversized frame (22) end the connection, and after the binary
    // message (17, answered with Close 1003) nothing more is handled: they go last.
    let mut ops = opening();
    let kinds = (3..MSG_KINDS)
        .filter(|k| ![16, 17, 22].contains(k))
        .chain([17, 16]);
    for msg in kinds {
        ops.push(Op::Send {
            conn: 0,
            msg,
            id: msg % 8,
            feed: usize::MAX,
        });
        ops.push(Op::Respond {
            call: msg as usize,
            result: msg,
        });
    }
    ops.push(Op::Send {
        conn: 1,
        msg: 22,
        id: 0,
        feed: usize::MAX,
    });
    ops.push(Op::Advance(Duration::from_secs(45)));
    ops.push(Op::Advance(Duration::from_secs(7200)));
    let mut h = Harness::new(Limits::default(), true);
    for op in &ops {
        h.apply(op);
    }
    assert!(h.events.iter().any(|e| matches!(e, Event::ToolCall { .. })));
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, Event::CompatRequest { .. })));
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::IdeConnected {
            pid: Some(4242),
            ..
        }
    )));
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::Closed(Some(1000)),
            ..
        }
    )));
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::ProtocolError(e),
            ..
        } if e.close_code() == 1009
    )));
    h.finish(false);
}

#[test]
fn an_at_mention_for_one_client_gone_before_its_welcome_goes_to_no_other() {
    // Connection 0 holds an at-mention sent to it alone (it initialized a moment ago) and goes;
    // a client that comes next is not written it.
    let send = |conn, msg| Op::Send {
        conn,
        msg,
        id: 0,
        feed: usize::MAX,
    };
    let mut ops = opening();
    ops.extend([
        Op::Notify {
            kind: 1,
            target: Some(0),
        },
        Op::Hangup(0),
        Op::Accept,
        send(2, 0),
        send(2, 3),
        send(2, 4),
        Op::Advance(Duration::from_secs(4)),
    ]);
    Harness::run(&ops, Limits::default(), false, true);
}
