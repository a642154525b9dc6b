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
//!   what it lacks is a tool the suite installs).

pub mod bridge;
pub mod client;
pub mod counting_alloc;
pub mod lsp_frames;
pub mod platform;
pub mod procs;
pub mod scenarios;
pub mod skip;
