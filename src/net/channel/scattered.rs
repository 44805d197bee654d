//! A session that is one of a stream's several connections (`--streams N`, wire version 5):
//! its Data frames are not the next bytes of the stream but wherever the sender's dispatcher
//! put them, each at the offset its trailer says. The sending side seals a frame at any
//! offset ([`Channel::seek`]); the receiving side opens frames one at a time and says where
//! each goes ([`Channel::next_scattered`]), for the link to put them in order. The End, the
//! confirmations and the Ack are the same frames as on a single connection; the Delivered
//! frames carry the receiver's [`Credit`] ([`Channel::deliver_granting`],
//! [`Channel::credit`]).

use std::io;
use std::time::Instant;

use super::{Channel, Frame, unexpected};
use crate::net::wire::{Credit, Join, Kind};

/// What came on one of several connections, in the order it came.
#[derive(Debug, PartialEq, Eq)]
pub enum Scattered {
    /// `len` stream bytes at stream offset `at`, at the start of the buffer given.
    Data { at: u64, len: usize },
    /// The sender's End: the stream is this long.
    End(u64),
    /// The sender's heartbeat, which asks for a confirmation.
    Heartbeat,
    /// The sender closed the connection.
    Closed,
}

impl Channel {
    /// Makes this session one of several connections of its stream, as `join` says: its
    /// Data frames may come at any offset.
    pub fn join(&mut self, join: Join) {
        self.join = Some(join);
    }

    /// Which of several connections this session is, and the receiver's terms; `None` for
    /// a stream's only connection.
    pub fn joined(&self) -> Option<Join> {
        self.join
    }

    /// The next frame goes at stream offset `at` (sending side, one of several connections).
    pub fn seek(&mut self, at: u64) {
        self.offset = at;
    }

    /// The next frame that has arrived, without waiting (receiving side, one of several
    /// connections): Data lands at the start of `buf`, which holds a whole frame's payload.
    /// `None` when nothing more has arrived.
    pub fn next_scattered(&mut self, buf: &mut [u8]) -> io::Result<Option<Scattered>> {
        loop {
            match self.open_next(buf)? {
                Some(Frame::Data(len)) => {
                    let at = self.offset - len as u64;
                    if !self.pending.is_empty() {
                        // A compressed frame opens into the scratch buffer.
                        buf[..len].copy_from_slice(&self.scratch[self.pending.clone()]);
                        self.pending = 0..0;
                    }
                    return Ok(Some(Scattered::Data { at, len }));
                }
                Some(Frame::End(total)) => return Ok(Some(Scattered::End(total))),
                Some(Frame::Heartbeat) => return Ok(Some(Scattered::Heartbeat)),
                Some(Frame::Abort(why)) => {
                    return Err(io::Error::other(format!(
                        "the sender stopped: {}",
                        crate::words::printable(&why)
                    )));
                }
                Some(other) => return Err(unexpected(&other)),
                None => {}
            }
            match self.read_sealed_now()? {
                Some(0) => return Ok(Some(Scattered::Closed)),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Tells the sender that the outputs have taken `count` bytes, and gives it `credit`
    /// (receiving side, one of several connections), when that can be written at once
    /// (`true`): a later count says as much.
    pub fn deliver_granting(&mut self, count: u64, credit: Credit) -> io::Result<bool> {
        if self.broken || !self.socket.writable_now() {
            return Ok(false);
        }
        self.seal(Kind::Delivered, count, &credit.encode());
        self.flush_regardless().map(|()| true)
    }

    /// Confirms the end of a stream of `total` bytes with the Ack (receiving side, one of
    /// several connections), once the outputs have taken every byte; then the sender's close
    /// is its word that it has the Ack ([`Channel::closed_now`]).
    pub fn acknowledge_at(&mut self, total: u64) -> io::Result<()> {
        self.offset = total;
        self.seal(Kind::Ack, total, &[]);
        self.last_heard = Instant::now();
        self.flush_regardless()
    }
}
