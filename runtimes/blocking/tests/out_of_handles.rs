//! Stopping a server when the process is out of file handles: the acceptor thread still ends and
//! the port is given back. (A test binary of its own: it lowers the process's open-files limit.)
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use claude_ide_bridge_blocking::{IdeServer, LockFileMode, Options};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The threads of this process whose name starts with `prefix` (names are cut to 15 bytes).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// The acceptor was woken by a connection of the server's own, which needs a new socket: out of
/// handles, stopping left it waiting in `accept` for good, holding the port.
#[test]
fn a_server_stopped_out_of_file_handles_ends_its_acceptor() {
    let mut opts = Options::new(vec![std::env::temp_dir()], "test");
    opts.lock_file = LockFileMode::Disabled;
    let server = IdeServer::start(opts).unwrap();
    let port = server.port();
    // (A thread names itself once it runs.)
    let give_up = Instant::now() + Duration::from_secs(5);
    while threads_named("ide-bridge-acce") != 1 {
        assert!(Instant::now() < give_up, "no acceptor thread");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every handle taken, under a lower limit.
    let limit = getrlimit(Resource::Nofile);
    let low = Rlimit {
        current: Some(256),
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, low).unwrap();
    let mut filler = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        filler.push(f);
        assert!(filler.len() <= 256);
    }
    server.stop();
    drop(filler);
    setrlimit(Resource::Nofile, limit).unwrap();
    let give_up = Instant::now() + Duration::from_secs(5);
    while threads_named("ide-bridge-acce") > 0 {
        assert!(Instant::now() < give_up, "the acceptor still waits");
        std::thread::sleep(Duration::from_millis(10));
    }
    TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
}
