//! Files at either end, several outputs at their own pace, stream hashes, and what a failing
//! output does to the others (`--output-error`).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;

use crate::util::*;

fn arg(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// Reads what a FIFO output gets, on a thread, pausing as `pause` says after each read.
fn read_fifo(
    path: PathBuf,
    pause: impl Fn(usize) -> Duration + Send + 'static,
) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut fifo = File::open(path).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 256 << 10];
        for reads in 0.. {
            let n = fifo.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            thread::sleep(pause(reads));
        }
        got
    })
}

/// Three outputs (stdout and two FIFOs), each stalling at random: every one gets every byte,
/// in order.
fn every_output_gets_every_byte(engine: &str) {
    let strategy = (1usize..(6 << 20), any::<u64>(), [0u64..4, 0u64..4, 0u64..4]);
    let name = format!("outputs::every_output_gets_every_byte::{engine}");
    run_seeded(&name, 6, strategy, |(size, seed, stalls)| {
        let dir = Scratch::new(&format!("out-three-{engine}-{seed}"));
        let (a, b) = (dir.fifo("a"), dir.fifo("b"));
        let mut child =
            spawn_piped(engine, &["-m", "2M", "-o", "-", "-o", &arg(&a), "-o", &arg(&b)]);
        // Every 7th read stalls a few milliseconds, differently for each output.
        let stall = move |which: usize| {
            move |reads: usize| {
                Duration::from_millis(if reads % 7 == 0 { stalls[which] } else { 0 })
            }
        };
        let (got_a, got_b) = (read_fifo(a, stall(1)), read_fifo(b, stall(2)));
        let data = pattern(size, seed);
        let stdin = child.stdin.take().unwrap();
        let sent = data.clone();
        let producer = thread::spawn(move || feed(stdin, &sent, 100_000));
        let mut stdout = child.stdout.take().unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        for reads in 0.. {
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            thread::sleep(stall(0)(reads));
        }
        producer.join().unwrap().unwrap();
        let status = wait_within(&mut child, GENEROUS);
        prop_assert!(status.success(), "{}", status);
        prop_assert!(got == data, "stdout differs");
        prop_assert!(got_a.join().unwrap() == data, "output a differs");
        prop_assert!(got_b.join().unwrap() == data, "output b differs");
        Ok(())
    });
}

/// A fast output has every byte, and its end, before a stalled one reads its first: outputs
/// are not in lockstep (within the buffer), and one that has everything is closed at once.
fn a_fast_output_is_not_paced_by_a_stalled_one(engine: &str) {
    let dir = Scratch::new(&format!("out-pace-{engine}"));
    let slow = dir.fifo("slow");
    let mut child = spawn_piped(engine, &["-o", "-", "-o", &arg(&slow)]);
    // The slow output is opened (so accel can start) but not read.
    let slow_reader = File::open(&slow).unwrap();
    let data = pattern(12 << 20, 41);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    let producer = thread::spawn(move || feed(stdin, &sent, 1 << 20));
    let mut stdout = child.stdout.take().unwrap();
    let got = within(GENEROUS, move || {
        let mut fast = Vec::new();
        stdout.read_to_end(&mut fast).map(|_| fast)
    })
    .expect("the fast output got everything and its end while the slow one read nothing");
    assert_same(&got.unwrap(), &data, "the fast output");
    // Only now does the slow one read its first byte.
    let slow_got = drain(slow_reader);
    assert_same(&slow_got, &data, "the slow output");
    producer.join().unwrap().unwrap();
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// An existing file is refused before anything is read, naming it and how to overwrite; `-f`
/// overwrites it, `-a` appends to it.
fn no_clobber_force_append(engine: &str) {
    let dir = Scratch::new(&format!("out-clobber-{engine}"));
    let file = dir.path("out");
    std::fs::write(&file, b"precious\n").unwrap();
    let out = sh(&format!(
        "printf data | {{ \"$ACCEL\" --engine {engine} -o '{}'; echo \"status $?\"; cat; }}",
        file.display()
    ));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "status 2\ndata", "nothing was read");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "accel: -o {}: the file exists; -f overwrites it, -a appends to it\n",
            file.display()
        )
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"precious\n");
    for (flag, expected) in [("-a", &b"precious\nmore\n"[..]), ("-f", &b"more\n"[..])] {
        let out = accel(engine, &[flag, "-o", &arg(&file)])
            .stdin(File::open(write_temp(&dir, "more\n")).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{flag}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read(&file).unwrap(), expected, "{flag}");
    }
    // A file that does not exist is created; a device is opened as it is.
    let new = dir.path("new");
    let out = accel(engine, &["-o", &arg(&new), "-o", "/dev/null"])
        .stdin(File::open(write_temp(&dir, "fresh\n")).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&new).unwrap(), b"fresh\n");
}

/// A file in `dir` holding `text`, to feed accel's stdin from.
fn write_temp(dir: &Scratch, text: &str) -> PathBuf {
    let path = dir.path("input");
    std::fs::write(&path, text).unwrap();
    path
}

/// `-i FILE -o FILE`: a file copied through accel, byte for byte; `--sync` flushes it
/// (fdatasync, seen by strace) before the status says success.
fn files_at_both_ends_and_sync(engine: &str) {
    let dir = Scratch::new(&format!("out-files-{engine}"));
    let (from, to) = (dir.path("from"), dir.path("to"));
    let data = pattern(9 << 20, 42);
    std::fs::write(&from, &data).unwrap();
    let out = accel(engine, &["-i", &arg(&from), "-o", &arg(&to)]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_same(&std::fs::read(&to).unwrap(), &data, "-i to -o");
    if !require("strace", has("strace", "-V")) {
        return;
    }
    std::fs::remove_file(&to).unwrap();
    let out = Command::new("strace")
        .args(["-f", "-e", "trace=fdatasync", "-o", &arg(&dir.path("trace"))])
        .arg(ACCEL)
        .args(["--engine", engine, "--sync", "-i", &arg(&from), "-o", &arg(&to), "-o", "-"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace = std::fs::read_to_string(dir.path("trace")).unwrap();
    // strace may split a call across threads: `fdatasync(4 <unfinished ...>`, then
    // `<... fdatasync resumed>) = 0`.
    let calls = trace.lines().filter(|l| l.contains("fdatasync(")).count();
    let returned = trace.lines().filter(|l| l.contains("fdatasync") && l.ends_with("= 0")).count();
    assert_eq!((calls, returned), (1, 1), "the file is synced, stdout (a pipe) is not: {trace}");
}

/// `/dev/full` as one of several outputs: by default it is reported, with its counts, and the
/// others go on and get everything (status 3); with `--output-error=exit`, the run ends at once.
fn a_failing_output_among_several(engine: &str) {
    let data = pattern(4 << 20, 43);
    let out = spawn_piped(engine, &["-o", "/dev/full", "-o", "-"]);
    let (status, stdout, stderr) = through(out, &data);
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert_same(&stdout, &data, "the output that did not fail");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "accel: /dev/full: No space left on device; it gets no more bytes, the other \
             outputs go on",
            "accel: write to /dev/full: No space left on device; 0 bytes delivered, 4 MiB \
             (4194304 bytes) read but not delivered",
        ],
        "{stderr}"
    );

    let out = accel(engine, &["--output-error=exit", "-o", "/dev/full", "-o", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, _, stderr) = through(out, &pattern(64 << 20, 44));
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("accel: write to /dev/full: No space left on device; 0 bytes"),
        "{stderr}"
    );
    assert!(stderr.contains("accel: stdout: cut short when the run ended; "), "{stderr}");
}

/// Feeds `data` to a spawned accel (stdin piped) and collects stdout (if piped) and stderr;
/// the producer may be cut off when accel ends early.
fn through(
    mut child: std::process::Child,
    data: &[u8],
) -> (std::process::ExitStatus, Vec<u8>, String) {
    let said = Said::collect(&mut child);
    let stdin = child.stdin.take().unwrap();
    let sent = data.to_vec();
    let producer = thread::spawn(move || feed(stdin, &sent, 1 << 20));
    let stdout = child.stdout.take().map(drain).unwrap_or_default();
    let _ = producer.join();
    let (status, stderr) = said.ended(&mut child);
    (status, stdout, stderr)
}

/// stdout's reader goes away while files are written too: by default accel dies of SIGPIPE
/// as `tee` does, naming each file cut short with its counts; with `warn-nopipe` the files
/// get everything and the status stays 0, with a note; with `warn`, status 3.
fn a_reader_going_away_among_files(engine: &str) {
    let dir = Scratch::new(&format!("out-epipe-{engine}"));
    let file = dir.path("copy");
    let run = |policy: &str| {
        let _ = std::fs::remove_file(&file);
        sh(&format!(
            "head -c 64000000 /dev/zero | \"$ACCEL\" --engine {engine} {policy} -o - -o '{}' \
             | head -c 10 >/dev/null; echo \"${{PIPESTATUS[1]}}\"",
            file.display()
        ))
    };
    let out = run("");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "141\n", "died of SIGPIPE, as tee");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("accel: stdout: the reader went away; "), "{stderr}");
    let cut = format!("\naccel: {}: cut short when the run ended; ", file.display());
    assert!(stderr.contains(&cut), "{stderr}");
    let out = run("--output-error=warn-nopipe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n", "{stderr}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 64_000_000, "the file got it all");
    assert!(stderr.contains("accel: stdout: the reader went away; "), "{stderr}");
    let out = run("--output-error=warn");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n", "{stderr}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 64_000_000, "the file got it all");
    assert!(stderr.contains("accel: write to stdout: Broken pipe; "), "{stderr}");
}

/// `--hash` equals `sha256sum`, `sha512sum`, `md5sum` and the BLAKE3 reference, on random data
/// of random sizes (empty and one byte included), and goes to `--hash-file` and the JSON
/// summary too.
fn hashes_equal_the_references(engine: &str) {
    let dir = Scratch::new(&format!("out-hash-{engine}"));
    let sizes = prop_oneof![Just(0usize), Just(1usize), 2usize..5000, 5000usize..(20 << 20)];
    let name = format!("outputs::hashes_equal_the_references::{engine}");
    run_seeded(&name, 8, (sizes, any::<u64>()), |(size, seed)| {
        let input = dir.path("input");
        std::fs::write(&input, pattern(size, seed)).unwrap();
        let out = accel(engine, &["--hash", "sha256", "--hash", "sha512", "--hash", "md5"])
            .args(["--hash", "blake3"])
            .stdin(File::open(&input).unwrap())
            .stdout(Stdio::null())
            .output()
            .unwrap();
        prop_assert!(out.status.success());
        let lines: Vec<String> =
            String::from_utf8(out.stderr).unwrap().lines().map(str::to_owned).collect();
        let tool = |name: &str| {
            let out = Command::new(name).stdin(File::open(&input).unwrap()).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
        };
        let blake3 = format!("{}  -", blake3::hash(&std::fs::read(&input).unwrap()).to_hex());
        prop_assert_eq!(lines, [tool("sha256sum"), tool("sha512sum"), tool("md5sum"), blake3]);
        Ok(())
    });
    // To a file, named after -i, and in the JSON summary.
    let (hashes, json) = (dir.path("SHA256SUMS"), dir.path("summary.json"));
    let input = dir.path("input");
    let out = accel(engine, &["--hash", "sha256", "-i", &arg(&input), "-o", "/dev/null"])
        .args(["--hash-file", &arg(&hashes), &format!("--json={}", json.display())])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let check = Command::new("sha256sum").arg("-c").arg(&hashes).output().unwrap();
    assert!(
        check.status.success(),
        "sha256sum -c accepts it: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let summary: Value =
        serde_json::from_str(std::fs::read_to_string(&json).unwrap().lines().last().unwrap())
            .unwrap();
    let line = std::fs::read_to_string(&hashes).unwrap();
    assert_eq!(summary["hashes"][0]["algorithm"], "sha256");
    assert_eq!(summary["hashes"][0]["hex"], line.split_whitespace().next().unwrap());
}

/// Misuse is refused before anything is read, with status 2 and a message naming the cause:
/// `-i` missing, unreadable, a directory; `-o` in a missing directory, or named twice; an
/// unknown hash.
fn misuse_is_refused_before_reading(engine: &str) {
    let dir = Scratch::new(&format!("out-misuse-{engine}"));
    let cases = [
        (vec!["-i", "/no/such/file"], "accel: -i /no/such/file: No such file or directory"),
        (vec!["-i", "/"], "accel: -i /: is a directory"),
        (vec!["-o", "/no/such/dir/out"], "accel: -o /no/such/dir/out: No such file or directory"),
        (vec!["-o", "-", "-o", "-"], "accel: -o -: named twice: each output gets every byte once"),
        (
            vec!["--hash", "crc32"],
            "accel: --hash crc32: not a hash accel knows: expected one of sha256, sha512, \
             blake3, md5, sha1, sha224, sha384",
        ),
    ];
    for (args, message) in cases {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let script = format!(
            "printf data | {{ \"$ACCEL\" --engine {engine} {}; echo \"status $?\"; cat; }}",
            args.join(" ")
        );
        let out = sh(&script);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "status 2\ndata", "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{message}\n"), "{args:?}");
    }
    // Unreadable: root reads everything, so the reader is `nobody`.
    if !require("root, to run accel as nobody", is_root()) {
        return;
    }
    let secret = dir.path("secret");
    std::fs::write(&secret, b"x").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let message = format!("accel: -i {}: Permission denied", secret.display());
    refused_as_nobody(dir.dir(), engine, &["-i", &arg(&secret)], &message);
}

per_engine!(
    every_output_gets_every_byte,
    a_fast_output_is_not_paced_by_a_stalled_one,
    no_clobber_force_append,
    files_at_both_ends_and_sync,
    a_failing_output_among_several,
    a_reader_going_away_among_files,
    hashes_equal_the_references,
    misuse_is_refused_before_reading,
);
