//! Memory follows the backlog: small transfers stay small, and a drained burst is given back.

use std::io::{Read, Write};

use crate::util::*;

/// `-m 1G` passing 1 MiB: accel's peak resident memory stays within a few MiB of what the
/// same accel takes with a one-page buffer. Against that baseline, not a fixed figure: the
/// binary's own pages (a debug build's relocations grow with every crate linked in) are
/// not the buffer's doing.
fn a_big_buffer_costs_only_what_is_used(engine: &str) {
    let baseline = peak_passing_a_mib(engine, "4K");
    let peak_kib = peak_passing_a_mib(engine, "1G");
    assert!(
        peak_kib <= baseline + (4 << 10),
        "--engine {engine}: peak RSS {peak_kib} KiB with 1 MiB through -m 1G, {baseline} KiB \
         through -m 4K"
    );
}

/// accel's peak resident set, in KiB, once 1 MiB has passed through `-m size`.
fn peak_passing_a_mib(engine: &str, size: &str) -> u64 {
    let mut child = spawn_piped(engine, &["-m", size]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let data = pattern(1 << 20, 11);
    let writer = std::thread::spawn(move || {
        stdin.write_all(&data).unwrap();
        stdin
    });
    let mut got = vec![0u8; 1 << 20];
    stdout.read_exact(&mut got).unwrap();
    let stdin = writer.join().unwrap();
    assert_same(&got, &pattern(1 << 20, 11), engine);
    // Still running (stdin open): read its peak resident set.
    let peak_kib = proc_status_kib(child.id(), "VmHWM");
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
    peak_kib
}

/// After a 128 MiB burst has drained, the memory goes back to the system while accel runs on.
fn a_drained_burst_is_given_back(engine: &str) {
    let mut child = spawn_piped(engine, &["-m", "256M"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let data = pattern(128 << 20, 12);
    // The consumer is stalled: the whole burst lands in accel's buffer.
    stdin.write_all(&data).unwrap();
    let pid = child.id();
    eventually(GENEROUS, "the burst is buffered", || proc_status_kib(pid, "VmRSS") > 100 << 10);
    let mut got = vec![0u8; data.len()];
    stdout.read_exact(&mut got).unwrap();
    assert_same(&got, &data, engine);
    eventually(GENEROUS, "the drained burst's memory is given back", || {
        proc_status_kib(pid, "VmRSS") < 16 << 10
    });
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

per_engine!(a_big_buffer_costs_only_what_is_used, a_drained_burst_is_given_back);
