//! Test support shared by the workspace's crates (`publish = false`, a dev-dependency only).
//!
//! - [`scenarios`]: the scenarios every runtime runs over real loopback sockets; a runtime's test
//!   file implements [`scenarios::Rt`] and invokes [`socket_scenarios!`] or [`handler_scenarios!`];
//! - [`client`]: a small blocking WebSocket client on the engine's frame codec;
//! - [`bridge`]: the program's `serve` as a child process (its port and token);
//! - [`procs`]: processes seen through Linux `/proc` (descendants, liveness, resident memory;
//!   nothing elsewhere);
//! - [`platform`]: what the scenarios do differently per operating system (modes, links, signals);
//! - [`counting_alloc`]: a counting global allocator for tests that measure memory;
//! - [`lsp_frames`]: Language Server Protocol framing, for stand-in servers and minimal clients;
//! - [`skip`]: a test that cannot run here, said in the suite's summary (a failure under CI when
//!   what it lacks is a tool the suite installs);
//! - [`joined`]: a thread's result, or a failure naming what did not end in time (a test of a
//!   stop or a wait fails instead of hanging the suite when what it tests breaks).

pub mod bridge;
pub mod client;
pub mod counting_alloc;
pub mod lsp_frames;
pub mod platform;
pub mod procs;
pub mod scenarios;
pub mod skip;

/// The result of the thread `t` once it ends, looking every 5 ms; a test failure naming `what`
/// when it has not ended within `bound` (the thread is left running: the test process ends).
pub fn joined<T>(t: std::thread::JoinHandle<T>, bound: std::time::Duration, what: &str) -> T {
    let give_up = std::time::Instant::now() + bound;
    while !t.is_finished() {
        assert!(
            std::time::Instant::now() < give_up,
            "{what} did not end within {bound:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}
