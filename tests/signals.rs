//! Signals: accel stops promptly and ends by the signal it was sent.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use rustix::process::{Pid, Signal, kill_process};

use crate::util::*;

#[test]
fn terminating_signals_mid_stream_end_by_the_same_signal() {
    for engine in ENGINES {
        for signal in [Signal::TERM, Signal::INT, Signal::HUP] {
            let mut child = spawn_piped(engine, &[]);
            let mut stdin = child.stdin.take().unwrap();
            // Mid-stream: data buffered, the consumer stalled, the producer still connected.
            stdin.write_all(&pattern(3 << 20, 6)).unwrap();
            stdin.flush().unwrap();
            let pid = Pid::from_child(&child);
            eventually(GENEROUS, "accel has taken the input", || {
                proc_status_kib(child.id(), "VmRSS") > 0
                    && std::fs::read_to_string(format!("/proc/{}/io", child.id()))
                        .map(|io| io.contains("rchar: ") && !io.contains("rchar: 0\n"))
                        .unwrap_or(false)
            });
            kill_process(pid, signal).unwrap();
            let status = wait_within(&mut child, GENEROUS);
            assert_eq!(status.signal(), Some(signal.as_raw()), "--engine {engine}: {status}");
        }
    }
}
