//! One file's diagnostics from the several servers of a language, merged, and told so that the
//! last list told for a file is the one its servers hold now.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::server::ServerProcess;
use crate::{sys, Diagnostic, FileDiagnostics, Servers};

/// The diagnostics `servers` hold for the file `key`, one after the other.
pub(crate) fn known_of(servers: &[Arc<ServerProcess>], key: &str) -> Vec<Diagnostic> {
    servers.iter().flat_map(|s| s.known(key)).collect()
}

/// What every server holds now for the file `uri` (the one whose change is being told included:
/// it stored the change before telling it). `None` when there is one server, when the client is
/// gone or when `uri` names no file: the change is then told as it is.
pub(crate) fn merged(servers: &Weak<Mutex<Servers>>, uri: &str) -> Option<FileDiagnostics> {
    let servers = servers.upgrade()?;
    let processes = servers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .processes();
    drop(servers);
    if processes.len() < 2 {
        return None;
    }
    let path = sys::path_of_uri(uri)?;
    Some(FileDiagnostics {
        diagnostics: known_of(&processes, &path),
        uri: uri.to_owned(),
    })
}

/// How many slots the files are spread over: files sharing a slot only cost each other a list
/// told again.
const SLOTS: usize = 64;

/// Tells merged lists so that the last one told for a file is never older than what its servers
/// hold. Two servers' threads telling the same file at once each merge, then tell: the one that
/// merged first may tell last, and its list misses the other's change. Holding a lock while
/// telling would order them, but the one told may call the client, which may tell again from the
/// same thread. Instead every change counts in its file's slot before it is merged; a teller that
/// finds its slot counted again once it has told merges and tells once more. The last list told
/// was then merged after the last change stored. No lock is held while telling.
pub(crate) struct Latest {
    changes: [AtomicU64; SLOTS],
}

impl Default for Latest {
    fn default() -> Latest {
        Latest {
            changes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Latest {
    /// Counts a change to `key`, then tells the list `merge` makes and, for as long as another
    /// change to `key` (or to a file sharing its slot) was counted meanwhile, the list it makes
    /// then. Stops when `merge` has none (the servers are fewer than two now, or gone); `false`
    /// when it had none the first time, and nothing was told.
    pub(crate) fn tell<T>(
        &self,
        key: &str,
        merge: impl Fn() -> Option<T>,
        tell: impl Fn(T),
    ) -> bool {
        let slot = &self.changes[slot_of(key)];
        slot.fetch_add(1, Ordering::SeqCst);
        // Read before merging: a change counted later is seen once the list is told.
        let mut seen = slot.load(Ordering::SeqCst);
        let Some(mut list) = merge() else {
            return false;
        };
        loop {
            tell(list);
            let now = slot.load(Ordering::SeqCst);
            if now == seen {
                return true;
            }
            seen = now;
            match merge() {
                Some(again) => list = again,
                None => return true,
            }
        }
    }
}

fn slot_of(key: &str) -> usize {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    (hasher.finish() % SLOTS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Two servers' changes to one file, told at once: the one merged first is told last. It is
    /// told again, merged after both changes.
    #[test]
    fn a_list_merged_before_anothers_change_is_told_again_after_it() {
        let latest = Latest::default();
        // What the two servers hold for the file: a change stores, then tells.
        let held = Mutex::new(vec!["a0", "b0"]);
        let told = Mutex::new(Vec::new());
        let (merged_first, go_on) = (mpsc::channel::<()>(), mpsc::channel::<()>());
        let (merged_tx, merged_rx) = merged_first;
        let (go_tx, go_rx) = go_on;
        let merge = || Some(held.lock().unwrap().join(" "));
        let merge = &merge;
        std::thread::scope(|scope| {
            // Server A: stores, merges, then is held up before it tells.
            let (held, told, latest) = (&held, &told, &latest);
            scope.spawn(move || {
                held.lock().unwrap()[0] = "a1";
                let waited = std::cell::Cell::new(false);
                latest.tell("file:///x.py", merge, |list| {
                    if !waited.replace(true) {
                        merged_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                    told.lock().unwrap().push(list);
                });
            });
            // Server B: stores, merges and tells while A is held up.
            merged_rx.recv().unwrap();
            held.lock().unwrap()[1] = "b1";
            latest.tell("file:///x.py", merge, |list| {
                told.lock().unwrap().push(list)
            });
            go_tx.send(()).unwrap();
        });
        let told = told.into_inner().unwrap();
        assert_eq!(told[0], "a1 b1", "B told first: {told:?}");
        assert_eq!(told[1], "a1 b0", "A's older list told after it: {told:?}");
        assert_eq!(told.last().unwrap(), "a1 b1", "the last told: {told:?}");
        assert_eq!(told.len(), 3, "{told:?}");
    }

    /// Alone, a change is told once.
    #[test]
    fn a_change_alone_is_told_once() {
        let latest = Latest::default();
        let told = Mutex::new(Vec::new());
        let merges = std::cell::Cell::new(0);
        let merge = || Some(merges.replace(merges.get() + 1));
        assert!(latest.tell("file:///y.py", merge, |n| told.lock().unwrap().push(n)));
        assert_eq!(told.into_inner().unwrap(), [0]);
        // One server (or none): nothing is told, the change goes as it is.
        assert!(!latest.tell("file:///y.py", || None::<u32>, |_| panic!("told")));
    }
}
