//! Compression on the wire (`--compress`): each Data frame's payload compressed with zstd,
//! or sent as it is when it would not shrink; the level, with `auto`, following the
//! bottleneck ([`adapt`]).
//!
//! One zstd frame runs through a session's compressed frames, each of them flushed
//! (`ZSTD_e_flush`) so that it decompresses on arrival: a frame refers to the stream bytes
//! before it, up to [`WINDOW_LOG`] back, as `zstd` over the whole stream does (flushing
//! every frame costs nothing measurable: 64 MiB of the bench's source tar, zstd -9, 2.846 ×
//! either way). A 64 KiB frame compressed alone loses that history: 2.36 × at -9, 2.18 × at
//! 1 (with it, 2.84 × and 2.30 ×). A frame says whether its payload is compressed and how:
//! [`Kind::Zstd`](super::wire::Kind::Zstd) starts a zstd frame (the receiver's context starts
//! afresh), [`Kind::ZstdMore`](super::wire::Kind::ZstdMore) goes on with it. The zstd frame
//! starts again with each session (a new connection, one of several, or one resumed: the
//! receiver's context is the connection's), when the level changes (zstd takes a new level
//! only at a frame's start), and after a frame sent as it is: its trial went into the
//! sender's context but not to the receiver, so a stored frame is never part of the
//! history. So that a stray incompressible member of a tar does not cost the history of
//! what follows, a frame that does not shrink by 3 % ([`SHRINK`]) still goes as zstd wrote
//! it (its blocks stored, a few bytes more than itself: [`HEADROOM`]) until [`RUN`] such
//! frames in a row say that the data does not compress; then frames are stored, and only
//! one in [`TRY_ONE_IN`] is tried, so that random or already compressed data (a raw
//! encrypted `zfs send`, media) costs almost nothing; the first trial that shrinks brings
//! every frame back. Meanwhile (`auto`) the socket is not held to few unsent bytes
//! ([`Compressor::incompressible`], `channel::send::UNSENT`): held, random data took 1.09 ×
//! none's time at 1 Gbit/s, 1.06 × at 200 Mbit/s; let go, 1.00 × and 1.03 ×. Nothing else in the protocol changes: offsets, the receiver's
//! confirmations and a resumed stream all count stream bytes, uncompressed, and the
//! receiver decompresses whatever each frame says, with nothing to set there.
//!
//! The memory, per connection: the receiver's context is the window and a block, 4.2 MiB.
//! The sender's is the window and zstd's match finder, whose tables zstd would size for a
//! large file, a stream's length not being known (15 MiB at level 9, 45 at 12, 645 at 22);
//! they are held to 2^20 entries ([`TABLE_LOG`]), so that it takes 4.8 MiB at level 1, 5.5
//! at 3, 7.2 at 6, 9.8 from 7 to 12 (`auto` goes no higher) and 13.5 above, whatever the
//! level, for 0.4 % of the ratio at level 9 (64 MiB of the bench's source tar, 2.835 ×
//! against 2.845 ×) and none below. The sender's peak RSS sending 64 MiB of sources with
//! `-m 1M` over loopback: 12.6 MiB at zstd:1, 17.6 at zstd:9 (22.7 with zstd's own sizes),
//! 8.0 uncompressed; with `--streams 4`, 33.8, 54.4 (74.0) and 15.9.
//!
//! What this side knows of its bottleneck comes from the sending thread itself: the time it
//! spends compressing, the time its writes wait for the socket (the link refuses bytes), and
//! the time between two writes (the output waits for the input, or, when the buffer is held
//! full of bytes the receiver has not confirmed, [`Compressor::held`], for the link).
//! [`Compressor::sent`] takes them after each write; every [`PERIOD`] (the first few
//! shorter, [`QUICK_PERIOD`]) they go to [`adapt::Adapt`], which moves the level.
//!
//! Where compressing is the sending thread's bottleneck (alone, it would take half a period
//! or more, [`adapt::parallel`]), a batch's frames (1 MiB, 16 frames) are compressed on
//! several threads, the sending thread and up to [`MOST_THREADS`]` - 1` helpers, each
//! with a context of its own: the batch cut into as many runs of consecutive frames, each
//! run a zstd frame of its own ([`Compressor::pack_batch`]), sealed and written in the
//! stream's order by the sending thread. The receiver and the wire are unchanged: a run's
//! first frame is a [`Kind::Zstd`](super::wire::Kind::Zstd) as any new zstd frame is. A
//! run starts without the history before it: 40 MiB of the bench's source tar at zstd:3,
//! 2.423 × on one thread, 2.419 × on two, 2.397 × on three. The threads are started for
//! each batch (scoped: they borrow the batch's bytes, no copy), and only then: never for
//! `none`, nor for frames that do not shrink (random data stays on the sending thread,
//! where trials are rare), nor on one core. A batch is packed and sealed whole within one
//! write, so that resuming, confirmations and offsets are as before.
//!
//! Plain TCP (`--insecure`) is a raw stream, for mbuffer and nc: it is never compressed.

pub mod adapt;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapt::{Adapt, Observation, RUNGS, Rung};

use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_flush;
use zstd::zstd_safe::zstd_sys::ZSTD_getCParams;
use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};

use crate::log::Log;
use crate::meter::Wire;

/// How often the level is reconsidered (`auto`): a fraction of a second, so that a change of
/// link or of data is followed within a second or two (two agreeing periods move it).
pub const PERIOD: Duration = Duration::from_millis(250);

/// The first [`QUICK`] periods are this much shorter, and the [`QUICK_AFTER`] after a move: a
/// stream of a few seconds cannot spend a second at the wrong level before the first move,
/// nor half a second at a level tried and found slower.
pub const QUICK_PERIOD: Duration = Duration::from_millis(60);

/// See [`QUICK_PERIOD`].
pub const QUICK: u32 = 6;

/// See [`QUICK_PERIOD`].
pub const QUICK_AFTER: u32 = 3;

/// A frame shrinks when compressing saves at least 3 % of it: below that, the receiver's
/// work and the sender's are not worth the bytes (zstd itself stores a block raw below
/// about 1.6 %).
pub const SHRINK: (usize, usize) = (97, 100);

/// Frames in a row that did not shrink before trials become sparse. The ones before go as
/// zstd made them (a few bytes more than themselves, zstd's blocks stored raw): stored as
/// they are, they would not be in the receiver's history, and the zstd frame would start
/// again; a tar's few incompressible members cost the history of all that follows.
pub const RUN: u32 = 8;

/// What a frame's payload leaves for zstd, when frames are compressed: a block header (3
/// bytes) and a zstd frame's header (at most 18), so that a frame that does not shrink
/// still fits a frame as zstd writes it.
pub const HEADROOM: usize = 32;

/// The most stream bytes in a frame that may be compressed.
pub const MOST_PACKED: usize = super::wire::MAX_PAYLOAD - HEADROOM;

/// Once frames stop shrinking, one frame in this many is tried.
pub const TRY_ONE_IN: u32 = 16;

/// The history both ends keep, as zstd's windowLog: 2^22, 4 MiB. The receiver's zstd
/// context holds that window and a block, about 4.2 MiB per connection whatever the sender
/// asks (a frame that needs a larger window is refused, `windowLogMax`); the sender's, that
/// and its tables ([`TABLE_LOG`]). zstd -9 over a whole stream uses the same 4 MiB.
pub const WINDOW_LOG: u32 = 22;

/// The most entries of zstd's match finder, as its hashLog and chainLog: 2^20, a quarter of
/// the window's positions. The sender's context is then, per connection, the window and its
/// tables: 4.8 MiB at level 1 and below, 5.5 at 3, 7.2 at 6, 9.8 from 7 to 12 (`auto`'s
/// highest), 13.5 above. Left to zstd, the tables of a stream of unknown length are those of
/// a large file: 15 MiB at level 9, 45 at 12, 645 at 22. Levels up to 8 are not changed; on
/// 64 MiB of the bench's source tar, level 9 gives 2.835 × (2.845 × left to zstd) at 69
/// MiB/s (63), 12 2.844 × (2.863) at 45 MiB/s (25): `ratio_per_level`.
pub const TABLE_LOG: u32 = WINDOW_LOG - 2;

/// The levels `zstd:LEVEL` takes: zstd's negative (fast) ones to -7, its highest, 22.
pub const LEVELS: std::ops::RangeInclusive<i32> = -7..=22;

/// `--compress`: what the sending side does with each frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compress {
    /// Never compress.
    None,
    /// zstd at a level that follows the bottleneck ([`adapt`]).
    Auto,
    /// zstd at this level, always (negative levels are zstd's fast ones, lz4's speeds).
    Zstd(i32),
}

impl Default for Compress {
    /// `auto`: the benchmark (bench/run.py's `compress` measure) decides the default, and
    /// `auto` is the default because it cost no more than 3 % against `none` in any row
    /// (random bytes, the unlimited veth included; see the README and GUIDE); a receiver of
    /// an older accel, which a default that compresses would meet, is sent to uncompressed
    /// (`net::dial`).
    fn default() -> Compress {
        Compress::Auto
    }
}

impl fmt::Display for Compress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compress::None => f.write_str("none"),
            Compress::Auto => f.write_str("auto"),
            Compress::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

impl Compress {
    /// Reads `auto`, `none`, `zstd` (level 3) or `zstd:LEVEL`.
    pub fn parse(text: &str) -> Result<Compress, String> {
        let text = text.trim();
        // zstd takes levels down to -131072; below -7 they only give the ratio away.
        let (range, default) = (LEVELS, zstd::DEFAULT_COMPRESSION_LEVEL);
        let levels =
            || format!("levels are {} to {} (negative: faster)", range.start(), range.end());
        match text.split_once(':') {
            None if text == "auto" => Ok(Compress::Auto),
            None if text == "none" => Ok(Compress::None),
            None if text == "zstd" => Ok(Compress::Zstd(default)),
            Some(("zstd", level)) => match level.trim().parse::<i32>() {
                Ok(level) if range.contains(&level) && level != 0 => Ok(Compress::Zstd(level)),
                Ok(_) => Err(format!("no such level: {}", levels())),
                Err(_) => {
                    Err(format!("not a level: expected zstd:LEVEL, e.g. zstd:3; {}", levels()))
                }
            },
            _ => Err("expected auto, none, zstd or zstd:LEVEL (e.g. zstd:3, zstd:-1)".into()),
        }
    }
}

/// What became of a frame's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packed {
    /// Sent as it is.
    Raw,
    /// Compressed: [`Compressor::packed`] holds `len` bytes, which start a zstd frame when
    /// `fresh`, else go on with the one the last frame packed started.
    Zstd {
        /// Bytes of compressed payload.
        len: usize,
        /// A zstd frame starts here ([`Kind::Zstd`](super::wire::Kind::Zstd)).
        fresh: bool,
    },
}

/// The most threads that compress one connection's frames: the sending thread and three
/// helpers, when there are cores for them. Each helper holds a zstd context of its own (as
/// the sending thread's, 4.8 to 13.5 MiB by the level, [`TABLE_LOG`]) and what it packed of
/// a batch (at most a batch, 1 MiB): at most 3 × 14.5 MiB more per connection, made only
/// once compressing has been the bottleneck.
pub const MOST_THREADS: usize = 4;

/// What the frames of a batch became ([`Compressor::pack_batch`]), in stream order: each
/// frame's stream bytes, and its payload, compressed (in `payload`, from the offset given)
/// or not.
#[derive(Debug, Default)]
pub struct Packs {
    /// Stream bytes, what they became, where the compressed payload starts in `payload`.
    pub frames: Vec<(usize, Packed, usize)>,
    /// The compressed payloads, one after the other.
    pub payload: Vec<u8>,
}

impl Packs {
    fn clear(&mut self) {
        self.frames.clear();
        self.payload.clear();
    }

    fn append(&mut self, other: &Packs) {
        let base = self.payload.len();
        self.frames.extend(other.frames.iter().map(|&(len, packed, at)| (len, packed, at + base)));
        self.payload.extend_from_slice(&other.payload);
    }
}

/// A thread that compresses a run of a batch's frames: its context, what it made of the
/// run, and the time it took (`None`: its thread could not be started).
struct Helper {
    compressor: Compressor,
    packs: Packs,
    busy: Option<Duration>,
}

/// Packs `run`, consecutive frames, with `compressor`, the first starting a zstd frame, into
/// `packs`; the time it took.
fn pack_run(compressor: &mut Compressor, run: &[&[u8]], packs: &mut Packs) -> Duration {
    let started = Instant::now();
    let mut follows = false;
    for piece in run {
        let packed = compressor.pack(piece, follows);
        let at = packs.payload.len();
        if let Packed::Zstd { len, .. } = packed {
            packs.payload.extend_from_slice(compressor.packed(len));
        }
        packs.frames.push((piece.len(), packed, at));
        follows = matches!(packed, Packed::Zstd { .. });
    }
    started.elapsed()
}

/// A sending link's compression, over all its sessions: the zstd context, the level, and
/// what it made of the stream so far.
pub struct Compressor {
    setting: Compress,
    /// The most threads that compress one batch ([`MOST_THREADS`], and no more than the
    /// cores), and whether they do now ([`adapt::parallel`]): the sending thread's helpers,
    /// each with a context of its own, made at their first use.
    threads: usize,
    parallel: bool,
    forced: bool,
    helpers: Vec<Helper>,
    /// A batch packed on several threads ([`Compressor::pack_batch`]), and what the helpers
    /// spent on it beyond the sending thread's own time, and what it waited for them.
    packs: Packs,
    own: Packs,
    helped: Duration,
    waited: Duration,
    /// The wire bytes per second the link took in the last period.
    link_rate: f64,
    zstd: Option<zstd::zstd_safe::CCtx<'static>>,
    /// The context is inside a zstd frame whose every part was packed: the next frame may go
    /// on with it, if its session's receiver has them all.
    open: bool,
    /// Where the level is: a rung of [`adapt::LADDER`], or the fixed level.
    rung: Rung,
    adapt: Option<Adapt>,
    /// Frames in a row that did not shrink, and frames to send raw before the next trial.
    unshrunk: u32,
    skip: u32,
    /// [`RUN`] frames in a row did not shrink, and none tried since has (whatever the level).
    incompressible: bool,
    /// The compressed payload.
    out: Box<[u8]>,
    totals: Wire,
    /// The frames of the batch being written, added to `totals` once it is
    /// ([`Compressor::sent`]): a batch whose write fails (the connection dropped) is sent
    /// again on the next, and counted there, so that the stream bytes are those the wire
    /// bytes carried (counted at once, one batch's more after a reset: an uncompressed
    /// stream read x1.12).
    batch: Wire,
    /// When the level last changed, and the time at each rung before that.
    at_rung_since: Instant,
    at_rung: [Duration; RUNGS],
    /// The period under way, and how many short ones are still to come.
    period: Period,
    quick: u32,
    /// When the last write returned: the time until the next is the input's, or the link's
    /// when the buffer was `held` full of bytes the receiver had not confirmed.
    last_return: Option<Instant>,
    held: bool,
    log: Option<Arc<Log>>,
}

/// The period's observations, for [`adapt`].
#[derive(Debug, Clone, Copy)]
struct Period {
    started: Instant,
    packing: Duration,
    cpu: Duration,
    writing: Duration,
    idle: Duration,
    stream: u64,
    packed: u64,
}

impl Period {
    fn new(now: Instant) -> Period {
        let zero = Duration::ZERO;
        let (stream, packed) = (0, 0);
        Period { started: now, packing: zero, cpu: zero, writing: zero, idle: zero, stream, packed }
    }
}

impl fmt::Debug for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compressor")
            .field("setting", &self.setting)
            .field("rung", &self.rung)
            .finish_non_exhaustive()
    }
}

impl Compressor {
    /// A sending link's compression as `setting` says; `log` hears each level change
    /// (`--debug`).
    pub fn new(setting: Compress, log: Option<Arc<Log>>) -> Compressor {
        let now = Instant::now();
        let (rung, adapt) = match setting {
            Compress::None => (Rung::Stored, None),
            Compress::Zstd(level) => (Rung::Level(level), None),
            Compress::Auto => (adapt::START, Some(Adapt::new(adapt::START))),
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let forced = test_threads();
        Compressor {
            setting,
            threads: forced.unwrap_or(cores.min(MOST_THREADS)),
            parallel: forced.is_some(),
            forced: forced.is_some(),
            helpers: Vec::new(),
            packs: Packs::default(),
            own: Packs::default(),
            helped: Duration::ZERO,
            waited: Duration::ZERO,
            link_rate: 0.0,
            zstd: None,
            open: false,
            rung,
            adapt,
            unshrunk: 0,
            skip: 0,
            incompressible: false,
            out: vec![0u8; super::wire::MAX_PAYLOAD].into_boxed_slice(),
            totals: Wire { compressing: setting != Compress::None, ..Wire::default() },
            batch: Wire::default(),
            at_rung_since: now,
            at_rung: [Duration::ZERO; RUNGS],
            period: Period::new(now),
            quick: QUICK,
            last_return: None,
            held: false,
            log,
        }
    }

    /// Whether the level follows the bottleneck (`auto`).
    pub fn adapts(&self) -> bool {
        self.adapt.is_some()
    }

    /// No compression: every frame as it is (and its bytes counted).
    pub fn none() -> Compressor {
        Compressor::new(Compress::None, None)
    }

    /// The most stream bytes a frame takes: see [`MOST_PACKED`].
    pub fn most_per_frame(&self) -> usize {
        if self.totals.compressing { MOST_PACKED } else { super::wire::MAX_PAYLOAD }
    }

    /// The level frames are compressed at now; `None`: stored as they are.
    pub fn level(&self) -> Option<i32> {
        self.rung.level()
    }

    /// Packs one frame's payload: compressed into [`packed`](Compressor::packed) when that
    /// saves at least 3 %, else raw. `follows`: the session's last frame was one this packed
    /// compressed, so that the receiver's context is inside the same zstd frame; else a zstd
    /// frame starts here.
    pub fn pack(&mut self, piece: &[u8], follows: bool) -> Packed {
        let Some(level) = self.rung.level() else { return Packed::Raw };
        if self.skip > 0 {
            self.skip -= 1;
            return Packed::Raw;
        }
        let limit = piece.len() * SHRINK.0 / SHRINK.1;
        let fresh = !(follows && self.open);
        let Some(zstd) = context(&mut self.zstd, level, fresh) else { return Packed::Raw };
        let mut out = OutBuffer::around(&mut self.out[..]);
        let mut input = InBuffer::around(piece);
        // With `ZSTD_e_flush`, zstd takes the whole input and writes every block of it out
        // (0 left to flush), unless the output is full first.
        let flushed = loop {
            match zstd.compress_stream2(&mut out, &mut input, ZSTD_e_flush) {
                Ok(0) if input.pos() == piece.len() => break Some(out.pos()),
                Ok(_) if out.pos() < out.capacity() => continue,
                _ => break None,
            }
        };
        if flushed.is_some_and(|len| len <= limit) {
            self.open = true;
            self.unshrunk = 0;
            self.incompressible = false;
            return Packed::Zstd { len: out.pos(), fresh };
        }
        self.unshrunk = self.unshrunk.saturating_add(1);
        if let Some(len) = flushed.filter(|_| self.unshrunk < RUN) {
            // It did not shrink, but storing it would cost the history (the receiver would
            // not have it): it goes as zstd stored it, a few bytes more than itself, until
            // a run of such frames says the data does not compress.
            self.open = true;
            return Packed::Zstd { len, fresh };
        }
        // The trial went into the context but will not reach the receiver: the next
        // compressed frame starts a zstd frame.
        self.open = false;
        if self.unshrunk >= RUN {
            self.incompressible = true;
            // Frames untried between trials: 1, 2, 4, 8, then one in TRY_ONE_IN tried. A
            // short run (a compressed member of a tar) leaves few frames after it untried.
            let doubled = 1u32 << (self.unshrunk - RUN).min(TRY_ONE_IN.ilog2());
            self.skip = doubled.min(TRY_ONE_IN - 1);
        }
        Packed::Raw
    }

    /// Whether frames go as they are because the data does not compress: [`RUN`] frames in
    /// a row did not shrink, and no frame tried since has (at this level or another). With
    /// `auto`, what the level is judged on is then not worth the socket holding its unsent
    /// bytes few (`channel::send::UNSENT`); the first trial that shrinks ends it.
    pub fn incompressible(&self) -> bool {
        self.incompressible
    }

    /// Whether the next batch is packed on several threads ([`Compressor::threads_for`]).
    pub fn parallel(&self) -> bool {
        self.threads_for(2) > 1
    }

    /// The wire bytes per second the link took in the last period (0 before the first).
    pub fn link_rate(&self) -> f64 {
        self.link_rate
    }

    /// How many threads pack a batch of `frames` frames: one, unless compressing has been
    /// the sending thread's bottleneck ([`adapt::parallel`]), the frames compress (none is
    /// stored or skipped: random data is never given to a helper) and the batch has a frame
    /// for each.
    pub fn threads_for(&self, frames: usize) -> usize {
        let compresses = self.rung.level().is_some() && self.unshrunk == 0 && self.skip == 0;
        if self.parallel && compresses { self.threads.min(frames) } else { 1 }
    }

    /// Packs a batch's `pieces`, consecutive in the stream, on `threads` threads
    /// ([`Compressor::threads_for`]): cut into as many runs of consecutive frames, each
    /// its own zstd frame (its first frame [`Kind::Zstd`](super::wire::Kind::Zstd)), the
    /// last run the sending thread's, the others its helpers'. The receiver decompresses
    /// them as it does any frames: each run starts afresh. What each frame became, in
    /// order: [`Compressor::take_packs`].
    pub fn pack_batch(&mut self, pieces: &[&[u8]], threads: usize) {
        let mut packs = std::mem::take(&mut self.packs);
        packs.clear();
        let Some(level) = self.rung.level() else {
            self.packs = packs;
            return;
        };
        let per_run = pieces.len().div_ceil(threads.clamp(1, pieces.len().max(1)));
        let mut runs: Vec<&[&[u8]]> = pieces.chunks(per_run.max(1)).collect();
        let last = runs.pop().unwrap_or(&[]);
        let mut helpers = std::mem::take(&mut self.helpers);
        while helpers.len() < runs.len() {
            let compressor = Compressor::new(Compress::Zstd(level), None);
            helpers.push(Helper { compressor, packs: Packs::default(), busy: None });
        }
        let unshrunk = self.unshrunk;
        let mut waiting = None;
        std::thread::scope(|scope| {
            for (helper, run) in helpers.iter_mut().zip(&runs) {
                helper.compressor.begin(level, unshrunk);
                helper.packs.clear();
                helper.busy = None;
                let work =
                    || helper.busy = Some(pack_run(&mut helper.compressor, run, &mut helper.packs));
                // A thread that cannot be started (no memory): its run is packed below, on
                // this one.
                let _ =
                    std::thread::Builder::new().name("accel-zstd".into()).spawn_scoped(scope, work);
            }
            // The sending thread's run starts a zstd frame too: the frame before it on the
            // wire is a helper's.
            self.open = false;
            let mut own = Packs::default();
            std::mem::swap(&mut own, &mut self.own);
            own.clear();
            pack_run(self, last, &mut own);
            self.own = own;
            waiting = Some(Instant::now());
        });
        self.waited += waiting.map_or(Duration::ZERO, |since| since.elapsed());
        for (helper, run) in helpers.iter_mut().zip(&runs) {
            let busy = match helper.busy {
                Some(busy) => busy,
                None => pack_run(&mut helper.compressor, run, &mut helper.packs),
            };
            self.helped += busy;
            packs.append(&helper.packs);
        }
        packs.append(&self.own);
        self.helpers = helpers;
        self.packs = packs;
    }

    /// What each frame of the last batch [`Compressor::pack_batch`] packed became, in
    /// order; to be given back ([`Compressor::give_back`]), so that its memory serves again.
    pub fn take_packs(&mut self) -> Packs {
        std::mem::take(&mut self.packs)
    }

    /// See [`Compressor::take_packs`].
    pub fn give_back(&mut self, packs: Packs) {
        self.packs = packs;
    }

    /// A helper's context, for a run of frames at `level` that starts a zstd frame, the
    /// frames before it having been `unshrunk`.
    fn begin(&mut self, level: i32, unshrunk: u32) {
        if self.rung != Rung::Level(level) {
            self.rung = Rung::Level(level);
            if let Some(zstd) = &mut self.zstd {
                // Cannot fail for a level in zstd's range; if it did, the old level stays.
                let _ = set_level(zstd, level);
            }
        }
        self.open = false;
        self.unshrunk = unshrunk;
        self.skip = 0;
    }

    /// The batch framed was not written (the connection dropped): its frames are not counted;
    /// they go again, framed anew, on the next connection.
    pub fn batch_lost(&mut self) {
        self.batch = Wire::default();
    }

    /// Whether the buffer holds a good part of its bytes for the receiver's confirmation
    /// now, before a write: the time since the last write was the link's, not the input's
    /// (with a high ratio, the bytes in flight fill the buffer before the socket's).
    pub fn held(&mut self, held: bool) {
        self.held = held;
    }

    /// The payload of the last frame packed [`Packed::Zstd`] (`len` bytes).
    pub fn packed(&self, len: usize) -> &[u8] {
        &self.out[..len]
    }

    /// A frame went into the batch: `stream` bytes of the stream as `payload` bytes,
    /// `stored` when as they were.
    pub fn framed(&mut self, stream: usize, payload: usize, stored: bool) {
        self.batch.stream += stream as u64;
        self.batch.frames += 1;
        self.batch.stored += u64::from(stored && self.totals.compressing);
        self.period.stream += stream as u64;
        self.period.packed += payload as u64;
    }

    /// A batch was written: `wire` bytes on the socket, after `packing` spent compressing
    /// and sealing and `writing` in the write (the socket refused bytes part of it). Every
    /// [`PERIOD`] (or sooner, at the start: [`Adapt::drained`]), `auto` reconsiders the
    /// level, knowing from the `socket` what its send buffer holds at most then and what it
    /// holds that the far end has not acknowledged, where the system says.
    pub fn sent(
        &mut self,
        started: Instant,
        packing: Duration,
        writing: Duration,
        wire: usize,
        socket: impl FnOnce() -> (usize, Option<usize>),
    ) {
        let now = Instant::now();
        self.totals.add(&std::mem::take(&mut self.batch));
        self.totals.bytes += wire as u64;
        if let Some(last) = self.last_return {
            // Waiting for the input, unless the buffer was full of what the receiver had not
            // confirmed: then the input waited for the link, as the writes do.
            let gap = started.saturating_duration_since(last);
            if self.held { self.period.writing += gap } else { self.period.idle += gap }
        } else {
            // The first period starts with the first batch, not when the link was set up:
            // the connection's handshake (a round trip or two, a quarter second at 40 ms
            // behind a loaded machine) is nobody's time, and made the first quick period
            // five times as long, the stream's first megabytes all sent before it ended.
            self.period.started = started;
        }
        self.last_return = Some(now);
        self.period.packing += packing;
        // The sending thread's time, but what it waited for its helpers, and theirs.
        let cpu = packing.saturating_sub(std::mem::take(&mut self.waited));
        self.period.cpu += cpu + std::mem::take(&mut self.helped);
        self.period.writing += writing;
        let span = now.saturating_duration_since(self.period.started);
        let short = span < if self.quick > 0 { QUICK_PERIOD } else { PERIOD };
        // While the first periods teach only the ratio, one that already says the link
        // takes the stream as fast as it comes ends now (`Adapt::drained`).
        if short && !self.adapt.as_ref().is_some_and(Adapt::warming) {
            return;
        }
        let (buffer, queued) = socket();
        let observed = Observation {
            span,
            packing: self.period.packing,
            cpu: self.period.cpu,
            writing: self.period.writing,
            idle: self.period.idle,
            stream: self.period.stream,
            packed: self.period.packed,
            buffer: buffer as u64,
            queued: queued.map(|bytes| bytes as u64),
        };
        if short && !self.adapt.as_ref().is_some_and(|adapt| adapt.drained(&observed)) {
            return;
        }
        self.quick = self.quick.saturating_sub(1);
        self.period = Period::new(now);
        let parallel = self.forced || adapt::parallel(self.parallel, &observed);
        if parallel != self.parallel && self.threads > 1 && self.totals.compressing {
            if let Some(log) = &self.log {
                let share = observed.cpu.as_secs_f64() / span.as_secs_f64() * 100.0;
                let threads = if parallel { self.threads } else { 1 };
                log.debug(format_args!(
                    "--compress: frames compressed on {threads} thread(s): compressing alone \
                     takes {share:.0} % of a thread (at byte {} of the stream)",
                    self.totals.stream
                ));
            }
        }
        self.parallel = parallel;
        self.link_rate = observed.packed as f64 / span.as_secs_f64().max(1e-9);
        let Some(adapt) = &mut self.adapt else { return };
        if let Some(change) = adapt.decide(&observed) {
            if let Some(log) = &self.log {
                let at = self.totals.stream;
                log.debug(format_args!("--compress auto: {change} (at byte {at} of the stream)"));
            }
            self.at_rung[adapt::index(self.rung)] += now - self.at_rung_since;
            self.at_rung_since = now;
            self.rung = change.to;
            self.quick = QUICK_AFTER;
            self.unshrunk = 0;
            self.skip = 0;
            if let (Some(level), Some(zstd)) = (change.to.level(), &mut self.zstd) {
                // zstd takes a new level at the start of a frame: the next one starts one.
                // Cannot fail for a level in zstd's range; if it did, the old level stays.
                let _ = set_level(zstd, level);
                self.open = false;
            }
        }
    }

    /// What it made of the stream so far, for the meter.
    pub fn wire(&self) -> Wire {
        let mut wire = self.totals.clone();
        wire.level = self.rung.level();
        if self.adapt.is_some() {
            let mut at_rung = self.at_rung;
            at_rung[adapt::index(self.rung)] += self.at_rung_since.elapsed();
            wire.levels = adapt::LADDER
                .iter()
                .zip(at_rung)
                .filter(|(_, time)| !time.is_zero())
                .map(|(rung, time)| (rung.level(), time))
                .collect();
        } else if self.totals.compressing {
            wire.levels = vec![(self.rung.level(), self.at_rung_since.elapsed())];
        }
        wire
    }
}

/// The zstd context `zstd` at `level` (made at the first use), `fresh`: at the start of a
/// zstd frame. `None` when there is no memory for one: the stream goes on uncompressed.
fn context<'a>(
    zstd: &'a mut Option<CCtx<'static>>,
    level: i32,
    fresh: bool,
) -> Option<&'a mut CCtx<'static>> {
    if let Some(context) = zstd {
        // Cannot fail for a context that exists; if it did, a new one.
        if !fresh || context.reset(ResetDirective::SessionOnly).is_ok() {
            return zstd.as_mut();
        }
    }
    let mut context = CCtx::try_create()?;
    context.set_parameter(CParameter::WindowLog(WINDOW_LOG)).ok()?;
    set_level(&mut context, level).ok()?;
    Some(zstd.insert(context))
}

/// Sets `context`'s level, its match finder's tables held to [`TABLE_LOG`]. zstd sizes them
/// for the level and the stream's length; a stream's length is not known, so it takes the
/// sizes meant for a large file (level 9: a hash of 2^21 entries; 12: 2^23, and a chain of
/// 2^22; 22: 2^25 and 2^27) whatever the window. Sizes set here outlast a change of level:
/// each change comes here.
fn set_level(context: &mut CCtx<'static>, level: i32) -> zstd::zstd_safe::SafeResult {
    // SAFETY: a pure function of its arguments, zstd's table of parameters per level; 0: the
    // stream's length is not known.
    let asked = unsafe { ZSTD_getCParams(level, 0, 0) };
    context.set_parameter(CParameter::CompressionLevel(level))?;
    context.set_parameter(CParameter::HashLog(asked.hashLog.min(TABLE_LOG)))?;
    context.set_parameter(CParameter::ChainLog(asked.chainLog.min(TABLE_LOG)))
}

/// The debug builds' test hook, `ACCEL_TEST_THREADS=N`: every batch whose frames compress
/// is packed on N threads (2 to 16; see [`Compressor::pack_batch`]) from the first, whatever
/// the cores and the bottleneck, so that tests can show several threads' frames cross byte
/// for byte. `None` in release builds, and when not asked.
fn test_threads() -> Option<usize> {
    #[cfg(debug_assertions)]
    {
        let text = std::env::var("ACCEL_TEST_THREADS").ok()?;
        text.parse().ok().filter(|n| (2..=16).contains(n))
    }
    #[cfg(not(debug_assertions))]
    None
}

/// The debug builds' test hook, `ACCEL_TEST_DAMAGE=zstd:N`: the receiver damages the first
/// compressed frame past stream byte `N` before decompressing it (its first byte, made 0xff,
/// so that zstd refuses it: a zstd frame's magic number, or a block header of the reserved
/// type), to show that a frame that does not decompress is a clean failure.
/// The cipher rejects any frame changed on the way, so nothing else can show it. `None` in
/// release builds, and when not asked.
pub(crate) fn test_damage(offset: u64, compressed: &[u8]) -> Option<Vec<u8>> {
    #[cfg(debug_assertions)]
    {
        static ASKED: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let asked = ASKED.get_or_init(|| {
            let text = std::env::var("ACCEL_TEST_DAMAGE").ok()?;
            text.strip_prefix("zstd:")?.parse().ok()
        });
        if asked.is_some_and(|after| offset >= after) {
            let mut damaged = compressed.to_vec();
            if let Some(first) = damaged.first_mut() {
                *first = 0xff;
            }
            return Some(damaged);
        }
    }
    let _ = (offset, compressed);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::wire::MAX_PAYLOAD;
    use zstd::zstd_safe::{DCtx, DParameter};

    fn text(len: usize) -> Vec<u8> {
        let words = b"the quick brown fox jumps over the lazy dog; accel buffers pipes\n";
        words.iter().copied().cycle().take(len).collect()
    }

    fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn settings_are_read_and_bad_ones_refused() {
        assert_eq!(Compress::parse("auto"), Ok(Compress::Auto));
        assert_eq!(Compress::parse("none"), Ok(Compress::None));
        assert_eq!(Compress::parse("zstd"), Ok(Compress::Zstd(3)));
        assert_eq!(Compress::parse("zstd:-5"), Ok(Compress::Zstd(-5)));
        assert_eq!(Compress::parse("zstd:-7"), Ok(Compress::Zstd(-7)));
        assert_eq!(Compress::parse(" zstd:19 "), Ok(Compress::Zstd(19)));
        for bad in
            ["", "lz4", "zstd:", "zstd:x", "zstd:99", "zstd:0", "zstd:-8", "auto:3", "gzip:6"]
        {
            assert!(Compress::parse(bad).is_err(), "{bad:?} was taken");
        }
        for setting in [Compress::Auto, Compress::None, Compress::Zstd(-3)] {
            assert_eq!(Compress::parse(&setting.to_string()), Ok(setting));
        }
    }

    /// The receiver's side, as the channel does it: a context per session, started afresh
    /// at each fresh frame.
    struct Inflater {
        zstd: DCtx<'static>,
        out: Vec<u8>,
    }

    impl Inflater {
        fn new() -> Inflater {
            let mut zstd = DCtx::create();
            zstd.set_parameter(DParameter::WindowLogMax(WINDOW_LOG)).unwrap();
            Inflater { zstd, out: vec![0; MAX_PAYLOAD] }
        }

        fn inflate(&mut self, compressed: &[u8], fresh: bool) -> Vec<u8> {
            if fresh {
                self.zstd.reset(ResetDirective::SessionOnly).unwrap();
            }
            let (mut out, mut input) =
                (OutBuffer::around(&mut self.out[..]), InBuffer::around(compressed));
            while input.pos() < compressed.len() {
                self.zstd.decompress_stream(&mut out, &mut input).unwrap();
            }
            let len = out.pos();
            self.out[..len].to_vec()
        }
    }

    /// Packs `piece` and checks that `inflater` makes it again; whether it was compressed.
    fn round_trip(
        compressor: &mut Compressor,
        inflater: &mut Inflater,
        piece: &[u8],
        follows: bool,
    ) -> Packed {
        let packed = compressor.pack(piece, follows);
        if let Packed::Zstd { len, fresh } = packed {
            let inflated = inflater.inflate(compressor.packed(len), fresh);
            assert!(inflated == piece, "the frame does not decompress to itself");
        }
        packed
    }

    #[test]
    fn text_shrinks_and_random_goes_as_it_is_then_is_rarely_tried() {
        let mut compressor = Compressor::new(Compress::Zstd(1), None);
        let mut inflater = Inflater::new();
        let piece = text(65_000);
        let packed = round_trip(&mut compressor, &mut inflater, &piece, false);
        assert!(matches!(packed, Packed::Zstd { fresh: true, .. }), "text did not shrink");
        // `unshrunk` counts the trials that did not shrink; the first go as zstd stored
        // them, a few bytes more, so that the history goes on; then they are stored.
        let noise = |seed: u32| random(MOST_PACKED, u64::from(seed) * 2 + 101);
        for tried in 1..RUN {
            let noise = noise(tried);
            let packed = round_trip(&mut compressor, &mut inflater, &noise, true);
            let Packed::Zstd { len, fresh: false } = packed else { panic!("{packed:?}") };
            assert!(len > noise.len() * SHRINK.0 / SHRINK.1 && len <= MAX_PAYLOAD, "{len}");
            assert_eq!(compressor.unshrunk, tried, "every frame of the first run is tried");
        }
        assert_eq!(compressor.pack(&noise(RUN), true), Packed::Raw);
        assert_eq!(compressor.unshrunk, RUN);
        // Then trials thin out: 1, 2, 4, 8 frames untried, then one in TRY_ONE_IN tried.
        let noise = noise(0);
        for (tried, skipped) in (RUN + 1..).zip([1, 2, 4, 8, TRY_ONE_IN - 1, TRY_ONE_IN - 1]) {
            for _ in 0..skipped {
                assert_eq!(compressor.pack(&noise, false), Packed::Raw);
            }
            assert_eq!(compressor.unshrunk, tried - 1, "sent untried");
            assert_eq!(compressor.pack(&noise, false), Packed::Raw);
            assert_eq!(compressor.unshrunk, tried, "then tried");
        }
        // Once a trial shrinks, every frame is tried again; after frames sent as they
        // were, a compressed one starts a zstd frame.
        while compressor.skip > 0 {
            compressor.pack(&noise, false);
        }
        let packed = round_trip(&mut compressor, &mut inflater, &piece, true);
        assert!(matches!(packed, Packed::Zstd { fresh: true, .. }));
        assert_eq!((compressor.unshrunk, compressor.skip), (0, 0));
    }

    #[test]
    fn data_is_incompressible_from_a_run_of_frames_until_one_shrinks() {
        // What `auto`'s socket hold follows (channel::send::UNSENT): held while frames
        // shrink, let go once a run of them has not, held again by the first that does.
        let mut compressor = Compressor::new(Compress::Auto, None);
        let piece = text(60_000);
        assert!(matches!(compressor.pack(&piece, false), Packed::Zstd { .. }));
        assert!(!compressor.incompressible());
        // Each frame new noise: a repeat would shrink, referring to the frame before.
        let noise = |seed: u32| random(MOST_PACKED, u64::from(seed) * 2 + 7);
        for seed in 1..RUN {
            assert!(matches!(compressor.pack(&noise(seed), true), Packed::Zstd { .. }));
            assert!(!compressor.incompressible(), "before a run of {RUN}");
        }
        assert_eq!(compressor.pack(&noise(RUN), true), Packed::Raw);
        assert!(compressor.incompressible());
        // A new level tries every frame again (as `sent` does on a move), and the data is
        // still incompressible until one of them shrinks.
        (compressor.unshrunk, compressor.skip) = (0, 0);
        assert!(matches!(compressor.pack(&noise(0), false), Packed::Zstd { .. }));
        assert!(compressor.incompressible(), "a frame that did not shrink changed nothing");
        assert!(matches!(compressor.pack(&piece, false), Packed::Zstd { .. }));
        assert!(!compressor.incompressible(), "a frame that shrank");
    }

    #[test]
    fn frames_refer_to_the_frames_before_them_within_a_session() {
        // Random bytes do not shrink alone, but the same again shrinks to almost nothing
        // when the frame before is still in the history.
        let noise = random(60_000, 11);
        let mut compressor = Compressor::new(Compress::Zstd(1), None);
        let mut inflater = Inflater::new();
        let piece = text(60_000);
        let packed = round_trip(&mut compressor, &mut inflater, &piece, false);
        assert!(matches!(packed, Packed::Zstd { fresh: true, .. }));
        let mut both = piece[..30_000].to_vec();
        both.extend_from_slice(&noise[..30_000]);
        let packed = round_trip(&mut compressor, &mut inflater, &both, true);
        assert!(matches!(packed, Packed::Zstd { fresh: false, .. }), "{packed:?}");
        let packed = round_trip(&mut compressor, &mut inflater, &noise[..30_000], true);
        let Packed::Zstd { len, fresh: false } = packed else {
            panic!("a repeat of the frame before did not refer to it: {packed:?}")
        };
        assert!(len < 1000, "the repeat took {len} bytes");
        // A new session (the channel says the receiver's context is new) starts afresh,
        // and the repeat is gone with the history: it does not shrink, but goes as zstd
        // stored it.
        let packed = round_trip(&mut compressor, &mut inflater, &noise[..30_000], false);
        let Packed::Zstd { len, fresh: true } = packed else { panic!("{packed:?}") };
        assert!(len > 30_000, "{len}");
        // A frame sent as it is breaks the chain: the next compressed one starts afresh,
        // even if the channel says the last frame it sent was compressed.
        compressor.unshrunk = RUN;
        assert_eq!(compressor.pack(&noise[30_000..], true), Packed::Raw);
        compressor.skip = 0;
        let packed = round_trip(&mut compressor, &mut inflater, &piece, true);
        assert!(matches!(packed, Packed::Zstd { fresh: true, .. }), "{packed:?}");
    }

    #[test]
    fn a_new_level_starts_a_zstd_frame() {
        let mut compressor = Compressor::new(Compress::Auto, None);
        let mut inflater = Inflater::new();
        let piece = text(60_000);
        assert!(matches!(
            round_trip(&mut compressor, &mut inflater, &piece, false),
            Packed::Zstd { fresh: true, .. }
        ));
        assert!(matches!(
            round_trip(&mut compressor, &mut inflater, &piece, true),
            Packed::Zstd { fresh: false, .. }
        ));
        // As `sent` does when `adapt` moves the level.
        set_level(compressor.zstd.as_mut().unwrap(), 9).unwrap();
        compressor.open = false;
        assert!(matches!(
            round_trip(&mut compressor, &mut inflater, &piece, true),
            Packed::Zstd { fresh: true, .. }
        ));
        // With level 9's tables, not level 1's: the sizes set for a level are not left over.
        let mut nine = Compressor::new(Compress::Zstd(9), None);
        nine.pack(&piece, false);
        let size = |compressor: &Compressor| compressor.zstd.as_ref().map(CCtx::sizeof);
        assert_eq!(size(&compressor), size(&nine));
    }

    #[test]
    fn the_senders_context_is_small_at_every_level() {
        // The window and its block buffers, 4.8 MiB, and tables of at most 2^20 entries (a
        // hash and a chain or a binary tree, 4 bytes each), with room for zstd's own: left to
        // zstd, a stream of unknown length takes 15 MiB at level 9, 45 at 12, 645 at 22.
        const MOST: usize = 14 << 20;
        let piece = text(MOST_PACKED);
        for level in LEVELS.filter(|&level| level != 0) {
            let mut compressor = Compressor::new(Compress::Zstd(level), None);
            compressor.pack(&piece, false);
            let size = compressor.zstd.as_ref().map_or(0, CCtx::sizeof);
            assert!(size > 4 << 20, "level {level}: {size} bytes, without the window?");
            assert!(size <= MOST, "level {level}: the context takes {} KiB", size >> 10);
        }
    }

    /// The ratio per level on a real stream (`ACCEL_CORPUS=FILE`, e.g. the bench's source
    /// tar), with the session's history and with each frame on its own: run with
    /// `cargo test --release --lib ratio_per_level -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement: needs ACCEL_CORPUS"]
    fn ratio_per_level() {
        let path = std::env::var("ACCEL_CORPUS").expect("ACCEL_CORPUS=FILE");
        let corpus = std::fs::read(path).unwrap();
        for level in [-7, -3, 1, 3, 6, 9, 12] {
            for history in [false, true] {
                let mut compressor = Compressor::new(Compress::Zstd(level), None);
                let (mut wire, started) = (0usize, Instant::now());
                for frame in corpus.chunks(compressor.most_per_frame()) {
                    wire += match compressor.pack(frame, history) {
                        Packed::Raw => frame.len(),
                        Packed::Zstd { len, .. } => len,
                    };
                }
                let ratio = corpus.len() as f64 / wire as f64;
                let rate = corpus.len() as f64 / started.elapsed().as_secs_f64() / 1048576.0;
                let context = compressor.zstd.as_ref().map_or(0, CCtx::sizeof) >> 10;
                println!(
                    "zstd {level:>2}, history {history:>5}: x{ratio:.3}, {rate:.0} MiB/s, \
                     context {context} KiB"
                );
            }
        }
    }

    #[test]
    fn the_first_period_starts_with_the_first_batch() {
        // The link was set up (a handshake, a round trip or more) long before the first
        // batch: that time is not the first period's, which ends a quick period after the
        // first batch, not at once.
        let mut compressor = Compressor::new(Compress::Auto, None);
        let long_ago = Instant::now() - Duration::from_secs(1);
        compressor.period.started = long_ago;
        compressor.framed(65_000, 30_000, false);
        let started = Instant::now();
        compressor.sent(started, Duration::ZERO, Duration::ZERO, 30_000, || (0, None));
        assert_eq!(compressor.period.stream, 65_000, "the first period ended at its first batch");
        assert!(compressor.period.started >= started);
    }

    #[test]
    fn none_never_compresses() {
        let mut compressor = Compressor::none();
        assert_eq!(compressor.pack(&text(10_000), false), Packed::Raw);
        compressor.framed(10_000, 10_000, true);
        compressor.sent(Instant::now(), Duration::ZERO, Duration::ZERO, 10_030, || (0, None));
        assert_eq!(compressor.wire().frames, 1);
        assert_eq!(compressor.wire().stored, 0, "nothing is 'stored' where nothing is tried");
        assert!(!compressor.wire().compressing);
    }

    #[test]
    fn a_batch_the_connection_dropped_is_counted_when_it_goes_again() {
        // Framed, then its write failed: the frames go again, framed anew, on the next
        // connection, and the stream bytes counted are those the wire bytes carried.
        let mut compressor = Compressor::none();
        compressor.framed(65_000, 65_000, false);
        compressor.batch_lost();
        compressor.framed(65_000, 65_000, false);
        compressor.sent(Instant::now(), Duration::ZERO, Duration::ZERO, 65_029, || (0, None));
        let wire = compressor.wire();
        assert_eq!((wire.stream, wire.frames, wire.bytes), (65_000, 1, 65_029));
    }

    #[test]
    fn a_batch_on_several_threads_is_a_zstd_frame_per_thread_in_order() {
        let mut compressor = Compressor::new(Compress::Zstd(3), None);
        let frames: Vec<Vec<u8>> = (0..7).map(|i| text(MOST_PACKED - i * 100)).collect();
        let pieces: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        // Not while compressing has not been the bottleneck.
        assert_eq!(compressor.threads_for(pieces.len()), 1);
        compressor.parallel = true;
        compressor.threads = 3;
        assert_eq!(compressor.threads_for(pieces.len()), 3);
        assert_eq!(compressor.threads_for(2), 2, "a frame for each");
        compressor.pack_batch(&pieces, 3);
        let packs = compressor.take_packs();
        assert_eq!(packs.frames.len(), pieces.len());
        // Runs of 3, 3 and 1 frames, each starting a zstd frame, decompressed in order by
        // one context as the receiver's does.
        let mut inflater = Inflater::new();
        let mut starts = Vec::new();
        for (i, (&(len, packed, from), piece)) in packs.frames.iter().zip(&pieces).enumerate() {
            assert_eq!(len, piece.len());
            let Packed::Zstd { len, fresh } = packed else { panic!("{packed:?}") };
            if fresh {
                starts.push(i);
            }
            let inflated = inflater.inflate(&packs.payload[from..from + len], fresh);
            assert!(inflated == *piece, "frame {i} does not decompress to itself");
        }
        assert_eq!(starts, vec![0, 3, 6]);
        compressor.give_back(packs);
        // The sending thread packed the last run: the next batch on it alone goes on with
        // that zstd frame.
        let packed = round_trip(&mut compressor, &mut inflater, &text(1000), true);
        assert!(matches!(packed, Packed::Zstd { fresh: false, .. }), "{packed:?}");
        // Frames that stopped shrinking are never given to helpers; nor is `none`.
        compressor.unshrunk = 1;
        assert_eq!(compressor.threads_for(pieces.len()), 1);
        let mut none = Compressor::none();
        (none.parallel, none.threads) = (true, 3);
        assert_eq!(none.threads_for(pieces.len()), 1);
    }
}
