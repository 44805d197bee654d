//! Beyond RAM (`--spill DIR`): byte-exact through memory and disk, a full disk holds the
//! producer, the disk is given back as the backlog drains, memory stays bounded, a read-back
//! error is told, and a DIR where spilling is not safe is refused before anything is read.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use crate::util::*;

const MIB: usize = 1 << 20;

/// The spill file accel `pid` holds in `dir` (an unnamed file: `/proc/PID/fd/N` shows
/// `DIR/#INODE (deleted)`), and the disk it takes now, in bytes.
fn spill_disk(pid: u32, dir: &Path) -> Option<u64> {
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()? {
        let path = entry.ok()?.path();
        let target = std::fs::read_link(&path).ok()?;
        if target.starts_with(dir) {
            return Some(std::fs::metadata(&path).ok()?.blocks() * 512);
        }
    }
    None
}

/// Random stalls and bursts through a small memory buffer and a spill: every byte, in order.
fn every_byte_through_memory_and_disk(engine: &str) {
    let dir = Scratch::new(&format!("spill-exact-{engine}"));
    let strategy = (
        (2 * MIB)..(24 * MIB),
        prop_oneof![Just(1usize), 100usize..5000, (64usize << 10)..(2 * MIB)],
        0u64..30,
        (64usize << 10)..(4 * MIB),
        any::<u64>(),
    );
    let name = format!("spill::every_byte_through_memory_and_disk::{engine}");
    run_seeded(&name, 6, strategy, |(size, write_size, stall_ms, burst, seed)| {
        let write_size = write_size.max(size / 20_000);
        let data = pattern(size, seed);
        let mut child = spawn_piped(engine, &["-m", "1M", "--spill", dir.arg()]);
        let stdin = child.stdin.take().unwrap();
        let sent = data.clone();
        let producer = thread::spawn(move || feed(stdin, &sent, write_size));
        let mut stdout = child.stdout.take().unwrap();
        let mut got = Vec::with_capacity(size);
        let mut buf = vec![0u8; burst];
        loop {
            thread::sleep(Duration::from_millis(stall_ms));
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        producer.join().unwrap().unwrap();
        let (status, stderr) = ended(child);
        prop_assert!(status.success(), "{}", stderr);
        let at = got.iter().zip(&data).position(|(a, b)| a != b);
        prop_assert!(got == data, "bytes differ from {:?} ({} of {})", at, got.len(), data.len());
        Ok(())
    });
}

/// Feeds `data` to `child` (stdin, stdout, stderr piped) while its consumer waits for accel's
/// first message, which `check` looks at; the producer must be held by then. Then the consumer
/// takes everything: every byte arrives, accel says nothing more, and ends well.
fn told_then_drained(mut child: Child, data: Vec<u8>, check: impl FnOnce(&str)) {
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, MIB));
    let said = said_until(&mut child, "");
    check(&said);
    assert!(!producer.is_finished(), "the producer is held, not told to go away");
    let got = drain(child.stdout.take().unwrap());
    producer.join().unwrap().unwrap();
    let (status, rest) = ended(child);
    assert!(status.success(), "{rest}");
    assert!(rest.is_empty(), "said once: {rest}");
    assert_same(&got, &data, "every byte");
}

/// The spill's disk fills (a 16 MiB tmpfs) under a 64 MiB burst while the consumer waits:
/// accel says so once and holds the producer; when the consumer reads, every byte arrives.
fn a_full_disk_holds_the_producer(engine: &str) {
    if !require("root, to mount a tmpfs", is_root()) {
        return;
    }
    let tmpfs = Tmpfs::mount("16M", &format!("spill-full-{engine}"));
    let dir = &tmpfs.dir;
    let child = spawn_piped(engine, &["-m", "1M", "--spill", dir.arg(), "--spill-size", "1T"]);
    told_then_drained(child, pattern(64 * MIB, 61), |said| {
        assert!(
            said.starts_with(&format!("accel: the spill in {} is full with ", dir.arg()))
                && said.trim_end().ends_with("; the producer waits while it drains"),
            "{said}"
        );
    });
}

/// While the consumer waits, the spilled bytes take disk; once it has read them (the
/// producer still connected), the disk is given back: all of it but the window (8 MiB) the
/// producer still fills, which a hole punched part-way could corrupt (see `SpillFile`).
fn the_disk_is_given_back(engine: &str) {
    let dir = Scratch::new(&format!("spill-back-{engine}"));
    let mut child = spawn_piped(engine, &["-m", "1M", "--spill", dir.arg()]);
    let pid = child.id();
    let data = pattern(24 * MIB, 62);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data).unwrap();
    eventually(GENEROUS, "the spill holds most of it on disk", || {
        spill_disk(pid, dir.dir()).is_some_and(|bytes| bytes >= 16 * MIB as u64)
    });
    let mut got = vec![0u8; data.len()];
    child.stdout.take().unwrap().read_exact(&mut got).unwrap();
    assert_same(&got, &data, "spilled and read back");
    eventually(GENEROUS, "the disk is given back", || {
        spill_disk(pid, dir.dir()).is_some_and(|bytes| bytes <= 8 * MIB as u64)
    });
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// 1 GiB waits on disk behind `-m 8M` and accel's resident memory stays within the buffer and
/// a few MiB; then every byte arrives (checked by a checksum at both ends).
fn memory_stays_bounded_with_a_gib_on_disk(engine: &str) {
    let dir = Scratch::new(&format!("spill-rss-{engine}"));
    let mut child = spawn_piped(engine, &["-m", "8M", "--spill", dir.arg()]);
    let pid = child.id();
    let block = pattern(MIB, 63);
    let mut stdin = child.stdin.take().unwrap();
    let producer = thread::spawn(move || {
        let mut hash = Xxh3::new();
        for i in 0..1024u32 {
            let mut piece = block.clone();
            piece[..4].copy_from_slice(&i.to_le_bytes());
            stdin.write_all(&piece).unwrap();
            hash.update(&piece);
        }
        hash.digest()
    });
    eventually(GENEROUS, "a GiB is in", || producer.is_finished());
    let rss = proc_status_kib(pid, "VmRSS") << 10;
    assert!(rss <= (8 + 24) * MIB as u64, "{} MiB resident with 1 GiB spilled", rss >> 20);
    let mut stdout = child.stdout.take().unwrap();
    let mut hash = Xxh3::new();
    let mut buf = vec![0u8; MIB];
    let mut total = 0;
    while let Ok(n @ 1..) = stdout.read(&mut buf) {
        hash.update(&buf[..n]);
        total += n;
    }
    assert_eq!(total, 1024 * MIB);
    assert_eq!(hash.digest(), producer.join().unwrap(), "checksums at both ends");
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// What accel did with a failing spill: 24 MiB spilled behind `-m 1M` on their way to
/// `-o DIR/out` at 8 MiB/s, with `filter` (see [`fail_with_eio`]) failing chosen calls.
struct FailedSpill {
    dir: Scratch,
    status: std::process::ExitStatus,
    stderr: String,
    data: Vec<u8>,
    written: Vec<u8>,
}

fn through_a_failing_spill(
    engine: &str,
    name: &str,
    filter: Vec<libc::sock_filter>,
) -> FailedSpill {
    let dir = Scratch::new(&format!("spill-{name}-{engine}"));
    let out = dir.dir().join("out");
    let mut command = accel(engine, &["-m", "1M", "--spill", dir.arg(), "-r", "8M", "-o"]);
    command.arg(&out);
    fail_with_eio(&mut command, filter);
    let mut child: Child = command.stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let said = Said::collect(&mut child);
    let data = pattern(24 * MIB, 64);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, MIB));
    let status = wait_within(&mut child, GENEROUS);
    let _ = producer.join();
    let written = std::fs::read(&out).unwrap();
    FailedSpill { dir, status, stderr: said.all(), data, written }
}

/// The bytes delivered by a message `...; D delivered to OUT, L read but lost` that starts
/// with `prefix`, found in `stderr`.
#[track_caller]
fn delivered_after(stderr: &str, prefix: &str) -> usize {
    let message = stderr.lines().find(|l| l.starts_with(prefix));
    let message = message.unwrap_or_else(|| panic!("no {prefix:?} in {stderr}"));
    let counts = &message[prefix.len()..];
    let lost = bytes_before(counts, " read but lost");
    assert!(lost > 0, "{message}");
    bytes_before(counts, " delivered to ") as usize
}

/// Spilled bytes that cannot be read back (EIO: every `pread` made to fail, as a dying disk
/// would): a clear message naming the spill's directory, what the output got and what was
/// lost, status 7; the output holds exactly what was said.
fn a_read_back_error_is_told(engine: &str) {
    // A pread64 of a page or more fails with EIO; everything else goes through (the dynamic
    // loader's small reads of library headers, say).
    let count_low_word = ARGS + 2 * 8;
    let filter = vec![
        op(LOAD, 0, 0, NR),
        op(JEQ, 0, 3, libc::SYS_pread64 as u32),
        op(LOAD, 0, 0, count_low_word),
        op(JGE, 0, 1, 4096),
        op(RET, 0, 0, EIO),
        op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let failed = through_a_failing_spill(engine, "eio", filter);
    assert_eq!(failed.status.code(), Some(7), "{}", failed.stderr);
    let prefix =
        format!("accel: read back from the spill in {}: Input/output error; ", failed.dir.arg());
    let delivered = delivered_after(&failed.stderr, &prefix);
    assert_eq!(failed.written.len(), delivered, "the message says what the output holds");
}

// A seccomp filter, to make chosen system calls fail with EIO as a dying disk would.
const LOAD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;
const EIO: u32 = libc::SECCOMP_RET_ERRNO | libc::EIO as u32;
/// Offsets in `seccomp_data`: the call's number, and its first argument (8 bytes each).
const NR: u32 = 0;
const ARGS: u32 = 16;

fn op(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt, jf, k }
}

/// Installs `filter` in the child `command` starts, before it runs accel.
fn fail_with_eio(command: &mut Command, filter: Vec<libc::sock_filter>) {
    // SAFETY: prctl with a filter that lives in this child's copy of the address space.
    unsafe {
        command.pre_exec(move || {
            let program =
                libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &program) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The spill file cannot be written (EIO on every write into it: `pwrite64`, and `splice`
/// with an output offset): accel says so once, spills no more, and holds the producer while
/// memory drains; every byte arrives, status 0.
fn a_write_error_loses_nothing(engine: &str) {
    let dir = Scratch::new(&format!("spill-weio-{engine}"));
    let mut command = accel(engine, &["-m", "1M", "--spill", dir.arg()]);
    let off_out = ARGS + 3 * 8;
    fail_with_eio(
        &mut command,
        vec![
            op(LOAD, 0, 0, NR),
            op(JEQ, 5, 0, libc::SYS_pwrite64 as u32),
            op(JEQ, 0, 5, libc::SYS_splice as u32),
            op(LOAD, 0, 0, off_out),
            op(JEQ, 0, 2, 0),
            op(LOAD, 0, 0, off_out + 4),
            op(JEQ, 1, 0, 0),
            op(RET, 0, 0, EIO),
            op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        ],
    );
    let child = piped(&mut command);
    let expected = format!(
        "accel: write to the spill in {}: Input/output error; spilling no more, the producer \
         waits while memory drains (nothing is lost)\n",
        dir.arg()
    );
    told_then_drained(child, pattern(24 * MIB, 65), |said| assert_eq!(said, expected));
}

/// The spill file's write-back fails (EIO from every `sync_file_range`, as a dying disk
/// gives it): pages it drops from the cache would read back as the zeros of the reserved
/// space, so accel says so at once and spills no more, and what it cannot trust to read back
/// is lost, said: status 7, and the output holds exactly the bytes delivered, each right.
fn a_write_back_error_is_told(engine: &str) {
    let filter = vec![
        op(LOAD, 0, 0, NR),
        op(JEQ, 0, 1, libc::SYS_sync_file_range as u32),
        op(RET, 0, 0, EIO),
        op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let failed = through_a_failing_spill(engine, "wb", filter);
    let (dir, stderr) = (failed.dir.arg(), &failed.stderr);
    assert_eq!(failed.status.code(), Some(7), "{stderr}");
    let warning = format!(
        "accel: write back to the spill in {dir}: Input/output error; spilling no more, and \
         what it holds that is not on disk cannot be read back"
    );
    assert_eq!(stderr.lines().filter(|l| *l == warning).count(), 1, "{stderr}");
    let prefix = format!(
        "accel: read back from the spill in {dir}: written back with an error (Input/output \
         error); "
    );
    let delivered = delivered_after(stderr, &prefix);
    assert_eq!(failed.written.len(), delivered, "the message says what the output holds");
    assert_same(&failed.written, &failed.data[..delivered], "what was delivered");
}

/// A DIR where spilling is not safe is refused before anything is read, status 2: missing,
/// not a directory, not writable, a file system without unnamed files.
fn a_bad_dir_is_refused(engine: &str) {
    let cases = [
        ("/no/such/dir", "accel: --spill /no/such/dir: No such file or directory"),
        ("/etc/passwd", "accel: --spill /etc/passwd: not a directory"),
        (
            "/proc",
            "accel: --spill /proc: its file system cannot make unnamed files (O_TMPFILE): \
             Operation not supported",
        ),
    ];
    for (dir, message) in cases {
        let out = sh(&format!(
            "printf data | {{ \"$ACCEL\" --engine {engine} --spill {dir}; echo \"status $?\"; cat; }}"
        ));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "status 2\ndata", "{dir}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{message}\n"), "{dir}");
    }
    if !require("root, to run accel as nobody", is_root()) {
        return;
    }
    let dir = Scratch::new(&format!("spill-unwritable-{engine}"));
    let locked = dir.dir().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let message = format!("accel: --spill {}: Permission denied", locked.display());
    refused_as_nobody(dir.dir(), engine, &["--spill", locked.to_str().unwrap()], &message);
}

per_engine!(
    every_byte_through_memory_and_disk,
    a_full_disk_holds_the_producer,
    the_disk_is_given_back,
    memory_stays_bounded_with_a_gib_on_disk,
    a_read_back_error_is_told,
    a_write_error_loses_nothing,
    a_write_back_error_is_told,
    a_bad_dir_is_refused,
);
