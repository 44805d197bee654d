//! The fault matrix: every fault a pipeline meets, caused on purpose, each with the outcome
//! accel promises: its exit status, its message, and the bytes delivered against the bytes
//! promised. FAULTS.md lists the same rows, in the same order.
//!
//! Each row runs once per engine. Rows that need root (mounts, cgroups, other users) fail
//! without it unless `ACCEL_TESTS_MAY_SKIP=1` (see `util::require`); CI runs as root.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use rustix::fs::OFlags;
use rustix::process::{Pid, Signal, kill_process};

use crate::util::control::{fake_server, remote, root_control_dir, with_socket_in};
use crate::util::*;

// ----- helpers -----

/// The two counts of a write error's message: `...; D delivered, M read but not delivered`.
#[track_caller]
fn delivered_and_lost(message: &str) -> (u64, u64) {
    (bytes_before(message, " delivered, "), bytes_before(message, " read but not delivered"))
}

/// The scheduling state of process `pid` (`R`, `S`, `T` for stopped, ...).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit(')').next().and_then(|rest| rest.trim_start().chars().next()).unwrap_or('?')
}

/// A signal mask from `/proc/PID/status` (`SigIgn`, `SigCgt`): bit n-1 for signal n.
fn signal_set(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).unwrap();
    u64::from_str_radix(line.trim(), 16).unwrap()
}

/// Bytes waiting in the pipe behind `fd`.
fn queued(fd: &OwnedFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    assert_eq!(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) }, 0);
    n as usize
}

/// A cgroup of the `controller` hierarchy (v2, or v1 where the controller lives there),
/// removed when dropped. `None` where neither can be had.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    fn new(controller: &str, name: &str) -> Option<Cgroup> {
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_has = std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == controller));
        let parent = if v2_has { v2.to_path_buf() } else { v2.join(controller) };
        let dir = parent.join(format!("accel-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(Cgroup { dir })
    }

    fn set(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value).unwrap();
    }

    /// The file a process writes "0" to, to move itself into this cgroup.
    fn procs(&self) -> std::ffi::CString {
        std::ffi::CString::new(self.dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
            .unwrap()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Makes `command`'s process join the cgroup whose `cgroup.procs` is `procs` before it runs.
fn join_cgroup(command: &mut Command, procs: std::ffi::CString) {
    // SAFETY: open, write and close are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
            Ok(())
        });
    }
}

/// Sets a resource limit of `command`'s process before it runs.
fn limit(command: &mut Command, resource: libc::__rlimit_resource_t, value: u64) {
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes `command`'s process take no descriptor but stdin, stdout and stderr across exec: those
/// the test process itself inherited are not accel's (`flock FILE cargo test` passes its lock
/// on as descriptor 3).
fn only_stdio(command: &mut Command) {
    // SAFETY: close_range is a system call, async-signal-safe. CLOSE_RANGE_CLOEXEC (Linux
    // 5.11) marks descriptors 3 and up close-on-exec rather than closing them, so that std's
    // own pipe, which reports a failed exec, stays until then. Best effort: an older kernel
    // refuses, and the descriptors stay as they were.
    unsafe {
        command.pre_exec(|| {
            let _ = libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
}

/// Runs accel on `data`; the consumer starts reading once accel has taken `hold` bytes (with
/// nothing read from its output, they fill its buffer), then takes everything. Checks every
/// byte arrived and returns what accel said. Counted in bytes taken, not in accel's resident
/// memory: a debug build's code alone is some 8 MiB resident, as much as a hold.
fn through(mut command: Command, data: &[u8], hold: u64) -> (ExitStatus, String) {
    let mut child = piped(&mut command);
    let said = Said::collect(&mut child);
    let stdin = child.stdin.take().unwrap();
    let sent = data.to_vec();
    let taken = Arc::new(AtomicU64::new(0));
    let producer = thread::spawn({
        let taken = Arc::clone(&taken);
        move || {
            let mut stdin = stdin;
            for piece in sent.chunks(1 << 20) {
                stdin.write_all(piece)?;
                taken.fetch_add(piece.len() as u64, Ordering::Relaxed);
            }
            std::io::Result::Ok(())
        }
    });
    eventually(GENEROUS, "accel buffers what the consumer does not read", || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("accel ended before the consumer read: {status}: {}", said.all());
        }
        taken.load(Ordering::Relaxed) >= hold
    });
    let stdout = child.stdout.take().unwrap();
    let out = within(GENEROUS, move || drain(stdout)).expect("the output ended in good time");
    producer.join().unwrap().expect("the producer's writes");
    assert_same(&out, data, "through accel");
    said.ended(&mut child)
}

/// Whether every line of `stderr` is one of the memory warnings: `-m` held to a limit, and
/// memory refused later all the same (the kernel's count of address space includes what
/// the allocator and threads reserve after the start).
fn only_memory_warnings(stderr: &str, limit: &str) -> bool {
    let mut lines = stderr.lines();
    let first = lines.next().is_some_and(|l| l.starts_with(limit));
    let rest: Vec<&str> = lines.collect();
    first && rest.iter().all(|l| l.starts_with("accel: memory refused with ")) && rest.len() <= 1
}

// ----- output -----

/// The consumer exits early (`yes | accel | head -c 10`): accel dies of SIGPIPE, quietly, as
/// `cat` does, so that `pipefail` gives the same verdict with or without it.
fn output_consumer_exits_early(engine: &str) {
    let with_cat = sh("set -o pipefail; yes | cat | head -c 10 >/dev/null; echo $?");
    let out = sh(&format!(
        "set -o pipefail; yes | \"$ACCEL\" --engine {engine} | head -c 10 | od -c | head -1; \
         echo \"${{PIPESTATUS[*]}}\""
    ));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0000000   y  \\n   y  \\n   y  \\n   y  \\n   y  \\n"));
    assert_eq!(lines.next(), Some("141 141 0 0 0"), "statuses of yes, accel, head, ...");
    assert!(out.stderr.is_empty(), "said {:?}", String::from_utf8_lossy(&out.stderr));
    let verdict = sh(&format!(
        "set -o pipefail; yes | \"$ACCEL\" --engine {engine} | head -c 10 >/dev/null; echo $?"
    ));
    assert_eq!(verdict.stdout, with_cat.stdout, "pipefail verdict differs from cat's");
}

/// stdout is `/dev/full`: one line naming the cause and the counts, status 3.
fn output_dev_full(engine: &str) {
    let mut child = accel(engine, &[])
        .stdin(Stdio::piped())
        .stdout(File::create("/dev/full").unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The producer may be cut off when accel gives up; that is its EPIPE, not ours.
    let _ = feed(child.stdin.take().unwrap(), &pattern(1 << 20, 5), 4096);
    let (status, stderr) = ended(child);
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("accel: write to stdout: No space left on device; 0 bytes delivered, "),
        "{stderr}"
    );
    let (delivered, lost) = delivered_and_lost(&stderr);
    assert_eq!(delivered, 0);
    assert!(lost > 0 && lost <= 1 << 20, "{stderr}");
}

/// stdout is a file on a 1 MiB tmpfs that fills mid-stream: status 3, and the message's
/// count of bytes delivered is exactly what the file holds: the first bytes of the input.
/// (Regression: after falling back from splice, a partial write before ENOSPC went
/// uncounted.)
fn output_disk_fills_mid_stream(engine: &str) {
    if !require("root, to mount a tmpfs", is_root()) {
        return;
    }
    let tmpfs = Tmpfs::mount("1M", engine);
    let path = tmpfs.dir.path("out");
    let data = pattern(4 << 20, 21);
    let mut child = accel(engine, &[])
        .stdin(Stdio::piped())
        .stdout(File::create(&path).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = feed(child.stdin.take().unwrap(), &data, 100_000);
    let (status, stderr) = ended(child);
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.starts_with("accel: write to stdout: No space left on device; "), "{stderr}");
    let (delivered, lost) = delivered_and_lost(&stderr);
    let written = std::fs::read(&path).unwrap();
    assert_eq!(written.len() as u64, delivered, "the message counts what the file holds");
    assert_same(&written, &data[..written.len()], "the file holds the first bytes");
    assert!(delivered > 0 && lost > 0 && delivered + lost <= data.len() as u64, "{stderr}");
}

/// The consumer is killed while accel still has bytes for it: accel dies of SIGPIPE,
/// quietly, as `cat` would; the consumer got the first bytes, in order.
fn output_consumer_killed(engine: &str) {
    let dir = std::env::temp_dir();
    let got = dir.join(format!("accel-killed-{}-{engine}", std::process::id()));
    let (out_r, out_w) = pipe();
    // Reads exactly 1 MiB, then stays without reading, holding the pipe open until killed.
    let mut consumer = Command::new("bash")
        .arg("-c")
        .arg("head -c 1048576 > \"$0\"; exec sleep 600")
        .arg(&got)
        .stdin(Stdio::from(out_r))
        .spawn()
        .unwrap();
    let mut child = accel(engine, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let data = pattern(48 << 20, 22);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, 1 << 20));
    eventually(GENEROUS, "the consumer has read its MiB", || {
        std::fs::metadata(&got).is_ok_and(|m| m.len() == 1 << 20)
    });
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    let (status, stderr) = ended(child);
    let _ = producer.join();
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let received = std::fs::read(&got).unwrap();
    std::fs::remove_file(&got).unwrap();
    assert_same(&received, &data[..1 << 20], "what the consumer got before it was killed");
}

/// The consumer is stopped (SIGSTOP), then continued: accel goes on reading while it is
/// stopped, and every byte arrives.
fn output_consumer_stopped_and_continued(engine: &str) {
    let (mid_r, mid_w) = pipe();
    let mut consumer =
        Command::new("cat").stdin(Stdio::from(mid_r)).stdout(Stdio::piped()).spawn().unwrap();
    let mut child = accel(engine, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(mid_w))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut from_consumer = consumer.stdout.take().unwrap();
    let data = pattern(17 << 20, 23);
    stdin.write_all(&data[..1 << 20]).unwrap();
    let mut got = vec![0u8; 1 << 20];
    from_consumer.read_exact(&mut got).unwrap();
    kill_process(Pid::from_child(&consumer), Signal::STOP).unwrap();
    eventually(GENEROUS, "the consumer is stopped", || state(consumer.id()) == 'T');
    // 16 MiB more go in while the consumer cannot read a byte.
    let rest = data[1 << 20..].to_vec();
    let finished = within(GENEROUS, move || {
        stdin.write_all(&rest).unwrap();
        stdin
    });
    let stdin = finished.expect("the producer finished while the consumer was stopped");
    assert_eq!(state(consumer.id()), 'T', "and the consumer was stopped all along");
    kill_process(Pid::from_child(&consumer), Signal::CONT).unwrap();
    drop(stdin);
    got.extend(drain(from_consumer));
    assert!(consumer.wait().unwrap().success());
    let (status, stderr) = ended(child);
    assert!(status.success(), "{status}: {stderr}");
    assert_same(&got, &data, "after the consumer was continued");
}

/// stdout is closed (`accel >&-`): status 3 at once, and nothing is taken from the producer.
fn output_closed(engine: &str) {
    let out = sh(&format!(
        "printf data | {{ \"$ACCEL\" --engine {engine} >&-; echo \"status $?\" >&2; cat; }}"
    ));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: stdout is closed: there is nowhere to write\nstatus 3\n"
    );
    assert_eq!(out.stdout, b"data", "what accel did not read is still there for the next");
}

/// Someone else sets O_NONBLOCK on the shared pipes while accel runs (or before): accel
/// copes with EAGAIN on both sides, every byte arrives, and the flag is left as it was. strace
/// shows that it did meet EAGAIN: on stdin, read empty between the producer's bursts; on
/// stdout, which the consumer leaves full until accel has met it so.
fn output_nonblocking_set_by_a_third_party(engine: &str) {
    if !require("strace", has("strace", "-V")) {
        return;
    }
    let scratch = Scratch::new(&format!("nonblocking-{engine}"));
    for when in ["before", "mid-stream"] {
        let (stdin_r, stdin_w) = pipe();
        let (stdout_r, stdout_w) = pipe();
        let set_nonblocking = |fd: &OwnedFd| {
            let flags = rustix::fs::fcntl_getfl(fd).unwrap();
            rustix::fs::fcntl_setfl(fd, flags | OFlags::NONBLOCK).unwrap();
        };
        if when == "before" {
            set_nonblocking(&stdin_r);
            set_nonblocking(&stdout_w);
        }
        let trace = scratch.path(when);
        let mut child = Command::new("strace")
            .args(["-f", "-Z", "-e", "trace=read,readv,write,writev,splice", "-o"])
            .arg(&trace)
            .args([ACCEL, "--engine", engine, "-m", "256K"])
            .stdin(Stdio::from(stdin_r.try_clone().unwrap()))
            .stdout(Stdio::from(stdout_w.try_clone().unwrap()))
            .spawn()
            .unwrap();
        let data = pattern(6 << 20, 9);
        let sent = data.clone();
        let mut stdin_w = File::from(stdin_w);
        // Bursts with pauses; past 4 MiB (beyond what the consumer reads before it waits for a
        // full stdout), nothing more until accel has found stdin empty (EAGAIN): on a loaded
        // machine accel under strace may lag behind the pauses and never find it so.
        let log = trace.clone();
        let producer = thread::spawn(move || {
            for (at, piece) in sent.chunks(300_000).enumerate() {
                stdin_w.write_all(piece).unwrap();
                if at == (4 << 20) / 300_000 {
                    eventually(GENEROUS, "accel meets EAGAIN on stdin", || {
                        eagain(&log, Side::Input)
                    });
                }
                thread::sleep(Duration::from_millis(3));
            }
        });
        // Our copy of the write end goes as soon as the flag is set: were accel to end early,
        // the reader would see the end instead of waiting for ever.
        let mut stdout_w = Some(stdout_w).filter(|_| when != "before");
        let mut reader = File::from(stdout_r);
        let mut got = Vec::new();
        let mut buf = vec![0u8; 100_000];
        let mut flagged = when == "before";
        let mut met_full = false;
        loop {
            if !flagged && got.len() >= 1 << 20 {
                // The descriptions are shared with accel's descriptors.
                set_nonblocking(&stdin_r);
                set_nonblocking(&stdout_w.take().expect("our write end"));
                flagged = true;
            }
            if flagged && !met_full && got.len() >= 2 << 20 {
                // Read nothing until accel has found stdout full.
                eventually(GENEROUS, "accel meets EAGAIN on stdout", || {
                    eagain(&trace, Side::Output)
                });
                met_full = true;
            }
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
            if got.len() == data.len() {
                break;
            }
        }
        producer.join().unwrap();
        assert!(wait_within(&mut child, GENEROUS).success(), "O_NONBLOCK set {when}");
        assert_same(&got, &data, &format!("O_NONBLOCK set {when}"));
        assert!(met_full, "O_NONBLOCK set {when}: stdout was never full");
        assert!(eagain(&trace, Side::Input), "O_NONBLOCK set {when}: stdin never read empty");
        let after = rustix::fs::fcntl_getfl(&stdin_r).unwrap();
        assert!(after.contains(OFlags::NONBLOCK), "accel cleared the flag");
    }
}

/// Which of accel's standard descriptors a call was on.
#[derive(Clone, Copy)]
enum Side {
    Input,
    Output,
}

/// Whether the strace log `trace` (`-Z`: failed calls only) shows a call on stdin or stdout
/// that failed with EAGAIN: `read(0, ...`, `splice(0, ...`, `write(1, ...`, `splice(N, NULL,
/// 1, ...`.
fn eagain(trace: &Path, side: Side) -> bool {
    let log = std::fs::read_to_string(trace).unwrap_or_default();
    log.lines().filter(|line| line.contains("EAGAIN")).any(|line| {
        let Some((call, args)) = line.split_once('(') else { return false };
        let call = call.rsplit(' ').next().unwrap_or_default();
        let args: Vec<&str> = args.split(", ").collect();
        match (side, call) {
            (Side::Input, "read" | "readv" | "splice") => args[0] == "0",
            (Side::Output, "write" | "writev") => args[0] == "1",
            (Side::Output, "splice") => args.get(2) == Some(&"1"),
            _ => false,
        }
    })
}

/// stdout is a regular file, with and without O_APPEND: written at the shared offset (after
/// what is there) or appended.
fn output_file_with_and_without_append(engine: &str) {
    use std::io::Seek;
    for append in [false, true] {
        let path = std::env::temp_dir()
            .join(format!("accel-test-{}-{engine}-{append}", std::process::id()));
        std::fs::write(&path, b"already here\n").unwrap();
        let mut file = std::fs::OpenOptions::new().write(true).append(append).open(&path).unwrap();
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
        assert_same(&written, &[head, &data].concat(), &format!("append {append}"));
    }
}

/// `-o FIFO` that no reader opens: `--stall-timeout` covers the wait to open it (status 4,
/// naming the FIFO, nothing read; it waited for ever); a reader that comes gets every byte;
/// SIGINT ends the wait as it ends `cat`.
fn output_fifo_without_a_reader(engine: &str) {
    let dir = Scratch::new(&format!("fifo-{engine}"));
    let fifo = dir.fifo("f");
    let name = fifo.to_str().unwrap();
    let mut child = accel(engine, &["-o", name, "--stall-timeout", "1s"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"data");
    let (status, stderr) = ended(child);
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr,
        format!("accel: -o {name}: stalled: no reader opened it for 0:00:01; nothing was read\n")
    );
    drop(stdin);

    let data = pattern(3 << 20, 5);
    let mut child = accel(engine, &["-o", name, "--stall-timeout", "60s"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, 100_000));
    let reader = File::open(&fifo).unwrap();
    let got = within(GENEROUS, move || drain(reader)).expect("the FIFO's reader gets an end");
    assert!(wait_within(&mut child, GENEROUS).success());
    producer.join().unwrap().unwrap();
    assert_same(&got, &data, "through the FIFO");

    for timeout in [None, Some("60s")] {
        let mut args = vec!["-o", name];
        args.extend(timeout.iter().flat_map(|t| ["--stall-timeout", t]));
        let mut child = accel(engine, &args).stdin(Stdio::null()).spawn().unwrap();
        kill_process(Pid::from_child(&child), Signal::INT).unwrap();
        let status = wait_within(&mut child, GENEROUS);
        assert_eq!(status.signal(), Some(libc::SIGINT), "{timeout:?}: ended by SIGINT");
    }
}

// ----- input -----

/// The producer is killed mid-write: for accel that is a normal end of input. What was
/// written is delivered, in order, and accel exits 0.
fn input_producer_killed(engine: &str) {
    let (in_r, in_w) = pipe();
    let line = b"0123456789abcdef\n";
    let mut producer = Command::new("yes")
        .arg(std::str::from_utf8(&line[..16]).unwrap())
        .stdout(Stdio::from(in_w))
        .spawn()
        .unwrap();
    let mut child = accel(engine, &[])
        .stdin(Stdio::from(in_r))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = vec![0u8; 1 << 20];
    stdout.read_exact(&mut got).unwrap();
    producer.kill().unwrap();
    producer.wait().unwrap();
    got.extend(drain(stdout));
    let (status, stderr) = ended(child);
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let at = got.iter().enumerate().position(|(i, &b)| b != line[i % line.len()]);
    assert_eq!(at, None, "the output is what yes wrote, in order ({} bytes)", got.len());
}

/// stdin is a terminal whose other side goes away: reading fails with EIO. What was read is
/// delivered; status 1, with the count, as `cat` reports it.
fn input_terminal_hangs_up(engine: &str) {
    // SAFETY: plain libc calls on descriptors this test owns.
    let (master, slave) = unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0 && libc::grantpt(master) == 0 && libc::unlockpt(master) == 0);
        let mut name = [0 as libc::c_char; 64];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(slave >= 0);
        let mut raw: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave, &mut raw);
        libc::cfmakeraw(&mut raw);
        libc::tcsetattr(slave, libc::TCSANOW, &raw);
        use std::os::fd::FromRawFd;
        (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    };
    let mut child = accel(engine, &[])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut master = master;
    master.write_all(b"hello world\n").unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = [0u8; 12];
    stdout.read_exact(&mut got).unwrap();
    // Hung up while accel waits in `read`, which then fails with EIO; a read that starts only
    // after the hangup has completed finds end of file instead (the kernel's order).
    let pid = child.id();
    eventually(GENEROUS, "accel waits for terminal input", || {
        std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().any(|task| {
            let task = task.unwrap().path();
            let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
            let wchan = std::fs::read_to_string(task.join("wchan")).unwrap_or_default();
            comm.trim() == "accel-input" && wchan == "wait_woken"
        })
    });
    drop(master);
    let rest = drain(stdout);
    let (status, stderr) = ended(child);
    assert_eq!(&got, b"hello world\n");
    assert!(rest.is_empty());
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "accel: read from stdin: Input/output error; the 12 bytes read before it were delivered\n"
    );
}

/// stdin is closed (`accel <&-`): status 1 at once, never silently `/dev/null`.
fn input_closed(engine: &str) {
    let out = sh(&format!("\"$ACCEL\" --engine {engine} <&-; echo \"status $?\""));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "status 1\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: stdin is closed: there is nothing to read\n"
    );
}

/// stdin is a directory: the read error is reported, status 1.
fn input_directory(engine: &str) {
    let out = accel(engine, &[]).stdin(File::open("/").unwrap()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: read from stdin: Is a directory; the 0 bytes read before it were delivered\n"
    );
}

/// A packet-mode pipe (`pipe2(O_DIRECT)`) delivers one packet per read and drops what a
/// short read leaves: accel must never offer less than a packet, nor splice the packet marks
/// on. (Regression: 3000-byte records through `-m 1000` lost two thirds of the stream.)
fn input_packet_mode_pipe(engine: &str) {
    for args in [&["-m", "1000"][..], &[][..]] {
        let (read, write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::DIRECT | rustix::pipe::PipeFlags::CLOEXEC,
        )
        .expect("a packet-mode pipe");
        let child = accel(engine, args)
            .stdin(Stdio::from(read))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let data = pattern(3000 * 3000, 24);
        let sent = data.clone();
        // Records of 3000 bytes while the consumer reads nothing, so that they queue.
        let producer = thread::spawn(move || feed(File::from(write), &sent, 3000));
        let mut child = child;
        let stdout = child.stdout.take().unwrap();
        // The consumer reads in small pieces: a packet passed on would lose its tail here.
        let got = within(GENEROUS, move || {
            let mut reader = std::io::BufReader::with_capacity(100, stdout);
            let mut got = Vec::new();
            reader.read_to_end(&mut got).unwrap();
            got
        })
        .expect("the output ended");
        producer.join().unwrap().unwrap();
        let (status, stderr) = ended(child);
        assert!(status.success(), "{args:?}: {stderr}");
        assert_same(&got, &data, &format!("packet-mode pipe, {args:?}"));
    }
}

/// stdin and stdout are the same regular file (`accel < f >> f`): refused before anything is
/// read, as `cat` refuses it; the file is unchanged. (Regression: the file doubled.)
fn input_is_output(engine: &str) {
    let path = std::env::temp_dir().join(format!("accel-same-{}-{engine}", std::process::id()));
    std::fs::write(&path, b"abc\n").unwrap();
    let output = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let out = accel(engine, &[]).stdin(File::open(&path).unwrap()).stdout(output).output().unwrap();
    let after = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: stdin and stdout are the same file: input file is output file\n"
    );
    assert_eq!(after, b"abc\n");
}

// ----- accel itself -----

/// accel stopped by a job-control SIGTSTP, or by SIGSTOP, then continued: it stops (the
/// producer is held), goes on when continued, and nothing is lost.
fn accel_stopped_and_continued(engine: &str) {
    for stop in [Signal::TSTP, Signal::STOP] {
        let mut command = accel(engine, &[]);
        // A process group of its own whose parent (this test) is in another group of the same
        // session: not orphaned, so the kernel lets SIGTSTP stop it.
        command.process_group(0);
        let mut child = piped(&mut command);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let data = pattern(8 << 20, 25);
        stdin.write_all(&data[..1 << 20]).unwrap();
        let mut got = vec![0u8; 1 << 20];
        stdout.read_exact(&mut got).unwrap();
        kill_process(Pid::from_child(&child), stop).unwrap();
        eventually(GENEROUS, "accel is stopped", || state(child.id()) == 'T');
        kill_process(Pid::from_child(&child), Signal::CONT).unwrap();
        let rest = data[1 << 20..].to_vec();
        let producer = thread::spawn(move || feed(stdin, &rest, 64 << 10));
        got.extend(drain(stdout));
        producer.join().unwrap().unwrap();
        let (status, stderr) = ended(child);
        assert!(status.success(), "{stop:?}: {status}: {stderr}");
        assert!(stderr.is_empty(), "{stop:?}: {stderr}");
        assert_same(&got, &data, &format!("stopped by {stop:?} and continued"));
    }
}

/// SIGTSTP in an orphaned process group, where no shell is left to continue the job: the
/// kernel drops it, and accel goes on like `cat`. (Regression: accel stopped itself with
/// SIGSTOP and stayed stopped for good.)
fn accel_tstp_in_an_orphaned_group(engine: &str) {
    let mut command = accel(engine, &[]);
    // SAFETY: setsid is async-signal-safe. A new session: accel's group has no parent in
    // another group of its session, which is what makes it orphaned.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = piped(&mut command);
    let (mut stdin, stdout) = line_through(&mut child);
    kill_process(Pid::from_child(&child), Signal::TSTP).unwrap();
    // The report asked for next comes only once the signal thread has dealt with SIGTSTP, or
    // just before it does so: either way a stop would come before the data below passes.
    kill_process(Pid::from_child(&child), Signal::USR1).unwrap();
    let report = said_until(&mut child, "bottleneck");
    assert!(report.contains("bottleneck"), "{report}");
    // A stopped accel could pass on none of this.
    stdin.write_all(b"after\n").unwrap();
    drop(stdin);
    let rest = within(GENEROUS, move || drain(stdout)).expect("accel went on after SIGTSTP");
    let (status, stderr) = ended(child);
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(rest, b"after\n", "after the line that went through before");
}

/// A storm of SIGUSR1 while data moves: every byte arrives, and stderr holds only reports.
fn accel_sigusr1_storm(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let pid = Pid::from_child(&child);
    // Thousands of reports are far more than a pipe holds: read them as they come.
    let said = Said::collect(&mut child);
    let data = pattern(64 << 20, 26);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, 64 << 10));
    let stdout = child.stdout.take().unwrap();
    let consumer = thread::spawn(move || drain(stdout));
    let mut sent_signals = 0;
    while !producer.is_finished() && sent_signals < 5000 {
        kill_process(pid, Signal::USR1).unwrap();
        sent_signals += 1;
    }
    producer.join().unwrap().unwrap();
    let got = consumer.join().unwrap();
    let (status, stderr) = said.ended(&mut child);
    assert!(status.success(), "{status}");
    assert_same(&got, &data, "through a SIGUSR1 storm");
    assert!(sent_signals > 10, "the storm happened while data moved");
    for line in stderr.lines() {
        assert!(is_report_line(line), "not part of a report: {line:?}");
    }
}

/// Whether `line` belongs to a report so far (SIGUSR1).
fn is_report_line(line: &str) -> bool {
    REPORT_LABELS.iter().any(|l| line.starts_with(l)) || is_verdict_so_far(line)
}

/// So few descriptors allowed that no pool pipe, or not even the signal thread's pipe, can
/// be opened: accel either moves every byte (copying instead) or refuses to start, saying so,
/// with status 5 and nothing read.
fn accel_few_descriptors(engine: &str) {
    // Below 4 the dynamic loader itself cannot open a library: not accel's to handle.
    for allowed in 4..=8u64 {
        let (in_r, in_w) = pipe();
        let mut in_w = File::from(in_w);
        in_w.write_all(b"probe").unwrap();
        let mut command = accel(engine, &[]);
        only_stdio(&mut command);
        limit(&mut command, libc::RLIMIT_NOFILE, allowed);
        let mut child = command
            .stdin(Stdio::from(in_r.try_clone().unwrap()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(command);
        let mut stdout = child.stdout.take().unwrap();
        // Either the probe comes through (accel runs), or the output ends (it refused).
        let mut probe = Vec::new();
        (&mut stdout).take(5).read_to_end(&mut probe).unwrap();
        if probe.is_empty() {
            let (status, stderr) = ended(child);
            assert_eq!(status.code(), Some(5), "ulimit -n {allowed}: {status}: {stderr}");
            assert!(stderr.starts_with("accel: cannot start: "), "{allowed}: {stderr}");
            assert!(stderr.trim_end().ends_with("; nothing was read"), "{allowed}: {stderr}");
            assert_eq!(queued(&in_r), 5, "ulimit -n {allowed}: the probe is still unread");
        } else {
            drop(in_r);
            let data = pattern(24 << 20, 27);
            let sent = data.clone();
            let producer = thread::spawn(move || feed(in_w, &sent, 1 << 20));
            let got = drain(stdout);
            producer.join().unwrap().unwrap();
            let (status, stderr) = ended(child);
            assert!(status.success(), "ulimit -n {allowed}: {status}: {stderr}");
            assert_same(&[probe, got].concat(), &[&b"probe"[..], &data].concat(), "all of it");
        }
    }
}

/// The user's pipe quota is spent: the pool cannot grow, so accel copies instead, says so with
/// `--debug`, and never fails because of it.
fn accel_pipe_quota_spent(engine: &str) {
    if !require("root, to run accel as another user", is_root()) {
        return;
    }
    let _alone = AS_NOBODY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = std::env::temp_dir().join(format!("accel-quota-{}-{engine}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("summary.json");
    std::fs::write(&json, b"").unwrap();
    std::fs::set_permissions(&json, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    // `nobody` is bound by the per-user pipe quota: spend it on pipes that accel inherits and
    // keeps open.
    let mut command = accel_as_nobody(&dir, engine, || {
        let mut fds = [0; 2];
        for _ in 0..1024 {
            // SAFETY: pipe and fcntl are async-signal-safe.
            if unsafe {
                libc::pipe(fds.as_mut_ptr()) != 0
                    || libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 1 << 20) < 0
            } {
                break;
            }
        }
    });
    command.arg("--debug").arg(format!("--json={}", json.display()));
    let data = pattern(16 << 20, 7);
    let (status, stderr) = through(command, &data, 8 << 20);
    let summary = summary(&std::fs::read_to_string(&json).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(status.success(), "{stderr}");
    if engine != "copy" {
        assert!(
            stderr.contains("no pool pipes: the per-user pipe quota is exhausted; copying instead"),
            "{stderr}"
        );
    }
    assert_eq!(summary["tiers"]["pipes"], 0, "nothing went through pool pipes: {summary}");
}

/// The last line of NDJSON text, which must be the summary.
fn summary(ndjson: &str) -> serde_json::Value {
    let summary: serde_json::Value = serde_json::from_str(ndjson.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    summary
}

/// An address-space limit (`ulimit -v`) below `-m` when accel starts: accel keeps its buffer
/// under it, says so once, and loses nothing.
fn accel_address_space_limit(engine: &str) {
    let mut command = accel(engine, &["-m", "1G"]);
    limit(&mut command, libc::RLIMIT_AS, 256 << 20);
    let (status, stderr) = through(command, &pattern(300 << 20, 28), 32 << 20);
    assert!(status.success(), "{status}: {stderr}");
    let limit =
        "accel: -m 1 GiB is more than the address-space limit (ulimit -v) of 256 MiB allows";
    assert!(only_memory_warnings(&stderr, limit), "{stderr}");
}

/// Memory refused mid-burst (the address-space limit lowered under a running accel): the
/// buffer counts as full, the producer is held until the backlog drains, the user is told
/// once, and nothing is lost. (Regression: the refusal ended the run as a read error and the
/// rest of the stream was lost.)
fn accel_memory_refused_mid_stream(engine: &str) {
    let mut child = spawn_piped(engine, &["-m", "1G"]);
    let pid = child.id();
    let data = pattern(400 << 20, 29);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data[..1 << 20]).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = vec![0u8; 1 << 20];
    stdout.read_exact(&mut got).unwrap();
    refuse_memory_beyond(pid, 64 << 20);
    let rest = data[1 << 20..].to_vec();
    let producer = thread::spawn(move || feed(stdin, &rest, 1 << 20));
    // The consumer stalls until accel says it holds the producer back, then drains it all.
    let said = said_until(&mut child, "");
    assert!(
        said.starts_with("accel: memory refused with ")
            && said.trim_end().ends_with("; the producer waits while it drains"),
        "{said}"
    );
    got.extend(drain(stdout));
    producer.join().unwrap().unwrap();
    let (status, stderr) = ended(child);
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.is_empty(), "said only once: {stderr}");
    assert_same(&got, &data, "memory refused mid-stream");
}

/// From now on the kernel refuses process `pid` (a child of ours) more than `more` bytes
/// beyond what it maps already.
fn refuse_memory_beyond(pid: u32, more: u64) {
    let used = proc_status_kib(pid, "VmSize") << 10;
    let cap = libc::rlimit { rlim_cur: used + more, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: prlimit on a child of ours, reading nothing back.
    let set = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_AS, &cap, std::ptr::null_mut()) };
    assert_eq!(set, 0, "prlimit");
}

/// Memory refused mid-stream with less than an output block held (`--block-size 64M`): the
/// output takes a short block, says so once, and every byte arrives. (It waited for a whole
/// block for ever, while the input waited for the memory that the block held.)
fn accel_memory_refused_short_of_a_block(engine: &str) {
    let mut child = spawn_piped(engine, &["-m", "1G", "--block-size", "64M", "--json"]);
    let pid = child.id();
    let data = pattern(100 << 20, 30);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data[..1 << 20]).unwrap();
    let said = Said::collect(&mut child);
    // Read, by accel's own count: every thread is running, the block buffer mapped.
    eventually(GENEROUS, "accel reports the first MiB read", || {
        said.text().lines().any(|l| l.contains("\"bytes_in\":1048576"))
    });
    refuse_memory_beyond(pid, 16 << 20);
    let rest = data[1 << 20..].to_vec();
    let producer = thread::spawn(move || feed(stdin, &rest, 1 << 20));
    let stdout = child.stdout.take().unwrap();
    let Some(got) = within(GENEROUS, move || drain(stdout)) else {
        let _ = child.kill();
        panic!("no end within {GENEROUS:?}: {}", said.text());
    };
    producer.join().unwrap().unwrap();
    let (status, said) = said.ended(&mut child);
    assert!(status.success(), "{status}: {said}");
    assert_same(&got, &data, "memory refused short of a block");
    let ours: Vec<&str> = said.lines().filter(|l| l.starts_with("accel: ")).collect();
    assert_eq!(ours.len(), 2, "{said}");
    assert!(ours[0].starts_with("accel: memory refused with "), "{said}");
    assert!(
        ours[1].starts_with("accel: stdout: a short block of ")
            && ours[1]
                .ends_with(" bytes: memory was refused before a whole --block-size block was read"),
        "{said}"
    );
}

/// A memory cgroup limit below `-m`: accel keeps its buffer under it, says so once, and
/// loses nothing. (Regression: the kernel OOM-killed accel.)
fn accel_memory_cgroup_limit(engine: &str) {
    if !require("root, to make a cgroup", is_root()) {
        return;
    }
    let cgroup = Cgroup::new("memory", engine);
    if !require("a memory cgroup (v1 or v2)", cgroup.is_some()) {
        return;
    }
    let cgroup = cgroup.unwrap();
    let file =
        if cgroup.dir.join("memory.max").exists() { "memory.max" } else { "memory.limit_in_bytes" };
    cgroup.set(file, &(96u64 << 20).to_string());
    let mut command = accel(engine, &["-m", "1G"]);
    join_cgroup(&mut command, cgroup.procs());
    let (status, stderr) = through(command, &pattern(300 << 20, 30), 40 << 20);
    assert!(status.success(), "{status}: {stderr}");
    let limit = "accel: -m 1 GiB is more than the memory cgroup's limit of 96 MiB allows";
    assert!(only_memory_warnings(&stderr, limit), "{stderr}");
}

/// No thread to spare (a pids cgroup allowing 1 to 4 tasks): accel refuses to start, saying
/// so, status 5, nothing read; with 5 (main, signals, watcher, input, output), it runs, and
/// SIGTERM still ends it. (Regression: the signal thread failed to start, and SIGTERM was ignored for
/// good.)
fn accel_no_thread_to_spare(engine: &str) {
    if !require("root, to make a cgroup", is_root()) {
        return;
    }
    for allowed in [1, 2, 3, 4, 5] {
        let cgroup = Cgroup::new("pids", &format!("{engine}-{allowed}"));
        if !require("a pids cgroup (v1 or v2)", cgroup.is_some()) {
            return;
        }
        let cgroup = cgroup.unwrap();
        cgroup.set("pids.max", &allowed.to_string());
        let (in_r, in_w) = pipe();
        File::from(in_w.try_clone().unwrap()).write_all(b"probe").unwrap();
        let mut command = accel(engine, &[]);
        join_cgroup(&mut command, cgroup.procs());
        let child = command
            .stdin(Stdio::from(in_r.try_clone().unwrap()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if allowed < 5 {
            let (status, stderr) = ended(child);
            assert_eq!(status.code(), Some(5), "pids.max {allowed}: {stderr}");
            assert!(stderr.starts_with("accel: cannot start: "), "{stderr}");
            assert!(stderr.trim_end().ends_with("; nothing was read"), "{stderr}");
            assert_eq!(queued(&in_r), 5, "the probe is still unread");
        } else {
            let mut child = child;
            let mut got = [0u8; 5];
            child.stdout.take().unwrap().read_exact(&mut got).unwrap();
            assert_eq!(&got, b"probe");
            kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
            let status = wait_within(&mut child, GENEROUS);
            assert_eq!(status.signal(), Some(libc::SIGTERM), "pids.max 5: {status}");
        }
        drop(in_w);
    }
}

/// Signals ignored when accel starts stay ignored, as with every filter (`nohup accel`, a
/// script's background job): accel goes on and delivers everything. (Regression: SIGHUP
/// killed accel under nohup.)
fn accel_ignored_signals_stay_ignored(engine: &str) {
    let mut command = accel(engine, &[]);
    // SAFETY: signal() with SIG_IGN is async-signal-safe, and exec keeps ignored signals.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                libc::signal(signal, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let mut child = piped(&mut command);
    let (mut stdin, stdout) = line_through(&mut child);
    // Left ignored, not caught: the kernel discards them, so accel cannot die of them.
    for signal in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
        assert!(signal_set(child.id(), "SigIgn") & (1 << (signal - 1)) != 0, "{signal} ignored");
        assert!(signal_set(child.id(), "SigCgt") & (1 << (signal - 1)) == 0, "{signal} caught");
    }
    for signal in [Signal::HUP, Signal::INT, Signal::TERM] {
        kill_process(Pid::from_child(&child), signal).unwrap();
    }
    stdin.write_all(b"after\n").unwrap();
    drop(stdin);
    let rest = drain(stdout);
    let (status, stderr) = ended(child);
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(rest, b"after\n", "after the line that went through before");
}

/// SIGPIPE ignored when accel starts (`trap '' PIPE`): a vanished consumer is then an
/// ordinary write error, as `cat` reports it ("Broken pipe"), status 3.
fn accel_ignored_sigpipe_reports_broken_pipe(engine: &str) {
    let out = sh(&format!(
        "trap '' PIPE; yes | \"$ACCEL\" --engine {engine} | head -c 10 >/dev/null; \
         echo \"${{PIPESTATUS[1]}}\""
    ));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ours: Vec<&str> = stderr.lines().filter(|l| l.starts_with("accel:")).collect();
    assert_eq!(ours.len(), 1, "{stderr}");
    assert!(ours[0].starts_with("accel: write to stdout: Broken pipe; "), "{stderr}");
}

/// accel `args` fed 8 MiB with `ACCEL_TEST_PANIC=panic` (debug builds: that thread panics
/// past that many bytes): its status, what its stdout got, and what it said. A hang fails the
/// test.
fn with_a_panic(engine: &str, panic: &str, args: &[&str]) -> (ExitStatus, Vec<u8>, String) {
    let mut child = piped(accel(engine, args).env("ACCEL_TEST_PANIC", panic));
    let said = Said::collect(&mut child);
    let stdin = child.stdin.take().unwrap();
    // All 8 MiB go into the buffer before the consumer reads a byte: the splice engine would
    // otherwise move them straight from stdin to stdout, past the output thread, which then
    // never takes the bytes it is to panic after.
    let fed = within(GENEROUS, move || feed(stdin, &pattern(8 << 20, 41), 1 << 20));
    if !matches!(fed, Some(Ok(()))) {
        let _ = child.kill();
        panic!("the producer was not done within {GENEROUS:?}: {fed:?}: {}", said.text());
    }
    said.output_and_end(&mut child)
}

/// The output thread panics (a bug, injected): accel ends at once with status 8, naming the
/// output and what it got, which is what arrived.
fn accel_output_thread_panics(engine: &str) {
    if !require("a debug build (ACCEL_TEST_PANIC)", cfg!(debug_assertions)) {
        return;
    }
    let (status, out, stderr) = with_a_panic(engine, "output:1048576", &[]);
    assert_eq!(status.code(), Some(8), "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with("accel: stdout: ")).expect(&stderr);
    assert!(
        line.starts_with(
            "accel: stdout: its thread failed, a bug in accel (ACCEL_TEST_PANIC=output:1048576); "
        ),
        "{stderr}"
    );
    let (delivered, _) = delivered_and_lost(line);
    assert!(delivered > 1 << 20, "{line}");
    assert_same(&out, &pattern(8 << 20, 41)[..delivered as usize], "what was delivered");
}

/// A hash thread panics (a bug, injected): the outputs go on and get everything; accel ends
/// with status 8, naming the hash, and prints no digest.
fn accel_hash_thread_panics(engine: &str) {
    if !require("a debug build (ACCEL_TEST_PANIC)", cfg!(debug_assertions)) {
        return;
    }
    let (status, out, stderr) = with_a_panic(engine, "hash:1048576", &["--hash", "sha256"]);
    assert_eq!(status.code(), Some(8), "{stderr}");
    assert_same(&out, &pattern(8 << 20, 41), "the output");
    let ours: Vec<&str> = stderr.lines().filter(|l| l.starts_with("accel: ")).collect();
    assert_eq!(
        ours,
        [
            "accel: --hash sha256: its thread failed, a bug in accel \
             (ACCEL_TEST_PANIC=hash:1048576); no digest, the outputs go on",
            "accel: --hash sha256: no digest (its thread failed); all 8 MiB (8388608 bytes) read \
             were delivered"
        ],
        "{stderr}"
    );
    assert!(!stderr.contains("  -"), "no hash line: {stderr}");
}

// ----- the control socket -----

/// Clients that connect to the control socket and say nothing (100 of them, each of which
/// accel waits on for up to 2 s) while the producer stalls: the watchdog still ends the run
/// in time, status 4, long before accel could have waited on them all (200 s).
#[test]
fn control_clients_that_say_nothing() {
    let runtime = Scratch::new("control-silent");
    let (mut child, socket) = with_socket_in(&runtime, accel("auto", &["--stall-timeout", "2s"]));
    let said = Said::collect(&mut child);
    let _silent: Vec<_> =
        (0..100).map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap()).collect();
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(4), "{said}");
    assert!(said.starts_with("accel: stalled: no input from stdin for "), "{said}");
}

/// `accel -R PID` finds what it must not trust where it looks (`/tmp/accel-UID/PID.sock`): a
/// directory another user (`nobody`) made before this user ever ran accel, a socket another
/// user made, a listener that is not process PID. It refuses, saying why, status 1, without
/// sending a thing; nothing the peer would say is printed.
#[test]
fn remote_refuses_a_socket_it_cannot_trust() {
    use std::os::unix::fs::{PermissionsExt, chown};
    if !require("root, to make files of another user", is_root()) {
        return;
    }
    let answer: &[u8] = b"ok\nreport so far\n";
    let pid = std::process::id();
    // A directory nobody made, 0700, with a socket in it.
    let tmp = Scratch::new("control-untrusted-dir");
    let dir = tmp.dir().join("accel-0");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
    let theirs = dir.join(format!("{pid}.sock"));
    let listener = fake_server(&theirs, answer);
    chown(&theirs, Some(65534), Some(65534)).unwrap();
    chown(&dir, Some(65534), Some(65534)).unwrap();
    let why = format!("{} is not a directory only this user may enter", dir.display());
    let mut cases = vec![(tmp, pid, why, listener)];
    // This user's directory, but a socket nobody made.
    let tmp = Scratch::new("control-untrusted-socket");
    let dir = root_control_dir(&tmp);
    let theirs = dir.join(format!("{pid}.sock"));
    let listener = fake_server(&theirs, answer);
    chown(&theirs, Some(65534), Some(65534)).unwrap();
    let why = format!("{} is not a socket of this user", theirs.display());
    cases.push((tmp, pid, why, listener));
    // This user's directory and socket, but the listener is not process PID.
    let tmp = Scratch::new("control-untrusted-peer");
    let dir = root_control_dir(&tmp);
    let other = 4_000_000 + pid % 100_000;
    let listener = fake_server(&dir.join(format!("{other}.sock")), answer);
    let why = format!("the socket's listener is process {pid}, not {other}");
    cases.push((tmp, other, why, listener));
    for (tmp, pid, why, _listener) in &cases {
        let out = remote(tmp.dir(), *pid, &["-r", "5M"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{why}: {stderr}");
        assert_eq!(stderr, format!("accel: -R {pid}: {why}; not talking to it\n"));
    }
}

// ----- sizes -----

/// `-m 1`: a page is the least accel holds and moves, so a tiny buffer still moves data at a
/// sane speed. (Regression: one thread handoff per byte, 14 KiB/s.)
fn size_smallest_buffer(engine: &str) {
    let data = pattern(8 << 20, 31);
    let (status, stderr) = through(accel(engine, &["-m", "1"]), &data, 0);
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// `-m 0` means no buffer at all: a usage error naming the cause, status 2.
fn size_zero(engine: &str) {
    let out = accel(engine, &["-m", "0"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: -m 0: too small: at least 1 B is needed\n"
    );
}

/// Absurd sizes (`-m 1T` on a smaller machine, `-m` near 2^64): held to what the machine can
/// have, said once, and nothing lost. (Regression: `-m 18446744073709551615` panicked.)
fn size_absurd(engine: &str) {
    for size in ["1T", "18446744073709551615"] {
        let data = pattern(4 << 20, 32);
        let (status, stderr) = through(accel(engine, &["-m", size]), &data, 0);
        assert!(status.success(), "-m {size}: {status}: {stderr}");
        assert!(stderr.lines().count() <= 1, "-m {size}: {stderr}");
        if !stderr.is_empty() {
            assert!(stderr.contains(" allows; at most "), "-m {size}: {stderr}");
        }
    }
}

/// Empty and one-byte inputs pass as they are, quietly.
fn size_empty_and_one_byte(engine: &str) {
    for data in [&b""[..], b"x"] {
        let (status, stderr) = through(accel(engine, &[]), data, 0);
        assert!(status.success() && stderr.is_empty(), "{} bytes: {stderr}", data.len());
    }
}

/// A producer writing one byte at a time, for megabytes.
fn size_one_byte_writes(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let data = pattern(2 << 20, 33);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || {
        let mut stdin = stdin;
        for byte in sent.chunks(1) {
            stdin.write_all(byte).unwrap();
        }
    });
    let got = drain(child.stdout.take().unwrap());
    producer.join().unwrap();
    let (status, stderr) = ended(child);
    assert!(status.success(), "{stderr}");
    assert_same(&got, &data, "one-byte writes");
}

/// A consumer reading one byte at a time, for megabytes.
fn size_one_byte_reads(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let data = pattern(2 << 20, 34);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, 1 << 20));
    let mut stdout = child.stdout.take().unwrap();
    let mut got = Vec::with_capacity(data.len());
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 {
        got.push(byte[0]);
    }
    producer.join().unwrap().unwrap();
    let (status, stderr) = ended(child);
    assert!(status.success(), "{stderr}");
    assert_same(&got, &data, "one-byte reads");
}

per_engine!(
    output_consumer_exits_early,
    output_dev_full,
    output_disk_fills_mid_stream,
    output_consumer_killed,
    output_consumer_stopped_and_continued,
    output_closed,
    output_nonblocking_set_by_a_third_party,
    output_file_with_and_without_append,
    output_fifo_without_a_reader,
    input_producer_killed,
    input_terminal_hangs_up,
    input_closed,
    input_directory,
    input_packet_mode_pipe,
    input_is_output,
    accel_stopped_and_continued,
    accel_tstp_in_an_orphaned_group,
    accel_sigusr1_storm,
    accel_few_descriptors,
    accel_pipe_quota_spent,
    accel_address_space_limit,
    accel_memory_refused_mid_stream,
    accel_memory_refused_short_of_a_block,
    accel_memory_cgroup_limit,
    accel_no_thread_to_spare,
    accel_ignored_signals_stay_ignored,
    accel_ignored_sigpipe_reports_broken_pipe,
    accel_output_thread_panics,
    accel_hash_thread_panics,
    size_smallest_buffer,
    size_zero,
    size_absurd,
    size_empty_and_one_byte,
    size_one_byte_writes,
    size_one_byte_reads,
);
