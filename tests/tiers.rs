//! The splice engine's tiers (straight through, pool pipes, memory): every byte arrives, in
//! order, whichever tier it took, and the buffer holds what `-m` says whatever the write size.
//! The tiers each byte took are read from the JSON summary.

use std::io::Read;
use std::thread;
use std::time::Duration;

use proptest::prelude::*;

use crate::util::*;

/// Bytes per tier in a JSON summary: [straight through, pool pipes, memory].
fn tiers(summary: &serde_json::Value) -> [u64; 3] {
    ["through", "pipes", "memory"].map(|tier| summary["tiers"][tier].as_u64().unwrap())
}

/// A `--json=FILE` for one run, and the summary it ends with.
struct Json(std::path::PathBuf);

impl Json {
    fn new(name: &str) -> Json {
        Json(std::env::temp_dir().join(format!("accel-tiers-{}-{name}", std::process::id())))
    }

    fn arg(&self) -> String {
        format!("--json={}", self.0.display())
    }

    fn summary(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.0).unwrap();
        let _ = std::fs::remove_file(&self.0);
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    }
}

/// The first piece, which the consumer reads before stalling: stdin's first reads go to
/// memory until one tells a byte stream from a packet-mode pipe.
const WARM_UP: usize = 64 << 10;

/// Writes the first 64 KiB of `data` and has the consumer take them, then writes the rest
/// while the consumer is stalled, closes stdin (EOF while bytes wait in whatever tiers they
/// reached), then drains and checks. Returns the tier counts.
fn eof_while_queued(engine: &str, data: &[u8], write_size: usize) -> [u64; 3] {
    let json = Json::new(&format!("eof-{engine}-{}", data.len()));
    let mut child = spawn_piped(engine, &[&json.arg()]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    std::io::Write::write_all(&mut stdin, &data[..WARM_UP]).unwrap();
    let mut out = vec![0u8; WARM_UP];
    stdout.read_exact(&mut out).unwrap();
    let rest = data[WARM_UP..].to_vec();
    within(GENEROUS, move || feed(stdin, &rest, write_size).unwrap())
        .expect("producer finished while the consumer was stalled");
    out.extend(drain(stdout));
    let (status, stderr) = ended(child);
    assert!(status.success(), "{stderr}");
    assert_same(&out, data, &format!("--engine {engine}"));
    let tiers = tiers(&json.summary());
    assert_eq!(tiers.iter().sum::<u64>(), data.len() as u64, "tiers account for every byte");
    tiers
}

/// End of input while bytes sit in the consumer's pipe only, in pool pipes, and in memory.
#[test]
fn eof_while_data_sits_in_each_tier() {
    // 512 KiB fits in stdout's 1 MiB pipe: all but the warm-up went without a copy, straight
    // through, or by a pool pipe where the output thread was still busy with the warm-up when
    // the rest came (which a loaded machine makes the whole rest: the consumer is stalled).
    let [through, pool, memory] = eof_while_queued("splice", &pattern(512 << 10, 1), 64 << 10);
    assert!(through + pool > 0 && memory <= WARM_UP as u64, "{through} {pool} {memory}");
    // 4 MiB: stdout's pipe fills, the rest waits in pool pipes.
    let [through, pool, _] = eof_while_queued("splice", &pattern(4 << 20, 2), 64 << 10);
    assert!(through > 0 && pool > 0, "{through} {pool}");
    // 24 MiB: beyond the 16 MiB pool, memory.
    let [through, pool, memory] = eof_while_queued("splice", &pattern(24 << 20, 3), 1 << 20);
    assert!(through > 0 && pool > 0 && memory > 1 << 20, "{through} {pool} {memory}");
    // The copy engine only ever uses memory.
    let [through, pool, _] = eof_while_queued("copy", &pattern(4 << 20, 4), 64 << 10);
    assert_eq!((through, pool), (0, 0));
}

/// A pipe counts pages, not bytes: 100-byte writes must not shrink `-m 32M` to a few hundred
/// KiB. With the consumer stalled, the producer gets 31 MiB in before the consumer reads.
fn small_writes_still_fill_the_buffer(engine: &str) {
    assert!(
        producer_finishes_before_consumer_reads(
            accel(engine, &["-m", "32M"]),
            31 << 20,
            100,
            GENEROUS
        ),
        "31 MiB in 100-byte writes did not fit in -m 32M"
    );
}

per_engine!(small_writes_still_fill_the_buffer);

/// A consumer that stalls and then reads in bursts, against a producer of tiny and huge writes:
/// the backlog goes through every tier and back, and every byte arrives in order.
#[test]
fn stalls_and_bursts_through_every_tier() {
    let seen = std::sync::Mutex::new([0u64; 3]);
    let strategy = (
        prop_oneof![Just(1usize), 1usize..200, 4096usize..70_000, (1usize << 20)..(4 << 20)],
        (1usize << 20)..(20 << 20),
        1u64..40,
        (64usize << 10)..(8 << 20),
        any::<u64>(),
    );
    run_seeded("tiers::stalls_and_bursts_through_every_tier", 12, strategy, |case| {
        let (write_size, size, stall_ms, burst, seed) = case;
        // Single-byte writes of many MiB would take minutes; keep the syscall count sane.
        let write_size = write_size.max(size / 50_000);
        let data = pattern(size, seed);
        let json = Json::new(&format!("bursts-{seed}"));
        let mut child = spawn_piped("splice", &["-m", "12M", &json.arg()]);
        let stdin = child.stdin.take().unwrap();
        let sent = data.clone();
        let producer = thread::spawn(move || feed(stdin, &sent, write_size));
        let mut stdout = child.stdout.take().unwrap();
        let mut got = Vec::with_capacity(size);
        let mut buf = vec![0u8; burst];
        loop {
            // Stall, then read one burst as fast as it comes.
            thread::sleep(Duration::from_millis(stall_ms));
            let mut taken = 0;
            while taken < burst {
                let n = stdout.read(&mut buf[taken..]).unwrap();
                if n == 0 {
                    break;
                }
                taken += n;
            }
            got.extend_from_slice(&buf[..taken]);
            if taken < burst {
                break;
            }
        }
        producer.join().unwrap().unwrap();
        let (status, stderr) = ended(child);
        prop_assert!(status.success(), "{}", stderr);
        prop_assert!(got == data, "bytes differ (write size {}, {} bytes)", write_size, size);
        let tiers = tiers(&json.summary());
        prop_assert_eq!(tiers.iter().sum::<u64>(), size as u64);
        for (total, n) in seen.lock().unwrap().iter_mut().zip(tiers) {
            *total += n;
        }
        Ok(())
    });
    let seen = *seen.lock().unwrap();
    assert!(seen.iter().all(|&n| n > 0), "some tier was never used: {seen:?}");
}

/// A burst already waiting in stdin is spliced once stdin is known to be a byte stream, not
/// copied through memory to find that out: the read that tells takes a few pages, not the
/// whole burst (it took 1 MiB of anonymous memory, a third of accel's footprint, before).
#[test]
fn a_waiting_burst_is_told_a_byte_stream_by_a_few_pages() {
    let page = rustix::param::page_size();
    let (read, write) = pipe();
    // Fits in a new pipe (16 pages), so it is all there before accel starts.
    let burst = pattern(15 * page, 5);
    std::io::Write::write_all(&mut std::fs::File::from(write), &burst).unwrap();
    let out = accel("splice", &["--debug"]).stdin(read).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_same(&out.stdout, &burst, "a burst waiting in stdin");
    let told = stderr
        .lines()
        .find_map(|line| line.strip_prefix("accel: stdin is a byte stream (a read returned "))
        .unwrap_or_else(|| panic!("no read told a byte stream: {stderr}"));
    let bytes: usize = told.split(' ').next().unwrap().parse().unwrap();
    assert!(page < bytes && bytes <= 4 * page, "the telling read took {bytes} bytes");
}
