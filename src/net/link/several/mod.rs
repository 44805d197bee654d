//! One stream over several connections (`--streams N`, N above 1; wire version 5): a
//! link's room of its own, so that the single connection's path (version 4) stays as it was.
//!
//! Each connection is a session of its own (its own ephemeral keys, its own Noise state),
//! which proved the key and named the same stream and its index in its Hello; each has a
//! thread of its own that seals and writes, or reads and opens, so that the cipher's work
//! spreads over the CPUs and each connection's TCP window fills on its own.
//!
//! - The sender ([`send`]): the output's writes are cut into units of at most a frame, each
//!   at its stream offset, queued in a dispatcher shared by the connections' threads; each
//!   thread takes the next unit when its connection can send (work stealing: a slower path
//!   takes fewer). A unit holds its bytes where the output's backlog has them, lent
//!   ([`Lent`]: the chunk is not reused while they are held), so that the thread seals them
//!   from there, as a single connection does; bytes the output read back from the spill are
//!   copied. The dispatcher queues no further than the receiver's credit: the output's
//!   write waits for room. A unit stays until the receiver has taken it in, in order.
//! - The receiver ([`receive`]): each connection's thread opens frames wherever they belong
//!   and puts them in a reorder map; the input moves them out in offset order, each in the
//!   buffer it was opened into, into its backlog as they are ([`Owned`]: no copy, as a
//!   single connection opens its frames straight into the backlog), and the buffer comes
//!   back to the link's pool once the outputs wrote it. A frame that comes twice is taken
//!   once. The credit it gives ([`Credit`], with every Delivered
//!   count) is a window (a quarter of its `-m`) beyond what its input took in, in order,
//!   which bounds the map however the connections race, and never more than its `-m`
//!   beyond what its outputs took, which bounds the map and the backlog together: the
//!   window is part of `-m`, not beside it, and a stalled consumer is absorbed up to `-m`,
//!   as over one connection (counted from what the outputs took, the window alone bounded
//!   the map and the backlog: a quarter of `-m`).
//! - Confirmations (Delivered) go on every connection, and every sender thread hears them:
//!   each connection stays alive, and its silence is noticed. The End goes on every
//!   connection once every unit was written, the Ack back on every one; one Ack is the
//!   receiver's word that its outputs took every byte, so the sender closes them all once
//!   it has one, and the receiver leaves at the first close (a connection that passes
//!   nothing holds up neither).
//! - A frozen connection ([`again`]): while units are out and what the receiver took in, in
//!   order, stands still for half a heartbeat, the connection that carries the unit the
//!   receiver waits for is cut, which makes it a drop.
//!
//! - A dropped connection ([`again`]): the units it had taken and the receiver has not
//!   taken in go back to the front of the queue, for the other connections to send, and
//!   it connects again in the background (the sender dials, with the pauses of a single
//!   connection; the receiver listens, and takes back a connection that proves the key and
//!   names the stream and its place). Frames that arrive twice are taken once. When every
//!   connection drops at once, the units wait in the dispatcher and the frames in the
//!   receiver's map until the first comes back: the stream goes on from what the receiver
//!   took in, byte-exact. A connection not back within `--reconnect-for` is given up; the
//!   stream fails when none is left.

mod again;
mod receive;
mod send;

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Link, Reconnect, Role};
use crate::backlog::{Lent, Owned, Pool};
use crate::meter::{Peer, Stream, Wire};
use crate::net::channel::Channel;
use crate::net::socket::Socket;
use crate::net::wire::{Credit, MAX_MESSAGE, MAX_PAYLOAD};
use crate::stop::Stop;

/// How long a waiting side sleeps at most before it looks again (the run's stop, a peer's
/// silence): a condition wait, woken at once by what it waits for.
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// The connections of one stream, and what their threads share.
pub(super) struct Several {
    connections: Vec<Connection>,
    state: Mutex<State>,
    /// Signalled when the state changes: a unit queued, taken or confirmed, a frame in, an
    /// end, a failure.
    changed: Condvar,
    /// The receiver's window: the most bytes the sender may have beyond what the receiver's
    /// input took in, in order, which its reorder map holds at most.
    window: u64,
    /// Receiving side: the most bytes beyond what its outputs took that its buffer and its
    /// reorder map hold together (its `-m`, at least a window).
    hold: u64,
    /// The threads' own stop, and the threads.
    stop: Arc<Stop>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// How a dropped connection comes back (`None`: `--reconnect-for 0`, it does not), and
    /// the stream's name, which a connection that comes back says.
    reconnect: Option<Reconnect>,
    stream: [u8; 16],
    /// Each connection's frames on the wire (sending side, its compressor's; receiving
    /// side, as they came off it), and when the counts were last published.
    wires: Mutex<Vec<Option<Wire>>>,
    published: Mutex<Option<Instant>>,
    /// Receiving side: the buffers frames are opened into, back once the outputs wrote them
    /// (the backlog holds them as they are) or they were copied out.
    frames: Arc<Pool>,
}

/// How often, at most, the connections' counts are published: the watcher's tick is no
/// faster.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// One connection of the stream.
struct Connection {
    /// Its session: the one in use, or, while it is down, the one that dropped.
    channel: Mutex<Channel>,
    /// The session's socket, to wait on or shut down without the session, which its
    /// thread may hold while it waits to write.
    socket: Mutex<Arc<Socket>>,
    /// Stream bytes it carried; times it came back; stream bytes sent again on the others
    /// after it dropped.
    bytes: AtomicU64,
    reconnections: AtomicU64,
    resent: AtomicU64,
}

/// A unit of the stream, as the sender's dispatcher holds it until the receiver took it
/// in: its bytes, and the connection that took it, if one did, and when.
struct Unit {
    bytes: UnitBytes,
    on: Option<usize>,
    taken: Option<Instant>,
}

/// A unit's bytes: lent by the output's backlog, whose chunk is not reused while they are
/// held (the connection's thread seals them from there: no copy), or copied (bytes the
/// output read back from the spill). Cloned for the connection that sends it, at the cost
/// of a count.
#[derive(Clone)]
enum UnitBytes {
    Lent(Lent),
    Copied(Arc<Vec<u8>>),
}

impl UnitBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            UnitBytes::Lent(lent) => lent.as_slice(),
            UnitBytes::Copied(bytes) => bytes,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

/// The fewest frame buffers kept for reuse (2 MiB): as many as the input takes out of the
/// reorder map in one read (a MiB), or the sender lets go at one confirmation, with room
/// to spare. Fewer, and most frames found none: a buffer allocated, zeroed and faulted in
/// per frame (measured: a tenth of a receiver's CPU, as much of a sender's). Up to a
/// window's worth is kept beside what the map (the dispatcher) holds ([`Several::spares`];
/// the receiver's [`Several::frames`], its buffers' pool).
const SPARE_FRAMES: usize = 32;

/// The most spare frame buffers to keep beside a `window`: what it holds, and at least
/// [`SPARE_FRAMES`].
fn spares(window: u64) -> usize {
    let frames = usize::try_from(window / MAX_PAYLOAD as u64).unwrap_or(usize::MAX);
    frames.max(SPARE_FRAMES)
}

/// Keeps `buffer` among the spares, when it is a whole frame's and there are fewer than
/// `most`.
fn keep_spare(spare: &mut Vec<Vec<u8>>, buffer: Vec<u8>, most: usize) {
    if buffer.capacity() >= MAX_PAYLOAD && spare.len() < most {
        spare.push(buffer);
    }
}

/// What the connections' threads share, under one lock.
#[derive(Default)]
struct State {
    /// Sending: the offsets of units not yet taken, in order; every unit the receiver has
    /// not taken in (by its offset); the offset after the last byte queued; units taken and being
    /// written; the stream's length once the output ended it; connections that have the Ack.
    queue: VecDeque<u64>,
    units: BTreeMap<u64, Unit>,
    /// Each connection's units taken and not taken in by the receiver, in bytes: at most its share of the
    /// window.
    out: Vec<u64>,
    queued: u64,
    writing: usize,
    total: Option<u64>,
    acked: usize,
    /// What the receiver confirmed its outputs took; its credit: what its input took in,
    /// in order (units below need no sending again), since when, and how far the sender
    /// may queue; when the sender last asked for its count; the unit whose connection was
    /// last found frozen.
    confirmed: u64,
    received: u64,
    received_since: Option<Instant>,
    limit: u64,
    asked_at: Option<Instant>,
    unfrozen: Option<u64>,
    /// Receiving: frames that came before their turn, by offset, each in the buffer it was
    /// opened into (the input moves them into its backlog as they are: no copy; it may
    /// take a frame's start only, and the rest waits there); the bytes they hold; the
    /// offset of the next byte the input takes; the End's count; connections closed after
    /// the Ack; the Ack said.
    early: BTreeMap<u64, Owned>,
    held: u64,
    /// Sending side: buffers of a whole frame let go (a unit the receiver has), for the
    /// next unit queued ([`Several::spares`] at most): no allocation, nor a page faulted
    /// in, per frame.
    spare: Vec<Vec<u8>>,
    /// Receiving side: the credit last told the sender.
    granted: Option<Credit>,
    next: u64,
    end: Option<u64>,
    closed: usize,
    ack_said: bool,
    /// Both sides: each connection's sessions since the first (a thread that met a drop
    /// waits for a newer one), and connections given up for good.
    generations: Vec<u64>,
    gone: usize,
    /// A connection failed: the stream stops, saying so.
    failed: Option<(io::ErrorKind, String)>,
    /// The stream ended whole (the sender has an Ack, the receiver a close after its
    /// own): a connection that drops now does not come back.
    over: bool,
}

impl State {
    fn failure(&self) -> Option<io::Error> {
        self.failed.as_ref().map(|(kind, why)| io::Error::new(*kind, why.clone()))
    }
}

impl Several {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most spare frame buffers to keep while the reorder map (sending side, the
    /// dispatcher) holds `held` frames: what a window has room for beside them, and at least
    /// [`SPARE_FRAMES`]. The map fills its window whenever a connection falls behind the
    /// others, then drains at once: with [`SPARE_FRAMES`] alone, most frames of the next
    /// fill found no spare, and the allocator zeroed each (a receiver's memset: 4 % of its
    /// CPU at `--streams 2` on a veth). The map and the spares together hold no more
    /// frames than the map's full window and [`SPARE_FRAMES`], as before.
    fn spares(&self, held: usize) -> usize {
        spares(self.window).saturating_sub(held).max(SPARE_FRAMES)
    }

    /// Receiving side: the stream offset past every byte that has come so far, held early
    /// or handed out (the furthest an ask can be about).
    fn received_upto(&self) -> u64 {
        let state = self.lock();
        let early = state.early.last_key_value().map(|(&at, piece)| at + piece.len() as u64);
        early.unwrap_or(state.next).max(state.next)
    }

    /// Receiving side: the stream bytes the input took in, in order.
    pub(super) fn taken_in(&self) -> u64 {
        self.lock().next
    }

    /// Receiving side: the credit to give the sender, the outputs having taken `taken`
    /// bytes: what the input took in, in order; and a window beyond it (what the reorder
    /// map may hold, however the connections race), but never more than `hold` beyond
    /// `taken`, so that the buffer and the map together stay within `-m`.
    fn credit(&self, taken: u64) -> Credit {
        let received = self.taken_in();
        let limit = (received + self.window).min(taken + self.hold);
        Credit { received, limit }
    }

    /// Waits for a change, at most [`LOOK_AGAIN`].
    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(state, LOOK_AGAIN)
            .map_or_else(|e| e.into_inner().0, |(guard, _)| guard)
    }

    /// The stream fails for `error` (the first failure is the one said); every thread and
    /// the endpoint's calls stop.
    fn fail(&self, error: &io::Error) {
        let mut state = self.lock();
        if state.failed.is_none() {
            state.failed = Some((error.kind(), crate::words::describe(error)));
        }
        self.changed.notify_all();
    }

    /// Why the stream stopped, if it did.
    pub(super) fn failure(&self) -> Option<io::Error> {
        self.lock().failure()
    }

    /// Shuts every connection's socket down, which wakes whoever waits on one.
    fn shut_down(&self) {
        for index in 0..self.connections.len() {
            self.socket(index).shut_down();
        }
    }

    /// Connection `index`'s socket, for a wait that does not hold its session.
    fn socket(&self, index: usize) -> Arc<Socket> {
        let socket = self.connections[index].socket.lock();
        Arc::clone(&socket.unwrap_or_else(PoisonError::into_inner))
    }

    fn channel(&self, index: usize) -> MutexGuard<'_, Channel> {
        self.connections[index].channel.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Link {
    /// Establishes the link over several connections, `channels` (each proved), and starts
    /// their threads; the receiver's `window`, and (receiving side) its `hold`, the most it
    /// keeps beyond what its outputs took (its `-m`).
    pub(in crate::net) fn establish_several(
        self: &Arc<Link>,
        channels: Vec<Channel>,
        window: u64,
        hold: u64,
        reconnect: Option<Reconnect>,
    ) -> io::Result<()> {
        let first = Arc::clone(channels[0].socket());
        let stream = channels[0].stream();
        let mut connections = Vec::new();
        for mut channel in channels {
            channel.set_silence(self.resume.silence());
            self.fit(channel.socket());
            connections.push(Connection {
                socket: Mutex::new(Arc::clone(channel.socket())),
                channel: Mutex::new(channel),
                bytes: AtomicU64::new(0),
                reconnections: AtomicU64::new(0),
                resent: AtomicU64::new(0),
            });
        }
        let generations = vec![0; connections.len()];
        let listens = matches!(reconnect, Some(Reconnect::Listen(_)));
        let several = Several {
            connections,
            state: Mutex::new(State {
                out: vec![0; generations.len()],
                // Until the receiver's first credit, a window from the start.
                limit: window,
                generations,
                ..State::default()
            }),
            changed: Condvar::new(),
            window,
            hold: hold.max(window),
            stop: Arc::new(Stop::default()),
            threads: Mutex::new(Vec::new()),
            reconnect,
            stream,
            wires: Mutex::default(),
            published: Mutex::default(),
            // As many spares as the map's window holds, as before the frames went on into
            // the backlog: beside the map, the pool keeps at most a window's worth.
            frames: Pool::new(MAX_MESSAGE, spares(window)),
        };
        assert!(self.socket.set(first).is_ok(), "a link is established once");
        assert!(self.several.set(Arc::new(several)).is_ok(), "a link is established once");
        let several = self.several.get().expect("just set");
        let mut threads = Vec::new();
        for index in 0..several.connections.len() {
            let link = Arc::clone(self);
            let name = format!("accel-stream{index}");
            let thread = std::thread::Builder::new().name(name).spawn(move || match link.role {
                Role::Sender => link.send_on(index),
                Role::Receiver => link.receive_on(index),
            });
            match thread {
                Ok(thread) => threads.push(thread),
                Err(error) => {
                    several.fail(&error);
                    break;
                }
            }
        }
        if listens {
            let link = Arc::clone(self);
            let thread = std::thread::Builder::new().name("accel-streams".into());
            threads.push(thread.spawn(move || link.take_back_joining())?);
        }
        *several.threads.lock().unwrap_or_else(PoisonError::into_inner) = threads;
        Ok(())
    }

    /// Publishes each connection's counts, and what their frames took on the wire, with
    /// connection `index`'s `wire` as it is now (sending side), or with `wire` more off
    /// it (receiving side): at most every [`PUBLISH_EVERY`], unless `now`.
    fn publish_streams(&self, several: &Several, wire: Option<(usize, Wire)>, now: bool) {
        let mut wires = several.wires.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((index, wire)) = wire {
            wires.resize(several.connections.len(), None);
            match (&mut wires[index], self.role) {
                (Some(came), Role::Receiver) => came.add(&wire),
                (slot, _) => *slot = Some(wire),
            }
        }
        let mut published = several.published.lock().unwrap_or_else(PoisonError::into_inner);
        if !now && published.is_some_and(|at| at.elapsed() < PUBLISH_EVERY) {
            return;
        }
        *published = Some(Instant::now());
        let counts = |(index, c): (usize, &Connection)| Stream {
            bytes: c.bytes.load(Relaxed),
            reconnections: c.reconnections.load(Relaxed),
            resent: c.resent.load(Relaxed),
            // Each connection compresses at its own level: said for each.
            level: wires.get(index).and_then(|wire| wire.as_ref()?.level),
        };
        let streams: Vec<Stream> = several.connections.iter().enumerate().map(counts).collect();
        self.publish(|meter, peer| meter.streams(peer, streams.clone()));
        let Some(sum) = Wire::over_connections(wires.iter().flatten()) else { return };
        match self.meter.get() {
            Some((meter, Peer::Output(index))) => meter.wire(*index, sum),
            Some((meter, Peer::Input)) => meter.input_wire(sum),
            None => {}
        }
    }

    /// After the run, for a stream over several connections that did not end whole: tells
    /// the peer on every connection that it stops, and why; best effort.
    pub(super) fn abort_several(several: &Several, why: &str) {
        // One patience for them all: a thread that never ended may hold each.
        let until = Instant::now() + super::ABORT_PATIENCE;
        for index in 0..several.connections.len() {
            loop {
                match several.connections[index].channel.try_lock() {
                    Ok(mut channel) => {
                        channel.abort(why);
                        break;
                    }
                    Err(_) if Instant::now() >= until => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        }
    }

    /// The run is over: the connections' threads end, and are joined.
    pub(super) fn close_several(several: &Several) {
        several.stop.request();
        several.changed.notify_all();
        several.shut_down();
        let threads =
            std::mem::take(&mut *several.threads.lock().unwrap_or_else(|e| e.into_inner()));
        several.stop.join_all(threads, Duration::from_secs(5));
    }
}
