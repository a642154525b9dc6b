//! Scenarios through the whole engine with an in-memory client and a fake clock.

mod common;

use claude_ide_bridge::ws::OpCode;
use claude_ide_bridge::{
    ApiError, CancelReason, DisconnectReason, Event, Target, ToolCall, ToolName, ToolResult,
    ToolSet, UNDECIDED_AT_STOP,
};
use claude_ide_bridge::{Asker, AtMentioned, ConnectionId, LogEvent, Notification};
use claude_ide_bridge::{ClientPaths, Position, Selection, SelectionChanged};
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn status_line(head: &str) -> &str {
    head.lines().next().unwrap_or("")
}

// ---- docs/protocol.md, "Upgrade" and "Upgrade refusals" -----------------------------------------

#[test]
fn real_client_upgrade_gets_101_with_mcp_and_no_extensions() {
    let mut p = Pair::new();
    let (conn, head) = p.handshake(&real_request(Some(TOKEN)));
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n"));
    assert!(lower.contains("sec-websocket-protocol: mcp\r\n"));
    assert!(!lower.contains("sec-websocket-extensions"));
    let ev = p.take_events();
    assert!(
        matches!(&ev[..], [Event::Connected { conn: c, path, user_agent: Some(ua) }]
        if *c == conn && path == "/" && ua.starts_with("claude-code/"))
    );
}

#[test]
fn no_subprotocol_answered_when_not_offered() {
    let mut p = Pair::new();
    let req = real_request(Some(TOKEN)).replace("Sec-WebSocket-Protocol: mcp\r\n", "");
    let (_, head) = p.handshake(&req);
    assert!(head.starts_with("HTTP/1.1 101"));
    assert!(!head.to_ascii_lowercase().contains("sec-websocket-protocol"));
}

#[test]
fn refusal_table() {
    let cases: Vec<(String, &str)> = vec![
        (real_request(None), "401"),
        (real_request(Some("wrong-token")), "401"),
        (
            real_request(Some(TOKEN))
                .replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8"),
            "426",
        ),
        (
            real_request(Some(TOKEN)).replace(
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Key: short",
            ),
            "400",
        ),
        (
            real_request(Some(TOKEN)).replace("Upgrade: websocket\r\n", ""),
            "400",
        ),
        (real_request(Some(TOKEN)).replace("GET /", "POST /"), "405"),
        (real_request(Some(TOKEN)).replace("GET /", "BREW /"), "501"),
        (
            real_request(Some(TOKEN)).replace("HTTP/1.1\r\n", "HTTP/2.0\r\n"),
            "505",
        ),
        (
            real_request(Some(TOKEN)).replace("\r\n\r\n", "\r\nExpect: 102-processing\r\n\r\n"),
            "417",
        ),
        (
            real_request(Some(TOKEN)).replace("Host: 127.0.0.1:40000", "Host: evil.example:40000"),
            "403",
        ),
        (
            real_request(Some(TOKEN))
                .replace("\r\n\r\n", "\r\nOrigin: https://evil.example\r\n\r\n"),
            "403",
        ),
    ];
    for (req, status) in cases {
        let mut p = Pair::new();
        let (conn, head) = p.handshake(&req);
        assert!(
            status_line(&head).starts_with(&format!("HTTP/1.1 {status}")),
            "{status}: {head}"
        );
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("connection: close") || lower.contains("connection: upgrade, close"),
            "{head}"
        );
        if status == "426" {
            assert!(head
                .to_ascii_lowercase()
                .contains("sec-websocket-version: 13"));
        }
        assert!(p.closed.contains(&conn), "refused connections are closed");
        let ev = p.take_events();
        assert!(ev.iter().any(|e| matches!(e, Event::Disconnected { reason: DisconnectReason::Refused(r), .. } if r.status().to_string() == status)), "{ev:?}");
    }
}

#[test]
fn oversized_head_and_too_many_headers_get_431() {
    let mut p = Pair::new();
    let conn = p.server.accept(p.now);
    let big = format!("GET / HTTP/1.1\r\nX-Fill: {}\r\n", "a".repeat(20_000));
    p.raw(conn, big.as_bytes());
    let head = String::from_utf8_lossy(&p.inbox.remove(&conn).unwrap()).into_owned();
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    assert!(claude_ide_bridge::hooks::connection_memory(&p.server, conn) <= 16 * 1024 + 1024);

    let mut p = Pair::new();
    let many: String = (0..70).map(|i| format!("X-H{i}: v\r\n")).collect();
    let req = real_request(Some(TOKEN)).replace("\r\n\r\n", &format!("\r\n{many}\r\n"));
    let (_, head) = p.handshake(&req);
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
}

#[test]
fn eleventh_connection_gets_503_and_a_freed_slot_is_reused() {
    let mut p = Pair::new();
    let conns: Vec<_> = (0..10).map(|_| p.connect()).collect();
    let (_, head) = p.handshake(&real_request(Some(TOKEN)));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.contains("too many connections"), "{head}");
    // Free one: the client closes cleanly.
    p.send_frame(conns[0], OpCode::Close, true, &1000u16.to_be_bytes());
    assert!(p.closed.contains(&conns[0]));
    p.connect();
}

#[test]
fn handshake_deadline_closes_silent_sockets_and_idle_sockets_never_lock_out_the_client() {
    let mut p = Pair::new();
    let slow = p.server.accept(p.now);
    p.raw(slow, b"GET / HTTP/1.1\r\n");
    // 200 idle sockets from a process without the token: the oldest are evicted.
    for _ in 0..200 {
        p.server.accept(p.now);
    }
    p.pump();
    assert!(p.closed.contains(&slow));
    let ok = p.connect();
    p.advance(Duration::from_secs(11));
    assert!(
        !p.closed.contains(&ok),
        "the WebSocket is not subject to the handshake deadline"
    );
    let ev = p.take_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::HandshakeTimeout,
            ..
        }
    )));
}

/// A host paused past a handshake's deadline (SIGSTOP, a debugger) while the client's request
/// waited in the socket, unread: the late wake-up gives the handshake its time again, once, and
/// the request read then is answered. It was dropped as `handshake_timeout` at the wake (5 of 8
/// runs in the freeze audit). A client that stays silent is still dropped at the next deadline.
#[test]
fn a_handshake_across_a_pause_of_the_host_is_answered_once_read() {
    let mut p = Pair::new();
    let waiting = p.server.accept(p.now);
    let silent = p.server.accept(p.now);
    p.advance(Duration::from_secs(25));
    assert!(!p.closed.contains(&waiting) && !p.closed.contains(&silent));
    p.raw(waiting, real_request(Some(TOKEN)).as_bytes());
    let head = p.inbox.remove(&waiting).unwrap_or_default();
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    p.advance(Duration::from_secs(10));
    assert!(p.closed.contains(&silent), "forgiven once only");
    assert!(!p.closed.contains(&waiting));
}

#[test]
fn pipelined_first_frame_after_the_head_is_processed() {
    let mut p = Pair::new();
    let conn = p.server.accept(p.now);
    let mut bytes = real_request(Some(TOKEN)).into_bytes();
    claude_ide_bridge::ws::encode_frame(
        &mut bytes,
        OpCode::Text,
        true,
        Some([1, 2, 3, 4]),
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    p.raw(conn, &bytes);
    let out = p.inbox.remove(&conn).unwrap();
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    p.inbox.insert(conn, out[end..].to_vec());
    let m = p.messages(conn);
    assert_eq!(m, vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);
}

// ---- docs/protocol.md, "Framing": frames through the server -------------------------------------

/// The JSON messages among `frames` (text frames).
fn text_messages(frames: &[(u8, Vec<u8>)]) -> Vec<Value> {
    frames
        .iter()
        .filter(|(o, _)| *o == 1)
        .map(|(_, b)| serde_json::from_slice(b).unwrap())
        .collect()
}

fn close_code(frames: &[(u8, Vec<u8>)]) -> Option<u16> {
    frames
        .iter()
        .find(|(op, _)| *op == 8)
        .map(|(_, p)| u16::from_be_bytes([p[0], p[1]]))
}

#[test]
fn frame_rule_violations_close_with_the_right_code() {
    // Unmasked frame -> 1002.
    let mut p = Pair::new();
    let c = p.connect();
    let mut f = Vec::new();
    claude_ide_bridge::ws::encode_frame(&mut f, OpCode::Text, true, None, b"hi");
    p.raw(c, &f);
    assert_eq!(close_code(&p.frames(c)), Some(1002));
    assert!(p.closed.contains(&c));

    // Invalid UTF-8 -> 1007.
    let mut p = Pair::new();
    let c = p.connect();
    p.send_frame(c, OpCode::Text, true, &[b'{', 0xff, b'}']);
    assert_eq!(close_code(&p.frames(c)), Some(1007));

    // Binary -> 1003.
    let mut p = Pair::new();
    let c = p.connect();
    p.send_frame(c, OpCode::Binary, true, b"\x00\x01");
    assert_eq!(close_code(&p.frames(c)), Some(1003));

    // Over the message limit -> 1009, decided from the header alone.
    let mut p = Pair::with_config(|c| c.limits.max_message_size = 1000);
    let c = p.connect();
    let mut f = vec![0x81, 0xFE, 0x10, 0x00, 1, 2, 3, 4]; // masked, declares 4096 bytes
    f.extend_from_slice(&[0u8; 10]);
    p.raw(c, &f);
    assert_eq!(close_code(&p.frames(c)), Some(1009));
}

#[test]
fn ping_gets_pong_and_close_is_echoed() {
    let mut p = Pair::new();
    let c = p.connect();
    p.send_frame(c, OpCode::Ping, true, b"abc");
    assert_eq!(p.frames(c), vec![(0xA, b"abc".to_vec())]);
    p.send_frame(c, OpCode::Close, true, &[0x03, 0xE8, b'b', b'y', b'e']);
    let f = p.frames(c);
    assert_eq!(close_code(&f), Some(1000));
    assert!(p.closed.contains(&c));
    let ev = p.take_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::Closed(Some(1000)),
            ..
        }
    )));
}

#[test]
fn fragmented_request_with_interleaved_ping() {
    let mut p = Pair::new();
    let c = p.connect();
    let msg = br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    p.send_frame(c, OpCode::Text, false, &msg[..10]);
    p.send_frame(c, OpCode::Ping, true, b"");
    p.send_frame(c, OpCode::Continuation, false, &msg[10..20]);
    p.send_frame(c, OpCode::Continuation, true, &msg[20..]);
    let f = p.frames(c);
    assert_eq!(f[0], (0xA, vec![]));
    assert_eq!(
        serde_json::from_slice::<Value>(&f[1].1).unwrap(),
        json!({"jsonrpc":"2.0","id":5,"result":{}})
    );
}

// ---- docs/protocol.md, "Keepalive and timers" ---------------------------------------------------

#[test]
fn server_pings_and_drops_a_silent_peer_after_two_intervals() {
    let mut p = Pair::with_config(|c| c.limits.ping_interval = Duration::from_secs(5));
    let c = p.connect();
    assert_eq!(
        p.server.poll_timeout(),
        Some(p.now + Duration::from_secs(5))
    );
    p.advance(Duration::from_secs(5));
    assert_eq!(p.frames(c), vec![(0x9, vec![])]);
    p.advance(Duration::from_secs(5));
    assert!(p.closed.contains(&c), "silent for two intervals");
    let ev = p.take_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::PingTimeout,
            ..
        }
    )));
}

#[test]
fn an_answering_peer_stays_connected() {
    let mut p = Pair::with_config(|c| c.limits.ping_interval = Duration::from_secs(5));
    let c = p.connect();
    for _ in 0..10 {
        p.advance(Duration::from_secs(5));
        p.frames(c);
        p.send_frame(c, OpCode::Pong, true, b"");
    }
    assert!(!p.closed.contains(&c));
}

#[test]
fn clock_jump_after_sleep_resets_deadlines_instead_of_dropping() {
    let mut p = Pair::with_config(|c| c.limits.ping_interval = Duration::from_secs(5));
    let c = p.connect();
    // The laptop slept for an hour: the first wake-up is far past every deadline.
    p.advance(Duration::from_secs(3600));
    assert!(!p.closed.contains(&c));
    assert_eq!(p.frames(c), vec![(0x9, vec![])], "a ping probes the peer");
    p.send_frame(c, OpCode::Pong, true, b"");
    p.advance(Duration::from_secs(5));
    assert!(!p.closed.contains(&c));
}

/// A connection the host does not read (its events wait for a host that is behind: a `--stdio`
/// editor that does not read) is not dropped for a silence that is the host's: its answers to
/// the Pings wait unread in the socket. It was dropped as `ping_timeout` (the freeze audit, 3 of
/// 3 runs on the threads runtime). Once read again, a silent peer is dropped as before.
#[test]
fn a_connection_the_host_does_not_read_is_not_dropped_for_its_silence() {
    let interval = Duration::from_secs(30);
    let mut p = Pair::with_config(|c| c.limits.ping_interval = interval);
    let c = p.connect();
    for _ in 0..12 {
        p.advance(Duration::from_secs(10));
        p.server.reading_held(c, p.now);
    }
    assert!(!p.closed.contains(&c), "dropped while unread");
    p.frames(c);
    // Read again, and silent: dropped within two intervals.
    p.advance(interval);
    p.advance(interval);
    p.advance(Duration::from_secs(1));
    assert!(p.closed.contains(&c));
}

/// The host paused (a stopped process, a debugger) just after a ping went out, its timer run
/// 15 s past the silence's deadline (late, but by less than an interval: no sleep) before the
/// peer's pong, unread in the socket, was: the wake-up is forgiven once, a ping probes the peer,
/// and the pong then read keeps it. A peer that stays silent is dropped at the next late
/// wake-up, not forgiven again. The peer was dropped at once.
#[test]
fn a_late_wake_up_is_forgiven_once_per_silence() {
    let interval = Duration::from_secs(30);
    let mut p = Pair::with_config(|c| c.limits.ping_interval = interval);
    let c = p.connect();
    p.advance(interval);
    assert_eq!(p.frames(c), vec![(0x9, vec![])]);
    // Paused until 15 s past the drop deadline (two intervals after the last word).
    p.advance(Duration::from_secs(45));
    assert!(!p.closed.contains(&c), "dropped at a late wake-up");
    assert_eq!(p.frames(c), vec![(0x9, vec![])], "a ping probes the peer");
    p.send_frame(c, OpCode::Pong, true, b"");
    // Heard: forgiven again at the next pause.
    p.advance(interval);
    p.frames(c);
    p.advance(Duration::from_secs(45));
    assert!(!p.closed.contains(&c), "heard since the last late wake-up");
    p.frames(c);
    // Silent since: the next late wake-up drops it.
    p.advance(interval);
    p.frames(c);
    p.advance(Duration::from_secs(45));
    assert!(p.closed.contains(&c), "a silent peer forgiven twice");
}

/// `Limits::ping_interval`'s doc: zero drops every connection at its first timer. Each timer
/// after a zero-length deadline came late by its own length, which was read as a host that
/// slept: the silence was forgiven and a ping queued at every one, the next deadline `now`, so
/// the host woke in a loop and the connection was never dropped.
#[test]
fn a_zero_ping_interval_drops_at_the_first_timer() {
    let mut p = Pair::with_config(|c| c.limits.ping_interval = Duration::ZERO);
    let c = p.connect();
    p.advance(Duration::from_millis(1));
    assert!(
        p.closed.contains(&c),
        "open after a timer: {:?}",
        p.frames(c)
    );
    assert!(p.take_events().iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::PingTimeout,
            ..
        }
    )));
}

#[test]
fn durations_past_what_an_instant_holds_are_taken_as_never() {
    let mut p = Pair::with_config(|c| {
        c.limits.ping_interval = Duration::MAX;
        c.limits.handshake_timeout = Duration::MAX;
        c.limits.close_timeout = Duration::MAX;
        c.limits.mention_ttl = Duration::MAX;
    });
    // A socket in its upgrade and a live connection: each has deadlines (a refused one is
    // closed once its 400 is written, whatever the limits).
    let upgrading = p.server.accept(p.now);
    let c = p.connect();
    let (refused, head) = p.handshake("GET / HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(p.closed.contains(&refused));
    let year = Duration::from_secs(365 * 24 * 3600);
    p.advance(year);
    assert!(!p.closed.contains(&c) && !p.closed.contains(&upgrading));
    assert_eq!(p.frames(c), vec![], "no ping in a year");
    // Closing, its Close unanswered: its close deadline is as far as the upgrade's, never.
    p.server.close(c, p.now).unwrap();
    p.advance(Duration::from_secs(1));
    let next = p.server.poll_timeout().expect("deadlines kept");
    assert!(
        next - p.now > 10 * year,
        "a deadline {:?} away",
        next - p.now
    );
    assert!(!p.closed.contains(&c));
}

#[test]
fn input_stamped_before_the_last_does_not_age_the_peer() {
    let mut p = Pair::with_config(|c| c.limits.ping_interval = Duration::from_secs(30));
    let c = p.connect();
    p.advance(Duration::from_secs(50));
    p.send_frame(c, OpCode::Pong, true, b"");
    // Bytes read a while ago, handed over late with the instant they were read at.
    let stale = p.now - Duration::from_secs(45);
    let ping = masked(OpCode::Ping, true, [1, 2, 3, 4], b"");
    p.server.handle_input(c, &ping, stale);
    p.advance(Duration::from_secs(15));
    assert!(!p.closed.contains(&c), "heard from 15 s ago, not 60");
}

#[test]
fn close_handshake_is_bounded_by_the_close_timeout() {
    let mut p = Pair::new();
    let c = p.connect();
    p.server.close(c, p.now).unwrap();
    assert_eq!(close_code(&p.frames(c)), Some(1000));
    assert!(!p.closed.contains(&c));
    p.advance(Duration::from_secs(6));
    assert!(p.closed.contains(&c));
}

/// The reason a connection's end is reported with says who began the close handshake, whether
/// the peer answered or not: the host ([`Server::close`]), a stop, or the peer (its code). A
/// host told `Closed(1000)` for its own close could not tell it from claude leaving; a stop's
/// unanswered Close was reported as a clean handshake.
#[test]
fn a_disconnect_says_who_began_the_close() {
    let reason = |p: &mut Pair| {
        let events = p.take_events();
        let reasons: Vec<_> = (events.iter())
            .filter_map(|e| match e {
                Event::Disconnected { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(reasons.len(), 1, "{events:?}");
        reasons[0].clone()
    };
    let close_1000 = 1000u16.to_be_bytes();
    // How the close handshake ends: the peer's Close, none in time, or its socket gone.
    #[derive(Clone, Copy, PartialEq)]
    enum End {
        Answered,
        TimedOut,
        Dropped,
    }
    let end = |p: &mut Pair, c, how: End, code: u16| match how {
        End::Answered => p.send_frame(c, OpCode::Close, true, &code.to_be_bytes()),
        End::TimedOut => p.advance(Duration::from_secs(6)),
        End::Dropped => {
            p.server.handle_close(c);
            p.closed.push(c);
        }
    };
    for how in [End::Answered, End::TimedOut, End::Dropped] {
        // The host's close.
        let mut p = Pair::new();
        let c = p.connect_initialized();
        p.take_events();
        p.server.close(c, p.now).unwrap();
        assert_eq!(close_code(&p.frames(c)), Some(1000));
        end(&mut p, c, how, 1000);
        assert!(p.closed.contains(&c));
        assert_eq!(reason(&mut p), DisconnectReason::ClosedByHost);
        // A stop.
        let mut p = Pair::new();
        let c = p.connect_initialized();
        p.take_events();
        p.server.shutdown(p.now);
        assert_eq!(close_code(&p.frames(c)), Some(1001));
        end(&mut p, c, how, 1001);
        assert!(p.closed.contains(&c));
        assert_eq!(reason(&mut p), DisconnectReason::ServerStopped);
        // A binary message, refused with 1003: the peer's answer is its close, none a timeout,
        // its socket gone the socket's end.
        let mut p = Pair::new();
        let c = p.connect_initialized();
        p.take_events();
        p.send_frame(c, OpCode::Binary, true, b"\x00");
        assert_eq!(close_code(&p.frames(c)), Some(1003));
        end(&mut p, c, how, 1003);
        let (expected, name) = match how {
            End::Answered => (DisconnectReason::Closed(Some(1003)), "closed"),
            End::TimedOut => (DisconnectReason::CloseTimeout, "close_timeout"),
            End::Dropped => (DisconnectReason::TransportClosed, "transport_closed"),
        };
        assert!(p.closed.contains(&c));
        assert_eq!(reason(&mut p), expected);
        assert_eq!(expected.to_string(), name);
    }
    // The peer's own close.
    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.take_events();
    p.send_frame(c, OpCode::Close, true, &close_1000);
    assert_eq!(close_code(&p.frames(c)), Some(1000));
    assert_eq!(reason(&mut p), DisconnectReason::Closed(Some(1000)));
}

/// A connection finished with bytes still to write (here the Close of a protocol fault) whose
/// peer never reads them is dropped after the close timeout. It had no deadline at all: a peer
/// could keep any number of such sockets (and their queued replies) open, each past the
/// connection limit, which counts only live connections.
#[test]
fn a_finished_connection_whose_peer_does_not_read_is_dropped_after_the_close_timeout() {
    let mut p = Pair::new();
    let c = p.connect();
    let mut f = Vec::new();
    claude_ide_bridge::ws::encode_frame(&mut f, OpCode::Text, true, None, b"unmasked");
    // Not pumped: the runtime cannot write (the peer does not read).
    p.server.handle_input(c, &f, p.now);
    assert!(
        !p.server.should_close(c),
        "the Close 1002 is still to be written"
    );
    let deadline = p
        .server
        .poll_timeout()
        .expect("a finished connection has a deadline");
    assert_eq!(deadline, p.now + Duration::from_secs(5));
    p.now += Duration::from_secs(6);
    p.server.handle_timeout(p.now);
    assert!(p.server.should_close(c));
    assert!(p.server.transmit(c).is_empty(), "dropped, not written");
}

/// After the host's Close, what the peer sends is not handled: a binary message no longer
/// restarts the close timeout (a peer sending one every 4 s kept the connection forever), a
/// call no longer reaches the host (it could never be answered), and a request's refused reply
/// no longer stops the reading of what came with it (the peer's Close).
#[test]
fn after_the_hosts_close_the_peer_cannot_keep_the_connection_or_call_the_host() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.server.close(c, p.now).unwrap();
    assert_eq!(close_code(&p.frames(c)), Some(1000));
    for _ in 0..3 {
        p.advance(Duration::from_secs(2));
        p.send_frame(c, OpCode::Binary, true, b"\x00");
        p.call_tool(
            c,
            9,
            "openDiff",
            json!({
            "old_file_path": "/ws/a.rs", "new_file_path": "/ws/a.rs",
            "new_file_contents": "x", "tab_name": "t"}),
        );
    }
    assert!(
        p.closed.contains(&c),
        "still open 6 s after the host's Close"
    );
    let events = p.take_events();
    assert!(
        !events.iter().any(|e| matches!(e, Event::ToolCall { .. })),
        "{events:?}"
    );

    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.server.close(c, p.now).unwrap();
    p.frames(c);
    let mut both = p.masked_frame(
        OpCode::Text,
        true,
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    both.extend(p.masked_frame(OpCode::Close, true, &1000u16.to_be_bytes()));
    p.raw(c, &both);
    assert!(p.closed.contains(&c), "the peer's Close was left unread");
    assert!(p.take_events().iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::ClosedByHost,
            ..
        }
    )));
}

// ---- docs/protocol.md, "JSON-RPC", "Batches" and "MCP lifecycle" --------------------------------

#[test]
fn lifecycle() {
    let mut p = Pair::new();
    let c = p.connect();
    p.take_events();
    // Before initialize: -32002, but ping works.
    let r = p.request(c, json!(1), "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32002);
    let r = p.request(c, json!(2), "ping", json!({}));
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    let r = p.request(c, json!("init"), "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.1.330"}}));
    assert_eq!(r["id"], "init");
    assert_eq!(r["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        r["result"]["capabilities"],
        json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {}})
    );
    assert_eq!(r["result"]["serverInfo"]["name"], "claude-ide-bridge");
    p.send_json(c, &json!({"jsonrpc": "2.0", "method": "initialized"}));
    let ev = p.take_events();
    assert!(
        matches!(&ev[..], [Event::Initialized { protocol_version, client_name: Some(n), .. }] if protocol_version == "2025-03-26" && n == "claude-code"),
        "{ev:?}"
    );
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": 4242}}),
    );
    assert_eq!(
        p.take_events(),
        vec![Event::IdeConnected {
            conn: c,
            pid: Some(4242)
        }]
    );
    let r = p.request(c, json!(3), "tools/list", json!({}));
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 15);
    assert_eq!(
        p.request(c, json!(4), "resources/list", json!({}))["result"],
        json!({"resources": []})
    );
    assert_eq!(
        p.request(c, json!(5), "prompts/list", json!({}))["result"],
        json!({"prompts": []})
    );
    // The lists are empty, so a resource read or a prompt asked for does not exist: MCP's
    // answers (both got -32601, for methods the capabilities declare).
    let r = p.request(c, json!(7), "resources/read", json!({"uri": "file:///x"}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert_eq!(r["error"]["message"], "resource not found: file:///x");
    let r = p.request(c, json!(8), "prompts/get", json!({"name": "x"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "unknown prompt: x");
    let r = p.request(c, json!(9), "resources/read", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        p.request(c, json!(6), "nope/nope", json!({}))["error"]["code"],
        -32601
    );
    // A notification never gets an answer, even an unknown one.
    p.send_json(c, &json!({"jsonrpc": "2.0", "method": "nope/nope"}));
    assert!(p.messages(c).is_empty());
}

#[test]
fn version_negotiation() {
    for (asked, got) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut p = Pair::new();
        let c = p.connect();
        let r = p.request(
            c,
            json!(1),
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}}),
        );
        assert_eq!(r["result"]["protocolVersion"], got);
    }
    let mut p = Pair::new();
    let c = p.connect();
    assert_eq!(
        p.request(c, json!(1), "initialize", json!({}))["error"]["code"],
        -32602
    );
    // MCP's params are objects: an array is refused, even where positions would fit.
    let r = p.request(c, json!(2), "initialize", json!(["2025-03-26", {}]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid initialize params: invalid type: sequence"),
        "{r}"
    );
    // Neither refusal counts as the initialize.
    let r = p.request(c, json!(3), "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    // `clientInfo` is recorded when its members are strings, and never refuses the initialize
    // (both of these got -32602 before).
    for (info, name) in [
        (json!({"name": 1, "version": "2"}), None),
        (json!("claude"), None),
        (json!({"name": "claude-code"}), Some("claude-code")),
    ] {
        let mut p = Pair::new();
        let c = p.connect();
        let r = p.request(
            c,
            json!(1),
            "initialize",
            json!({"protocolVersion": "2025-06-18", "clientInfo": info}),
        );
        assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{info}: {r}");
        p.send_json(
            c,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        let events = p.take_events();
        let recorded = events.iter().find_map(|e| match e {
            Event::Initialized { client_name, .. } => Some(client_name.clone()),
            _ => None,
        });
        assert_eq!(recorded, Some(name.map(String::from)), "{info}: {events:?}");
    }
}

#[test]
fn positional_params_are_refused() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    // A tools/call whose params are an array: read by the general rules, refused as a whole.
    let r = p.request(
        c,
        json!(1),
        "tools/call",
        json!(["close_tab", {"tab_name": "t"}]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid tools/call params: invalid type: sequence"),
        "{r}"
    );
    assert!(p.take_events().is_empty());
    // A notification's positional params are ignored as any unreadable params are.
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "ide_connected", "params": [4242]}),
    );
    assert_eq!(
        p.take_events(),
        vec![Event::IdeConnected { conn: c, pid: None }]
    );
}

#[test]
fn parse_and_invalid_request_errors() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.send_text(c, "{not json");
    assert_eq!(
        p.messages(c),
        vec![
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error: key must be a string at line 1 column 2"}})
        ]
    );
    p.send_text(c, r#"{"jsonrpc":"2.0","id":1}"#);
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    p.send_text(c, r#""just a string""#);
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    // `params: null` is neither an object nor an array, for every method: refused before any
    // method reads it, with the id.
    for method in ["tools/list", "files/read", "tools/call"] {
        p.send_text(
            c,
            &format!(r#"{{"jsonrpc":"2.0","id":4,"method":"{method}","params":null}}"#),
        );
        let m = p.messages(c);
        assert_eq!(m[0]["id"], 4, "{method}: {m:?}");
        assert_eq!(m[0]["error"]["code"], -32600, "{method}: {m:?}");
    }
    // A `jsonrpc` that is not a string does not lose the id either.
    p.send_text(c, r#"{"jsonrpc":2.0,"id":5,"method":"ping"}"#);
    let m = p.messages(c);
    assert_eq!(
        (&m[0]["id"], &m[0]["error"]["code"]),
        (&json!(5), &json!(-32600))
    );
    // Responses are never answered, not even odd ones: the error a peer sends about a message it
    // could not read (`id: null`), one without `jsonrpc`. Both got -32600 before.
    p.send_text(
        c,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
    );
    p.send_text(c, r#"{"id":6,"result":{}}"#);
    assert_eq!(p.messages(c), Vec::<Value>::new());
    // An unknown method's name is echoed cut to 64 characters, as a tool's is: the answer of a
    // batch entry waits with the batch, and a 10 MiB name was kept whole.
    let long = "é".repeat(100_000);
    let r = p.request(c, json!(7), &long, json!({}));
    assert_eq!(r["error"]["code"], -32601);
    let message = r["error"]["message"].as_str().unwrap();
    assert_eq!(message, format!("method not found: {}...", "é".repeat(64)));
    // A notification sent as a request (with an id) is said to be one.
    let r = p.request(c, json!(8), "notifications/initialized", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a notification, not a request: send it without an id"),
        "{r}"
    );
}

#[test]
fn batches_follow_the_negotiated_version() {
    let mut p = Pair::new();
    let c = p.connect_initialized(); // 2025-06-18: no batches
    p.send_text(c, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    // An array of responses only is not answered, as no response is (it got -32600); one with
    // a request in it is refused.
    p.send_text(
        c,
        r#"[{"jsonrpc":"2.0","id":5,"result":{}},{"id":6,"error":{}}]"#,
    );
    assert!(p.messages(c).is_empty());
    p.send_text(
        c,
        r#"[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
    );
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    // Before initialize, the refusal says so (it named a version nobody had agreed on).
    let c = p.connect();
    p.send_text(c, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    let m = p.messages(c);
    assert_eq!(
        m[0]["error"]["message"],
        "batches are accepted only after initialize, in protocol version 2025-03-26 and older"
    );

    let mut p = Pair::new();
    let c = p.connect();
    p.request(
        c,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}}),
    );
    p.send_text(c, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}]"#);
    let m = p.messages(c);
    assert_eq!(m.len(), 1);
    let arr = m[0].as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0], json!({"jsonrpc":"2.0","id":1,"result":{}}));
    assert_eq!(arr[1]["error"]["code"], -32601);
    // A batch holding a deferred tool call is answered once the host answers.
    p.send_text(c, r#"[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"getWorkspaceFolders","arguments":{}}}]"#);
    assert!(p.messages(c).is_empty());
    let call = match p.take_events().pop() {
        Some(Event::ToolCall { call, .. }) => call,
        e => panic!("{e:?}"),
    };
    p.server.respond(call, ToolResult::text("x")).unwrap();
    let m = p.messages(c);
    assert_eq!(m[0].as_array().unwrap().len(), 2);
    // Over the batch limit.
    let many: Vec<Value> = (0..65)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"}))
        .collect();
    p.send_json(c, &Value::Array(many));
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
}

// ---- docs/protocol.md, "Tools" and "Pending calls" ----------------------------------------------

fn expect_call(p: &mut Pair) -> (claude_ide_bridge::CallId, ToolCall) {
    let ev = p.take_events();
    match &ev[..] {
        [Event::ToolCall { call, tool }] => (*call, tool.clone()),
        _ => panic!("expected one tool call: {ev:?}"),
    }
}

#[test]
fn tool_calls_reach_the_host_and_answers_reach_the_client() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.call_tool(c, 7, "getDiagnostics", json!({"uri": "file:///w/a.rs"}));
    let (call, tool) = expect_call(&mut p);
    assert_eq!(tool.name(), ToolName::GetDiagnostics);
    assert!(p.messages(c).is_empty(), "deferred until the host answers");
    p.server
        .respond(call, ToolResult::json(&json!([])))
        .unwrap();
    assert_eq!(
        p.messages(c),
        vec![json!({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"[]"}]}})]
    );
    assert_eq!(
        p.server.respond(call, ToolResult::ok()),
        Err(claude_ide_bridge::ApiError::NotPending)
    );
}

#[test]
fn a_large_answer_or_notification_leaves_no_large_buffer_behind() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    make_ready(&mut p, c);
    p.messages(c);
    let big = "x".repeat(200_000);
    p.call_tool(c, 7, "getDiagnostics", json!({}));
    let (call, _) = expect_call(&mut p);
    p.server.respond(call, ToolResult::text(&big)).unwrap();
    assert_eq!(p.messages(c)[0]["result"]["content"][0]["text"], big);
    assert!(claude_ide_bridge::hooks::server_memory(&p.server) <= 16 * 1024);
    let note = Notification::AtMentioned(AtMentioned {
        file_path: big.clone(),
        line_start: None,
        line_end: None,
    });
    assert_eq!(p.server.notify(Target::All, &note, p.now), 1);
    assert_eq!(p.messages(c)[0]["params"]["filePath"], big);
    assert!(claude_ide_bridge::hooks::server_memory(&p.server) <= 16 * 1024);
    // A small answer's buffer is kept for the next one.
    p.call_tool(c, 8, "getDiagnostics", json!({}));
    let (call, _) = expect_call(&mut p);
    p.server.respond(call, ToolResult::text("small")).unwrap();
    assert!(claude_ide_bridge::hooks::server_memory(&p.server) > 0);
}

#[test]
fn only_a_connection_with_bytes_to_send_is_reported_ready() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    // A call handed to the host and a notification: nothing to send yet, so a runtime is not
    // sent looking for output.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "getDiagnostics", "arguments": {}}});
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}});
    let mut bytes = p.masked_frame(OpCode::Text, true, call.to_string().as_bytes());
    bytes.extend(p.masked_frame(OpCode::Text, true, note.to_string().as_bytes()));
    p.server.handle_input(c, &bytes, p.now);
    assert_eq!(p.server.poll_transmit_ready(), None);
    let (id, _) = expect_call(&mut p);
    // The answer is.
    p.server.respond(id, ToolResult::ok()).unwrap();
    assert_eq!(p.server.poll_transmit_ready(), Some(c));
    assert_eq!(p.server.poll_transmit_ready(), None, "reported once");
    p.pump();
    p.inbox.clear();
    // So is a ping's pong, and a request answered at once.
    let ping = p.masked_frame(OpCode::Ping, true, b"hi");
    p.server.handle_input(c, &ping, p.now);
    assert_eq!(p.server.poll_transmit_ready(), Some(c));
    p.pump();
    let list = p.masked_frame(
        OpCode::Text,
        true,
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
    );
    p.server.handle_input(c, &list, p.now);
    assert_eq!(p.server.poll_transmit_ready(), Some(c));
}

/// From MCP 2025-11-25 on (SEP-1303, the version the real client offers first), arguments that
/// do not fit a tool's schema are the tool's error, which the model sees and can correct (they
/// were -32602, which the client keeps from the model); an unknown tool and malformed params stay
/// protocol errors. The host sees none of them.
#[test]
fn tool_argument_errors_are_tool_errors_from_2025_11_25() {
    let mut p = Pair::new();
    let c = p.connect();
    let r = p.request(
        c,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    p.take_events();
    for (name, args, says) in [
        (
            "openDiff",
            json!({"old_file_path": "/a"}),
            "invalid arguments for openDiff: missing field",
        ),
        (
            "openFile",
            json!({"filePath": 3}),
            "invalid arguments for openFile: invalid type: integer `3`",
        ),
        (
            "close_tab",
            json!({"tab_name": 5}),
            "invalid arguments for close_tab: invalid type: integer `5`",
        ),
    ] {
        p.call_tool(c, 1, name, args);
        let m = p.messages(c);
        assert_eq!(m[0]["id"], 1, "{m:?}");
        assert_eq!(m[0]["result"]["isError"], true, "{name}: {m:?}");
        assert!(texts(&m[0]["result"])[0].starts_with(says), "{name}: {m:?}");
    }
    p.call_tool(c, 2, "noSuchTool", json!({}));
    assert_eq!(p.messages(c)[0]["error"]["code"], -32602);
    let r = p.request(c, json!(3), "tools/call", json!({"arguments": {}}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // Arguments that are not an object break CallToolRequest's own schema: a protocol error.
    for args in [json!("x"), json!([1]), json!(5)] {
        p.call_tool(c, 4, "close_tab", args.clone());
        let m = p.messages(c);
        assert_eq!(m[0]["error"]["code"], -32602, "{args}: {m:?}");
        assert_eq!(
            m[0]["error"]["message"],
            "invalid tools/call params: arguments must be an object"
        );
    }
    p.call_tool(c, 5, "closeAllDiffTabs", Value::Null);
    assert_eq!(
        texts(&p.messages(c)[0]["result"]),
        vec!["CLOSED_0_DIFF_TABS"]
    );
    assert!(p.take_events().is_empty());
}

/// Why params could not be read quotes the value serde did not expect: cut in its middle, so a
/// 1 MB string in a wrong place answers a few hundred bytes (it answered 4 MB, the string in
/// full and escaped twice), still saying what was expected and where; both as a tool error and
/// as invalid params.
#[test]
fn a_long_value_is_cut_in_the_error_that_quotes_it() {
    let long = "\u{378}".repeat(100_000);
    for version in ["2025-11-25", "2025-06-18"] {
        let mut p = Pair::new();
        let c = p.connect();
        p.request(
            c,
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}}),
        );
        p.send_json(
            c,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        p.call_tool(c, 1, "openFile", json!({"filePath": "/a", "preview": long}));
        let m = p.messages(c);
        let said = if version == "2025-11-25" {
            texts(&m[0]["result"])[0].clone()
        } else {
            m[0]["error"]["message"].as_str().unwrap().to_string()
        };
        assert!(said.len() < 600, "{version}: {} bytes", said.len());
        assert!(
            said.starts_with("invalid arguments for openFile: invalid type: string"),
            "{said}"
        );
        assert!(
            said.contains("...") && said.contains("expected a boolean"),
            "{said}"
        );
        assert!(
            said.contains("expected a boolean at line 1 column "),
            "{said}"
        );
        // A short one is whole.
        p.call_tool(
            c,
            2,
            "openFile",
            json!({"filePath": "/a", "preview": "yes"}),
        );
        let m = p.messages(c);
        let said = if version == "2025-11-25" {
            texts(&m[0]["result"])[0].clone()
        } else {
            m[0]["error"]["message"].as_str().unwrap().to_string()
        };
        assert!(
            said.contains("invalid type: string \"yes\", expected a boolean at line 1 column"),
            "{said}"
        );
    }
}

/// Before MCP 2025-11-25, arguments that do not fit a tool's schema are invalid params.
#[test]
fn tool_argument_errors_are_invalid_params() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    for (name, args) in [
        ("openDiff", json!({"old_file_path": "/a"})),
        ("openFile", json!({"filePath": 3})),
        ("noSuchTool", json!({})),
    ] {
        p.call_tool(c, 1, name, args);
        let m = p.messages(c);
        assert_eq!(m[0]["error"]["code"], -32602, "{name}: {m:?}");
    }
    // One unknown-tool check whichever way the message is read: a peer's long name is cut to 64
    // characters in the answer, in the real client's member order and in another.
    let long = "z".repeat(300);
    let orders = [
        format!(
            r#"{{"method":"tools/call","params":{{"name":"{long}","arguments":{{}}}},"jsonrpc":"2.0","id":7}}"#
        ),
        format!(
            r#"{{"params":{{"arguments":{{}},"name":"{long}"}},"id":7,"jsonrpc":"2.0","method":"tools/call"}}"#
        ),
    ];
    for text in orders {
        p.send_text(c, &text);
        let m = p.messages(c);
        assert_eq!(m[0]["id"], 7, "{m:?}");
        assert_eq!(m[0]["error"]["code"], -32602, "{m:?}");
        assert_eq!(
            m[0]["error"]["message"],
            format!("unknown tool: {}...", "z".repeat(64))
        );
    }
    // A tool the host does not offer is unknown too.
    let mut p = Pair::with_config(|cfg| cfg.tools = ToolSet::all().without(ToolName::ExecuteCode));
    let c = p.connect_initialized();
    p.call_tool(c, 1, "executeCode", json!({"code": "1"}));
    assert_eq!(p.messages(c)[0]["error"]["code"], -32602);
    let r = p.request(c, json!(2), "tools/list", json!({}));
    assert!(r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["name"] != "executeCode"));
}

fn open_diff(
    p: &mut Pair,
    c: claude_ide_bridge::ConnectionId,
    id: i64,
    tab: &str,
) -> claude_ide_bridge::CallId {
    p.call_tool(c, id, "openDiff", json!({"old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs", "new_file_contents": "fn main() {}\n", "tab_name": tab}));
    let (call, tool) = expect_call(p);
    assert!(matches!(tool, ToolCall::OpenDiff(ref a) if a.tab_name == tab));
    call
}

#[test]
fn deferred_diff_answered_after_other_calls() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 10, "✻ [Claude Code] a.rs (4f025d) ⧉");
    p.call_tool(c, 11, "getWorkspaceFolders", json!({}));
    let (call, _) = expect_call(&mut p);
    p.server
        .respond(
            call,
            ToolResult::json(&json!({"success": true, "folders": [], "rootPath": "/w"})),
        )
        .unwrap();
    assert_eq!(p.messages(c)[0]["id"], 11);
    p.server
        .respond(diff, ToolResult::file_saved("fn main() {}\n"))
        .unwrap();
    let m = p.messages(c);
    assert_eq!(m[0]["id"], 10);
    assert_eq!(texts(&m[0]["result"]), vec!["FILE_SAVED", "fn main() {}\n"]);
}

#[test]
fn close_tab_resolves_the_pending_diff_as_rejected() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 10, "tab-A");
    p.call_tool(c, 11, "close_tab", json!({"tab_name": "tab-A"}));
    let m = p.messages(c);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0]["id"], 10);
    assert_eq!(texts(&m[0]["result"]), vec!["DIFF_REJECTED", "tab-A"]);
    assert_eq!(m[1]["id"], 11);
    assert_eq!(texts(&m[1]["result"]), vec!["TAB_CLOSED"]);
    let ev = p.take_events();
    assert!(ev.contains(&Event::CallCancelled {
        call: diff,
        reason: CancelReason::TabClosed
    }));
    assert!(ev.contains(&Event::TabClosed {
        conn: c,
        tab_name: "tab-A".into()
    }));
    assert!(p.server.respond(diff, ToolResult::tab_closed()).is_err());
    // Closing again (the client sends close_tab twice) just answers TAB_CLOSED.
    p.call_tool(c, 12, "close_tab", json!({"tab_name": "tab-A"}));
    assert_eq!(texts(&p.messages(c)[0]["result"]), vec!["TAB_CLOSED"]);
}

#[test]
fn a_tool_set_with_open_diff_has_the_tools_that_close_diffs() {
    let few = ToolSet::none()
        .with(ToolName::OpenDiff)
        .with(ToolName::GetDiagnostics);
    let mut p = Pair::with_config(|c| c.tools = few);
    let c = p.connect_initialized();
    let listed = p.request(c, json!(1), "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "openDiff",
            "close_tab",
            "closeAllDiffTabs",
            "getDiagnostics"
        ]
    );
    // claude closes a diff the user decided in its terminal: the pending call ends.
    open_diff(&mut p, c, 10, "tab-A");
    p.call_tool(c, 11, "close_tab", json!({"tab_name": "tab-A"}));
    let m = p.messages(c);
    assert_eq!(texts(&m[0]["result"]), vec!["DIFF_REJECTED", "tab-A"]);
    assert_eq!(texts(&m[1]["result"]), vec!["TAB_CLOSED"]);
    // The same for a set given later.
    p.server
        .set_tools(ToolSet::none().with(ToolName::OpenDiff), p.now);
    assert!(p.server.config().tools.contains(ToolName::CloseAllDiffTabs));
    // Without openDiff, nothing is added.
    p.server
        .set_tools(ToolSet::none().with(ToolName::GetDiagnostics), p.now);
    assert_eq!(p.server.config().tools.len(), 1);
}

#[test]
fn close_all_diff_tabs_only_touches_this_clients_diffs() {
    let mut p = Pair::new();
    let a = p.connect_initialized();
    let b = p.connect_initialized();
    open_diff(&mut p, a, 1, "t1");
    open_diff(&mut p, a, 2, "t2");
    let other = open_diff(&mut p, b, 1, "t1");
    p.call_tool(a, 3, "closeAllDiffTabs", json!({}));
    let m = p.messages(a);
    assert_eq!(m.len(), 3);
    assert_eq!(texts(&m[2]["result"]), vec!["CLOSED_2_DIFF_TABS"]);
    assert!(p.messages(b).is_empty());
    p.server.respond(other, ToolResult::tab_closed()).unwrap();
    assert_eq!(texts(&p.messages(b)[0]["result"]), vec!["TAB_CLOSED"]);
}

#[test]
fn repeated_tab_name_rejects_the_earlier_diff() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let first = open_diff(&mut p, c, 1, "same");
    p.call_tool(c, 2, "openDiff", json!({"old_file_path": "/w/a", "new_file_path": "/w/a", "new_file_contents": "x", "tab_name": "same"}));
    let m = p.messages(c);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0]["id"], 1);
    assert_eq!(texts(&m[0]["result"]), vec!["DIFF_REJECTED", "same"]);
    let ev = p.take_events();
    assert_eq!(
        ev[0],
        Event::CallCancelled {
            call: first,
            reason: CancelReason::Replaced
        }
    );
    assert!(matches!(ev[1], Event::ToolCall { .. }));
}

/// `is_pending` says whether a call still waits: not once answered, cancelled, or its connection
/// closing (a host asks before slow work: a client gone meanwhile had ~2,000 reads of 9 MiB
/// done for it over 30 s in the abuse audit, holding up every other client).
#[test]
fn a_call_is_pending_until_answered_cancelled_or_its_connection_closes() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let answered = open_diff(&mut p, c, 1, "a");
    let cancelled = open_diff(&mut p, c, 2, "b");
    let closed = open_diff(&mut p, c, 3, "c");
    for call in [answered, cancelled, closed] {
        assert!(p.server.is_pending(call));
    }
    p.server
        .respond(answered, ToolResult::tab_closed())
        .unwrap();
    assert!(!p.server.is_pending(answered));
    p.send_json(
        c,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": 2}}),
    );
    assert!(!p.server.is_pending(cancelled));
    assert!(p.server.is_pending(closed));
    p.server.close(c, p.now).unwrap();
    assert!(!p.server.is_pending(closed));
}

#[test]
fn cancellation_drops_the_call_without_an_answer() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 9, "t");
    p.send_json(c, &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": 9, "reason": "user"}}));
    assert!(p.messages(c).is_empty());
    assert_eq!(
        p.take_events(),
        vec![Event::CallCancelled {
            call: diff,
            reason: CancelReason::Cancelled
        }]
    );
    assert!(p.server.respond(diff, ToolResult::tab_closed()).is_err());
}

/// An id is found by its value, not its text: a call whose string id is written with an escape
/// is cancelled by the same string written plainly, and the other way round; an integer never
/// cancels a string id of the same digits.
#[test]
fn cancellation_finds_a_string_id_whatever_its_escapes() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"getOpenEditors","arguments":{{}}}}}}"#
        )
    };
    let cancel = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        )
    };
    for (sent, cancelled_by) in [(r#""\u0061""#, r#""a""#), (r#""b""#, r#""\u0062""#)] {
        p.send_text(c, &call(sent));
        let (handle, _) = expect_call(&mut p);
        p.send_text(c, &cancel(cancelled_by));
        assert_eq!(
            p.take_events(),
            vec![Event::CallCancelled {
                call: handle,
                reason: CancelReason::Cancelled
            }],
            "{sent} cancelled by {cancelled_by}"
        );
    }
    p.send_text(c, &call(r#""\u0031""#));
    let (handle, _) = expect_call(&mut p);
    p.send_text(c, &cancel("1"));
    assert!(p.take_events().is_empty());
    p.server.respond(handle, ToolResult::tab_closed()).unwrap();
    assert_eq!(p.messages(c)[0]["id"], "1");
}

/// A call reusing the id of one still pending on the connection is refused (MCP: an id is not
/// used twice in a session), whatever the id's escapes; it reaches neither the host nor the
/// pending diff of its tab; the id is free again once the first call is done.
#[test]
fn a_call_reusing_a_pending_calls_id_is_refused() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let first = open_diff(&mut p, c, 3, "t");
    p.call_tool(c, 3, "getOpenEditors", json!({}));
    let refused = p.messages(c);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["id"], 3);
    assert_eq!(refused[0]["error"]["code"], -32600);
    assert_eq!(
        refused[0]["error"]["message"],
        "request id already in use by a call in progress"
    );
    // The same tab: the pending diff is not replaced.
    p.call_tool(c, 3, "openDiff", json!({"old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs", "new_file_contents": "x\n", "tab_name": "t"}));
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    assert!(p.take_events().is_empty());
    // A string id, written once plainly and once escaped.
    p.send_text(
        c,
        r#"{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"getOpenEditors"}}"#,
    );
    let (second, _) = expect_call(&mut p);
    p.send_text(c, r#"{"jsonrpc":"2.0","id":"\u006b","method":"tools/call","params":{"name":"getOpenEditors"}}"#);
    assert_eq!(p.messages(c)[0]["error"]["code"], -32600);
    assert!(p.take_events().is_empty());
    // The cancel reaches the one call of that id; then the id can be used again.
    p.send_json(
        c,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": 3}}),
    );
    assert_eq!(
        p.take_events(),
        vec![Event::CallCancelled {
            call: first,
            reason: CancelReason::Cancelled
        }]
    );
    p.call_tool(c, 3, "getOpenEditors", json!({}));
    expect_call(&mut p);
    p.server.respond(second, ToolResult::tab_closed()).unwrap();
    assert_eq!(p.messages(c)[0]["id"], "k");
}

/// A call whose `_meta` names a tool use is the model's (`CallId::asker`); the client's own
/// carry a `_meta` naming none; a call without `_meta` tells nothing. Its cancellation names the
/// very same handle.
#[test]
fn the_models_calls_are_told_from_the_clients_own() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let args = json!({"old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs", "new_file_contents": "x\n", "tab_name": "t"});
    p.send_json(c, &json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"openDiff","arguments":args,"_meta":{"progressToken":5,"claudecode/toolUseId":"toolu_01"}}}));
    let (by_model, _) = expect_call(&mut p);
    assert_eq!(by_model.asker(), Asker::Model);
    p.send_json(c, &json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///w/a.rs"},"_meta":{"progressToken":6}}}));
    let (own, _) = expect_call(&mut p);
    assert_eq!(own.asker(), Asker::Client);
    p.send_json(c, &json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"getDiagnostics","arguments":{}}}));
    assert_eq!(expect_call(&mut p).0.asker(), Asker::Unknown);
    p.send_json(
        c,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": 5}}),
    );
    assert_eq!(
        p.take_events(),
        vec![Event::CallCancelled {
            call: by_model,
            reason: CancelReason::Cancelled
        }]
    );
}

#[test]
fn disconnect_and_shutdown_resolve_pending_diffs() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 1, "t");
    p.server.handle_close(c);
    let ev = p.take_events();
    assert_eq!(
        ev[0],
        Event::CallCancelled {
            call: diff,
            reason: CancelReason::Disconnected
        }
    );
    assert!(matches!(
        ev[1],
        Event::Disconnected {
            reason: DisconnectReason::TransportClosed,
            ..
        }
    ));

    // By default a tool error (nobody decided); `None` answers `DIFF_REJECTED`, as a closed tab.
    let (_, _, diff_answer) = shut_down_with_a_diff_and_a_call_pending(Pair::new());
    assert_eq!(diff_answer["result"]["isError"], true);
    assert_eq!(texts(&diff_answer["result"]), vec![UNDECIDED_AT_STOP]);
    let rejecting = Pair::with_config(|c| c.diff_error_at_stop = None);
    let (mut p, c, diff_answer) = shut_down_with_a_diff_and_a_call_pending(rejecting);
    assert_eq!(texts(&diff_answer["result"]), vec!["DIFF_REJECTED", "t"]);
    // A client reconnecting during the stop is told so, not "too many connections".
    let (_, head) = p.handshake(&real_request(Some(TOKEN)));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.contains("the IDE is shutting down"), "{head}");
    p.send_frame(c, OpCode::Close, true, &1001u16.to_be_bytes());
    assert!(p.server.is_idle());
}

/// A call still pending when the host closes its connection can no longer be answered: the
/// answer is refused (`NotPending`), as for any call not pending, where it was taken (`Ok`) and
/// dropped.
#[test]
fn an_answer_after_the_host_closed_the_connection_is_refused() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 1, "t");
    p.server.close(c, p.now).unwrap();
    let before = p.frames(c);
    assert_eq!(close_code(&before), Some(1000));
    assert_eq!(
        p.server.respond(diff, ToolResult::file_saved("x")),
        Err(ApiError::NotPending)
    );
    assert!(p.frames(c).is_empty());
    // The close handshake ends it, and the call is withdrawn then.
    p.take_events();
    p.send_frame(c, OpCode::Close, true, &1000u16.to_be_bytes());
    assert!(p.take_events().contains(&Event::CallCancelled {
        call: diff,
        reason: CancelReason::Disconnected
    }));
}

/// Every list is given whole: params that are not an object, or a cursor (one this host never
/// gave), are answered -32602, as MCP's pagination asks (they were ignored, and the whole list
/// answered); none and `{}` get the list.
#[test]
fn list_requests_refuse_cursors_and_params_that_are_not_objects() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    for (i, params) in [json!([1]), json!({"cursor": "bogus"}), json!({"cursor": 5})]
        .into_iter()
        .enumerate()
    {
        for method in ["tools/list", "prompts/list", "resources/list"] {
            let r = p.request(c, json!(i), method, params.clone());
            assert_eq!(r["error"]["code"], -32602, "{method} {params}: {r}");
        }
    }
    for params in [json!({}), json!({"cursor": null, "_meta": {}})] {
        let r = p.request(c, json!(9), "tools/list", params.clone());
        assert!(r["result"]["tools"].is_array(), "{params}: {r}");
    }
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}),
    );
    assert!(p.messages(c)[0]["result"]["tools"].is_array());
}

/// On `p`: an `openDiff` (id 1, tab "t") and a `getOpenEditors` (id 2) pending, then a shutdown.
/// Checks what every shutdown does (the other call's -32603, close 1001, the diff withdrawn) and
/// returns the pair, the connection and the diff's answer.
fn shut_down_with_a_diff_and_a_call_pending(mut p: Pair) -> (Pair, ConnectionId, Value) {
    let c = p.connect_initialized();
    let diff = open_diff(&mut p, c, 1, "t");
    p.call_tool(c, 2, "getOpenEditors", json!({}));
    expect_call(&mut p);
    p.server.shutdown(p.now);
    let f = p.frames(c);
    let mut msgs = text_messages(&f);
    assert_eq!(msgs[0]["id"], 1);
    assert_eq!(msgs[1]["error"]["code"], -32603);
    assert_eq!(close_code(&f), Some(1001));
    assert!(p.take_events().contains(&Event::CallCancelled {
        call: diff,
        reason: CancelReason::ServerStopped
    }));
    let diff_answer = msgs.swap_remove(0);
    (p, c, diff_answer)
}

#[test]
fn shutdown_answers_pending_diffs_with_the_configured_error() {
    let why = "the editor quit before the change was decided";
    let (_, _, diff_answer) = shut_down_with_a_diff_and_a_call_pending(Pair::with_config(|c| {
        c.diff_error_at_stop = Some(why.into())
    }));
    // A tool error, not a rejection: nobody decided.
    assert_eq!(diff_answer["result"]["isError"], true);
    assert_eq!(texts(&diff_answer["result"]), vec![why]);
}

// ---- docs/protocol.md, "Notifications" ----------------------------------------------------------

#[test]
fn notifications_to_all_and_to_one() {
    let mut p = Pair::new();
    let a = p.connect_initialized();
    let b = p.connect_initialized();
    let uninit = p.connect();
    let n = Notification::ToolsListChanged;
    assert_eq!(p.server.notify(Target::All, &n, p.now), 2);
    assert_eq!(
        p.messages(a),
        vec![json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})]
    );
    assert_eq!(p.messages(b).len(), 1);
    assert!(p.messages(uninit).is_empty());
    assert_eq!(p.server.notify(Target::Connection(b), &n, p.now), 1);
    assert!(p.messages(a).is_empty());
    assert_eq!(p.messages(b).len(), 1);
}

/// A client set to WSL's paths (a `claude` in WSL, the host on Windows) is sent a selection and an
/// at-mention of a Windows drive's file by the path WSL mounts it at; the other clients, in the
/// same broadcast, as the host gave them; a connection that is gone takes no setting.
#[test]
fn a_client_in_wsl_is_sent_the_paths_wsl_mounts_the_drive_at() {
    let mut p = Pair::new();
    let windows = p.connect_initialized();
    let wsl = p.connect_initialized();
    make_ready(&mut p, windows);
    make_ready(&mut p, wsl);
    p.messages(windows);
    p.messages(wsl);
    assert_eq!(p.server.client_paths(wsl), Some(ClientPaths::AsGiven));
    assert!(p.server.set_client_paths(wsl, ClientPaths::WslMounts));
    assert_eq!(p.server.client_paths(wsl), Some(ClientPaths::WslMounts));
    let at = Selection::new(Position::new(4, 0), Position::new(5, 16));
    let moved = Notification::SelectionChanged(SelectionChanged {
        text: "def sub(a, b):".into(),
        file_path: r"C:\Users\me\my app\calc.py".into(),
        file_url: "file:///c:/Users/me/my%20app/calc.py".into(),
        selection: at,
    });
    assert_eq!(p.server.notify(Target::All, &moved, p.now), 2);
    let theirs = &p.messages(wsl)[0]["params"];
    assert_eq!(theirs["filePath"], "/mnt/c/Users/me/my app/calc.py");
    assert_eq!(theirs["fileUrl"], "file:///mnt/c/Users/me/my%20app/calc.py");
    assert_eq!(theirs["text"], "def sub(a, b):");
    let mine = &p.messages(windows)[0]["params"];
    assert_eq!(mine["filePath"], r"C:\Users\me\my app\calc.py");
    assert_eq!(mine["fileUrl"], "file:///c:/Users/me/my%20app/calc.py");

    let mention = Notification::AtMentioned(AtMentioned {
        file_path: r"C:\Users\me\calc.py".into(),
        line_start: Some(0),
        line_end: Some(1),
    });
    assert_eq!(p.server.notify(Target::Connection(wsl), &mention, p.now), 1);
    assert_eq!(
        p.messages(wsl),
        vec![
            json!({"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/mnt/c/Users/me/calc.py","lineStart":0,"lineEnd":1}})
        ]
    );
    assert!(p.messages(windows).is_empty());

    p.server.close(wsl, p.now).unwrap();
    p.advance(Duration::from_secs(60));
    assert!(!p.server.set_client_paths(wsl, ClientPaths::AsGiven));
    assert_eq!(p.server.client_paths(wsl), None);
}

/// An at-mention sent to all, queued while no client is initialized.
fn mention_of(path: &str, line: u32) -> Notification {
    Notification::AtMentioned(AtMentioned {
        file_path: path.into(),
        line_start: Some(line),
        line_end: Some(line + 1),
    })
}

/// `ide_connected`, as `claude` sends it after `notifications/initialized`.
fn say_connected(p: &mut Pair, c: ConnectionId, pid: u32) {
    p.send_json(
        c,
        &json!({"jsonrpc":"2.0","method":"ide_connected","params":{"pid":pid}}),
    );
}

/// The lists `claude` asks for after `ide_connected`, answered.
fn list_all(p: &mut Pair, c: ConnectionId, lists: &[&str]) {
    for (id, method) in lists.iter().enumerate() {
        let r = p.request(c, json!(100 + id), method, json!({}));
        assert!(r.get("result").is_some(), "{r}");
    }
}

const LISTS: [&str; 3] = ["tools/list", "prompts/list", "resources/list"];

/// Makes `c` ready for the IDE's news as `claude` does (`ide_connected`, its three lists) and
/// lets its welcome go (300 ms later): from then on at-mentions are written to it at once.
fn make_ready(p: &mut Pair, c: ConnectionId) {
    say_connected(p, c, 4242);
    list_all(p, c, &LISTS);
    p.advance(Duration::from_millis(300));
    p.take_events();
}

/// The at-mentions lines of what `c` was sent.
fn mention_lines(p: &mut Pair, c: ConnectionId) -> Vec<Value> {
    p.messages(c)
        .into_iter()
        .filter(|m| m["method"] == "at_mentioned")
        .map(|m| m["params"]["lineStart"].clone())
        .collect()
}

#[test]
fn at_mentions_queue_while_nobody_is_connected_and_expire() {
    let mut p = Pair::new();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 1), p.now),
        0
    );
    p.now += Duration::from_secs(400); // past the TTL
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 2), p.now);
    let c = p.connect_initialized_keep();
    say_connected(&mut p, c, 4242);
    list_all(&mut p, c, &LISTS);
    p.advance(Duration::from_millis(300));
    let m = p.messages(c);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        m[0],
        json!({"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/w/a.rs","lineStart":2,"lineEnd":3}})
    );
}

/// The at-mentions queued before a client came wait until it is ready for them: `claude` drops
/// one that comes before it has its answers to `tools/list`, `prompts/list` and `resources/list`
/// (docs/e2e.md). They are written 300 ms after the last, by then named as the client names files:
/// at its `ide_connected` a host on Windows learns that it is a `claude` in WSL (its pid is no
/// Windows process).
#[test]
fn queued_at_mentions_wait_for_the_client_to_be_ready_and_are_named_its_way() {
    let mut p = Pair::new();
    p.server
        .notify(Target::All, &mention_of(r"C:\Users\me\calc.py", 0), p.now);
    let c = p.connect_initialized_keep();
    assert!(p.messages(c).is_empty(), "held");
    say_connected(&mut p, c, 4242);
    assert!(p
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::IdeConnected { conn, pid: Some(4242) } if *conn == c)));
    p.server.set_client_paths(c, ClientPaths::WslMounts);
    list_all(&mut p, c, &LISTS[..2]);
    p.advance(Duration::from_secs(1));
    assert!(p.messages(c).is_empty(), "not before its resources");
    list_all(&mut p, c, &LISTS[2..]);
    assert_eq!(
        p.server.poll_timeout(),
        Some(p.now + Duration::from_millis(300))
    );
    p.advance(Duration::from_millis(299));
    assert!(p.messages(c).is_empty());
    p.advance(Duration::from_millis(1));
    assert_eq!(
        p.messages(c),
        vec![
            json!({"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/mnt/c/Users/me/calc.py","lineStart":0,"lineEnd":1}})
        ]
    );
    assert!(p.server.poll_timeout() > Some(p.now + Duration::from_secs(3)));
}

/// A client that never gets ready (no `ide_connected`, no lists) is written the queued
/// at-mentions 3 s after it initialized; at-mentions sent to it meanwhile come after them, in
/// order. Another client, ready and welcomed, is sent them at once.
#[test]
fn queued_at_mentions_go_to_a_client_never_ready_3_s_later_in_order() {
    let mut p = Pair::new();
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 1), p.now);
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 2), p.now);
    let c = p.connect_initialized_keep();
    let other = p.connect_initialized();
    make_ready(&mut p, other);
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 3), p.now),
        2
    );
    assert_eq!(
        mention_lines(&mut p, other),
        [json!(3)],
        "not held for others"
    );
    assert_eq!(
        p.server
            .notify(Target::Connection(c), &mention_of("/w/a.rs", 4), p.now),
        1
    );
    p.advance(Duration::from_millis(2600));
    assert!(mention_lines(&mut p, c).is_empty());
    assert_eq!(
        p.server.poll_timeout(),
        Some(p.now + Duration::from_millis(100))
    );
    p.advance(Duration::from_millis(100));
    assert_eq!(
        mention_lines(&mut p, c),
        [json!(1), json!(2), json!(3), json!(4)]
    );
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 5), p.now);
    assert_eq!(mention_lines(&mut p, c), [json!(5)], "no longer held");
}

/// An at-mention sent to a client before it is ready, with none queued for it, waits too (`claude`
/// drops it: its first moments, before its lists are answered), until 300 ms after it is ready; to
/// a client that never gets ready, until 3 s after it initialized, and from then on it goes out
/// at once.
#[test]
fn an_at_mention_sent_before_the_client_is_ready_waits_for_it() {
    let mut p = Pair::new();
    let c = p.connect_initialized_keep();
    let never = p.connect_initialized_keep();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 1), p.now),
        2
    );
    say_connected(&mut p, c, 4242);
    list_all(&mut p, c, &LISTS[..2]);
    assert!(mention_lines(&mut p, c).is_empty(), "held");
    p.advance(Duration::from_millis(100));
    p.server
        .notify(Target::Connection(c), &mention_of("/w/a.rs", 2), p.now);
    list_all(&mut p, c, &LISTS[2..]);
    p.advance(Duration::from_millis(299));
    assert!(mention_lines(&mut p, c).is_empty(), "held");
    p.advance(Duration::from_millis(1));
    assert_eq!(mention_lines(&mut p, c), [json!(1), json!(2)]);
    p.server
        .notify(Target::Connection(c), &mention_of("/w/a.rs", 3), p.now);
    assert_eq!(mention_lines(&mut p, c), [json!(3)], "welcomed: at once");

    assert!(mention_lines(&mut p, never).is_empty());
    assert_eq!(
        p.server.poll_timeout(),
        Some(p.now + Duration::from_millis(2600))
    );
    p.advance(Duration::from_millis(2600));
    assert_eq!(mention_lines(&mut p, never), [json!(1)]);
    p.server
        .notify(Target::Connection(never), &mention_of("/w/a.rs", 4), p.now);
    assert_eq!(
        mention_lines(&mut p, never),
        [json!(4)],
        "past 3 s: at once"
    );
}

/// The editor's selection, as last sent to all, is sent to a client once it is ready (300 ms
/// after its lists, named its way, before the at-mentions queued for it): `claude` shows it at
/// once instead of at the selection's next change. Not to a client that never gets ready, and not
/// a selection sent to one connection.
#[test]
fn a_client_ready_is_sent_the_editors_selection_as_it_stands() {
    let mut p = Pair::new();
    let selected = |line: u32, path: &str| {
        Notification::SelectionChanged(SelectionChanged {
            text: "def sub(a, b):".into(),
            file_path: path.into(),
            file_url: claude_ide_bridge::file_uri(path),
            selection: Selection::new(Position::new(line, 0), Position::new(line, 14)),
        })
    };
    assert_eq!(
        p.server
            .notify(Target::All, &selected(1, r"C:\w\old.py"), p.now),
        0
    );
    assert_eq!(
        p.server
            .notify(Target::All, &selected(4, r"C:\w\calc.py"), p.now),
        0
    );
    p.server
        .notify(Target::All, &mention_of(r"C:\w\calc.py", 0), p.now);
    let c = p.connect_initialized_keep();
    let never = p.connect_initialized();
    p.server.notify(
        Target::Connection(never),
        &selected(9, r"C:\w\one.py"),
        p.now,
    );
    assert_eq!(p.messages(never).len(), 1);
    say_connected(&mut p, c, 4242);
    p.server.set_client_paths(c, ClientPaths::WslMounts);
    list_all(&mut p, c, &LISTS);
    assert!(p.messages(c).is_empty());
    p.advance(Duration::from_millis(300));
    let m = p.messages(c);
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0]["method"], "selection_changed");
    assert_eq!(m[0]["params"]["filePath"], "/mnt/c/w/calc.py");
    assert_eq!(m[0]["params"]["fileUrl"], "file:///mnt/c/w/calc.py");
    assert_eq!(m[0]["params"]["selection"]["start"]["line"], 4);
    assert_eq!(m[1]["method"], "at_mentioned");
    assert_eq!(m[1]["params"]["filePath"], "/mnt/c/w/calc.py");
    p.advance(Duration::from_secs(10));
    assert!(
        p.messages(never).is_empty(),
        "not ready: no selection sent again"
    );
    assert!(p.messages(c).is_empty(), "sent once");
}

/// A selection the host forgot (`Server::forget_selection`: sharing turned off, a secret
/// selected) is sent to no client that gets ready later, whether it was sent to all or to that
/// client alone: it was kept, text and all, for as long as the server ran.
#[test]
fn a_forgotten_selection_is_sent_to_no_later_client() {
    let mut p = Pair::new();
    let secret = Notification::SelectionChanged(SelectionChanged {
        text: "AWS_SECRET=hunter2".into(),
        file_path: "/w/.env".into(),
        file_url: claude_ide_bridge::file_uri("/w/.env"),
        selection: Selection::new(Position::new(0, 0), Position::new(0, 18)),
    });
    p.server.notify(Target::All, &secret, p.now);
    let c = p.connect_initialized_keep();
    // Sent to it alone: written now, and kept for its welcome.
    p.server.notify(Target::Connection(c), &secret, p.now);
    assert_eq!(p.messages(c).len(), 1);
    p.server.forget_selection();
    say_connected(&mut p, c, 4242);
    list_all(&mut p, c, &LISTS);
    p.advance(Duration::from_secs(1));
    assert!(p.messages(c).is_empty(), "the secret was sent");
    let d = p.connect_initialized_keep();
    say_connected(&mut p, d, 4243);
    list_all(&mut p, d, &LISTS);
    p.advance(Duration::from_secs(1));
    assert!(p.messages(d).is_empty(), "the secret was sent");
}

/// The selection a client is sent once ready is the newest it was sent: one the host sent it
/// alone since it initialized (the editor's selection as the host tells a new client) takes the
/// kept one's place, which came 300 ms later and put the client back on the old selection; and a
/// later one sent to all takes that one's.
#[test]
fn a_client_ready_is_sent_the_newest_selection_it_was_sent() {
    let mut p = Pair::new();
    let selected = |path: &str| {
        Notification::SelectionChanged(SelectionChanged {
            text: String::new(),
            file_path: path.into(),
            file_url: claude_ide_bridge::file_uri(path),
            selection: Selection::new(Position::new(0, 0), Position::new(0, 0)),
        })
    };
    let selections = |p: &mut Pair, c| -> Vec<Value> {
        (p.messages(c).into_iter())
            .filter(|m| m["method"] == "selection_changed")
            .map(|m| m["params"]["filePath"].clone())
            .collect()
    };
    p.server.notify(Target::All, &selected("/w/old.rs"), p.now);
    let c = p.connect_initialized_keep();
    p.server
        .notify(Target::Connection(c), &selected("/w/new.rs"), p.now);
    assert_eq!(
        selections(&mut p, c),
        [json!("/w/new.rs")],
        "at once, as before"
    );
    say_connected(&mut p, c, 4242);
    list_all(&mut p, c, &LISTS);
    p.advance(Duration::from_millis(300));
    assert_eq!(
        selections(&mut p, c),
        [json!("/w/new.rs")],
        "its own, not the old"
    );
    // Sent to all after its own: the one kept for all is the newest.
    let d = p.connect_initialized_keep();
    p.server
        .notify(Target::Connection(d), &selected("/w/own.rs"), p.now);
    p.server.notify(Target::All, &selected("/w/all.rs"), p.now);
    assert_eq!(
        selections(&mut p, d),
        [json!("/w/own.rs"), json!("/w/all.rs")]
    );
    say_connected(&mut p, d, 4343);
    list_all(&mut p, d, &LISTS);
    p.advance(Duration::from_millis(300));
    assert_eq!(selections(&mut p, d), [json!("/w/all.rs")]);
    p.advance(Duration::from_secs(10));
    assert_eq!(
        selections(&mut p, c),
        [json!("/w/all.rs")],
        "the one to all, once"
    );
    assert!(selections(&mut p, d).is_empty(), "once");
}

/// What a client is sent once ready follows the news rule: a kept selection or an at-mention
/// that would take its unwritten output past half of `max_outbound` is left out, and the
/// connection stays (an editor's huge selection used to drop every `claude` that connected).
#[test]
fn a_welcome_too_large_for_the_output_is_left_out_not_the_connection() {
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let big = "x".repeat(40 * 1024);
    let selection = Notification::SelectionChanged(SelectionChanged {
        text: "x".into(),
        file_path: format!("/w/{big}"),
        file_url: claude_ide_bridge::file_uri(&format!("/w/{big}")),
        selection: Selection::new(Position::new(0, 0), Position::new(0, 1)),
    });
    assert_eq!(p.server.notify(Target::All, &selection, p.now), 0);
    p.server
        .notify(Target::All, &mention_of(&format!("/w/{big}"), 1), p.now);
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 2), p.now);
    for round in 0..2 {
        let c = p.connect_initialized_keep();
        say_connected(&mut p, c, 4242);
        list_all(&mut p, c, &LISTS);
        p.advance(Duration::from_millis(300));
        assert!(
            !p.take_events()
                .iter()
                .any(|e| matches!(e, Event::Disconnected { .. })),
            "round {round}: dropped"
        );
        let m = p.messages(c);
        let lines = m.iter().map(|m| m["params"]["lineStart"].clone());
        let expected = if round == 0 { vec![json!(2)] } else { vec![] };
        assert_eq!(lines.collect::<Vec<_>>(), expected, "round {round}: {m:?}");
        let r = p.request(c, json!(7), "ping", json!({}));
        assert!(r.get("result").is_some(), "round {round}: {r}");
        p.server.close(c, p.now).unwrap();
        p.pump();
    }
}

/// A client that lists and says `ide_connected` before `notifications/initialized` is ready from
/// then on: its welcome comes 300 ms after.
#[test]
fn a_client_ready_before_it_initialized_is_welcomed_too() {
    let mut p = Pair::new();
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 1), p.now);
    let c = p.connect();
    p.request(
        c,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    say_connected(&mut p, c, 4242);
    list_all(&mut p, c, &LISTS);
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(
        p.server.poll_timeout(),
        Some(p.now + Duration::from_millis(300))
    );
    p.advance(Duration::from_millis(300));
    assert_eq!(mention_lines(&mut p, c), [json!(1)]);
}

/// A client whose socket closes while it holds the queued at-mentions leaves them to the next.
#[test]
fn held_at_mentions_of_a_client_gone_wait_for_the_next() {
    let mut p = Pair::new();
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 1), p.now);
    let gone = p.connect_initialized_keep();
    say_connected(&mut p, gone, 4242);
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 2), p.now);
    p.server.handle_close(gone);
    let next = p.connect_initialized_keep();
    say_connected(&mut p, next, 4243);
    list_all(&mut p, next, &LISTS);
    p.advance(Duration::from_millis(300));
    assert_eq!(mention_lines(&mut p, next), [json!(1), json!(2)]);
}

/// An at-mention held by a client that goes before it is ready is the next client's only if it
/// was sent to all and no other client was written it (it would be shown twice), once however
/// many held it, and in the order they were sent.
#[test]
fn an_at_mention_held_by_a_client_gone_goes_on_once_and_only_if_unseen() {
    let mut p = Pair::new();
    let ready = p.connect_initialized();
    make_ready(&mut p, ready);
    let a = p.connect_initialized_keep();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 1), p.now),
        2
    );
    assert_eq!(mention_lines(&mut p, ready), [json!(1)]);
    p.server.handle_close(ready);
    p.server
        .notify(Target::All, &mention_of("/w/a.rs", 2), p.now);
    let b = p.connect_initialized_keep();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 3), p.now),
        2
    );
    p.server
        .notify(Target::Connection(a), &mention_of("/w/a.rs", 4), p.now);
    p.server
        .notify(Target::Connection(b), &mention_of("/w/a.rs", 5), p.now);
    p.server.handle_close(b);
    p.server.handle_close(a);
    let next = p.connect_initialized_keep();
    make_ready(&mut p, next);
    assert_eq!(mention_lines(&mut p, next), [json!(2), json!(3)]);
}

/// A client closing before it is ready holds no more at-mentions (it is written none): one sent
/// then is queued for the next client, after those it held, which it leaves to that client.
#[test]
fn a_client_closing_before_it_is_ready_holds_no_more_at_mentions() {
    let mut p = Pair::new();
    let c = p.connect_initialized_keep();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 1), p.now),
        1
    );
    p.server.close(c, p.now).unwrap();
    p.advance(Duration::from_millis(1));
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 2), p.now),
        0,
        "not taken by a closing client"
    );
    p.server.handle_close(c);
    let next = p.connect_initialized_keep();
    make_ready(&mut p, next);
    assert_eq!(mention_lines(&mut p, next), [json!(1), json!(2)]);
}

/// A client the host closes before it finishes the MCP handshake does not spend the queued
/// at-mentions: the next client that initializes gets them (they went to the closing one, whose
/// sends failed, and were lost).
#[test]
fn at_mentions_wait_for_a_client_that_is_not_closing() {
    let mut p = Pair::new();
    assert_eq!(
        p.server
            .notify(Target::All, &mention_of("/w/a.rs", 1), p.now),
        0
    );
    let c = p.connect();
    p.request(
        c,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    p.server.close(c, p.now).unwrap();
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let to_closing = p.messages(c);
    assert!(
        !to_closing.iter().any(|m| m["method"] == "at_mentioned"),
        "{to_closing:?}"
    );
    let next = p.connect_initialized_keep();
    p.advance(Duration::from_secs(3));
    let m = p.messages(next);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0]["method"], "at_mentioned");
}

trait KeepMessages {
    fn connect_initialized_keep(&mut self) -> claude_ide_bridge::ConnectionId;
}

impl KeepMessages for Pair {
    /// Like connect_initialized, but leaves whatever follows `initialized` in the inbox.
    fn connect_initialized_keep(&mut self) -> claude_ide_bridge::ConnectionId {
        let c = self.connect();
        self.request(
            c,
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
        );
        self.send_json(
            c,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        c
    }
}

#[test]
fn set_tools_announces_list_changed() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    p.server
        .set_tools(ToolSet::none().with(ToolName::GetDiagnostics), p.now);
    assert_eq!(
        p.messages(c)[0]["method"],
        "notifications/tools/list_changed"
    );
    let r = p.request(c, json!(1), "tools/list", json!({}));
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 1);
}

/// A client that answered `initialize` may list the tools before it sends
/// `notifications/initialized`: a change of the tools meanwhile is told once it has, not lost (it
/// would keep the old list). One not yet past `initialize` is not told: it lists after it anyway.
#[test]
fn a_change_of_the_tools_before_initialized_is_told_after_it() {
    let mut p = Pair::new();
    let c = p.connect();
    let early = p.connect();
    p.request(
        c,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    let r = p.request(c, json!(1), "tools/list", json!({}));
    assert!(r["result"]["tools"].as_array().unwrap().len() > 1);
    p.server
        .set_tools(ToolSet::none().with(ToolName::GetDiagnostics), p.now);
    assert!(p.messages(c).is_empty());
    p.send_json(
        c,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(
        p.messages(c),
        vec![json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})]
    );
    // Told once.
    p.request(c, json!(2), "ping", json!({}));
    p.request(
        early,
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    p.send_json(
        early,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert!(p.messages(early).is_empty());
}

/// A client whose unwritten output has no room for news when the tools change is told once its
/// output is written, not never. (Its output is filled up to the last `list_changed` it takes:
/// the one refused then is a change missed too, as the `set_tools` after it is; both are told
/// once, together. `set_tools` itself is seen to defer in the test before.)
#[test]
fn a_change_of_the_tools_a_slow_client_missed_is_told_when_it_reads_again() {
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let slow = p.connect_initialized();
    let news = Notification::LogEvent(LogEvent {
        event_name: "e".into(),
        event_data: json!("x".repeat(1000)),
    });
    // The slow client does not read: its output is not drained until it has no room for news,
    // not even one more list_changed.
    while p.server.notify(Target::Connection(slow), &news, p.now) == 1 {}
    let n = Notification::ToolsListChanged;
    let mut taken = 0;
    while p.server.notify(Target::Connection(slow), &n, p.now) == 1 {
        taken += 1;
    }
    p.server
        .set_tools(ToolSet::none().with(ToolName::GetDiagnostics), p.now);
    let m = p.messages(slow);
    assert!(m.len() > 10, "{}", m.len());
    let told = m
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .count();
    // Those it took, and one for the changes it missed, sent once its output was written.
    assert_eq!(told, taken + 1);
    assert_eq!(
        m.last().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    assert!(p.messages(slow).is_empty());
}

// ---- limits ---------------------------------------------------------------------------------------

/// A client that stops reading misses news once half the outbound limit waits for it (it was
/// dropped by notifications alone: a language server publishing for thousands of files cost a
/// client paused for 15 s its connection); the answers it is owed count to the whole limit: one
/// that does not fit in what is left is answered with -32000 instead, and once not even that
/// fits the client is dropped; the other client is not harmed either way.
#[test]
fn a_client_that_stops_reading_misses_news_and_is_dropped_past_its_answers() {
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let slow = p.connect_initialized();
    let fast = p.connect_initialized();
    let calls: Vec<_> = (0..8)
        .map(|i| {
            p.call_tool(slow, i, "getOpenEditors", json!({}));
            expect_call(&mut p).0
        })
        .collect();
    let n = Notification::ToolsListChanged;
    // The slow client never reads: emulate a runtime that cannot write by not draining it.
    let sent: usize = (0..5000)
        .map(|_| p.server.notify(Target::Connection(slow), &n, p.now))
        .sum();
    assert!(sent > 100 && sent < 5000, "{sent}");
    assert_eq!(p.server.notify(Target::All, &n, p.now), 1);
    assert!(!p.closed.contains(&slow));
    let big = "x".repeat(10 * 1024);
    for call in calls {
        let r = p.server.respond(call, ToolResult::text(big.clone()));
        assert!(matches!(r, Ok(()) | Err(ApiError::AnswerTooLarge)), "{r:?}");
    }
    assert!(!p.closed.contains(&slow), "answered -32000 past the room");
    // It goes on calling and reading nothing: answers, then errors, fill what is left.
    // (Its input is handled without the host draining its output, as for a runtime that
    // cannot write to it.)
    let mut id = 100;
    while !p.server.should_close(slow) {
        assert!(id < 1000, "never dropped");
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "getOpenEditors", "arguments": {}}});
        let f = p.masked_frame(OpCode::Text, true, call.to_string().as_bytes());
        p.server.handle_input(slow, &f, p.now);
        while let Some(e) = p.server.poll_event() {
            if let Event::ToolCall { call, .. } = e {
                let _ = p.server.respond(call, ToolResult::text(big.clone()));
            }
        }
        id += 1;
    }
    p.pump();
    assert!(p.closed.contains(&slow));
    assert_eq!(p.server.notify(Target::All, &n, p.now), 1);
    assert!(!p.messages(fast).is_empty());
}

/// A tool call from `conn` handed to the host without writing anything out (its client does not
/// read, or only through [`Pair::read_one`]): the call.
fn call_unread(p: &mut Pair, conn: ConnectionId, id: i64) -> claude_ide_bridge::CallId {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "getOpenEditors", "arguments": {}}});
    let f = p.masked_frame(OpCode::Text, true, call.to_string().as_bytes());
    p.server.handle_input(conn, &f, p.now);
    while let Some(e) = p.server.poll_event() {
        if let Event::ToolCall { call, .. } = e {
            return call;
        }
    }
    panic!("no call from {conn:?}")
}

/// Clients that stop reading hold at most their share of `max_outbound_total` once the output
/// queued for all together is past it (each held up to `max_outbound`: eight clients asking for
/// large files without reading took the bridge past 600 MB), the share being the total divided by
/// the connections holding output; a client that reads is not harmed: its answers and news still
/// come, while an answer past a full queue's share is replaced by -32000 saying so, news is left
/// out for it, and its connection stays.
#[test]
fn clients_that_stop_reading_hold_their_share_of_the_output_and_the_others_are_answered() {
    let mut p = Pair::with_config(|c| {
        c.limits.max_outbound = 4 << 20;
        c.limits.max_outbound_total = 1 << 20;
    });
    let (a, b, reader) = (
        p.connect_initialized(),
        p.connect_initialized(),
        p.connect_initialized(),
    );
    // Idle connections hold nothing, and do not make the others' shares smaller.
    let _idle: Vec<_> = (0..4).map(|_| p.connect_initialized()).collect();
    let big = "x".repeat(200 * 1024);
    // Whether the answer was taken (the host is told of one replaced by the error).
    let answer = |p: &mut Pair, conn, id| {
        let call = call_unread(p, conn, id);
        match p.server.respond(call, ToolResult::text(big.clone())) {
            Ok(()) => true,
            Err(e) => {
                assert_eq!(e, ApiError::AnswerTooLarge);
                false
            }
        }
    };
    let refused = |m: &Value| {
        m["error"]["code"] == -32000
            && (m["error"]["message"].as_str())
                .is_some_and(|t| t.contains("share of the bridge's output"))
    };
    let answered = |m: &[Value]| m.iter().filter(|m| m["result"].is_object()).count();
    // The first client never reads: answered until the total is past 1 MiB (it holds all of
    // it: its share is the whole), well before its own 4 MiB.
    let taken: Vec<bool> = (1..=8).map(|id| answer(&mut p, a, id)).collect();
    assert_eq!(taken, [true, true, true, true, true, false, false, false]);
    // The second, holding nothing, has half: two answers of that size.
    let taken: Vec<bool> = (1..=3).map(|id| answer(&mut p, b, id)).collect();
    assert_eq!(taken, [true, true, false]);
    // The one that reads goes on being answered (a third of the total is its share).
    for id in 1..=4 {
        assert!(answer(&mut p, reader, id));
        let m = p.read_one(reader);
        assert!(m.len() == 1 && answered(&m) == 1, "call {id}: {}", m.len());
    }
    // News reaches the clients within their share, not the one past it.
    let news = Notification::LogEvent(LogEvent {
        event_name: "e".into(),
        event_data: json!("x"),
    });
    assert_eq!(p.server.notify(Target::All, &news, p.now), 6);
    let m = p.read_one(reader);
    assert!(m.len() == 1 && m[0]["method"] == "log_event");
    assert!(p.closed.is_empty() && !p.server.should_close(a) && !p.server.should_close(b));
    let of_a = p.read_one(a);
    assert_eq!((of_a.len(), answered(&of_a)), (8, 5));
    assert!(of_a[5..].iter().all(refused));
    let of_b = p.read_one(b);
    assert_eq!((of_b.len(), answered(&of_b)), (4, 2));
    assert!(refused(&of_b[2]) && of_b[3]["method"] == "log_event");
    // Once read, the first client is answered again.
    assert!(answer(&mut p, a, 9));
    let m = p.read_one(a);
    assert!(m.len() == 1 && answered(&m) == 1);
}

/// Sends `tools/list` requests on `conn` (the engine answers them itself) without reading the
/// answers, while the engine wants input; how many were sent.
fn list_tools_unread(p: &mut Pair, conn: ConnectionId, most: i64) -> i64 {
    let mut sent = 0;
    while p.server.wants_input(conn) && sent < most {
        sent += 1;
        let list = json!({"jsonrpc": "2.0", "id": sent, "method": "tools/list"});
        let f = p.masked_frame(OpCode::Text, true, list.to_string().as_bytes());
        p.server.handle_input(conn, &f, p.now);
    }
    sent
}

/// A client that sends requests the engine answers itself and never reads is no longer read once
/// its output is past `pause_input_above` (a runtime that follows `wants_input` holds it to that,
/// where it was held to `max_outbound`: ten such clients, 640 MiB), and is read again once it has
/// read some; the other connections are read all along.
#[test]
fn a_client_that_does_not_read_its_answers_is_not_read_past_pause_input_above() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 64 * 1024);
    let (quiet, other) = (p.connect_initialized(), p.connect_initialized());
    assert!(p.server.wants_input(quiet));
    let sent = list_tools_unread(&mut p, quiet, 100_000);
    assert!(
        !p.server.wants_input(quiet),
        "still read after {sent} requests"
    );
    assert!(p.server.wants_input(other));
    // Held past the mark by one answer at most, where `max_outbound` (64 MiB) held it before.
    let queued = p.server.transmit(quiet).len();
    let one = queued / sent as usize + 1;
    assert!(queued > 64 * 1024 && queued <= 64 * 1024 + one, "{queued}");
    // Once it reads most of it, it is read again; all its requests were answered.
    let read = p.server.transmit(quiet)[..queued - 16 * 1024].to_vec();
    p.server.advance_transmit(quiet, read.len());
    assert!(p.server.wants_input(quiet));
    p.inbox.insert(quiet, read);
    let answers = p.read_one(quiet);
    assert_eq!(answers.len(), sent as usize);
    assert!(answers.iter().all(|m| m["result"]["tools"].is_array()));
    assert!(p.closed.is_empty() && !p.server.should_close(quiet));
    // Unknown connections: their input is ignored anyway.
    assert!(p.server.wants_input(ConnectionId(9_999)));
}

/// While its input is not read because its output is past `pause_input_above`, a peer's answers
/// to the pings wait unread: one that takes its output is not dropped as silent, one that takes
/// nothing is, within the usual two intervals.
#[test]
fn a_peer_whose_input_waits_for_its_output_is_alive_while_it_reads() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 16 * 1024);
    let c = p.connect_initialized();
    list_tools_unread(&mut p, c, 100_000);
    assert!(!p.server.wants_input(c));
    let interval = p.server.config().limits.ping_interval;
    // It takes a little of its output in each interval: alive after many intervals of silence.
    for _ in 0..6 {
        p.now += interval;
        p.server.advance_transmit(c, 100);
        p.server.handle_timeout(p.now);
        assert!(!p.server.should_close(c), "dropped while it reads");
    }
    assert!(!p.server.wants_input(c));
    // Then it takes nothing: dropped as silent.
    for _ in 0..3 {
        p.now += interval;
        p.server.handle_timeout(p.now);
    }
    assert!(p.server.should_close(c));
    p.server.handle_close(c);
    let gone = p.take_events();
    assert!(
        gone.iter().any(|e| matches!(e, Event::Disconnected { conn, reason: DisconnectReason::PingTimeout } if *conn == c)),
        "{gone:?}"
    );
}

/// Inside a data frame with more than 64 KiB still to come, a connection whose output is past
/// `pause_input_above` is read on (reading it gives no output): a client that writes a large
/// message before it reads its answers is not left blocked in its write. Once the frame is in,
/// it waits again.
#[test]
fn a_large_frame_under_way_is_read_on_past_the_mark() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 16 * 1024);
    let c = p.connect_initialized();
    list_tools_unread(&mut p, c, 100_000);
    assert!(!p.server.wants_input(c));
    let text = json!({"jsonrpc": "2.0", "id": 1, "method": "ping",
                      "params": {"pad": "y".repeat(1 << 20)}})
    .to_string();
    let f = p.masked_frame(OpCode::Text, true, text.as_bytes());
    let (head, tail) = f.split_at(100 * 1024);
    assert!(
        p.server.handle_input(c, head, p.now),
        "not read on inside the frame"
    );
    assert!(p.server.wants_input(c));
    let (more, rest) = tail.split_at(tail.len() - 200 * 1024);
    assert!(p.server.handle_input(c, more, p.now));
    // 60 KiB left: waits, as after any read, whose end may hold more messages.
    let (most, last) = rest.split_at(rest.len() - 60 * 1024);
    assert!(!p.server.handle_input(c, most, p.now));
    assert!(!p.server.wants_input(c));
    assert!(!p.server.handle_input(c, last, p.now));
    assert!(p.closed.is_empty() && !p.server.should_close(c));
}

/// The same for a Binary frame, kept in the input buffer as it arrives (the review of 1cfb667:
/// what had arrived was counted twice, and a 1 MiB frame was taken as over at half way): read
/// on while more than 64 KiB is to come, then refused with 1003 as any Binary message.
#[test]
fn a_large_binary_frame_under_way_is_read_on_to_its_refusal() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 16 * 1024);
    let c = p.connect_initialized();
    list_tools_unread(&mut p, c, 100_000);
    assert!(!p.server.wants_input(c));
    let f = p.masked_frame(OpCode::Binary, true, &vec![7u8; 1 << 20]);
    let mut at = 0;
    while f.len() - at > 100 * 1024 {
        let piece = &f[at..at + 100 * 1024];
        at += piece.len();
        let left = f.len() - at;
        let wants = p.server.handle_input(c, piece, p.now);
        assert_eq!(wants, left > 64 * 1024, "{left} bytes to come");
    }
    p.server.handle_input(c, &f[at..], p.now);
    let frames = p.frames(c);
    let (op, payload) = frames.last().expect("output");
    assert_eq!((*op, &payload[..2]), (8, &1003u16.to_be_bytes()[..]));
}

/// A batch whose answers held until it is whole are past `pause_input_above` while one of its
/// calls waits for the host: nothing is left to write, so the engine still wants input (no write
/// would ever wake a runtime's reader, and the client's cancel of the waiting call must be read),
/// and a peer that then says nothing is dropped as silent, the pings written into its socket
/// being no sign of life (the review of a426de1: paused for good, and never dropped).
#[test]
fn a_batchs_held_answers_do_not_pause_input_and_a_silent_peer_is_dropped() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 64 * 1024);
    let c = p.connect_initialized_at("2025-03-26");
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "getOpenEditors", "arguments": {}}})
    };
    p.send_json(c, &json!([call(1), call(2)]));
    let calls: Vec<_> = (p.take_events().into_iter())
        .filter_map(|e| match e {
            Event::ToolCall { call, .. } => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    // The first answered with 256 KiB, held; the second (an openDiff, say) waits for the user.
    (p.server)
        .respond(calls[0], ToolResult::text("x".repeat(256 * 1024)))
        .unwrap();
    p.pump();
    assert!(p.server.transmit(c).is_empty());
    assert!(p.server.wants_input(c), "paused with nothing to write");
    let interval = p.server.config().limits.ping_interval;
    let dropped_after = (1..=6).find(|_| {
        p.advance(interval);
        p.closed.contains(&c)
    });
    assert!(dropped_after.is_some_and(|i| i <= 3), "{dropped_after:?}");
}

/// A peer whose input waits for its output, that took some of it right after it was last heard
/// and then froze, is dropped within the usual two intervals (and one more look of the timer),
/// not forgiven to the moment its silence is noticed (the review of a426de1: 120 s).
#[test]
fn a_peer_that_froze_while_its_input_waits_is_dropped_in_about_two_intervals() {
    let mut p = Pair::with_config(|c| c.limits.pause_input_above = 16 * 1024);
    let c = p.connect_initialized();
    list_tools_unread(&mut p, c, 100_000);
    assert!(!p.server.wants_input(c));
    p.server.advance_transmit(c, 100);
    let interval = p.server.config().limits.ping_interval;
    let step = interval / 10;
    let mut waited = Duration::ZERO;
    while !p.server.should_close(c) && waited < 10 * interval {
        p.now += step;
        waited += step;
        p.server.handle_timeout(p.now);
    }
    assert!(
        waited <= 3 * interval,
        "dropped after {waited:?} of silence"
    );
}

/// The answers of a batch, held until it is whole, count with the output queued: a client that
/// sends its calls in batches (protocol 2025-03-26) is held to its share as one that does not.
#[test]
fn a_batchs_held_answers_count_towards_the_output_of_all() {
    let mut p = Pair::with_config(|c| {
        c.limits.max_outbound = 4 << 20;
        c.limits.max_outbound_total = 1 << 20;
    });
    let (batcher, _other, _third) = (
        p.connect_initialized_at("2025-03-26"),
        p.connect_initialized(),
        p.connect_initialized(),
    );
    let batch: Vec<Value> = (1..=8)
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "getOpenEditors", "arguments": {}}})
        })
        .collect();
    let f = p.masked_frame(
        OpCode::Text,
        true,
        Value::from(batch).to_string().as_bytes(),
    );
    p.server.handle_input(batcher, &f, p.now);
    let mut calls = Vec::new();
    while let Some(e) = p.server.poll_event() {
        if let Event::ToolCall { call, .. } = e {
            calls.push(call);
        }
    }
    assert_eq!(calls.len(), 8);
    let big = "x".repeat(200 * 1024);
    let told_too_large = (calls.into_iter())
        .map(|call| p.server.respond(call, ToolResult::text(big.clone())))
        .filter(|r| *r == Err(ApiError::AnswerTooLarge))
        .count();
    let m = p.read_one(batcher);
    assert_eq!(m.len(), 1, "one batch answer");
    let answers = m[0].as_array().unwrap();
    let answered = answers.iter().filter(|a| a["result"].is_object()).count();
    assert!(
        (4..=6).contains(&answered),
        "{answered} of {} answered",
        answers.len()
    );
    assert!(answers[answered..]
        .iter()
        .all(|a| a["error"]["code"] == -32000));
    assert_eq!(told_too_large, answers.len() - answered);
}

/// An answer larger than what the connection's output queue has left is replaced by -32000
/// saying so, and the connection stays: a file of 10 MiB of control characters is 60 MiB of
/// JSON, and two reads of it dropped the client.
#[test]
fn an_answer_too_large_for_the_output_queue_is_refused_not_the_connection() {
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let c = p.connect_initialized();
    let calls: Vec<_> = (0..3)
        .map(|i| {
            p.call_tool(c, i, "getOpenEditors", json!({}));
            expect_call(&mut p).0
        })
        .collect();
    // Alone, too large for the queue; then two that fit one at a time, answered before the
    // client reads: the second does not fit beside the first.
    // The host is told which were replaced.
    let sizes = [80 * 1024, 40 * 1024, 40 * 1024];
    for (i, (call, n)) in calls.iter().zip(sizes).enumerate() {
        let told = if i == 1 {
            Ok(())
        } else {
            Err(ApiError::AnswerTooLarge)
        };
        assert_eq!(
            p.server.respond(*call, ToolResult::text("x".repeat(n))),
            told,
            "{i}"
        );
    }
    assert_eq!(
        p.server.respond(calls[0], ToolResult::text("again")),
        Err(ApiError::NotPending),
        "a replaced answer answered the call"
    );
    let m = p.messages(c);
    assert_eq!(m.len(), 3, "{m:?}");
    for (i, m) in m.iter().enumerate() {
        assert_eq!(m["id"], i);
        let refused = m["error"]["code"] == -32000;
        assert_eq!(refused, i != 1, "{i}: {m}");
        if refused {
            let why = m["error"]["message"].as_str().unwrap();
            assert!(why.contains("does not fit"), "{why}");
        }
    }
    assert!(!p.closed.contains(&c));
    let r = p.request(c, json!(9), "ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
}

/// A batch (protocol 2025-03-26) whose answers fit the output queue together is answered whole;
/// one whose answers do not is answered with -32000 for those that do not fit, and the
/// connection stays. Six answers of 9 KiB under a 64 KiB queue dropped the connection without a
/// word (the room its body had grown counted, not its answers; nor was the batch counted when
/// an answer was looked at).
#[test]
fn a_batch_whose_answers_fit_is_answered_and_one_too_large_is_refused_not_dropped() {
    for (calls, refused) in [(6, 0), (12, 6)] {
        let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
        let c = p.connect_initialized_at("2025-03-26");
        let batch: Vec<Value> = (0..calls)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "getOpenEditors", "arguments": {}}})
            })
            .collect();
        p.send_json(c, &Value::Array(batch));
        let ev = p.take_events();
        let pending: Vec<claude_ide_bridge::CallId> = (ev.iter())
            .filter_map(|e| match e {
                Event::ToolCall { call, .. } => Some(*call),
                _ => None,
            })
            .collect();
        assert_eq!(pending.len(), calls, "{ev:?}");
        let told_too_large = (pending.into_iter())
            .map(|call| {
                p.server
                    .respond(call, ToolResult::text("x".repeat(9 * 1024)))
            })
            .filter(|r| *r == Err(ApiError::AnswerTooLarge))
            .count();
        assert_eq!(told_too_large, refused, "{calls}");
        assert!(!p.closed.contains(&c), "{calls} answers of 9 KiB");
        let m = p.messages(c);
        let answers = match m.as_slice() {
            [Value::Array(a)] => a.clone(),
            other => panic!("one array answer: {other:?}"),
        };
        assert_eq!(answers.len(), calls);
        let too_large = (answers.iter())
            .filter(|m| m["error"]["code"] == -32000)
            .count();
        assert_eq!(too_large, refused, "{calls}");
    }
}

/// What the engine keeps for pending calls counts towards the outbound limit with the queued
/// output: a client holding calls open with long tab names, or batches whose answers wait for
/// one pending call, is dropped as one that stops reading is (with 256 calls and 10 MiB names
/// each, one connection kept 2.5 GiB before).
#[test]
fn what_pending_calls_keep_counts_towards_the_outbound_limit() {
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let c = p.connect_initialized();
    let tab = "t".repeat(10 * 1024);
    for i in 0..8 {
        p.call_tool(
            c,
            i,
            "openDiff",
            json!({
            "old_file_path": "/ws/a.rs", "new_file_path": "/ws/a.rs",
            "new_file_contents": "x", "tab_name": format!("{tab}{i}")}),
        );
    }
    assert!(
        p.closed.contains(&c),
        "7 tab names of 10 KiB are over 64 KiB"
    );
    assert!(p.take_events().iter().any(|e| matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::OutboundFull,
            ..
        }
    )));

    // Batches (protocol 2025-03-26) whose answers wait for an openDiff in each.
    let mut p = Pair::with_config(|c| c.limits.max_outbound = 64 * 1024);
    let c = p.connect_initialized_at("2025-03-26");
    for b in 0..4 {
        let mut batch = vec![
            json!({"jsonrpc": "2.0", "id": format!("d{b}"), "method": "tools/call",
            "params": {"name": "openDiff", "arguments": {
                "old_file_path": "/ws/a.rs", "new_file_path": "/ws/a.rs",
                "new_file_contents": "x", "tab_name": format!("t{b}")}}}),
        ];
        batch.extend((0..60).map(|i| json!({"jsonrpc": "2.0", "id": format!("{b}-{i}-{}", "i".repeat(512)), "method": "ping"})));
        p.send_json(c, &Value::Array(batch));
    }
    assert!(
        p.closed.contains(&c),
        "answers of 4 × 60 pings of 0.5 KiB kept"
    );
}

/// An answer encoded ahead (`EncodedAnswer`, what the runtimes write out before they take the
/// server's lock) is the same answer on the wire as one given to `respond`, and is refused for a
/// call of the other kind as `respond` is.
#[test]
fn an_answer_encoded_ahead_is_the_same_answer() {
    let mut p = Pair::new();
    let c = p.connect_initialized();
    let calls: Vec<_> = (0..2)
        .map(|i| {
            p.call_tool(c, i, "getOpenEditors", json!({}));
            expect_call(&mut p).0
        })
        .collect();
    let result = ToolResult::text("x".repeat(100_000));
    let wrong = claude_ide_bridge::EncodedAnswer::compat(Ok(json!({})));
    assert_eq!(
        p.server.respond_encoded(calls[0], wrong),
        Err(ApiError::WrongKind)
    );
    let ahead = claude_ide_bridge::EncodedAnswer::tool(&result);
    p.server.respond_encoded(calls[0], ahead).unwrap();
    p.server.respond(calls[1], result).unwrap();
    let m = p.messages(c);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0]["result"], m[1]["result"]);
    assert_eq!(m[0]["id"], 0);
}

#[test]
fn compat_methods_are_confined_to_the_workspace() {
    let mut p = Pair::with_config(|c| {
        c.compat_methods = true;
        c.workspace_folders = vec!["/w".into()];
    });
    let c = p.connect_initialized();
    for path in ["/etc/passwd", "/w/../etc/passwd"] {
        let r = p.request(c, json!(1), "readFile", json!({"path": path}));
        assert_eq!(r["error"]["code"], -32602, "{path}");
    }
    p.send_json(
        c,
        &json!({"jsonrpc":"2.0","id":2,"method":"readFile","params":{"path":"/w/src/a.rs"}}),
    );
    let ev = p.take_events();
    let call = match &ev[..] {
        [Event::CompatRequest { call, request }] => {
            assert_eq!(request.path(), Some("/w/src/a.rs"));
            *call
        }
        _ => panic!("{ev:?}"),
    };
    // Answered as a tool call by mistake: refused as such, and it stays pending.
    assert_eq!(
        p.server.respond(call, ToolResult::text("hello")),
        Err(ApiError::WrongKind)
    );
    assert_eq!(p.messages(c), Vec::<Value>::new());
    p.server
        .respond_compat(call, Ok(json!({"content": "hello"})))
        .unwrap();
    assert_eq!(
        p.messages(c),
        vec![json!({"jsonrpc":"2.0","id":2,"result":{"content":"hello"}})]
    );
}

#[test]
fn message_trace_reports_both_directions_in_order() {
    let mut p = Pair::with_config(|c| c.trace_messages = true);
    let c = p.connect();
    p.take_events();
    p.request(c, json!(1), "ping", json!({}));
    let ev = p.take_events();
    let trace: Vec<(bool, Value)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Message { incoming, text, .. } => {
                Some((*incoming, serde_json::from_str(text).unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        trace,
        vec![
            (
                true,
                json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{}})
            ),
            (false, json!({"jsonrpc":"2.0","id":1,"result":{}})),
        ]
    );
}

#[test]
fn calls_past_the_pending_limit_are_refused_until_one_is_answered() {
    let mut p = Pair::with_config(|c| c.limits.max_pending_calls = 3);
    let c = p.connect_initialized();
    let first = open_diff(&mut p, c, 1, "t1");
    open_diff(&mut p, c, 2, "t2");
    open_diff(&mut p, c, 3, "t3");
    // The fourth call in progress is refused at once, without reaching the host.
    p.call_tool(c, 4, "getDiagnostics", json!({}));
    let m = p.messages(c);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0]["id"], 4);
    assert_eq!(m[0]["error"]["code"], -32000);
    assert!(m[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limit 3"));
    assert!(p.take_events().is_empty());
    // A new openDiff for an open tab replaces that call and takes its place: not refused.
    p.call_tool(c, 5, "openDiff", json!({"old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs", "new_file_contents": "x", "tab_name": "t3"}));
    let ev = p.take_events();
    assert!(
        matches!(
            ev[..],
            [
                Event::CallCancelled {
                    reason: CancelReason::Replaced,
                    ..
                },
                Event::ToolCall { .. }
            ]
        ),
        "{ev:?}"
    );
    assert_eq!(p.messages(c)[0]["id"], 3); // the replaced diff, rejected
                                           // Answering one makes room again.
    p.server
        .respond(first, ToolResult::diff_rejected("t1"))
        .unwrap();
    assert_eq!(p.messages(c)[0]["id"], 1);
    p.call_tool(c, 6, "getDiagnostics", json!({}));
    let (call, _) = expect_call(&mut p);
    p.server.respond(call, ToolResult::text("[]")).unwrap();
    assert_eq!(p.messages(c)[0]["id"], 6);
}
