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
