//! How big a pool of pipes may grow, and how big its pipes are.

/// The most pipes a pool keeps open by default, whatever the descriptor
/// limit.
pub(crate) const MAX_OPEN_CAP: usize = 4096;
/// The idle pipes a pool keeps for the next tunnels by default.
const DEFAULT_MAX_IDLE: usize = 64;

/// Configuration of a [`Pipes`](crate::Pipes) pool.
///
/// ```
/// use cleave_splice::PipesConfig;
///
/// // HAProxy's `maxpipes 1000` and `tune.pipesize 262144`.
/// let config = PipesConfig::default().max_open(Some(1000)).size(Some(256 * 1024));
/// assert_eq!(config.get_max_open(), Some(1000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipesConfig {
    max_open: Option<usize>,
    max_idle: usize,
    size: Option<usize>,
}

impl Default for PipesConfig {
    fn default() -> Self {
        Self {
            max_open: None,
            max_idle: DEFAULT_MAX_IDLE,
            size: None,
        }
    }
}

impl PipesConfig {
    /// The most pipes open at once, in use and idle (each is two file
    /// descriptors; a spliced tunnel uses one per direction). A tunnel
    /// direction that finds none left copies through user space instead.
    /// Default (`None`): a quarter of
    /// the process's descriptor limit (`RLIMIT_NOFILE`, its soft value when
    /// the pool is made), at most 4096, so that pipes never take the
    /// descriptors the listener needs (HAProxy's `maxpipes` defaults to a
    /// quarter of its connections for the same reason).
    #[must_use]
    pub fn max_open(mut self, pipes: Option<usize>) -> Self {
        self.max_open = pipes;
        self
    }

    /// The most idle pipes kept open for the next tunnels; more are
    /// closed when their tunnel ends. Default: 64. A pipe is only kept if
    /// its tunnel left it empty.
    #[must_use]
    pub fn max_idle(mut self, pipes: usize) -> Self {
        self.max_idle = pipes;
        self
    }

    /// Each pipe's capacity in bytes (`F_SETPIPE_SZ`; the kernel rounds it
    /// up to a power of two pages). Default (`None`): the system's, 64 KiB
    /// on Linux. An unprivileged process cannot go above
    /// `/proc/sys/fs/pipe-max-size` (1 MiB by default): a pipe that cannot
    /// be sized is closed and its tunnel direction copies instead.
    #[must_use]
    pub fn size(mut self, bytes: Option<usize>) -> Self {
        self.size = bytes;
        self
    }

    /// The most pipes open at once, `None` for the default.
    #[must_use]
    pub fn get_max_open(&self) -> Option<usize> {
        self.max_open
    }

    /// The most idle pipes kept.
    #[must_use]
    pub fn get_max_idle(&self) -> usize {
        self.max_idle
    }

    /// Each pipe's capacity, `None` for the system's.
    #[must_use]
    pub fn get_size(&self) -> Option<usize> {
        self.size
    }
}
