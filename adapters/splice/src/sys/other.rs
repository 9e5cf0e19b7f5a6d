//! No splice here: no pool ever opens a pipe.

use std::io;

pub(super) const SPLICE: bool = false;

pub(super) enum Pipe {}

impl Pipe {
    pub(super) fn size(&self) -> usize {
        match *self {}
    }

    pub(super) fn new(_: Option<usize>) -> io::Result<Self> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub(super) fn fill<S>(&self, _: S) -> io::Result<usize> {
        match *self {}
    }

    pub(super) fn drain<S>(&self, _: S, _: usize) -> io::Result<usize> {
        match *self {}
    }
}

pub(super) fn unsupported(_: &io::Error) -> bool {
    true
}

pub(super) fn descriptor_limit() -> usize {
    0
}

pub(super) fn sigpipe_ends_the_process() -> bool {
    true
}

#[cfg(unix)]
pub(super) fn holds_bytes(_: impl std::os::fd::AsFd) -> io::Result<bool> {
    Ok(false)
}

#[cfg(unix)]
pub(super) fn stopped_at_urgent_mark() -> io::Error {
    io::Error::other(crate::lease::UrgentMark)
}
