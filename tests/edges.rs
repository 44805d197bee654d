//! The pipe edges: vanished consumers, full disks, inherited flags, files, devices, closed and
//! leaked descriptors.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use rustix::fs::OFlags;

use crate::util::*;

fn sh(script: &str) -> std::process::Output {
    Command::new("bash").arg("-c").arg(script).env("ACCEL", ACCEL).output().expect("run bash")
}

/// `yes | accel | head -c 10`: accel stops at once, quietly, killed by SIGPIPE like cat, so
/// `pipefail` gives the same verdict with or without it.
#[test]
fn consumer_gone_ends_by_sigpipe_like_cat() {
    let with_cat = sh("set -o pipefail; yes | cat | head -c 10 >/dev/null; echo $?");
    for engine in ENGINES {
        let out = sh(&format!(
            "set -o pipefail; yes | \"$ACCEL\" --engine {engine} | head -c 10 | od -c | head -1; \
             echo \"${{PIPESTATUS[*]}}\""
        ));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("0000000   y  \\n   y  \\n   y  \\n   y  \\n   y  \\n"));
        assert_eq!(
            lines.next(),
            Some("141 141 0 0 0"),
            "--engine {engine}: statuses of yes, accel, head, ..."
        );
        assert!(
            out.stderr.is_empty(),
            "--engine {engine} said {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        let verdict = sh(&format!(
            "set -o pipefail; yes | \"$ACCEL\" --engine {engine} | head -c 10 >/dev/null; echo $?"
        ));
        assert_eq!(
            verdict.stdout, with_cat.stdout,
            "--engine {engine}: pipefail verdict differs from cat's"
        );
    }
}

/// Writing to a full device: one line naming the cause and the byte counts, status 3.
#[test]
fn full_device_is_reported_once_with_counts() {
    for engine in ENGINES {
        let mut child = accel(engine, &[])
            .stdin(Stdio::piped())
            .stdout(File::create("/dev/full").unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The producer may be cut off when accel gives up; that is its EPIPE, not ours.
        let _ = feed(child.stdin.take().unwrap(), &pattern(1 << 20, 5), 4096);
        let status = wait_within(&mut child, GENEROUS);
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        assert_eq!(status.code(), Some(3), "--engine {engine}");
        assert_eq!(stderr.lines().count(), 1, "--engine {engine}: {stderr}");
        assert!(
            stderr.starts_with(
                "accel: write to stdout: No space left on device; 0 bytes delivered, "
            ),
            "--engine {engine}: {stderr}"
        );
        assert!(stderr.trim_end().ends_with(" bytes read but not delivered"), "{stderr}");
    }
}

/// A read error (stdin is a directory): what was read is delivered, then status 1.
#[test]
fn read_error_is_reported() {
    for engine in ENGINES {
        let out = accel(engine, &[]).stdin(File::open("/").unwrap()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "--engine {engine}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "accel: read from stdin: Is a directory; the 0 bytes read before it were delivered\n"
        );
    }
}

/// Descriptors inherited with O_NONBLOCK already set (someone else's doing): accel copes with
/// EAGAIN on both sides, and leaves the flag as it found it.
#[test]
fn inherited_nonblocking_stdin_and_stdout() {
    for engine in ENGINES {
        for side in ["stdin", "stdout"] {
            let (stdin_r, mut stdin_w) = {
                let (r, w) = pipe();
                (r, File::from(w))
            };
            let (stdout_r, stdout_w) = pipe();
            let shared = if side == "stdin" { &stdin_r } else { &stdout_w };
            let flags = rustix::fs::fcntl_getfl(shared).unwrap();
            rustix::fs::fcntl_setfl(shared, flags | OFlags::NONBLOCK).unwrap();
            let mut child = accel(engine, &["-m", "256K"])
                .stdin(Stdio::from(stdin_r.try_clone().unwrap()))
                .stdout(Stdio::from(stdout_w.try_clone().unwrap()))
                .spawn()
                .unwrap();
            drop(stdout_w);
            let data = pattern(6 << 20, 9);
            let sent = data.clone();
            // Bursts with pauses, so accel finds stdin empty (EAGAIN) and stdout full (EAGAIN).
            let producer = thread::spawn(move || {
                for piece in sent.chunks(300_000) {
                    stdin_w.write_all(piece).unwrap();
                    thread::sleep(Duration::from_millis(3));
                }
            });
            let mut reader = File::from(stdout_r);
            let mut got = Vec::new();
            let mut buf = vec![0u8; 100_000];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => panic!("{e}"),
                }
                if got.len() % 7 == 0 {
                    thread::sleep(Duration::from_millis(2));
                }
            }
            producer.join().unwrap();
            assert!(wait_within(&mut child, GENEROUS).success(), "--engine {engine}, {side}");
            assert_same(&got, &data, &format!("--engine {engine}, non-blocking {side}"));
            let after = rustix::fs::fcntl_getfl(&stdin_r).unwrap();
            assert_eq!(after.contains(OFlags::NONBLOCK), side == "stdin", "accel changed the flag");
        }
    }
}

/// stdout a regular file: written at the shared offset (after what is there), with and without
/// O_APPEND.
#[test]
fn stdout_regular_file_with_and_without_append() {
    for engine in ENGINES {
        for append in [false, true] {
            let path = std::env::temp_dir()
                .join(format!("accel-test-{}-{engine}-{append}", std::process::id()));
            std::fs::write(&path, b"already here\n").unwrap();
            let mut file = OpenOptions::new().write(true).append(append).open(&path).unwrap();
            if !append {
                // As in `{ echo header; accel; } > file`: accel continues at the shared offset.
                file.seek(std::io::SeekFrom::Start(8)).unwrap();
            }
            let data = pattern(3 << 20, 4);
            let mut child = accel(engine, &[]).stdin(Stdio::piped()).stdout(file).spawn().unwrap();
            feed(child.stdin.take().unwrap(), &data, 100_000).unwrap();
            assert!(wait_within(&mut child, GENEROUS).success());
            let written = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            let head: &[u8] = if append { b"already here\n" } else { b"already " };
            assert_same(
                &written,
                &[head, &data].concat(),
                &format!("--engine {engine}, append {append}"),
            );
        }
    }
}

/// stdout /dev/null: everything is read and discarded, status 0.
#[test]
fn stdout_dev_null() {
    for engine in ENGINES {
        let mut child = accel(engine, &[])
            .stdin(Stdio::piped())
            .stdout(File::create("/dev/null").unwrap())
            .spawn()
            .unwrap();
        feed(child.stdin.take().unwrap(), &pattern(20 << 20, 1), 1 << 20).unwrap();
        assert!(wait_within(&mut child, GENEROUS).success());
    }
}

/// Sockets on both sides work like pipes.
#[test]
fn sockets_on_both_sides() {
    use std::os::unix::net::UnixStream;
    for engine in ENGINES {
        let (mut producer, accel_in) = UnixStream::pair().unwrap();
        let (accel_out, consumer) = UnixStream::pair().unwrap();
        let mut child = accel(engine, &[])
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(accel_in)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(accel_out)))
            .spawn()
            .unwrap();
        let data = pattern(5 << 20, 8);
        let sent = data.clone();
        let writer = thread::spawn(move || {
            producer.write_all(&sent).unwrap();
            producer.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let got = drain(consumer);
        writer.join().unwrap();
        assert!(wait_within(&mut child, GENEROUS).success());
        assert_same(&got, &data, engine);
    }
}

/// A closed stdin or stdout is an error, not silently /dev/null.
#[test]
fn closed_stdin_and_stdout_are_errors() {
    for engine in ENGINES {
        let out = sh(&format!("\"$ACCEL\" --engine {engine} <&-; echo \"status $?\""));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "status 1\n");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "accel: stdin is closed: there is nothing to read\n"
        );
        let out =
            sh(&format!("echo data | \"$ACCEL\" --engine {engine} >&-; echo \"status $?\" >&2"));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "accel: stdout is closed: there is nowhere to write\nstatus 3\n"
        );
    }
}

/// Every descriptor accel opens is close-on-exec, and it works with few descriptors allowed.
#[test]
fn no_descriptor_leaks() {
    for engine in ENGINES {
        let mut child = spawn_piped(engine, &[]);
        let mut stdin = child.stdin.take().unwrap();
        // 4 MiB while nobody reads: at least 2 MiB (beyond the two 1 MiB pipes) are then in
        // accel's own buffer, pool pipes included.
        stdin.write_all(&pattern(4 << 20, 2)).unwrap();
        let pid = child.id();
        // What the test process itself passes on (cargo's jobserver, say) is not accel's doing.
        let inherited = inheritable_fds("self");
        for fd in inheritable_fds(&pid.to_string()) {
            assert!(
                fd <= 2 || inherited.contains(&fd),
                "--engine {engine}: fd {fd} is not close-on-exec"
            );
        }
        drop(stdin);
        let out = drain(child.stdout.take().unwrap());
        assert_eq!(out.len(), 4 << 20);
        assert!(wait_within(&mut child, GENEROUS).success());

        let out = sh(&format!(
            "ulimit -n 12; head -c 20000000 /dev/zero | \"$ACCEL\" --engine {engine} | wc -c"
        ));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "20000000",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The descriptors of process `pid` that a child would inherit (no O_CLOEXEC).
fn inheritable_fds(pid: &str) -> Vec<u32> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let fd: u32 = entry.unwrap().file_name().to_str().unwrap().parse().unwrap();
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"));
        // O_CLOEXEC is 0o2000000 on Linux.
        if flags.is_some_and(|f| u32::from_str_radix(f.trim(), 8).unwrap() & 0o2000000 == 0) {
            fds.push(fd);
        }
    }
    fds
}

#[test]
fn bad_size_is_a_usage_error_naming_the_cause() {
    let out = Command::new(ACCEL).args(["-m", "3Q"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("accel: -m 3Q: not a size: expected "), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_says_what_accel_is_for() {
    let out = Command::new(ACCEL).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["pipeline buffer", "Example:", "| accel |", "--size", "Exit status"] {
        assert!(help.contains(needle), "--help lacks {needle:?}");
    }
    let out = Command::new(ACCEL).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("accel "));
    // The man page and completions come from the same definition.
    let man = Command::new(ACCEL).args(["--generate", "man"]).output().unwrap();
    assert!(man.status.success() && String::from_utf8_lossy(&man.stdout).contains(".TH accel 1"));
    let bash = Command::new(ACCEL).args(["--generate", "bash"]).output().unwrap();
    assert!(String::from_utf8_lossy(&bash.stdout).contains("--stall-timeout"));
    // Unknown options are usage errors, which do not look like data errors.
    assert_eq!(Command::new(ACCEL).arg("--bogus").output().unwrap().status.code(), Some(2));
}

#[test]
fn nothing_in_nothing_out() {
    for engine in ENGINES {
        let out = accel(engine, &[]).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success());
        assert!(out.stdout.is_empty() && out.stderr.is_empty());
        assert_eq!(out.status.signal(), None);
    }
}
