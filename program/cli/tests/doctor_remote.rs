//! `doctor` where the code is: over ssh, and with `CLAUDE_CODE_IDE_HOST_OVERRIDE` (claude then
//! connects to that name, which the bridge must accept and the proxy must leave out). The name
//! used is `127.1`: it reaches loopback (so the test stays on it) but is not a loopback name for
//! the Host check, as `host.docker.internal` is not.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use common::*;

/// `doctor` for the sandbox's workspace with `env` set; its exit code and report.
fn doctor(sb: &Sandbox, env: &[(&str, &str)]) -> (i32, String) {
    let mut c = sb.command();
    c.arg("doctor").arg(&sb.ws).arg("--no-lsp");
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
        "SSH_CONNECTION",
        "CLAUDE_CODE_IDE_HOST_OVERRIDE",
        "WSL_DISTRO_NAME",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code().unwrap(), out)
}

#[test]
fn doctor_says_what_claude_over_there_needs_from_a_host_override() {
    let sb = Sandbox::new();
    let s = Served::start(&sb, &["--no-lsp", "--on-diff", "reject"]);
    let remote = [
        ("SSH_CONNECTION", "10.1.2.3 50000 10.0.0.1 22"),
        ("CLAUDE_CODE_IDE_HOST_OVERRIDE", "127.1"),
        ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ("no_proxy", "127.0.0.1,localhost"),
    ];
    let (code, out) = doctor(&sb, &remote);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("running over ssh (from 10.1.2.3)"), "{out}");
    assert!(
        out.contains("claude connects to 127.1, not to 127.0.0.1"),
        "{out}"
    );
    let port = s.port;
    assert!(
        out.contains(&format!("127.1:{port} refuses the name 127.1"))
            && out.contains("--allow-host 127.1"),
        "{out}"
    );
    assert!(
        out.contains("HTTPS_PROXY is set and no_proxy/NO_PROXY does not cover 127.1"),
        "{out}"
    );
    drop(s);

    // The bridge takes the name, and the proxy leaves it out: nothing left to fix.
    let s = Served::start(
        &sb,
        &["--no-lsp", "--on-diff", "reject", "--allow-host", "127.1"],
    );
    let mut fixed = remote;
    fixed[3] = ("no_proxy", "127.0.0.1,127.1");
    let (code, out) = doctor(&sb, &fixed);
    assert!(
        out.contains(&format!(
            "127.1:{} answers and takes the name 127.1",
            s.port
        )),
        "{out}"
    );
    assert_eq!(code, 0, "{out}");
}

/// A bridge listening on IPv6's loopback (`serve --host ::1`), where claude does not look by
/// itself: `doctor` finds it there and says the override claude needs; with that override it
/// checks that host instead of 127.0.0.1, and an IPv6 override without brackets (no URL) is
/// named.
#[test]
fn doctor_finds_a_bridge_on_ipv6_loopback_and_the_override_it_needs() {
    let sb = Sandbox::new();
    let s = Served::start(&sb, &["--no-lsp", "--host", "::1"]);
    let port = s.port;
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("port {port} from "))
            && out.contains("does not answer on 127.0.0.1")
            && out.contains("but on [::1], where claude does not look by itself")
            && out.contains(&format!(
                "CLAUDE_CODE_IDE_HOST_OVERRIDE='[::1]' CLAUDE_CODE_SSE_PORT={port}"
            )),
        "{out}"
    );
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_IDE_HOST_OVERRIDE", "[::1]")]);
    assert!(
        out.contains(&format!("[::1]:{port} answers and takes the name [::1]")),
        "{out}"
    );
    assert!(!out.contains("does not answer on 127.0.0.1"), "{out}");
    assert_eq!(code, 0, "{out}");
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_IDE_HOST_OVERRIDE", "::1")]);
    assert!(
        out.contains("CLAUDE_CODE_IDE_HOST_OVERRIDE=::1 is an IPv6 address without brackets")
            && out.contains("export CLAUDE_CODE_IDE_HOST_OVERRIDE='[::1]'"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");
}

/// In WSL, `doctor` says where a Windows `claude` looks (and that it does not see a bridge
/// started here), and that a `claude` run here reads the Windows lock folders too, as the real
/// client does (2.1.330: `$USERPROFILE/.claude/ide` and each `/mnt/c/Users/*/.claude/ide`, a lock
/// file with a dead pid kept while its port answers): it can connect to a bridge started on
/// Windows when that port is reachable from WSL.
#[test]
fn doctor_in_wsl_says_claude_here_reads_the_windows_lock_folders() {
    let sb = Sandbox::new();
    let (_, out) = doctor(
        &sb,
        &[
            ("WSL_DISTRO_NAME", "Debian"),
            ("USERPROFILE", r"C:\Users\me"),
        ],
    );
    assert!(out.contains("running in WSL (Debian)"), "{out}");
    assert!(
        out.contains("here: /mnt/c/Users/me/.claude/ide")
            && out.contains("it does not see a bridge started here"),
        "{out}"
    );
    assert!(
        out.contains(
            "a claude run here reads the lock files of this distribution and also those of Windows"
        ) && out.contains("it sees a bridge started on Windows")
            && out.contains("connects when that port is reachable from here"),
        "{out}"
    );
    assert!(
        !out.contains("does not see a bridge started on Windows"),
        "{out}"
    );
}

/// In WSL, `doctor` looks in the Windows lock folders it says a claude here reads: a bridge whose
/// lock file is there is found (it said "no lock file claude reads here" before), and a Windows
/// bridge's file (`runningInWindows`, a pid of no process here) is taken by its port, its
/// `C:\...` folders read as `/mnt/c/...`. `USERPROFILE` as `WSLENV=USERPROFILE/p` hands it over
/// (this side's path).
#[test]
fn doctor_in_wsl_reads_the_windows_lock_folders_as_claude_here_does() {
    let sb = Sandbox::new();
    let profile = sb.root().join("winprofile");
    let ide = profile.join(".claude").join("ide");
    std::fs::create_dir_all(&ide).unwrap();
    std::fs::set_permissions(&ide, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let s = Served::start(&sb, &["--no-lsp", "--lock-dir", ide.to_str().unwrap()]);
    assert!(s.lock.starts_with(&ide), "{}", s.lock.display());
    // A Windows bridge's file whose port answers here, and one whose port does not.
    let answering = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = answering.local_addr().unwrap().port();
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for (port, folder) in [(open_port, r"C:\Users\me\proj"), (closed_port, r"D:\gone")] {
        let v = serde_json::json!({"pid": 999_999_999u32, "workspaceFolders": [folder],
            "ideName": "Windows IDE", "transport": "ws", "runningInWindows": true,
            "authToken": "t"});
        std::fs::write(ide.join(format!("{port}.lock")), v.to_string()).unwrap();
    }
    let wsl = [
        ("WSL_DISTRO_NAME", "Debian"),
        ("USERPROFILE", profile.to_str().unwrap()),
    ];
    let (_, out) = doctor(&sb, &wsl);
    assert!(
        out.contains("claude reads lock files from: ")
            && out.contains(&format!(" and {}", ide.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("{}: live", s.lock.display())),
        "{out}"
    );
    assert!(
        !out.contains("no lock file claude reads here") && !out.contains("no live lock file"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{open_port}.lock: a Windows bridge's, Windows IDE on port {open_port}, answering \
             here, folders /mnt/c/Users/me/proj"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{closed_port}.lock: a Windows bridge's (Windows IDE, port {closed_port}), whose port \
             does not answer here"
        )),
        "{out}"
    );
    // Not in WSL: that folder is not read (only named as where the bridge's lock file is).
    let (_, out) = doctor(&sb, &[("USERPROFILE", profile.to_str().unwrap())]);
    let reads = out
        .lines()
        .find(|l| l.contains("claude reads lock files from"))
        .unwrap();
    assert!(!reads.contains(&ide.display().to_string()), "{out}");
    assert!(!out.contains("a Windows bridge's"), "{out}");
    drop(answering);
    drop(s);
}

/// In a container (Docker's `/.dockerenv`, Podman's `/run/.containerenv`), `doctor` does not
/// suggest sharing the host's lock folder: claude deletes at start a lock file whose process it
/// cannot see, and the host's bridge is such a process. It points to the bridge in the container.
/// Only checked where this test runs in a container.
#[test]
fn doctor_in_a_container_does_not_suggest_the_hosts_lock_files() {
    let in_container = ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !in_container {
        eprintln!("not in a container: nothing to check");
        return;
    }
    let sb = Sandbox::new();
    // Three lock files: a dead process's (claude deletes it), and two of a live one, which claude
    // keeps: one whose start says another process wrote it (the pid handed out again), one of
    // another IDE without a lock file this program reads as its own.
    let dir = sb.lock_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let dead = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let lock = |port: u16, pid: u32, start: Option<&str>| {
        let mut v = serde_json::json!({"pid": pid, "workspaceFolders": ["/elsewhere"],
            "ideName": "Fake", "transport": "ws", "runningInWindows": false, "authToken": "t"});
        if let Some(start) = start {
            v["processStart"] = start.into();
        }
        std::fs::write(dir.join(format!("{port}.lock")), v.to_string()).unwrap();
    };
    lock(4201, dead, None);
    lock(4202, std::process::id(), Some("another-boot/1"));
    std::fs::write(
        dir.join("4203.lock"),
        format!("{{\"pid\": {}}}", std::process::id()),
    )
    .unwrap();
    let (_, out) = doctor(&sb, &[]);
    assert!(
        out.contains("1 lock file(s) name a process not running here"),
        "{out}"
    );
    assert!(out.contains("running in a container"), "{out}");
    assert!(
        !out.contains("unless its lock directory is shared"),
        "{out}"
    );
    assert!(
        out.contains("claude deletes the lock files of processes it cannot see")
            && out.contains("writes its own again at once")
            && out.contains("--network host")
            && out.contains("run the bridge in the container"),
        "{out}"
    );
}
