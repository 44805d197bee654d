//! The receiving side of a session: the stream's bytes opened and handed out, the End
//! checked, and the confirmations said back (Delivered counts, the Ack, the Resume frame of a
//! session that takes over from a dropped one).

use std::io;
use std::time::Instant;

use super::{Channel, Frame, unexpected};
use crate::meter::Wire;
use crate::net::wire::{Hello, Kind};
use crate::stop::Stop;
use crate::words::byte_count;

/// What a session's receiving side keeps, beside the offset of the next byte to receive and
/// the plaintext not yet handed out.
#[derive(Debug, Default)]
pub(super) struct Receiving {
    /// The End frame came.
    ended: bool,
    /// The sender's Hello goes on with its stream (a reconnection), so the sender waits for
    /// a Resume frame.
    goes_on: bool,
    /// The sender's heartbeat came, which also asks for a confirmation: of the stream bytes
    /// that came before it (its offset), every one the sender sent before it asked.
    asked: Option<u64>,
    /// A failure (a frame that did not decompress, the sender's Abort...) that came after
    /// stream bytes in the same read: those bytes are the stream's and go out first, and
    /// the failure with the next read.
    failed: Option<io::Error>,
    /// The Data frames opened since [`Channel::take_wire`]: what they took on the wire
    /// (sealed and framed, as the sender counts them) and the stream bytes they carried.
    wire: Wire,
}

impl Channel {
    /// Whether the sender asked for a confirmation since the last call (receiving side):
    /// the stream offset its word must reach, the bytes that came before its ask.
    pub fn take_asked(&mut self) -> Option<u64> {
        self.receiving.asked.take()
    }

    /// Takes the sender's Hello (receiving side): the stream, and whether it goes on.
    pub fn opened_by(&mut self, hello: &Hello) {
        self.stream = hello.stream;
        self.receiving.goes_on = hello.resuming;
    }

    /// Whether the sender goes on with its stream, and waits for a Resume frame (receiving
    /// side).
    pub fn goes_on(&self) -> bool {
        self.receiving.goes_on
    }

    /// Stream bytes handed out so far (receiving side): what a resumed stream goes on from.
    pub fn handed_out(&self) -> u64 {
        self.offset - self.pending.len() as u64
    }

    /// The Data frames opened since the last call (receiving side): the stream bytes they
    /// carried, the bytes they took on the wire, how many came compressed or as they were.
    pub fn take_wire(&mut self) -> Wire {
        std::mem::take(&mut self.receiving.wire)
    }

    /// A Data frame was opened: `stream` bytes of the stream, from `framed` bytes on the wire.
    pub(super) fn came_off_the_wire(&mut self, stream: usize, framed: usize, compressed: bool) {
        let wire = &mut self.receiving.wire;
        wire.stream += stream as u64;
        wire.bytes += framed as u64;
        wire.frames += 1;
        wire.stored += u64::from(!compressed);
        wire.compressing |= compressed;
    }

    /// Whether the End frame came (receiving side).
    pub fn ended(&self) -> bool {
        self.receiving.ended
    }

    /// Takes over from the session before it (receiving side): the stream goes on at `offset`,
    /// and has ended if it had; says so to the sender with a Resume frame.
    pub fn resume_from(&mut self, offset: u64, ended: bool) -> io::Result<()> {
        self.offset = offset;
        self.receiving.ended = ended;
        self.seal(Kind::Resume, offset, &[]);
        self.flush_regardless()
    }

    /// Tells the sender that the outputs have taken `count` bytes (receiving side), when
    /// that can be written at once (`true`): a later count says as much.
    pub fn deliver(&mut self, count: u64) -> io::Result<bool> {
        if self.broken || !self.socket.writable_now() {
            return Ok(false);
        }
        self.seal(Kind::Delivered, count, &[]);
        self.flush_regardless().map(|()| true)
    }

    /// Confirms the end of the stream with the Ack (receiving side), once the outputs have
    /// taken every byte: only after the End frame came.
    pub fn acknowledge_end(&mut self) -> io::Result<()> {
        if !self.receiving.ended {
            return Err(io::Error::other("the stream has not ended"));
        }
        self.seal(Kind::Ack, self.offset, &[]);
        // The sender answers the Ack by closing the connection: its silence counts from here,
        // not from the End, which the outputs may have taken long to write (--sync).
        self.last_heard = Instant::now();
        self.flush_regardless()
    }

    /// After the Ack (receiving side): whether the sender has closed the connection, which
    /// says it has the Ack, as far as has arrived (heartbeats may come before, and in a
    /// session that took a dropped one over, the End said again); without waiting. An error
    /// when the connection failed.
    pub fn closed_now(&mut self) -> io::Result<bool> {
        loop {
            while let Some(frame) = self.open_next(&mut [])? {
                match frame {
                    Frame::Heartbeat => {}
                    Frame::End(count) => self.end_at(count)?,
                    other => return Err(unexpected(&other)),
                }
            }
            match self.read_sealed_now()? {
                Some(0) => return Ok(true),
                Some(_) => {}
                None => return Ok(false),
            }
        }
    }

    /// Receives stream bytes into `buf` (at least one; 0 once the End frame has come).
    pub fn receive(&mut self, buf: &mut [u8], stop: &Stop) -> io::Result<usize> {
        self.receive_until(buf, stop, None)
    }

    /// As [`receive`](Channel::receive), waiting for the socket until `deadline` at most
    /// (then a `TimedOut` error, with nothing taken).
    pub fn receive_until(
        &mut self,
        buf: &mut [u8],
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> io::Result<usize> {
        if let Some(failed) = self.receiving.failed.take() {
            return Err(failed);
        }
        loop {
            let mut got = self.hand_out(buf);
            if let Err(failed) = self.open_frames(buf, &mut got) {
                if got == 0 {
                    return Err(failed);
                }
                self.receiving.failed = Some(failed);
                return Ok(got);
            }
            if got > 0 || self.receiving.ended {
                return Ok(got);
            }
            if self.read_sealed(stop, deadline)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the connection from {} ended before the sender's end-of-stream mark",
                        self.socket.peer()
                    ),
                ));
            }
        }
    }

    /// Opens the frames that have arrived, their stream bytes into `buf` after the `got`
    /// there (counted in), until `buf` is full, plaintext is left over, the stream ended, or
    /// the next message no longer fits what is left of `buf` once some bytes are in hand: it
    /// would be opened into the scratch buffer and copied out again, which, with a buffer
    /// that is not a whole number of messages, copied a fifth of a stream once more. It
    /// waits for the next call, and its buffer.
    fn open_frames(&mut self, buf: &mut [u8], got: &mut usize) -> io::Result<()> {
        while *got < buf.len() && self.pending.is_empty() && !self.receiving.ended {
            if *got > 0 && self.next_message().is_some_and(|len| len > buf.len() - *got) {
                break;
            }
            match self.open_next(&mut buf[*got..])? {
                None => break,
                Some(Frame::Data(len)) if self.pending.is_empty() => *got += len,
                Some(Frame::Data(_)) => *got += self.hand_out(&mut buf[*got..]),
                Some(Frame::End(count)) => self.end_at(count)?,
                Some(Frame::Heartbeat) => self.receiving.asked = Some(self.offset),
                Some(Frame::Abort(why)) => {
                    // The sender's words, on our terminal: no escape sequence gets through.
                    return Err(io::Error::other(format!(
                        "the sender stopped after {}: {}",
                        byte_count(self.offset),
                        crate::words::printable(&why)
                    )));
                }
                Some(other) => return Err(unexpected(&other)),
            }
        }
        Ok(())
    }

    /// The length of the next sealed message, once its length has arrived.
    fn next_message(&self) -> Option<usize> {
        let unread = &self.incoming[self.unread.clone()];
        unread.get(..2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    /// The End frame came: checks its count. The Ack waits until the outputs have taken it
    /// all ([`acknowledge_end`](Channel::acknowledge_end)).
    fn end_at(&mut self, count: u64) -> io::Result<()> {
        if count != self.offset {
            return Err(io::Error::other(format!(
                "the sender ended the stream at {}, but {} arrived",
                byte_count(count),
                byte_count(self.offset)
            )));
        }
        self.receiving.ended = true;
        Ok(())
    }

    /// Copies pending plaintext into `buf`; returns how much.
    fn hand_out(&mut self, buf: &mut [u8]) -> usize {
        let n = self.pending.len().min(buf.len());
        if n == 0 {
            return 0;
        }
        buf[..n].copy_from_slice(&self.scratch[self.pending.start..self.pending.start + n]);
        self.pending.start += n;
        n
    }
}
