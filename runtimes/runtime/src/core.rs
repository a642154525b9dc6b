//! What both runtimes do at start and after each call into the engine ([`Core`]): bind the
//! listener, take the token, write the lock file, drain the engine's events and ready
//! connections, keep and remove the lock file, log; and [`ListenError`], a start refused by the
//! port, and [`LockFileError`], one refused by the lock file.
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Instant;

use claude_ide_bridge::LockFile;
use claude_ide_bridge::{ClientPaths, ConnectionId, DisconnectReason, Event, Rejection, Server};

use crate::lock::{self, LockGuard};
use crate::{generate_token, LockFileMode, Logger, Options};

/// The error inside the [`io::Error`] a server's start returns (each runtime's `start`,
/// [`RunningServer::start`](crate::RunningServer::start)) when its port was refused: the bind
/// failed (taken, reserved, privileged), or another live process's lock file names the port on
/// another address. Told apart from the lock-file directory's errors without reading the
/// message. The `io::Error` keeps the bind's [`io::ErrorKind`] (`AddrInUse` for the lock file's).
///
/// ```
/// use claude_ide_bridge_runtime::ListenError;
///
/// // What a host adds when its server did not start.
/// fn hint(e: &std::io::Error) -> String {
///     match e.get_ref().and_then(|inner| inner.downcast_ref::<ListenError>()) {
///         Some(l) => format!("port {} refused: choose another, or 0", l.addr().port()),
///         None => "check the lock-file directory".into(),
///     }
/// }
/// assert_eq!(hint(&std::io::Error::other("no folder")), "check the lock-file directory");
/// ```
#[derive(Debug)]
pub struct ListenError {
    addr: SocketAddr,
    message: String,
}

impl ListenError {
    fn wrap(addr: SocketAddr, error: io::Error) -> io::Error {
        let message = format!("cannot listen on {addr}: {error}");
        io::Error::new(error.kind(), ListenError { addr, message })
    }

    /// The address the listener was to be bound to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ListenError {}

/// The error inside the [`io::Error`] a server's start returns when its lock file could not be
/// written: no lock-file directory (no home folder), the directory could not be made or was
/// refused (a link, not this user's, open to others), or the file could not be written (a full
/// disk). Told apart from the port's errors ([`ListenError`]) and the others (a workspace folder
/// that cannot be named) without reading the message, which names the directory, then the
/// cause. The `io::Error` keeps the cause's [`io::ErrorKind`].
///
/// ```
/// use claude_ide_bridge_runtime::LockFileError;
///
/// // What a host adds when its server did not start.
/// fn hint(e: &std::io::Error) -> String {
///     match e.get_ref().and_then(|inner| inner.downcast_ref::<LockFileError>()) {
///         Some(l) => match l.dir() {
///             Some(dir) => format!("check the lock-file directory {}", dir.display()),
///             None => "no lock-file directory: set CLAUDE_CONFIG_DIR".into(),
///         },
///         None => String::new(),
///     }
/// }
/// assert_eq!(hint(&std::io::Error::other("no folder")), "");
/// ```
#[derive(Debug)]
pub struct LockFileError {
    dir: Option<PathBuf>,
    message: String,
}

impl LockFileError {
    fn wrap(dir: Option<&Path>, error: io::Error) -> io::Error {
        let message = error.to_string();
        let dir = dir.map(Path::to_path_buf);
        io::Error::new(error.kind(), LockFileError { dir, message })
    }

    /// The lock-file directory, when there was one to write to.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

/// The cause, after the directory when there was one and the cause does not name it already:
/// "cannot write the lock file in DIR: CAUSE" (a host that logs only the error still says where).
impl std::fmt::Display for LockFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dir {
            Some(dir) if !self.message.contains(&*dir.to_string_lossy()) => write!(
                f,
                "cannot write the lock file in {}: {}",
                dir.display(),
                self.message
            ),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for LockFileError {}

/// Refuses a port given (`--port`, or one kept from the last start) that another program serves,
/// where the OS would let this bind succeed anyway (`binds_over_wildcard`: macOS and the BSDs,
/// whose `SO_REUSEADDR` lets a listener on `127.0.0.1` take a port served on every address, and
/// Windows without `SO_EXCLUSIVEADDRUSE` on that program's socket): the bridge would then take
/// that program's local connections. Asked by connecting first. Linux refuses the bind itself.
fn refuse_a_served_port(addr: SocketAddr, binds_over_wildcard: bool) -> io::Result<()> {
    if addr.port() == 0 || !binds_over_wildcard || !crate::lock::answers(addr) {
        return Ok(());
    }
    let message = format!(
        "cannot listen on {addr}: another program already serves port {}",
        addr.port()
    );
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        ListenError { addr, message },
    ))
}

/// The engine plus what both runtimes track around it: the deadline the timer was last told
/// about, and the logger. Runtimes keep it behind their mutex and call [`Core::drain`] after
/// every call into the engine, then act on the [`Drained`] outside the lock where they can.
#[derive(Debug)]
pub struct Core {
    /// The engine.
    pub server: Server,
    /// Where `now` comes from (see [`crate::Clock`]).
    pub clock: crate::Clock,
    logger: Option<Logger>,
    /// Lines for the logger, written by the runtime once it has released its lock
    /// ([`Core::take_logs`]): a logger that blocks (a stderr nobody reads) or calls back into the
    /// server must not hold every connection up.
    logs: Vec<String>,
    deadline: Option<Instant>,
    lock: Option<(LockGuard, LockFile)>,
}

/// What one [`Core::drain`] found.
#[derive(Debug, Default)]
pub struct Drained {
    /// Events for the host, in order.
    pub events: Vec<Event>,
    /// Connections with bytes to write or to close: wake their writers. `true` when
    /// [`Server::should_close`] already holds (shut the socket down now, which also unblocks a
    /// writer stuck on a peer that stopped reading).
    pub ready: Vec<(ConnectionId, bool)>,
    /// The engine's next deadline moved: re-arm the timer.
    pub timer_changed: bool,
}

impl Core {
    /// Wraps a server (no lock file).
    pub fn new(server: Server, logger: Option<Logger>) -> Core {
        let deadline = server.poll_timeout();
        Core {
            server,
            clock: crate::Clock::default(),
            logger,
            logs: Vec::new(),
            deadline,
            lock: None,
        }
    }

    /// What both runtimes do at start: binds the listener (blocking mode), takes the token
    /// (fresh from the OS CSPRNG unless given), gives the engine the workspace folders as the
    /// lock file names them ([`crate::lock_folders`]: each as given and with its links resolved,
    /// a client started in the resolved folder, `/private/tmp/ws` for `/tmp/ws` on macOS, naming
    /// its files so; on Windows in Windows' own form, `C:\Users\me\ws`, which the engine compares
    /// ignoring case as Windows does, where the POSIX form `/c/Users/me/ws` was compared
    /// case-sensitively), removes this host's stale lock files and writes `<port>.lock` as the
    /// options say.
    pub fn start(opts: &Options) -> io::Result<(TcpListener, Core)> {
        let folders = crate::lock_folders(&opts.workspace_folders)?;
        let token = opts.auth_token.clone().unwrap_or_else(generate_token);
        let addr = SocketAddr::new(opts.bind, opts.port);
        refuse_a_served_port(addr, crate::sys::BINDS_OVER_WILDCARD)?;
        let listener = TcpListener::bind(addr).map_err(|e| ListenError::wrap(addr, e))?;
        let port = listener.local_addr()?.port();
        let logger = opts.logger.clone().or_else(Logger::from_env);
        let server = Server::new(opts.config(token.clone(), folders.clone()));
        let mut core = Core::new(server, logger);
        core.clock = opts.clock.clone();
        core.log(|| format!("Listening on {}", SocketAddr::new(opts.bind, port)));
        let dir = match &opts.lock_file {
            LockFileMode::Auto => {
                Some(lock::default_lock_dir().map_err(|e| LockFileError::wrap(None, e))?)
            }
            LockFileMode::Dir(d) => Some(d.clone()),
            LockFileMode::Disabled => None,
        };
        if let Some(dir) = dir {
            lock::ensure_lock_dir(&dir).map_err(|e| LockFileError::wrap(Some(&dir), e))?;
            let content = LockFile::new(
                std::process::id(),
                folders,
                opts.ide_name.clone(),
                crate::sys::RUNNING_IN_WINDOWS,
                token,
            );
            // Exclusive: a port served on another address by a live process with its lock file
            // there (a bridge bound to `127.0.0.2` or `::1` gets the same port as one on
            // `127.0.0.1`, at the same moment or earlier) is taken, for the lock file as for the
            // client, which finds the host by the port alone.
            let guard =
                LockGuard::create(&dir, port, &content, opts.signal_cleanup).map_err(|e| {
                    if e.kind() != io::ErrorKind::AddrInUse {
                        return LockFileError::wrap(Some(&dir), e);
                    }
                    let addr = SocketAddr::new(opts.bind, port);
                    // (Or a lock file whose pid names a process again: taken all the same, as
                    // the client would take it.)
                    let message = format!(
                        "port {port} is taken by the lock file of a running process (a server on \
                         another address, or an IDE's): {e}"
                    );
                    io::Error::new(io::ErrorKind::AddrInUse, ListenError { addr, message })
                })?;
            core.log(|| format!("Lock file written: {}", guard.path().display()));
            core.lock = Some((guard, content));
            // Only then the stale files (each may cost a look at its port: 400 ms on Windows,
            // where a refused loopback connection is slow): a bridge started at the same moment
            // for this workspace, finding the kept port taken, waits briefly for its lock file
            // to tell a bridge from another program, and would take this one's token meanwhile.
            match lock::remove_stale_locks(&dir, &opts.ide_name) {
                Ok(removed) => {
                    for stale in removed {
                        core.log(|| format!("Removed stale lock file {}", stale.display()));
                    }
                }
                // Nothing of this bridge's own: it runs, and the files stay.
                Err(e) => core.log(|| format!("Stale lock files not looked for: {e}")),
            }
        }
        Ok((listener, core))
    }

    /// The lock file's path, if one was written.
    pub fn lock_path(&self) -> Option<&Path> {
        self.lock.as_ref().map(|(g, _)| g.path())
    }

    /// The lock file's directory and name, if one was written.
    pub fn lock_place(&self) -> Option<(PathBuf, String)> {
        self.lock
            .as_ref()
            .map(|(g, _)| (g.dir().to_path_buf(), g.name().to_string()))
    }

    /// Writes the lock file again if another process removed it (its folder still there): see
    /// [`LockGuard::restore`]. `false` when it could not be written (to be tried again later).
    pub fn restore_lock_file(&mut self) -> bool {
        let Some((guard, content)) = &mut self.lock else {
            return true;
        };
        let path = guard.path().to_path_buf();
        match guard.restore(content) {
            Ok(false) => true,
            Ok(true) => {
                self.log(|| {
                    format!(
                        "Lock file {} was removed by another process: written again",
                        path.display()
                    )
                });
                true
            }
            Err(e) => {
                self.log(|| {
                    format!(
                        "Lock file {} was removed and could not be written again: {e} (tried again later)",
                        path.display()
                    )
                });
                false
            }
        }
    }

    /// Changes the workspace folders: the engine's path checks and the lock file (rewritten
    /// atomically).
    pub fn set_workspace_folders(&mut self, folders: &[PathBuf]) -> io::Result<()> {
        let folders = crate::lock_folders(folders)?;
        self.server.set_workspace_folders(folders.clone());
        if let Some((guard, content)) = &mut self.lock {
            content.workspace_folders = folders;
            guard.update(content)?;
        }
        Ok(())
    }

    /// Removes the lock file now (it is also removed when the `Core` is dropped).
    pub fn remove_lock_file(&mut self) {
        if let Some((mut guard, _)) = self.lock.take() {
            let path = guard.path().to_path_buf();
            match guard.remove() {
                Ok(()) => self.log(|| format!("Lock file removed: {}", path.display())),
                Err(e) => self.log(|| format!("Lock file {} not removed: {e}", path.display())),
            }
        }
    }

    /// Logs a line, when logging is on.
    pub fn log(&mut self, line: impl FnOnce() -> String) {
        if self.logger.is_some() {
            self.logs.push(line());
        }
    }

    /// The lines logged since the last call, to write with [`Core::logger`] outside the lock.
    pub fn take_logs(&mut self) -> Vec<String> {
        std::mem::take(&mut self.logs)
    }

    /// Drains the engine's outputs into `out` (appending) and logs connection events.
    pub fn drain(&mut self, out: &mut Drained) {
        // One pass: taking the ready connections and asking whether they close queue no event
        // (they only read the engine and clear its transmit queue).
        while let Some(event) = self.server.poll_event() {
            if self.logger.is_some() {
                Self::log_event(&event, &mut self.logs);
            }
            if let Event::IdeConnected {
                conn,
                pid: Some(pid),
            } = event
            {
                self.name_files_for(conn, pid);
            }
            out.events.push(event);
        }
        while let Some(conn) = self.server.poll_transmit_ready() {
            let close = self.server.should_close(conn);
            out.ready.push((conn, close));
        }
        let deadline = self.server.poll_timeout();
        if deadline != self.deadline {
            self.deadline = deadline;
            out.timer_changed = true;
        }
    }

    /// The client on `conn` said its pid: it is sent the paths of the files it is told about as
    /// it names them (on Windows, a `claude` in WSL by the paths WSL mounts the drives at).
    fn name_files_for(&mut self, conn: ConnectionId, pid: u32) {
        let paths = crate::sys::client_paths(pid);
        if paths != ClientPaths::AsGiven && self.server.set_client_paths(conn, paths) {
            self.log(|| {
                format!(
                    "{conn}: pid {pid} is no process here, a claude in WSL: sent paths as WSL \
                     names them (/mnt/<drive>/...)"
                )
            });
        }
    }

    /// The logger, for lines written outside the runtime's lock.
    pub fn logger(&self) -> Option<&Logger> {
        self.logger.as_ref()
    }

    /// The lines that say what `event` was, added to `logs`.
    fn log_event(event: &Event, logs: &mut Vec<String>) {
        let line = match event {
            Event::Connected {
                conn,
                path,
                user_agent,
            } => {
                logs.push(format!("Authentication successful ({conn})"));
                format!(
                    "Client connected {conn} path={path} user-agent={}",
                    user_agent.as_deref().unwrap_or("-")
                )
            }
            Event::Initialized {
                conn,
                protocol_version,
                client_name,
                ..
            } => format!(
                "Client initialized {conn} protocol={protocol_version} client={}",
                client_name.as_deref().unwrap_or("-")
            ),
            Event::IdeConnected { conn, pid } => format!("ide_connected {conn} pid={pid:?}"),
            Event::ToolCall { call, tool } => {
                format!("Tool call {} from {}", tool.name().as_str(), call.conn)
            }
            Event::CompatRequest { call, .. } => format!("Compat request from {}", call.conn),
            Event::CallCancelled { call, reason } => {
                format!("Call from {} cancelled: {reason:?}", call.conn)
            }
            Event::TabClosed { conn, .. } => format!("Tab closed by {conn}"),
            Event::Message {
                conn,
                incoming,
                text,
            } => {
                let dir = if *incoming {
                    "Raw data received"
                } else {
                    "Sent"
                };
                let cut = text.char_indices().nth(300).map_or(text.len(), |(i, _)| i);
                format!("{dir} {conn}: {}", &text[..cut])
            }
            Event::Disconnected { conn, reason } => match reason {
                DisconnectReason::PingTimeout => format!("Removing dead connection {conn}"),
                DisconnectReason::Refused(Rejection::Unauthorized) => {
                    format!("Authentication failed {conn}: refused with 401")
                }
                DisconnectReason::Refused(rejection) => {
                    format!("Connection {conn} refused with {rejection}")
                }
                DisconnectReason::ProtocolError(error) => {
                    format!("Client disconnected {conn}: {error}")
                }
                other => format!("Client disconnected {conn}: {other:?}"),
            },
            // An event of a newer engine: logged as it is, so nothing goes unseen.
            other => format!("Event {other:?}"),
        };
        logs.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compatibility method's path in the folder's resolved form (through a link on Unix, in
    /// another case on Windows), which the lock file advertises and the files crate serves, is
    /// inside the workspace for the engine too (it was refused: "path is outside the workspace
    /// folders").
    #[test]
    fn the_engine_takes_the_folders_the_lock_file_advertises() {
        let tmp = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir(&real).unwrap();
        #[cfg(unix)]
        let (given, asked) = {
            let link = tmp.path().join("link");
            std::os::unix::fs::symlink(&real, &link).unwrap();
            (link, real.join("a.txt"))
        };
        #[cfg(windows)]
        let (given, asked) = {
            let real =
                claude_ide_bridge::without_verbatim_prefix(&real.to_string_lossy()).into_owned();
            // The folder given upper-cased, a file asked for lower-cased: one folder to Windows.
            (
                std::path::PathBuf::from(real.to_uppercase()),
                std::path::PathBuf::from(real.to_lowercase()).join("a.txt"),
            )
        };
        let mut opts = Options::new(vec![given], "test");
        opts.lock_file = LockFileMode::Disabled;
        let (_listener, core) = Core::start(&opts).unwrap();
        let folders = &core.server.config().workspace_folders;
        let asked = asked.to_string_lossy();
        assert_eq!(
            claude_ide_bridge::resolve_in_workspace(&asked, folders).map(|_| ()),
            Ok(()),
            "{asked} in {folders:?}"
        );
    }

    /// Where the OS would let the bind take a port another program serves on every address, the
    /// start refuses it, as taken, after asking by a connection (here a listener on 127.0.0.1
    /// stands for that program: Linux itself refuses such a bind, so only the check is run).
    #[test]
    fn a_port_served_by_another_program_is_refused_where_the_bind_would_take_it() {
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let served = other.local_addr().unwrap();
        let e = refuse_a_served_port(served, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(
            e.to_string().contains(&format!(
                "another program already serves port {}",
                served.port()
            )),
            "{e}"
        );
        assert!(
            refuse_a_served_port(served, false).is_ok(),
            "Linux: the bind tells"
        );
        drop(other);
        assert!(
            refuse_a_served_port(served, true).is_ok(),
            "nothing serves it now"
        );
        let any = SocketAddr::new(served.ip(), 0);
        assert!(
            refuse_a_served_port(any, true).is_ok(),
            "a port chosen by the OS"
        );
    }
}
