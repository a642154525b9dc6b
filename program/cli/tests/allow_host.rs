//! `--allow-host NAME`: the Host check of the WebSocket upgrade accepts a name given on purpose
//! (`host.docker.internal`, for claude in a container reaching the bridge on the host), and
//! nothing else changes: other names are refused, the token is still required. Loopback only.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// The HTTP status of an upgrade to `port` carrying `host` as its Host header and `token`.
fn upgrade_status(port: u16, host: &str, token: Option<&str>) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut req = format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    );
    if let Some(t) = token {
        req.push_str(&format!("X-Claude-Code-Ide-Authorization: {t}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    let line = String::from_utf8_lossy(&head);
    line[9..12].parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn an_allowed_host_name_is_accepted_with_the_token_and_nothing_else_is() {
    let sb = Sandbox::new();
    let s = Served::start(
        &sb,
        &[
            "--no-lsp",
            "--on-diff",
            "reject",
            "--allow-host",
            "host.docker.internal",
        ],
    );
    let token = s.token();
    let named = format!("host.docker.internal:{}", s.port);
    assert_eq!(upgrade_status(s.port, &named, Some(&token)), 101);
    assert_eq!(
        upgrade_status(s.port, "Host.Docker.Internal", Some(&token)),
        101
    );
    assert_eq!(upgrade_status(s.port, "127.0.0.1", Some(&token)), 101);
    // The token is still required, and other names are still refused.
    assert_eq!(upgrade_status(s.port, &named, None), 401);
    assert_eq!(upgrade_status(s.port, &named, Some("wrong")), 401);
    for other in [
        "evil.example",
        "host.docker.internal.evil.example",
        "docker.internal",
    ] {
        assert_eq!(upgrade_status(s.port, other, Some(&token)), 403, "{other}");
    }
    drop(s);

    // Without the opt-in, the name is refused.
    let s = Served::start(&sb, &["--no-lsp", "--on-diff", "reject"]);
    let named = format!("host.docker.internal:{}", s.port);
    assert_eq!(upgrade_status(s.port, &named, Some(&s.token())), 403);
}

#[test]
fn a_name_that_is_not_a_host_name_is_refused_at_start() {
    let sb = Sandbox::new();
    for bad in ["", "*", "evil.example:80", "a/b", ".dot", "[not-ipv6]"] {
        let out = sb
            .command()
            .args(["serve", "--allow-host", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--allow-host"), "{bad:?}: {err}");
    }
}
