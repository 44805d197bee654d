//! A benchmark, not a test: `cargo run --release --example bench_copy [ROUNDS]`.
//!
//! 1. The seed's shape in one process: a bursty reader (8 MiB at once, then 100 ms of work;
//!    6 times) into a bursty writer (6.25 ms of work per 512 KiB taken), each as slow as the
//!    other alone. `std::io::copy` makes them take turns; a buffer between them should take
//!    as long as the slower side alone (goal: at most 1.05 times). Compared: `io::copy`, the
//!    library's `Buffer::run`, `io::copy` into a `WriteBehind` and from a `ReadAhead`, and
//!    `io::copy` into `thread_io`'s writer (1 MiB blocks, 32 of them: the same 32 MiB).
//! 2. A fast copy: a reader and a writer that only copy bytes (from and into memory), 2 GiB:
//!    throughput and CPU seconds per GiB (user + system, every thread) against `io::copy`.
//!
//! Rounds are interleaved (every variant once per round); figures are medians with the range.

use std::io::{self, Read, Write};
use std::thread;
use std::time::{Duration, Instant};

use accel_buffer::{Buffer, Input, Output, ReadAhead, WriteBehind};

const MIB: usize = 1 << 20;

/// Bytes the readers hand out: copied from here, as from a page cache.
static PATTERN: [u8; 64 << 10] = {
    let mut block = [0u8; 64 << 10];
    let mut i = 0;
    while i < block.len() {
        block[i] = (i * 31 % 251) as u8;
        i += 1;
    }
    block
};

/// A producer that gives `burst` bytes as fast as they are asked for, then works `pause`
/// (before its next burst, or its end); `bursts` times.
struct BurstyReader {
    left_in_burst: usize,
    bursts_left: usize,
    burst: usize,
    pause: Duration,
    ended: bool,
}

impl BurstyReader {
    fn new(bursts: usize, burst: usize, pause: Duration) -> BurstyReader {
        BurstyReader { left_in_burst: burst, bursts_left: bursts - 1, burst, pause, ended: false }
    }

    /// The seed's producer, scaled down.
    fn seed() -> BurstyReader {
        BurstyReader::new(6, 8 * MIB, Duration::from_millis(100))
    }

    /// A producer that never pauses: `total` bytes at memory speed.
    fn fast(total: usize) -> BurstyReader {
        BurstyReader::new(1, total, Duration::ZERO)
    }
}

impl Read for BurstyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left_in_burst == 0 {
            if self.ended {
                return Ok(0);
            }
            // The burst is out: the producer works before its next, or its end.
            if !self.pause.is_zero() {
                thread::sleep(self.pause);
            }
            if self.bursts_left == 0 {
                self.ended = true;
                return Ok(0);
            }
            self.bursts_left -= 1;
            self.left_in_burst = self.burst;
        }
        let n = buf.len().min(self.left_in_burst);
        for piece in buf[..n].chunks_mut(PATTERN.len()) {
            piece.copy_from_slice(&PATTERN[..piece.len()]);
        }
        self.left_in_burst -= n;
        Ok(n)
    }
}

/// A consumer that copies what it is given into its own memory and, every `chunk` bytes,
/// works `work` on them.
struct BurstyWriter {
    scratch: Vec<u8>,
    since_work: usize,
    chunk: usize,
    work: Duration,
    taken: u64,
}

impl BurstyWriter {
    fn new(chunk: usize, work: Duration) -> BurstyWriter {
        BurstyWriter { scratch: vec![0; 64 << 10], since_work: 0, chunk, work, taken: 0 }
    }

    /// The seed's consumer, scaled down: as slow as [`BurstyReader::seed`] alone.
    fn seed() -> BurstyWriter {
        BurstyWriter::new(512 << 10, Duration::from_micros(6250))
    }

    fn fast() -> BurstyWriter {
        BurstyWriter::new(usize::MAX, Duration::ZERO)
    }
}

impl Write for BurstyWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for piece in buf.chunks(self.scratch.len()) {
            self.scratch[..piece.len()].copy_from_slice(piece);
        }
        std::hint::black_box(&self.scratch);
        self.taken += buf.len() as u64;
        self.since_work += buf.len();
        while self.since_work >= self.chunk {
            self.since_work -= self.chunk;
            thread::sleep(self.work);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a writer has taken, to check that every byte arrived.
trait Taken {
    fn taken(&self) -> u64;
}

impl Taken for BurstyWriter {
    fn taken(&self) -> u64 {
        self.taken
    }
}

/// A way of moving everything from a reader to a writer.
#[derive(Debug, Clone, Copy)]
enum Way {
    StdCopy,
    LibraryRun,
    WriteBehind,
    ReadAhead,
    ThreadIo,
}

impl Way {
    const ALL: [Way; 5] =
        [Way::StdCopy, Way::LibraryRun, Way::WriteBehind, Way::ReadAhead, Way::ThreadIo];

    fn name(self) -> &'static str {
        match self {
            Way::StdCopy => "std::io::copy",
            Way::LibraryRun => "Buffer::run",
            Way::WriteBehind => "io::copy into WriteBehind",
            Way::ReadAhead => "io::copy from ReadAhead",
            Way::ThreadIo => "io::copy into thread_io",
        }
    }

    /// Moves everything from `reader` to `writer`; the bytes the writer took.
    fn copy<R, W>(self, mut reader: R, mut writer: W) -> u64
    where
        R: Read + Send + 'static,
        W: Write + Taken + Send + 'static,
    {
        match self {
            Way::StdCopy => {
                io::copy(&mut reader, &mut writer).unwrap();
                writer.taken()
            }
            Way::LibraryRun => {
                let (input, output) = (Input::reader(reader), Output::writer(writer));
                Buffer::new().run(input, vec![output]).unwrap().outputs[0].delivered
            }
            Way::WriteBehind => {
                let mut behind = WriteBehind::new(writer).unwrap();
                io::copy(&mut reader, &mut behind).unwrap();
                behind.finish().unwrap().0.taken()
            }
            Way::ReadAhead => {
                let mut ahead = ReadAhead::new(reader).unwrap();
                io::copy(&mut ahead, &mut writer).unwrap();
                writer.taken()
            }
            Way::ThreadIo => {
                let (_, writer) = thread_io::write::writer_finish(
                    MIB,
                    32,
                    writer,
                    |w| io::copy(&mut reader, w),
                    |writer| writer,
                )
                .unwrap();
                writer.taken()
            }
        }
    }
}

/// CPU seconds this process has used so far, every thread, user and system.
fn cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Wall and CPU time of one copy, checking every byte arrived.
fn measure<R, W>(way: Way, reader: R, writer: W, total: u64) -> (f64, f64)
where
    R: Read + Send + 'static,
    W: Write + Taken + Send + 'static,
{
    let (began, cpu_began) = (Instant::now(), cpu());
    let moved = way.copy(reader, writer);
    let (wall, cpu) = (began.elapsed(), cpu() - cpu_began);
    assert_eq!(moved, total, "bytes lost");
    (wall.as_secs_f64(), cpu.as_secs_f64())
}

/// `median [min-max]` of `values`, each formatted by `show`.
fn summary(values: &mut [f64], show: impl Fn(f64) -> String) -> String {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    format!("{} [{}-{}]", show(median), show(values[0]), show(values[values.len() - 1]))
}

/// A descriptor read or written through `Read`/`Write` only (no `io::copy` specialisation).
struct Plain(std::fs::File);

impl Read for Plain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Plain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(5, |arg| arg.parse().expect("ROUNDS"));
    let seconds = |s: f64| format!("{s:.3} s");

    println!("1. bursty: 6 x (8 MiB, then 100 ms) into 6.25 ms per 512 KiB; {rounds} rounds");
    let seed_total = 48 * MIB as u64;
    let mut alone = (Vec::new(), Vec::new());
    let mut walls = vec![Vec::new(); Way::ALL.len()];
    for _ in 0..rounds {
        let (producer, _) =
            measure(Way::StdCopy, BurstyReader::seed(), BurstyWriter::fast(), seed_total);
        let fast = BurstyReader::fast(seed_total as usize);
        let (consumer, _) = measure(Way::StdCopy, fast, BurstyWriter::seed(), seed_total);
        alone.0.push(producer);
        alone.1.push(consumer);
        for (index, way) in Way::ALL.into_iter().enumerate() {
            let (wall, _) = measure(way, BurstyReader::seed(), BurstyWriter::seed(), seed_total);
            walls[index].push(wall / producer.max(consumer));
        }
    }
    println!("   producer alone              {}", summary(&mut alone.0, seconds));
    println!("   consumer alone              {}", summary(&mut alone.1, seconds));
    for (way, ratios) in Way::ALL.into_iter().zip(&mut walls) {
        let ratio = summary(ratios, |r| format!("{r:.3}"));
        println!("   {:<27} {ratio} x the slower side alone", way.name());
    }

    let fast_total = 2u64 << 30;
    println!(
        "2. fast, in memory: 2 GiB copied from a static block into a 64 KiB one; {rounds} rounds"
    );
    fast(rounds, |way| {
        measure(way, BurstyReader::fast(fast_total as usize), BurstyWriter::fast(), fast_total)
    });
    println!(
        "3. fast, system calls: 2 GiB read from /dev/zero, written to /dev/null; {rounds} rounds"
    );
    fast(rounds, |way| {
        let zero = Plain(std::fs::File::open("/dev/zero").unwrap()).take(fast_total);
        let null = Counted(Plain(std::fs::File::create("/dev/null").unwrap()), 0);
        measure(way, zero, null, fast_total)
    });
}

/// Throughput and CPU per GiB of 2 GiB copies, each way once per round.
fn fast(rounds: usize, mut one: impl FnMut(Way) -> (f64, f64)) {
    let gib = 2.0;
    let mut figures = vec![(Vec::new(), Vec::new()); Way::ALL.len()];
    for _ in 0..rounds {
        for (index, way) in Way::ALL.into_iter().enumerate() {
            let (wall, cpu) = one(way);
            figures[index].0.push(gib / wall);
            figures[index].1.push(cpu / gib);
        }
    }
    for (way, (rates, cpus)) in Way::ALL.into_iter().zip(&mut figures) {
        let rate = summary(rates, |r| format!("{r:.2} GiB/s"));
        let cpu = summary(cpus, |c| format!("{c:.3} s"));
        println!("   {:<27} {rate}   CPU per GiB {cpu}", way.name());
    }
}

/// A writer that counts what it took.
struct Counted<W>(W, u64);

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1 += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<W> Taken for Counted<W> {
    fn taken(&self) -> u64 {
        self.1
    }
}
