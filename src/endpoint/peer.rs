//! An endpoint that is a peer on another host (`--to`, `--from`): what the engine asks of
//! it, in the engine's words, so that the engine names no transport.
//!
//! The peer is a [`Link`] (see `net`), established before the run. Its reads and writes go
//! through [`Endpoint::read`] and [`Endpoint::write`] like any other endpoint's; what only a
//! peer has is said here: that a write costs a frame at both ends and an output's stream has
//! an end to say ([`Endpoint::is_remote`]), that its bytes only pass through memory
//! ([`Endpoint::through_memory_only`]), that an output keeps what its receiver has not
//! confirmed ([`Endpoint::keep_until_confirmed`]) and is sent back there once a dropped
//! connection is back ([`resumed_at`]), the end of its stream ([`Endpoint::end_stream`]),
//! and that it gave up ([`Endpoint::gave_up`]).

use std::io;
use std::sync::Arc;

use super::{Descriptor, Endpoint, FdKind};
use crate::backlog::Reader;
use crate::net::{self, Link};
use crate::stop::Stop;

/// Where an output's stream goes on, when `error` (from its write, or from its end of
/// stream) says that its dropped connection is back: its reader has been sent back there,
/// and finds those bytes at its next look for data.
pub fn resumed_at(error: &io::Error) -> Option<u64> {
    net::resumed_at(error)
}

impl Endpoint {
    /// A network peer, known to the user as `name` (the address given); its socket comes when
    /// the link is established, before the run starts.
    pub fn network(link: Arc<Link>, name: &str, stop: &Arc<Stop>) -> Endpoint {
        Endpoint::of(Descriptor::Network(link), name.to_owned(), FdKind::Socket, stop)
    }

    /// The network link, when this is a network peer: for the run, which establishes it,
    /// has it report to the meter and confirm, and aborts its stream.
    pub fn link(&self) -> Option<&Arc<Link>> {
        match &self.fd {
            Descriptor::Network(link) => Some(link),
            _ => None,
        }
    }

    /// Whether this is a peer on another host: each write costs a frame and a wakeup at both
    /// ends, not only a system call, and an output's stream has an end to say and to be
    /// confirmed ([`Endpoint::end_stream`]), which a local output's has not.
    pub fn is_remote(&self) -> bool {
        self.link().is_some()
    }

    /// Whether its bytes can pass only through memory, whatever the engine: a secure peer
    /// seals and opens them there, and an output that resumes sends again what its receiver
    /// had not confirmed, which the backlog's memory still holds and a pipe's bytes, read
    /// once, would not.
    pub fn through_memory_only(&self) -> bool {
        self.link().is_some_and(|link| link.is_secure())
    }

    /// Whether this is accel's own socket to a plain (`--insecure`) peer: read, written and
    /// spliced as a pipe.
    pub(super) fn plain_socket(&self) -> bool {
        self.link().is_some_and(|link| !link.is_secure())
    }

    /// For an output that resumes a dropped connection, keeps what `reader` passes in the
    /// backlog until the receiver confirms it, so that the stream can go on from any byte
    /// not confirmed. Nothing for any other output.
    pub fn keep_until_confirmed(&self, reader: &Reader) {
        if let Some(link) = self.link().filter(|link| link.resumes()) {
            link.keep_until_confirmed(reader.keep());
        }
    }

    /// An output's last step once it has sent every byte of an input that ended cleanly:
    /// for a peer, the end of the stream, and the receiver's confirmation that every byte
    /// arrived, waited for until the run's stop; nothing for a local output.
    pub fn end_stream(&self) -> io::Result<()> {
        match self.link() {
            Some(link) => link.end_stream(&self.stop),
            None => Ok(()),
        }
    }

    /// Why this endpoint gave up for good, if it did: a peer whose dropped connection could
    /// not be restored (its output's reader was stopped then, and finds no more data).
    pub fn gave_up(&self) -> Option<io::Error> {
        self.link().and_then(|link| link.failure())
    }
}
