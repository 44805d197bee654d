//! A dropped connection of several: its units go back to the queue for the others, and it
//! comes back in the background. The sender dials it again, naming the stream and the
//! connection's place, with the pauses of a single connection's reconnection; the receiver
//! waits for it, and a thread of its own takes back, through one lobby, each connection
//! that proves the key and names the stream and a place among them. A connection not back
//! within `--reconnect-for` is given up; the stream fails when none is left.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::Several;
use crate::net::channel::Channel;
use crate::net::dial::{Missed, Pauses};
use crate::net::handshake::{Lobby, Terms};
use crate::net::is_drop;
use crate::net::link::{Link, Reconnect, Role};
use crate::net::wire::{Hello, Join};
use crate::words::{byte_count, describe, duration};

/// The pause after the listening side failed to accept: no spin.
const LISTEN_AGAIN: Duration = Duration::from_secs(1);

impl Link {
    /// Connection `index` dropped for `error` (sending side): its units not taken in go
    /// back to the front of the queue, for the other connections, and it connects again
    /// until `--reconnect-for` is over. `true` once it is back; `false` when it is given up
    /// (or the stream failed, or the run is over).
    pub(in crate::net::link) fn rejoin(
        &self,
        several: &Several,
        index: usize,
        error: &io::Error,
    ) -> bool {
        let Some(Reconnect::Dial(dialer)) = &several.reconnect else {
            several.fail(error);
            return false;
        };
        if !is_drop(error) {
            several.fail(error);
            return false;
        }
        several.channel(index).abandon();
        let resent = requeue(several, index);
        self.publish_streams(several, None, true);
        let n = several.connections.len();
        self.log.warn(format_args!(
            "{}: connection {} of {n} dropped ({}); {} go on the others; connecting it again \
             for up to {}",
            self.name,
            index + 1,
            describe(error),
            byte_count(resent),
            duration(self.resume.within)
        ));
        let since = Instant::now();
        let deadline = since + self.resume.within;
        let mut pauses = Pauses::after(since);
        let mut tries = 0;
        loop {
            let pause = pauses.due().min(deadline).saturating_duration_since(Instant::now());
            if several.stop.sleep(pause).is_err() || several.lock().failed.is_some() {
                return false;
            }
            pauses.trying();
            tries += 1;
            let hello =
                Hello { stream: several.stream, offset: several.lock().received, resuming: true };
            let join = Join { index: index as u8, streams: n as u8, window: 0 };
            let patience = self.resume.try_patience();
            match dialer.again(hello, Some(join), patience, &several.stop, |_, _| Ok(())) {
                Ok((channel, ())) => {
                    self.back(several, index, channel);
                    return true;
                }
                Err(Missed::Final(why)) => {
                    self.give_up_on(several, index, &why);
                    return false;
                }
                Err(Missed::Refused(why) | Missed::Again(why)) => {
                    self.log.debug(format_args!(
                        "{}: connection {}, try {tries}: {why}",
                        self.name,
                        index + 1
                    ));
                    if Instant::now() >= deadline {
                        let why =
                            format!("not back within {} ({why})", duration(self.resume.within));
                        self.give_up_on(several, index, &why);
                        return false;
                    }
                }
            }
        }
    }

    /// Connection `index` dropped for `error` (receiving side), in its session of
    /// `generation`: waits until the sender has connected it again (a newer session), for as
    /// long as a receiver waits for its sender. `false` when it is given up (or the stream
    /// failed, or the run is over).
    pub(in crate::net::link) fn await_rejoin(
        &self,
        several: &Several,
        index: usize,
        generation: u64,
        error: &io::Error,
    ) -> bool {
        if !matches!(several.reconnect, Some(Reconnect::Listen(_))) || !is_drop(error) {
            several.fail(error);
            return false;
        }
        let mut state = several.lock();
        if state.generations[index] == generation {
            drop(state);
            several.channel(index).abandon();
            self.log.warn(format_args!(
                "{}: connection {} of {} dropped ({}); waiting for the sender to connect it \
                 again for up to {}",
                self.name,
                index + 1,
                several.connections.len(),
                describe(error),
                duration(self.resume.receiver_waits())
            ));
            state = several.lock();
        }
        let deadline = Instant::now() + self.resume.receiver_waits();
        loop {
            if state.generations[index] != generation {
                return true;
            }
            if state.failed.is_some() || several.stop.requested() {
                return false;
            }
            if Instant::now() >= deadline {
                drop(state);
                let why = format!("not back within {}", duration(self.resume.receiver_waits()));
                self.give_up_on(several, index, &why);
                return false;
            }
            state = several.wait(state);
        }
    }

    /// The receiving side's thread that takes back the connections of the stream that come
    /// again: through one lobby, each that proves the key and names the stream and its
    /// place; any other is dropped, said so.
    pub(in crate::net::link) fn take_back_joining(&self) {
        let several = self.several.get().expect("established");
        let Some(Reconnect::Listen(listening)) = &several.reconnect else { return };
        let mut dropped = listening.dropped;
        let terms = Terms { stream: Some(several.stream), window: several.window };
        let (key, stop) = (&listening.key, &several.stop);
        let mut lobby =
            Lobby::open(&listening.listeners, key, terms, &mut dropped, &self.log, stop);
        let n = several.connections.len();
        loop {
            match lobby.next_sender(None) {
                Ok((_, channel)) => match channel.joined() {
                    Some(join) if usize::from(join.index) < n && usize::from(join.streams) == n => {
                        self.back(several, usize::from(join.index), *channel);
                    }
                    _ => self.log.warn(format_args!(
                        "{}: a connection of the stream out of place; dropped it",
                        channel.socket().peer()
                    )),
                },
                Err(_) if stop.requested() => return,
                Err(why) => {
                    self.log.warn(format_args!("{}: {why}", listening.address));
                    if stop.sleep(LISTEN_AGAIN).is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Connection `index` is back, in `channel`: it takes the place of the one that dropped
    /// (abandoned, which wakes whoever waits on it). The receiver says its count again, and
    /// the Ack if it was said.
    fn back(&self, several: &Several, index: usize, mut channel: Channel) {
        channel.set_silence(self.resume.silence());
        let ack = {
            let state = several.lock();
            state.end.filter(|_| state.ack_said)
        };
        self.fit(channel.socket());
        if self.role == Role::Receiver {
            let told = self.told.load(Relaxed);
            let _ = channel.deliver_granting(told, several.credit(told));
            if let Some(total) = ack {
                let _ = channel.acknowledge_at(total);
            }
        }
        let peer = channel.socket().peer();
        let socket = Arc::clone(channel.socket());
        std::mem::replace(&mut *several.channel(index), channel).abandon();
        *several.connections[index].socket.lock().unwrap_or_else(PoisonError::into_inner) = socket;
        let connection = &several.connections[index];
        connection.reconnections.fetch_add(1, Relaxed);
        several.lock().generations[index] += 1;
        several.changed.notify_all();
        self.publish_streams(several, None, true);
        self.log.warn(format_args!(
            "{}: connection {} of {} is back ({peer})",
            self.name,
            index + 1,
            several.connections.len()
        ));
    }

    /// While units are out and what the receiver took in, in order, has not moved for
    /// [`Link::frozen_after`], the unit the receiver waits for went on a connection that
    /// passes nothing (a proxy or a NAT that holds it, which TCP alone notices only after
    /// minutes): that connection is cut, as a drop, so that its units go on the others
    /// and it connects again. Once per unit waited for; the sending side's idle threads
    /// look, and the output's while it waits for the Acks.
    pub(in crate::net::link) fn unfreeze(&self, several: &Several) {
        let mut state = several.lock();
        let now = Instant::now();
        let counted = *state.received_since.get_or_insert(now);
        let Some((&head, unit)) = state.units.first_key_value() else { return };
        let (Some(index), Some(taken)) = (unit.on, unit.taken) else { return };
        // Since the count last moved, or the unit went (again) on its connection.
        let since = counted.max(taken);
        if now - since < self.frozen_after() || state.unfrozen == Some(head) {
            return;
        }
        state.unfrozen = Some(head);
        drop(state);
        self.log.warn(format_args!(
            "{}: connection {} of {} passed nothing for {} while the stream waited for byte \
             {head} on it; cutting it",
            self.name,
            index + 1,
            several.connections.len(),
            duration(now - since)
        ));
        several.socket(index).shut_down();
    }

    /// How long the receiver's count may stand still, units out, before the connection it
    /// waits on counts as frozen: half a heartbeat, from a quarter of a second to two (a
    /// receiver's outputs that take nothing for that long cost one connection's units sent
    /// again, once).
    fn frozen_after(&self) -> Duration {
        (self.resume.heartbeat / 2).clamp(Duration::from_millis(250), Duration::from_secs(2))
    }

    /// Connection `index` is given up for good, `why`; the stream fails when none is left.
    fn give_up_on(&self, several: &Several, index: usize, why: &str) {
        let mut state = several.lock();
        state.gone += 1;
        let left = several.connections.len() - state.gone;
        drop(state);
        several.changed.notify_all();
        let what = format!("connection {} of {}", index + 1, several.connections.len());
        if left == 0 {
            let error = io::Error::new(io::ErrorKind::TimedOut, format!("{what}, the last: {why}"));
            several.fail(&error);
        } else {
            self.log.warn(format_args!("{}: {what} given up: {why}; {left} go on", self.name));
        }
    }
}

/// The units connection `index` had taken and the receiver has not taken in: back to the
/// front of the queue, in order, for any connection to send again. Their bytes.
fn requeue(several: &Several, index: usize) -> u64 {
    let mut state = several.lock();
    let mut again = Vec::new();
    for (&at, unit) in state.units.iter_mut().filter(|(_, unit)| unit.on == Some(index)) {
        (unit.on, unit.taken) = (None, None);
        again.push((at, unit.bytes.len() as u64));
    }
    for &(at, _) in again.iter().rev() {
        state.queue.push_front(at);
    }
    state.out[index] = 0;
    drop(state);
    several.changed.notify_all();
    let bytes = again.iter().map(|(_, len)| len).sum();
    several.connections[index].resent.fetch_add(bytes, Relaxed);
    bytes
}
