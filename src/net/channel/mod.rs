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
//! (between batches, and while it waits for space to send), so that at any failure it knows
//! what was delivered, and after its End it waits for the Ack ([`Channel::end_stream`]).
//!
//! **Through an ssh session** (a socket [carried](super::socket::carried) by ssh), a frame's
//! payload message is not sealed: ssh's own cipher gives the stream secrecy and integrity
//! there, and sealing it again inside was pure cost (about a tenth of each accel's CPU on a
//! veth, where ssh's two processes and both accels share two cores). Its trailer still is, so
//! the Start frame still proves the one-time key, and offsets, resume and the Ack are
//! unchanged. Each side decides from its own socket, made by its own ssh code, never from
//! what a peer says: a TCP connection never carries a payload in the clear, whatever arrives
//! (a clear payload there is a malformed frame or fails authentication).
//!
//! One type for both sides, since a session is the same thing at both ends until it carries
//! a stream: this file is what they share (the frames sealed and opened, their batches written
//! and read, the peer's silence); [`send`] is the sending side's (data, the End, hearing the
//! confirmations), [`receive`] the receiving side's (data handed out, the confirmations said).

mod receive;
mod scattered;
mod send;

use receive::Receiving;
pub use scattered::Scattered;
pub use send::MOST_UNITS;
use send::Sending;

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use snow::TransportState;
use zstd::zstd_safe::{self, DCtx, DParameter, InBuffer, OutBuffer, ResetDirective};

use super::closed_by_peer;
use super::compress::WINDOW_LOG;
use super::socket::Socket;
use super::wire::{self, Kind, MAX_FRAME, MAX_MESSAGE, MAX_PAYLOAD, REKEY_EVERY, SEALED_TRAILER};
use crate::stop::Stop;

/// Bytes of sealed frames written at once, and read at once: 16 full frames. Fewer, larger
/// system calls; a larger batch only delays the first bytes of a fast stream. A batch also
/// takes the last frame of the piece it was given, beyond it if need be, so that the short
/// frame at the end (the backlog hands out 1 MiB: 16 full payloads and 272 bytes) goes with
/// it rather than in a system call and a TCP segment of its own.
pub const BATCH: usize = 16 * MAX_FRAME;

/// The most pieces one vectored write of a batch takes (through ssh, its lent payloads and
/// the sealed bytes between them): a batch's frames, the short ones included, with room.
const PIECES_AT_ONCE: usize = 64;

/// How long a word that goes whatever the run's stop says (a delivery count, the Ack, an
/// Abort) may take to be written.
const LAST_WORD: Duration = Duration::from_secs(30);

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
    /// Payloads go unsealed: the socket is carried by ssh (see the module's notes). Set
    /// once, from the socket's own kind.
    clear: bool,
    /// The stream offset of the next byte to send, or to receive.
    offset: u64,
    /// Sealed bytes read from the socket, `incoming[unread]` not yet opened.
    incoming: Vec<u8>,
    unread: Range<usize>,
    /// Plaintext: a payload opened here when it did not fit the caller's buffer.
    scratch: Vec<u8>,
    /// `scratch[pending]`: stream bytes opened and not yet handed out.
    pending: Range<usize>,
    /// A compressed frame's stream bytes, before they become the scratch buffer; and the
    /// zstd context that decompresses them (made at the first compressed frame: the
    /// session's, since its zstd frames refer to the session's earlier ones).
    inflated: Vec<u8>,
    inflater: Option<DCtx<'static>>,
    /// The session's last Data frame was compressed: a ZstdMore frame may go on with it.
    inflating: bool,
    /// `outgoing[..queued]`: sealed frames to write. Allocated once, at its full size, so
    /// that sealing never zero-fills it first.
    outgoing: Vec<u8>,
    queued: usize,
    /// Through ssh, Data payloads lent rather than copied into `outgoing`: where in it each
    /// goes, and which bytes of the data being sent it is (written from there with the
    /// batch, in one `writev`); their bytes in all.
    lent: Vec<(usize, Range<usize>)>,
    lent_bytes: usize,
    sent_messages: u64,
    received_messages: u64,
    /// Messages each way under one key ([`REKEY_EVERY`]; fewer in tests).
    rekey_every: u64,
    /// A write failed or was cut short, maybe mid-frame: nothing more can be sent.
    broken: bool,
    /// The stream's name, from the sender's Hello.
    stream: [u8; 16],
    /// When the peer was last heard from, and when this side last sent.
    last_heard: Instant,
    last_sent: Instant,
    /// How long the peer may say nothing before the path counts as dead.
    silence: Duration,
    /// One of a stream's several connections ([`scattered`]): its place, the receiver's
    /// terms; its Data frames come at any offset.
    join: Option<wire::Join>,
    /// What only the side that sends the stream keeps ([`send`]).
    sending: Sending,
    /// What only the side that receives it keeps ([`receive`]).
    receiving: Receiving,
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
            clear: socket.is_carried(),
            socket,
            noise,
            offset: 0,
            incoming,
            unread: 0..leftover.len(),
            scratch: Vec::with_capacity(MAX_MESSAGE),
            pending: 0..0,
            inflated: Vec::new(),
            inflater: None,
            inflating: false,
            outgoing: vec![0u8; BATCH + MAX_FRAME],
            queued: 0,
            lent: Vec::new(),
            lent_bytes: 0,
            sent_messages: 0,
            received_messages: 0,
            rekey_every: REKEY_EVERY,
            broken: false,
            stream: [0; 16],
            last_heard: Instant::now(),
            last_sent: Instant::now(),
            silence: Duration::MAX,
            join: None,
            sending: Sending::new(),
            receiving: Receiving::default(),
        }
    }

    /// Names the stream this session carries.
    pub fn set_stream(&mut self, stream: [u8; 16]) {
        self.stream = stream;
    }

    /// The stream this session carries.
    pub fn stream(&self) -> [u8; 16] {
        self.stream
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

    /// Seals `payload` as a frame of `kind` at `offset` onto the outgoing batch: the payload
    /// message (copied as it is through ssh), then the trailer message.
    fn seal(&mut self, kind: Kind, offset: u64, payload: &[u8]) {
        debug_assert!(payload.len() <= MAX_PAYLOAD);
        match self.clear {
            true => self.queue_clear(payload),
            false => self.seal_message(payload),
        }
        self.seal_message(&wire::trailer(kind, offset));
    }

    /// As [`seal`](Channel::seal) for a Data frame through ssh, its payload `payload`, bytes of
    /// the data being sent, lent rather than copied: the batch is written with it in place.
    fn seal_lent(&mut self, offset: u64, payload: Range<usize>) {
        debug_assert!(self.clear && payload.len() <= MAX_PAYLOAD);
        let at = self.queued;
        self.outgoing[at..at + 2].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        self.queued = at + 2;
        self.lent_bytes += payload.len();
        self.lent.push((self.queued, payload));
        self.seal_message(&wire::trailer(Kind::Data, offset));
    }

    /// The bytes of the batch so far: sealed, and lent.
    fn batched(&self) -> usize {
        self.queued + self.lent_bytes
    }

    /// Queues a payload unsealed, behind its length (through ssh only).
    fn queue_clear(&mut self, payload: &[u8]) {
        let at = self.queued;
        self.outgoing[at + 2..at + 2 + payload.len()].copy_from_slice(payload);
        self.outgoing[at..at + 2].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        self.queued = at + 2 + payload.len();
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
        self.write_out(stop, deadline, false, &[])
    }

    /// Writes the outgoing batch of a word that goes whatever the run's stop says: a delivery
    /// count, the Ack, an Abort. These are due after the run too, whose stop a stall or a
    /// failed output may have requested; they are bounded by [`LAST_WORD`] instead.
    fn flush_regardless(&mut self) -> io::Result<()> {
        // Never requested: an interrupted wait goes on, until the deadline.
        let unstopped = Stop::default();
        self.flush(&unstopped, Some(Instant::now() + LAST_WORD))
    }

    /// Writes the outgoing batch, with the payloads it lent from `data`; `listening` (the
    /// sending side), takes in the receiver's confirmations while it waits for space, so that
    /// a sender held up by its receiver still learns what the receiver delivered. Any failure
    /// leaves the channel broken.
    fn write_out(
        &mut self,
        stop: &Stop,
        deadline: Option<Instant>,
        listening: bool,
        data: &[u8],
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection failed earlier",
            ));
        }
        let (mut at, mut written) = (0, Ok(()));
        while at < self.batched() && written.is_ok() {
            written = match self.write_now(at, data) {
                Ok(Some(n)) => {
                    at += n;
                    self.last_sent = Instant::now();
                    Ok(())
                }
                Ok(None) if listening && !self.sending.peer_closed => {
                    let either = PollFlags::OUT | PollFlags::IN;
                    let silent_at = self.silent_at();
                    let until = deadline.into_iter().chain(silent_at).min();
                    match self.socket.wait(either, stop, until) {
                        Err(e) if e.kind() == io::ErrorKind::TimedOut && until == silent_at => {
                            Err(self.silence_error("the receiver"))
                        }
                        waited => waited.and_then(|()| self.take_confirmations()),
                    }
                }
                Ok(None) => self.socket.wait(PollFlags::OUT, stop, deadline),
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
        self.lent.clear();
        self.lent_bytes = 0;
        written.map_err(|error| {
            self.broken = true;
            closed_by_peer(error, "the receiver")
        })
    }

    /// Writes what fits now of the batch from its byte `at` on, the payloads it lent from
    /// `data` in their places.
    fn write_now(&self, at: usize, data: &[u8]) -> io::Result<Option<usize>> {
        if self.lent.is_empty() {
            return self.socket.write_now(&self.outgoing[at..self.queued]);
        }
        // The sealed bytes between the lent payloads, and after the last.
        let tail = self.lent.last().map_or(0, |(to, _)| *to);
        let mut from = 0;
        let all = self
            .lent
            .iter()
            .flat_map(|(to, lent)| {
                let sealed = &self.outgoing[from..*to];
                from = *to;
                [sealed, &data[lent.clone()]]
            })
            .chain([&self.outgoing[tail..self.queued]]);
        // On the stack, not allocated per write: a write that does not take them all is a
        // short write, which the caller goes on from.
        let mut pieces = [io::IoSlice::new(&[]); PIECES_AT_ONCE];
        let (mut count, mut skip) = (0, at);
        for piece in all {
            if count == pieces.len() {
                break;
            }
            match piece.get(skip..) {
                Some(rest) if !rest.is_empty() => {
                    pieces[count] = io::IoSlice::new(rest);
                    count += 1;
                    skip = 0;
                }
                _ => skip -= piece.len().min(skip),
            }
        }
        self.socket.write_vectored_now(&pieces[..count])
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
    /// space after them starts.
    fn unread_to_front(&mut self) -> usize {
        if self.unread.start > 0 {
            self.incoming.copy_within(self.unread.clone(), 0);
            self.unread = 0..self.unread.len();
        }
        self.unread.end
    }

    /// Opens the next complete frame, if one has arrived: a Data payload lands at the start of
    /// `buf` when its whole message fits there, else in the pending plaintext.
    pub fn open_next(&mut self, buf: &mut [u8]) -> io::Result<Option<Frame>> {
        let unread = &self.incoming[self.unread.clone()];
        let length = |at: usize| {
            unread.get(at..at + 2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        };
        let Some(len) = length(0) else { return Ok(None) };
        let Some(trailer_len) = length(2 + len) else { return Ok(None) };
        let payload_len_ok = if self.clear { len <= MAX_PAYLOAD } else { len >= wire::TAG };
        if !payload_len_ok || trailer_len != SEALED_TRAILER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a malformed frame from {}", self.socket.peer()),
            ));
        }
        let Some(sealed_trailer) = unread.get(4 + len..4 + len + trailer_len) else {
            return Ok(None);
        };
        let sealed = &unread[2..2 + len];
        let into_buf = buf.len() >= len;
        let mut incoming = Incoming {
            noise: &mut self.noise,
            received: &mut self.received_messages,
            rekey_every: self.rekey_every,
            clear: self.clear,
        };
        let payload = if into_buf {
            incoming.open_payload(sealed, buf)
        } else {
            // Only opened when everything pending was handed out.
            self.pending = 0..0;
            self.scratch.resize(len, 0);
            incoming.open_payload(sealed, &mut self.scratch)
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
        let framed = 4 + len + SEALED_TRAILER;
        self.unread.start += framed;
        let Some((kind, offset)) = wire::read_trailer(&trailer[..trailer_len]) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of an unknown kind from {}", self.socket.peer()),
            ));
        };
        let plaintext = if into_buf { &buf[..payload] } else { &self.scratch[..payload] };
        let data = matches!(kind, Kind::Data | Kind::Zstd | Kind::ZstdMore);
        if data && self.join.is_some() {
            // One of several connections: its frames are where the dispatcher put them.
            self.offset = offset;
        } else if data && offset != self.offset {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame at offset {offset} where {} was next", self.offset),
            ));
        }
        Ok(Some(match kind {
            Kind::Data => {
                self.inflating = false;
                self.offset += payload as u64;
                if !into_buf {
                    self.pending = 0..payload;
                }
                self.came_off_the_wire(payload, framed, false);
                Frame::Data(payload)
            }
            Kind::Zstd | Kind::ZstdMore => {
                // The stream bytes land in the pending plaintext, whichever buffer the
                // compressed ones were opened into.
                let compressed = if into_buf { Some(&buf[..payload]) } else { None };
                let len = self.inflate(compressed, payload, kind == Kind::Zstd)?;
                self.offset += len as u64;
                self.came_off_the_wire(len, framed, true);
                Frame::Data(len)
            }
            Kind::Start => Frame::Start,
            Kind::End => Frame::End(offset),
            Kind::Ack => Frame::Ack(offset),
            Kind::Delivered => {
                // One of several connections: the receiver's credit, its payload.
                if let Some(credit) = wire::Credit::decode(plaintext) {
                    self.sending.credit =
                        Some(self.sending.credit.map_or(credit, |before| before.max(credit)));
                    self.sending.awaits_count = false;
                }
                Frame::Delivered(offset)
            }
            Kind::Heartbeat => Frame::Heartbeat,
            Kind::Resume => Frame::Resume(offset),
            Kind::Abort => Frame::Abort(String::from_utf8_lossy(plaintext).into_owned()),
        }))
    }
}

impl Channel {
    /// Decompresses a Zstd or ZstdMore frame's payload (`compressed`, or the scratch
    /// buffer's first `len` bytes) into the pending plaintext; the stream bytes it holds.
    /// `fresh` (Zstd): a zstd frame starts here, else it goes on with the session's last.
    /// At most a frame's worth: the sender compresses one frame's payload at a time, so
    /// anything larger is not a frame of accel's (a decompression bomb is refused at that
    /// size, and a window larger than [`WINDOW_LOG`] at the frame's header).
    fn inflate(&mut self, compressed: Option<&[u8]>, len: usize, fresh: bool) -> io::Result<usize> {
        let peer = self.socket.peer();
        let failed = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a compressed frame from {peer} did not decompress: {why}"),
            )
        };
        if !fresh && !self.inflating {
            return Err(failed("it goes on with a zstd frame that did not start"));
        }
        self.inflating = false;
        let inflater = match &mut self.inflater {
            Some(inflater) => inflater,
            none => {
                let mut inflater = DCtx::try_create().ok_or_else(|| failed("out of memory"))?;
                let bounded = inflater.set_parameter(DParameter::WindowLogMax(WINDOW_LOG));
                bounded.map_err(|code| failed(zstd_safe::get_error_name(code)))?;
                none.insert(inflater)
            }
        };
        if fresh {
            let reset = inflater.reset(ResetDirective::SessionOnly);
            reset.map_err(|code| failed(zstd_safe::get_error_name(code)))?;
        }
        // One byte more than a frame holds, to tell a frame that holds too much.
        self.inflated.resize(MAX_PAYLOAD + 1, 0);
        let compressed = match compressed {
            Some(compressed) => compressed,
            None => &self.scratch[..len],
        };
        let damaged = super::compress::test_damage(self.offset, compressed);
        let compressed = damaged.as_deref().unwrap_or(compressed);
        let mut out = OutBuffer::around(&mut self.inflated[..]);
        let mut input = InBuffer::around(compressed);
        // The sender flushed every block of the frame: once zstd has taken all of it and
        // has room left, it has written all of it out.
        while input.pos() < compressed.len() || out.pos() == out.capacity() {
            if out.pos() == out.capacity() {
                return Err(failed("it holds more than a frame"));
            }
            let decoded = inflater.decompress_stream(&mut out, &mut input);
            decoded.map_err(|code| failed(zstd_safe::get_error_name(code)))?;
        }
        let inflated = out.pos();
        std::mem::swap(&mut self.scratch, &mut self.inflated);
        self.pending = 0..inflated;
        self.inflating = true;
        Ok(inflated)
    }
}

/// The receiving half of the Noise state, borrowed apart from the buffers it opens from.
struct Incoming<'a> {
    noise: &'a mut TransportState,
    received: &'a mut u64,
    rekey_every: u64,
    /// Payloads come unsealed (the socket is carried by ssh).
    clear: bool,
}

impl Incoming<'_> {
    /// Opens a frame's payload message into `out`, or copies it there as it is through ssh.
    fn open_payload(&mut self, message: &[u8], out: &mut [u8]) -> Result<usize, snow::Error> {
        if !self.clear {
            return self.open(message, out);
        }
        out[..message.len()].copy_from_slice(message);
        Ok(message.len())
    }

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

fn unexpected(frame: &Frame) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("an unexpected frame: {frame:?}"))
}

#[cfg(test)]
pub(crate) mod tests;
