//! The benches' global allocator: the system's, counting what it is asked.
//!
//! A bench binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: cleave_benches::alloc::Counting<false> = cleave_benches::alloc::Counting;
//! ```
//!
//! `Counting<false>` counts only inside [`allocations`], so that the
//! timed runs of every variant (cleave's and its peers', which allocate
//! more) pay nothing but one relaxed load per allocation. `Counting<true>`
//! counts from the first allocation on, for [`live_heap`]: the memory
//! benches' heap figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The system allocator, counting calls and bytes: always if `ALWAYS`,
/// else inside [`allocations`].
#[derive(Debug)]
pub struct Counting<const ALWAYS: bool>;

static ON: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

impl<const ALWAYS: bool> Counting<ALWAYS> {
    #[inline(always)]
    fn counts() -> bool {
        ALWAYS || ON.load(Relaxed)
    }

    #[inline(always)]
    fn allocated(ptr: *mut u8, size: usize) -> *mut u8 {
        if !ptr.is_null() && Self::counts() {
            CALLS.fetch_add(1, Relaxed);
            ALLOCATED.fetch_add(size as u64, Relaxed);
        }
        ptr
    }
}

// SAFETY: every call goes to `System` unchanged; the counters only watch.
unsafe impl<const ALWAYS: bool> GlobalAlloc for Counting<ALWAYS> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps `GlobalAlloc::alloc`'s contract.
        Self::allocated(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        Self::allocated(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller keeps `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) };
        if Self::counts() {
            FREED.fetch_add(layout.size() as u64, Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller keeps `GlobalAlloc::realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() && Self::counts() {
            CALLS.fetch_add(1, Relaxed);
            ALLOCATED.fetch_add(new_size as u64, Relaxed);
            FREED.fetch_add(layout.size() as u64, Relaxed);
        }
        new
    }
}

/// Runs `f` and returns the allocations (and reallocations) it made.
/// Single-threaded: another thread's allocations meanwhile count too.
pub fn allocations<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = CALLS.load(Relaxed);
    ON.store(true, Relaxed);
    let out = f();
    ON.store(false, Relaxed);
    (CALLS.load(Relaxed) - before, out)
}

/// Bytes allocated and not freed (what was asked for: malloc's own
/// overhead per block is not in it). Under `Counting<true>`.
pub fn live_heap() -> u64 {
    // Freed first: everything counted freed was counted allocated before.
    let freed = FREED.load(Relaxed);
    ALLOCATED.load(Relaxed).saturating_sub(freed)
}
