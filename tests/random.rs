//! Randomized byte-exact transfers: whatever the sizes, write sizes, pauses and buffer size,
//! the output equals the input.

use std::io::{Read, Write};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;

use crate::util::*;

/// One randomized transfer.
#[derive(Debug, Clone)]
struct Case {
    size: usize,
    write_size: usize,
    read_size: usize,
    buffer: usize,
    /// Pause `.1` microseconds after every `.0` writes.
    producer_pause: Option<(usize, u64)>,
    consumer_pause: Option<(usize, u64)>,
    seed: u64,
}

/// Uniform over the exponent: as many small values as large ones.
fn log_uniform(max_bits: u32) -> impl Strategy<Value = usize> {
    (0..=max_bits).prop_flat_map(|bits| (1usize << bits)..=(2usize << bits))
}

fn pause() -> impl Strategy<Value = Option<(usize, u64)>> {
    prop_oneof![Just(None), (1usize..64, 0u64..3000).prop_map(Some)]
}

fn case() -> impl Strategy<Value = Case> {
    let size =
        prop_oneof![Just(0usize), 1usize..4096, log_uniform(20), (1usize << 20)..(24 << 20),];
    (
        size,
        log_uniform(22),
        log_uniform(22),
        log_uniform(24).prop_map(|b| b.max(4096)),
        pause(),
        pause(),
        any::<u64>(),
    )
        .prop_map(
            |(size, write_size, read_size, buffer, producer_pause, consumer_pause, seed)| {
                // Keep the syscall count bounded: tens of MiB in single bytes would take minutes.
                let floor = size / 20_000 + 1;
                Case {
                    size,
                    write_size: write_size.max(floor),
                    read_size: read_size.max(floor),
                    buffer,
                    producer_pause,
                    consumer_pause,
                    seed,
                }
            },
        )
}

fn run_case(engine: &str, case: &Case) -> Result<(), TestCaseError> {
    let data = pattern(case.size, case.seed);
    let buffer = case.buffer.to_string();
    let mut child = spawn_piped(engine, &["-m", &buffer]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let sent = data.clone();
    let (write_size, producer_pause) = (case.write_size, case.producer_pause);
    let producer = thread::spawn(move || {
        for (i, piece) in sent.chunks(write_size).enumerate() {
            stdin.write_all(piece)?;
            if let Some((every, micros)) = producer_pause {
                if i % every == 0 {
                    thread::sleep(Duration::from_micros(micros));
                }
            }
        }
        Ok::<_, std::io::Error>(())
    });
    let mut got = Vec::with_capacity(case.size);
    let mut buf = vec![0u8; case.read_size];
    let mut reads = 0;
    loop {
        let n = stdout.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        reads += 1;
        if let Some((every, micros)) = case.consumer_pause {
            if reads % every == 0 {
                thread::sleep(Duration::from_micros(micros));
            }
        }
    }
    producer.join().unwrap().expect("producer");
    let status = wait_within(&mut child, GENEROUS);
    prop_assert!(status.success(), "--engine {engine} exited {status}");
    prop_assert_eq!(got.len(), data.len());
    prop_assert!(got == data, "--engine {engine}: bytes differ");
    Ok(())
}

fn output_equals_input_whatever_the_pattern(engine: &str) {
    let name = format!("random::output_equals_input_whatever_the_pattern::{engine}");
    run_seeded(&name, 24, case(), |case| run_case(engine, &case));
}

/// The extremes, every time: single bytes through the smallest buffer, and a large transfer
/// in huge writes through a buffer smaller than one write.
fn extremes(engine: &str) {
    let cases = [
        Case {
            size: 100_000,
            write_size: 1,
            read_size: 1,
            buffer: 4096,
            producer_pause: None,
            consumer_pause: None,
            seed: 1,
        },
        Case {
            size: 40 << 20,
            write_size: 8 << 20,
            read_size: 3 << 20,
            buffer: 1 << 20,
            producer_pause: None,
            consumer_pause: None,
            seed: 2,
        },
        Case {
            size: 5 << 20,
            write_size: 4097,
            read_size: 4095,
            buffer: 5000,
            producer_pause: None,
            consumer_pause: Some((7, 500)),
            seed: 3,
        },
    ];
    for case in &cases {
        run_case(engine, case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    }
}

per_engine!(output_equals_input_whatever_the_pattern, extremes);
