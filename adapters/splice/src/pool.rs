//! The pool: pipes opened up to a limit, the empty ones kept for the
//! next tunnel.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::config::{PipesConfig, MAX_OPEN_CAP};
use crate::lease::Lease;
use crate::sys;

/// A pool of pipes for kernel-side tunnels: at most
/// [`max_open`](PipesConfig::max_open) open at once, the empty ones kept
/// for the next tunnel.
///
/// Memory: a pipe holds no bytes of its own while idle. In use, it holds
/// references to the socket buffers' pages it carries, at most its
/// [`size`](PipesConfig::size) (64 KiB by default), which the bytes would
/// have taken in a copying tunnel's user-space buffer too (a copying
/// tunnel keeps 16 KiB each way). The kernel's bookkeeping of an open pipe
/// (two files, an inode, the ring of 16 page slots) is about 2 KiB of slab
/// (1.8 to 2.2 KiB over three runs of the `pipe_memory` bench, Linux 6.18).
///
/// Most programs use the process's [`Pipes::global`] pool; a pool of
/// their own sets its own limits. A `Pipes` is a handle: its clones share
/// one pool.
#[derive(Clone)]
pub struct Pipes {
    inner: Arc<Inner>,
}

struct Inner {
    config: PipesConfig,
    max_open: usize,
    idle: Mutex<Vec<sys::Pipe>>,
    open: AtomicUsize,
    spliced: AtomicU64,
}

impl fmt::Debug for Pipes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipes")
            .field("max_open", &self.max_open())
            .field("open", &self.open())
            .field("idle", &self.idle())
            .field("spliced", &self.spliced())
            .finish_non_exhaustive()
    }
}

impl Default for Pipes {
    fn default() -> Self {
        Self::new(PipesConfig::default())
    }
}

impl Pipes {
    /// A pool with `config`'s limits. It opens pipes when tunnels need
    /// them; where splice(2) does not exist (not Linux), it opens none.
    ///
    /// Nor does it where `SIGPIPE` would end the process, its disposition
    /// the default one when the pool is made (a Rust program ignores it
    /// from the start; a C program that embeds this one may not): a
    /// splice(2) into a socket whose peer has gone raises `SIGPIPE`, and
    /// unlike `send`'s `MSG_NOSIGNAL` no flag prevents it. Tunnels then
    /// copy; ignore `SIGPIPE` (or handle it) before making the pool to
    /// splice.
    #[must_use]
    pub fn new(config: PipesConfig) -> Self {
        let max_open = config
            .get_max_open()
            .unwrap_or_else(|| (sys::descriptor_limit() / 4).min(MAX_OPEN_CAP));
        let splice = sys::SPLICE && !sys::sigpipe_ends_the_process();
        let inner = Inner {
            config,
            max_open: if splice { max_open } else { 0 },
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            spliced: AtomicU64::new(0),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The process's pool, with the default configuration.
    pub fn global() -> &'static Pipes {
        static GLOBAL: OnceLock<Pipes> = OnceLock::new();
        GLOBAL.get_or_init(Pipes::default)
    }

    /// The configuration it was made with.
    #[must_use]
    pub fn config(&self) -> &PipesConfig {
        &self.inner.config
    }

    /// The most pipes it opens at once (the configured or the computed
    /// limit; 0 where there is no splice, or where `SIGPIPE` would end the
    /// process).
    #[must_use]
    pub fn max_open(&self) -> usize {
        self.inner.max_open
    }

    /// Pipes open now, in use and idle.
    #[must_use]
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Acquire)
    }

    /// Idle pipes kept for the next tunnels.
    #[must_use]
    pub fn idle(&self) -> usize {
        let idle = self.inner.idle.lock();
        idle.unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Bytes moved through this pool's pipes so far: what the kernel
    /// tunnelled without a copy.
    #[must_use]
    pub fn spliced(&self) -> u64 {
        self.inner.spliced.load(Ordering::Relaxed)
    }

    /// Counts `n` bytes a lease drained.
    #[cfg(unix)]
    pub(crate) fn count_spliced(&self, n: usize) {
        self.inner.spliced.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// An idle pipe, or a new one within the limit; `None` when the limit
    /// is reached, the system refuses a pipe (out of descriptors, say), or
    /// there is no splice(2) here.
    #[must_use]
    pub fn lease(&self) -> Option<Lease> {
        let inner = &*self.inner;
        let kept = inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let pipe = match kept {
            Some(pipe) => pipe,
            None => {
                inner
                    .open
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                        (open < inner.max_open).then_some(open + 1)
                    })
                    .ok()?;
                match sys::Pipe::new(inner.config.get_size()) {
                    Ok(pipe) => pipe,
                    Err(_) => {
                        inner.open.fetch_sub(1, Ordering::AcqRel);
                        return None;
                    }
                }
            }
        };
        Some(Lease::new(self.clone(), pipe))
    }

    /// Takes a pipe back: kept if it is empty and there is room, closed
    /// otherwise.
    pub(crate) fn put(&self, pipe: sys::Pipe, empty: bool) {
        let inner = &*self.inner;
        if empty {
            let mut idle = inner.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < inner.config.get_max_idle() {
                idle.push(pipe);
                return;
            }
        }
        drop(pipe);
        inner.open.fetch_sub(1, Ordering::AcqRel);
    }
}
