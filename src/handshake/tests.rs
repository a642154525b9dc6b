//! Tests of the upgrade: the head reader, parsing, the policy checks and the responses.
use super::*;
use proptest::prelude::*;

const TOKEN: &str = "Zm9vYmFyLXRva2VuLXdpdGgtMzItcmFuZG9tLWJ5dGVz";
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The header lines the real client (2.1.330) sends, in its order.
fn real_lines() -> Vec<String> {
    vec![
        "GET / HTTP/1.1".into(),
        "Host: 127.0.0.1:51234".into(),
        "Connection: Upgrade".into(),
        "Upgrade: websocket".into(),
        "Sec-WebSocket-Version: 13".into(),
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits".into(),
        format!("Sec-WebSocket-Key: {KEY}"),
        "Sec-WebSocket-Protocol: mcp".into(),
        "User-Agent: claude-code/2.1.330 (cli)".into(),
        format!("X-Claude-Code-Ide-Authorization: {TOKEN}"),
    ]
}

fn join(lines: &[String]) -> Vec<u8> {
    let mut out = lines.join("\r\n").into_bytes();
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// The real request with the header starting with `name` removed.
fn without(name: &str) -> Vec<u8> {
    let lines: Vec<String> = real_lines()
        .into_iter()
        .filter(|l| !l.starts_with(&format!("{name}:")))
        .collect();
    join(&lines)
}

/// The real request with the header `name` replaced by `line` (or the request line if `name` is "GET").
fn replaced(name: &str, line: &str) -> Vec<u8> {
    let lines: Vec<String> = real_lines()
        .into_iter()
        .map(|l| {
            let hit = if name == "GET" {
                l.starts_with("GET ")
            } else {
                l.starts_with(&format!("{name}:"))
            };
            if hit {
                line.to_owned()
            } else {
                l
            }
        })
        .collect();
    join(&lines)
}

/// The real request with `line` added at the end of the headers.
fn with(line: &str) -> Vec<u8> {
    let mut lines = real_lines();
    lines.push(line.to_owned());
    join(&lines)
}

fn policy() -> Policy<'static> {
    Policy {
        token: Some(TOKEN),
        allowed_origins: &[],
        check_host: true,
        allowed_hosts: &[],
    }
}

/// Runs the whole upgrade the way a server would and returns what it writes.
fn respond(wire: &[u8], policy: &Policy<'_>) -> (Result<UpgradeRequest, Rejection>, Vec<u8>) {
    let mut reader = HeadReader::new(16 * 1024);
    let (_, status) = reader.feed(wire);
    let result = match status {
        HeadStatus::Complete => {
            parse_upgrade(reader.head(), 64).and_then(|req| authorize(&req, policy).map(|()| req))
        }
        HeadStatus::TooLarge => Err(Rejection::HeadersTooLarge),
        HeadStatus::Partial => panic!("test request is incomplete"),
    };
    let mut out = Vec::new();
    match &result {
        Ok(req) => write_accept(&mut out, req, req.offers_protocol("mcp").then_some("mcp")),
        Err(rejection) => rejection.write_response(&mut out),
    }
    (result, out)
}

/// Splits a response into its head lines and body, checking the framing.
fn split_response(out: &[u8]) -> (Vec<String>, String) {
    let text = std::str::from_utf8(out).expect("response is UTF-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .expect("response has a blank line");
    (
        head.split("\r\n").map(str::to_owned).collect(),
        body.to_owned(),
    )
}

/// Asserts the refusal's status, and the headers every refusal must carry.
fn assert_refusal(out: &[u8], status_line: &str) {
    let (lines, body) = split_response(out);
    assert_eq!(lines[0], status_line);
    let upgrade_required = status_line.contains(" 426 ");
    // A 426 names the protocol it requires (RFC 9110 §15.5.22), and so lists `Upgrade` in
    // `Connection`; a 401 carries a challenge (RFC 9110 §15.5.2); no other refusal has either.
    let connection = if upgrade_required {
        "Connection: Upgrade, close"
    } else {
        "Connection: close"
    };
    assert!(lines.contains(&connection.to_owned()), "{lines:?}");
    assert!(lines.contains(&"Content-Type: text/plain; charset=utf-8".to_owned()));
    assert!(lines.contains(&format!("Content-Length: {}", body.len())));
    assert!(!body.is_empty() && body.ends_with('\n'));
    assert!(!body.contains(TOKEN));
    let has_version = lines.contains(&"Sec-WebSocket-Version: 13".to_owned());
    assert_eq!(has_version, upgrade_required, "{lines:?}");
    let has_upgrade = lines.contains(&"Upgrade: websocket".to_owned());
    assert_eq!(has_upgrade, upgrade_required, "{lines:?}");
    let challenge = lines.iter().any(|l| l.starts_with("WWW-Authenticate: "));
    assert_eq!(challenge, status_line.contains(" 401 "), "{lines:?}");
}

#[test]
fn rfc6455_accept_vector() {
    assert_eq!(accept_key(KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#[test]
fn real_client_request_is_accepted_with_mcp() {
    let wire = join(&real_lines());
    let (result, out) = respond(&wire, &policy());
    let req = result.expect("accepted");
    assert_eq!(
        out,
        b"HTTP/1.1 101 Switching Protocols\r\n\
          Upgrade: websocket\r\n\
          Connection: Upgrade\r\n\
          Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
          Sec-WebSocket-Protocol: mcp\r\n\
          \r\n"
    );
    assert_eq!(req.path, "/");
    assert_eq!(req.host.as_deref(), Some("127.0.0.1:51234"));
    assert_eq!(req.origin, None);
    assert_eq!(req.key, KEY);
    assert_eq!(req.protocols, ["mcp"]);
    assert!(req.extensions_offered);
    assert_eq!(req.user_agent.as_deref(), Some("claude-code/2.1.330 (cli)"));
    assert_eq!(req.auth_token(), Some(TOKEN));
    assert!(req.offers_protocol("mcp"));
    assert!(!req.offers_protocol("MCP"));
}

#[test]
fn accept_never_declares_extensions_or_unoffered_protocols() {
    let req = parse_upgrade(&join(&real_lines()), 64).unwrap();
    let mut out = Vec::new();
    write_accept(&mut out, &req, Some("graphql-ws"));
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("Sec-WebSocket-Protocol"));
    assert!(!text.contains("Sec-WebSocket-Extensions"));
    assert!(text.ends_with("\r\n\r\n"));

    let mut out = Vec::new();
    write_accept(&mut out, &req, None);
    assert!(!String::from_utf8(out)
        .unwrap()
        .contains("Sec-WebSocket-Protocol"));
}

#[test]
fn other_paths_lowercase_names_and_list_values_are_accepted() {
    let wire = b"GET /mcp?x=1 HTTP/1.1\r\nhost: LOCALHOST\r\nupgrade: WebSocket\r\n\
        connection: keep-alive,  UPGRADE \r\nsec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\
        sec-websocket-version: 13\r\nsec-websocket-protocol: a , b\r\n\
        Sec-WebSocket-Protocol: mcp\r\nSec-WebSocket-Protocol: ,\r\n\
        x-claude-code-ide-authorization: "
        .iter()
        .chain(TOKEN.as_bytes())
        .chain(b"\r\n\r\n")
        .copied()
        .collect::<Vec<u8>>();
    let (result, out) = respond(&wire, &policy());
    let req = result.expect("accepted");
    assert_eq!(req.path, "/mcp?x=1");
    assert_eq!(req.protocols, ["a", "b", "mcp"]);
    assert!(!req.extensions_offered);
    assert_eq!(req.user_agent, None);
    assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
    assert!(out.ends_with(b"Sec-WebSocket-Protocol: mcp\r\n\r\n"));
}

#[test]
fn bad_requests_are_400() {
    let k15 = STANDARD.encode([7u8; 15]);
    let k17 = STANDARD.encode([7u8; 17]);
    let rows: Vec<(&str, Vec<u8>)> = vec![
        ("HTTP/1.0", replaced("GET", "GET / HTTP/1.0")),
        (
            "Host with user info",
            replaced("Host", "Host: user@127.0.0.1"),
        ),
        (
            "Host port not digits",
            replaced("Host", "Host: 127.0.0.1:abc"),
        ),
        ("Host two ports", replaced("Host", "Host: 127.0.0.1:80:80")),
        ("Host open bracket", replaced("Host", "Host: [::1")),
        ("Host with a space", replaced("Host", "Host: 127.0.0.1 x")),
        ("fragment", replaced("GET", "GET /#frag HTTP/1.1")),
        ("Host without a name", replaced("Host", "Host: :51234")),
        (
            "absolute with no host",
            replaced("GET", "GET http:///x HTTP/1.1"),
        ),
        ("two versions", replaced("GET", "GET / HTTP/1.2 HTTP/1.3")),
        ("bad escape", replaced("GET", "GET /%zz HTTP/1.1")),
        ("cut escape", replaced("GET", "GET /a%4 HTTP/1.1")),
        (
            "garbage",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n".to_vec(),
        ),
        ("bad request line", replaced("GET", "GET  /  HTTP/1.1")),
        ("bad header name", with("Bad Header: x")),
        ("no Upgrade", without("Upgrade")),
        ("Upgrade h2c", replaced("Upgrade", "Upgrade: h2c")),
        (
            "Upgrade websocketx",
            replaced("Upgrade", "Upgrade: websocketx"),
        ),
        ("no Connection", without("Connection")),
        (
            "Connection keep-alive",
            replaced("Connection", "Connection: keep-alive"),
        ),
        (
            "Connection upgraded",
            replaced("Connection", "Connection: upgraded"),
        ),
        ("no key", without("Sec-WebSocket-Key")),
        ("duplicate key", with(&format!("Sec-WebSocket-Key: {KEY}"))),
        (
            "key not base64",
            replaced(
                "Sec-WebSocket-Key",
                "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!==",
            ),
        ),
        (
            "key no padding",
            replaced(
                "Sec-WebSocket-Key",
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ",
            ),
        ),
        (
            "key 15 bytes",
            replaced("Sec-WebSocket-Key", &format!("Sec-WebSocket-Key: {k15}")),
        ),
        (
            "key 17 bytes",
            replaced("Sec-WebSocket-Key", &format!("Sec-WebSocket-Key: {k17}")),
        ),
        (
            "key empty",
            replaced("Sec-WebSocket-Key", "Sec-WebSocket-Key: "),
        ),
        ("no Host", without("Host")),
        ("empty Host", replaced("Host", "Host: ")),
        ("duplicate Host", with("Host: evil.example")),
        (
            "duplicate token",
            with("x-claude-code-ide-authorization: other"),
        ),
        (
            "duplicate Origin",
            join(&{
                let mut l = real_lines();
                l.push("Origin: http://a".into());
                l.push("Origin: http://b".into());
                l
            }),
        ),
        // Structural errors come before the version check.
        ("no key, bad version", {
            let mut l: Vec<String> = real_lines();
            l.retain(|l| !l.starts_with("Sec-WebSocket-Key"));
            l[3] = "Sec-WebSocket-Version: 8".into();
            join(&l)
        }),
    ];
    for (what, wire) in rows {
        let (result, out) = respond(&wire, &policy());
        match result {
            Err(Rejection::BadRequest(_)) => {}
            other => panic!("{what}: expected 400, got {other:?}"),
        }
        assert_refusal(&out, "HTTP/1.1 400 Bad Request");
    }
}

#[test]
fn head_with_trailing_or_missing_bytes_is_400() {
    let mut wire = join(&real_lines());
    wire.extend_from_slice(b"\x81\x80");
    assert!(matches!(
        parse_upgrade(&wire, 64),
        Err(Rejection::BadRequest(_))
    ));
    let wire = join(&real_lines());
    let cut = &wire[..wire.len() - 2];
    assert!(matches!(
        parse_upgrade(cut, 64),
        Err(Rejection::BadRequest(_))
    ));
    let bytes_after_a_bare_lf_head = b"GET / HTTP/1.1\nHost: localhost\n\n\r\n\r\n";
    assert!(matches!(
        parse_upgrade(bytes_after_a_bare_lf_head, 64),
        Err(Rejection::BadRequest(_))
    ));
    assert!(matches!(
        parse_upgrade(b"", 64),
        Err(Rejection::BadRequest(_))
    ));
}

#[test]
fn wrong_version_is_426_with_version_header() {
    let rows = [
        without("Sec-WebSocket-Version"),
        replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 8"),
        replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 13, 8"),
        replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: 013"),
        replaced("Sec-WebSocket-Version", "Sec-WebSocket-Version: "),
    ];
    for wire in rows {
        let (result, out) = respond(&wire, &policy());
        assert_eq!(result.unwrap_err(), Rejection::UpgradeRequired);
        assert_refusal(&out, "HTTP/1.1 426 Upgrade Required");
    }
    let mut out = Vec::new();
    Rejection::UpgradeRequired.write_response(&mut out);
    assert_eq!(
        out,
        b"HTTP/1.1 426 Upgrade Required\r\nConnection: Upgrade, close\r\n\
          Content-Type: text/plain; charset=utf-8\r\nContent-Length: 39\r\n\
          Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\nonly WebSocket version 13 is supported\n"
    );
}

/// An upgrade request is a GET with no body (RFC 6455 §4.1): an asterisk or authority target
/// (OPTIONS' and CONNECT's) and an announced body (its bytes would be read as WebSocket frames)
/// are refused with 400, where each was upgraded. An absolute target is taken (RFC 9112 §3.2.2),
/// its host checked in `Host`'s place; `Expect: 100-continue` is met by the answer itself.
#[test]
fn targets_other_than_a_path_and_bodies_are_400() {
    let rows = [
        replaced("GET", "GET * HTTP/1.1"),
        replaced("GET", "GET 127.0.0.1:80 HTTP/1.1"),
        replaced("GET", "GET ftp://127.0.0.1/ HTTP/1.1"),
        replaced("GET", "GET http://user@127.0.0.1/ HTTP/1.1"),
        with("Content-Length: 5"),
        with("Transfer-Encoding: chunked"),
    ];
    for w in rows {
        let (result, out) = respond(&w, &policy());
        assert!(
            matches!(result, Err(Rejection::BadRequest(_))),
            "{}: {result:?}",
            String::from_utf8_lossy(&w)
        );
        assert_refusal(&out, "HTTP/1.1 400 Bad Request");
    }
    // A body announced with a byte past ASCII in the value (obs-text, which httparse takes) is
    // announced all the same: it was upgraded, its value skipped as not UTF-8.
    for extra in [
        &b"Transfer-Encoding: chunked\xff"[..],
        b"Content-Length: 5\xff",
        b"Content-Length: \xff",
    ] {
        let mut lines = join(&real_lines());
        lines.truncate(lines.len() - 2);
        lines.extend_from_slice(extra);
        lines.extend_from_slice(b"\r\n\r\n");
        let (result, _) = respond(&lines, &policy());
        assert!(
            matches!(result, Err(Rejection::BadRequest(_))),
            "{}: {result:?}",
            String::from_utf8_lossy(extra)
        );
    }
    // No body announced is no body: still upgraded (`1*DIGIT`: `00` is 0 too).
    for line in [
        "Content-Length: 0",
        "Content-Length:  00 ",
        "Expect: 100-continue",
    ] {
        let (result, _) = respond(&with(line), &policy());
        assert!(result.is_ok(), "{line}: {result:?}");
    }
    // Empty list elements are no expectation (RFC 9110 §5.6.1.2): met as 100-continue is.
    for line in [
        "Expect: 100-continue,",
        "Expect: , 100-continue",
        "Expect:",
        "Expect: ,",
    ] {
        let (result, _) = respond(&with(line), &policy());
        assert!(result.is_ok(), "{line}: {result:?}");
    }
    // Bytes a URI does not hold but clients send unescaped (browsers, Node's ws): taken.
    for target in ["/?a=[1]|b", "/{x}", "/\"x\"", "/caf\u{e9}"] {
        let (result, _) = respond(
            &replaced("GET", &format!("GET {target} HTTP/1.1")),
            &policy(),
        );
        assert_eq!(result.map(|r| r.path), Ok(target.to_owned()));
    }
    // The absolute form: its host is the one checked, Host's is not.
    for (target, path) in [
        ("http://127.0.0.1:9/mcp?x=1", "/mcp?x=1"),
        ("WS://localhost", "/"),
        ("https://[::1]:80?q", "/?q"),
    ] {
        let wire = join(&{
            let mut l = real_lines();
            l[0] = format!("GET {target} HTTP/1.1");
            l[1] = "Host: evil.example".into();
            l
        });
        let (result, _) = respond(&wire, &policy());
        assert_eq!(result.map(|r| r.path), Ok(path.to_owned()), "{target}");
    }
    let wire = replaced("GET", "GET http://evil.example/ HTTP/1.1");
    assert_eq!(
        respond(&wire, &policy()).0.unwrap_err(),
        Rejection::Forbidden("Host is not a loopback address")
    );
}

/// The statuses HTTP has for what is not a GET of HTTP/1.1 (RFC 9110 §15), each naming what is
/// served; a HEAD is answered without a body (RFC 9110 §9.3.2).
#[test]
fn other_methods_versions_and_expectations_get_their_own_status() {
    for (line, extra, status) in [
        ("POST / HTTP/1.1", None, "HTTP/1.1 405 Method Not Allowed"),
        (
            "OPTIONS * HTTP/1.1",
            None,
            "HTTP/1.1 405 Method Not Allowed",
        ),
        ("BREW / HTTP/1.1", None, "HTTP/1.1 501 Not Implemented"),
        (
            "GET / HTTP/2.0",
            None,
            "HTTP/1.1 505 HTTP Version Not Supported",
        ),
        (
            "GET / HTTP/0.9",
            None,
            "HTTP/1.1 505 HTTP Version Not Supported",
        ),
        (
            "GET / HTTP/1.1",
            Some("Expect: 200-ok"),
            "HTTP/1.1 417 Expectation Failed",
        ),
        (
            "GET / HTTP/1.1",
            Some("Expect: 100-continue, x"),
            "HTTP/1.1 417 Expectation Failed",
        ),
    ] {
        let wire = join(&{
            let mut l = real_lines();
            l[0] = line.into();
            l.extend(extra.map(str::to_owned));
            l
        });
        let mut upgrade = Upgrade::new(16 * 1024);
        assert!(matches!(upgrade.read_head(&wire), HeadRead::Complete(_)));
        let rejection = parse_upgrade(upgrade.head(), 64).unwrap_err();
        upgrade.refuse(rejection);
        let out = String::from_utf8(upgrade.transmit(&[]).to_vec()).unwrap();
        assert!(out.starts_with(status), "{line} {extra:?}: {out}");
        assert!(
            out.ends_with(&format!("\r\n\r\n{}\n", rejection.detail())),
            "{out}"
        );
        if rejection == Rejection::MethodNotAllowed {
            assert!(out.contains("\r\nAllow: GET\r\n"), "{out}");
        }
    }
    // A later HTTP/1 is read as HTTP/1.1 (RFC 9112 §2.3).
    let (result, _) = respond(&replaced("GET", "GET /x HTTP/1.2"), &policy());
    assert_eq!(result.map(|r| r.path), Ok("/x".to_owned()));
    // HEAD: the same head, no body.
    let wire = replaced("GET", "HEAD / HTTP/1.1");
    let mut upgrade = Upgrade::new(16 * 1024);
    assert!(matches!(upgrade.read_head(&wire), HeadRead::Complete(_)));
    upgrade.refuse(parse_upgrade(upgrade.head(), 64).unwrap_err());
    let out = String::from_utf8(upgrade.transmit(&[]).to_vec()).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{out}"
    );
    assert!(
        out.contains("Content-Length: 19\r\n") && out.ends_with("\r\n\r\n"),
        "{out}"
    );
}

#[test]
fn too_many_headers_is_431() {
    let mut lines = real_lines();
    for i in 0..(64 - lines.len() + 2) {
        lines.push(format!("X-Filler-{i}: y"));
    }
    assert_eq!(lines.len() - 1, 65);
    let (result, out) = respond(&join(&lines), &policy());
    assert_eq!(result.unwrap_err(), Rejection::HeadersTooLarge);
    assert_refusal(&out, "HTTP/1.1 431 Request Header Fields Too Large");
    // Exactly 64 headers is fine.
    lines.pop();
    assert!(respond(&join(&lines), &policy()).0.is_ok());
}

#[test]
fn oversized_head_is_431() {
    let big = with(&format!("X-Padding: {}", "a".repeat(16 * 1024)));
    let (result, out) = respond(&big, &policy());
    assert_eq!(result.unwrap_err(), Rejection::HeadersTooLarge);
    assert_refusal(&out, "HTTP/1.1 431 Request Header Fields Too Large");
}

#[test]
fn token_missing_or_wrong_is_401() {
    let rows = [
        without("X-Claude-Code-Ide-Authorization"),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            "X-Claude-Code-Ide-Authorization: wrong",
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            &format!(
                "X-Claude-Code-Ide-Authorization: {}",
                &TOKEN[..TOKEN.len() - 1]
            ),
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            &format!("X-Claude-Code-Ide-Authorization: {TOKEN}x"),
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            &format!(
                "X-Claude-Code-Ide-Authorization: {}",
                TOKEN.to_ascii_lowercase()
            ),
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            "X-Claude-Code-Ide-Authorization: ",
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            &format!("Authorization: Bearer {TOKEN}"),
        ),
    ];
    for wire in rows {
        let (result, out) = respond(&wire, &policy());
        assert_eq!(result.unwrap_err(), Rejection::Unauthorized);
        assert_refusal(&out, "HTTP/1.1 401 Unauthorized");
    }
    // No token configured (echo server): no header needed.
    let open = Policy {
        token: None,
        ..policy()
    };
    assert!(respond(&without("X-Claude-Code-Ide-Authorization"), &open)
        .0
        .is_ok());
    // An empty token (an unset variable, say) lets nobody in, not even an empty header.
    let empty = Policy {
        token: Some(""),
        ..policy()
    };
    for wire in [
        replaced(
            "X-Claude-Code-Ide-Authorization",
            "X-Claude-Code-Ide-Authorization: ",
        ),
        replaced(
            "X-Claude-Code-Ide-Authorization",
            "X-Claude-Code-Ide-Authorization:",
        ),
        without("X-Claude-Code-Ide-Authorization"),
        join(&real_lines()),
    ] {
        assert_eq!(
            respond(&wire, &empty).0.unwrap_err(),
            Rejection::Unauthorized
        );
    }
}

#[test]
fn foreign_origin_is_403() {
    let allowed = vec!["vscode-webview://abc".to_owned()];
    let policy = Policy {
        allowed_origins: &allowed,
        ..policy()
    };
    for origin in [
        "https://evil.example",
        "null",
        "http://127.0.0.1:51234",
        "vscode-webview://abcd",
    ] {
        let (result, out) = respond(&with(&format!("Origin: {origin}")), &policy);
        assert_eq!(
            result.unwrap_err(),
            Rejection::Forbidden("Origin not allowed"),
            "{origin}"
        );
        assert_refusal(&out, "HTTP/1.1 403 Forbidden");
    }
    for origin in ["vscode-webview://abc", "VSCode-WebView://ABC"] {
        assert!(
            respond(&with(&format!("Origin: {origin}")), &policy)
                .0
                .is_ok(),
            "{origin}"
        );
    }
}

#[test]
fn non_loopback_host_is_403() {
    let rebinding = [
        "evil.example",
        "evil.example:51234",
        "127.0.0.1.evil.com",
        "127.0.0.1.evil.com:51234",
        "127.0.0.1.nip.io",
        "localhost.evil.com",
        "localhost.:51234.evil.com",
        "evil-localhost",
        "sub.localhost",
        "0.0.0.0:51234",
        "10.0.0.1",
        "127.1",
        "127.0.0.01",
        "2130706433",
        "0x7f000001",
        "::1",
        "[::2]",
        "[::1",
        "[::1]x",
        "[fe80::1]:80",
        "[::ffff:10.0.0.1]",
        "localhost:65536",
        "localhost:0065536",
        "localhost:+80",
        "localhost:80:80",
        "localhost :80",
        "127.0.0.1:51234 ",
    ];
    for host in rebinding {
        assert!(!is_loopback_host(host), "{host}");
    }
    for host in [
        "evil.example:51234",
        "127.0.0.1.evil.com",
        "localhost.evil.com",
    ] {
        let (result, out) = respond(&replaced("Host", &format!("Host: {host}")), &policy());
        assert!(matches!(result, Err(Rejection::Forbidden(_))), "{host}");
        assert_refusal(&out, "HTTP/1.1 403 Forbidden");
    }
    // With the check off, the same request only needs the token.
    let lax = Policy {
        check_host: false,
        ..policy()
    };
    assert!(respond(&replaced("Host", "Host: evil.example"), &lax)
        .0
        .is_ok());
}

#[test]
fn loopback_hosts_are_accepted() {
    let loopback = [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "LocalHost.:8080",
        "localhost:51234",
        "127.0.0.1",
        "127.0.0.1:51234",
        "127.255.3.4:1",
        "[::1]",
        "[::1]:51234",
        "[0:0:0:0:0:0:0:1]:80",
        "[::ffff:7f00:1]",
        "[::ffff:127.0.0.1]:51234",
        // An empty port is the default port (RFC 9110, section 4.2.3).
        "localhost:",
        "127.0.0.1:",
        "[::1]:",
        // Leading zeros (RFC 3986's `*DIGIT`), whatever the length: `08080` was taken and
        // `065535` refused.
        "127.0.0.1:08080",
        "127.0.0.1:065535",
        "localhost:0000000000000000000080",
    ];
    for host in loopback {
        assert!(is_loopback_host(host), "{host}");
        let wire = replaced("Host", &format!("Host: {host}"));
        assert!(respond(&wire, &policy()).0.is_ok(), "{host}");
    }
}

#[test]
fn policy_checks_run_host_then_origin_then_token() {
    let all_bad = join(&{
        let mut l = real_lines();
        l[1] = "Host: evil.example".into();
        l.retain(|l| !l.starts_with("X-Claude"));
        l.push("Origin: https://evil.example".into());
        l
    });
    let req = parse_upgrade(&all_bad, 64).unwrap();
    assert_eq!(
        authorize(&req, &policy()),
        Err(Rejection::Forbidden("Host is not a loopback address"))
    );
    let no_host_check = Policy {
        check_host: false,
        ..policy()
    };
    assert_eq!(
        authorize(&req, &no_host_check),
        Err(Rejection::Forbidden("Origin not allowed"))
    );
    let allowed = vec!["https://evil.example".to_owned()];
    let origin_ok = Policy {
        allowed_origins: &allowed,
        ..no_host_check
    };
    assert_eq!(authorize(&req, &origin_ok), Err(Rejection::Unauthorized));
}

#[test]
fn every_refusal_response_is_well_formed() {
    let all = [
        (
            Rejection::BadRequest("missing Host header"),
            "HTTP/1.1 400 Bad Request",
        ),
        (Rejection::Unauthorized, "HTTP/1.1 401 Unauthorized"),
        (
            Rejection::Forbidden("Origin not allowed"),
            "HTTP/1.1 403 Forbidden",
        ),
        (Rejection::UpgradeRequired, "HTTP/1.1 426 Upgrade Required"),
        (
            Rejection::HeadersTooLarge,
            "HTTP/1.1 431 Request Header Fields Too Large",
        ),
        (
            Rejection::ServiceUnavailable,
            "HTTP/1.1 503 Service Unavailable",
        ),
    ];
    for (rejection, line) in all {
        let mut out = b"kept".to_vec();
        rejection.write_response(&mut out);
        assert!(out.starts_with(b"kept"), "appends");
        assert_refusal(&out[4..], line);
        assert_eq!(line[9..12].parse::<u16>().unwrap(), rejection.status());
        assert!(rejection.to_string().starts_with(&line[9..]));
    }
    let mut out = Vec::new();
    Rejection::Unauthorized.write_response(&mut out);
    assert_eq!(
        out,
        b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\
          Content-Type: text/plain; charset=utf-8\r\nContent-Length: 38\r\n\
          WWW-Authenticate: X-Claude-Code-Ide-Authorization realm=\"claude-ide-bridge\"\r\n\r\n\
          missing or wrong authentication token\n"
    );
}

#[test]
fn debug_redacts_the_token() {
    let req = parse_upgrade(&join(&real_lines()), 64).unwrap();
    let shown = format!("{req:?} {req:#?}");
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("<redacted>"));
    assert!(shown.contains("claude-code/2.1.330"));
    let policy = policy();
    let shown = format!("{policy:?}");
    assert!(
        !shown.contains(TOKEN) && shown.contains("<redacted>"),
        "{shown}"
    );
    let none = parse_upgrade(&without("X-Claude-Code-Ide-Authorization"), 64).unwrap();
    assert!(format!("{none:?}").contains("auth_token: None"));
}

#[test]
fn constant_time_eq_compares_exactly() {
    assert!(constant_time_eq(b"", b""));
    assert!(constant_time_eq(TOKEN.as_bytes(), TOKEN.as_bytes()));
    assert!(!constant_time_eq(b"a", b""));
    assert!(!constant_time_eq(b"abc", b"abd"));
    assert!(!constant_time_eq(b"xbc", b"abc"));
    assert!(!constant_time_eq(b"abc", b"abcd"));
}

fn feed_whole(max: usize, input: &[u8]) -> (usize, HeadStatus, Vec<u8>) {
    let mut reader = HeadReader::new(max);
    let (used, status) = reader.feed(input);
    (used, status, reader.head().to_vec())
}

fn feed_split(max: usize, input: &[u8], cuts: &[usize]) -> (usize, HeadStatus, Vec<u8>) {
    let mut reader = HeadReader::new(max);
    let mut total = 0;
    let mut status = HeadStatus::Partial;
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.push(input.len());
    bounds.sort_unstable();
    for end in bounds {
        let chunk = &input[start..end];
        let (used, s) = reader.feed(chunk);
        assert!(used <= chunk.len());
        if s == HeadStatus::Partial {
            assert_eq!(used, chunk.len());
        }
        assert!(reader.buffered() <= max);
        assert_eq!(reader.bytes_scanned(), reader.buffered());
        total += used;
        status = s;
        start = end;
        if s != HeadStatus::Partial {
            // The rest of the input belongs to the next layer (or is refused).
            break;
        }
    }
    (total, status, reader.head().to_vec())
}

#[test]
fn byte_at_a_time_equals_whole() {
    let wire = join(&real_lines());
    let whole = feed_whole(16 * 1024, &wire);
    assert_eq!(whole, (wire.len(), HeadStatus::Complete, wire.clone()));
    let mut reader = HeadReader::new(16 * 1024);
    for (i, byte) in wire.iter().enumerate() {
        let (used, status) = reader.feed(std::slice::from_ref(byte));
        assert_eq!(used, 1);
        let expected = if i + 1 == wire.len() {
            HeadStatus::Complete
        } else {
            HeadStatus::Partial
        };
        assert_eq!(status, expected);
    }
    assert_eq!(reader.head(), &wire[..]);
    assert_eq!(reader.feed(b"more"), (0, HeadStatus::Complete));
    assert_eq!(reader.status(), HeadStatus::Complete);
}

#[test]
fn pipelined_bytes_are_left_unconsumed() {
    let head = join(&real_lines());
    let frame = b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58";
    let mut wire = head.clone();
    wire.extend_from_slice(frame);
    let mut reader = HeadReader::new(16 * 1024);
    let (used, status) = reader.feed(&wire);
    assert_eq!(status, HeadStatus::Complete);
    assert_eq!(used, head.len());
    assert_eq!(&wire[used..], frame);
    assert_eq!(reader.head(), &head[..]);
    // Also when the frame arrives in the same read as the last byte of the terminator.
    let mut reader = HeadReader::new(16 * 1024);
    assert_eq!(reader.feed(&wire[..head.len() - 1]).1, HeadStatus::Partial);
    assert_eq!(
        reader.feed(&wire[head.len() - 1..]),
        (1, HeadStatus::Complete)
    );
}

/// The empty line is found across reads, a CR before the LF or not; two CRs in a row, which no
/// valid head holds (a bare CR), end it there too, to be refused at once.
#[test]
fn terminator_is_found_across_reads_and_after_stray_crs() {
    let mut reader = HeadReader::new(64);
    for chunk in [&b"GET / HTTP/1.1\r"[..], b"\n", b"H: x\r", b"\n\r", b"\n"] {
        reader.feed(chunk);
    }
    assert_eq!(reader.status(), HeadStatus::Complete);
    assert_eq!(reader.head(), b"GET / HTTP/1.1\r\nH: x\r\n\r\n");
    let mut reader = HeadReader::new(64);
    assert_eq!(reader.feed(b"A\rB\r\n"), (5, HeadStatus::Partial));
    assert_eq!(reader.feed(b"C\r\n\nY"), (4, HeadStatus::Complete));
    assert_eq!(reader.head(), b"A\rB\r\nC\r\n\n");
    let mut reader = HeadReader::new(64);
    assert_eq!(reader.feed(b"A\r"), (2, HeadStatus::Partial));
    assert_eq!(reader.feed(b"\rB\r\n\r\n"), (1, HeadStatus::Complete));
    assert_eq!(reader.head(), b"A\r\r");
    // At a line's start, after a header's CRLF: the same (the head waited for its timeout).
    let mut reader = HeadReader::new(64);
    assert_eq!(
        reader.feed(b"GET / HTTP/1.1\r\nH: x\r\n\r\r\n"),
        (24, HeadStatus::Complete)
    );
    assert_eq!(reader.head(), b"GET / HTTP/1.1\r\nH: x\r\n\r\r");
    let (result, out) = respond(reader.head(), &policy());
    assert!(matches!(result, Err(Rejection::BadRequest(_))));
    assert_refusal(&out, "HTTP/1.1 400 Bad Request");
    // No request starts with a byte that is no letter (TLS's ClientHello: 0x16, a `wss://`
    // client): refused at its first byte, not at the head's timeout.
    let mut reader = HeadReader::new(64);
    assert_eq!(
        reader.feed(b"\x16\x03\x01\x02\x00"),
        (1, HeadStatus::Complete)
    );
    let (result, out) = respond(reader.head(), &policy());
    assert!(matches!(result, Err(Rejection::BadRequest(_))));
    assert_refusal(&out, "HTTP/1.1 400 Bad Request");
    // An empty line before the request line is passed over as before.
    let mut reader = HeadReader::new(64);
    assert_eq!(reader.feed(b"\r\nGET"), (5, HeadStatus::Partial));
}

/// RFC 9112, section 2.2: a recipient may take a bare LF as a line's end. A head whose lines end so, in any
/// mix with CRLF, ends at its first empty line and is upgraded like any other, not left waiting for a
/// `\r\n\r\n` that never comes.
#[test]
fn a_head_with_bare_lf_lines_ends_at_its_empty_line_and_is_upgraded() {
    let lines = real_lines();
    let endings: [(&str, &str); 4] = [
        ("\n", "\n"),
        ("\n", "\r\n"),
        ("\r\n", "\n"),
        ("\r\n", "\r\n"),
    ];
    for (line_end, blank) in endings {
        let mut wire = lines.join(line_end).into_bytes();
        wire.extend_from_slice(line_end.as_bytes());
        wire.extend_from_slice(blank.as_bytes());
        let head_len = wire.len();
        wire.extend_from_slice(b"\x81\x80");
        let mut reader = HeadReader::new(16 * 1024);
        assert_eq!(
            reader.feed(&wire),
            (head_len, HeadStatus::Complete),
            "{line_end:?} then {blank:?}"
        );
        let (result, out) = respond(&wire[..head_len], &policy());
        assert_eq!(result.unwrap().auth_token(), Some(TOKEN));
        assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
        // Fed a byte at a time, it ends at the same place.
        let mut reader = HeadReader::new(16 * 1024);
        let used: usize = wire
            .iter()
            .map(|b| reader.feed(std::slice::from_ref(b)).0)
            .sum();
        assert_eq!((used, reader.status()), (head_len, HeadStatus::Complete));
    }
    // A bare CR is no line's end: the head goes on, and the parser refuses the CR.
    let mut wire = join(&lines);
    let at = wire.windows(2).position(|w| w == b"\r\n").unwrap();
    wire.remove(at + 1);
    let (result, out) = respond(&wire, &policy());
    assert!(matches!(result, Err(Rejection::BadRequest(_))));
    assert_refusal(&out, "HTTP/1.1 400 Bad Request");
    // Every line ended by a bare CR: the head ends at the first two in a row (it never ended,
    // and the client waited for the head's timeout), and is refused the same way.
    let wire: Vec<u8> = join(&lines)
        .split(|&b| b == b'\n')
        .flat_map(|l| l.iter().copied())
        .collect();
    assert!(!wire.contains(&b'\n'));
    let mut reader = HeadReader::new(16 * 1024);
    let (used, status) = reader.feed(&wire);
    assert_eq!(status, HeadStatus::Complete);
    assert!(wire[..used].ends_with(b"\r\r"), "{:?}", &wire[..used]);
    let (result, out) = respond(&wire[..used], &policy());
    assert!(matches!(result, Err(Rejection::BadRequest(_))));
    assert_refusal(&out, "HTTP/1.1 400 Bad Request");
}

#[test]
fn stream_without_terminator_is_too_large_and_bounded() {
    let max = 16 * 1024;
    let stream = vec![b'a'; 1024 * 1024];
    let mut reader = HeadReader::new(max);
    let (used, status) = reader.feed(&stream);
    assert_eq!((used, status), (max, HeadStatus::TooLarge));
    assert_eq!(reader.buffered(), max);
    assert!(reader.buf.capacity() <= max);
    assert_eq!(reader.feed(&stream), (0, HeadStatus::TooLarge));

    // In 1000-byte reads: the same bytes kept, never more than the limit.
    let mut reader = HeadReader::new(max);
    let mut consumed = 0;
    for chunk in stream.chunks(1000) {
        let (used, status) = reader.feed(chunk);
        consumed += used;
        assert!(reader.buffered() <= max);
        assert!(reader.buf.capacity() <= max);
        if status == HeadStatus::TooLarge {
            break;
        }
    }
    assert_eq!((consumed, reader.status()), (max, HeadStatus::TooLarge));
}

#[test]
fn head_of_exactly_the_limit_is_complete() {
    let wire = join(&real_lines());
    assert_eq!(feed_whole(wire.len(), &wire).1, HeadStatus::Complete);
    assert_eq!(
        feed_whole(wire.len() - 1, &wire),
        (
            wire.len() - 1,
            HeadStatus::TooLarge,
            wire[..wire.len() - 1].to_vec()
        )
    );
    assert_eq!(HeadReader::new(0).feed(b"x"), (0, HeadStatus::TooLarge));
}

#[test]
fn scan_is_linear() {
    // 16 KiB one byte at a time under a larger limit: each feed examines exactly the new byte.
    let n = 16 * 1024;
    let mut reader = HeadReader::new(2 * n);
    let line = b"X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    for i in 0..n {
        let before = reader.bytes_scanned();
        let (used, status) = reader.feed(&line[i % line.len()..][..1]);
        assert_eq!((used, status), (1, HeadStatus::Partial));
        assert_eq!(reader.bytes_scanned(), before + 1);
    }
    assert_eq!(reader.bytes_scanned(), n);
    assert_eq!(reader.buffered(), n);
    // Bytes refused after completion are not examined.
    assert_eq!(reader.feed(b"\r\n\r\nGET"), (4, HeadStatus::Complete));
    reader.feed(&[b'z'; 100]);
    assert_eq!(reader.bytes_scanned(), n + 4);
}

fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![4 => any::<u8>(), 1 => Just(b'\r'), 1 => Just(b'\n')],
        0..600,
    )
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in wire_bytes(), max in 0usize..700, max_headers in 0usize..80) {
        let mut reader = HeadReader::new(max);
        let (used, status) = reader.feed(&bytes);
        prop_assert!(used <= bytes.len());
        prop_assert!(reader.buffered() <= max);
        if let Ok(req) = parse_upgrade(reader.head(), max_headers) {
            let _ = authorize(&req, &policy());
            let mut out = Vec::new();
            write_accept(&mut out, &req, Some("mcp"));
        }
        let _ = parse_upgrade(&bytes, max_headers).map_err(|r| r.write_response(&mut Vec::new()));
        let _ = is_loopback_host(&String::from_utf8_lossy(&bytes));
        let _ = status;
    }

    #[test]
    fn mutated_real_requests_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
    ) {
        let mut wire = join(&real_lines());
        for (at, byte) in edits {
            let i = at.index(wire.len());
            wire[i] = byte;
        }
        let (result, out) = respond_lenient(&wire);
        if let Err(rejection) = result {
            let (lines, _) = split_response(&out);
            let prefix = format!("HTTP/1.1 {} ", rejection.status());
            prop_assert!(lines[0].starts_with(&prefix));
        } else {
            prop_assert!(out.starts_with(b"HTTP/1.1 101 "));
        }
    }

    #[test]
    fn head_reader_is_split_invariant(
        bytes in wire_bytes(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        max in 1usize..700,
    ) {
        prop_assert_eq!(feed_whole(max, &bytes), feed_split(max, &bytes, &cuts));
    }

    #[test]
    fn real_request_is_split_invariant(
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        tail in prop::collection::vec(any::<u8>(), 0..32),
    ) {
        let head = join(&real_lines());
        let mut wire = head.clone();
        wire.extend_from_slice(&tail);
        let got = feed_split(16 * 1024, &wire, &cuts);
        prop_assert_eq!(got, (head.len(), HeadStatus::Complete, head));
    }
}

/// Like `respond`, for inputs that may be incomplete.
fn respond_lenient(wire: &[u8]) -> (Result<UpgradeRequest, Rejection>, Vec<u8>) {
    let mut reader = HeadReader::new(16 * 1024);
    if reader.feed(wire).1 == HeadStatus::Partial {
        return (Err(Rejection::BadRequest("incomplete")), {
            let mut out = Vec::new();
            Rejection::BadRequest("incomplete").write_response(&mut out);
            out
        });
    }
    respond(wire, &policy())
}

/// `allowed_hosts` (`--allow-host`): the names given pass the Host check, with any valid port, in
/// any case; other names are still refused, loopback still passes, and the token is still required.
#[test]
fn allowed_host_names_pass_the_host_check_and_nothing_else_changes() {
    let names = vec!["host.docker.internal".to_owned(), "[fd00::1]".to_owned()];
    let named = Policy {
        allowed_hosts: &names,
        ..policy()
    };
    for host in [
        "host.docker.internal",
        "host.docker.internal:41234",
        "HOST.Docker.internal.",
        "[fd00::1]:80",
        "127.0.0.1:9",
        "host.docker.internal:",
    ] {
        let wire = replaced("Host", &format!("Host: {host}"));
        assert!(respond(&wire, &named).0.is_ok(), "{host}");
        assert!(
            host.starts_with("127") || respond(&wire, &policy()).0.is_err(),
            "{host} is refused without the opt-in"
        );
    }
    for (host, status) in [
        ("host.docker.internal.evil.com", 403),
        ("evil.host.docker.internal", 403),
        ("host.docker.internal:99999", 403),
        ("[fd00::2]", 403),
        // Not a host[:port] at all (RFC 9112 §3.2).
        ("host.docker.internal:-1", 400),
        ("host.docker.internal:80:80", 400),
        ("[fd00::1]x", 400),
        ("fd00::1", 400),
        ("", 400),
    ] {
        assert!(!is_allowed_host(host, &names), "{host}");
        let wire = replaced("Host", &format!("Host: {host}"));
        assert_eq!(
            respond(&wire, &named).0.err().map(|r| r.status()),
            Some(status),
            "{host}"
        );
    }
    // An allowed name without the token: 401, as for loopback.
    let wire = join(&{
        let mut l = real_lines();
        l[1] = "Host: host.docker.internal:41234".into();
        l.retain(|l| !l.starts_with("X-Claude"));
        l
    });
    let req = parse_upgrade(&wire, 64).unwrap();
    assert_eq!(authorize(&req, &named), Err(Rejection::Unauthorized));
    assert!(!is_allowed_host("anything", &[String::new()]));
}
