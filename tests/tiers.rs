//! The splice engine's tiers (straight through, pool pipes, memory): every byte arrives, in
//! order, whichever tier it took, and the buffer holds what `-m` says whatever the write size.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::util::*;

/// Bytes per tier from accel's `--debug` summary: [straight through, pool pipes, memory].
fn tiers(stderr: &str) -> [u64; 3] {
    let line = stderr
        .lines()
        .find(|l| l.contains("bytes straight through"))
        .unwrap_or_else(|| panic!("no tier summary in {stderr:?}"));
    let number = |label: &str| -> u64 {
        let rest = &line[line.find(label).unwrap() + label.len()..];
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    [number("straight through"), number("via pool pipes"), number("via memory")]
}

/// Writes `data` while the consumer is stalled, closes stdin (EOF while bytes wait in
/// whatever tiers they reached), then drains and checks. Returns the tier counts.
fn eof_while_queued(engine: &str, args: &[&str], data: &[u8], write_size: usize) -> [u64; 3] {
    let mut child = spawn_piped(engine, &[&["--debug"], args].concat());
    let stdin = child.stdin.take().unwrap();
    let sent = data.to_vec();
    within(GENEROUS, move || feed(stdin, &sent, write_size).unwrap())
        .expect("producer finished while the consumer was stalled");
    let out = drain(child.stdout.take().unwrap());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(wait_within(&mut child, GENEROUS).success(), "{stderr}");
    assert_same(&out, data, &format!("--engine {engine} {args:?}"));
    let tiers = tiers(&stderr);
    assert_eq!(tiers.iter().sum::<u64>(), data.len() as u64, "tiers account for every byte");
    tiers
}

/// End of input while bytes sit in the consumer's pipe only, in pool pipes, and in memory.
#[test]
fn eof_while_data_sits_in_each_tier() {
    // 512 KiB fits in stdout's 1 MiB pipe: everything went straight through.
    let [through, pool, memory] = eof_while_queued("splice", &[], &pattern(512 << 10, 1), 64 << 10);
    assert_eq!((through, pool, memory), (512 << 10, 0, 0));
    // 4 MiB: stdout's pipe fills, the rest waits in pool pipes.
    let [through, pool, memory] = eof_while_queued("splice", &[], &pattern(4 << 20, 2), 64 << 10);
    assert!(through > 0 && pool > 0 && memory == 0, "{through} {pool} {memory}");
    // 24 MiB: beyond the 8 MiB pool, memory.
    let [through, pool, memory] = eof_while_queued("splice", &[], &pattern(24 << 20, 3), 1 << 20);
    assert!(through > 0 && pool > 0 && memory > 0, "{through} {pool} {memory}");
    // The copy engine only ever uses memory.
    let [through, pool, _] = eof_while_queued("copy", &[], &pattern(4 << 20, 4), 64 << 10);
    assert_eq!((through, pool), (0, 0));
}

/// A pipe counts pages, not bytes: 100-byte writes must not shrink `-m 32M` to a few hundred
/// KiB. With the consumer stalled, the producer gets 31 MiB in before the consumer reads.
#[test]
fn small_writes_still_fill_the_buffer() {
    for engine in ENGINES {
        assert!(
            producer_finishes_before_consumer_reads(
                accel(engine, &["-m", "32M"]),
                31 << 20,
                100,
                GENEROUS
            ),
            "--engine {engine}: 31 MiB in 100-byte writes did not fit in -m 32M"
        );
    }
}

/// With the user's pipe quota exhausted, the pool cannot grow: accel copies instead, and says
/// so with `--debug`, but never fails because of it.
#[test]
fn pipe_quota_exhausted_degrades_to_copying() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run accel as another user");
        return;
    }
    // `nobody` may not be able to reach the build directory (a checkout under /root, say):
    // run a copy from the temporary directory.
    let binary = std::env::temp_dir().join(format!("accel-quota-{}", std::process::id()));
    std::fs::copy(ACCEL, &binary).unwrap();
    std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut command = std::process::Command::new(&binary);
    command.args(["--engine", "splice", "--debug"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            // Become `nobody`, who is bound by the per-user pipe quota, and spend that quota on
            // pipes that accel inherits and keeps open.
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let mut fds = [0; 2];
            for _ in 0..1024 {
                if libc::pipe(fds.as_mut_ptr()) != 0
                    || libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 1 << 20) < 0
                {
                    break;
                }
            }
            Ok(())
        });
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let data = pattern(16 << 20, 7);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    // While the consumer is stalled, so that the backlog must queue beyond stdout's pipe.
    within(GENEROUS, move || feed(stdin, &sent, 64 << 10).unwrap()).expect("producer finished");
    let out = drain(child.stdout.take().unwrap());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(wait_within(&mut child, GENEROUS).success(), "{stderr}");
    std::fs::remove_file(&binary).unwrap();
    assert_same(&out, &data, "quota exhausted");
    assert!(
        stderr.contains("no pool pipes: the per-user pipe quota is exhausted; copying instead"),
        "{stderr}"
    );
    assert_eq!(tiers(&stderr)[1], 0, "nothing went through pool pipes");
}

/// A consumer that stalls and then reads in bursts, against a producer of tiny and huge writes:
/// the backlog goes through every tier and back, and every byte arrives in order.
#[test]
fn stalls_and_bursts_through_every_tier() {
    let seen = Arc::new(Mutex::new([0u64; 3]));
    let strategy = (
        prop_oneof![Just(1usize), 1usize..200, 4096usize..70_000, (1usize << 20)..(4 << 20)],
        (1usize << 20)..(20 << 20),
        1u64..40,
        (64usize << 10)..(8 << 20),
        any::<u64>(),
    );
    let config = Config { cases: 12, failure_persistence: None, ..Config::default() };
    let seen_in_cases = Arc::clone(&seen);
    TestRunner::new(config)
        .run(&strategy, move |(write_size, size, stall_ms, burst, seed)| {
            // Single-byte writes of many MiB would take minutes; keep the syscall count sane.
            let write_size = write_size.max(size / 50_000);
            let data = pattern(size, seed);
            let mut child = spawn_piped("splice", &["--debug", "-m", "12M"]);
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
            let mut stderr = String::new();
            child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            prop_assert!(wait_within(&mut child, GENEROUS).success(), "{}", stderr);
            prop_assert!(got == data, "bytes differ (write size {}, {} bytes)", write_size, size);
            let tiers = tiers(&stderr);
            prop_assert_eq!(tiers.iter().sum::<u64>(), size as u64);
            let mut seen = seen_in_cases.lock().unwrap();
            for (total, n) in seen.iter_mut().zip(tiers) {
                *total += n;
            }
            Ok(())
        })
        .unwrap();
    let seen = *seen.lock().unwrap();
    assert!(seen.iter().all(|&n| n > 0), "some tier was never used: {seen:?}");
}
