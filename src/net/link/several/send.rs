//! The sending side over several connections: the output's writes queued as units in the
//! dispatcher, within the receiver's window; each connection's thread takes the next unit
//! when it can send, hears the receiver's confirmations, says it is there, and at the end
//! sends the End and waits for the Ack on its connection.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use super::{Several, State, Unit, UnitBytes, keep_spare};
use crate::backlog::Lent;
use crate::net::channel::MOST_UNITS;
use crate::net::closed_by_peer;
use crate::net::compress::{Compressor, MOST_PACKED};
use crate::net::link::Link;
use crate::net::wire::Credit;
use crate::net::wire::MAX_PAYLOAD;
use crate::stop::{Stop, wait_for};

/// How long a connection's thread waits on its socket, while the window is full, before it
/// looks again: the count that opens the window may come on another connection first, and
/// the thread that waits here is woken only by its own.
const PRESSED: Duration = Duration::from_millis(2);

/// How often, at most, a sender pressed by the window asks for the receiver's count.
const ASK_EVERY: Duration = Duration::from_millis(5);

impl Link {
    /// An output's write over several connections: up to a batch of units' worth of `buf`
    /// ([`MOST_UNITS`] frames), into the dispatcher once the receiver's window has room for
    /// it, until the run's `stop`: the bytes `lent` by the backlog where they are (`buf` is
    /// their slice), or a copy. Either lets any connection send them, and send them again.
    /// Several units queued at once wake the connections' threads once, and let each take a
    /// batch of them, where a unit a write woke them for each frame and had them write a
    /// frame at a time.
    pub(in crate::net::link) fn write_several(
        &self,
        several: &Several,
        buf: &[u8],
        lent: Option<&Lent>,
        stop: &Stop,
    ) -> io::Result<usize> {
        let mut state = several.lock();
        let room = loop {
            if let Some(error) = state.failure() {
                return Err(error);
            }
            stop.check()?;
            // The receiver's credit: a window beyond what its input took in, and its -m
            // beyond what its outputs took.
            if state.queued < state.limit {
                break state.limit - state.queued;
            }
            state = several.wait(state);
        };
        let at = state.queued;
        let most = buf.len().min(MOST_UNITS * MOST_PACKED);
        let len = most.min(usize::try_from(room).unwrap_or(usize::MAX));
        if let Some(lent) = lent {
            // Lent: each unit holds its part of the backlog's bytes (sealing them from there
            // saves a copy of every byte, a seventh of a sender's CPU).
            let units = (0..len).step_by(MOST_PACKED).map(|from| {
                let piece = lent.cut(from..len.min(from + MOST_PACKED));
                (at + from as u64, UnitBytes::Lent(piece))
            });
            queue_units(several, &mut state, units, at + len as u64);
            return Ok(len);
        }
        // Each unit is one frame whether or not its connection compresses it (zstd's room
        // left: MOST_PACKED), so that a batch of units fits the outgoing buffer. A unit of
        // half a frame or more in a spare buffer (no allocation, nor a page faulted in, per
        // unit); a smaller one in one of its size, so that the dispatcher holds no more
        // memory than twice its bytes.
        let mut buffers: Vec<Vec<u8>> = buf[..len]
            .chunks(MOST_PACKED)
            .map(|piece| match 2 * piece.len() >= MAX_PAYLOAD {
                // A new one at a whole frame's capacity, so that it is kept as a spare after.
                true => state.spare.pop().unwrap_or_else(|| Vec::with_capacity(MAX_PAYLOAD)),
                false => Vec::new(),
            })
            .collect();
        drop(state);
        for (bytes, piece) in buffers.iter_mut().zip(buf[..len].chunks(MOST_PACKED)) {
            bytes.clear();
            bytes.extend_from_slice(piece);
        }
        let mut state = several.lock();
        let units = buffers.into_iter().scan(at, |unit_at, bytes| {
            let this = *unit_at;
            *unit_at += bytes.len() as u64;
            Some((this, UnitBytes::Copied(Arc::new(bytes))))
        });
        queue_units(several, &mut state, units, at + len as u64);
        Ok(len)
    }

    /// An output's end over several connections, once it has written every byte: each
    /// connection's thread sends the End once every unit was written, and waits for the
    /// Ack; then every connection is closed, which the receiver waits for.
    pub(in crate::net::link) fn end_several(
        &self,
        several: &Several,
        stop: &Stop,
    ) -> io::Result<()> {
        let mut state = several.lock();
        if state.total.is_none() {
            state.total = Some(state.queued);
            several.changed.notify_all();
        }
        // One Ack says it all: the receiver's outputs took every byte. A connection that
        // passes nothing need not hold the end up.
        while state.acked == 0 {
            if let Some(error) = state.failure() {
                return Err(error);
            }
            stop.check()?;
            state = several.wait(state);
            // The connections' threads wait for their Acks: the look for a frozen one is
            // this thread's now.
            drop(state);
            self.unfreeze(several);
            state = several.lock();
        }
        state.over = true;
        drop(state);
        several.shut_down();
        self.publish_streams(several, None, true);
        self.lock().over = true;
        Ok(())
    }

    /// Connection `index`'s thread (sending side): its units, then its End; when it drops,
    /// its units go to the others while it connects again ([`Link::rejoin`]); a failure
    /// that is no drop stops the stream.
    pub(in crate::net::link) fn send_on(&self, index: usize) {
        let several = self.several.get().expect("established");
        let setting = self.compress_setting();
        let mut compressor = Compressor::new(setting, None);
        loop {
            let error = match self.sending_on(several, index, &mut compressor) {
                Ok(()) => {
                    return self.publish_streams(several, Some((index, compressor.wire())), true);
                }
                Err(error) => closed_by_peer(error, "the receiver"),
            };
            let over = several.stop.requested() || several.lock().over;
            if over || !self.rejoin(several, index, &error) {
                return;
            }
        }
    }

    fn sending_on(
        &self,
        several: &Several,
        index: usize,
        compressor: &mut Compressor,
    ) -> io::Result<()> {
        let stop = &several.stop;
        // A connection's share of the window: a path that takes less (a flow capped, a
        // longer queue) must not hold much of the window in its socket's buffer, where the
        // receiver waits for it while the others could send.
        let share = (several.window / several.connections.len() as u64).max(2 * MAX_PAYLOAD as u64);
        loop {
            let mut state = several.lock();
            let units = loop {
                if state.failed.is_some() || stop.requested() {
                    return Ok(());
                }
                let room = state.out[index] < share;
                let units = take_units(&mut state, index, several.connections.len(), share);
                if !units.is_empty() {
                    break Some(units);
                }
                if state.queue.is_empty() && state.total.is_some() && state.writing == 0 {
                    break None;
                }
                // Full: the window, or this connection's share of it, with units waiting.
                let window_full = state.queued >= state.limit || !room && !state.queue.is_empty();
                if window_full {
                    // What frees the window comes on the socket: wait there.
                    drop(state);
                    let socket = several.socket(index);
                    let until = Instant::now() + PRESSED;
                    if let Err(error) = wait_for(socket.fd(), PollFlags::IN, stop, Some(until)) {
                        if error.kind() == io::ErrorKind::Interrupted {
                            return Ok(());
                        }
                    }
                } else {
                    state = several.wait(state);
                    drop(state);
                }
                self.tend_stream(several, index, window_full)?;
                state = several.lock();
            };
            drop(state);
            let Some(units) = units else { return self.end_on(several, index) };
            let sent = send_units(several, index, &units, compressor);
            let (taken, bytes) =
                (units.len(), units.iter().map(|(_, bytes)| bytes.len()).sum::<usize>());
            // Let go at once: lent bytes, once nothing holds them, are the backlog's again.
            drop(units);
            // Written or not, they are no longer being written: the units of a connection
            // that dropped go back to the queue (Link::rejoin).
            several.lock().writing -= taken;
            several.changed.notify_all();
            let (confirmed, credit) = sent?;
            let connection = &several.connections[index];
            connection.bytes.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
            self.confirm_several(several, confirmed, credit, false);
            self.publish_streams(several, Some((index, compressor.wire())), false);
            if to_ask(several) {
                several.channel(index).ask(stop)?;
            }
        }
    }

    /// Connection `index`'s round while it has nothing to send: the receiver's confirmations
    /// taken in, its silence noticed, a heartbeat when this side said nothing for one, a
    /// frozen connection cut ([`Link::unfreeze`]); and, when the window is full, the
    /// receiver asked for its count.
    fn tend_stream(&self, several: &Several, index: usize, window_full: bool) -> io::Result<()> {
        self.unfreeze(several);
        let mut channel = several.channel(index);
        channel.take_confirmations_now()?;
        if channel.silent_at().is_some_and(|at| at <= Instant::now()) {
            return Err(channel.silence_error("the receiver"));
        }
        if window_full && to_ask(several) {
            channel.ask(&several.stop)?;
        } else if channel.quiet_for() >= self.resume.heartbeat {
            channel.heartbeat()?;
        }
        let (confirmed, credit) = (channel.confirmed(), channel.credit());
        drop(channel);
        self.confirm_several(several, confirmed, credit, false);
        Ok(())
    }

    /// Connection `index`'s end: the End frame with the stream's length, then the Ack.
    fn end_on(&self, several: &Several, index: usize) -> io::Result<()> {
        let total = several.lock().total.expect("ended");
        {
            let mut channel = several.channel(index);
            channel.seek(total);
            // The End's wait hears Delivered counts only: the credit no longer matters.
            let mut heard =
                |confirmed, awaiting| self.confirm_several(several, confirmed, None, awaiting);
            channel.end_stream(&several.stop, &mut heard)?;
        }
        let mut state = several.lock();
        state.acked += 1;
        several.changed.notify_all();
        Ok(())
    }

    /// The receiver confirmed its outputs took `confirmed` bytes, and gave `credit` (as one
    /// connection heard): the units its input took in go (a dropped connection's need not
    /// go again: the receiver has them), the window opens, and the count is published (the
    /// backlog keeps every byte until the outputs took it); `awaiting`, the Ack. A receiver
    /// that gives no credit opens the window from what its outputs took.
    fn confirm_several(
        &self,
        several: &Several,
        confirmed: u64,
        credit: Option<Credit>,
        awaiting: bool,
    ) {
        let mut state = several.lock();
        let credit = credit.unwrap_or_default();
        let received = confirmed.max(credit.received);
        let limit = state.limit.max(credit.limit).max(confirmed + several.window);
        let opened = limit > state.limit || received > state.received;
        state.confirmed = state.confirmed.max(confirmed);
        state.limit = limit;
        if received > state.received {
            state.received = received;
            state.received_since = Some(Instant::now());
            while let Some(unit) = state.units.first_entry() {
                if *unit.key() + unit.get().bytes.len() as u64 > received {
                    break;
                }
                let unit = unit.remove();
                if let Some(on) = unit.on {
                    state.out[on] -= unit.bytes.len() as u64;
                }
                // Its buffer for another, unless a connection's thread still sends it (lent
                // bytes go back to the backlog once nothing holds them).
                if let UnitBytes::Copied(bytes) = unit.bytes {
                    if let Ok(bytes) = Arc::try_unwrap(bytes) {
                        let most = several.spares(state.units.len());
                        keep_spare(&mut state.spare, bytes, most);
                    }
                }
            }
        }
        if opened {
            several.changed.notify_all();
        }
        let confirmed = state.confirmed;
        drop(state);
        self.heard(confirmed, awaiting);
    }
}

/// Queues `units` (each at its stream offset) in the dispatcher, which then holds the stream
/// up to `queued`, and wakes the connections' threads.
fn queue_units(
    several: &Several,
    state: &mut State,
    units: impl Iterator<Item = (u64, UnitBytes)>,
    queued: u64,
) {
    for (at, bytes) in units {
        state.units.insert(at, Unit { bytes, on: None, taken: None });
        state.queue.push_back(at);
    }
    state.queued = queued;
    several.changed.notify_all();
}

/// The units connection `index` of `connections` takes from the front of the queue, in one
/// batch: as many as its share of the window has room for (`out` below `share` before
/// each), at most [`MOST_UNITS`], and no more than its part of the queue, so that the last
/// units of a stream do not wait on one slow path (a MiB at a time on a flow capped at
/// 50 Mbit/s cost 4 connections a twentieth of their rate); each marked as its, and
/// counted as being written.
fn take_units(
    state: &mut State,
    index: usize,
    connections: usize,
    share: u64,
) -> Vec<(u64, UnitBytes)> {
    let most = MOST_UNITS.min(state.queue.len() / connections).max(1);
    let mut units = Vec::new();
    while units.len() < most && state.out[index] < share {
        let Some(at) = state.queue.pop_front() else { break };
        // A unit taken in meanwhile (sent again elsewhere) is gone.
        let Some(unit) = state.units.get_mut(&at) else { continue };
        unit.on = Some(index);
        unit.taken = Some(Instant::now());
        let bytes = unit.bytes.clone();
        state.out[index] += bytes.len() as u64;
        state.writing += 1;
        units.push((at, bytes));
    }
    units
}

/// Sends `units` (each its stream offset and bytes) on connection `index`, in one batch,
/// each frame as `compressor` packs it: what the receiver confirmed, and its credit, as
/// far as this connection heard.
fn send_units(
    several: &Several,
    index: usize,
    units: &[(u64, UnitBytes)],
    compressor: &mut Compressor,
) -> io::Result<(u64, Option<Credit>)> {
    let units: Vec<(u64, &[u8])> =
        units.iter().map(|(at, bytes)| (*at, bytes.as_slice())).collect();
    let mut channel = several.channel(index);
    channel.send_units(&units, &several.stop, compressor)?;
    Ok((channel.confirmed(), channel.credit()))
}

/// Whether to ask the receiver for its count now: while less than three quarters of the
/// window is left of its credit, every [`ASK_EVERY`] (whichever connection finds it so
/// first). The receiver
/// confirms every millisecond for a while after each ask, instead of every 50 ms: one ask
/// per count would have it confirm once, before the bytes in flight arrive, then wait 50 ms,
/// which holds a fast stream to a window per 50 ms.
fn to_ask(several: &Several) -> bool {
    let mut state = several.lock();
    let pressing = state.limit.saturating_sub(state.queued) <= several.window / 4 * 3;
    if !pressing || state.asked_at.is_some_and(|at| at.elapsed() < ASK_EVERY) {
        return false;
    }
    state.asked_at = Some(Instant::now());
    true
}
