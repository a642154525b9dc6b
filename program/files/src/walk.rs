//! The listing's walk on Unix: depth first over `openat` directory handles (see `list.rs` for
//! what it skips and where it stops).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Instant;

use ignore::gitignore::Gitignore;
use rustix::fs::{openat, statat, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::open::read_small_in;
use crate::Workspace;

/// One directory the walk is in: its entries, read as the walk goes (never all at once), its
/// path below the folder, and its `.gitignore`. The walk holds one per level, so at most
/// [`Limits::max_depth`](crate::Limits::max_depth) of them.
struct Frame {
    entries: Dir,
    rel: String,
    ignore: Gitignore,
}

/// How the walk opens a directory: readable, never through a link, relative to its parent's
/// handle.
const LIST_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);

impl Workspace {
    /// Walks every folder, calling `found(name, path below the folder, absolute path)` for each
    /// regular file not skipped, until it returns `false` or a bound stops the walk. Returns
    /// whether the walk was cut short.
    ///
    /// Depth first, each directory opened relative to its parent's handle without following a
    /// link, so a directory swapped for a link during the walk is not entered, and read a batch
    /// of entries at a time: a huge directory costs time (bounded) but no memory.
    pub(crate) fn walk_files(&self, mut found: impl FnMut(&str, &str, &str) -> bool) -> bool {
        let deadline = Instant::now() + self.limits.max_walk_time;
        let (max_entries, max_depth) = (self.limits.max_walk_entries, self.limits.max_depth);
        // Every entry the walk reads counts, the ones skipped too (ignored trees).
        let mut seen = 0usize;
        let mut cut = false;
        // What the ignore files of one walk may hold in all (see `matcher`).
        let cap = self.limits.max_ignore_file_bytes;
        let mut ignore_left = 2 * cap;
        for (i, folder) in self.folders.iter().enumerate() {
            let root = PathBuf::from(&folder.advertised);
            if self.covered(i) {
                continue;
            }
            let top = self.open_folder(i, "").ok();
            let top = top.and_then(|fd| openat(&fd, ".", LIST_FLAGS, Mode::empty()).ok());
            let Some(top) = top else {
                // Not seen at all: the listing is not whole.
                cut = true;
                continue;
            };
            // `.git/info/exclude` is found as any path is: git follows a link there. Each
            // `.gitignore` is read through the handle its directory is listed by, and is not
            // read when it is a link.
            let exclude = Self::matcher(&root, "", &mut ignore_left, || {
                let comps = [".git", "info", "exclude"].map(OsString::from).to_vec();
                self.read_small(i, comps, cap)
            });
            let ignore = Self::matcher(&root, "", &mut ignore_left, || {
                read_small_in(top.as_fd(), ".gitignore", cap)
            });
            let (Some(exclude), Some(ignore)) = (exclude, ignore) else {
                return true;
            };
            let Ok(top) = Dir::new(top) else {
                cut = true;
                continue;
            };
            let mut stack = vec![Frame {
                entries: top,
                rel: String::new(),
                ignore,
            }];
            while let Some(frame) = stack.last_mut() {
                let entry = match frame.entries.read() {
                    Some(Ok(entry)) => entry,
                    // The directory's end.
                    None => {
                        stack.pop();
                        continue;
                    }
                    // What was read stands, the rest was not seen.
                    Some(Err(_)) => {
                        cut = true;
                        stack.pop();
                        continue;
                    }
                };
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                seen += 1;
                if seen > max_entries || Instant::now() > deadline {
                    return true;
                }
                // A name that is not UTF-8 cannot be named in JSON: it is left out (a directory
                // with all it holds).
                let Ok(name) = std::str::from_utf8(name) else {
                    continue;
                };
                if name == ".git" {
                    continue;
                }
                let kind = match entry.file_type() {
                    FileType::Unknown => frame.entries.fd().ok().and_then(|dir| {
                        let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
                        Some(FileType::from_raw_mode(st.st_mode))
                    }),
                    kind => Some(kind),
                };
                let is_dir = match kind {
                    Some(FileType::Directory) => true,
                    Some(FileType::RegularFile) => false,
                    _ => continue,
                };
                let depth = stack.len();
                let rel = Self::child_rel(&stack[depth - 1].rel, name);
                let full = root.join(&rel);
                if Self::ignored(
                    stack.iter().rev().map(|f| &f.ignore),
                    &exclude,
                    &full,
                    is_dir,
                ) {
                    continue;
                }
                if is_dir && depth >= max_depth {
                    // Not entered: there may be more below.
                    cut = true;
                    continue;
                }
                if is_dir {
                    let parent = &stack[depth - 1].entries;
                    let opened = parent
                        .fd()
                        .and_then(|dir| openat(dir, name, LIST_FLAGS, Mode::empty()));
                    // Its `.gitignore` is read through the handle its entries are read from:
                    // whatever comes to be at its path meanwhile, the rules are its own.
                    let opened = opened.and_then(|fd| {
                        let ignore = Self::matcher(&root, &rel, &mut ignore_left, || {
                            read_small_in(fd.as_fd(), ".gitignore", cap)
                        });
                        Ok((Dir::new(fd)?, ignore))
                    });
                    match opened {
                        Ok((_, None)) => return true,
                        Ok((entries, Some(ignore))) => stack.push(Frame {
                            entries,
                            rel,
                            ignore,
                        }),
                        // Gone, or swapped for a link since it was read: passed over.
                        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {}
                        // Not readable, or out of handles: the listing is not whole.
                        Err(_) => cut = true,
                    }
                    continue;
                }
                let abs = format!("{}/{rel}", folder.advertised.trim_end_matches('/'));
                if !found(name, &rel, &abs) {
                    return true;
                }
            }
        }
        cut
    }
}
