//! The receiving side over several connections: each connection's thread opens its frames
//! into the reorder map, wherever they belong; the input reads the map out in offset order;
//! the confirmations go on every connection, and after the run the Ack, until the sender
//! has closed them all.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use rustix::event::PollFlags;

use super::{LOOK_AGAIN, Several};
use crate::backlog::{Buffer, Owned};
use crate::net::channel::MOST_UNITS;
use crate::net::channel::Scattered;
use crate::net::link::Link;
use crate::net::wire::MAX_PAYLOAD;
use crate::stop::{Stop, wait_for};
use crate::words::byte_count;

impl Link {
    /// The input's read over several connections, moved: the next frames in offset order,
    /// in the buffers they were opened into (no copy), as many as have come and fit `most`
    /// bytes, appended to `into`; how many bytes (0 at the end of the stream), waited for
    /// until the run's `stop`. A first frame longer than `most` has its start copied into
    /// a buffer of its own, the rest left in the map. Bytes that came are handed out
    /// before a failure is said.
    pub(in crate::net::link) fn take_several(
        &self,
        several: &Several,
        most: usize,
        into: &mut Vec<Owned>,
        stop: &Stop,
    ) -> io::Result<usize> {
        let mut state = several.lock();
        loop {
            let mut got = 0;
            while got < most {
                let next = state.next;
                let Some(early) = state.early.first_entry().filter(|e| *e.key() == next) else {
                    break;
                };
                let len = early.get().len();
                let n = len.min(most - got);
                if n < len && got > 0 {
                    break;
                }
                let piece = if n == len {
                    early.remove()
                } else {
                    // The start only, copied (a read smaller than a frame: an input rate
                    // limit's); the rest at its own offset.
                    let mut rest = early.remove();
                    let start = Owned::new(Buffer::copied(&rest.as_slice()[..n]), 0..n);
                    rest.advance(n);
                    state.early.insert(next + n as u64, rest);
                    start
                };
                got += n;
                state.next += n as u64;
                state.held -= n as u64;
                into.push(piece);
            }
            if let (true, Some((meter, _))) = (got > 0, self.meter.get()) {
                meter.reordered(state.held);
            }
            if got > 0 {
                return Ok(got);
            }
            if state.end == Some(state.next) {
                return Ok(0);
            }
            if let Some(error) = state.failure() {
                return Err(error);
            }
            stop.check()?;
            state = several.wait(state);
        }
    }

    /// The input's read over several connections into `buf`: the next bytes in offset
    /// order, as [`take_several`](Link::take_several) moves them, copied (without the
    /// lock, which the connections' threads want for every frame they open).
    pub(in crate::net::link) fn read_several(
        &self,
        several: &Several,
        buf: &mut [u8],
        stop: &Stop,
    ) -> io::Result<usize> {
        let mut pieces = Vec::new();
        let got = self.take_several(several, buf.len(), &mut pieces, stop)?;
        let mut at = 0;
        for piece in &pieces {
            buf[at..at + piece.len()].copy_from_slice(piece.as_slice());
            at += piece.len();
        }
        Ok(got)
    }

    /// Tells the sender, on every connection, that the outputs have taken `count` bytes
    /// (also the receiver's heartbeat), with the credit that follows: whether any
    /// connection took it at once.
    pub(in crate::net::link) fn deliver_several(
        &self,
        several: &Several,
        count: u64,
    ) -> io::Result<bool> {
        let credit = several.credit(count);
        let mut told = false;
        for index in 0..several.connections.len() {
            // A connection that dropped says nothing until it is back.
            told |= several.channel(index).deliver_granting(count, credit).unwrap_or(false);
        }
        if told {
            self.told.store(count, Relaxed);
            several.lock().granted = Some(credit);
        }
        Ok(told)
    }

    /// Whether the credit, the outputs having taken `count` bytes, has grown since it was
    /// last told: the input took more in, or the outputs more out.
    pub(in crate::net::link) fn more_credit_several(&self, several: &Several, count: u64) -> bool {
        let credit = several.credit(count);
        several.lock().granted != Some(credit)
    }

    /// Whether some connection has said nothing for a heartbeat.
    pub(in crate::net::link) fn quiet_several(&self, several: &Several) -> bool {
        (0..several.connections.len())
            .any(|index| several.channel(index).quiet_for() >= self.resume.heartbeat)
    }

    /// The receiver's last word over several connections, once its outputs took every
    /// byte: the Ack on every connection, then the sender's close of each, which says it
    /// has the Ack; until the run's `stop`.
    pub(in crate::net::link) fn acknowledge_several(
        &self,
        several: &Several,
        stop: &Stop,
    ) -> io::Result<()> {
        let mut state = several.lock();
        let Some(total) = state.end.filter(|&total| total == state.next) else {
            return Err(io::Error::other("the stream has not ended"));
        };
        state.ack_said = true;
        drop(state);
        for index in 0..several.connections.len() {
            // A connection that dropped hears it once it is back (Link::back).
            let _ = several.channel(index).acknowledge_at(total);
        }
        self.publish_streams(several, None, true);
        // The sender closes its connections once it has an Ack on one: one close says it
        // has it (a connection that passes nothing may never say so).
        let mut state = several.lock();
        while state.closed == 0 && state.gone < several.connections.len() {
            if let Some(error) = state.failure() {
                return Err(error);
            }
            stop.check()?;
            state = several.wait(state);
        }
        state.over = true;
        Ok(())
    }

    /// Connection `index`'s thread (receiving side): its frames into the reorder map, its
    /// End, its heartbeats; a failure stops the stream.
    pub(in crate::net::link) fn receive_on(&self, index: usize) {
        let several = self.several.get().expect("established");
        loop {
            let generation = several.lock().generations[index];
            let Err(error) = self.receiving_on(several, index) else { return };
            let over = several.stop.requested() || several.lock().over;
            if over || !self.await_rejoin(several, index, generation, &error) {
                return;
            }
        }
    }

    fn receiving_on(&self, several: &Several, index: usize) -> io::Result<()> {
        let mut buf = several.frames.take();
        let mut ended = false;
        // The frames opened since one the input waits for came, not yet told: the input is
        // woken once for a batch of frames, not for each (a wakeup a frame cost a receiver
        // a fifth of its CPU), and within MOST_UNITS frames of the one it waits for.
        let mut untold: Option<usize> = None;
        loop {
            let (socket, silent_at) = {
                let mut channel = several.channel(index);
                while let Some(scattered) = channel.next_scattered(&mut buf)? {
                    match scattered {
                        Scattered::Data { at, len } => {
                            let waited_for = self.take_frame(several, index, at, &mut buf, len)?;
                            untold = untold.map(|n| n + 1).or(waited_for.then_some(0));
                            if untold.is_some_and(|n| n >= MOST_UNITS) {
                                several.changed.notify_all();
                                untold = None;
                            }
                        }
                        Scattered::End(total) => {
                            ended = true;
                            self.take_end(several, total)?;
                        }
                        Scattered::Heartbeat => {
                            if let Some(confirmer) = self.confirmer.get() {
                                // The word must reach every byte that came before the ask,
                                // on this connection or the others.
                                let upto = several.received_upto();
                                let mut asked =
                                    self.asked.lock().unwrap_or_else(PoisonError::into_inner);
                                *asked = Some(asked.map_or(upto, |before| before.max(upto)));
                                confirmer.unpark();
                            }
                        }
                        Scattered::Closed => {
                            return self.closed_on(several, channel.socket().peer());
                        }
                    }
                }
                if untold.take().is_some() {
                    several.changed.notify_all();
                }
                let came = channel.take_wire();
                if came.frames > 0 {
                    self.publish_streams(several, Some((index, came)), false);
                }
                (Arc::clone(channel.socket()), channel.silent_at())
            };
            // After its End, a sender says nothing until the Ack, which waits for the
            // outputs: its silence then is no drop.
            let silent_at = silent_at.filter(|_| !ended);
            let until = Instant::now() + LOOK_AGAIN;
            match wait_for(socket.fd(), PollFlags::IN, &several.stop, Some(until)) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    if silent_at.is_some_and(|at| at <= Instant::now()) {
                        return Err(several.channel(index).silence_error("the sender"));
                    }
                }
                waited => waited?,
            }
            if several.stop.requested() || several.lock().failed.is_some() {
                return Ok(());
            }
        }
    }

    /// A frame of `len` bytes at stream offset `at` came on connection `index`, at the start
    /// of `frame` (a whole frame's buffer): into the reorder map, unless it came before (a
    /// frame that comes twice is taken once). A frame of half a buffer or more goes in as
    /// it is, `frame` a spare buffer in its place; a smaller one, or the part of one not
    /// yet handed out, is copied, so that the map (and the backlog it goes on into) holds
    /// no more memory than twice its bytes.
    /// Whether it is the one the input waits for (the thread that took it wakes the input:
    /// a frame further on lets the input on only once that one came).
    fn take_frame(
        &self,
        several: &Several,
        index: usize,
        at: u64,
        frame: &mut Buffer,
        len: usize,
    ) -> io::Result<bool> {
        let bytes = &frame[..len];
        several.connections[index].bytes.fetch_add(bytes.len() as u64, Relaxed);
        let mut state = several.lock();
        let end = at + bytes.len() as u64;
        if let Some(total) = state.end.filter(|&total| end > total) {
            return Err(io::Error::other(format!(
                "the sender ended the stream at {}, but a frame reaches {}",
                byte_count(total),
                byte_count(end)
            )));
        }
        if end <= state.next || bytes.is_empty() {
            return Ok(false);
        }
        // Only the part not yet handed out.
        let skip = state.next.saturating_sub(at);
        let at = at + skip;
        if state.early.contains_key(&at) {
            return Ok(false);
        }
        let bytes = &bytes[usize::try_from(skip).unwrap_or(usize::MAX)..];
        state.held += bytes.len() as u64;
        if let Some((meter, _)) = self.meter.get() {
            meter.reordered(state.held);
        }
        let piece = if skip == 0 && 2 * len >= MAX_PAYLOAD {
            // Not cut to `len`: as a spare, it need not be zeroed again to a frame's length.
            Owned::new(std::mem::replace(frame, several.frames.take()), 0..len)
        } else {
            Owned::new(Buffer::copied(bytes), 0..bytes.len())
        };
        state.early.insert(at, piece);
        let waited_for = at == state.next;
        drop(state);
        self.publish_streams(several, None, false);
        Ok(waited_for)
    }

    /// The sender's End came: the stream is `total` bytes long (every connection says the
    /// same).
    fn take_end(&self, several: &Several, total: u64) -> io::Result<()> {
        let mut state = several.lock();
        let beyond =
            state.early.last_key_value().map_or(state.next, |(at, piece)| at + piece.len() as u64);
        if state.end.is_some_and(|end| end != total) || beyond > total {
            return Err(io::Error::other(format!(
                "the sender ended the stream at {}, but {} arrived",
                byte_count(total),
                byte_count(beyond)
            )));
        }
        state.end = Some(total);
        several.changed.notify_all();
        Ok(())
    }

    /// The sender closed a connection: after the Ack, its word that it has it; before, the
    /// stream was cut.
    fn closed_on(&self, several: &Several, peer: std::net::SocketAddr) -> io::Result<()> {
        let mut state = several.lock();
        if !state.ack_said {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the connection from {peer} ended before the sender's end-of-stream mark"),
            ));
        }
        state.closed += 1;
        several.changed.notify_all();
        Ok(())
    }
}
