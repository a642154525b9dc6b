//! What a server is started with ([`Options`]): where its lock file goes ([`LockFileMode`]) and
//! the workspace folders, as the engine keeps them ([`posix_folders`]) and as the lock file names
//! them for this OS's `claude` ([`lock_folders`]).
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use claude_ide_bridge::{AuthToken, Config, Limits, ToolSet};

use crate::Logger;

/// Where the lock file goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LockFileMode {
    /// `$CLAUDE_CONFIG_DIR/ide` when set, else `~/.claude/ide` (what the real client scans).
    #[default]
    Auto,
    /// This directory (created 0700 if missing).
    Dir(PathBuf),
    /// No lock file (the host advertises the port some other way).
    Disabled,
}

/// How a runtime's server is started. [`Options::new`] gives safe defaults: loopback, an
/// OS-assigned port, a fresh token, every tool, the lock file where the client looks, the
/// process's signals left to the host, and a stop's pending diffs left to `claude`'s own prompt.
///
/// ```
/// use claude_ide_bridge_runtime::Options;
/// let mut opts = Options::new(vec!["/home/me/project".into()], "MyEditor");
/// assert_eq!(opts.bind.to_string(), "127.0.0.1");
/// assert_eq!(opts.port, 0);
/// assert!(!opts.signal_cleanup);
/// assert!(opts.diff_error_at_stop.as_deref().unwrap().starts_with("MyEditor stopped"));
/// // A program of its own (no signal handling of its own): Ctrl-C removes the lock file.
/// opts.signal_cleanup = true;
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The workspace folders (made absolute, POSIX-style, for the lock file and path checks).
    pub workspace_folders: Vec<PathBuf>,
    /// The IDE's name in the lock file (`ideName`).
    pub ide_name: String,
    /// The address to listen on; default `127.0.0.1`. Anything else is an explicit opt-in: the
    /// `Host` check is turned off (unless `allowed_hosts` names some), the token is still
    /// required.
    pub bind: IpAddr,
    /// Names the `Host` header may carry besides loopback ones (`host.docker.internal` for
    /// `claude` in a container): an explicit opt-in. When some are given the `Host` check stays on
    /// whatever `bind` is, so only loopback names and these are accepted; the token is still
    /// required.
    ///
    /// ```
    /// use claude_ide_bridge::AuthToken;
    /// use claude_ide_bridge_runtime::Options;
    /// let mut opts = Options::new(vec!["/srv/app".into()], "MyEditor");
    /// opts.bind = "0.0.0.0".parse().unwrap();
    /// let token = || AuthToken::from_string("t");
    /// assert!(!opts.config(token(), vec![]).check_host);
    /// opts.allowed_hosts = vec!["host.docker.internal".into()];
    /// let config = opts.config(token(), vec![]);
    /// assert!(config.check_host);
    /// assert_eq!(config.allowed_hosts, ["host.docker.internal"]);
    /// ```
    pub allowed_hosts: Vec<String>,
    /// The port; 0 lets the OS choose.
    pub port: u16,
    /// Limits and timers.
    pub limits: Limits,
    /// The tools offered.
    pub tools: ToolSet,
    /// Answer the compatibility methods (`readFile`, `files/read`, ...).
    pub compat_methods: bool,
    /// `Origin` values allowed to connect.
    pub allowed_origins: Vec<String>,
    /// Where the lock file goes.
    pub lock_file: LockFileMode,
    /// The token; `None` draws a fresh one from the OS CSPRNG. One given (kept from an earlier
    /// start, so that a connected `claude` finds the restarted host) should come from
    /// [`generate_token`](crate::generate_token) too: it is all that keeps other local users'
    /// and web pages' connections out, and nothing checks its strength.
    pub auth_token: Option<AuthToken>,
    /// Remove the lock file on SIGINT/SIGTERM, then end the process as the signal would (its
    /// default action); default false. On, it installs a handler for the process's life (also
    /// after the server stopped), which ends the process on those signals whatever handlers
    /// the host has: for a program of its own, not an editor that handles its signals (which
    /// stops the server from its handler: the lock file goes then). Off, a process ended by a
    /// signal leaves its lock file, which `claude` deletes at its next start (its writer gone),
    /// as does the next start of a server of the same `ide_name`. (A lock file there that
    /// names another process, written by another server of the port, is left:
    /// [`signals::remove_all`](crate::signals::remove_all).)
    pub signal_cleanup: bool,
    /// `serverInfo.name`.
    pub server_name: String,
    /// `serverInfo.version`.
    pub server_version: String,
    /// Debug log of connection events; `None` uses [`Logger::from_env`].
    pub logger: Option<Logger>,
    /// Report every JSON-RPC message as `Event::Message` (a wire log).
    pub trace_messages: bool,
    /// What stopping answers each pending `openDiff`: `Some(text)` (the default: "IDE_NAME
    /// stopped before the change was decided ..."), a tool error with `text`, which leaves the
    /// decision to `claude`'s own prompt; `None`, `DIFF_REJECTED`, which `claude` takes for the
    /// user's no, and tells the model so ([`Config::diff_error_at_stop`]).
    pub diff_error_at_stop: Option<String>,
    /// Where the runtime reads `now`; tests share a clone to simulate a clock jump.
    pub clock: crate::Clock,
}

impl Options {
    /// Defaults for serving `workspace_folders` as `ide_name`.
    pub fn new(workspace_folders: Vec<PathBuf>, ide_name: impl Into<String>) -> Self {
        let defaults = Config::new(AuthToken::from_string(String::new()));
        let ide_name = ide_name.into();
        let undecided = format!(
            "{ide_name} stopped before the change was decided (nothing was accepted or written)"
        );
        Options {
            workspace_folders,
            ide_name,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            limits: Limits::default(),
            tools: ToolSet::all(),
            compat_methods: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            lock_file: LockFileMode::Auto,
            auth_token: None,
            signal_cleanup: false,
            server_name: defaults.server_name,
            server_version: defaults.server_version,
            logger: None,
            trace_messages: false,
            diff_error_at_stop: Some(undecided),
            clock: crate::Clock::default(),
        }
    }

    /// The engine configuration these options describe, with `token` and `folders` (the
    /// runtimes give those of the lock file, [`lock_folders`]: a folder's resolved form and, on
    /// Windows, its native one, which the engine's path check compares ignoring case).
    pub fn config(&self, token: AuthToken, folders: Vec<String>) -> Config {
        let mut config = Config::new(token);
        config.limits = self.limits.clone();
        config.tools = self.tools;
        config.compat_methods = self.compat_methods;
        config.allowed_origins = self.allowed_origins.clone();
        config.check_host = self.bind.is_loopback() || !self.allowed_hosts.is_empty();
        config.allowed_hosts = self.allowed_hosts.clone();
        config.server_name = self.server_name.clone();
        config.server_version = self.server_version.clone();
        config.workspace_folders = folders;
        config.trace_messages = self.trace_messages;
        config.diff_error_at_stop = self.diff_error_at_stop.clone();
        config
    }
}

/// Workspace folders as absolute, POSIX-style strings (relative ones are taken from the current
/// directory).
///
/// ```
/// let f = claude_ide_bridge_runtime::posix_folders(&["/srv/a".into()]).unwrap();
/// assert_eq!(f, ["/srv/a"]);
/// ```
pub fn posix_folders(folders: &[PathBuf]) -> io::Result<Vec<String>> {
    folders
        .iter()
        .map(|f| {
            let abs = std::path::absolute(Path::new(f))?;
            Ok(claude_ide_bridge::to_posix(&abs.to_string_lossy()))
        })
        .collect()
}

/// Workspace folders as the lock file carries them for this OS's `claude`: on Unix the
/// POSIX-style strings of [`posix_folders`]; on Windows native absolute paths
/// (`C:\Users\me\project`), which the Windows `claude` resolves and compares with its working
/// directory (and `claude` in WSL converts with `wslpath`), where the engine's `/c/Users/...` form
/// would name another folder.
///
/// A folder reached through a symbolic link (a junction, a `subst` drive) is followed by its
/// resolved path: `claude` compares the folders as text with its working directory, which the OS
/// gives resolved, so a link's own path alone never matches a `claude` started in it.
///
/// ```
/// let f = claude_ide_bridge_runtime::lock_folders(&["/srv/a".into()]).unwrap();
/// # #[cfg(unix)]
/// assert_eq!(f, ["/srv/a"]);
/// ```
pub fn lock_folders(folders: &[PathBuf]) -> io::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(folders.len());
    for f in folders {
        let abs = std::path::absolute(Path::new(f))?;
        let given = crate::sys::lock_folder(&abs);
        let resolved = std::fs::canonicalize(&abs)
            .ok()
            .map(|r| crate::sys::lock_folder(&r));
        for folder in std::iter::once(given).chain(resolved) {
            if !out.contains(&folder) {
                out.push(folder);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// A folder given through a symbolic link is listed as given, then resolved (the client
    /// compares with its working directory, which the OS gives resolved); a folder that is no
    /// link, or a resolved path already listed, is listed once.
    #[cfg(unix)]
    #[test]
    fn a_folder_through_a_link_is_also_listed_resolved() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let real = root.join("ws");
        std::fs::create_dir(&real).unwrap();
        let link = root.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let text = |p: &std::path::Path| p.to_str().unwrap().to_owned();
        assert_eq!(
            super::lock_folders(std::slice::from_ref(&link)).unwrap(),
            [text(&link), text(&real)]
        );
        assert_eq!(
            super::lock_folders(std::slice::from_ref(&real)).unwrap(),
            [text(&real)]
        );
        assert_eq!(
            super::lock_folders(&[real.clone(), link.clone()]).unwrap(),
            [text(&real), text(&link)]
        );
        // A folder that does not exist (yet) is listed as given.
        let gone = root.join("gone");
        assert_eq!(
            super::lock_folders(std::slice::from_ref(&gone)).unwrap(),
            [text(&gone)]
        );
    }
}
