//! Issue 20: a dropped connection is resumed. Between `--to` and `--from`, a proxy of the
//! tests' own ([`Cutter`]) resets the connection (an RST), closes it cleanly without the end
//! mark (a FIN), freezes it (forwards nothing, holds it open) or delays every byte; across two
//! network namespaces, the link goes down, or the receiver's address away, for some seconds.
//! Each time the stream must come through whole: the receiver writes exactly what the sender
//! read, both hash it (`--hash sha256`) to the same digest, both end with status 0, and both
//! count the reconnections there were (`--json`'s summary, one `connection dropped` line and
//! one `resuming at byte N` line each, at the same offsets on both sides).
//!
//! The contract under test: `--reconnect-for DURATION` (default 10m; 0 fails at the first
//! drop: sender status 3, receiver 1) bounds an outage on both sides; `--heartbeat DURATION`
//! (default 5s) is sent when an end has sent nothing for that long, and a peer silent for 4
//! of them has dropped (tests that freeze the path use 250ms: a drop is seen in about 1 s).
//! The summary counts, for a network output, `reconnections`, `resent_bytes` and
//! `longest_outage_s`; for a network input, `input_reconnections` and
//! `input_longest_outage_s`.
//!
//! The resets, the clean close, `--reconnect-for 0` and `--insecure` run once per engine; the
//! rest, where the engine plays no part beyond the transfer, with `auto`. Random cut points
//! come from a seed printed first (`ACCEL_RESUME_SEED=SEED` replays it); the long soak is
//! `random_cuts_soak` (ignored). Every socket is on loopback or inside namespaces the tests
//! make.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use serde_json::Value;
use sha2::Digest;

use crate::util::net::{Host, Netns, Receiver, Veth, make_key, sender, sender_with_env};
use crate::util::seeds::{Rng, env_number, fresh_seed};
use crate::util::*;

// ----- a proxy that cuts -----

/// What [`Cutter`] does to a connection once the sender has sent a given number of bytes
/// through it (its handshake counted), or for [`Cut::ResetBack`], the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// An RST each way: SO_LINGER 0, then close.
    Reset,
    /// An RST each way once the receiver has sent this many bytes back (its handshake answer
    /// counted): what the receiver says is cut there, and what the sender says passes.
    ResetBack,
    /// A FIN each way, and no end mark; what comes after is read and dropped, so that no RST
    /// follows.
    Close,
    /// Nothing more passes either way, and both sockets stay open: a path gone silent.
    Freeze,
}

/// How often the proxy looks at what the test asked of it.
const TICK: Duration = Duration::from_millis(20);

/// Bytes one direction of a connection holds before it stops reading: with a delay, its
/// throughput is at most this much per delay (8 MiB per 20 ms, more than a debug build moves).
const HELD: usize = 8 << 20;

/// A TCP proxy on loopback in front of one receiver. Each connection from the sender goes on
/// to the same upstream, every byte `delay` after it arrived; the k-th connection is cut as
/// the k-th entry of the plan says. The test can freeze every connection (new ones wait too),
/// reset those open, stop listening (a new connection is refused) and listen again, and count
/// the connections.
struct Cutter {
    port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    upstream: SocketAddr,
    delay: Duration,
    /// The cut of each connection to come, in order: at a count of the sender's bytes.
    plan: Mutex<VecDeque<(u64, Cut)>>,
    /// Nothing passes on any connection; a new one is not passed upstream.
    frozen: AtomicBool,
    /// The path is a black hole ([`Cutter::black_hole`]): a new connection reaches the
    /// upstream, and nothing passes on it, ever.
    swallowing: AtomicBool,
    /// Raised to reset every connection open.
    resets: AtomicU64,
    /// Whether the port should listen.
    admitting: AtomicBool,
    /// Whether it does.
    listening: AtomicBool,
    accepted: AtomicUsize,
    /// Cuts of the plan made.
    cuts: AtomicUsize,
    /// The first 4 KiB the sender sent on the first connection.
    first: Mutex<Vec<u8>>,
    /// The proxy is dropped: its connections are reset, its threads end.
    gone: AtomicBool,
}

impl Cutter {
    fn start(upstream: SocketAddr, delay: Duration, plan: &[(u64, Cut)]) -> Cutter {
        let listener = port_socket(0).unwrap();
        rustix::net::listen(&listener, 128).unwrap();
        let listener = TcpListener::from(listener);
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            upstream,
            delay,
            plan: Mutex::new(plan.iter().copied().collect()),
            frozen: AtomicBool::new(false),
            swallowing: AtomicBool::new(false),
            resets: AtomicU64::new(0),
            admitting: AtomicBool::new(true),
            listening: AtomicBool::new(true),
            accepted: AtomicUsize::new(0),
            cuts: AtomicUsize::new(0),
            first: Mutex::new(Vec::new()),
            gone: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || accept(listener, port, &accepting));
        Cutter { port, shared }
    }

    /// Where the sender is sent.
    fn to(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops listening (a sender that connects is refused); returns once it does. The port
    /// stays the proxy's meanwhile ([`port_socket`]): no other test's listener takes it.
    fn refuse(&self) {
        self.shared.admitting.store(false, SeqCst);
        eventually(GENEROUS, "the proxy stops listening", || !self.shared.listening.load(SeqCst));
    }

    /// Listens again, on the same port; returns once it does.
    fn admit(&self) {
        self.shared.admitting.store(true, SeqCst);
        eventually(GENEROUS, "the proxy listens again", || self.shared.listening.load(SeqCst));
    }

    fn freeze(&self) {
        self.shared.frozen.store(true, SeqCst);
    }

    fn thaw(&self) {
        self.shared.frozen.store(false, SeqCst);
    }

    /// The path becomes a black hole that still takes connections, as a tunnel, a proxy or a
    /// VPN does whose far side is gone (the near end accepts at once): the connections open
    /// freeze, and one made now reaches the upstream but carries nothing, ever, even once
    /// the path is back: what went into the hole is lost.
    fn black_hole(&self) {
        self.shared.swallowing.store(true, SeqCst);
        self.freeze();
    }

    /// The path is back: new connections pass, those frozen go on.
    fn path_back(&self) {
        self.shared.swallowing.store(false, SeqCst);
        self.thaw();
    }

    /// Resets every connection open now.
    fn reset_now(&self) {
        self.shared.resets.fetch_add(1, SeqCst);
    }

    fn accepted(&self) -> usize {
        self.shared.accepted.load(SeqCst)
    }

    fn cuts(&self) -> usize {
        self.shared.cuts.load(SeqCst)
    }

    /// What the sender sent first on its first connection (4 KiB at most).
    fn first_sent(&self) -> Vec<u8> {
        self.shared.first.lock().unwrap().clone()
    }
}

impl Drop for Cutter {
    fn drop(&mut self) {
        self.shared.gone.store(true, SeqCst);
    }
}

/// A TCP socket bound to `port` on loopback (0: one the kernel picks), not listening yet,
/// with `SO_REUSEPORT`: while refusing, the proxy keeps its port with such a socket that
/// does not listen, so that a connection is refused and yet no other test's listener can
/// take the port (the tests bind theirs without `SO_REUSEPORT`). Freed for seconds, the port
/// can go to another test's listener: a CI run's sender came back to a receiver with another
/// key ("the peers do not share a key") in the middle of an outage.
fn port_socket(port: u16) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, ipproto, sockopt};
    // Close-on-exec, as std's are: the accels the test starts must not hold the port open.
    let (family, stream, cloexec) = (AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC);
    let socket = rustix::net::socket_with(family, stream, cloexec, Some(ipproto::TCP))?;
    sockopt::set_socket_reuseport(&socket, true)?;
    rustix::net::bind(&socket, &SocketAddr::from(([127, 0, 0, 1], port)))?;
    Ok(socket)
}

/// The proxy's listening side: a thread for each connection, as the plan says.
fn accept(listener: TcpListener, port: u16, shared: &Arc<Shared>) {
    // Listening, or the port held by a socket that does not listen (refusing).
    let mut listener: Result<TcpListener, std::os::fd::OwnedFd> = Ok(listener);
    while !shared.gone.load(SeqCst) {
        // Each new socket is bound before the old one closes: the port is never free.
        listener = match (listener, shared.admitting.load(SeqCst)) {
            (Ok(_open), false) => Err(port_socket(port).expect("the proxy's port, held")),
            (Err(_held), true) => {
                let socket = port_socket(port).expect("the proxy's port, again");
                rustix::net::listen(&socket, 128).expect("listening again");
                Ok(TcpListener::from(socket))
            }
            (unchanged, _) => unchanged,
        };
        shared.listening.store(listener.is_ok(), SeqCst);
        let Ok(open) = &listener else {
            thread::sleep(TICK);
            continue;
        };
        open.set_nonblocking(true).unwrap();
        if !wait_for(&[(open.as_fd(), PollFlags::IN)], TICK) {
            continue;
        }
        let Ok((client, _)) = open.accept() else { continue };
        if !shared.admitting.load(SeqCst) {
            // Asked to refuse while this one came: it never got through.
            reset([client]);
            continue;
        }
        let index = shared.accepted.fetch_add(1, SeqCst);
        let cut = shared.plan.lock().unwrap().pop_front();
        let shared = Arc::clone(shared);
        thread::spawn(move || connection(client, index, cut, &shared));
    }
}

/// Waits up to `timeout` for one of `fds` to be ready as asked; whether one was.
fn wait_for(fds: &[(std::os::fd::BorrowedFd<'_>, PollFlags)], timeout: Duration) -> bool {
    let mut polled: Vec<PollFd<'_>> =
        fds.iter().map(|(fd, flags)| PollFd::new(fd, *flags)).collect();
    let timeout = Timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
    rustix::event::poll(&mut polled, Some(&timeout)).is_ok_and(|ready| ready > 0)
}

/// Resets `sockets`: SO_LINGER 0, then close, so that each peer gets an RST.
fn reset(sockets: impl IntoIterator<Item = TcpStream>) {
    for socket in sockets {
        let _ = rustix::net::sockopt::set_socket_linger(&socket, Some(Duration::ZERO));
    }
}

/// Closes both sides cleanly: a FIN each way, then what each still sends is read and
/// dropped until it closes too (unread bytes at close would make the kernel send an RST).
fn close(client: TcpStream, server: TcpStream, shared: &Shared) {
    let sockets = [client, server];
    let mut open = [true, true];
    for socket in &sockets {
        let _ = socket.shutdown(Shutdown::Write);
    }
    let mut buf = vec![0u8; 64 << 10];
    let deadline = Instant::now() + GENEROUS;
    while open.contains(&true) && Instant::now() < deadline && !shared.gone.load(SeqCst) {
        for (socket, open) in sockets.iter().zip(&mut open) {
            if *open {
                match (&*socket).read(&mut buf) {
                    Ok(0) => *open = false,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => *open = false,
                    Ok(_) => {}
                }
            }
        }
        let fds: Vec<_> = sockets
            .iter()
            .zip(&open)
            .filter(|(_, open)| **open)
            .map(|(socket, _)| (socket.as_fd(), PollFlags::IN))
            .collect();
        wait_for(&fds, TICK);
    }
}

/// One direction of a connection: what was read and waits its delay to be written.
#[derive(Default)]
struct Flow {
    pieces: VecDeque<(Instant, Vec<u8>)>,
    /// Of the first piece.
    written: usize,
    held: usize,
    /// Bytes read from this direction's source.
    passed: u64,
    /// The source sent its FIN.
    ended: bool,
    /// The FIN was passed on.
    shut: bool,
}

impl Flow {
    fn wants(&self, room: u64) -> bool {
        !self.ended && self.held < HELD && room > 0
    }

    /// When the first piece is due to be written.
    fn due(&self, delay: Duration) -> Option<Instant> {
        self.pieces.front().map(|(arrived, _)| *arrived + delay)
    }

    /// Reads what `from` has, at most `room` bytes; whether anything happened.
    fn take(&mut self, mut from: &TcpStream, room: u64, buf: &mut [u8]) -> io::Result<bool> {
        if !self.wants(room) {
            return Ok(false);
        }
        let most = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        match from.read(&mut buf[..most]) {
            Ok(0) => {
                self.ended = true;
                Ok(true)
            }
            Ok(n) => {
                self.pieces.push_back((Instant::now(), buf[..n].to_vec()));
                self.held += n;
                self.passed += n as u64;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Writes to `to` what is due; passes the FIN on once all is written. Whether anything
    /// happened.
    fn give(&mut self, mut to: &TcpStream, delay: Duration, now: Instant) -> io::Result<bool> {
        let Some(due) = self.due(delay) else {
            if self.ended && !self.shut {
                to.shutdown(Shutdown::Write)?;
                self.shut = true;
                return Ok(true);
            }
            return Ok(false);
        };
        if due > now {
            return Ok(false);
        }
        let piece = &self.pieces[0].1;
        match to.write(&piece[self.written..]) {
            Ok(n) => {
                self.written += n;
                self.held -= n;
                if self.written == piece.len() {
                    self.pieces.pop_front();
                    self.written = 0;
                }
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }
}

/// One connection through the proxy, the `index`-th: passed on both ways until it ends, is
/// cut as `cut` says, or the test resets it. A broken side resets the other.
fn connection(client: TcpStream, index: usize, cut: Option<(u64, Cut)>, shared: &Shared) {
    let epoch = shared.resets.load(SeqCst);
    if shared.swallowing.load(SeqCst) {
        // Into the hole: connected at both ends, and nothing passes.
        let server = TcpStream::connect_timeout(&shared.upstream, GENEROUS);
        while !shared.gone.load(SeqCst) && shared.resets.load(SeqCst) == epoch {
            thread::sleep(TICK);
        }
        return reset([client].into_iter().chain(server.ok()));
    }
    // A frozen path lets no new connection through either.
    while shared.frozen.load(SeqCst) && !shared.gone.load(SeqCst) {
        thread::sleep(TICK);
    }
    let Ok(server) = TcpStream::connect_timeout(&shared.upstream, GENEROUS) else {
        return reset([client]);
    };
    for socket in [&client, &server] {
        socket.set_nonblocking(true).unwrap();
        let _ = socket.set_nodelay(true);
    }
    let delay = shared.delay;
    let (mut up, mut down) = (Flow::default(), Flow::default());
    let mut buf = vec![0u8; 256 << 10];
    let mut stuck = false;
    loop {
        if shared.gone.load(SeqCst) || shared.resets.load(SeqCst) != epoch {
            return reset([client, server]);
        }
        if stuck || shared.frozen.load(SeqCst) {
            thread::sleep(TICK);
            continue;
        }
        // The direction the cut counts, and the room left before it in each.
        let counted = |how| if how == Cut::ResetBack { &down } else { &up };
        if let Some((at, how)) =
            cut.filter(|&(at, how)| counted(how).passed >= at && counted(how).held == 0)
        {
            debug_assert_eq!(counted(how).passed, at);
            shared.cuts.fetch_add(1, SeqCst);
            match how {
                Cut::Reset | Cut::ResetBack => return reset([client, server]),
                Cut::Close => return close(client, server, shared),
                Cut::Freeze => {
                    stuck = true;
                    continue;
                }
            }
        }
        let room = |flow: &Flow, back: bool| match cut {
            Some((at, how)) if (how == Cut::ResetBack) == back => at - flow.passed,
            _ => u64::MAX,
        };
        let (room_up, room_down) = (room(&up, false), room(&down, true));
        let now = Instant::now();
        let before = up.passed;
        let moved = (|| -> io::Result<bool> {
            let mut moved = up.take(&client, room_up, &mut buf)?;
            if index == 0 && up.passed > before {
                let mut first = shared.first.lock().unwrap();
                let more = (up.passed - before) as usize;
                let keep = more.min(4096usize.saturating_sub(first.len()));
                first.extend_from_slice(&buf[..keep]);
            }
            moved |= up.give(&server, delay, now)?;
            moved |= down.take(&server, room_down, &mut buf)?;
            moved |= down.give(&client, delay, now)?;
            Ok(moved)
        })();
        match moved {
            Err(_) => return reset([client, server]),
            Ok(true) => continue,
            Ok(false) => {}
        }
        if up.shut && down.shut {
            return;
        }
        // Nothing could move: wait for a side to be ready, or the next piece to be due.
        let due = |flow: &Flow| flow.due(delay).is_some_and(|due| due <= now);
        let mut fds = Vec::new();
        for (socket, reads, writes) in
            [(&client, up.wants(room_up), due(&down)), (&server, down.wants(room_down), due(&up))]
        {
            let flags = match (reads, writes) {
                (true, true) => PollFlags::IN | PollFlags::OUT,
                (true, false) => PollFlags::IN,
                (false, true) => PollFlags::OUT,
                (false, false) => continue,
            };
            fds.push((socket.as_fd(), flags));
        }
        let next = [up.due(delay), down.due(delay)]
            .into_iter()
            .flatten()
            .filter(|due| *due > now)
            .min()
            .map_or(TICK, |due| (due - now).min(TICK));
        if fds.is_empty() {
            thread::sleep(next);
        } else {
            wait_for(&fds, next);
        }
    }
}

/// The proxy does what the tests rely on, between plain sockets: a reset at its offset is
/// an RST to both peers, the upstream having got no more than that many bytes; a clean close
/// is a FIN to both, exactly at its offset; a reset of the bytes back is an RST to both, the
/// client having got no more than that many; an uncut connection passes both ways, and its
/// FIN; a refusing proxy refuses, and listens again on the same port; a frozen one passes
/// nothing; a delaying one holds each byte for its delay.
#[test]
fn the_cutter_cuts_as_told() {
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = upstream.local_addr().unwrap();
    let plan = [(1000, Cut::Reset), (2000, Cut::Close), (300, Cut::ResetBack)];
    let proxy = Cutter::start(address, Duration::ZERO, &plan);
    let sent = pattern(5000, 300);
    // Connects through the proxy, sends `sent` (as much as gets through) and closes its
    // writing side; returns the client and the server's end.
    let connect = || {
        let mut client = TcpStream::connect(proxy.to()).unwrap();
        let (server, _) = upstream.accept().unwrap();
        let _ = client.write_all(&sent);
        let _ = client.shutdown(Shutdown::Write);
        for socket in [&client, &server] {
            socket.set_read_timeout(Some(GENEROUS)).unwrap();
        }
        (client, server)
    };
    let read_all = |mut socket: &TcpStream| {
        let mut got = Vec::new();
        let ended = socket.read_to_end(&mut got).map_err(|e| e.kind());
        (got, ended)
    };

    let (client, server) = connect();
    let (got, ended) = read_all(&server);
    assert_eq!(ended, Err(io::ErrorKind::ConnectionReset), "upstream, reset");
    assert!(got.len() <= 1000 && got == sent[..got.len()], "{} bytes before the reset", got.len());
    assert_eq!(read_all(&client).1, Err(io::ErrorKind::ConnectionReset), "client, reset");

    let (client, server) = connect();
    let (got, ended) = read_all(&server);
    assert_eq!((got.len(), ended), (2000, Ok(2000)), "upstream, closed");
    assert_same(&got, &sent[..2000], "before the close");
    assert_eq!(read_all(&client), (Vec::new(), Ok(0)), "client, closed");

    let (client, mut server) = connect();
    // What the client sends passes whole; what comes back is cut at 300.
    let mut got = vec![0u8; sent.len()];
    server.read_exact(&mut got).unwrap();
    let _ = server.write_all(&sent);
    let (got, ended) = read_all(&client);
    assert_eq!(ended, Err(io::ErrorKind::ConnectionReset), "client, reset back");
    assert!(got.len() <= 300 && got == sent[..got.len()], "{} bytes back", got.len());

    let (client, mut server) = connect();
    assert_eq!(read_all(&server), (sent.clone(), Ok(5000)), "upstream, uncut");
    server.write_all(b"back").unwrap();
    drop(server);
    assert_eq!(read_all(&client), (b"back".to_vec(), Ok(4)), "client, uncut");
    assert_eq!((proxy.accepted(), proxy.cuts()), (4, 3));

    proxy.refuse();
    let refused = TcpStream::connect(proxy.to()).map_err(|e| e.kind());
    assert_eq!(refused.err(), Some(io::ErrorKind::ConnectionRefused));
    // Nobody else may take the port meanwhile (another test's listener, found by the sender
    // when it comes back).
    let taken = TcpListener::bind(proxy.to()).map_err(|e| e.kind());
    assert_eq!(taken.err(), Some(io::ErrorKind::AddrInUse), "the refusing proxy's port");
    proxy.admit();
    proxy.freeze();
    let mut client = TcpStream::connect(proxy.to()).unwrap();
    client.write_all(b"held").unwrap();
    // A frozen proxy does not even connect upstream: nothing comes to accept.
    upstream.set_nonblocking(true).unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(upstream.accept().map_err(|e| e.kind()).err(), Some(io::ErrorKind::WouldBlock));
    upstream.set_nonblocking(false).unwrap();
    proxy.thaw();
    let (mut server, _) = upstream.accept().unwrap();
    let mut held = [0u8; 4];
    server.read_exact(&mut held).unwrap();
    assert_eq!(&held, b"held");
    assert_eq!(proxy.accepted(), 5);

    let delay = Duration::from_millis(200);
    let delaying = Cutter::start(address, delay, &[]);
    let mut client = TcpStream::connect(delaying.to()).unwrap();
    let (mut server, _) = upstream.accept().unwrap();
    let start = Instant::now();
    client.write_all(b"x").unwrap();
    server.read_exact(&mut [0u8; 1]).unwrap();
    server.write_all(b"y").unwrap();
    client.read_exact(&mut [0u8; 1]).unwrap();
    assert!(start.elapsed() >= 2 * delay, "a round trip in {:?}", start.elapsed());
}

// ----- the two ends -----

/// A seed for what is random: `ACCEL_RESUME_SEED` (hex, or decimal) when set, else a fresh
/// one; printed, with the command that replays it (`also`: the rest of its environment).
fn seed(test: &str, also: &str) -> u64 {
    let seed = env_number("ACCEL_RESUME_SEED").unwrap_or_else(fresh_seed);
    eprintln!(
        "{test}: seed {seed:#x}; replay with: ACCEL_RESUME_SEED={seed:#x} {also}cargo test \
         --test integration resume::{test} -- --exact --include-ignored"
    );
    seed
}

/// What the receiver writes, collected as it comes, so that a test can wait for an amount.
struct Written {
    bytes: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
}

impl Written {
    fn collect(mut stdout: ChildStdout) -> Written {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&bytes);
        let reader = thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Written { bytes, reader }
    }

    fn len(&self) -> usize {
        self.bytes.lock().unwrap().len()
    }

    /// Waits until `n` bytes have been written.
    #[track_caller]
    fn at_least(&self, n: usize) {
        eventually(GENEROUS, &format!("the receiver writes {n} bytes"), || self.len() >= n);
    }

    /// Everything, once the receiver's stdout has closed.
    fn all(self) -> Vec<u8> {
        self.reader.join().unwrap();
        std::mem::take(&mut *self.bytes.lock().unwrap())
    }
}

/// A receiver (`--from`, `--hash sha256`, `--json=FILE`, the test's `args`) and the key a
/// sender needs to reach it.
struct Ends {
    engine: &'static str,
    dir: Scratch,
    key: String,
    receiver: Receiver,
    written: Written,
    host: String,
    args: Vec<String>,
    /// The sender's environment beside the test's (a test hook).
    env: Vec<(&'static str, &'static str)>,
    /// How long the two may take to end once the sender's input is closed: more with many
    /// cuts, each of which may cost a second or two.
    patience: Duration,
}

/// A sending accel, its stdin fed by a thread piece by piece as the test says.
struct Sending {
    child: Child,
    said: Said,
    feed: Option<mpsc::Sender<Vec<u8>>>,
}

impl Sending {
    /// Gives the sender `piece` (written on a thread, after what went before).
    fn send(&self, piece: &[u8]) {
        self.feed.as_ref().expect("input open").send(piece.to_vec()).unwrap();
    }

    /// Ends the sender's input, once all it was given is written.
    fn close_input(&mut self) {
        self.feed = None;
    }
}

/// A test that fails midway leaves no sender behind.
impl Drop for Sending {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How one side ended: its status, what it said, and its `--json` summary (null if none).
struct End {
    status: ExitStatus,
    said: String,
    summary: Value,
}

impl End {
    fn new(status: ExitStatus, said: String, json: &PathBuf) -> End {
        let summary = std::fs::read_to_string(json)
            .ok()
            .and_then(|text| text.lines().last().and_then(|line| serde_json::from_str(line).ok()))
            .filter(|summary: &Value| summary["event"] == "summary")
            .unwrap_or(Value::Null);
        End { status, said, summary }
    }

    /// The lines it said containing `what`.
    fn lines(&self, what: &str) -> usize {
        self.said.lines().filter(|line| line.contains(what)).count()
    }

    /// The offsets its `resuming at byte N` lines name, in order.
    fn resumed_at(&self) -> Vec<u64> {
        self.said
            .lines()
            .filter_map(|line| {
                let rest = &line[line.find("resuming at byte ")? + "resuming at byte ".len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                Some(digits.parse().unwrap_or_else(|_| panic!("no offset in {line:?}")))
            })
            .collect()
    }
}

/// How a transfer ended, on both sides, and what the receiver wrote.
struct Ended {
    sender: End,
    receiver: End,
    written: Vec<u8>,
}

impl Ends {
    /// A receiver with `--engine engine`, the key, `--hash sha256`, `--json=FILE` and `args`,
    /// on 127.0.0.1, or on `host` (at its address, inside its namespace).
    fn start(engine: &'static str, test: &str, args: &[&str], host: Option<&Host>) -> Ends {
        Ends::start_with_env(engine, test, args, host, &[])
    }

    /// As [`Ends::start`], with `env` in the receiver's environment (a test hook).
    fn start_with_env(
        engine: &'static str,
        test: &str,
        args: &[&str],
        host: Option<&Host>,
        env: &[(&str, &str)],
    ) -> Ends {
        let dir = Scratch::new(&format!("resume-{test}-{engine}"));
        let key = make_key(&dir, "k");
        let json = format!("--json={}", dir.path("receiver.json").display());
        let mut full = vec!["--key-file", key.as_str(), "--hash", "sha256", json.as_str()];
        full.extend_from_slice(args);
        let (host, wrap) = match host {
            Some(host) => (host.addr.as_str(), Some(&host.netns)),
            None => ("127.0.0.1", None),
        };
        let mut receiver = Receiver::with_env(engine, &format!("{host}:0"), &full, wrap, env);
        let written = Written::collect(receiver.stdout());
        let args = args.iter().map(|arg| arg.to_string()).collect();
        let patience = GENEROUS;
        let (host, env) = (host.to_owned(), Vec::new());
        Ends { engine, dir, key, receiver, written, host, args, env, patience }
    }

    /// The receiver's address.
    fn address(&self) -> SocketAddr {
        format!("{}:{}", self.host, self.receiver.port).parse().unwrap()
    }

    /// A sender to `to` (inside `netns` when given) with the receiver's engine, the key,
    /// `--hash sha256`, `--json=FILE` and the receiver's `args`.
    fn sender(&self, to: &str, netns: Option<&Netns>) -> Sending {
        let json = format!("--json={}", self.dir.path("sender.json").display());
        let mut full = vec!["--key-file", self.key.as_str(), "--hash", "sha256", json.as_str()];
        full.extend(self.args.iter().map(String::as_str));
        let mut child = sender_with_env(self.engine, to, &full, netns, &self.env);
        let said = Said::collect(&mut child);
        let mut stdin = child.stdin.take().unwrap();
        let (feed, pieces) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || {
            for piece in pieces {
                if stdin.write_all(&piece).is_err() {
                    return;
                }
            }
        });
        Sending { child, said, feed: Some(feed) }
    }

    /// Waits for both to end (the sender's input closed first). If one does not, fails
    /// showing what both said.
    fn end(mut self, mut sending: Sending) -> Ended {
        sending.close_input();
        let patience = self.patience;
        let hung = |who: &str, sending: &mut Sending, receiver: &mut Receiver| -> ! {
            let _ = sending.child.kill();
            let _ = receiver.child.kill();
            panic!(
                "the {who} did not exit within {patience:?}\nsender: {}\nreceiver: {}",
                sending.said.all(),
                receiver.said.all()
            )
        };
        let Some(status) = exited(&mut sending.child, self.patience) else {
            hung("sender", &mut sending, &mut self.receiver)
        };
        let sender = End::new(status, String::new(), &self.dir.path("sender.json"));
        let Some(status) = exited(&mut self.receiver.child, self.patience) else {
            hung("receiver", &mut sending, &mut self.receiver)
        };
        let sender = End { said: sending.said.all(), ..sender };
        let receiver = End::new(status, self.receiver.said.all(), &self.dir.path("receiver.json"));
        Ended { sender, receiver, written: self.written.all() }
    }
}

/// SHA-256 in hex, as `--hash sha256` writes it.
fn sha256(data: &[u8]) -> String {
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

impl Ended {
    /// Both ended with 0; the receiver wrote `data`, byte for byte; both hashed it to its
    /// digest, and the sender's receiver confirmed all of it.
    #[track_caller]
    fn whole(&self, data: &[u8], context: &str) {
        let (sender, receiver) = (&self.sender, &self.receiver);
        assert!(sender.status.success(), "{context}: sender: {}: {}", sender.status, sender.said);
        assert!(
            receiver.status.success(),
            "{context}: receiver: {}: {}",
            receiver.status,
            receiver.said
        );
        assert_same(&self.written, data, context);
        let digest = sha256(data);
        for (side, end) in [("sender", sender), ("receiver", receiver)] {
            assert_eq!(
                end.summary["hashes"][0]["hex"], digest,
                "{context}: the {side}'s sha256: {}",
                end.summary
            );
        }
        assert_eq!(
            sender.summary["outputs"][0]["confirmed"],
            data.len(),
            "{context}: {}",
            sender.summary
        );
    }

    /// Both sides counted `n` reconnections, in their summaries and (when `lines`) with a
    /// `connection dropped` line each; both said `resuming at byte N` `n` times, at the same
    /// offsets, which only grow and lie within the stream. Returns the offsets.
    #[track_caller]
    fn reconnected(&self, n: u64, lines: bool, context: &str) -> Vec<u64> {
        let (sender, receiver) = (&self.sender, &self.receiver);
        let output = &sender.summary["outputs"][0];
        let both = format!("sender: {}\nreceiver: {}", sender.said, receiver.said);
        assert_eq!(output["reconnections"], n, "{context}: {output}\n{both}");
        assert_eq!(
            receiver.summary["input_reconnections"], n,
            "{context}: {}\n{both}",
            receiver.summary
        );
        assert!(output["resent_bytes"].is_u64(), "{context}: resent_bytes: {output}");
        for (outage, summary) in [
            (&output["longest_outage_s"], output),
            (&receiver.summary["input_longest_outage_s"], &receiver.summary),
        ] {
            let outage = outage.as_f64().unwrap_or_else(|| panic!("{context}: {summary}"));
            assert!((outage > 0.0) == (n > 0), "{context}: an outage of {outage} s: {summary}");
            assert!(outage < GENEROUS.as_secs_f64(), "{context}: {outage} s: {summary}");
        }
        if lines {
            for (side, end) in [("sender", sender), ("receiver", receiver)] {
                let drops = end.lines("connection dropped");
                assert_eq!(drops as u64, n, "{context}: the {side}'s drops:\n{both}");
            }
        }
        let offsets = sender.resumed_at();
        assert_eq!(offsets.len() as u64, n, "{context}: the sender's resumptions:\n{both}");
        assert_eq!(receiver.resumed_at(), offsets, "{context}: where each resumed:\n{both}");
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{context}: {offsets:?}");
        assert!(
            offsets.iter().all(|&at| at <= self.written.len() as u64),
            "{context}: {offsets:?} past the end"
        );
        offsets
    }
}

/// `data` sent through a [`Cutter`] with `delay` and `plan` to a receiver, both ends with
/// `--engine engine` and `args`; how it ended, how many cuts the proxy made and how many
/// connections it took.
fn through_the_cutter(
    engine: &'static str,
    test: &str,
    delay: Duration,
    plan: &[(u64, Cut)],
    data: &[u8],
    args: &[&str],
) -> (Ended, usize, usize) {
    let mut ends = Ends::start(engine, test, args, None);
    ends.patience = GENEROUS + Duration::from_secs(2) * plan.len() as u32;
    let proxy = Cutter::start(ends.address(), delay, plan);
    let sending = ends.sender(&proxy.to(), None);
    for piece in data.chunks(1 << 20) {
        sending.send(piece);
    }
    let ended = ends.end(sending);
    (ended, proxy.accepted(), proxy.cuts())
}

/// A receiver with `args` (`test` names its files), a sender to it through a [`Cutter`] of
/// its own, and the stream it is given: `size` bytes from `seed`, of which the first `first`
/// have been sent and written; the rest is the test's to send.
fn delivered_through_a_proxy(
    test: &str,
    args: &[&str],
    size: usize,
    seed: u64,
    first: usize,
) -> (Ends, Cutter, Sending, Vec<u8>) {
    let ends = Ends::start("auto", test, args, None);
    let proxy = Cutter::start(ends.address(), Duration::ZERO, &[]);
    let sending = ends.sender(&proxy.to(), None);
    let data = pattern(size, seed);
    sending.send(&data[..first]);
    ends.written.at_least(first);
    (ends, proxy, sending, data)
}

/// Each offset at which the stream resumed lies no further than the bytes the connection
/// before carried (`cuts`, the count where each was cut, handshakes and framing included).
#[track_caller]
fn resumed_within(offsets: &[u64], cuts: &[u64], context: &str) {
    let mut before = 0;
    for (at, cut) in offsets.iter().zip(cuts) {
        assert!(*at <= before + cut, "{context}: resumed at {at}, past {before} + {cut}");
        before = *at;
    }
}

// ----- through the proxy -----

/// Three resets (RSTs both ways) at seeded random offsets of 24 MiB: three reconnections,
/// four connections, the stream whole.
fn three_resets_at_random_offsets(engine: &'static str) {
    let seed = seed(&format!("three_resets_at_random_offsets::{engine}"), "");
    let mut rng = Rng::new(seed);
    let size = 24 << 20;
    let cuts: Vec<u64> = (0..3).map(|_| rng.between(64 << 10, size / 8)).collect();
    let plan: Vec<_> = cuts.iter().map(|&at| (at, Cut::Reset)).collect();
    let context = format!("resets at {cuts:?} (seed {seed:#x})");
    let data = pattern(size as usize, seed);
    let (ended, accepted, made) =
        through_the_cutter(engine, "resets", Duration::ZERO, &plan, &data, &[]);
    ended.whole(&data, &context);
    let offsets = ended.reconnected(3, true, &context);
    resumed_within(&offsets, &cuts, &context);
    assert_eq!((made, accepted), (3, 4), "{context}: cuts made, connections");
}

/// Issue 35: three resets at seeded random offsets with the frames compressed
/// (`--compress zstd:1` at the sender, prose that shrinks several times): offsets, the
/// receiver's confirmations and the place each session goes on count stream bytes, never
/// compressed ones, so the stream comes through whole, and the wire carried fewer bytes than
/// the stream.
fn three_resets_with_compression(engine: &'static str) {
    resets_with_compression(engine, None);
}

/// As [`three_resets_with_compression`], each batch's frames compressed on three threads
/// (the debug builds' `ACCEL_TEST_THREADS`), each thread's run of frames a zstd frame of
/// its own: a session that goes on in the middle of a run starts a zstd frame there.
fn three_resets_with_compression_on_threads(engine: &'static str) {
    resets_with_compression(engine, Some("3"));
}

/// Three resets with the frames compressed, on `threads` threads if given.
fn resets_with_compression(engine: &'static str, threads: Option<&'static str>) {
    let test = match threads {
        None => "three_resets_with_compression",
        Some(_) => "three_resets_with_compression_on_threads",
    };
    let seed = seed(&format!("{test}::{engine}"), "");
    let mut rng = Rng::new(seed);
    let size = 24 << 20;
    // The cutter counts the bytes on the wire: a few MiB in all, compressed.
    let cuts: Vec<u64> = (0..3).map(|_| rng.between(64 << 10, 1 << 20)).collect();
    let plan: Vec<_> = cuts.iter().map(|&at| (at, Cut::Reset)).collect();
    let context = format!("compressed, resets at {cuts:?} (seed {seed:#x})");
    let data = prose(size as usize, seed);
    let mut ends =
        Ends::start(engine, if threads.is_some() { "zresets3" } else { "zresets" }, &[], None);
    ends.env.extend(threads.map(|n| ("ACCEL_TEST_THREADS", n)));
    ends.patience = GENEROUS + Duration::from_secs(2) * plan.len() as u32;
    // The sender's alone: a receiver takes what each frame says.
    ends.args.extend(["--compress".to_owned(), "zstd:1".to_owned()]);
    let proxy = Cutter::start(ends.address(), Duration::ZERO, &plan);
    let sending = ends.sender(&proxy.to(), None);
    for piece in data.chunks(1 << 20) {
        sending.send(piece);
    }
    let ended = ends.end(sending);
    ended.whole(&data, &context);
    ended.reconnected(3, true, &context);
    assert_eq!((proxy.cuts(), proxy.accepted()), (3, 4), "{context}: cuts made, connections");
    let wire = &ended.sender.summary["outputs"][0]["wire"];
    let (bytes, stream) = (wire["bytes"].as_u64().unwrap(), wire["stream_bytes"].as_u64().unwrap());
    assert!(stream >= size && bytes < stream / 2, "{context}: {wire}");
}

/// Issue 35: `--compress auto` to a receiver of wire version 5 (the debug builds'
/// `ACCEL_TEST_WIRE`: it drops a compressing sender's first connection, answering with its
/// own version) goes uncompressed, and a connection made again after a reset speaks the
/// same version as the one before it, without compression: the receiver takes it back (it
/// would drop one that compresses, and the sender would give up), the stream whole, the
/// wire carrying every byte of it. Three connections through the cutter: the one dropped
/// (the plan's first cut, never reached), the one reset at 1 MiB, the one that goes on.
fn auto_resumes_uncompressed_to_an_older_receiver(engine: &'static str) {
    let older = [("ACCEL_TEST_WIRE", "5")];
    let mut ends = Ends::start_with_env(engine, "older", &[], None, &older);
    // The sender's alone: a receiver takes what each frame says.
    ends.args.extend(["--compress".to_owned(), "auto".to_owned()]);
    ends.patience = GENEROUS + Duration::from_secs(2);
    let plan = [(1 << 20, Cut::Reset), (1 << 20, Cut::Reset)];
    let proxy = Cutter::start(ends.address(), Duration::ZERO, &plan);
    let sending = ends.sender(&proxy.to(), None);
    let data = prose(8 << 20, 350);
    for piece in data.chunks(1 << 20) {
        sending.send(piece);
    }
    let ended = ends.end(sending);
    let context = "auto to an older receiver, reset at 1 MiB";
    ended.whole(&data, context);
    ended.reconnected(1, true, context);
    assert_eq!((proxy.cuts(), proxy.accepted()), (1, 3), "{context}: cuts made, connections");
    let said = &ended.sender.said;
    assert_eq!(said.matches("sending uncompressed").count(), 1, "{context}: {said}");
    let wire = &ended.sender.summary["outputs"][0]["wire"];
    let (bytes, stream) = (wire["bytes"].as_u64().unwrap(), wire["stream_bytes"].as_u64().unwrap());
    assert!(wire["compressing"] == false && bytes > stream, "{context}: {wire}");
}

/// The connection closed cleanly (a FIN each way) 1 MiB into it, without the end mark: the
/// receiver does not take it for the end, and the stream resumes.
fn a_clean_close_without_the_end_mark(engine: &'static str) {
    let data = pattern(8 << 20, 201);
    let plan = [(1 << 20, Cut::Close)];
    let (ended, accepted, made) =
        through_the_cutter(engine, "close", Duration::ZERO, &plan, &data, &[]);
    let context = "closed cleanly at 1 MiB";
    ended.whole(&data, context);
    let offsets = ended.reconnected(1, true, context);
    resumed_within(&offsets, &[1 << 20], context);
    assert_eq!((made, accepted), (1, 2), "{context}: cuts made, connections");
}

/// Issue 32, item 1: the receiver's confirmation of the end is lost to a reset. The
/// receiver's bytes are cut at 100 (its handshake answer is 66; the frame after it is the
/// first it says), and the stream, 977 KiB, goes whole before: the receiver, which has every
/// byte, must not leave before the sender has the confirmation; it takes the sender back and
/// confirms again, and both end with 0. `--start-at 2M` (more than the stream) holds the
/// receiver's output until the end mark has come, and `--heartbeat 1m` keeps it from saying
/// anything before: so its first word after the handshake is about the end, every time.
#[test]
fn the_confirmation_of_the_end_survives_a_reset() {
    let data = pattern(1_000_000, 210);
    let plan = [(100, Cut::ResetBack)];
    let args = ["--start-at", "2M", "--heartbeat", "1m", "--reconnect-for", "10s"];
    let (ended, accepted, made) =
        through_the_cutter("auto", "ack", Duration::ZERO, &plan, &data, &args);
    let context = "the receiver's bytes reset at 100, the stream whole before";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(1, true, context), [1_000_000], "{context}");
    assert_eq!((made, accepted), (1, 2), "{context}: cuts made, connections");
}

/// Issue 32, item 2: a reset in the sender's first frame, which confirms its handshake: the
/// preamble and first message are the first connection's 83 bytes, the frame its next 45
/// (bytes 84 to 128), cut after its first byte and before its last (84 and 127 bytes
/// passed); or just after the receiver's answer (its 66 bytes back). The stream exists from
/// the moment the sender's session is confirmed, whatever frame the cut lands in: the sender
/// connects again, goes on from byte 0, and the stream comes through whole. After the
/// answer, the reset may also reach the sender before it has sent its frame: then no session
/// was confirmed at either end, and it makes its first connection again, saying so.
#[test]
fn a_reset_in_the_first_frame_is_resumed() {
    for (at, cut) in [(84, Cut::Reset), (127, Cut::Reset), (66, Cut::ResetBack)] {
        let context = format!("{cut:?} at {at} of the first connection");
        let data = pattern(1 << 20, 211 + at);
        let (ended, accepted, made) =
            through_the_cutter("auto", "first", Duration::ZERO, &[(at, cut)], &data, &[]);
        ended.whole(&data, &context);
        let sender = &ended.sender;
        let first_again = sender.said.contains(
            "the connection dropped right after the handshake (the receiver closed the \
             connection (Connection reset by peer)); trying again for up to 0:00:10",
        );
        let resumed = if first_again && cut == Cut::ResetBack { 0 } else { 1 };
        let reconnections = &sender.summary["outputs"][0]["reconnections"];
        assert_eq!(reconnections, resumed, "{context}: {}", sender.said);
        assert_eq!(sender.resumed_at(), vec![0; resumed], "{context}: {}", sender.said);
        assert_eq!((made, accepted), (1, 2), "{context}: cuts made, connections");
    }
}

/// Issue 32, item 3: an outage shorter than `--reconnect-for` is survived however the tries
/// fall. With `--reconnect-for 10s` at both ends, the connection is reset and every new one
/// refused; the path comes back 8.5 s later. The tries come about 0.2, 1.2, 3.2 and 7.2 s
/// after the drop (each pause a quarter either way), the next would come past the deadline:
/// the last try, at the deadline, finds the path, and the receiver is still there for it.
///
/// The margin: the sender's deadline counts from its own sight of the drop, which comes after
/// the reset the test counts from, so the path is back at least 1.5 s before the last try: the
/// test's thread would have to wake 1.5 s late to miss it. The receiver waits longer than the
/// sender tries (see GUIDE.md), so it is there for that try.
#[test]
fn an_outage_shorter_than_reconnect_for_is_survived() {
    let args = ["--reconnect-for", "10s"];
    let (ends, proxy, sending, data) =
        delivered_through_a_proxy("short-outage", &args, 2 << 20, 212, 1 << 20);
    proxy.refuse();
    proxy.reset_now();
    let cut = Instant::now();
    sending.send(&data[1 << 20..]);
    // The outage the test is about: 8.5 s of the 10 s.
    thread::sleep(Duration::from_millis(8500).saturating_sub(cut.elapsed()));
    proxy.admit();
    let ended = ends.end(sending);
    let context = "the path away for 8.5 s of a 10 s --reconnect-for";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(1, true, context), [1 << 20], "{context}");
}

/// Issue 32, item 4: for 6 s the path is a black hole that still takes connections (a tunnel
/// whose far side is gone: [`Cutter::black_hole`]), with `--heartbeat 1s`. Both ends see the
/// drop after 4 s of silence, and the sender's first try goes into the hole. Each try is
/// given a heartbeat to answer (at least a second), then the next one goes: the stream is
/// back within seconds of the path, not after the 30 s a first connection may take. Nor does
/// the sender call its receiver, which answered before, a listener that never answers.
///
/// The bound is wide: 15 s of outage at the sender, where the tries give about 3 (the path is
/// back 2 s after the drop is seen, and tries start at most 2 s apart then) and a try given
/// 30 s gives more than 30.
#[test]
fn a_black_hole_is_left_soon_after_it_ends() {
    let args = ["--heartbeat", "1s"];
    let (ends, proxy, sending, data) =
        delivered_through_a_proxy("black-hole", &args, 2 << 20, 213, 1 << 20);
    proxy.black_hole();
    let hole = Instant::now();
    sending.said.line_with("connection dropped");
    ends.receiver.said.line_with("connection dropped");
    eventually(GENEROUS, "a try into the hole", || proxy.accepted() >= 2);
    thread::sleep(Duration::from_secs(6).saturating_sub(hole.elapsed()));
    proxy.path_back();
    sending.send(&data[1 << 20..]);
    let ended = ends.end(sending);
    let context = "a black hole for 6 s, --heartbeat 1s";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(1, true, context), [1 << 20], "{context}");
    let outage = ended.sender.summary["outputs"][0]["longest_outage_s"].as_f64().unwrap();
    assert!(outage < 15.0, "{context}: an outage of {outage} s: {}", ended.sender.said);
    assert!(!ended.sender.said.contains("mbuffer"), "{context}: {}", ended.sender.said);
}

/// Issue 32, item 5: a connection aborted at either end (`ss -K`, which a user may try, and
/// which the receiver's or the sender's next call meets as ECONNABORTED, the other end as a
/// reset) is a drop like a reset: both ends resume, twice, and the stream comes through whole.
#[test]
fn an_aborted_connection_is_a_drop_at_either_end() {
    let can = is_root() && has("ss", "-V");
    if !require("root and ss (iproute2), to abort a socket with ss -K", can) {
        return;
    }
    let mut ends = Ends::start("auto", "abort", &[], None);
    let mut sending = ends.sender(&ends.address().to_string(), None);
    let data = pattern(3 << 20, 214);
    let port = ends.receiver.port;
    // The receiver's connection has the port as its own, the sender's as its peer's.
    for (k, end) in [(1, "sport"), (2, "dport")] {
        sending.send(&data[(k - 1) << 20..k << 20]);
        ends.written.at_least(k << 20);
        let port = format!(":{port}");
        let killed = sh(&format!("ss -K -t -n state established '( {end} = {port} )'"));
        let listed = String::from_utf8_lossy(&killed.stdout);
        assert!(listed.contains(&port), "ss -K {end} = {port}: {listed}");
        // Until the sender says it resumed, or either end is gone, showing what both said.
        let resumed = Instant::now();
        while sending.said.text().matches("resuming at byte").count() < k {
            let gone = ends.receiver.child.try_wait().unwrap().is_some()
                || sending.child.try_wait().unwrap().is_some();
            assert!(
                !gone && resumed.elapsed() < GENEROUS,
                "abort {k} ({end}): not resumed\nsender: {}\nreceiver: {}",
                sending.said.text(),
                ends.receiver.said.text()
            );
            thread::sleep(TICK);
        }
    }
    sending.send(&data[2 << 20..]);
    let ended = ends.end(sending);
    let context = "the receiver's socket aborted, then the sender's";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(2, true, context).len(), 2, "{context}");
}

/// The path freezes (nothing passes, both connections held open) while the sender waits
/// for more input, 4 MiB delivered; it thaws once both ends have said the connection dropped
/// (4 heartbeats of 250 ms of silence). The stream resumes at exactly 4 MiB, nothing resent.
#[test]
fn a_freeze_longer_than_four_heartbeats() {
    let args = ["--heartbeat", "250ms"];
    let (ends, proxy, sending, data) =
        delivered_through_a_proxy("freeze", &args, 8 << 20, 202, 4 << 20);
    proxy.freeze();
    sending.said.line_with("connection dropped");
    ends.receiver.said.line_with("connection dropped");
    proxy.thaw();
    sending.send(&data[4 << 20..]);
    let ended = ends.end(sending);
    let context = "frozen at 4 MiB";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(1, true, context), [4 << 20], "{context}");
    let output = &ended.sender.summary["outputs"][0];
    assert_eq!(output["resent_bytes"], 0, "{context}: {output}");
    // Tries made while the path was frozen waited in the proxy: how many depends on time.
    assert!(proxy.accepted() >= 2, "{context}: {} connections", proxy.accepted());
}

/// Two resets through a path that delays every byte by 20 ms each way.
#[test]
fn resets_through_a_delaying_proxy() {
    let data = pattern(8 << 20, 203);
    let cuts = [1 << 20, 3 << 20];
    let plan = cuts.map(|at| (at, Cut::Reset));
    let (ended, accepted, made) =
        through_the_cutter("auto", "delayed", Duration::from_millis(20), &plan, &data, &[]);
    let context = "resets at 1 and 3 MiB, 20 ms each way";
    ended.whole(&data, context);
    let offsets = ended.reconnected(2, true, context);
    resumed_within(&offsets, &cuts, context);
    assert_eq!((made, accepted), (2, 3), "{context}: cuts made, connections");
}

/// What the receiver has not confirmed stays in the sender's buffer however small it is:
/// with `-m 1M` on both ends, three resets through 8 MiB; the same with `--spill`, where the
/// input goes on into the spill file during each outage.
#[test]
fn resets_with_a_small_buffer() {
    let spill = Scratch::new("resume-spill");
    for args in [vec!["-m", "1M"], vec!["-m", "1M", "--spill", spill.arg()]] {
        let data = pattern(8 << 20, 209);
        let cuts = [1 << 20, 2 << 20, 3 << 20];
        let plan = cuts.map(|at| (at, Cut::Reset));
        let (ended, accepted, made) =
            through_the_cutter("auto", "small", Duration::ZERO, &plan, &data, &args);
        let context = format!("{args:?}, resets at 1, 2 and 3 MiB");
        ended.whole(&data, &context);
        let offsets = ended.reconnected(3, true, &context);
        resumed_within(&offsets, &cuts, &context);
        assert_eq!((made, accepted), (3, 4), "{context}: cuts made, connections");
    }
}

/// An outage longer than `--reconnect-for 2s`: 1 MiB delivered, the sender's input still
/// open, the connection reset and the proxy refusing every new one. The sender fails with
/// status 3, the receiver with 1, no sooner than the bound; both name the bytes delivered,
/// and the sender the cause its last try met, at the deadline (issue 32, item 3: it said
/// "timed out", the last try given no time). The receiver waits longer than the sender
/// tries, so as to be there for its last try: four heartbeats (1 s) and a try (1 s) more.
#[test]
fn an_outage_longer_than_reconnect_for_fails_both_sides() {
    let args = ["--reconnect-for", "2s", "--heartbeat", "1s"];
    let (ends, proxy, sending, data) =
        delivered_through_a_proxy("outage", &args, 1 << 20, 204, 1 << 20);
    proxy.refuse();
    let cut = Instant::now();
    proxy.reset_now();
    // Its input stays open: the sender gives up because of the outage alone.
    let mut sending = sending;
    let status = sending.said.exit_of(&mut sending.child);
    let gave_up = cut.elapsed();
    let said = sending.said.all();
    sending.close_input();
    let written = {
        let Ends { mut receiver, written, .. } = ends;
        let status = receiver.said.exit_of(&mut receiver.child);
        let waited = cut.elapsed();
        let said_received = receiver.said.all();
        let written = written.all();
        assert_eq!(status.code(), Some(1), "receiver: {said_received}");
        assert!(waited >= Duration::from_millis(6500), "the receiver gave up after {waited:?}");
        assert!(said_received.contains("did not come back within 0:00:07"), "{said_received}");
        // "N bytes" as accel writes a count: "1 MiB (1048576 bytes)".
        assert!(
            said_received.contains(&format!("{} bytes", written.len())),
            "the receiver names the {} bytes it delivered: {said_received}",
            written.len()
        );
        written
    };
    assert_eq!(status.code(), Some(3), "sender: {said}");
    assert!(gave_up >= Duration::from_millis(1500), "the sender gave up after {gave_up:?}");
    let cause = format!(
        "the connection could not be restored within 0:00:02 ({}: Connection refused)",
        proxy.to()
    );
    assert!(said.contains(&cause), "{said}");
    assert_same(&written, &data, "delivered before the outage");
    let delivered = bytes_before(&said, " delivered");
    assert!(delivered <= written.len() as u64, "{delivered} delivered, {} written", written.len());
    assert_eq!(proxy.accepted(), 1, "connections");
}

/// During an outage (the proxy refusing the sender), strangers connect to the receiver
/// itself: one sends garbage, one replays the first 80 bytes the sender sent on its first
/// connection, one the whole first handshake message. None gets anything but at most a
/// handshake's answer, and none changes anything: once the proxy listens again, the stream
/// resumes where it was, whole, one reconnection.
#[test]
fn a_stranger_during_an_outage_changes_nothing() {
    let (ends, proxy, sending, data) =
        delivered_through_a_proxy("stranger", &[], 4 << 20, 205, 1 << 20);
    proxy.refuse();
    proxy.reset_now();
    ends.receiver.said.line_with("connection dropped");

    let first = proxy.first_sent();
    assert!(first.len() >= 82, "the sender's first bytes: {first:?}");
    // The preamble (8 bytes), the first message's length (2), the message.
    let whole = 10 + usize::from(u16::from_be_bytes([first[8], first[9]]));
    let strangers: [(&str, Vec<u8>, usize); 3] = [
        ("garbage", b"GET / HTTP/1.0\r\n\r\n\x00\xff garbage".to_vec(), 0),
        ("the first 80 bytes", first[..80].to_vec(), 0),
        // Its answer (a preamble, a length, a second message) may come; nothing more.
        ("the first message", first[..whole].to_vec(), 256),
    ];
    for (who, says, most) in strangers {
        let mut stranger = TcpStream::connect(ends.address()).unwrap();
        stranger.write_all(&says).unwrap();
        stranger.shutdown(Shutdown::Write).unwrap();
        stranger.set_read_timeout(Some(GENEROUS)).unwrap();
        let mut got = Vec::new();
        // Until the receiver hangs up (an RST counts): it must, or the read times out.
        let ended = stranger.read_to_end(&mut got);
        if let Err(e) = &ended {
            assert_ne!(e.kind(), io::ErrorKind::WouldBlock, "{who}: the receiver never hung up");
        }
        assert!(got.len() <= most, "{who} got {} bytes: {got:?}", got.len());
    }

    proxy.admit();
    sending.send(&data[1 << 20..]);
    let ended = ends.end(sending);
    let context = "strangers during the outage";
    ended.whole(&data, context);
    assert_eq!(ended.reconnected(1, true, context), [1 << 20], "{context}");
    assert_eq!(proxy.accepted(), 2, "{context}: connections");
}

/// `--reconnect-for 0` is today's behaviour: the first reset fails the transfer, the sender
/// with status 3, the receiver with 1; the sender does not try again.
fn reconnect_for_zero_fails_at_the_first_reset(engine: &'static str) {
    let data = pattern(16 << 20, 206);
    let plan = [(1 << 20, Cut::Reset)];
    let args = ["--reconnect-for", "0"];
    let (ended, accepted, made) =
        through_the_cutter(engine, "zero", Duration::ZERO, &plan, &data, &args);
    let (sender, receiver) = (&ended.sender, &ended.receiver);
    assert_eq!(sender.status.code(), Some(3), "sender: {}", sender.said);
    assert_eq!(receiver.status.code(), Some(1), "receiver: {}", receiver.said);
    assert_same(&ended.written, &data[..ended.written.len()], "before the reset");
    let delivered = bytes_before(&sender.said, " delivered (confirmed by the receiver)");
    assert!(delivered <= ended.written.len() as u64, "{}", sender.said);
    for end in [sender, receiver] {
        assert!(end.resumed_at().is_empty(), "{}", end.said);
    }
    assert_eq!((made, accepted), (1, 1), "cuts made, connections");
}

/// `--insecure` does not resume (a raw stream has no offsets): a reset fails both ends, the
/// sender with status 3, the receiver with 1 (an RST is not the end of a stream, even where
/// a FIN would pass for one), and the sender does not try again.
fn insecure_does_not_resume(engine: &'static str) {
    let mut receiver = Receiver::start(engine, "127.0.0.1", &["--insecure"], None);
    let written = Written::collect(receiver.stdout());
    let upstream = SocketAddr::from(([127, 0, 0, 1], receiver.port));
    let proxy = Cutter::start(upstream, Duration::ZERO, &[(1 << 20, Cut::Reset)]);
    let mut sending = sender(engine, &proxy.to(), &["--insecure"], None);
    let said = Said::collect(&mut sending);
    let data = pattern(16 << 20, 208);
    let stdin = sending.stdin.take().unwrap();
    thread::spawn(move || feed(stdin, &data, 1 << 20));
    let (status, said) = said.ended(&mut sending);
    assert_eq!(status.code(), Some(3), "sender: {said}");
    let (received, said) = receiver.end();
    let written = written.all();
    assert_eq!(received.code(), Some(1), "receiver, {} bytes written: {said}", written.len());
    assert!(written.len() <= 1 << 20, "{} bytes written", written.len());
    assert_same(&written, &pattern(16 << 20, 208)[..written.len()], "before the reset");
    assert_eq!(proxy.accepted(), 1, "connections");
}

per_engine!(
    three_resets_at_random_offsets,
    three_resets_with_compression,
    three_resets_with_compression_on_threads,
    auto_resumes_uncompressed_to_an_older_receiver,
    a_clean_close_without_the_end_mark,
    reconnect_for_zero_fails_at_the_first_reset,
    insecure_does_not_resume,
);

// ----- across network namespaces -----

/// A sender in one namespace (`a`), its receiver in another (`b`), `--heartbeat 250ms` both;
/// 4 MiB delivered, the sender waiting for more input. Then `away` takes the path away, the
/// sender is given 4 MiB more, and `back` gives the path back. The stream resumes at exactly
/// 4 MiB (nothing after it got through), whole, after one reconnection.
fn across_an_outage(
    tag: &str,
    subnet: u8,
    away: impl FnOnce(&Veth, &Ends),
    back: impl FnOnce(&Veth, &Ends, &Sending),
) {
    let Some(veth) = Veth::new(tag, subnet) else { return };
    let args = ["--heartbeat", "250ms"];
    let ends = Ends::start("auto", tag, &args, Some(&veth.b));
    let sending = ends.sender(&ends.address().to_string(), Some(&veth.a.netns));
    let data = pattern(8 << 20, 207);
    sending.send(&data[..4 << 20]);
    ends.written.at_least(4 << 20);
    away(&veth, &ends);
    sending.send(&data[4 << 20..]);
    back(&veth, &ends, &sending);
    let ended = ends.end(sending);
    ended.whole(&data, tag);
    assert_eq!(ended.reconnected(1, true, tag), [4 << 20], "{tag}");
}

/// The veth link taken down (`ip link set va down`, in the sender's namespace) for 3
/// seconds, then brought back up.
#[test]
fn the_link_down_for_three_seconds() {
    across_an_outage(
        "rslink",
        20,
        |veth, _| veth.a.netns.ip(&["link", "set", veth.a.dev, "down"]),
        |veth, _, _| {
            thread::sleep(Duration::from_secs(3));
            veth.a.netns.ip(&["link", "set", veth.a.dev, "up"]);
        },
    );
}

/// The receiver's address taken away while the sender retries, then given back. These
/// namespaces have no name service, so the sender cannot be pointed at a new address by a
/// name that resolves again; what changes instead is whether the address it was given
/// exists: it is deleted from the receiver's interface (`ip addr del`; what is sent to it
/// goes unanswered, and the receiver's sockets, bound to it, stay), both ends say the
/// connection dropped, the sender retries for 2 more seconds (its first tries, 1 s apart,
/// meet no host), and the address is added back.
#[test]
fn the_receivers_address_taken_away_and_given_back() {
    let address = |receiver: &Host| format!("{}/24", receiver.addr);
    across_an_outage(
        "rsaddr",
        21,
        |veth, _| veth.b.netns.ip(&["addr", "del", &address(&veth.b), "dev", veth.b.dev]),
        |veth, ends, sending| {
            sending.said.line_with("connection dropped");
            ends.receiver.said.line_with("connection dropped");
            thread::sleep(Duration::from_secs(2));
            veth.b.netns.ip(&["addr", "add", &address(&veth.b), "dev", veth.b.dev]);
        },
    );
}

// ----- random cut points -----

/// `cuts` cuts at seeded random points of `size` bytes (with `--heartbeat 250ms`): resets,
/// clean closes and freezes in the stream, and now and then a reset within a reconnection's
/// handshake (never the first connection's: that one is not a reconnection). Every cut in
/// the stream is a reconnection; one in a handshake is a failed try, which the sender repeats.
fn random_cuts(test: &str, cuts: usize, size: usize, also: &str) {
    let seed = seed(test, also);
    let mut rng = Rng::new(seed);
    let most = (size / (2 * cuts)) as u64;
    let plan: Vec<(u64, Cut)> = (0..cuts)
        .map(|k| match rng.between(0, 9) {
            9 if k > 0 => (rng.between(1, 40), Cut::Reset),
            0..=4 | 9 => (rng.between(64 << 10, most), Cut::Reset),
            5 | 6 => (rng.between(64 << 10, most), Cut::Close),
            _ => (rng.between(64 << 10, most), Cut::Freeze),
        })
        .collect();
    let in_stream = plan.iter().filter(|(at, _)| *at >= 64 << 10).count();
    let context = format!("cuts {plan:?} (seed {seed:#x})");
    let data = pattern(size, seed);
    let args = ["--heartbeat", "250ms"];
    let (ended, accepted, made) =
        through_the_cutter("auto", test, Duration::ZERO, &plan, &data, &args);
    ended.whole(&data, &context);
    // A cut in a handshake may be said as a drop too: the lines are not counted.
    let offsets = ended.reconnected(in_stream as u64, false, &context);
    let carried: Vec<u64> =
        plan.iter().filter(|(at, _)| *at >= 64 << 10).map(|(at, _)| *at).collect();
    resumed_within(&offsets, &carried, &context);
    assert_eq!((made, accepted), (cuts, cuts + 1), "{context}: cuts made, connections");
}

/// Five random cuts through 16 MiB.
#[test]
fn five_random_cuts() {
    random_cuts("five_random_cuts", 5, 16 << 20, "");
}

/// `ACCEL_RESUME_CUTS` random cuts (default 100) through 256 MiB: `cargo test --test
/// integration resume::random_cuts_soak -- --ignored --nocapture`.
#[test]
#[ignore = "minutes: a cut costs a second or two; run on purpose"]
fn random_cuts_soak() {
    let cuts = std::env::var("ACCEL_RESUME_CUTS").map_or(100, |n| n.parse().expect("a number"));
    random_cuts("random_cuts_soak", cuts, 256 << 20, &format!("ACCEL_RESUME_CUTS={cuts} "));
}
