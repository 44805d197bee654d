//! The network's place in a build without it (the `net` feature off: the library alone, which
//! makes no peers). lib.rs declares this file as `net` then, so that the endpoint's peer code
//! (`endpoint/peer.rs`) compiles as it is, with no `#[cfg]` through its functions: a [`Link`]
//! here has no value, so no endpoint can hold one, and every branch that has a link is
//! unreachable, which the compiler checks (`match *self {}`) rather than a panic at run time.

use std::io;
use std::os::fd::BorrowedFd;

use crate::backlog::{Keep, Lent, Owned};
use crate::stop::Stop;

/// A network peer's link, which cannot exist without the network.
#[derive(Debug)]
pub enum Link {}

/// A link's socket, likewise.
pub enum Socket {}

impl Link {
    /// Never called: there is no link to read.
    pub fn read(&self, _buf: &mut [u8], _stop: &Stop) -> io::Result<usize> {
        match *self {}
    }

    /// Never called: there is no link to ask.
    pub fn moves(&self) -> bool {
        match *self {}
    }

    /// Never called: there is no link to read.
    pub fn read_moved(
        &self,
        _most: usize,
        _into: &mut Vec<Owned>,
        _stop: &Stop,
    ) -> Option<io::Result<usize>> {
        match *self {}
    }

    /// Never called: there is no link to write.
    pub fn write(&self, _buf: &[u8], _stop: &Stop) -> io::Result<usize> {
        match *self {}
    }

    /// Never called: there is no link to write.
    pub fn write_lent(&self, _bytes: &Lent, _stop: &Stop) -> io::Result<usize> {
        match *self {}
    }

    /// Never called: there is no link's socket.
    pub fn socket(&self) -> &Socket {
        match *self {}
    }

    /// Never called: there is no link to ask.
    pub fn is_secure(&self) -> bool {
        match *self {}
    }

    /// Never called: there is no link to ask.
    pub fn resumes(&self) -> bool {
        match *self {}
    }

    /// Never called: there is no link to keep bytes for.
    pub fn keep_until_confirmed(&self, _keep: Keep) {
        match *self {}
    }

    /// Never called: there is no link's stream to end.
    pub fn end_stream(&self, _stop: &Stop) -> io::Result<()> {
        match *self {}
    }

    /// Never called: there is no link to fail.
    pub fn failure(&self) -> Option<io::Error> {
        match *self {}
    }
}

impl Socket {
    /// Never called: there is no socket.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match *self {}
    }
}

/// Where an output goes on after a dropped connection came back: never, without a network.
pub fn resumed_at(_error: &io::Error) -> Option<u64> {
    None
}
