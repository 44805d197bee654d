//! Decoupling and latency, proven by the order in which things happen.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use crate::util::*;

/// The producer writes 16 MiB and finishes before the consumer reads a byte. The same check
/// on a buffer too small for the burst must fail (the producer is pushed back), which shows
/// that the check can fail at all and that `-m` is honoured.
fn producer_finishes_while_consumer_has_not_read(engine: &str) {
    assert!(
        producer_finishes_before_consumer_reads(accel(engine, &[]), 16 << 20, 64 << 10, GENEROUS),
        "the producer could not write 16 MiB while the consumer was stalled"
    );
    // 64 KiB of buffer and two 1 MiB pipes cannot hold 16 MiB: however long we wait, the
    // producer cannot finish; two seconds only bound how long we look.
    assert!(
        !producer_finishes_before_consumer_reads(
            accel(engine, &["-m", "64K"]),
            16 << 20,
            64 << 10,
            Duration::from_secs(2)
        ),
        "-m 64K took in 16 MiB while the consumer was stalled"
    );
}

/// A line written by a producer that keeps its pipe open reaches the consumer at once, not
/// when a block fills or input ends.
fn a_line_passes_while_the_producer_keeps_the_pipe_open(engine: &str) {
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
        .unwrap_or_else(|| panic!("{line:?} did not pass while stdin was open"))
        .unwrap();
        assert_eq!(got.0, line);
        stdout = got.1;
    }
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// While the producer is quiet, what is buffered keeps going out: a stalled consumer that
/// starts reading gets everything written so far without the producer writing more.
fn buffered_data_drains_while_producer_is_quiet(engine: &str) {
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
    .expect("buffered data did not drain")
    .unwrap();
    assert_same(&got, &data, engine);
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// After a stream that kept accel busy, a line written while the consumer waits still
/// arrives before the producer writes its next one: however accel lets bytes gather to wake
/// less often, a consumer waiting for them is a reason to pass them on, not to wait for more
/// (issue 22). The stream comes in 4 KiB writes, as `bzip2 -dc` makes it, and is read as it
/// comes; the timeout only bounds how long a failure takes to show.
fn a_line_written_while_the_consumer_waits_arrives_before_the_next(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    for round in 0..4u64 {
        let stream = pattern(4 << 20, round);
        let len = stream.len();
        let reading = std::thread::spawn(move || {
            let mut got = vec![0u8; len];
            std::io::Read::read_exact(&mut stdout, &mut got).map(|()| (got, stdout))
        });
        for piece in stream.chunks(4096) {
            stdin.write_all(piece).unwrap();
        }
        let (got, back) = within(GENEROUS, move || reading.join().unwrap())
            .unwrap_or_else(|| panic!("round {round}: the stream did not arrive"))
            .unwrap();
        assert_same(&got, &stream, engine);
        // The consumer has every byte written so far and waits for more.
        let line = format!("line {round}, written while the consumer waits\n");
        let want = line.clone();
        let mut waiting = back;
        let reading = std::thread::spawn(move || {
            let mut got = vec![0u8; want.len()];
            std::io::Read::read_exact(&mut waiting, &mut got).map(|()| (got, waiting))
        });
        stdin.write_all(line.as_bytes()).unwrap();
        // The producer writes nothing more until the line has arrived.
        let (got, back) = within(GENEROUS, move || reading.join().unwrap())
            .unwrap_or_else(|| panic!("round {round}: the line waited for the next write"))
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&got), line);
        stdout = back;
    }
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

per_engine!(
    producer_finishes_while_consumer_has_not_read,
    a_line_passes_while_the_producer_keeps_the_pipe_open,
    buffered_data_drains_while_producer_is_quiet,
    a_line_written_while_the_consumer_waits_arrives_before_the_next,
);

/// The README's first command, `examples/turns.sh`, runs with the accel under test and prints
/// its two timed pipelines, and that the stages overlap through accel: the script says so
/// only when the second run took at most 0.85 of the first (through accel they take some 0.6;
/// through `cat`, which is a 64 KiB pipe more, the same as without, and the test fails).
/// The script times both pipelines by the clock, and on a loaded machine its consumer's
/// hundred forks may be held up in one run as much as accel saves: up to three runs, one of
/// which must show the overlap (through `cat`, none ever does).
#[test]
fn the_readmes_first_command_runs() {
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (stdout, overlap) = turns();
        runs.push(stdout);
        if overlap {
            return;
        }
    }
    panic!("no run of the three showed the overlap:\n{}", runs.join("\n"));
}

/// One run of `examples/turns.sh`: what it printed, checked for its shape, and whether it
/// said that the stages overlapped through accel.
fn turns() -> (String, bool) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/turns.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .env("ACCEL", ACCEL)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[2].starts_with("producer | consumer ") && lines[2].ends_with(" they take turns"));
    assert!(lines[3].starts_with("producer | accel | consumer "), "{stdout}");
    assert_eq!(stderr, "", "accel says nothing when stderr is not a terminal");
    let overlap = lines[3].ends_with(" they overlap");
    (stdout, overlap)
}
