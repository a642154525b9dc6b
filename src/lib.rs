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
//! | file | what it does |
//! | --- | --- |
//! | `handshake.rs` | the HTTP/1.1 upgrade: one linear scan, one parse, refusals as HTTP statuses ([`Rejection`]) |
//! | [`ws`] | RFC 6455 frames and messages; usable alone (an echo server is built on it) |
//! | `jsonrpc.rs`, `jsonrpc/scan.rs` | JSON-RPC 2.0 messages and batches, borrowed from the frame; [`RpcError`]; the fast path that reads the real client's requests in one scan, falling back to serde |
//! | `mcp.rs`, `connection.rs` | one connection's MCP session and state machine |
//! | `server.rs` | the [`Server`]: every connection, its timers and the events for the host, in one endpoint (bytes and `now` in; events, bytes and the next deadline out) |
//! | `types.rs` | what the server, a connection and its session share: [`Config`], [`Event`], the ids and reasons |
//! | `tools/`, `notify.rs` | typed tool arguments and results ([`ToolCall`], [`ToolResult`]), [`Notification`]s, [`CompatRequest`]s |
//! | `discovery.rs`, `paths.rs` | lock-file JSON, the [`AuthToken`], `file://` URIs ([`file_uri`]) and workspace path checks |
//! | `limits.rs` | every limit, with safe defaults ([`Limits`]) |
//!
//! The modules are private but [`ws`] (the frame codec, for a host or a test that speaks WebSocket
//! frames itself): what a host needs is re-exported at the crate's root.

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
//! // Events and bytes in turn, until a pass finds neither (see below).
//! let mut written = Vec::new();
//! loop {
//!     let mut busy = false;
//!     // 1. Events for the host.
//!     while let Some(event) = server.poll_event() {
//!         busy = true;
//!         if let Event::Connected { conn, .. } = event {
//!             println!("client {conn} connected");
//!         }
//!     }
//!     // 2. Bytes to write, per connection that has some.
//!     while let Some(c) = server.poll_transmit_ready() {
//!         busy = true;
//!         let bytes = server.transmit(c).to_vec(); // a runtime writes them to the socket
//!         written.extend_from_slice(&bytes);
//!         server.advance_transmit(c, bytes.len());
//!         if server.should_close(c) {
//!             server.handle_close(c); // after closing the socket
//!         }
//!     }
//!     if !busy {
//!         break;
//!     }
//! }
//! assert!(written.starts_with(b"HTTP/1.1 101"));
//! // 3. The next deadline: arm one timer, then call handle_timeout when it fires.
//! let deadline = server.poll_timeout().expect("the ping timer runs");
//! assert!(deadline <= now + Duration::from_secs(30));
//! server.handle_timeout(deadline);
//! ```
//!
//! Tool calls arrive as [`Event::ToolCall`] with a [`CallId`]; answer with [`Server::respond`]
//! now or much later (an `openDiff` waits for a person) while other traffic keeps flowing.
//!
//! Each step is an input too: an answer given while handling an event, or bytes written, can
//! make more events and more bytes to write, and [`Server::handle_timeout`] makes both (pings,
//! the at-mentions held for a client). So a loop drains events and bytes in turn until a pass
//! finds neither, after every input and after every timeout, then sleeps until the earlier of
//! [`Server::poll_timeout`] and its own deadlines (a diff to decide later, say) or the next
//! input. A loop reads a connection only while [`Server::wants_input`] is true (what
//! [`Server::handle_input`] returns), at most 64 KiB at a time: past
//! [`Limits::pause_input_above`] of output queued for it, its peer is not reading, and the loop
//! reads it again once [`Server::advance_transmit`] has taken the queue back under. The runtime
//! crates
//! (`claude-ide-bridge-smol`, `claude-ide-bridge-blocking`) are such
//! loops, written once in `claude-ide-bridge-runtime`; their lock file and token code are there
//! too, for a host that writes its own.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// In rustfmt's order; the table in the crate's documentation above gives them in the byte path's.
mod connection;
mod discovery;
mod handshake;
mod jsonrpc;
mod limits;
mod mcp;
mod notify;
mod paths;
mod server;
mod tools;
mod types;
pub mod ws;

// The server and its drive loop.
pub use limits::Limits;
pub use mcp::SUPPORTED_PROTOCOL_VERSIONS;
pub use server::{EncodedAnswer, Server};
pub use types::{
    ApiError, Asker, CallId, CancelReason, Config, ConnectionId, DisconnectReason, Event, Target,
    UNDECIDED_AT_STOP,
};
// Why things fail: an upgrade refused, a JSON-RPC error, a path outside the workspace.
pub use handshake::Rejection;
pub use jsonrpc::RpcError;
pub use paths::PathError;
// Tool calls: the catalogue, typed arguments, results.
pub use tools::{
    CheckDocumentDirtyArgs, CloseTabArgs, ExecuteCodeArgs, GetDiagnosticsArgs, OpenDiffArgs,
    OpenFileArgs, OpenFilesArgs, ReformatFileArgs, SaveDocumentArgs, ToolCall, ToolCallError,
    ToolName, ToolSet,
};
pub use tools::{
    Content, CurrentSelection, Diagnostic, DocumentDirty, EditorTab, FileDiagnostics, OpenEditors,
    OpenFileResult, OpenedFiles, Position, Range, SaveDocumentResult, Selection,
    SelectionUnavailable, ToolResult, WorkspaceFolder, WorkspaceFolders,
};
// Compatibility methods and notifications.
pub use notify::{AtMentioned, DiagnosticsChanged, LogEvent, Notification, SelectionChanged};
pub use tools::CompatRequest;
// Discovery: the token, the lock file, where it lives.
pub use discovery::{lock_dirs, lock_file_name, port_from_lock_name, AuthToken, LockFile};
// Paths and `file://` URIs.
pub use paths::{
    file_uri, is_file_uri, is_within, normalize, path_of_wsl_mount, posix_to_windows,
    resolve_in_workspace, to_posix, uri_to_path, uri_to_windows_path, windows_case_key,
    without_verbatim_prefix, wsl_mount_path, ClientPaths,
};

/// Not part of the API (no semver promise; only with the `hooks` feature): the engine's inner
/// steps, for the fuzz targets and this crate's tests, doc examples and benchmarks.
#[cfg(feature = "hooks")]
#[doc(hidden)]
pub mod hooks {
    use crate::{ConnectionId, Server};

    /// The upgrade's steps.
    pub mod handshake {
        pub use crate::handshake::{
            accept_key, authorize, constant_time_eq, is_allowed_host, is_loopback_host,
            parse_upgrade, write_accept, HeadReader, HeadStatus, Policy, Rejection, UpgradeRequest,
            AUTH_HEADER,
        };
    }

    /// The JSON-RPC decoder and writers.
    pub mod jsonrpc {
        pub use crate::jsonrpc::{
            decode, decode_fast, decode_value, is_valid_id, same_id, write_error,
            write_json_string, write_result, Decoded, Frame, Message,
        };

        /// The general rules' reading of `tools/call` params (every tool offered): the call and
        /// who asked for it, or the error the client gets.
        pub fn parse_call_params(
            params: &str,
        ) -> Result<(crate::ToolCall, crate::Asker), crate::RpcError> {
            crate::tools::parse_call_params(crate::ToolSet::all(), params)
                .map(|c| (c.tool, c.asker))
                .map_err(Into::into)
        }

        /// The fast path's reader of `tools/call` params (every tool offered): the call and
        /// who asked for it, or `None` where the general decoder takes over.
        pub fn scan_call_params(params: &str) -> Option<(crate::ToolCall, crate::Asker)> {
            let mut s = crate::jsonrpc::Scanner::new(params);
            let call = crate::tools::scan_call_params(crate::ToolSet::all(), &mut s)?;
            s.end().map(|()| (call.tool, call.asker))
        }
    }

    pub use crate::tools::write_tools_list;

    /// Bytes held by one connection's buffers (for tests of memory bounds).
    pub fn connection_memory(server: &Server, conn: ConnectionId) -> usize {
        server.connection_memory(conn)
    }

    /// Every connection the server still holds (closed ones it has let go are not listed), each
    /// with the bytes its buffers hold: for checking a bound on all of them in time
    /// proportional to the live connections, not to every one ever accepted.
    pub fn connections_memory(server: &Server) -> Vec<(ConnectionId, usize)> {
        server.connections_memory().collect()
    }

    /// Bytes held by the server's own buffers, outside its connections (for tests of memory
    /// bounds).
    pub fn server_memory(server: &Server) -> usize {
        server.own_memory()
    }
}
