//! claude-ide-bridge: the sans-IO engine for the IDE side of Claude Code's IDE integration.
//!
//! (Module docs and the drive loop are written once the server lands.)

#![forbid(unsafe_code)]

pub mod discovery;
pub mod handshake;
pub mod limits;
pub mod notify;
pub mod paths;
pub mod tools;
pub mod ws;

pub use limits::Limits;
