//! A global allocator for tests that measure memory: the system allocator, counting the bytes in
//! use and the most in use since [`peak_during`] began. A test binary of its own installs it, since
//! it counts every allocation of the process:
//!
//! ```
//! use claude_ide_bridge_testsupport::counting_alloc::{peak_during, Counting};
//!
//! #[global_allocator]
//! static ALLOC: Counting = Counting;
//!
//! let (v, peak) = peak_during(|| vec![0u8; 4096]);
//! assert_eq!(v.len(), 4096);
//! assert!(peak >= 4096);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting: install it with `#[global_allocator]`.
pub struct Counting;

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

/// Runs `f`; returns what it returned and the most bytes in use meanwhile beyond those in use when
/// it began (the whole process's: run one such test per binary).
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = IN_USE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(before))
}
