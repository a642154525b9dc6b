//! The walk's memory does not grow with a directory's size: a listing that goes deep below a
//! huge directory keeps reading that directory a batch at a time. (walkdir, under the `ignore`
//! crate's walker, read the rest of a directory into memory once the walk was more than ten
//! levels below it: 100,000 names, 15 MB here, and without bound for a larger one.)
//!
//! Its own test binary: the allocator below counts every allocation of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use claude_ide_bridge_files::{Limits, Workspace};

/// The system allocator, counting the bytes in use and the most in use since the last reset.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the counters only add atomic arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = IN_USE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: the caller's contract for `dealloc`, passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn a_deep_walk_below_a_huge_directory_reads_it_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    // Chains twelve levels deep among the files, so that the walk goes deep while most of the
    // directory is still unread, wherever the chains come in its order.
    for c in 0..20 {
        let chain = root.join(format!("chain{c}")).join(["d"; 11].join("/"));
        fs::create_dir_all(&chain).unwrap();
        fs::write(chain.join("leaf.txt"), "").unwrap();
    }
    const FILES: u64 = 100_000;
    for i in 0..FILES {
        fs::File::create(root.join(format!("file-with-a-longish-name-{i:06}.txt"))).unwrap();
    }
    let ws = Workspace::new(
        vec![root.to_str().unwrap().to_string()],
        Limits {
            max_walk_time: std::time::Duration::from_secs(60),
            ..Limits::default()
        },
    );
    let before = IN_USE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let info = ws.info();
    let peak = PEAK.load(Relaxed) - before;
    assert_eq!(
        (info.file_count, info.file_count_truncated),
        (FILES + 20, false)
    );
    eprintln!("peak memory of the walk: {peak} bytes");
    // 13 directories open at most, each with a buffer of at most 1,024 entries (rustix's), and
    // their `.gitignore` matchers: under 4 MiB whatever the directory's size.
    assert!(peak < 4 << 20, "the walk held {peak} bytes");
}
