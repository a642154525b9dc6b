//! The walk's memory does not grow with a directory's size: a listing that goes deep below a
//! huge directory keeps reading that directory a batch at a time. (walkdir, under the `ignore`
//! crate's walker, read the rest of a directory into memory once the walk was more than ten
//! levels below it: 100,000 names, 15 MB here, and without bound for a larger one.)
//!
//! Its own test binary: the counting allocator counts every allocation of the process.
// Unix only: its 100,000 files take minutes to make under Wine (the Windows walk reads a
// directory through std's FindNextFileW, a batch at a time, too).
#![cfg(unix)]

use claude_ide_bridge_testsupport::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

use std::fs;

use claude_ide_bridge_files::{Limits, Workspace};

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
    let (info, peak) = counting_alloc::peak_during(|| ws.info());
    assert_eq!(
        (info.file_count, info.file_count_truncated),
        (FILES + 20, false)
    );
    eprintln!("peak memory of the walk: {peak} bytes");
    // 13 directories open at most, each with a buffer of at most 1,024 entries (rustix's), and
    // their `.gitignore` matchers: under 4 MiB whatever the directory's size.
    assert!(peak < 4 << 20, "the walk held {peak} bytes");
}
