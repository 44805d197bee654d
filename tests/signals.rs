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

/// Issue 11, item 4: stopped by SIGTERM, SIGINT or SIGHUP, with no report asked for, accel
/// says in one line how many bytes were read but not delivered; with `-q`, nothing.
fn a_stop_says_what_was_lost(engine: &str) {
    for (signal, name, args) in [
        (Signal::TERM, "SIGTERM", &[][..]),
        (Signal::INT, "SIGINT", &[]),
        (Signal::HUP, "SIGHUP", &[]),
        (Signal::TERM, "SIGTERM", &["-q"]),
    ] {
        // accel counts a write once the call returns, a moment after the consumer may have
        // read it: its own JSON, in a file, says when it has counted the first MiB out.
        let json = std::env::temp_dir().join(format!(
            "accel-stop-{}-{engine}-{name}-{}",
            std::process::id(),
            args.len()
        ));
        let json_arg = format!("--json={}", json.display());
        let mut child = spawn_piped(engine, &[args, &[&json_arg, "--interval", "0.1s"]].concat());
        let mut stdin = child.stdin.take().unwrap();
        let data = pattern(3 << 20, 7);
        stdin.write_all(&data).unwrap();
        let mut first = vec![0u8; 1 << 20];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        eventually(GENEROUS, "accel counts the first MiB delivered", || {
            let events = std::fs::read_to_string(&json).unwrap_or_default();
            events
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|event| event["bytes_out"].as_u64().is_some_and(|bytes| bytes >= 1 << 20))
        });
        kill_process(Pid::from_child(&child), signal).unwrap();
        let (status, stderr) = ended(child);
        assert_eq!(status.signal(), Some(signal.as_raw()), "{signal:?}: {status}");
        std::fs::remove_file(&json).unwrap();
        if args == ["-q"] {
            assert_eq!(stderr, "", "-q: nothing");
            continue;
        }
        let prefix = format!("accel: stopped by {name}; ");
        let line = stderr.strip_suffix('\n').expect("one line");
        assert!(!line.contains('\n') && line.starts_with(&prefix), "{stderr:?}");
        let counts = line.strip_prefix(&prefix).unwrap();
        // What was delivered includes what the consumer read; together with what was lost, it
        // is what accel read, at most what the producer wrote.
        let read = if counts.ends_with(" read but not delivered") {
            let delivered = bytes_before(counts, " delivered, ");
            assert!(delivered >= 1 << 20, "{line}");
            delivered + bytes_before(counts, " read but not delivered")
        } else if counts.ends_with(" read were delivered") {
            assert!(counts.starts_with("all "), "{line}");
            bytes_before(counts, " read were delivered")
        } else {
            panic!("{line}")
        };
        assert!((1 << 20..=3 << 20).contains(&read), "{line}");
    }
}

per_engine!(terminating_signals_mid_stream_end_by_the_same_signal, a_stop_says_what_was_lost);
