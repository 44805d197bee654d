//! The sending side of a session: the stream's bytes sealed into Data frames, the End, and
//! the receiver's confirmations heard (between batches, while waiting for space to send, and
//! after the End until the Ack); a new session told where to go on (the Resume frame).

use std::io;
use std::ops::Range;
use std::time::{Duration, Instant};

use super::{BATCH, Channel, Frame, unexpected};
use crate::net::closed_by_peer;
use crate::net::compress::{Compressor, MOST_PACKED, Packed};
use crate::net::wire::{Credit, Kind, MAX_FRAME};
use crate::stop::Stop;
use crate::words::byte_count;

/// How often, at most, a sender looks for confirmations between batches: a read that finds
/// nothing costs a system call.
const LOOK: Duration = Duration::from_millis(10);

/// The most stream bytes in the stream's first frame: a frame is opened only once all of it
/// has come, and a fresh connection may carry TCP's initial window (10 segments, about
/// 14 KiB) per round trip, so a first frame of 64 KiB would reach the receiver's output two
/// round trips after one that fits the first window with the handshake's Start (80 ms at
/// 40 ms). Every later frame is full size: by then the window has grown.
pub(super) const FIRST_PAYLOAD: usize = 8 << 10;

/// The most units of several connections one batch takes ([`Channel::send_units`]): a
/// frame each, one more for the stream's first (short), and a heartbeat still queued fit
/// the outgoing buffer (a batch and a frame).
pub const MOST_UNITS: usize = BATCH / MAX_FRAME - 1;

/// With `--compress auto`, the most bytes not yet sent that the socket holds beyond those in
/// flight (`TCP_NOTSENT_LOWAT`): a send buffer autotuned to megabytes took a 16 MiB stream
/// whole at the starting level within half a second on a 50 Mbit/s link, before the level
/// had been judged, and its writes, which never waited, had the link at three times its
/// rate. Held to this, a write waits once the link is full: it says the link's rate, and the
/// bytes a level change comes too late for are those in flight and these. Enough for 4 ms of
/// a 1 Gbit/s link, which the bytes in flight cover while the sender is woken. Only while
/// the data compresses: once frames go as they are, the socket takes what its buffer has
/// room for, as with `--compress none` (`Channel::hold_unsent`).
pub const UNSENT: usize = 512 << 10;

/// The most the same may be while a batch's frames are compressed on several threads,
/// compressing being the bottleneck ([`Compressor::threads_for`]): the link drains [`UNSENT`]
/// in 4 ms at 1 Gbit/s, less than a batch takes to compress, and then waits for it; held to
/// this, it has 17 ms of bytes. Frames that do not compress never go to several threads, and
/// keep [`UNSENT`]; nor does a slower link ([`unsent_parallel`]).
pub const UNSENT_PARALLEL: usize = 4 * UNSENT;

/// What the unsent bytes held while helpers compress may last the link, at the wire rate it
/// took: a few batches' compressing. While compressing is the bottleneck, the link takes less
/// than it could (at 1 Gbit/s, 50 MiB/s of wire on two threads at level 1): the full
/// [`UNSENT_PARALLEL`] from 37.5 MiB/s of wire up, [`UNSENT`] below 12.5.
const PARALLEL_LASTS: Duration = Duration::from_millis(40);

/// The unsent bytes held while helpers compress, the link having taken `rate` wire bytes a
/// second: what it takes in [`PARALLEL_LASTS`], in steps of [`UNSENT`], from [`UNSENT`] to
/// [`UNSENT_PARALLEL`]. Only a fast link drains [`UNSENT`] before a batch is compressed: at
/// 20 Mbit/s it is a fifth of a second, and 2 MiB unsent, most of a second, would be judged
/// as the link's.
fn unsent_parallel(rate: f64) -> usize {
    let steps = (rate * PARALLEL_LASTS.as_secs_f64() / UNSENT as f64).ceil() as usize;
    UNSENT * steps.clamp(1, UNSENT_PARALLEL / UNSENT)
}

/// How many times the bytes in flight the unsent bytes of a socket let go may be for it to
/// stay let go once frames compress again ([`stays_let_go`]): as many round trips of the
/// link. At 1 Gbit/s over 40 ms a piece of random data left 12-16 MB unsent beside 5.4-5.9 MB
/// in flight (100-130 ms of the link); at 50 Mbit/s as many would be seconds.
const LET_GO_ROUNDS: usize = 4;

/// Whether a socket let go while frames were stored stays let go now that they compress
/// again, having been written `written` bytes since: while some of the stored frames are still
/// unsent (it sends in order: of its `unsent` bytes, all but the last `written` are theirs),
/// and the link sends them within [`LET_GO_ROUNDS`] round trips (as many times the bytes in
/// flight: `unacknowledged` less `unsent`). Held at once, a write waits until the link has
/// sent all but the hold of them, and compressing waits with it: on the mix at 1 Gbit/s
/// (corpus and random in turn, 16 MiB each) each random piece left 12-16 MB unsent, the text
/// after it was compressed only once they were sent, slower than the link (level 1 on two
/// threads, 70 MB/s of wire), and the link carried 60-110 MB/s rather than 124 for 50-100 ms
/// after each (`ss -tin` every 25 ms; `zstd -1 | accel`, whose zstd compresses ahead, 124
/// throughout). Let go, the text is compressed while they go. Once they are sent the hold
/// comes back: let go until the socket had few unsent bytes, a run at level -7 on the corpus
/// (faster than the link) after a short run of stored frames kept it full to the end and
/// went back to level 1 only at 230 MiB of 256 (x1.98 rather than x2.29).
fn stays_let_go(unsent: usize, unacknowledged: usize, written: u64) -> bool {
    let in_flight = unacknowledged.saturating_sub(unsent);
    unsent as u64 > written && unsent <= LET_GO_ROUNDS * in_flight
}

/// The unsent bytes the socket is to hold at most for the next batch with `auto` (`None`: as
/// many as its buffer takes), the `compressor` being where it is and, where the socket is let
/// go now, `let_go` its unsent and unacknowledged bytes and the wire bytes written since frames
/// were last stored: let go while frames are stored, and after them while [`stays_let_go`];
/// else [`UNSENT`], or [`unsent_parallel`] while helpers compress.
fn unsent_hold(compressor: &Compressor, let_go: Option<(usize, usize, u64)>) -> Option<usize> {
    let stays = |(unsent, unacknowledged, written)| stays_let_go(unsent, unacknowledged, written);
    if compressor.incompressible() || let_go.is_some_and(stays) {
        None
    } else if compressor.parallel() {
        Some(unsent_parallel(compressor.link_rate()))
    } else {
        Some(UNSENT)
    }
}

/// What a session's sending side keeps, beside the offset of the next byte to send.
#[derive(Debug)]
pub(super) struct Sending {
    /// The most bytes the receiver has confirmed its outputs took.
    confirmed: u64,
    /// The furthest stream offset sealed into a batch, sent or not (a connection cut in the
    /// middle of a batch may have carried some of it).
    reached: u64,
    /// When to look for confirmations next, between batches.
    next_look: Instant,
    /// The receiver closed its side; nothing more will come from it.
    pub(super) peer_closed: bool,
    /// This session's last Data frame was compressed: the next may go on with its zstd
    /// frame (the receiver's context is this session's).
    compressed: bool,
    /// The receiver's Ack, heard before this session's End was sent: in a session that took
    /// over from one dropped after the End, the receiver says it first.
    acked: Option<u64>,
    /// A confirmation was asked for ([`Channel::ask`]) and has not come: until it does, it
    /// is looked for between every two batches.
    pub(super) awaits_count: bool,
    /// The connection failed (the receiver's Abort, its close) while confirmations were
    /// taken in after a batch was written whole: the batch counts as sent, and the failure
    /// comes with the next call ([`Channel::earlier_failure`]).
    failed: Option<io::Error>,
    /// One of several connections: the furthest credit its Delivered frames carried.
    pub(super) credit: Option<Credit>,
    /// The unsent bytes the socket was asked to hold at most ([`UNSENT`], as `auto` needs
    /// while the data compresses; [`UNSENT_PARALLEL`]; `None`: as many as its buffer takes),
    /// and whether it does.
    unsent_asked: Option<usize>,
    unsent_held: bool,
    /// The wire bytes written since frames were last stored with the socket let go
    /// ([`stays_let_go`]).
    let_go_written: u64,
}

impl Sending {
    pub(super) fn new() -> Sending {
        Sending {
            confirmed: 0,
            reached: 0,
            next_look: Instant::now(),
            peer_closed: false,
            compressed: false,
            acked: None,
            awaits_count: false,
            credit: None,
            failed: None,
            unsent_asked: None,
            unsent_held: false,
            let_go_written: 0,
        }
    }
}

impl Channel {
    /// On a reconnection (sending side): waits, until `deadline`, for the receiver's Resume,
    /// and goes on where it says; the offset. It must be a byte the sender still holds: at
    /// least `kept`, at most `reached`.
    pub fn await_resume(
        &mut self,
        kept: u64,
        reached: u64,
        stop: &Stop,
        deadline: Instant,
    ) -> io::Result<u64> {
        loop {
            match self.open_next(&mut [])? {
                Some(Frame::Resume(offset)) if (kept..=reached).contains(&offset) => {
                    self.offset = offset;
                    self.sending.reached = offset;
                    self.sending.confirmed = kept;
                    return Ok(offset);
                }
                Some(Frame::Resume(offset)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the receiver asks to go on from byte {offset}, but bytes {kept} to \
                             {reached} are held"
                        ),
                    ));
                }
                Some(Frame::Delivered(_)) => continue,
                Some(other) => return Err(unexpected(&other)),
                None => {}
            }
            if self.read_sealed(stop, Some(deadline))? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the receiver closed the connection before saying where to go on",
                ));
            }
        }
    }

    /// Asks the receiver to say what it has delivered (sending side): a heartbeat, sent
    /// as data is, waiting for space until the run's `stop`.
    pub fn ask(&mut self, stop: &Stop) -> io::Result<()> {
        self.earlier_failure()?;
        self.sending.awaits_count = true;
        self.seal(Kind::Heartbeat, self.offset, &[]);
        self.write_out(stop, None, true, &[])
    }

    /// The sender's heartbeat, when the socket takes it at once (sending side): it also asks
    /// the receiver to say what it has delivered.
    pub fn heartbeat(&mut self) -> io::Result<()> {
        if self.broken || !self.socket.writable_now() {
            return Ok(());
        }
        self.seal(Kind::Heartbeat, self.offset, &[]);
        self.flush_regardless()
    }

    /// Stream bytes sent so far (sending side).
    pub fn sent(&self) -> u64 {
        self.offset
    }

    /// The furthest stream offset sealed to be sent (sending side): the receiver may have
    /// up to this many bytes, if the connection was cut while they went.
    pub fn reached(&self) -> u64 {
        self.sending.reached.max(self.offset)
    }

    /// Takes in the confirmations that have arrived, without waiting (sending side).
    pub fn take_confirmations_now(&mut self) -> io::Result<()> {
        self.earlier_failure()?;
        self.take_confirmations()
    }

    /// The failure met after the last batch was written, once (sending side).
    fn earlier_failure(&mut self) -> io::Result<()> {
        self.sending.failed.take().map_or(Ok(()), Err)
    }

    /// Stream bytes the receiver has confirmed its outputs took, as far as has been heard
    /// (sending side).
    pub fn confirmed(&self) -> u64 {
        self.sending.confirmed
    }

    /// One of several connections: the furthest credit the receiver gave on it (sending
    /// side), if it gave any.
    pub fn credit(&self) -> Option<Credit> {
        self.sending.credit
    }

    /// Takes in the confirmations that have arrived, without waiting (sending side). The
    /// receiver never closes its side before the stream has ended: if it did, it is gone.
    pub(super) fn take_confirmations(&mut self) -> io::Result<()> {
        loop {
            while let Some(frame) = self.open_next(&mut [])? {
                match frame {
                    Frame::Delivered(count) => {
                        self.sending.awaits_count &= count <= self.sending.confirmed;
                        self.sending.confirmed = self.sending.confirmed.max(count);
                    }
                    // Taken up by the End (end_stream), which checks its count.
                    Frame::Ack(count) => self.sending.acked = Some(count),
                    Frame::Abort(why) => return Err(receiver_stopped(self.offset, &why)),
                    other => return Err(unexpected(&other)),
                }
            }
            match self.read_sealed_now()? {
                Some(0) => {
                    self.sending.peer_closed = true;
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the receiver closed the connection",
                    ));
                }
                Some(_) => {}
                None => return Ok(()),
            }
        }
    }

    /// Sends some of `data` (up to a batch of frames; the stream's first frame short, see
    /// [`FIRST_PAYLOAD`]), each frame's payload as `compressor`
    /// packs it (compressed, or as it is); returns how many stream bytes, once written.
    pub fn send(
        &mut self,
        data: &[u8],
        stop: &Stop,
        compressor: &mut Compressor,
    ) -> io::Result<usize> {
        self.earlier_failure()?;
        let started = Instant::now();
        let mut taken = 0;
        // A frame that may be compressed leaves zstd room for its headers.
        let most = compressor.most_per_frame();
        // Full frames while the batch has room for one, and the last of the piece in any
        // case (the outgoing buffer has room for it): see `BATCH`. With several threads,
        // the frames are cut first, each counted full size.
        let threads = compressor.threads_for((data.len() / most).min(BATCH / MAX_FRAME));
        let mut pieces = Vec::new();
        while taken < data.len()
            && (self.batched() + MAX_FRAME * (pieces.len() + 1) <= BATCH
                || data.len() - taken <= most)
        {
            let longest = match self.offset + taken as u64 {
                0 => FIRST_PAYLOAD,
                _ => most,
            };
            let piece = taken..data.len().min(taken + longest);
            if threads > 1 {
                pieces.push(piece);
            } else {
                self.seal_piece(
                    self.offset + taken as u64,
                    &data[piece.clone()],
                    Some(piece),
                    compressor,
                );
            }
            taken = data.len().min(taken + longest);
        }
        if !pieces.is_empty() {
            self.seal_batch(&pieces, data, threads, compressor);
        }
        self.sending.reached = self.offset + taken as u64;
        self.write_batch(started, self.offset + taken as u64, stop, compressor, data)?;
        Ok(taken)
    }

    /// Sends `units`, each of at most [`MOST_PACKED`] stream bytes (a frame's payload, with
    /// zstd's room when it is compressed) at a stream offset of its own (one of several
    /// connections: [`Channel::seek`] for each), in one batch, one write for them all (a unit
    /// a write cost a system call and a wakeup a frame): at most [`MOST_UNITS`] of them. Each
    /// frame's payload as `compressor` packs it; the stream's first frame short, as
    /// [`Channel::send`] makes it.
    pub fn send_units(
        &mut self,
        units: &[(u64, &[u8])],
        stop: &Stop,
        compressor: &mut Compressor,
    ) -> io::Result<()> {
        debug_assert!(units.len() <= MOST_UNITS && units.iter().all(|u| u.1.len() <= MOST_PACKED));
        self.earlier_failure()?;
        let started = Instant::now();
        for &(at, bytes) in units {
            // The stream's first frame short (FIRST_PAYLOAD): one frame more, which the
            // batch's spare frame takes.
            let first = if at == 0 { bytes.len().min(FIRST_PAYLOAD) } else { bytes.len() };
            let (head, rest) = bytes.split_at(first);
            self.seal_piece(at, head, None, compressor);
            if !rest.is_empty() {
                self.seal_piece(at + first as u64, rest, None, compressor);
            }
            self.sending.reached = self.sending.reached.max(at + bytes.len() as u64);
        }
        let to = units.last().map_or(self.offset, |&(at, bytes)| at + bytes.len() as u64);
        self.write_batch(started, to, stop, compressor, &[])
    }

    /// Seals `piece`, the stream bytes at `at`, as a frame, as `compressor` packs it: a
    /// compressed frame goes on with this session's zstd frame when the one before was
    /// compressed too. Through ssh, a piece that goes as it is and is `lent` (those bytes of
    /// the data the batch is written with) is not copied.
    fn seal_piece(
        &mut self,
        at: u64,
        piece: &[u8],
        lent: Option<Range<usize>>,
        compressor: &mut Compressor,
    ) {
        let packed = compressor.pack(piece, self.sending.compressed);
        let payload = match packed {
            Packed::Zstd { len, .. } => compressor.packed(len),
            Packed::Raw => &[],
        };
        let (wire, stored) = self.seal_packed(at, piece, lent, packed, payload);
        compressor.framed(piece.len(), wire, stored);
    }

    /// Seals `piece`, the stream bytes at `at`, as `packed` says: as it is (not copied
    /// when `lent`, see [`Channel::seal_piece`]), or compressed, `payload`. The payload's
    /// bytes, and whether the piece went as it is.
    fn seal_packed(
        &mut self,
        at: u64,
        piece: &[u8],
        lent: Option<Range<usize>>,
        packed: Packed,
        payload: &[u8],
    ) -> (usize, bool) {
        self.sending.compressed = matches!(packed, Packed::Zstd { .. });
        match packed {
            Packed::Raw => {
                match lent {
                    Some(lent) if self.clear => self.seal_lent(at, lent),
                    _ => self.seal(Kind::Data, at, piece),
                }
                (piece.len(), true)
            }
            Packed::Zstd { fresh, .. } => {
                let kind = if fresh { Kind::Zstd } else { Kind::ZstdMore };
                self.seal(kind, at, payload);
                (payload.len(), false)
            }
        }
    }

    /// Seals `pieces` of `data` (its bytes from the offset of the next byte to send, on),
    /// packed on `threads` threads ([`Compressor::pack_batch`]).
    fn seal_batch(
        &mut self,
        pieces: &[Range<usize>],
        data: &[u8],
        threads: usize,
        compressor: &mut Compressor,
    ) {
        let bytes: Vec<&[u8]> = pieces.iter().map(|piece| &data[piece.clone()]).collect();
        compressor.pack_batch(&bytes, threads);
        let packs = compressor.take_packs();
        for (piece, &(len, packed, from)) in pieces.iter().zip(&packs.frames) {
            debug_assert_eq!(len, piece.len());
            let at = self.offset + piece.start as u64;
            let payload = match packed {
                Packed::Zstd { len, .. } => &packs.payload[from..from + len],
                Packed::Raw => &[],
            };
            let lent = Some(piece.clone());
            let (wire, stored) = self.seal_packed(at, &data[piece.clone()], lent, packed, payload);
            compressor.framed(len, wire, stored);
        }
        compressor.give_back(packs);
    }

    /// Writes the batch sealed since `started` (with the payloads it lent from `data`), which
    /// sends the stream up to offset `to`, tells `compressor` where the time went, and takes
    /// in the confirmations when it is time to look.
    fn write_batch(
        &mut self,
        started: Instant,
        to: u64,
        stop: &Stop,
        compressor: &mut Compressor,
        data: &[u8],
    ) -> io::Result<()> {
        // Let go while frames that compress are written after stored ones ([`stays_let_go`]).
        let mut kept_let_go = false;
        if compressor.adapts() {
            let written = std::mem::take(&mut self.sending.let_go_written);
            let socket = || Some((self.socket.unsent()?, self.socket.unacknowledged()?, written));
            let let_go = self.sending.unsent_asked.is_none().then(socket).flatten();
            let unsent = unsent_hold(compressor, let_go);
            if unsent.is_none() && !compressor.incompressible() {
                self.sending.let_go_written = written;
                kept_let_go = true;
            }
            self.hold_unsent(unsent);
        }
        let (sealed, wire) = (Instant::now(), self.batched());
        if let Err(error) = self.write_out(stop, None, true, data) {
            compressor.batch_lost();
            return Err(error);
        }
        if kept_let_go {
            self.sending.let_go_written += wire as u64;
        }
        // Held to UNSENT, the socket takes the bytes in flight and UNSENT more: at a
        // connection's start (TCP's window a few segments), about UNSENT, counted twice.
        let held = self.sending.unsent_asked.filter(|_| self.sending.unsent_held).map(|b| 2 * b);
        let socket = || {
            let buffer = self.socket.send_buffer().min(held.unwrap_or(usize::MAX));
            (buffer, self.socket.unacknowledged())
        };
        compressor.sent(started, sealed - started, sealed.elapsed(), wire, socket);
        self.offset = to;
        if !self.sending.peer_closed
            && (self.sending.awaits_count || Instant::now() >= self.sending.next_look)
        {
            self.sending.next_look = Instant::now() + LOOK;
            // The batch went whole: its bytes were sent, whatever the receiver said since
            // (the output counts them, as the receiver's Abort does), and its failure comes
            // with the next call.
            if let Err(error) = self.take_confirmations() {
                self.broken = true;
                self.sending.failed = Some(closed_by_peer(error, "the receiver"));
            }
        }
        Ok(())
    }

    /// Has the socket hold at most `unsent` bytes not yet sent ([`UNSENT`], or more while
    /// helpers compress: [`unsent_parallel`]), or, with `None`, as many as its buffer takes
    /// (asked only when that changes). Once frames go as they are because the
    /// data does not compress, nothing the level is judged on needs the hold, and it cost:
    /// random data over 40 ms took 1.09 × none's time at 1 Gbit/s (256 MiB) and 1.06 × at
    /// 200 Mbit/s (64 MiB), 1.00 × and 1.03 × let go (bench's compress lab, 10 interleaved
    /// rounds). The time went at the start: where the receiver's window held TCP back for a
    /// few round trips and BBR left its startup early, a socket held to UNSENT took the link
    /// to its rate in 1.7 s rather than 0.9.
    fn hold_unsent(&mut self, unsent: Option<usize>) {
        if unsent != self.sending.unsent_asked {
            self.sending.unsent_asked = unsent;
            self.sending.unsent_held = match unsent {
                Some(bytes) => self.socket.hold_unsent(bytes),
                None => {
                    self.socket.release_unsent();
                    false
                }
            };
        }
    }

    /// Ends the stream: an End frame with the byte count, then waits for the receiver's Ack
    /// of that count, telling `heard` each confirmation (the count, and whether the Ack is
    /// still awaited) as it comes. The wait has no deadline of its own: the run's stop (a
    /// stall, a signal) ends it.
    ///
    /// The connection is not half-closed after the End: the receiver takes the sender's
    /// close as its word that it has the Ack ([`Channel::closed_now`]), and leaves. A close
    /// before the Ack would let the receiver go while the Ack, lost to a drop, has still to
    /// be said again.
    pub fn end_stream(&mut self, stop: &Stop, heard: &mut dyn FnMut(u64, bool)) -> io::Result<()> {
        self.earlier_failure()?;
        self.seal(Kind::End, self.offset, &[]);
        self.write_out(stop, None, true, &[])?;
        heard(self.sending.confirmed, true);
        loop {
            let frame = match self.sending.acked.take() {
                Some(count) => Some(Frame::Ack(count)),
                None => self.open_next(&mut [])?,
            };
            match frame {
                Some(Frame::Ack(count)) if count == self.offset => {
                    self.sending.confirmed = count;
                    heard(count, false);
                    return Ok(());
                }
                Some(Frame::Ack(count)) => {
                    return Err(io::Error::other(format!(
                        "the receiver confirmed the end of the stream at {}, but {} were sent",
                        byte_count(count),
                        byte_count(self.offset)
                    )));
                }
                Some(Frame::Delivered(count)) => {
                    self.sending.confirmed = self.sending.confirmed.max(count);
                    heard(self.sending.confirmed, true);
                    // The Ack may have come with it.
                    continue;
                }
                Some(Frame::Abort(why)) => return Err(receiver_stopped(self.offset, &why)),
                Some(other) => return Err(unexpected(&other)),
                None => {}
            }
            let silent_at = self.silent_at();
            let read = match self.read_sealed(stop, silent_at) {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    Err(self.silence_error("the receiver"))
                }
                read => read,
            };
            if self.sending.peer_closed || read? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the receiver closed the connection without confirming the end of the \
                     stream",
                ));
            }
        }
    }

    /// Tells the receiver the stream stops here, and why; best effort.
    pub fn abort(&mut self, why: &str) {
        if !self.broken {
            self.seal_frame(Kind::Abort, why.as_bytes());
            let _ = self.flush_regardless();
        }
    }
}

/// The receiver's word that it stops (its run failed): the stream cannot go on, so not an
/// error of a kind that counts as a drop ([`is_drop`](crate::net::is_drop)).
fn receiver_stopped(sent: u64, why: &str) -> io::Error {
    io::Error::other(format!(
        "the receiver stopped after {} were sent: {}",
        byte_count(sent),
        crate::words::printable(why)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::compress::Compress;

    /// Replays the socket `auto` saw on the mix (corpus and random in turn, 16 MiB each) over
    /// 40 ms: `ss -tin` of main's build at 1 Gbit/s (unsent bytes, and segments of 64960
    /// bytes in flight), and the socket's figures where the text came back at 200 Mbit/s.
    #[test]
    fn the_socket_stays_let_go_while_the_stored_frames_before_the_text_are_sent() {
        let compressor = Compressor::new(Compress::Auto, None);
        let segments = |n: usize| n * 64_960;
        // 1 Gbit/s: the random piece left 15.7 MB unsent, 63 segments in flight; the text's
        // first batch is compressed and written behind them, as are the next: 50 ms later,
        // 8.7 MB unsent, of which about 3.5 MB text (50 ms of level 1 on two threads, 170
        // MiB/s of the stream at x2.4).
        let unsent = 15_692_000;
        assert_eq!(unsent_hold(&compressor, Some((unsent, unsent + segments(63), 0))), None);
        let unsent = 8_703_000;
        let held = unsent_hold(&compressor, Some((unsent, unsent + segments(88), 3_500_000)));
        assert_eq!(held, None);
        // The stored frames sent (2.5 MB unsent, all of it text written since): held again,
        // as a socket never let go is, and from the start.
        let unsent = 2_468_000;
        let held = unsent_hold(&compressor, Some((unsent, unsent + segments(84), 5_000_000)));
        assert_eq!(held, Some(UNSENT));
        assert_eq!(unsent_hold(&compressor, None), Some(UNSENT));
        assert_eq!(unsent_hold(&compressor, Some((0, 45, 0))), Some(UNSENT));
        // 200 Mbit/s: 15.2 MB unsent beside 1.2 MB in flight, a second of the link: held at
        // once, as before.
        assert_eq!(unsent_hold(&compressor, Some((15_174_390, 16_343_454, 0))), Some(UNSENT));
    }

    #[test]
    fn only_a_fast_link_holds_more_unsent_while_helpers_compress() {
        let mib = |rate: f64| rate * f64::from(1 << 20);
        // 1 Gbit/s, the link full or held back by compressing: 512 KiB is 4 ms of it, less
        // than a batch takes to compress.
        assert_eq!(unsent_parallel(mib(117.0)), UNSENT_PARALLEL);
        assert_eq!(unsent_parallel(mib(40.0)), UNSENT_PARALLEL);
        // 200 Mbit/s: 40 ms of it.
        assert_eq!(unsent_parallel(mib(23.8)), 2 * UNSENT);
        // 20 Mbit/s (where 2 MiB unsent were 0.8 s of the link), and before the first
        // period: UNSENT lasts them long enough.
        for rate in [mib(2.4), 0.0] {
            assert_eq!(unsent_parallel(rate), UNSENT, "{rate}");
        }
    }
}
