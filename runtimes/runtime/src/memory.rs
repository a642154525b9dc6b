//! The process's memory allocator, as a program that runs for hours wants it
//! (`claude-ide-bridge serve`).

use crate::sys;

/// The most arenas [`limit_arenas`] leaves the C allocator.
pub const MAX_ARENAS: u32 = 2;

/// Keeps the C allocator, which Rust's default global allocator calls, to at most
/// [`MAX_ARENAS`] arenas. Call it first thing in `main`, before any thread starts.
///
/// glibc gives a thread that finds every arena busy an arena of its own, up to eight per CPU,
/// and keeps what is freed in an arena for that arena. A server whose threads come and go with
/// its connections then holds free memory in each. Measured with `benches/idle`'s `day` mode:
/// the program on the threads runtime, idle after 600 client sessions, held 1,108 kB of private
/// memory, against 576 kB with two arenas.
///
/// On Linux with glibc this is `mallopt(M_ARENA_MAX)`. Elsewhere it does nothing: musl, macOS
/// and Windows allocators keep no arenas of this kind. Returns whether the limit is in effect.
///
/// ```
/// let limited = claude_ide_bridge_runtime::memory::limit_arenas();
/// assert_eq!(limited, cfg!(all(target_os = "linux", target_env = "gnu")));
/// ```
pub fn limit_arenas() -> bool {
    sys::limit_malloc_arenas(MAX_ARENAS)
}

/// The size from which [`map_large_blocks`] has blocks mapped on their own: glibc's default
/// threshold, kept from moving.
pub const LARGE_BLOCK_BYTES: usize = 128 * 1024;

/// Has the C allocator give every block of at least [`LARGE_BLOCK_BYTES`] pages of its own,
/// returned to the system when the block is freed. Call it first thing in `main`, with
/// [`limit_arenas`].
///
/// glibc does so from 128 KiB at first, but raises the threshold to the size of each such block
/// freed (up to 32 MiB), and the point from which it trims an arena's top with it: after one
/// large message, the next ones of that size come from an arena and stay there once freed.
/// Setting the threshold keeps it where it is. Measured with `benches/idle`'s `day` mode, a
/// language server's 525 KB message read every session: see BENCHMARKS.md, "A day's use".
///
/// On Linux with glibc this is `mallopt(M_MMAP_THRESHOLD)`. Elsewhere it does nothing. Returns
/// whether the setting is in effect.
///
/// ```
/// let mapped = claude_ide_bridge_runtime::memory::map_large_blocks();
/// assert_eq!(mapped, cfg!(all(target_os = "linux", target_env = "gnu")));
/// ```
pub fn map_large_blocks() -> bool {
    sys::map_large_blocks(LARGE_BLOCK_BYTES)
}

/// Gives the free memory the C allocator holds back to the system: the whole free pages in its
/// arenas, not only their tops. For a program that has just finished a burst of work and may now
/// sit idle for long: what the work freed between blocks still in use stays the process's
/// otherwise. It takes each arena's lock while it walks the arena's free blocks and gives their
/// pages back (the program's, idle after a session: six `madvise` calls and a `brk`).
///
/// On Linux with glibc this is `malloc_trim(0)`. Elsewhere it does nothing (musl, macOS and
/// Windows give pages back by themselves). Returns whether any memory was given back.
///
/// ```
/// let big = vec![1u8; 4 << 20];
/// drop(big);
/// let _given_back = claude_ide_bridge_runtime::memory::give_back();
/// ```
pub fn give_back() -> bool {
    sys::trim_malloc()
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// This process's private memory, in kB.
    fn rss_anon_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Memory freed between blocks still in use stays the process's until it is given back.
    #[test]
    fn free_pages_between_blocks_in_use_are_given_back() {
        // 8 MiB in 4 KiB blocks, every 16th kept: 7.5 MiB free in holes no arena top can trim.
        let mut blocks: Vec<Vec<u8>> = (0..2048).map(|i| vec![i as u8 | 1; 4096]).collect();
        let mut i = 0;
        blocks.retain(|_| {
            i += 1;
            i % 16 == 0
        });
        let held = rss_anon_kb();
        assert!(super::give_back(), "nothing given back");
        let after = rss_anon_kb();
        assert!(
            held >= after + 4096,
            "{held} kB before, {after} kB after giving back"
        );
        // What is in use is untouched.
        assert!(blocks.iter().all(|b| b.len() == 4096 && b[0] & 1 == 1));
    }
}
