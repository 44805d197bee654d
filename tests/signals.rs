//! Signals: accel stops promptly and ends by the signal it was sent.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;

use rustix::process::{Pid, Signal, kill_process};

use crate::util::*;

/// SIGTERM, SIGINT and SIGHUP mid-stream (data has passed, more is buffered, the producer
/// still connected): accel ends by that very signal.
fn terminating_signals_mid_stream_end_by_the_same_signal(engine: &str) {
    for signal in [Signal::TERM, Signal::INT, Signal::HUP] {
        let mut child = spawn_piped(engine, &[]);
        let mut stdin = child.stdin.take().unwrap();
        let data = pattern(3 << 20, 6);
        stdin.write_all(&data).unwrap();
        stdin.flush().unwrap();
        // Mid-stream: the first MiB has reached the consumer, the rest waits in accel.
        let mut first = vec![0u8; 1 << 20];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        assert_same(&first, &data[..1 << 20], "before the signal");
        kill_process(Pid::from_child(&child), signal).unwrap();
        let status = wait_within(&mut child, GENEROUS);
        assert_eq!(status.signal(), Some(signal.as_raw()), "{signal:?}: {status}");
    }
}

per_engine!(terminating_signals_mid_stream_end_by_the_same_signal);
