//! The lock file kept where `claude` looks for as long as the server runs: written again when
//! another process removes it (a `claude` in a container sharing the folder takes every lock
//! file whose pid it cannot see for stale), and its folder made again when that is removed (an
//! `rm -rf ~/.claude/ide`, a common clean-up of stale lock files): without either, the bridge
//! ran on and no `claude` started after found it.
//!
//! The folder is made again only once the folder that held it (the config folder,
//! `~/.claude`) has had no entry added, removed or renamed for [`QUIET`]: an `rm -rf` of the
//! config folder still under way is done by then, and is not made to fail on a folder made again
//! in it (unless it spends longer than that inside one subfolder: its last step then fails, and
//! run again it removes both at once). The config folder gone too is the user's to make again (or `claude`'s, at its next
//! start): the nearest folder above it is watched until it changes, and the same rule then
//! applies. Nothing here wakes the process while nothing happens: each step is a watch of one
//! folder, asleep until its folder changes or its deadline comes (`sys::watch_removal`,
//! `sys::watch_quiet`).

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::sys::{self, Quiet, Restored, Settle, WatchEnd};

/// How long the config folder must have been quiet (no entry added, removed or renamed) before
/// the lock file's folder is made again in it.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// A folder that never rests is not waited for longer than this after its first change.
pub(crate) const LONGEST: Duration = Duration::from_secs(30);

/// A folder lost again within this time of being made again counts as lost at once: the next
/// wait is twice as long (up to [`QUIET`] times 2^[`MOST_DOUBLINGS`], about 4 minutes), so that a
/// process that keeps removing it is not answered every 2 s for as long as the bridge runs. Short
/// enough that a user's clean-ups some seconds apart are not taken for one (a loss later than
/// this after the folder was made again starts the count again).
const SOON: Duration = Duration::from_secs(5);
const MOST_DOUBLINGS: u32 = 7;

/// What a running server gives its lock file's watch.
pub(crate) trait Keeper: Send + Sync + 'static {
    /// Writes the lock file if it is not there (its folder must be): see
    /// [`LockGuard::restore`](crate::lock::LockGuard::restore).
    fn restore(&self) -> Restored;

    /// Under the server's lock: unless it stopped or withdrew its lock file, calls `start` with
    /// the lock file's folder and name, keeps the watch it returns as the server's one watch
    /// (the one before dropped, which ends it) and answers `true`. Each watch's next is started
    /// here, so that they are kept in the order they were started.
    fn keep(&self, start: impl FnOnce(&Path, &str) -> Option<WatchEnd>) -> bool;

    /// Logs a line (the debug log).
    fn log(&self, line: impl FnOnce() -> String);
}

/// The folder's losses soon after it was made again, and when it last was.
#[derive(Clone, Copy, Debug, Default)]
struct Losses {
    remade: Option<Instant>,
    quick: u32,
}

impl Losses {
    /// The folder was lost (again).
    fn lost(mut self) -> Losses {
        let soon = self.remade.is_some_and(|at| at.elapsed() < SOON);
        self.quick = if soon {
            (self.quick + 1).min(MOST_DOUBLINGS)
        } else {
            0
        };
        self.remade = None;
        self
    }

    /// How long the config folder must be quiet before the folder is made again.
    fn quiet(self) -> Duration {
        QUIET * (1 << self.quick)
    }
}

/// Starts the watch of `keeper`'s lock file, if it has one.
pub(crate) fn start<K: Keeper>(keeper: &Arc<K>) {
    let weak = Arc::downgrade(keeper);
    keeper.keep(|dir, name| watch_file(&weak, dir, name, false, Losses::default()));
}

/// Watches the lock file at `dir/name` (written at once with `first`): written again when
/// removed, and [`folder_lost`] when its folder goes.
fn watch_file<K: Keeper>(
    keeper: &Weak<K>,
    dir: &Path,
    name: &str,
    first: bool,
    losses: Losses,
) -> Option<WatchEnd> {
    let writer = Weak::clone(keeper);
    let restore = move || writer.upgrade().map_or(Restored::End, |k| k.restore());
    let lost = Weak::clone(keeper);
    let gone = move || folder_lost(&lost, losses.lost());
    sys::watch_removal(dir, name, first, restore, gone)
}

/// The lock file's folder is gone: with the config folder there, it is made again once that has
/// been quiet for a while ([`remake`]); with the config folder gone too, the nearest folder above
/// it is watched until it changes and rests, and this is asked again ([`watch_lost`]).
fn folder_lost<K: Keeper>(keeper: &Weak<K>, losses: Losses) {
    step(keeper, |weak, dir, _| {
        let quiet = losses.quiet();
        let mut line = String::new();
        let watch = watch_lost(dir, quiet, Path::is_dir, |folder, watched, settle| {
            line = match watched {
                Watched::Config => format!(
                    "Lock-file folder {} was removed: made again once {} has been quiet for {} s",
                    dir.display(),
                    folder.display(),
                    quiet.as_secs()
                ),
                Watched::Above => format!(
                    "Lock-file folder {} and the folder holding it were removed: \
                     waiting for them to be made again",
                    dir.display()
                ),
            };
            let weak = Weak::clone(&weak);
            match watched {
                Watched::Config => sys::watch_quiet(folder, settle, move |quiet| match quiet {
                    Quiet::Settled => remake(&weak, losses),
                    Quiet::Gone => folder_lost(&weak, losses),
                }),
                Watched::Above => {
                    sys::watch_quiet(folder, settle, move |_| folder_lost(&weak, losses))
                }
            }
        });
        (line, watch)
    });
}

/// Which folder [`watch_lost`] watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// The config folder, holding the lost one: the lost one is made again once it rests.
    Config,
    /// The nearest folder above that is there (the config folder is gone too): looked at again
    /// once it changes and rests.
    Above,
}

/// How many times [`watch_lost`] looks, while folders come and go as it starts its watch.
const LOOKS: usize = 8;

/// Starts the watch of a lost lock-file folder `dir` (`start(folder, which, settle)`): of the
/// config folder while there is one (quiet for `quiet` from now), else of the nearest folder above
/// (from its first change, then quiet for [`QUIET`]). A folder can come or go between the look and
/// the watch's start (an `rm -rf` of the config folder under way; `claude` making it again): the
/// watch of a folder that went could not start, and one that came made the change a watch above
/// it waits for before it watched. So the folders are looked at again after the start, and while
/// they changed the watch is started again, counted from now: a change missed is not waited for
/// (the lock file was never written again, seen once in CI while a config folder was removed).
fn watch_lost<W>(
    dir: &Path,
    quiet: Duration,
    is_dir: impl Fn(&Path) -> bool,
    mut start: impl FnMut(&Path, Watched, Settle) -> Option<W>,
) -> Option<W> {
    let nearest = || dir.ancestors().skip(1).find(|a| is_dir(a));
    let mut changed = false;
    for _ in 0..LOOKS {
        let folder = nearest()?;
        let (watched, settle) = match (Some(folder) == dir.parent(), changed) {
            (true, _) => (Watched::Config, Settle::from_now(quiet, LONGEST.max(quiet))),
            (false, false) => (Watched::Above, Settle::after_a_change(QUIET, LONGEST)),
            (false, true) => (Watched::Above, Settle::from_now(QUIET, LONGEST)),
        };
        let watch = start(folder, watched, settle);
        if nearest() == Some(folder) {
            return watch;
        }
        changed = true;
    }
    None
}

/// Makes the lock file's folder again (private, checked as at the start), watches it, and writes
/// the lock file there (tried again later while it cannot be: [`sys::watch_removal`]'s `first`).
/// A folder that cannot be made (the config folder's permission taken away, a file in its place)
/// is tried again when the config folder changes, and once more as soon as that watch started
/// ([`watch_then_make_again`]).
fn remake<K: Keeper>(keeper: &Weak<K>, mut losses: Losses) {
    losses.remade = Some(Instant::now());
    step(
        keeper,
        |weak, dir, name| match crate::lock::ensure_lock_dir(dir) {
            Ok(()) => {
                let line = format!("Lock-file folder {} made again", dir.display());
                (line, watch_file(&weak, dir, name, true, losses))
            }
            Err(e) => {
                let again = watch_then_make_again(
                    || look_again_after_a_change(Weak::clone(&weak), dir, losses),
                    || crate::lock::ensure_lock_dir(dir).is_ok(),
                );
                match again {
                    Again::Made => {
                        let line = format!(
                            "Lock-file folder {} made again at the second try (the first: {e})",
                            dir.display()
                        );
                        (line, watch_file(&weak, dir, name, true, losses))
                    }
                    Again::Watching(watch) => {
                        let line = format!(
                            "Lock-file folder {} could not be made again: {e} \
                             (tried again when the folder holding it changes)",
                            dir.display()
                        );
                        (line, watch)
                    }
                }
            }
        },
    );
}

/// What [`watch_then_make_again`] did.
#[derive(Debug, PartialEq, Eq)]
enum Again<W> {
    /// The folder was made: the watch was let go of.
    Made,
    /// Not made: the watch started (`None`: it could not be) waits for a change.
    Watching(Option<W>),
}

/// After a failed make of the lock file's folder: starts the watch that waits for a change
/// (`watch`), then tries the make once more (`make`, whether it made the folder). A change made
/// between the failed make and the watch's start (the permission given back, the file in the
/// folder's place removed) is one that watch never sees: without the second try the folder
/// would wait for another change that may never come.
fn watch_then_make_again<W>(
    watch: impl FnOnce() -> Option<W>,
    make: impl FnOnce() -> bool,
) -> Again<W> {
    let watch = watch();
    if make() {
        return Again::Made;
    }
    Again::Watching(watch)
}

/// One step of the watch, unless the server is gone: `next` is given the keeper (to pass on to
/// the watch it starts) and the lock file's folder and name, and answers what it does (a line
/// for the debug log) and the watch it started, which [`Keeper::keep`] keeps. A watch that could
/// not be set up (no inotify instance left to this user, say) is said too: the lock file is no
/// longer kept where claude looks.
fn step<K: Keeper>(
    keeper: &Weak<K>,
    next: impl FnOnce(Weak<K>, &Path, &str) -> (String, Option<WatchEnd>),
) {
    let Some(k) = keeper.upgrade() else {
        return;
    };
    let mut said = Vec::new();
    k.keep(|dir, name| {
        let (line, watch) = next(Weak::clone(keeper), dir, name);
        said.push(line);
        if watch.is_none() {
            said.push(format!(
                "Lock-file folder {}: no watch could be set up; \
                 the lock file is not written there again until the bridge restarts",
                dir.display()
            ));
        }
        watch
    });
    said.into_iter().for_each(|line| k.log(|| line));
}

/// Watches the nearest folder above `dir` there is until it changes and rests, then asks
/// [`folder_lost`] again.
fn look_again_after_a_change<K: Keeper>(
    keeper: Weak<K>,
    dir: &Path,
    losses: Losses,
) -> Option<WatchEnd> {
    let above = dir.ancestors().skip(1).find(|a| a.is_dir())?;
    let settle = Settle::after_a_change(QUIET, LONGEST);
    sys::watch_quiet(above, settle, move |_| folder_lost(&keeper, losses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::path::PathBuf;

    /// One start of a watch: its folder, what it watched, how long its settle waits (`None`: until
    /// a change).
    type Start = (PathBuf, Watched, Option<Duration>);

    /// What [`watch_lost`] started for `/top/config/ide` lost, among folders that `during` changes
    /// as each watch starts (its argument: the how-manieth start): each start's folder, what it
    /// watched and how long its settle waits (`None`: until a change), and what it returned.
    fn starts(
        there: &[&str],
        during: impl Fn(usize, &mut Vec<PathBuf>) -> bool,
    ) -> (Vec<Start>, Option<usize>) {
        let folders = RefCell::new(there.iter().map(PathBuf::from).collect::<Vec<_>>());
        let mut seen = Vec::new();
        let watch = watch_lost(
            Path::new("/top/config/ide"),
            QUIET * 4,
            |p| folders.borrow().iter().any(|f| f == p),
            |folder, watched, settle| {
                seen.push((folder.to_path_buf(), watched, settle.wait()));
                let started = during(seen.len(), &mut folders.borrow_mut());
                started.then_some(seen.len())
            },
        );
        (seen, watch)
    }

    fn about(wait: Option<Duration>, want: Duration) -> bool {
        wait.is_some_and(|w| w <= want && w + Duration::from_secs(1) > want)
    }

    /// With nothing changing meanwhile: the config folder watched while it is there (quiet for the
    /// losses' wait from now), else the nearest folder above until it changes.
    #[test]
    fn a_lost_folder_watches_the_config_folder_or_the_nearest_above() {
        let (seen, watch) = starts(&["/", "/top", "/top/config"], |_, _| true);
        assert_eq!(watch, Some(1));
        assert_eq!(
            (&seen[0].0, seen[0].1),
            (&PathBuf::from("/top/config"), Watched::Config)
        );
        assert!(about(seen[0].2, QUIET * 4), "{seen:?}");

        let (seen, watch) = starts(&["/", "/top"], |_, _| true);
        assert_eq!(watch, Some(1));
        assert_eq!(seen, vec![(PathBuf::from("/top"), Watched::Above, None)]);

        // A watch that cannot start on a folder that is there is not tried again.
        let (seen, watch) = starts(&["/", "/top"], |_, _| false);
        assert_eq!((seen.len(), watch), (1, None));
    }

    /// The config folder removed between the look and its watch (an `rm -rf` of it under way):
    /// that watch cannot start, and the folder above is watched. The config folder made again
    /// between the look and the watch above (`claude` made it): that watch would wait for a change
    /// already made; the config folder is watched instead, from now.
    #[test]
    fn folders_that_come_or_go_as_the_watch_starts_are_looked_at_again() {
        let (seen, watch) = starts(&["/", "/top", "/top/config"], |n, folders| {
            if n == 1 {
                folders.retain(|f| f != Path::new("/top/config"));
                return false;
            }
            true
        });
        assert_eq!(watch, Some(2));
        let watched: Vec<_> = seen
            .iter()
            .map(|(f, w, _)| (f.to_str().unwrap(), *w))
            .collect();
        assert_eq!(
            watched,
            [("/top/config", Watched::Config), ("/top", Watched::Above)]
        );
        assert!(
            about(seen[1].2, QUIET),
            "from now, the change may be made: {seen:?}"
        );

        let (seen, watch) = starts(&["/", "/top"], |n, folders| {
            if n == 1 {
                folders.push(PathBuf::from("/top/config"));
            }
            true
        });
        assert_eq!(watch, Some(2));
        assert_eq!(
            (&seen[1].0, seen[1].1),
            (&PathBuf::from("/top/config"), Watched::Config)
        );
        assert!(about(seen[1].2, QUIET * 4), "{seen:?}");

        // Folders that never rest: given up after a bounded number of looks.
        let (seen, watch) = starts(&["/", "/top"], |_, folders| {
            match folders.iter().position(|f| f == Path::new("/top/config")) {
                Some(i) => drop(folders.remove(i)),
                None => folders.push(PathBuf::from("/top/config")),
            }
            true
        });
        assert_eq!((seen.len(), watch), (LOOKS, None));
    }

    /// After a failed make, the watch starts before the second try: a change between the two is
    /// then either seen by the try or by the watch. Made, the watch is let go of.
    #[test]
    fn a_failed_make_is_tried_again_once_its_watch_started() {
        let order = RefCell::new(Vec::new());
        let watch = |started: bool| {
            order.borrow_mut().push("watch");
            started.then_some("w")
        };
        let make = |made: bool| {
            order.borrow_mut().push("make");
            made
        };
        assert_eq!(
            watch_then_make_again(|| watch(true), || make(true)),
            Again::Made
        );
        assert_eq!(*order.borrow(), ["watch", "make"]);
        assert_eq!(
            watch_then_make_again(|| watch(true), || make(false)),
            Again::Watching(Some("w"))
        );
        // No watch could start: made at the second try all the same, or said.
        assert_eq!(
            watch_then_make_again(|| watch(false), || make(true)),
            Again::Made
        );
        assert_eq!(
            watch_then_make_again(|| watch(false), || make(false)),
            Again::Watching(None)
        );
    }

    /// The wait doubles for each loss soon after the folder was made again, up to its bound, and
    /// starts again at [`QUIET`] after a loss that came later.
    #[test]
    fn losses_soon_after_a_remake_double_the_wait() {
        let first = Losses::default().lost();
        assert_eq!(first.quiet(), QUIET);
        let mut losses = first;
        for doublings in 1..=MOST_DOUBLINGS + 2 {
            losses.remade = Some(Instant::now());
            losses = losses.lost();
            let expected = QUIET * (1 << doublings.min(MOST_DOUBLINGS));
            assert_eq!(losses.quiet(), expected, "{doublings}");
        }
        assert!(losses.quiet() <= Duration::from_secs(300));
        let Some(long_ago) = Instant::now().checked_sub(SOON + Duration::from_secs(1)) else {
            return;
        };
        losses.remade = Some(long_ago);
        assert_eq!(losses.lost().quiet(), QUIET, "a loss later than SOON");
    }
}
