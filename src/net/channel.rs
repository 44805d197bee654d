//! The secure channel: the stream cut into frames, each sealed with the session's Noise keys,
//! and the end of the stream confirmed in both directions (see `wire.rs` for the layout).
//!
//! The sender seals up to [`BATCH`] bytes of frames at a time and writes them in one call; the
//! receiver reads up to as much, opens every complete frame that fits into the caller's buffer
//! (straight into it when a whole message fits, else through a scratch buffer), and returns as
//! soon as it has any bytes, so a short line goes through at once. Every frame's offset must
//! be the next byte expected: a frame lost, repeated or reordered is an error, as is one
//! that fails authentication. The receiver treats the stream as complete only at an End frame
//! whose count matches what arrived; a connection that ends before it is an error that says
//! how many bytes arrived.
//!
//! Confirmations go the other way: while the stream goes, the receiver says how many bytes
//! its outputs have taken ([`Channel::deliver`]), and once they have taken them all after the
//! End, it sends the Ack ([`Channel::acknowledge_end`]). The sender takes them in as it sends
//! (between batches, and while it waits for room to send), so that at any failure it knows
//! what was delivered, and after its End it waits for the Ack ([`Channel::end_stream`]).

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use snow::TransportState;

use super::closed_by_peer;
use super::socket::Socket;
use super::wire::{self, Kind, MAX_FRAME, MAX_MESSAGE, MAX_PAYLOAD, REKEY_EVERY, SEALED_TRAILER};
use crate::stop::Stop;
use crate::stop::wait_for;
use crate::words::byte_count;

/// Bytes of sealed frames written at once, and read at once: 16 full frames. Fewer, larger
/// system calls; a larger batch only delays the first bytes of a fast stream.
pub const BATCH: usize = 16 * MAX_FRAME;

/// How long a word that goes whatever the run's stop says (a delivery count, the Ack, an
/// Abort) may take to be written.
const LAST_WORD: Duration = Duration::from_secs(30);

/// How often, at most, a sender looks for confirmations between batches: a read that finds
/// nothing costs a system call.
const LOOK: Duration = Duration::from_millis(10);

/// A frame, opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// `len` stream bytes: at the start of the buffer given to [`Channel::open_next`], or in
    /// the channel's pending plaintext.
    Data(usize),
    /// The sender's first frame.
    Start,
    /// The end of the stream, after this many bytes.
    End(u64),
    /// The sender stopped, saying why.
    Abort(String),
    /// The stream ended whole: the receiver's outputs took this many bytes.
    Ack(u64),
    /// The receiver's outputs have taken this many bytes (and its heartbeat).
    Delivered(u64),
    /// The sender's heartbeat.
    Heartbeat,
    /// On a reconnection: the receiver has this many bytes; the sender goes on there.
    Resume(u64),
}

/// One side of an established session.
pub struct Channel {
    socket: Arc<Socket>,
    noise: TransportState,
    /// The stream offset of the next byte to send, or to receive.
    offset: u64,
    /// Sealed bytes read from the socket, `incoming[unread]` not yet opened.
    incoming: Vec<u8>,
    unread: Range<usize>,
    /// Plaintext: a payload opened here when it did not fit the caller's buffer.
    scratch: Vec<u8>,
    /// `scratch[pending]`: stream bytes opened and not yet handed out.
    pending: Range<usize>,
    /// `outgoing[..queued]`: sealed frames to write. Allocated once, at its full size, so
    /// that sealing never zero-fills it first.
    outgoing: Vec<u8>,
    queued: usize,
    sent_messages: u64,
    received_messages: u64,
    /// Messages each way under one key ([`REKEY_EVERY`]; fewer in tests).
    rekey_every: u64,
    /// The End frame was received (receiving side).
    ended: bool,
    /// A write failed or was cut short, maybe mid-frame: nothing more can be sent.
    broken: bool,
    /// Sending side: the most bytes the receiver has confirmed its outputs took.
    confirmed: u64,
    /// Sending side: the furthest stream offset sealed into a batch, sent or not (a
    /// connection cut in the middle of a batch may have carried some of it).
    reached: u64,
    /// Sending side: when to look for confirmations next, between batches.
    next_look: Instant,
    /// Sending side: the receiver closed its side; nothing more will come from it.
    peer_closed: bool,
    /// Sending side: the receiver's Ack, heard before this session's End was sent: in a
    /// session that took over from one dropped after the End, the receiver says it first.
    acked: Option<u64>,
    /// The stream's name, from the sender's Hello.
    stream: [u8; 16],
    /// Receiving side: the sender's Hello goes on with its stream (a reconnection), so the
    /// sender waits for a Resume frame.
    goes_on: bool,
    /// When the peer was last heard from, and when this side last sent.
    last_heard: Instant,
    last_sent: Instant,
    /// How long the peer may say nothing before the path counts as dead.
    silence: Duration,
    /// Receiving side: the sender's heartbeat came, which also asks for a confirmation.
    /// Sending side: a confirmation was asked for; until it comes, it is looked for
    /// between every two batches.
    asked: bool,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("peer", &self.socket.peer())
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl Channel {
    /// The session over `socket` once the handshake is done, with `leftover` sealed bytes the
    /// handshake read past its own messages.
    pub fn new(socket: Arc<Socket>, noise: TransportState, leftover: &[u8]) -> Channel {
        let mut incoming = vec![0u8; BATCH.max(leftover.len())];
        incoming[..leftover.len()].copy_from_slice(leftover);
        Channel {
            socket,
            noise,
            offset: 0,
            incoming,
            unread: 0..leftover.len(),
            scratch: Vec::with_capacity(MAX_MESSAGE),
            pending: 0..0,
            outgoing: vec![0u8; BATCH],
            queued: 0,
            sent_messages: 0,
            received_messages: 0,
            rekey_every: REKEY_EVERY,
            ended: false,
            broken: false,
            confirmed: 0,
            reached: 0,
            next_look: Instant::now(),
            peer_closed: false,
            acked: None,
            stream: [0; 16],
            goes_on: false,
            last_heard: Instant::now(),
            last_sent: Instant::now(),
            silence: Duration::MAX,
            asked: false,
        }
    }

    /// Whether the sender asked for a confirmation since the last call (receiving side).
    pub fn take_asked(&mut self) -> bool {
        std::mem::take(&mut self.asked)
    }

    /// Names the stream this session carries.
    pub fn set_stream(&mut self, stream: [u8; 16]) {
        self.stream = stream;
    }

    /// The stream this session carries.
    pub fn stream(&self) -> [u8; 16] {
        self.stream
    }

    /// Takes the sender's Hello (receiving side): the stream, and whether it goes on.
    pub fn opened_by(&mut self, hello: &super::wire::Hello) {
        self.stream = hello.stream;
        self.goes_on = hello.resuming;
    }

    /// Whether the sender goes on with its stream, and waits for a Resume frame (receiving
    /// side).
    pub fn goes_on(&self) -> bool {
        self.goes_on
    }

    /// How long the peer may say nothing (it sends a heartbeat when it has nothing else to
    /// say) before the path counts as dead: reads and waits fail then.
    pub fn set_silence(&mut self, silence: Duration) {
        self.silence = silence;
    }

    /// When the peer's silence makes the path count as dead, as things stand.
    pub fn silent_at(&self) -> Option<Instant> {
        self.last_heard.checked_add(self.silence)
    }

    /// How long since this side last sent anything.
    pub fn quiet_for(&self) -> Duration {
        self.last_sent.elapsed()
    }

    /// The error of a peer silent for too long: `who` said nothing for so long.
    pub fn silence_error(&self, who: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("nothing heard from {who} for {}", super::seconds(self.silence)),
        )
    }

    /// Stream bytes handed out so far (receiving side): what a resumed stream goes on from.
    pub fn handed_out(&self) -> u64 {
        self.offset - self.pending.len() as u64
    }

    /// Whether the End frame came (receiving side).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Takes over from the session before it (receiving side): the stream goes on at `offset`,
    /// and has ended if it had; says so to the sender with a Resume frame.
    pub fn resume_from(&mut self, offset: u64, ended: bool) -> io::Result<()> {
        self.offset = offset;
        self.ended = ended;
        self.seal(Kind::Resume, offset, &[]);
        self.flush_regardless()
    }

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
                    self.reached = offset;
                    self.confirmed = kept;
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
    /// as data is, waiting for room until the run's `stop`.
    pub fn ask(&mut self, stop: &Stop) -> io::Result<()> {
        self.asked = true;
        self.seal(Kind::Heartbeat, self.offset, &[]);
        self.write_out(stop, None, true)
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

    /// Marks the session as done with: nothing more is sent or handed out, and the socket is
    /// shut down both ways, which wakes whoever waits on it.
    pub fn abandon(&mut self) {
        self.broken = true;
        self.pending = 0..0;
        self.unread = 0..0;
        self.socket.shut_down();
    }

    /// Whether a write failed or the session was abandoned: nothing more can be sent.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The socket.
    pub fn socket(&self) -> &Arc<Socket> {
        &self.socket
    }

    /// Stream bytes sent so far (sending side).
    pub fn sent(&self) -> u64 {
        self.offset
    }

    /// The furthest stream offset sealed to be sent (sending side): the receiver may have
    /// up to this many bytes, if the connection was cut while they went.
    pub fn reached(&self) -> u64 {
        self.reached.max(self.offset)
    }

    /// Takes in the confirmations that have arrived, without waiting (sending side).
    pub fn take_confirmations_now(&mut self) -> io::Result<()> {
        self.take_confirmations()
    }

    /// Stream bytes the receiver has confirmed its outputs took, as far as has been heard
    /// (sending side).
    pub fn confirmed(&self) -> u64 {
        self.confirmed
    }

    /// Seals `payload` as a frame of `kind` at `offset` onto the outgoing batch: the payload
    /// message, then the trailer message.
    fn seal(&mut self, kind: Kind, offset: u64, payload: &[u8]) {
        debug_assert!(payload.len() <= MAX_PAYLOAD);
        self.seal_message(payload);
        self.seal_message(&wire::trailer(kind, offset));
    }

    /// Seals one Noise message, behind its length, onto the outgoing batch.
    fn seal_message(&mut self, plaintext: &[u8]) {
        let at = self.queued;
        let sealed = self
            .noise
            .write_message(plaintext, &mut self.outgoing[at + 2..])
            .expect("at most a Noise message");
        self.outgoing[at..at + 2].copy_from_slice(&(sealed as u16).to_be_bytes());
        self.queued = at + 2 + sealed;
        self.sent_messages += 1;
        if self.sent_messages % self.rekey_every == 0 {
            self.noise.rekey_outgoing();
        }
    }

    /// Writes the outgoing batch; any failure leaves the channel broken.
    fn flush(&mut self, stop: &Stop, deadline: Option<Instant>) -> io::Result<()> {
        self.write_out(stop, deadline, false)
    }

    /// Writes the outgoing batch of a word that goes whatever the run's stop says: a delivery
    /// count, the Ack, an Abort. These are due after the run too, whose stop a stall or a
    /// failed output may have requested; they are bounded by [`LAST_WORD`] instead.
    fn flush_regardless(&mut self) -> io::Result<()> {
        // Never requested: an interrupted wait goes on, until the deadline.
        let unstopped = Stop::default();
        self.flush(&unstopped, Some(Instant::now() + LAST_WORD))
    }

    /// Writes the outgoing batch; `listening` (the sending side), takes in the receiver's
    /// confirmations while it waits for room, so that a sender held up by its receiver still
    /// learns what the receiver delivered. Any failure leaves the channel broken.
    fn write_out(
        &mut self,
        stop: &Stop,
        deadline: Option<Instant>,
        listening: bool,
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection failed earlier",
            ));
        }
        let (mut at, mut written) = (0, Ok(()));
        while at < self.queued && written.is_ok() {
            written = match self.socket.write_now(&self.outgoing[at..self.queued]) {
                Ok(Some(n)) => {
                    at += n;
                    self.last_sent = Instant::now();
                    Ok(())
                }
                Ok(None) if listening && !self.peer_closed => {
                    let either = PollFlags::OUT | PollFlags::IN;
                    let silent_at = self.silent_at();
                    let until = deadline.into_iter().chain(silent_at).min();
                    match wait_for(self.socket.fd(), either, stop, until) {
                        Err(e) if e.kind() == io::ErrorKind::TimedOut && until == silent_at => {
                            Err(self.silence_error("the receiver"))
                        }
                        waited => waited.and_then(|()| self.take_confirmations()),
                    }
                }
                Ok(None) => wait_for(self.socket.fd(), PollFlags::OUT, stop, deadline),
                Err(error) => {
                    if listening {
                        // The receiver's last confirmations may have come before it went.
                        let _ = self.take_confirmations();
                    }
                    Err(error)
                }
            };
        }
        self.queued = 0;
        written.map_err(|error| {
            self.broken = true;
            closed_by_peer(error, "the receiver")
        })
    }

    /// Takes in the confirmations that have arrived, without waiting (sending side). The
    /// receiver never closes its side before the stream has ended: if it did, it is gone.
    fn take_confirmations(&mut self) -> io::Result<()> {
        loop {
            while let Some(frame) = self.open_next(&mut [])? {
                match frame {
                    Frame::Delivered(count) => {
                        self.asked &= count <= self.confirmed;
                        self.confirmed = self.confirmed.max(count);
                    }
                    // Taken up by the End (end_stream), which checks its count.
                    Frame::Ack(count) => self.acked = Some(count),
                    Frame::Abort(why) => return Err(receiver_stopped(self.offset, &why)),
                    other => return Err(unexpected(&other)),
                }
            }
            match self.read_sealed_now()? {
                Some(0) => {
                    self.peer_closed = true;
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

    /// Sends a frame on its own, now.
    pub fn send_frame(
        &mut self,
        kind: Kind,
        payload: &[u8],
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        self.seal_frame(kind, payload);
        self.flush(stop, deadline)
    }

    /// Seals a frame of `kind` on its own at the current offset, its payload cut to what one
    /// frame carries.
    fn seal_frame(&mut self, kind: Kind, payload: &[u8]) {
        let payload = &payload[..payload.len().min(MAX_PAYLOAD)];
        self.seal(kind, self.offset, payload);
    }

    /// Sends some of `data` (up to a batch of frames); returns how many bytes, once written.
    pub fn send(&mut self, data: &[u8], stop: &Stop) -> io::Result<usize> {
        let mut taken = 0;
        while taken < data.len() && self.queued + MAX_FRAME <= BATCH {
            let piece = &data[taken..data.len().min(taken + MAX_PAYLOAD)];
            self.seal(Kind::Data, self.offset + taken as u64, piece);
            taken += piece.len();
        }
        self.reached = self.offset + taken as u64;
        self.write_out(stop, None, true)?;
        self.offset += taken as u64;
        if !self.peer_closed && (self.asked || Instant::now() >= self.next_look) {
            self.next_look = Instant::now() + LOOK;
            if let Err(error) = self.take_confirmations() {
                self.broken = true;
                return Err(closed_by_peer(error, "the receiver"));
            }
        }
        Ok(taken)
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
        self.seal(Kind::End, self.offset, &[]);
        self.write_out(stop, None, true)?;
        heard(self.confirmed, true);
        loop {
            let frame = match self.acked.take() {
                Some(count) => Some(Frame::Ack(count)),
                None => self.open_next(&mut [])?,
            };
            match frame {
                Some(Frame::Ack(count)) if count == self.offset => {
                    self.confirmed = count;
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
                    self.confirmed = self.confirmed.max(count);
                    heard(self.confirmed, true);
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
            if self.peer_closed || read? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the receiver closed the connection without confirming the end of the \
                     stream",
                ));
            }
        }
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
        if !self.ended {
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

    /// Tells the receiver the stream stops here, and why; best effort.
    pub fn abort(&mut self, why: &str) {
        if !self.broken {
            self.seal_frame(Kind::Abort, why.as_bytes());
            let _ = self.flush_regardless();
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
        loop {
            let mut got = self.hand_out(buf);
            while got < buf.len() && self.pending.is_empty() && !self.ended {
                match self.open_next(&mut buf[got..])? {
                    None => break,
                    Some(Frame::Data(len)) if self.pending.is_empty() => got += len,
                    Some(Frame::Data(_)) => got += self.hand_out(&mut buf[got..]),
                    Some(Frame::End(count)) => self.end_at(count)?,
                    Some(Frame::Heartbeat) => self.asked = true,
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
            if got > 0 || self.ended {
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
        self.ended = true;
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

    /// Reads more sealed bytes from the socket, waiting until `deadline` at most; 0 at the
    /// end of the connection.
    fn read_sealed(&mut self, stop: &Stop, deadline: Option<Instant>) -> io::Result<usize> {
        let end = self.unread_to_front();
        let n = self.socket.read(&mut self.incoming[end..], stop, deadline)?;
        self.unread.end += n;
        self.last_heard = Instant::now();
        Ok(n)
    }

    /// Reads the sealed bytes the socket has now, without waiting; 0 at the end of the
    /// connection, `None` when nothing has arrived.
    pub fn read_sealed_now(&mut self) -> io::Result<Option<usize>> {
        let end = self.unread_to_front();
        let got = self.socket.read_now(&mut self.incoming[end..])?;
        self.unread.end += got.unwrap_or(0);
        if got.is_some() {
            self.last_heard = Instant::now();
        }
        Ok(got)
    }

    /// Moves the sealed bytes not yet opened to the front of the buffer; returns where the
    /// room after them starts.
    fn unread_to_front(&mut self) -> usize {
        if self.unread.start > 0 {
            self.incoming.copy_within(self.unread.clone(), 0);
            self.unread = 0..self.unread.len();
        }
        self.unread.end
    }

    /// Opens the next complete frame, if one has arrived: a Data payload lands at the start of
    /// `room` when its whole message fits there, else in the pending plaintext.
    pub fn open_next(&mut self, room: &mut [u8]) -> io::Result<Option<Frame>> {
        let unread = &self.incoming[self.unread.clone()];
        let length = |at: usize| {
            unread.get(at..at + 2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        };
        let Some(len) = length(0) else { return Ok(None) };
        let Some(trailer_len) = length(2 + len) else { return Ok(None) };
        if len < wire::TAG || trailer_len != SEALED_TRAILER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a malformed frame from {}", self.socket.peer()),
            ));
        }
        let Some(sealed_trailer) = unread.get(4 + len..4 + len + trailer_len) else {
            return Ok(None);
        };
        let sealed = &unread[2..2 + len];
        let into_room = room.len() >= len;
        let mut incoming = Incoming {
            noise: &mut self.noise,
            received: &mut self.received_messages,
            rekey_every: self.rekey_every,
        };
        let payload = if into_room {
            incoming.open(sealed, room)
        } else {
            // Only opened when everything pending was handed out.
            self.pending = 0..0;
            self.scratch.resize(len, 0);
            incoming.open(sealed, &mut self.scratch)
        };
        let mut trailer = [0u8; SEALED_TRAILER];
        let opened = payload
            .and_then(|payload| incoming.open(sealed_trailer, &mut trailer).map(|n| (payload, n)));
        let (payload, trailer_len) = opened.map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "data from {} failed authentication: it was altered on the way",
                    self.socket.peer()
                ),
            )
        })?;
        self.unread.start += 4 + len + SEALED_TRAILER;
        let Some((kind, offset)) = wire::read_trailer(&trailer[..trailer_len]) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of an unknown kind from {}", self.socket.peer()),
            ));
        };
        let plaintext = if into_room { &room[..payload] } else { &self.scratch[..payload] };
        Ok(Some(match kind {
            Kind::Data => {
                if offset != self.offset {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a frame at offset {offset} where {} was next", self.offset),
                    ));
                }
                self.offset += payload as u64;
                if !into_room {
                    self.pending = 0..payload;
                }
                Frame::Data(payload)
            }
            Kind::Start => Frame::Start,
            Kind::End => Frame::End(offset),
            Kind::Ack => Frame::Ack(offset),
            Kind::Delivered => Frame::Delivered(offset),
            Kind::Heartbeat => Frame::Heartbeat,
            Kind::Resume => Frame::Resume(offset),
            Kind::Abort => Frame::Abort(String::from_utf8_lossy(plaintext).into_owned()),
        }))
    }
}

/// The receiving half of the Noise state, borrowed apart from the buffers it opens from.
struct Incoming<'a> {
    noise: &'a mut TransportState,
    received: &'a mut u64,
    rekey_every: u64,
}

impl Incoming<'_> {
    /// Opens one Noise message into `out`; the key changes after every `rekey_every`th, as
    /// the sender's does (between a payload and its trailer too).
    fn open(&mut self, sealed: &[u8], out: &mut [u8]) -> Result<usize, snow::Error> {
        let opened = self.noise.read_message(sealed, out)?;
        *self.received += 1;
        if *self.received % self.rekey_every == 0 {
            self.noise.rekey_incoming();
        }
        Ok(opened)
    }
}

/// The receiver's word that it stops (its run failed): the stream cannot go on, so not an
/// error of a kind that counts as a drop ([`super::is_drop`]).
fn receiver_stopped(sent: u64, why: &str) -> io::Error {
    io::Error::other(format!(
        "the receiver stopped after {} were sent: {}",
        byte_count(sent),
        crate::words::printable(why)
    ))
}

fn unexpected(frame: &Frame) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("an unexpected frame: {frame:?}"))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::thread;

    use super::*;
    use crate::net::key::Key;
    use crate::net::socket;
    use crate::net::wire::Cipher;

    /// A session's two ends, as a handshake would leave them, over `sender` and `receiver`.
    fn session(cipher: Cipher, sender: Socket, receiver: Socket) -> (Channel, Channel) {
        let key = Key::generate().unwrap();
        let mut initiator = wire::handshake(cipher, &key, true);
        let mut responder = wire::handshake(cipher, &key, false);
        let (mut message, mut payload) = (vec![0u8; 1024], vec![0u8; 1024]);
        let n = initiator.write_message(&[], &mut message).unwrap();
        responder.read_message(&message[..n], &mut payload).unwrap();
        let n = responder.write_message(&[], &mut message).unwrap();
        initiator.read_message(&message[..n], &mut payload).unwrap();
        let ends = |socket, noise: snow::HandshakeState| {
            Channel::new(Arc::new(socket), noise.into_transport_mode().unwrap(), &[])
        };
        (ends(sender, initiator), ends(receiver, responder))
    }

    /// Everything the receiver gets until the end, reading into `room`-byte buffers.
    fn receive_all(receiver: &mut Channel, room: usize) -> io::Result<Vec<u8>> {
        let (mut got, mut buf) = (Vec::new(), vec![0u8; room]);
        loop {
            match receiver.receive(&mut buf, &Stop::default())? {
                0 => return Ok(got),
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Sends `data` in pieces of `piece`, then ends the stream; what `finish` said.
    fn send_all(mut sender: Channel, data: Vec<u8>, piece: usize) -> io::Result<()> {
        for mut chunk in data.chunks(piece) {
            while !chunk.is_empty() {
                let n = sender.send(chunk, &Stop::default())?;
                chunk = &chunk[n..];
            }
        }
        sender.end_stream(&Stop::default(), &mut |_, _| {})
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn a_stream_arrives_whole_and_its_end_is_confirmed() {
        for (cipher, piece, room) in
            [(Cipher::AesGcm, 300_000, 1 << 20), (Cipher::ChaChaPoly, 70_000, 1000)]
        {
            let (near, far) = socket::pair();
            let (sender, mut receiver) = session(cipher, near, far);
            let sent = data(1_000_003);
            let expected = sent.clone();
            let sending = thread::spawn(move || send_all(sender, sent, piece));
            let got = receive_all(&mut receiver, room).unwrap();
            assert_eq!(got.len(), expected.len(), "{cipher:?}");
            assert!(got == expected, "{cipher:?}: the bytes differ");
            receiver.acknowledge_end().unwrap();
            sending.join().unwrap().expect("the receiver confirmed the end");
        }
    }

    #[test]
    fn keys_change_in_step_and_a_side_that_does_not_follow_fails() {
        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        sender.rekey_every = 3;
        receiver.rekey_every = 3;
        let sent = data(200_000);
        let expected = sent.clone();
        let sending = thread::spawn(move || send_all(sender, sent, 5000));
        assert!(receive_all(&mut receiver, 4096).unwrap() == expected);
        receiver.acknowledge_end().unwrap();
        sending.join().unwrap().unwrap();

        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        sender.rekey_every = 3;
        let sending = thread::spawn(move || send_all(sender, data(200_000), 5000));
        let error = receive_all(&mut receiver, 4096).unwrap_err();
        assert!(error.to_string().contains("failed authentication"), "{error}");
        drop(receiver);
        assert!(sending.join().unwrap().is_err());
    }

    #[test]
    fn the_sender_hears_what_was_delivered_and_the_end_only_once_acknowledged() {
        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::ChaChaPoly, near, far);
        let stop = Stop::default();
        // Less than a loopback socket holds: it is sent before anyone reads.
        assert_eq!(sender.send(&data(20_000), &stop).unwrap(), 20_000);
        let mut got = vec![0u8; 20_000];
        let mut at = 0;
        while at < got.len() {
            at += receiver.receive(&mut got[at..], &stop).unwrap();
        }
        // Before the End, the Ack cannot be sent; a delivery count can.
        assert!(receiver.acknowledge_end().is_err());
        receiver.deliver(8_000).unwrap();
        let ended = thread::spawn(move || {
            let mut heard = Vec::new();
            let result =
                sender.end_stream(&stop, &mut |count, awaiting| heard.push((count, awaiting)));
            (result, heard, sender.confirmed())
        });
        assert_eq!(receiver.receive(&mut [0u8; 16], &Stop::default()).unwrap(), 0, "the End");
        receiver.deliver(20_000).unwrap();
        receiver.acknowledge_end().unwrap();
        let (result, heard, confirmed) = ended.join().unwrap();
        result.expect("the end confirmed");
        assert_eq!(confirmed, 20_000);
        assert_eq!(heard.last(), Some(&(20_000, false)), "{heard:?}");
        assert!(heard.contains(&(8_000, true)), "the first delivery: {heard:?}");
        assert!(heard.contains(&(20_000, true)), "the delivery before the Ack: {heard:?}");
        assert!(heard.windows(2).all(|w| w[0].0 <= w[1].0), "{heard:?}");
    }

    #[test]
    fn the_end_unconfirmed_is_an_error() {
        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        let stop = Stop::default();
        sender.send(&data(1000), &stop).unwrap();
        let ended = thread::spawn(move || sender.end_stream(&Stop::default(), &mut |_, _| {}));
        assert_eq!(receive_all(&mut receiver, 4096).unwrap().len(), 1000);
        drop(receiver);
        let error = ended.join().unwrap().unwrap_err();
        assert!(error.to_string().contains("without confirming the end of the stream"), "{error}");
    }

    #[test]
    fn a_stream_cut_short_is_not_an_end() {
        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        assert_eq!(sender.send(&data(100_000), &Stop::default()).unwrap(), 100_000);
        drop(sender);
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        let error = loop {
            match receiver.receive(&mut buf, &Stop::default()) {
                Ok(n) => got += n,
                Err(error) => break error,
            }
        };
        assert_eq!(got, 100_000, "what arrived is passed on");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(error.to_string().ends_with("ended before the sender's end-of-stream mark"));
    }

    /// Issue 20: a new session goes on where the receiver says, which must be a byte the
    /// sender still holds; the stream's end carries over to it.
    #[test]
    fn a_new_session_goes_on_where_the_receiver_says() {
        let stop = Stop::default();
        let (near, far) = socket::pair();
        let (mut sender, mut receiver_again) = session(Cipher::AesGcm, near, far);
        receiver_again.resume_from(7_000, false).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        assert_eq!(sender.await_resume(5_000, 9_000, &stop, deadline).unwrap(), 7_000);
        assert_eq!((sender.sent(), sender.confirmed()), (7_000, 5_000));
        // Data goes on at 7000, as the receiver expects.
        assert_eq!(sender.send(&data(100), &stop).unwrap(), 100);
        let mut got = [0u8; 100];
        assert_eq!(receiver_again.receive(&mut got, &stop).unwrap(), 100);
        assert_eq!(receiver_again.handed_out(), 7_100);
        // A Resume outside what the sender holds is refused.
        let (near, far) = socket::pair();
        let (mut sender, mut stranger) = session(Cipher::ChaChaPoly, near, far);
        stranger.resume_from(12_000, true).unwrap();
        let error = sender.await_resume(5_000, 9_000, &stop, deadline).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        // The end carried over: the Ack may be sent without a new End.
        assert!(stranger.acknowledge_end().is_ok());
    }

    /// Issue 17, item 9: the sender's reason for stopping reaches the receiver's terminal
    /// with its control characters shown as `?`: no escape sequence of a peer's is printed.
    #[test]
    fn an_abort_reason_is_printed_without_its_escapes() {
        let (near, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        sender.abort("\x1b]0;owned\x07 \x1b[2J\rgone\nfor good");
        let error = receiver.receive(&mut [0u8; 4096], &Stop::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the sender stopped after 0 bytes: ?]0;owned? ?[2J?gone?for good"
        );
    }

    #[test]
    fn altered_bytes_are_caught() {
        // sender -> (this test, which flips one bit) -> receiver
        let (near, middle_in) = socket::pair();
        let (middle_out, far) = socket::pair();
        let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
        sender.send(&data(1000), &Stop::default()).unwrap();
        // SAFETY: borrowed for the test's own reads and writes; the Sockets keep them open.
        let mut tap = unsafe { TcpStream::from_raw_fd(middle_in.fd().as_raw_fd()) };
        let mut out = unsafe { TcpStream::from_raw_fd(middle_out.fd().as_raw_fd()) };
        tap.set_nonblocking(false).unwrap();
        let mut sealed = vec![0u8; 2 + 1000 + 16 + 2 + 25];
        tap.read_exact(&mut sealed).unwrap();
        sealed[500] ^= 1;
        out.write_all(&sealed).unwrap();
        std::mem::forget((tap, out));
        let error = receiver.receive(&mut [0u8; 4096], &Stop::default()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("failed authentication"), "{error}");
    }
}
