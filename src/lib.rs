//! # claude-ide-bridge
//!
//! The sans-IO engine for the IDE side of Claude Code's IDE integration. The `claude` CLI finds an
//! editor through a lock file, connects over WebSocket on loopback, and speaks MCP (JSON-RPC 2.0);
//! this crate is everything between the socket and the editor, with no IO at all: bytes and time
//! go in; events, bytes to send and the next deadline come out. Runtimes that own sockets,
//! clocks and files live in `runtimes/` (smol and blocking threads).
//!
//! ## The layers, in the order bytes flow
//!
//! | module | what it does |
//! | --- | --- |
//! | [`handshake`] | the HTTP/1.1 upgrade: one linear scan, one parse, refusals as HTTP statuses |
//! | [`ws`] | RFC 6455 frames and messages; usable alone (an echo server is built on it) |
//! | [`jsonrpc`] | JSON-RPC 2.0 messages and batches, borrowed from the frame |
//! | [`server`] | the endpoint: accepting, routing, broadcast; each connection's state machine (its upgrade, WebSocket, timers) and MCP session (initialize, batches, tool calls as events with handles) are private modules behind it |
//! | [`tools`], [`notify`] | typed tool arguments and results, notifications, compatibility methods |
//! | [`discovery`], [`paths`] | lock-file JSON, the token, `file://` URIs and workspace path checks |
//! | [`limits`] | every limit, with safe defaults |
//!
//! ## The drive loop
//!
//! A runtime owns the sockets and the clock. After every input (bytes, a timeout, a host call such
//! as [`Server::respond`] or [`Server::notify`]) it drains three outputs: events for the host,
//! bytes to write, and the next deadline.
//!
//! ```
//! use claude_ide_bridge::{AuthToken, Config, Event, Server};
//! use std::time::{Duration, Instant};
//!
//! let token = AuthToken::from_string("secret-token".to_string());
//! let mut server = Server::new(Config::new(token));
//! let now = Instant::now();
//!
//! // A socket was accepted, and its first bytes arrived.
//! let conn = server.accept(now);
//! let request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: Upgrade\r\n\
//!     Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
//!     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\
//!     X-Claude-Code-Ide-Authorization: secret-token\r\n\r\n";
//! server.handle_input(conn, request.as_bytes(), now);
//!
//! // 1. Events for the host.
//! while let Some(event) = server.poll_event() {
//!     if let Event::Connected { conn, .. } = event {
//!         println!("client {conn} connected");
//!     }
//! }
//! // 2. Bytes to write, per connection that has some.
//! while let Some(c) = server.poll_transmit_ready() {
//!     let bytes = server.transmit(c).to_vec(); // a runtime writes them to the socket
//!     assert!(bytes.starts_with(b"HTTP/1.1 101"));
//!     server.advance_transmit(c, bytes.len());
//!     if server.should_close(c) {
//!         server.handle_close(c); // after closing the socket
//!     }
//! }
//! // 3. The next deadline: arm one timer, then call handle_timeout when it fires.
//! let deadline = server.poll_timeout().expect("the ping timer runs");
//! assert!(deadline <= now + Duration::from_secs(30));
//! server.handle_timeout(deadline);
//! ```
//!
//! Tool calls arrive as [`Event::ToolCall`] with a [`CallId`]; answer with [`Server::respond`]
//! now or much later (an `openDiff` waits for a person) while other traffic keeps flowing.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod connection;
pub mod discovery;
pub mod handshake;
pub mod jsonrpc;
pub mod limits;
mod mcp;
pub mod notify;
pub mod paths;
pub mod server;
pub mod tools;
pub mod ws;

pub use discovery::{AuthToken, LockFile};
pub use handshake::Rejection;
pub use jsonrpc::RpcError;
pub use limits::Limits;
pub use notify::Notification;
pub use server::{
    ApiError, CallId, CancelReason, Config, ConnectionId, DisconnectReason, Event, Server, Target,
};
pub use tools::{CompatRequest, ToolCall, ToolName, ToolResult, ToolSet};
