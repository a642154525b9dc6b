//! `doctor` where the code is (README, "Remote"): what is particular about `claude` running over
//! ssh, in a container or in WSL, and what `CLAUDE_CODE_IDE_HOST_OVERRIDE` changes (claude then
//! connects to that host instead of 127.0.0.1, so that host must answer, accept its own name in
//! `Host`, and be left out of the proxy).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use std::time::Duration;

use claude_ide_bridge_runtime::lock::pid_alive;

use super::{Found, Report};

/// A non-empty environment variable.
pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Says where this runs (over ssh, in a container, in WSL) and checks what claude here would do
/// with `CLAUDE_CODE_IDE_HOST_OVERRIDE`: `matching` are the live lock files for the directory,
/// `all` every one found, `proxies` the proxy variables set and `no_proxy` their exceptions.
pub(super) fn remote_view(
    r: &mut Report,
    matching: &[&Found],
    all: &[Found],
    no_proxy: &str,
    proxies: &[&str],
) {
    if let Some(c) = env("SSH_CONNECTION") {
        let from = c.split_whitespace().next().unwrap_or("?");
        r.info(&format!(
            "running over ssh (from {from}): claude here reads the lock files of this machine; an \
             editor on yours reaches a bridge here through `ssh ... claude-ide-bridge serve --stdio \
             --path-map ...` (README, \"Remote\")"
        ));
    }
    if crate::sys::in_container() {
        r.info(
            "running in a container: claude here reads the lock files of the container only, at \
             127.0.0.1 of the container's network; a bridge on the host serves it only when the \
             container shares the host's network (`--network host`) and its ~/.claude/ide (a \
             mount): claude deletes the lock files of processes it cannot see (the host's) at \
             each start, and the host's bridge writes its own again at once (Linux, macOS); with \
             a network of its own (Docker's default), run the bridge in the container \
             (`docker exec -i ... claude-ide-bridge serve --stdio`), or serve on the address the \
             container reaches the host by (`serve --host 172.17.0.1 --allow-host \
             host.docker.internal`, and here CLAUDE_CODE_IDE_HOST_OVERRIDE=host.docker.internal; \
             README, \"Remote\")",
        );
        // As claude tells them: by the pid alone (a file it cannot read it deletes too, but
        // `doctor` says so of each already).
        let unseen = all
            .iter()
            .filter(|f| f.ours && matches!(&f.lock, Ok(l) if !pid_alive(l.pid)))
            .count();
        if unseen > 0 {
            r.info(&format!(
                "{unseen} lock file(s) name a process not running here: claude here deletes them \
                 at start (left by a bridge that was killed, or written by one on the host, whose \
                 process id is another namespace's)"
            ));
        }
    }
    if let Some(distro) = env("WSL_DISTRO_NAME") {
        r.info(&format!(
            "running in WSL ({distro}): an editor on Windows names C:\\... what is /mnt/c/... here; \
             start the bridge with --path-map wsl"
        ));
        let windows = crate::sys::wsl_windows_lock_dirs().unwrap_or_default();
        let seen = match windows.is_empty() {
            true => "no Windows profile with a .claude folder found under /mnt/c/Users".to_owned(),
            false => format!(
                "here: {}",
                windows
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        };
        r.info(&format!(
            "a claude run on Windows (not in WSL) reads %USERPROFILE%\\.claude\\ide ({seen}), \
             not the lock files of this distribution: it does not see a bridge started here"
        ));
        r.info(
            "a claude run here reads the lock files of this distribution and also those of \
             Windows ($USERPROFILE/.claude/ide and each /mnt/c/Users/*/.claude/ide; a Windows \
             bridge's C:\\... folders are read as /mnt/c/...): it sees a bridge started on \
             Windows, keeps its lock file while its port answers, and connects when that port is \
             reachable from here (e.g. WSL 2 with mirrored networking; in WSL 2's default NAT mode \
             127.0.0.1 here is not Windows' loopback)",
        );
    }
    let Some(host) = env("CLAUDE_CODE_IDE_HOST_OVERRIDE") else {
        return;
    };
    let host = host.trim().to_string();
    r.info(&match host.as_str() {
        "127.0.0.1" => format!(
            "CLAUDE_CODE_IDE_HOST_OVERRIDE={host}: the address claude connects to without it"
        ),
        _ => format!(
            "CLAUDE_CODE_IDE_HOST_OVERRIDE={host}: claude connects to {host}, not to 127.0.0.1"
        ),
    });
    if host.contains(':') && !host.starts_with('[') && host.parse::<std::net::Ipv6Addr>().is_err() {
        r.problem(
            &format!(
                "CLAUDE_CODE_IDE_HOST_OVERRIDE={host} is not a host: claude connects to \
                 ws://{host}:PORT, which is not a URL"
            ),
            "give the host alone, without a port or a scheme (export \
             CLAUDE_CODE_IDE_HOST_OVERRIDE=host.docker.internal)",
        );
        return;
    }
    if host.contains(':') && !host.starts_with('[') {
        r.problem(
            &format!(
                "CLAUDE_CODE_IDE_HOST_OVERRIDE={host} is an IPv6 address without brackets: claude \
                 connects to ws://{host}:PORT, which is not a URL"
            ),
            &format!("export CLAUDE_CODE_IDE_HOST_OVERRIDE='[{host}]'"),
        );
        return;
    }
    for f in matching {
        let port = f.port;
        match upgrade_status(&host, port) {
            Ok(401) => r.ok(&format!(
                "{host}:{port} answers and takes the name {host} (the token decides)"
            )),
            Ok(403) => r.problem(
                &format!("{host}:{port} refuses the name {host} in Host (403): it is not loopback"),
                &format!(
                    "start that bridge with --allow-host {host} (SECURITY.md, \"What \
                     --allow-host changes\")"
                ),
            ),
            Ok(status) => r.info(&format!("{host}:{port} answered HTTP {status}")),
            Err(e) => r.problem(
                &format!("{host}:{port} does not answer from here: {e}"),
                "the bridge must listen on an address this machine reaches as that name (--host; \
                 SECURITY.md, \"What --allow-host changes\")",
            ),
        }
    }
    if !proxies.is_empty() && !claude_bypasses_proxies(&host) && !covers_host(no_proxy, &host) {
        r.problem(
            &format!(
                "{} is set and no_proxy/NO_PROXY does not cover {host}: claude would send its \
                 connection to the proxy",
                proxies.join(", ")
            ),
            &format!("export no_proxy=\"$no_proxy,{host}\" NO_PROXY=\"$NO_PROXY,{host}\""),
        );
    }
}

/// The HTTP status a bridge at `host:port` answers to an upgrade naming `host` without a token:
/// 401 once the `Host` check passed, 403 when it refused the name. Bounded: 2 s to connect to
/// each address, 2 s to answer.
pub(super) fn upgrade_status(host: &str, port: u16) -> Result<u16, String> {
    // As claude writes it in its URL: an IPv6 address in brackets.
    let bare = unbracketed(host);
    let addrs = (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = format!("{host} has no address");
    for addr in addrs {
        let mut s = match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => s,
            Err(e) => {
                last = format!("{addr}: {e}");
                continue;
            }
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let name = match bare.contains(':') {
            true => format!("[{bare}]:{port}"),
            false => format!("{host}:{port}"),
        };
        let head = super::upgrade_head(&name, None);
        s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        let mut line = [0u8; 12];
        s.read_exact(&mut line)
            .map_err(|e| format!("{addr}: no HTTP answer: {e}"))?;
        return std::str::from_utf8(&line[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("{addr}: not an HTTP answer"));
    }
    Err(last)
}

/// An IPv6 address without the brackets it has in a URL (`[::1]`), as the override and
/// `no_proxy` may write it; anything else as it is.
fn unbracketed(host: &str) -> &str {
    (host.strip_prefix('[').and_then(|h| h.strip_suffix(']'))).unwrap_or(host)
}

/// Whether claude reaches an IDE at `host` directly whatever the proxy variables say: as its
/// URL names a loopback host, `localhost`, `::1` or `127.` and three more numbers (claude 2.1's
/// own rule, read in its code).
fn claude_bypasses_proxies(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let loopback_v4 = host.strip_prefix("127.").is_some_and(|rest| {
        let parts: Vec<&str> = rest.split('.').collect();
        parts.len() == 3
            && (parts.iter())
                .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
    });
    loopback_v4 || matches!(host.as_str(), "localhost" | "::1" | "[::1]")
}

/// Whether a `no_proxy` list leaves `host` out of the proxy: `*`, the host itself, or a domain it
/// is under (`example.com` and `.example.com` both cover `a.example.com`), ASCII
/// case-insensitively; for a loopback address, the loopback entries `doctor` already takes.
fn covers_host(no_proxy: &str, host: &str) -> bool {
    let host = unbracketed(host.trim_end_matches('.')).to_ascii_lowercase();
    if host
        .parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback())
        && super::covers_loopback(no_proxy)
    {
        return true;
    }
    no_proxy.split(',').map(str::trim).any(|e| {
        let e = unbracketed(e.trim_end_matches('.')).to_ascii_lowercase();
        let domain = e.strip_prefix('.').unwrap_or(&e);
        e == "*"
            || (!domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}"))))
    })
}

#[cfg(test)]
mod tests {
    use super::{claude_bypasses_proxies, covers_host};

    #[test]
    fn claude_bypasses_proxies_for_loopback_names_only() {
        for host in [
            "127.0.0.1",
            "127.1.2.3",
            "localhost",
            "LocalHost",
            "[::1]",
            "::1",
        ] {
            assert!(claude_bypasses_proxies(host), "{host}");
        }
        for host in [
            "127.0.0",
            "127.0.0.1.2",
            "127.0.0.1234",
            "128.0.0.1",
            "host.docker.internal",
            "[::2]",
            "localhost.",
        ] {
            assert!(!claude_bypasses_proxies(host), "{host}");
        }
    }

    #[test]
    fn no_proxy_covers_a_host_by_name_or_domain() {
        let h = "host.docker.internal";
        assert!(covers_host("localhost,host.docker.internal", h));
        assert!(covers_host(" .docker.internal ", h));
        assert!(covers_host("docker.internal", h));
        assert!(covers_host("HOST.DOCKER.INTERNAL.", h));
        assert!(covers_host("*", h));
        assert!(!covers_host("internal.example,ocker.internal", h));
        assert!(!covers_host("", h));
        assert!(!covers_host(",", h));
        assert!(covers_host("127.0.0.0/8", "127.0.0.1"));
        assert!(!covers_host("localhost", "127.0.0.1"));
        // IPv6, bracketed as in claude's URL or not.
        assert!(covers_host("localhost,::1", "[::1]"));
        assert!(covers_host("[::1]", "[::1]"));
        assert!(!covers_host("127.0.0.1,localhost", "[::1]"));
    }
}
