//! The `Write` adapter in front of a slow writer: a producer that computes each block before
//! writing it, into a sink that takes a while for each write (a disk, a network share).
//!
//! Written directly, the two take turns: the producer waits for every write, the sink for
//! every block computed. Through a [`WriteBehind`], each write returns once the block is
//! buffered, and the run takes about as long as the slower of the two alone.

use std::io::{self, Write};
use std::thread;
use std::time::{Duration, Instant};

use accel_buffer::WriteBehind;

/// Blocks the producer writes, each after working on it for [`WORK`].
const BLOCKS: usize = 40;
const BLOCK: usize = 256 << 10;
const WORK: Duration = Duration::from_millis(10);

/// A sink that takes [`PER_WRITE`] for each write of up to [`BLOCK`] bytes.
struct Slow {
    written: u64,
}

const PER_WRITE: Duration = Duration::from_millis(10);

impl Write for Slow {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        thread::sleep(PER_WRITE);
        let n = buf.len().min(BLOCK);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Computes each block (here: waits, as real work would take this long), then writes it.
fn produce(out: &mut impl Write) -> io::Result<()> {
    let block = vec![0x5a; BLOCK];
    for _ in 0..BLOCKS {
        thread::sleep(WORK);
        out.write_all(&block)?;
    }
    out.flush()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let began = Instant::now();
    let mut direct = Slow { written: 0 };
    produce(&mut direct)?;
    let direct_took = began.elapsed();

    let began = Instant::now();
    let mut behind = WriteBehind::new(Slow { written: 0 })?;
    produce(&mut behind)?;
    let (slow, delivered) = behind.finish()?;
    let behind_took = began.elapsed();

    assert_eq!(slow.written, delivered);
    println!("written directly:      {direct_took:.2?} (the producer and the sink take turns)");
    println!("through WriteBehind:   {behind_took:.2?} ({delivered} bytes delivered)");
    println!("the slower side alone: {:.2?}", WORK.max(PER_WRITE) * BLOCKS as u32);
    Ok(())
}
