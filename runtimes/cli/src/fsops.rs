//! The workspace on disk: confinement of every path the bridge reads or writes to the workspace
//! folders (symlinks resolved), atomic writes, and a small file walk for `listFiles`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use claude_ide_bridge::paths::{is_within, normalize, resolve_in_workspace};

/// The workspace folders, as advertised (absolute, lexical) and as they are on disk
/// (canonicalised, symlinks resolved).
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The folders as written in the lock file.
    pub folders: Vec<String>,
    canonical: Vec<String>,
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Workspace {
    /// The workspace of these absolute POSIX folders.
    pub fn new(folders: Vec<String>) -> Workspace {
        let canonical = folders
            .iter()
            .map(|f| fs::canonicalize(f).map_or_else(|_| f.clone(), |c| path_str(&c)))
            .collect();
        Workspace { folders, canonical }
    }

    fn lexically_inside(&self, path: &str) -> bool {
        self.folders
            .iter()
            .chain(&self.canonical)
            .any(|f| is_within(path, f))
    }

    /// Where an absolute path really is, when it is inside the workspace once symlinks are
    /// resolved: the path of the existing file (through its links), or, for a file that does not
    /// exist yet, its nearest existing ancestor resolved plus the missing components. Refusals
    /// say why.
    pub fn confine(&self, path: &str) -> Result<PathBuf, String> {
        if !path.starts_with('/') {
            return Err(format!("{path}: not an absolute path"));
        }
        if path.contains('\0') {
            return Err("the path contains NUL".into());
        }
        let lexical = normalize(path).ok_or_else(|| format!("{path}: `..` climbs above /"))?;
        if !self.lexically_inside(&lexical) {
            return Err(format!("{path} is outside the workspace folders"));
        }
        let real = match fs::canonicalize(&lexical) {
            Ok(real) => real,
            Err(_) if fs::symlink_metadata(&lexical).is_ok() => {
                return Err(format!("{path} is a symbolic link to a missing file"));
            }
            Err(_) => {
                // A new file: resolve the nearest ancestor that exists.
                let mut base = PathBuf::from(&lexical);
                let mut rest = Vec::new();
                loop {
                    let Some(name) = base.file_name().map(|n| n.to_os_string()) else {
                        return Err(format!("{path}: no existing parent directory"));
                    };
                    rest.push(name);
                    base.pop();
                    if let Ok(real) = fs::canonicalize(&base) {
                        let mut p = real;
                        for n in rest.iter().rev() {
                            p.push(n);
                        }
                        break p;
                    }
                    if fs::symlink_metadata(&base).is_ok() {
                        return Err(format!(
                            "{}: a dangling symbolic link in the path",
                            base.display()
                        ));
                    }
                }
            }
        };
        let real_str = path_str(&real);
        if self.canonical.iter().any(|f| is_within(&real_str, f)) {
            Ok(real)
        } else {
            Err(format!(
                "{path} leads outside the workspace folders through a symbolic link (to {real_str})"
            ))
        }
    }

    /// A path from a compatibility method (relative to the first folder, or absolute), resolved
    /// lexically and then on disk.
    pub fn resolve_compat(&self, path: &str) -> Result<PathBuf, String> {
        let abs = resolve_in_workspace(path, &self.folders).map_err(|e| format!("{path}: {e}"))?;
        self.confine(&abs)
    }

    /// The regular files under the folders whose name or workspace-relative path matches
    /// `pattern` (`*` and `?` wildcards; every file without a pattern). Hidden directories,
    /// `target` and `node_modules` are skipped, symlinks are not followed, and at most `limit`
    /// paths are returned.
    pub fn list_files(&self, pattern: Option<&str>, limit: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (folder, canonical) in self.folders.iter().zip(&self.canonical) {
            let mut stack = vec![PathBuf::from(canonical)];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = fs::read_dir(&dir) else {
                    continue;
                };
                let mut entries: Vec<_> = entries.flatten().collect();
                entries.sort_by_key(|e| e.file_name());
                for e in entries {
                    let Ok(ft) = e.file_type() else { continue };
                    let name = e.file_name().to_string_lossy().into_owned();
                    let p = e.path();
                    if ft.is_dir() {
                        if !name.starts_with('.') && name != "target" && name != "node_modules" {
                            stack.push(p);
                        }
                    } else if ft.is_file() {
                        let rel = p
                            .strip_prefix(canonical)
                            .map(path_str)
                            .unwrap_or_else(|_| name.clone());
                        let hit = pattern.is_none_or(|pat| glob(pat, &name) || glob(pat, &rel));
                        if hit {
                            out.push(format!("{}/{rel}", folder.trim_end_matches('/')));
                            if out.len() >= limit {
                                return out;
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// `*` (any run of characters) and `?` (one character) matching.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Writes `path` atomically: a temporary file in the same directory, then a rename over the
/// target. An existing file keeps its permissions; a new file gets 0666 less the umask. Missing
/// parent directories are created.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let parent = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    fs::create_dir_all(parent)?;
    let existing = fs::metadata(path).ok().map(|m| m.permissions());
    let mut tmp = tempfile::Builder::new()
        .prefix(".claude-ide-bridge.")
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(parent)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    if let Some(perm) = existing {
        fs::set_permissions(tmp.path(), perm)?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn globs() {
        assert!(glob("*.rs", "main.rs"));
        assert!(glob("src/*.rs", "src/a.rs"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("*.rs", "main.rsx"));
        assert!(glob("*", ""));
    }

    #[test]
    fn confinement() {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let root = path_str(&fs::canonicalize(ws.path()).unwrap());
        fs::write(out.path().join("secret"), "s").unwrap();
        symlink(out.path(), ws.path().join("link")).unwrap();
        symlink(out.path().join("secret"), ws.path().join("file-link")).unwrap();
        let w = Workspace::new(vec![root.clone()]);
        assert!(w.confine(&format!("{root}/new/dir/a.rs")).is_ok());
        assert!(w.confine(&format!("{root}/../x")).is_err());
        assert!(w.confine(&format!("{root}/link/secret")).is_err());
        assert!(w.confine(&format!("{root}/link/new")).is_err());
        assert!(w.confine(&format!("{root}/file-link")).is_err());
        assert!(w.confine("/etc/passwd").is_err());
        assert!(w.confine("relative").is_err());
        assert!(w.resolve_compat("a/b.rs").is_ok());
        assert!(w.resolve_compat("../b.rs").is_err());
    }

    #[test]
    fn atomic_write_keeps_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let q = d.path().join("sub/y.txt");
        write_atomic(&q, b"y").unwrap();
        assert_eq!(fs::read_to_string(&q).unwrap(), "y");
    }
}
