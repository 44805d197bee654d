//! Seeded randomized soak: "every byte in comes out, in order, and the exit status and stderr
//! say what happened", over thousands of drawn pipelines.
//!
//! A case is fully determined by one `u64` seed ([`Case::draw`]): the engine, the total size, the
//! buffer size, how the producer writes and the consumer reads (sizes from one byte to MiBs,
//! pauses, stalls), and signals sent to accel mid-transfer (SIGUSR1, SIGTSTP/SIGCONT,
//! SIGSTOP/SIGCONT). The producer writes slices of one pseudo-random buffer at seeded offsets and
//! hashes what it wrote (xxh3); the consumer hashes what it read; the two must agree, accel must
//! exit 0, and its stderr may hold only the reports SIGUSR1 asked for. Timing is not replayed, but
//! everything drawn is.
//!
//! - `soak::short` (CI): `ACCEL_SOAK_CASES` cases (default [`SHORT_CASES`]).
//! - `soak::cases` (ignored): the same, 10,000 cases by default.
//! - `soak::long` (ignored): `ACCEL_SOAK_BYTES` (default 1T) through each engine of
//!   `ACCEL_SOAK_ENGINES` (default `splice,copy`), watching accel's memory.
//!
//! The master seed comes from `ACCEL_SOAK_SEED` (else the clock) and is printed first; a failing
//! case prints a command that replays it alone (`ACCEL_SOAK_REPLAY=SEED`).
//!
//! A drawn SIGTSTP is followed by SIGCONT either once accel has stopped, as a job-control shell
//! does between Ctrl-Z and `fg`, or after the drawn delay whatever accel has done by then, as
//! `kill -TSTP PID; kill -CONT PID` would (a SIGCONT that overtakes the stop must cancel it).

use std::fmt;
use std::io::{self, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use xxhash_rust::xxh3::Xxh3;

use crate::util::seeds::{Rng, env_number, fresh_seed, mix};
use crate::util::{ACCEL, GENEROUS, REPORT_LABELS, ended, is_verdict_so_far};

/// Cases `soak::short` runs by default. A case takes about 30 ms (the slowest about half a
/// second): on 2 cores, 1,000 take about 30 s alone and 33 s beside the rest of `cargo test`,
/// which they lengthen from about 42 s to 53 s (debug build).
const SHORT_CASES: u64 = 1_000;

/// Cases `soak::cases` runs by default.
const MANY_CASES: u64 = 10_000;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The largest single write or read: "several MiB".
const MAX_OP: u64 = 8 * MIB;

/// The size of the precomputed stream source; writes are slices of it at drawn offsets.
const DATA_LEN: usize = 16 << 20;

/// How often the case runner looks at a running transfer.
const TICK: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Randomness: one seed, everything derived from it.

/// The seed of case `index` of the run seeded `master`.
fn case_seed(master: u64, index: u64) -> u64 {
    mix(master ^ mix(index.wrapping_add(0x9E37_79B9_7F4A_7C15)))
}

/// The stream's source: 16 MiB of pseudo-random bytes, made once per process.
fn data() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut rng = Rng::new(0x50AC);
        (0..DATA_LEN / 8).flat_map(|_| rng.next().to_le_bytes()).collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Pacing: how one side writes or reads.

/// How one side of accel moves bytes: the size of each write (or read) and the rests between.
#[derive(Clone)]
struct Pacing {
    /// Each operation is log-uniform in this range (bytes)...
    sizes: (u64, u64),
    /// ...except that with this probability it is log-uniform in [`Pacing::SMALL`] instead...
    small: f64,
    /// ...and never below this (bounds the number of syscalls of a case).
    floor: u64,
    /// After each operation: with this probability a pause, log-uniform in `pause_us`...
    pause: f64,
    pause_us: (u64, u64),
    /// ...and with this one a stall, log-uniform in `stall_us`.
    stall: f64,
    stall_us: (u64, u64),
    /// The most this side sleeps in all; once spent, it runs flat out.
    budget: Duration,
}

impl Pacing {
    const SMALL: (u64, u64) = (1, 64 * KIB);

    /// A drawn pacing for a case of `total` bytes.
    fn draw(rng: &mut Rng, total: u64) -> Pacing {
        let (a, b) = (rng.log_uniform(1, MAX_OP), rng.log_uniform(1, MAX_OP));
        let small = if rng.chance(0.3) { rng.unit() * 0.3 } else { 0.0 };
        let pause = if rng.chance(0.5) { rng.log_uniform(1, 300) as f64 / 1000.0 } else { 0.0 };
        let stall = if rng.chance(0.3) { rng.log_uniform(1, 50) as f64 / 1000.0 } else { 0.0 };
        Pacing {
            sizes: (a.min(b), a.max(b)),
            small,
            // At most 10,000 operations a side: a case stays well under a second or two.
            floor: total / 10_000 + 1,
            pause,
            pause_us: (1, 2_000),
            stall,
            stall_us: (5_000, 100_000),
            budget: Duration::from_millis(250),
        }
    }

    /// The size of the next operation.
    fn size(&self, rng: &mut Rng) -> u64 {
        let (lo, hi) = if rng.chance(self.small) { Pacing::SMALL } else { self.sizes };
        rng.log_uniform(lo, hi).max(self.floor).min(MAX_OP)
    }

    /// Maybe sleeps after an operation, within the budget (`slept` so far).
    fn rest(&self, rng: &mut Rng, slept: &mut Duration) {
        let micros = if rng.chance(self.stall) {
            rng.log_uniform(self.stall_us.0, self.stall_us.1)
        } else if rng.chance(self.pause) {
            rng.log_uniform(self.pause_us.0, self.pause_us.1)
        } else {
            return;
        };
        let nap = Duration::from_micros(micros).min(self.budget.saturating_sub(*slept));
        if !nap.is_zero() {
            thread::sleep(nap);
            *slept += nap;
        }
    }
}

impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |(lo, hi): (u64, u64)| format!("{lo}..{hi} us");
        write!(
            f,
            "ops {}..{} B ({:.1}% small), floor {} B, pause {:.1}% of {}, stall {:.1}% of {}, \
             sleep budget {:?}",
            self.sizes.0,
            self.sizes.1,
            self.small * 100.0,
            self.floor,
            self.pause * 100.0,
            us(self.pause_us),
            self.stall * 100.0,
            us(self.stall_us),
            self.budget
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The two ends of the pipe.

/// What one end moved: bytes, their xxh3, and the error that stopped it, if any.
struct Side {
    bytes: u64,
    hash: u64,
    error: Option<io::Error>,
}

/// Writes `len` bytes of the stream to `sink` as `pacing` says, hashing them into `hash` and
/// counting them in `written`.
fn produce(
    sink: &mut impl Write,
    len: u64,
    pacing: &Pacing,
    rng: &mut Rng,
    hash: &mut Xxh3,
    written: &AtomicU64,
) -> io::Result<()> {
    let data = data();
    let mut slept = Duration::ZERO;
    let mut left = len;
    while left > 0 {
        let n = pacing.size(rng).min(left) as usize;
        let at = rng.below((data.len() - n + 1) as u64) as usize;
        let piece = &data[at..at + n];
        sink.write_all(piece)?;
        hash.update(piece);
        written.fetch_add(n as u64, Relaxed);
        left -= n as u64;
        pacing.rest(rng, &mut slept);
    }
    Ok(())
}

/// Reads `source` to its end as `pacing` says, hashing and counting (in `read`) what came.
fn consume(source: &mut impl Read, pacing: &Pacing, rng: &mut Rng, read: &AtomicU64) -> Side {
    let mut buf = vec![0u8; MAX_OP as usize];
    let mut hash = Xxh3::new();
    let mut slept = Duration::ZERO;
    let mut bytes = 0;
    let error = loop {
        let want = pacing.size(rng) as usize;
        match source.read(&mut buf[..want]) {
            Ok(0) => break None,
            Ok(n) => {
                hash.update(&buf[..n]);
                bytes += n as u64;
                read.fetch_add(n as u64, Relaxed);
                pacing.rest(rng, &mut slept);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    Side { bytes, hash: hash.digest(), error }
}

// ---------------------------------------------------------------------------------------------
// Signals to accel.

/// A signal the signaller sends once the producer has written `after` bytes.
#[derive(Debug, Clone, Copy)]
struct Interrupt {
    after: u64,
    kind: Poke,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Poke {
    /// SIGUSR1: accel prints the report so far.
    Report,
    /// SIGTSTP, then SIGCONT that many microseconds later; once accel has stopped (as a shell
    /// does) when `shell` is set, else at once.
    Suspend { cont_after: u64, shell: bool },
    /// SIGSTOP, then SIGCONT that many microseconds later.
    Stop(u64),
}

/// Whether `pid` catches SIGUSR1 and SIGCONT yet (`SigCgt` in /proc/PID/status).
/// Before that, SIGUSR1 would kill accel, as it would kill `dd` before its handler is in place.
fn handlers_installed(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let caught = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0);
    [Signal::USR1, Signal::CONT].iter().all(|signal| caught & (1 << (signal.as_raw() - 1)) != 0)
}

/// Whether accel is stopped (`T`), or has ended (`Z`, gone): no longer running, either way.
fn halted(pid: u32) -> bool {
    let state = process_state(pid);
    ["T", "Z", "X", "gone"].iter().any(|halted| state.starts_with(halted))
}

/// What the signaller did: the SIGUSR1 it sent, and what it saw go wrong.
#[derive(Default)]
struct Signalled {
    reports: usize,
    problems: Vec<String>,
}

/// Sends `plan`'s signals to accel as the producer passes their marks, until the transfer is
/// done. Every stop is followed by its SIGCONT, even once it is done.
fn signal(pid: u32, plan: &[Interrupt], shared: &Shared) -> Signalled {
    let (written, done) = (&shared.written, &shared.done);
    let mut signalled = Signalled::default();
    if plan.is_empty() {
        return signalled;
    }
    while !handlers_installed(pid) {
        if done.load(Relaxed) {
            return signalled;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let target = Pid::from_raw(pid as i32).expect("a child's pid is positive");
    let send = |signal| kill_process(target, signal).expect("signal accel");
    for interrupt in plan {
        while written.load(Relaxed) < interrupt.after && !done.load(Relaxed) {
            thread::sleep(Duration::from_micros(200));
        }
        if done.load(Relaxed) {
            break;
        }
        let cont_after = match interrupt.kind {
            Poke::Report => {
                send(Signal::USR1);
                signalled.reports += 1;
                continue;
            }
            Poke::Stop(us) => {
                send(Signal::STOP);
                us
            }
            Poke::Suspend { cont_after, shell } => {
                send(Signal::TSTP);
                let since = Instant::now();
                while shell && !halted(pid) && since.elapsed() < Duration::from_secs(10) {
                    thread::sleep(Duration::from_micros(200));
                }
                if shell && !halted(pid) {
                    signalled.problems.push("SIGTSTP did not stop accel within 10 s".into());
                }
                cont_after
            }
        };
        // Without waiting for the stop, the SIGCONT may overtake it; accel must not then stop
        // for good (the run would end as a hang).
        thread::sleep(Duration::from_micros(cont_after));
        send(Signal::CONT);
    }
    signalled
}

/// The first line of accel's stderr that is not part of a SIGUSR1 report, if any. Today a report
/// is a block of `label  value` lines ended by the verdict so far, a line starting with
/// `so far, bottleneck:` or `so far, no bottleneck:`; a block cut short (no verdict after it) is
/// unexpected too.
fn unexpected_stderr(text: &str) -> Option<&str> {
    let mut open_block = None;
    for line in text.lines() {
        if is_verdict_so_far(line) {
            open_block = None;
        } else if REPORT_LABELS.iter().any(|label| line.starts_with(label)) {
            open_block = open_block.or(Some(line));
        } else {
            return Some(line);
        }
    }
    open_block
}

// ---------------------------------------------------------------------------------------------
// Running accel between the two ends.

/// What the threads around accel share: the counts so far, and whether the transfer is over.
#[derive(Default)]
struct Shared {
    written: AtomicU64,
    read: AtomicU64,
    done: AtomicBool,
}

/// A transfer under way: accel and the threads around it.
struct Run {
    child: Child,
    started: Instant,
    shared: Arc<Shared>,
    producer: JoinHandle<Side>,
    consumed: mpsc::Receiver<Side>,
    signaller: JoinHandle<Signalled>,
    stderr: JoinHandle<String>,
}

/// How a transfer ended.
struct Ended {
    written: Side,
    read: Side,
    status: ExitStatus,
    /// Why the runner gave up waiting and killed accel.
    hang: Option<String>,
    stderr: String,
    signalled: Signalled,
    seconds: f64,
}

/// The producer's part: given accel's stdin and pid, writes the stream (counting it in
/// `written`), closes stdin by dropping it, and says what it wrote.
type Producer = Box<dyn FnOnce(ChildStdin, u32, &Shared) -> Side + Send>;

/// Starts `accel --engine ENGINE -m BUFFER` with the producer, a consumer reading as `pacing`
/// says, and a signaller following `plan`.
fn start(
    engine: &str,
    buffer: u64,
    producer: Producer,
    (pacing, mut rng): (Pacing, Rng),
    plan: Vec<Interrupt>,
) -> Run {
    let mut child = Command::new(ACCEL)
        .args(["--engine", engine, "-m", &buffer.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn accel");
    let pid = child.id();
    let (stdin, mut stdout, mut stderr) =
        (child.stdin.take().unwrap(), child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let shared = Arc::new(Shared::default());
    let producer = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || producer(stdin, pid, &shared))
    };
    let (tx, consumed) = mpsc::channel();
    {
        let shared = Arc::clone(&shared);
        thread::spawn(move || tx.send(consume(&mut stdout, &pacing, &mut rng, &shared.read)));
    }
    let signaller = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || signal(pid, &plan, &shared))
    };
    let stderr = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Run { child, started: Instant::now(), shared, producer, consumed, signaller, stderr }
}

/// accel's scheduler state, from /proc (`S (sleeping)`, `T (stopped)`, ...).
fn process_state(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("State:")).map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| "gone".into())
}

/// Waits for the transfer to end, calling `tick` every [`TICK`]. It is a hang when no byte has
/// moved for [`GENEROUS`], or when `deadline` has passed: then accel is killed and the hang
/// described.
fn finish(mut run: Run, deadline: Option<Duration>, mut tick: impl FnMut(&Run)) -> Ended {
    let pid = run.child.id();
    let mut hang = None;
    let mut moved = (0, 0, Instant::now());
    let read = loop {
        match run.consumed.recv_timeout(TICK) {
            Ok(side) => break side,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the consumer thread died"),
        }
        tick(&run);
        let now = (run.shared.written.load(Relaxed), run.shared.read.load(Relaxed));
        if now != (moved.0, moved.1) {
            moved = (now.0, now.1, Instant::now());
        }
        let elapsed = run.started.elapsed();
        if moved.2.elapsed() >= GENEROUS || deadline.is_some_and(|d| elapsed >= d) {
            hang = Some(format!(
                "hang: no end after {elapsed:.1?} ({} bytes written, {} read, nothing moved for \
                 {:.1?}); accel was {}; killed it",
                now.0,
                now.1,
                moved.2.elapsed(),
                process_state(pid)
            ));
            let _ = run.child.kill();
            break run.consumed.recv_timeout(GENEROUS).expect("accel killed: stdout ends");
        }
    };
    run.shared.done.store(true, Relaxed);
    let written = run.producer.join().expect("producer thread");
    // The signaller is done before accel is reaped, so that its pid cannot be reused meanwhile.
    let signalled = run.signaller.join().expect("signaller thread");
    let status = reap(&mut run.child, &mut hang);
    let stderr = run.stderr.join().expect("stderr thread");
    let seconds = run.started.elapsed().as_secs_f64();
    Ended { written, read, status, hang, stderr, signalled, seconds }
}

/// Waits for accel to exit once its stdout has closed; kills it after [`GENEROUS`].
fn reap(child: &mut Child, hang: &mut Option<String>) -> ExitStatus {
    let deadline = Instant::now() + GENEROUS;
    loop {
        if let Some(status) = child.try_wait().expect("wait for accel") {
            return status;
        }
        if Instant::now() > deadline {
            hang.get_or_insert(format!(
                "hang: accel closed its stdout but did not exit within {GENEROUS:?} (it was {}); \
                 killed it",
                process_state(child.id())
            ));
            let _ = child.kill();
        }
        thread::sleep(Duration::from_millis(5));
    }
}

impl Ended {
    /// What went wrong, one line each: the transfer of `total` bytes must be whole and exact,
    /// accel must exit 0, and stderr hold nothing but the reports asked for.
    fn problems(&self, total: u64) -> Vec<String> {
        let mut problems: Vec<String> =
            self.hang.iter().chain(&self.signalled.problems).cloned().collect();
        for (side, what) in [(&self.written, "producer: write"), (&self.read, "consumer: read")] {
            if let Some(error) = &side.error {
                problems.push(format!("{what} failed after {} bytes: {error}", side.bytes));
            }
        }
        let (w, r) = (&self.written, &self.read);
        if (w.bytes, w.hash) != (r.bytes, r.hash) || w.bytes != total {
            problems.push(format!(
                "checksum mismatch: wrote {} bytes (xxh3 {:016x}) of {total}, read {} bytes \
                 (xxh3 {:016x})",
                w.bytes, w.hash, r.bytes, r.hash
            ));
        }
        if !self.status.success() {
            problems.push(format!("accel exited with {}, not 0", self.status));
        }
        let unexpected = if self.signalled.reports == 0 {
            self.stderr.lines().next()
        } else {
            unexpected_stderr(&self.stderr)
        };
        if let Some(line) = unexpected {
            problems.push(format!(
                "unexpected stderr line {line:?} ({} SIGUSR1 sent); stderr was:\n{}",
                self.signalled.reports,
                self.stderr.chars().take(4000).collect::<String>()
            ));
        }
        problems
    }
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// One drawn pipeline.
struct Case {
    seed: u64,
    engine: &'static str,
    total: u64,
    buffer: u64,
    producer: Pacing,
    consumer: Pacing,
    interrupts: Vec<Interrupt>,
}

impl Case {
    /// The case of `seed`: everything about it is drawn here, from that seed alone.
    fn draw(seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let engine = rng.pick(&["auto", "splice", "copy"]);
        let total = match rng.below(20) {
            0 => 0,
            1 => 1,
            2..=16 => rng.log_uniform(2, MIB),
            _ => rng.log_uniform(MIB, 8 * MIB),
        };
        let buffer = rng.log_uniform(4 * KIB, 64 * MIB);
        let producer = Pacing::draw(&mut rng, total);
        let consumer = Pacing::draw(&mut rng, total);
        let count = if rng.chance(0.5) { 0 } else { 1 + rng.below(4) };
        let mut interrupts: Vec<Interrupt> = (0..count)
            .map(|_| {
                let after = rng.below(total + 1);
                let cont_after = rng.log_uniform(1, 50_000);
                let kind = match rng.below(4) {
                    0 | 1 => Poke::Report,
                    2 => Poke::Suspend { cont_after, shell: rng.chance(0.5) },
                    _ => Poke::Stop(cont_after),
                };
                Interrupt { after, kind }
            })
            .collect();
        interrupts.sort_by_key(|i| i.after);
        Case { seed, engine, total, buffer, producer, consumer, interrupts }
    }

    /// Runs the case; the bytes checked, or what went wrong.
    fn run(&self) -> Result<u64, String> {
        let (total, pacing) = (self.total, self.producer.clone());
        let mut rng = Rng::new(mix(self.seed ^ 1));
        let producer: Producer = Box::new(move |mut stdin, _, shared| {
            let mut hash = Xxh3::new();
            let written = &shared.written;
            let error = produce(&mut stdin, total, &pacing, &mut rng, &mut hash, written).err();
            Side { bytes: written.load(Relaxed), hash: hash.digest(), error }
        });
        let consumer = (self.consumer.clone(), Rng::new(mix(self.seed ^ 2)));
        let run = start(self.engine, self.buffer, producer, consumer, self.interrupts.clone());
        let ended = finish(run, Some(GENEROUS), |_| {});
        let problems = ended.problems(self.total);
        if problems.is_empty() {
            return Ok(self.total);
        }
        Err(format!(
            "soak case {:#018x} failed:\n  - {}\n  case: {self}\n  replay: {}",
            self.seed,
            problems.join("\n  - "),
            self.replay()
        ))
    }

    /// A shell command that runs exactly this case again.
    fn replay(&self) -> String {
        let release = if cfg!(debug_assertions) { "" } else { " --release" };
        format!(
            "ACCEL_SOAK_REPLAY={:#018x} cargo test{release} --test integration soak::short \
             -- --nocapture",
            self.seed
        )
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--engine {} -m {}, {} bytes\n    producer: {}\n    consumer: {}\n    signals:",
            self.engine, self.buffer, self.total, self.producer, self.consumer
        )?;
        if self.interrupts.is_empty() {
            write!(f, " none")?;
        }
        for Interrupt { after, kind } in &self.interrupts {
            match kind {
                Poke::Report => write!(f, " [at {after} B: USR1]")?,
                Poke::Suspend { cont_after, shell } => {
                    let stopped = if *shell { " the stop and" } else { "" };
                    write!(f, " [at {after} B: TSTP, CONT{stopped} {cont_after} us later]")?
                }
                Poke::Stop(us) => write!(f, " [at {after} B: STOP, CONT {us} us later]")?,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Settings from the environment.

/// A size from the environment: a number with an optional binary suffix K, M, G or T.
fn env_size(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((at, unit)) if "kKmMgGtT".contains(unit) => {
            let shift = 10 * (1 + "KMGT".find(unit.to_ascii_uppercase()).unwrap() as u32);
            (&text[..at], shift)
        }
        _ => (text, 0),
    };
    let number: u64 = digits.parse().unwrap_or_else(|_| panic!("{name}={text:?}: not a size"));
    Some(number.checked_mul(1 << shift).unwrap_or_else(|| panic!("{name}={text:?}: too large")))
}

/// The run's master seed, printed so that the run can be repeated.
fn master_seed() -> u64 {
    let seed = env_number("ACCEL_SOAK_SEED").unwrap_or_else(|| mix(fresh_seed()));
    eprintln!("soak: master seed {seed:#018x} (ACCEL_SOAK_SEED={seed:#018x} repeats this run)");
    seed
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Runs `ACCEL_SOAK_CASES` cases (default `default_cases`), or only `ACCEL_SOAK_REPLAY`'s.
fn soak_cases(default_cases: u64) {
    let seeds: Vec<u64> = match env_number("ACCEL_SOAK_REPLAY") {
        Some(seed) => vec![seed],
        None => {
            let master = master_seed();
            let cases = env_number("ACCEL_SOAK_CASES").unwrap_or(default_cases);
            (0..cases).map(|index| case_seed(master, index)).collect()
        }
    };
    let started = Instant::now();
    let mut last_note = Instant::now();
    let (mut bytes, mut failures, mut slowest) = (0, Vec::new(), (Duration::ZERO, 0));
    for (index, &seed) in seeds.iter().enumerate() {
        let case_started = Instant::now();
        let outcome = Case::draw(seed).run();
        slowest = slowest.max((case_started.elapsed(), seed));
        match outcome {
            Ok(checked) => bytes += checked,
            Err(failure) => {
                eprintln!("{failure}");
                failures.push(failure);
            }
        }
        if last_note.elapsed() > Duration::from_secs(30) {
            last_note = Instant::now();
            eprintln!("soak: {} of {} cases, {} failed", index + 1, seeds.len(), failures.len());
        }
    }
    eprintln!(
        "soak: {} cases, {} failed, {bytes} bytes ({:.2} GiB) checked in {:.1} s; the slowest \
         case, {:#018x}, took {:.2} s",
        seeds.len(),
        failures.len(),
        gib(bytes),
        started.elapsed().as_secs_f64(),
        slowest.1,
        slowest.0.as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} soak cases failed; the first:\n{}",
        failures.len(),
        seeds.len(),
        failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The stderr classification accepts what accel really prints on SIGUSR1, and nothing more.
#[test]
fn stderr_classification_knows_the_report() {
    let mut child = Command::new(ACCEL)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn accel");
    let (mut stdin, mut stderr) = (child.stdin.take().unwrap(), child.stderr.take().unwrap());
    stdin.write_all(b"some bytes").unwrap();
    let since = Instant::now();
    while !handlers_installed(child.id()) {
        assert!(since.elapsed() < GENEROUS, "accel never caught SIGUSR1");
        thread::sleep(Duration::from_millis(1));
    }
    kill_process(Pid::from_child(&child), Signal::USR1).unwrap();
    // The report is one write, so the first read holds all of it; then accel may end.
    let mut report = vec![0; 64 * KIB as usize];
    let n = stderr.read(&mut report).unwrap();
    let report = String::from_utf8(report[..n].to_vec()).unwrap();
    drop(stdin);
    child.stderr = Some(stderr);
    let (status, rest) = ended(child);
    assert!(status.success());
    assert_eq!(unexpected_stderr(&report), None, "a report is expected:\n{report}{rest}");
    assert_eq!(rest, "", "nothing more than the report");
    let error = format!("{report}accel: write to stdout: oops\n");
    assert_eq!(unexpected_stderr(&error), Some("accel: write to stdout: oops"));
    let (cut, _) = report.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(unexpected_stderr(cut), report.lines().next(), "a report cut short");
}

/// Random pipelines, a thousand: part of every `cargo test`.
#[test]
fn short() {
    soak_cases(SHORT_CASES);
}

/// The long randomized run: `ACCEL_SOAK_CASES=10000 cargo test --release --test integration
/// soak::cases -- --ignored --nocapture`.
#[test]
#[ignore = "10,000 cases; run on purpose"]
fn cases() {
    soak_cases(MANY_CASES);
}

// ---------------------------------------------------------------------------------------------
// The long run.

/// The long run's buffer.
const LONG_BUFFER: u64 = 64 * MIB;

/// How much more than at rest early in the run accel may hold at rest at the end.
const REST_SLACK: u64 = 8 * MIB;

/// The long run's pacing, for either side: mostly large operations for throughput, a few small
/// ones, short pauses, and a stall of 20 to 500 ms every few GiB, so that the buffer fills (the
/// consumer stalls) and drains (the producer stalls) many times.
fn long_pacing() -> Pacing {
    Pacing {
        sizes: (64 * KIB, 4 * MIB),
        small: 0.02,
        floor: 1,
        pause: 0.002,
        pause_us: (10, 2_000),
        stall: 1.0 / 10_000.0,
        stall_us: (20_000, 500_000),
        budget: Duration::MAX,
    }
}

/// accel's resident memory in bytes (`VmRSS`; 0 once it is gone).
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let field = status.lines().find_map(|line| line.strip_prefix("VmRSS:"))?;
            field.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * KIB)
}

/// How long accel keeps a drained backlog's spare memory before it gives it back: the
/// library's `GIVE_BACK_AFTER` (src/backlog/mod.rs), which the tests cannot name. Keep the two
/// equal: memory measured at rest sooner than this after a drain is not at rest.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

/// How much longer than [`GIVE_BACK_AFTER`] the memory of a backlog that had nothing to give
/// back is watched for its least: the reader notices the drain a moment after the consumer's
/// last read, later on a loaded machine.
const REST_MARGIN: Duration = Duration::from_secs(3);

/// accel's resident memory in bytes at rest. Waits until the consumer has read everything
/// written (the backlog has drained), then samples accel's memory until `at_rest(drained,
/// least)` holds (`drained`: what accel held when the backlog drained; `least`: the least
/// since), or `within` has passed; returns the least.
fn rss_at_rest(
    pid: u32,
    shared: &Shared,
    within: Duration,
    at_rest: impl Fn(u64, u64) -> bool,
) -> u64 {
    while shared.read.load(Relaxed) < shared.written.load(Relaxed) && !shared.done.load(Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    let (drained, since) = (rss(pid), Instant::now());
    let mut least = drained;
    while !at_rest(drained, least) && since.elapsed() < within {
        thread::sleep(Duration::from_millis(100));
        least = least.min(rss(pid));
    }
    least
}

/// What the long run's producer learnt at its two rests: accel's memory early and at the end,
/// and the time the rests took.
struct Rests {
    early: u64,
    end: u64,
    took: Duration,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// `total` bytes through `--engine ENGINE -m 64M`, paced by [`long_pacing`] on both sides,
/// sampling accel's memory every second and printing progress every ten.
fn long_run(engine: &str, total: u64, master: u64) -> Result<(), String> {
    let seed = mix(master ^ xxhash_rust::xxh3::xxh3_64(engine.as_bytes()));
    let warm_up = (total / 16).min(4 * GIB);
    let (rests_tx, rests_rx) = mpsc::channel();
    let mut rng = Rng::new(mix(seed ^ 1));
    let producer: Producer = Box::new(move |mut stdin, pid, shared| {
        let (pacing, mut hash) = (long_pacing(), Xxh3::new());
        let mut write =
            |len| produce(&mut stdin, len, &pacing, &mut rng, &mut hash, &shared.written);
        let rested = Instant::now();
        let error = write(warm_up).err().or_else(|| {
            // At rest once the spare chunks are given back, all at once: 2 MiB each, every
            // page of them touched, so accel's memory falls by a MiB and more. Where the
            // backlog had no spares beyond the one it keeps, nothing falls, and the least
            // from the drain to GIVE_BACK_AFTER and a margin past it stands.
            let early =
                rss_at_rest(pid, shared, GIVE_BACK_AFTER + REST_MARGIN, |drained, least| {
                    least + MIB <= drained
                });
            let took = rested.elapsed();
            let error = write(total - warm_up).err();
            let resting = Instant::now();
            let end = rss_at_rest(pid, shared, GENEROUS, |_, least| least <= early + REST_SLACK);
            let _ = rests_tx.send(Rests { early, end, took: took + resting.elapsed() });
            error
        });
        Side { bytes: shared.written.load(Relaxed), hash: hash.digest(), error }
    });
    let consumer = (long_pacing(), Rng::new(mix(seed ^ 2)));
    let run = start(engine, LONG_BUFFER, producer, consumer, Vec::new());
    let pid = run.child.id();
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut noted = (0.0, 0);
    let ended = finish(run, None, |run| {
        let seconds = run.started.elapsed().as_secs_f64();
        if samples.last().is_none_or(|&(at, _)| seconds - at >= 1.0) {
            samples.push((seconds, rss(pid)));
        }
        if seconds - noted.0 >= 10.0 {
            let read = run.shared.read.load(Relaxed);
            eprintln!(
                "soak long --engine {engine}: {:.1} GiB of {:.1}, {:.2} GiB/s lately, RSS {:.1} \
                 MiB",
                gib(read),
                gib(total),
                gib(read - noted.1) / (seconds - noted.0),
                mib(samples.last().map_or(0, |&(_, rss)| rss))
            );
            noted = (seconds, read);
        }
    });
    let rests = rests_rx.try_recv().ok();
    let mut rss_sorted: Vec<u64> = samples.iter().map(|&(_, rss)| rss).collect();
    rss_sorted.sort_unstable();
    let rested = rests.as_ref().map_or(0.0, |rests| rests.took.as_secs_f64());
    let summary = format!(
        "soak long --engine {engine}: {} bytes ({:.1} GiB) checked in {:.1} s, {:.2} GiB/s \
         (the {rested:.1} s of rests excluded); RSS start {:.1} MiB, median {:.1}, max {:.1}, \
         end {:.1}; at rest early {:.1} MiB, at the end {:.1}",
        ended.read.bytes,
        gib(ended.read.bytes),
        ended.seconds,
        gib(ended.read.bytes) / (ended.seconds - rested).max(0.001),
        mib(samples.first().map_or(0, |&(_, rss)| rss)),
        mib(rss_sorted.get(rss_sorted.len() / 2).copied().unwrap_or(0)),
        mib(rss_sorted.last().copied().unwrap_or(0)),
        mib(samples.last().map_or(0, |&(_, rss)| rss)),
        mib(rests.as_ref().map_or(0, |rests| rests.early)),
        mib(rests.as_ref().map_or(0, |rests| rests.end)),
    );
    eprintln!("{summary}");
    let mut problems = ended.problems(total);
    // Memory follows the backlog and does not leak:
    // - after the first minute, accel never holds more than its buffer plus 64 MiB (a chunk may
    //   pass -m by part of a read; the rest is code, stacks, pipes' bookkeeping, the allocator);
    // - at rest at the end (everything read, the backlog empty for a second and more), it holds
    //   at most REST_SLACK (8 MiB) more than at rest after the warm-up.
    let ceiling = LONG_BUFFER + 64 * MIB;
    if let Some(&(at, rss)) = samples.iter().find(|&&(at, rss)| at >= 60.0 && rss > ceiling) {
        problems.push(format!(
            "RSS {:.1} MiB at {at:.0} s, above {:.0} MiB",
            mib(rss),
            mib(ceiling)
        ));
    }
    if let Some(rests) = rests.filter(|rests| rests.end > rests.early + REST_SLACK) {
        problems.push(format!(
            "RSS at rest grew from {:.1} MiB early to {:.1} MiB at the end",
            mib(rests.early),
            mib(rests.end)
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "soak long --engine {engine} failed:\n  - {}\n  {summary}\n  repeat: \
         ACCEL_SOAK_SEED={master:#018x} ACCEL_SOAK_ENGINES={engine} ACCEL_SOAK_BYTES={total} \
         cargo test --release --test integration soak::long -- --ignored --nocapture",
        problems.join("\n  - ")
    ))
}

/// `ACCEL_SOAK_BYTES` (default 1 TiB) through each engine of `ACCEL_SOAK_ENGINES` (default
/// `splice,copy`; `auto` picks splice between pipes), checksummed, watching accel's memory:
/// `cargo test --release --test integration soak::long -- --ignored --nocapture`.
#[test]
#[ignore = "1 TiB per engine by default; run on purpose, with --release"]
fn long() {
    let total = env_size("ACCEL_SOAK_BYTES").unwrap_or(1 << 40);
    let engines = std::env::var("ACCEL_SOAK_ENGINES").unwrap_or_else(|_| "splice,copy".into());
    let master = master_seed();
    let failures: Vec<String> = engines
        .split(',')
        .filter_map(|engine| long_run(engine.trim(), total, master).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
