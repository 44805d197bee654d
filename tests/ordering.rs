//! Decoupling and latency, proven by the order in which things happen.

use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::Duration;

use crate::util::*;

#[test]
fn producer_finishes_while_consumer_has_not_read() {
    for engine in ENGINES {
        assert!(
            producer_finishes_before_consumer_reads(
                accel(engine, &[]),
                16 << 20,
                64 << 10,
                GENEROUS
            ),
            "--engine {engine}: the producer could not write 16 MiB while the consumer was stalled"
        );
    }
}

/// The control: the same test fails with `cat` in the middle, which holds only a pipe's worth.
/// (Waiting cannot make cat absorb 16 MiB; the short timeout only bounds how long we look.)
#[test]
fn control_cat_does_not_decouple() {
    assert!(!producer_finishes_before_consumer_reads(
        Command::new("cat"),
        16 << 20,
        64 << 10,
        Duration::from_secs(2)
    ));
}

/// A buffer smaller than the burst must push back: the producer may not finish either.
#[test]
fn small_buffer_pushes_back() {
    assert!(!producer_finishes_before_consumer_reads(
        accel("copy", &["-m", "64K"]),
        16 << 20,
        64 << 10,
        Duration::from_secs(2)
    ));
}

/// A line written by a producer that keeps its pipe open reaches the consumer at once, not
/// when a block fills or input ends.
#[test]
fn a_line_passes_while_the_producer_keeps_the_pipe_open() {
    for engine in ENGINES {
        let mut child = spawn_piped(engine, &[]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        for line in ["hello\n", "a second, longer line\n", "x\n"] {
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.flush().unwrap();
            let got = within(GENEROUS, move || {
                let mut got = String::new();
                stdout.read_line(&mut got).map(|_| (got, stdout))
            })
            .unwrap_or_else(|| {
                panic!("--engine {engine}: {line:?} did not pass while stdin was open")
            })
            .unwrap();
            assert_eq!(got.0, line, "--engine {engine}");
            stdout = got.1;
        }
        drop(stdin);
        assert!(wait_within(&mut child, GENEROUS).success());
    }
}

/// While the producer is quiet, what is buffered keeps going out: a stalled consumer that
/// starts reading gets everything written so far without the producer writing more.
#[test]
fn buffered_data_drains_while_producer_is_quiet() {
    for engine in ENGINES {
        let mut child = spawn_piped(engine, &[]);
        let mut stdin = child.stdin.take().unwrap();
        let data = pattern(4 << 20, 3);
        stdin.write_all(&data).unwrap();
        stdin.flush().unwrap();
        // The producer now stays quiet with its pipe open; the consumer must still get it all.
        let mut stdout = child.stdout.take().unwrap();
        let got = within(GENEROUS, move || {
            let mut buf = vec![0u8; 4 << 20];
            std::io::Read::read_exact(&mut stdout, &mut buf).map(|_| buf)
        })
        .unwrap_or_else(|| panic!("--engine {engine}: buffered data did not drain"))
        .unwrap();
        assert_same(&got, &data, engine);
        drop(stdin);
        assert!(wait_within(&mut child, GENEROUS).success());
    }
}
