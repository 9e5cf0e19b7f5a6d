//! A pool made while `SIGPIPE` would end the process opens no pipe: a
//! splice(2) into a socket whose peer is gone raises `SIGPIPE`, and no
//! flag prevents it. Its own test binary, as it changes the process's
//! signal disposition.

#![cfg(any(target_os = "linux", target_os = "android"))]

use cleave_splice::{Pipes, PipesConfig};

fn set_sigpipe(handler: libc::sighandler_t) {
    // SAFETY: `signal` with `SIG_DFL` or `SIG_IGN` installs no handler of
    // ours; this binary's only test is the only thread that changes it.
    let previous = unsafe { libc::signal(libc::SIGPIPE, handler) };
    assert_ne!(previous, libc::SIG_ERR);
}

fn pool() -> Pipes {
    Pipes::new(PipesConfig::default().max_open(Some(2)))
}

#[test]
fn a_pool_splices_only_while_sigpipe_is_ignored() {
    set_sigpipe(libc::SIG_DFL);
    let refused = pool();
    assert_eq!(refused.max_open(), 0, "SIGPIPE would end the process");
    assert!(refused.lease().is_none(), "its tunnels copy");

    set_sigpipe(libc::SIG_IGN);
    let spliced = pool();
    assert_eq!(spliced.max_open(), 2);
    assert!(spliced.lease().is_some());
}
