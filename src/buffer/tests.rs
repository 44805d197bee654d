//! The library's API: runs between readers, writers and descriptors; what the report says
//! when an output fails; the adapters in front of a slow, a failing and a panicking writer,
//! and a reader that blocks. Orderings are proven with channels, never with sleeps; every wait
//! has a generous timeout.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use super::sides::{Source, Target};
use super::*;

/// Long enough that only a hang reaches it on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(60);

/// Bytes that show any reordering, loss or repetition.
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A writer into memory that the test can look at after the run has dropped it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Takes `room` bytes (the last write partly), then fails every write with ENOSPC.
struct Failing {
    room: usize,
    taken: Arc<AtomicU64>,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = buf.len().min(self.room).min(1000);
        self.room -= n;
        self.taken.fetch_add(n as u64, SeqCst);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Takes one write per permit: as slow as the test says. Says when it is dropped.
struct Slow {
    permits: mpsc::Receiver<()>,
    got: Shared,
    dropped: Arc<AtomicBool>,
}

impl Write for Slow {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.permits.recv().map_err(|_| io::Error::other("no more permits"))?;
        self.got.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Slow {
    fn drop(&mut self) {
        self.dropped.store(true, SeqCst);
    }
}

/// Gives its bytes at the first read; then fails every read with EIO, or panics.
struct Broken {
    bytes: Option<&'static [u8]>,
    panics: bool,
}

impl Broken {
    fn failing(bytes: &'static [u8]) -> Broken {
        Broken { bytes: Some(bytes), panics: false }
    }

    fn panicking(bytes: &'static [u8]) -> Broken {
        Broken { bytes: Some(bytes), panics: true }
    }
}

impl Read for Broken {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.bytes.take() {
            Some(bytes) => {
                buf[..bytes.len()].copy_from_slice(bytes);
                Ok(bytes.len())
            }
            None if self.panics => panic!("the reader's own bug"),
            None => Err(io::Error::from_raw_os_error(libc::EIO)),
        }
    }
}

/// Panics at the first write.
struct PanicsWriting;

impl Write for PanicsWriting {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        panic!("the writer's own bug");
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `body` on a thread and waits for it at most [`GENEROUS`]: a hang fails the test.
fn within<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(body());
    });
    result.recv_timeout(GENEROUS).unwrap_or_else(|_| panic!("{what}: hung"))
}

#[test]
fn every_byte_reaches_every_output_in_order() {
    let data = pattern(5 << 20);
    let (a, b) = (Shared::default(), Shared::default());
    let input = Input::reader(io::Cursor::new(data.clone()));
    let outputs = vec![Output::writer(a.clone()), Output::writer(b.clone()).named("b")];
    let report = Buffer::new().size(64 << 10).run(input, outputs).expect("complete");
    assert_eq!(report.bytes_in, data.len() as u64);
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.to_string(), "complete: 5 MiB (5242880 bytes) to 2 output(s)");
    assert_eq!(report.outputs[1].name, "b");
    for output in &report.outputs {
        assert_eq!((output.delivered, output.lost), (data.len() as u64, 0));
    }
    assert!(a.bytes() == data && b.bytes() == data, "an output got other bytes");
}

#[test]
fn descriptors_are_copied_exactly_file_to_file_and_through_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3 << 20);
    let source = dir.path().join("source");
    std::fs::write(&source, &data).unwrap();
    // File to file.
    let copy = dir.path().join("copy");
    let input = Input::fd(std::fs::File::open(&source).unwrap());
    let output = Output::fd(std::fs::File::create(&copy).unwrap());
    let report = Buffer::new().size(256 << 10).run(input, vec![output]).expect("complete");
    assert_eq!(report.outputs[0].delivered, data.len() as u64);
    assert!(std::fs::read(&copy).unwrap() == data, "the file copy differs");
    // Pipe to pipe, with the other ends on threads of their own.
    let (in_r, in_w) = rustix::pipe::pipe().unwrap();
    let (out_r, out_w) = rustix::pipe::pipe().unwrap();
    let feed = data.clone();
    let feeder = thread::spawn(move || std::fs::File::from(in_w).write_all(&feed));
    let drainer = thread::spawn(move || {
        let mut got = Vec::new();
        std::fs::File::from(out_r).read_to_end(&mut got).map(|_| got)
    });
    let report = within("pipe to pipe", move || {
        Buffer::new().size(1 << 20).run(Input::fd(in_r), vec![Output::fd(out_w)])
    })
    .expect("complete");
    feeder.join().unwrap().unwrap();
    assert!(drainer.join().unwrap().unwrap() == data, "the pipe copy differs");
    assert_eq!(report.outputs[0].delivered, data.len() as u64);
}

#[test]
fn a_failing_output_is_reported_exactly_and_the_others_go_on() {
    let data = pattern(2 << 20);
    let taken = Arc::new(AtomicU64::new(0));
    let failing = Failing { room: 123_456, taken: Arc::clone(&taken) };
    let good = Shared::default();
    let input = Input::reader(io::Cursor::new(data.clone()));
    let outputs = vec![Output::writer(failing).named("full"), Output::writer(good.clone())];
    let error = Buffer::new().size(128 << 10).run(input, outputs).expect_err("incomplete");
    let report = error.report().expect("a report");
    assert!(!report.is_complete());
    assert!(report.input.is_complete(), "the input went on: {report}");
    let full = &report.outputs[0];
    assert_eq!(full.delivered, 123_456);
    assert_eq!(full.delivered, taken.load(SeqCst));
    assert_eq!(full.lost, data.len() as u64 - 123_456);
    match &full.outcome {
        Outcome::Failed(error) => assert_eq!(error.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("the full output ended as {other:?}"),
    }
    assert!(report.outputs[1].outcome.is_complete());
    assert!(good.bytes() == data, "the good output missed bytes");
    let said = error.to_string();
    assert!(
        said.contains("write to full: No space left on device; 121 KiB (123456 bytes) delivered, "),
        "{said}"
    );
}

#[test]
fn end_run_stops_everything_at_the_first_failing_output() {
    let taken = Arc::new(AtomicU64::new(0));
    let failing = Failing { room: 10_000, taken: Arc::clone(&taken) };
    // An endless input: only the policy can end the run.
    let input = Input::reader(io::repeat(7));
    let outputs = vec![Output::writer(failing), Output::writer(io::sink())];
    let buffer = Buffer::new().size(64 << 10).on_output_error(OnOutputError::EndRun);
    let error = within("end the run", move || buffer.run(input, outputs)).expect_err("failed");
    let report = error.report().expect("a report");
    assert!(matches!(report.input, Outcome::CutShort), "{:?}", report.input);
    assert!(matches!(report.outputs[0].outcome, Outcome::Failed(_)));
    assert_eq!(report.outputs[0].delivered, 10_000);
    assert!(matches!(report.outputs[1].outcome, Outcome::CutShort));
}

#[test]
fn a_reader_error_comes_after_the_bytes_before_it() {
    let got = Shared::default();
    let error = Buffer::new()
        .run(Input::reader(Broken::failing(b"abc")), vec![Output::writer(got.clone())])
        .expect_err("the input failed");
    let report = error.report().unwrap();
    assert!(matches!(&report.input, Outcome::Failed(e) if e.raw_os_error() == Some(libc::EIO)));
    assert_eq!((report.bytes_in, report.outputs[0].delivered), (3, 3));
    assert_eq!(got.bytes(), b"abc");
}

/// Issue 32, item 10: a panic in the program's own writer or reader is said as the
/// program's, with its message; not as a bug in accel.
#[test]
fn a_panic_in_the_program_s_writer_or_reader_is_said_as_the_program_s() {
    let input = Input::reader(&b"abc"[..]);
    let error = Buffer::new().run(input, vec![Output::writer(PanicsWriting)]).expect_err("failed");
    let report = error.report().expect("a report");
    let Outcome::Failed(why) = &report.outputs[0].outcome else { panic!("{report:?}") };
    assert_eq!(why.to_string(), "the program's writer panicked (the writer's own bug)");
    assert!(
        error.to_string().starts_with(
            "write to output 1: the program's writer panicked (the writer's own bug); 0 bytes \
             delivered"
        ),
        "{error}"
    );

    let input = Input::reader(Broken::panicking(b"abc"));
    let error = Buffer::new().run(input, vec![Output::writer(io::sink())]).expect_err("failed");
    let report = error.report().expect("a report");
    let Outcome::Failed(why) = &report.input else { panic!("{report:?}") };
    assert_eq!(why.to_string(), "the program's reader panicked (the reader's own bug)");
    assert_eq!((report.bytes_in, report.outputs[0].delivered), (3, 3), "the bytes before it");
}

/// Issue 32, item 9: a program that handles SIGURG itself sees it twice at most, not hundreds
/// of times, on a thread that a run ended early leaves blocked in a call no signal ends (here
/// the program's own reader, in a channel's wait).
#[test]
fn a_program_s_own_sigurg_handler_sees_a_blocked_thread_interrupted_twice_at_most() {
    use std::sync::atomic::AtomicUsize;
    /// The thread whose interrupts are counted (other tests' runs signal theirs).
    static BLOCKED: AtomicUsize = AtomicUsize::new(0);
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn count(_: libc::c_int) {
        // SAFETY: pthread_self is async-signal-safe.
        if unsafe { libc::pthread_self() } as usize == BLOCKED.load(SeqCst) {
            SEEN.fetch_add(1, SeqCst);
        }
    }
    /// Gives three bytes, then blocks until released, saying so.
    struct Stuck {
        gave: bool,
        blocked: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
    }
    impl Read for Stuck {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !std::mem::replace(&mut self.gave, true) {
                buf[..3].copy_from_slice(b"abc");
                return Ok(3);
            }
            // SAFETY: pthread_self has no preconditions.
            BLOCKED.store(unsafe { libc::pthread_self() } as usize, SeqCst);
            let _ = self.blocked.send(());
            let _ = self.release.recv();
            Ok(0)
        }
    }
    /// Fails once the reader is blocked: the run ends with its input thread in the reader.
    struct FailsOnceBlocked(mpsc::Receiver<()>);
    impl Write for FailsOnceBlocked {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            let _ = self.0.recv_timeout(GENEROUS);
            Err(io::Error::from_raw_os_error(libc::EIO))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    // The program's handler, as a program would install it: no SA_RESTART, as the run's own
    // (installed first, so that other tests' runs are not left without it afterwards).
    crate::stop::Stop::install_unless_set();
    // SAFETY: a handler that only touches atomics is async-signal-safe; the action is well
    // formed, and the previous one is put back.
    let previous = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(libc::SIGURG, &action, &mut previous), 0);
        previous
    };
    let (blocked, is_blocked) = mpsc::channel();
    let (release, released) = mpsc::channel();
    let input = Input::reader(Stuck { gave: false, blocked, release: released });
    let output = Output::writer(FailsOnceBlocked(is_blocked));
    let error = within("run", move || Buffer::new().run(input, vec![output])).expect_err("failed");
    let seen = SEEN.load(SeqCst);
    drop(release);
    // SAFETY: puts back the action read above.
    unsafe { libc::sigaction(libc::SIGURG, &previous, std::ptr::null_mut()) };
    let report = error.report().expect("a report");
    assert!(matches!(report.input, Outcome::CutShort), "{report:?}");
    // Once, and once more in case the first landed before the call (stop.rs): not ~400.
    assert_eq!(seen, crate::stop::INTERRUPTS as usize, "interrupts the program's handler saw");
}

#[test]
fn a_stall_ends_the_run_and_says_which_side() {
    struct Silent(mpsc::Receiver<()>);
    impl Read for Silent {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            let _ = self.0.recv();
            Ok(0)
        }
    }
    let (hold, silent) = mpsc::channel();
    let buffer = Buffer::new().stall_timeout(Duration::from_millis(200));
    let input = Input::reader(Silent(silent));
    let error = within("stall", move || buffer.run(input, vec![Output::writer(io::sink())]))
        .expect_err("stalled");
    let report = error.report().unwrap();
    let why = report.stalled.as_deref().expect("stalled");
    assert!(why.starts_with("stalled: no input from input for "), "{why}");
    drop(hold);
}

#[test]
fn progress_is_called_at_the_end_with_the_final_counts() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let buffer = Buffer::new()
        .progress_every(Duration::from_millis(5), move |p| log.lock().unwrap().push(p.clone()));
    let report = buffer
        .run(Input::reader(io::Cursor::new(pattern(1 << 20))), vec![Output::writer(io::sink())])
        .unwrap();
    let seen = seen.lock().unwrap();
    let last = seen.last().expect("at least the final call");
    assert_eq!((last.bytes_in, last.delivered.as_slice()), (1 << 20, &[1 << 20][..]));
    assert_eq!(last, &report.progress);
    let bytes_in: Vec<u64> = seen.iter().map(|p| p.bytes_in).collect();
    assert!(bytes_in.windows(2).all(|w| w[0] <= w[1]), "went back: {bytes_in:?}");
}

#[test]
fn a_transfer_reports_like_a_run() {
    let transfer = Buffer::new()
        .start(Input::reader(io::Cursor::new(pattern(100_000))), vec![Output::writer(io::sink())])
        .unwrap();
    assert!(transfer.progress().bytes_in <= 100_000);
    let report = within("transfer", move || transfer.wait()).unwrap();
    assert_eq!(report.outputs[0].delivered, 100_000);
}

#[test]
fn settings_that_cannot_work_are_refused_before_reading() {
    let read = Arc::new(AtomicBool::new(false));
    struct Watched(Arc<AtomicBool>);
    impl Read for Watched {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            self.0.store(true, SeqCst);
            Ok(0)
        }
    }
    let no_outputs = Buffer::new().run(Input::reader(Watched(Arc::clone(&read))), Vec::new());
    assert!(matches!(no_outputs, Err(Error::Settings(_))));
    let spill = Buffer::new()
        .spill("/nonexistent/accel")
        .run(Input::reader(Watched(Arc::clone(&read))), vec![Output::writer(io::sink())]);
    match spill {
        Err(Error::Settings(why)) => {
            assert!(why.starts_with("spill /nonexistent/accel: "), "{why}")
        }
        other => panic!("a missing spill directory gave {other:?}"),
    }
    assert!(!read.load(SeqCst), "something was read");
}

#[test]
fn write_behind_returns_before_a_slow_writer_has_taken_anything() {
    let (permit, permits) = mpsc::sync_channel(0);
    let got = Shared::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let slow = Slow { permits, got: got.clone(), dropped: Arc::clone(&dropped) };
    let data = pattern(1 << 20);
    let mut out = WriteBehind::with_capacity(2 << 20, slow).unwrap();
    // No permit yet: the inner writer has taken nothing, and every write returned.
    out.write_all(&data).unwrap();
    assert!(got.bytes().is_empty());
    assert_eq!(out.progress().bytes_in, data.len() as u64);
    let feeder = thread::spawn(move || while permit.send(()).is_ok() {});
    let (slow, delivered) =
        within("finish", move || out.finish().map_err(|e| e.to_string())).expect("finished");
    assert_eq!(delivered, data.len() as u64);
    assert!(got.bytes() == data, "the slow writer got other bytes");
    drop(slow);
    assert!(dropped.load(SeqCst));
    feeder.join().unwrap();
}

#[test]
fn write_behind_says_a_failure_with_the_bytes_delivered_exactly() {
    let taken = Arc::new(AtomicU64::new(0));
    let failing = Failing { room: 54_321, taken: Arc::clone(&taken) };
    let mut out = WriteBehind::with_capacity(1 << 20, failing).unwrap();
    out.write_all(&pattern(100_000)).unwrap();
    // flush waits for the writer: it has failed by the time flush returns.
    let error = out.flush().expect_err("the writer failed");
    assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
    // The next write says it too.
    assert_eq!(out.write(b"more").map_err(|e| e.raw_os_error()), Err(Some(libc::ENOSPC)));
    let incomplete = out.finish().err().expect("incomplete");
    assert_eq!(incomplete.error().raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(incomplete.delivered(), 54_321);
    assert_eq!(incomplete.to_string(), "No space left on device; 53 KiB (54321 bytes) delivered");
    assert_eq!(taken.load(SeqCst), 54_321);
    let failing = incomplete.into_inner();
    assert_eq!(failing.room, 0);
}

#[test]
fn write_behind_drop_delivers_what_is_buffered_and_joins_its_thread() {
    let (permit, permits) = mpsc::sync_channel(0);
    let got = Shared::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let slow = Slow { permits, got: got.clone(), dropped: Arc::clone(&dropped) };
    let mut out = WriteBehind::new(slow).unwrap();
    out.write_all(b"kept on drop").unwrap();
    let feeder = thread::spawn(move || while permit.send(()).is_ok() {});
    within("drop", move || drop(out));
    // The thread was joined: the writer is gone, with every byte.
    assert!(dropped.load(SeqCst));
    assert_eq!(got.bytes(), b"kept on drop");
    feeder.join().unwrap();
}

#[test]
fn write_behind_drop_after_a_failure_neither_panics_nor_hangs() {
    let taken = Arc::new(AtomicU64::new(0));
    let mut out = WriteBehind::new(Failing { room: 10, taken: Arc::clone(&taken) }).unwrap();
    out.write_all(&[1; 5000]).unwrap();
    within("drop", move || drop(out));
    assert_eq!(taken.load(SeqCst), 10);
}

#[test]
fn write_behind_survives_a_panicking_writer() {
    let mut out = WriteBehind::new(PanicsWriting).unwrap();
    out.write_all(b"x").unwrap();
    let incomplete = within("finish", move || out.finish().err().map(|e| e.to_string()));
    assert_eq!(
        incomplete.as_deref(),
        Some("the inner writer panicked (the writer's own bug); 0 bytes delivered")
    );
}

#[test]
fn read_ahead_reads_the_inner_reader_before_the_caller_asks() {
    struct Told {
        data: io::Cursor<Vec<u8>>,
        ended: mpsc::Sender<()>,
    }
    impl Read for Told {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.data.read(buf)?;
            if n == 0 {
                let _ = self.ended.send(());
            }
            Ok(n)
        }
    }
    let data = pattern(3 << 20);
    let (ended, end) = mpsc::channel();
    let mut ahead =
        ReadAhead::with_capacity(4 << 20, Told { data: io::Cursor::new(data.clone()), ended })
            .unwrap();
    // The inner reader reaches its end before the caller has read a byte.
    end.recv_timeout(GENEROUS).expect("read ahead to the end");
    assert_eq!(ahead.progress().bytes_in, data.len() as u64);
    let mut got = Vec::new();
    ahead.read_to_end(&mut got).unwrap();
    assert!(got == data, "read ahead gave other bytes");
}

#[test]
fn read_ahead_gives_the_bytes_then_the_error() {
    let mut ahead = ReadAhead::with_capacity(1 << 16, Broken::failing(b"first")).unwrap();
    let mut got = Vec::new();
    let error = ahead.read_to_end(&mut got).expect_err("the reader failed");
    assert_eq!((got.as_slice(), error.raw_os_error()), (&b"first"[..], Some(libc::EIO)));
}

/// Issue 32, item 8: a caller that logs an error and goes on reading never mistakes what
/// follows for a clean end.
#[test]
fn read_ahead_repeats_its_inner_reader_s_failure_on_every_later_read() {
    let mut ahead = ReadAhead::with_capacity(1 << 16, Broken::failing(b"first")).unwrap();
    let mut got = Vec::new();
    let mut said = Vec::new();
    // Logs and goes on, as a careless caller would; a clean end would stop it.
    let mut buf = [0; 8];
    while said.len() < 3 {
        match ahead.read(&mut buf) {
            Ok(0) => panic!("a clean end after {} bytes and {said:?}", got.len()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(error) => said.push(error.raw_os_error()),
        }
    }
    assert_eq!((got.as_slice(), said), (&b"first"[..], vec![Some(libc::EIO); 3]));
}

/// A caller's retry loop: goes on after `WouldBlock` and `Interrupted`, as `std::io` says
/// it may, until the end or another error.
fn read_retrying(from: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
}

/// A reader or writer that says `kind` (`WouldBlock`: not ready; `Interrupted`) before every
/// other call, and moves at most 15,554 bytes at once: a non-blocking socket's pattern.
struct Fitful<T> {
    inner: T,
    kind: io::ErrorKind,
    ready: bool,
}

impl<T> Fitful<T> {
    const MOST: usize = 15_554;

    fn new(inner: T, kind: io::ErrorKind) -> Fitful<T> {
        Fitful { inner, kind, ready: false }
    }

    fn ready(&mut self) -> io::Result<()> {
        self.ready = !self.ready;
        if self.ready { Err(self.kind.into()) } else { Ok(()) }
    }
}

impl<R: Read> Read for Fitful<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ready()?;
        let most = buf.len().min(Self::MOST);
        self.inner.read(&mut buf[..most])
    }
}

impl<W: Write> Write for Fitful<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ready()?;
        self.inner.write(&buf[..buf.len().min(Self::MOST)])
    }
    fn flush(&mut self) -> io::Result<()> {
        self.ready()?;
        self.inner.flush()
    }
}

/// Issue 32, item 8: a non-blocking inner reader's `WouldBlock` is waited out by the
/// read-ahead thread, never an end: every byte arrives, and the caller sees no error.
#[test]
fn read_ahead_waits_out_a_non_blocking_inner_reader() {
    let data = pattern(1_000_000);
    let inner = Fitful::new(io::Cursor::new(data.clone()), io::ErrorKind::WouldBlock);
    let mut ahead = ReadAhead::with_capacity(1 << 16, inner).unwrap();
    let got = within("read", move || read_retrying(&mut ahead)).expect("no error");
    assert_eq!(got.len(), data.len());
    assert!(got == data, "other bytes");
}

/// `Interrupted` from the inner reader is retried by the read-ahead thread, as
/// `Read::read_to_end` retries it.
#[test]
fn read_ahead_retries_an_interrupted_inner_read() {
    let data = pattern(1_000_000);
    let inner = Fitful::new(io::Cursor::new(data.clone()), io::ErrorKind::Interrupted);
    let mut ahead = ReadAhead::with_capacity(1 << 16, inner).unwrap();
    let mut got = Vec::new();
    within("read", move || ahead.read_to_end(&mut got).map(|_| got))
        .map_or_else(|e| panic!("{e}"), |got| assert!(got == data, "other bytes"));
}

/// Issue 32, item 8: a panic of the inner reader is said, with its message, on every read
/// after the bytes before it.
#[test]
fn read_ahead_says_a_panic_of_its_inner_reader_on_every_later_read() {
    let mut ahead = ReadAhead::with_capacity(1 << 16, Broken::panicking(b"first")).unwrap();
    let mut got = Vec::new();
    let error = ahead.read_to_end(&mut got).expect_err("the reader panicked");
    assert_eq!(got, b"first");
    for error in [
        error,
        ahead.read(&mut [0; 8]).expect_err("again"),
        ahead.read(&mut [0; 8]).expect_err("again"),
    ] {
        assert_eq!(error.to_string(), "the inner reader panicked (the reader's own bug)");
    }
}

/// Issue 32, item 8, for the other adapter: a non-blocking inner writer's `WouldBlock` is
/// waited out, never a failure, and every byte arrives.
#[test]
fn write_behind_waits_out_a_non_blocking_inner_writer() {
    let data = pattern(1_000_000);
    let got = Shared::default();
    let inner = Fitful::new(got.clone(), io::ErrorKind::WouldBlock);
    let mut out = WriteBehind::with_capacity(1 << 16, inner).unwrap();
    let delivered = within("write", move || {
        out.write_all(&data)?;
        out.flush()?;
        out.finish().map(|(_, delivered)| delivered).map_err(io::Error::from)
    })
    .expect("no error");
    assert_eq!(delivered, 1_000_000);
    assert!(got.bytes() == pattern(1_000_000), "other bytes");
}

#[test]
fn read_ahead_drop_does_not_wait_for_a_blocked_read() {
    struct Blocked(mpsc::Receiver<()>);
    impl Read for Blocked {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            let _ = self.0.recv();
            Ok(0)
        }
    }
    let (release, blocked) = mpsc::channel();
    let ahead = ReadAhead::new(Blocked(blocked)).unwrap();
    within("drop", move || drop(ahead));
    drop(release);
}

#[test]
fn stdin_and_stdout_are_duplicates() {
    use std::os::fd::AsRawFd;
    let input = Input::stdin().unwrap();
    let Source::Fd(fd) = &input.source else { panic!("a descriptor") };
    assert_ne!(fd.as_raw_fd(), 0);
    let output = Output::stdout().unwrap();
    let Target::Fd(fd): &Target = &output.sink else { panic!("a descriptor") };
    let _: &OwnedFd = fd;
    assert_ne!(fd.as_raw_fd(), 1);
}

#[test]
fn beyond_memory_the_bytes_go_through_the_spill_and_arrive_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(8 << 20);
    let (permit, permits) = mpsc::sync_channel(0);
    let got = Shared::default();
    let slow = Slow { permits, got: got.clone(), dropped: Arc::new(AtomicBool::new(false)) };
    let (spilled, on_disk) = mpsc::channel();
    let buffer = Buffer::new().size(256 << 10).spill(dir.path()).progress_every(
        Duration::from_millis(1),
        move |progress| {
            if progress.held_on_disk > 0 {
                let _ = spilled.send(());
            }
        },
    );
    let input = Input::reader(io::Cursor::new(data.clone()));
    let transfer = buffer.start(input, vec![Output::writer(slow)]).unwrap();
    // The output takes nothing until the input has gone past memory into the spill.
    on_disk.recv_timeout(GENEROUS).expect("bytes held on disk");
    let feeder = thread::spawn(move || while permit.send(()).is_ok() {});
    let report = within("drain", move || transfer.wait()).expect("complete");
    assert_eq!(report.outputs[0].delivered, data.len() as u64);
    assert!(got.bytes() == data, "bytes through the spill differ");
    feeder.join().unwrap();
}
