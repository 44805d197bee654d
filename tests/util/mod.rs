//! Helpers shared by the integration tests, their one home: spawning accel (as itself or as
//! another program), pipes, test data, timeouts, what a child said and how it ended, scratch
//! directories. Beside it: seeds.rs (seeds and what they draw), net.rs (between hosts: keys,
//! receivers, namespaces), control.rs (the control socket), terminal.rs (tmux).

#![allow(dead_code)]

pub mod control;
pub mod net;
pub mod seeds;
pub mod ssh;
pub mod terminal;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};

use serde_json::Value;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// For each `fn name(engine: &str)` listed, one test per engine `--engine` accepts:
/// `name::auto`, `name::splice`, `name::copy`, so that a failure in one engine never hides the
/// others. A new engine gets its line here.
macro_rules! per_engine {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[test]
                fn auto() {
                    super::$name("auto")
                }
                #[test]
                fn splice() {
                    super::$name("splice")
                }
                #[test]
                fn copy() {
                    super::$name("copy")
                }
            }
        )+
    };
}

/// Whether a test that needs `what` (root, tmux, a cgroup) may go on. Where it is missing the
/// test fails, saying so, unless `ACCEL_TESTS_MAY_SKIP=1` is set: then it says on stderr that
/// it skips. A missing requirement never passes silently. CI has everything and sets nothing.
#[track_caller]
pub fn require(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    let skip = std::env::var_os("ACCEL_TESTS_MAY_SKIP").is_some_and(|v| v == "1");
    assert!(skip, "this test needs {what}; set ACCEL_TESTS_MAY_SKIP=1 to skip such tests");
    eprintln!("SKIPPED (ACCEL_TESTS_MAY_SKIP=1): needs {what}");
    false
}

/// Whether `program` is there to run (it runs with `version_flag`), for [`require`].
pub fn has(program: &str, version_flag: &str) -> bool {
    Command::new(program).arg(version_flag).output().is_ok()
}

/// Whether the tests run as root (mounts, cgroups, other users).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs `test` on `cases` values of `strategy`, drawn from a seed that every failure reports
/// with the command that replays it: `ACCEL_TEST_SEED` when set, else a fresh one.
#[track_caller]
pub fn run_seeded<S: proptest::strategy::Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), proptest::test_runner::TestCaseError>,
) {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let seed = match std::env::var("ACCEL_TEST_SEED") {
        Ok(text) => u64::from_str_radix(text.trim_start_matches("0x"), 16).expect("a hex seed"),
        Err(_) => seeds::fresh_seed(),
    };
    let bytes: Vec<u8> = (0..4).flat_map(|i| (seed ^ i).to_le_bytes()).collect();
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    if let Err(failure) = runner.run(&strategy, test) {
        panic!(
            "{failure}\nseed {seed:#x}; replay with: \
             ACCEL_TEST_SEED={seed:#x} cargo test --test integration {name} -- --exact"
        );
    }
}

/// What "a generous timeout" means here: long enough that only a hang or a deadlock reaches it
/// on a loaded 2-core CI machine.
pub const GENEROUS: Duration = Duration::from_secs(60);

/// The accel binary under test.
pub const ACCEL: &str = env!("CARGO_BIN_EXE_accel");

/// `accel --engine ENGINE ARGS...`, with no stdio set yet. The terminating signals are set
/// to their default actions in the child: accel keeps a signal ignored on entry ignored (as
/// `nohup accel` wants), and a test run from a background job (`cargo test &` in a shell
/// without job control ignores SIGINT and SIGQUIT; `nohup` ignores SIGHUP) must not pass
/// that on. A test's own `pre_exec` runs after this one.
pub fn accel(engine: &str, args: &[&str]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(ACCEL);
    command.arg("--engine").arg(engine).args(args);
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    command
}

/// accel with piped stdin, stdout and stderr.
pub fn spawn_piped(engine: &str, args: &[&str]) -> Child {
    piped(&mut accel(engine, args))
}

/// `command` (accel, set up further by the test) spawned with piped stdin, stdout and stderr.
pub fn piped(command: &mut Command) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn accel")
}

/// Feeds `data` to `child` (piped), reading its stdout and stderr meanwhile, and waits for it:
/// its status, what it wrote, what it said.
pub fn run_fed(mut child: Child, data: &[u8]) -> (ExitStatus, Vec<u8>, String) {
    let said = Said::collect(&mut child);
    let stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = thread::spawn(move || feed(stdin, &data, 1 << 16));
    let ended = said.output_and_end(&mut child);
    let _ = writer.join().unwrap();
    ended
}

/// accel run as another program, as the backup tools run it: a link named `program`
/// (`mbuffer`, `pv`) to the accel under test, in a scratch directory of its own for the test.
pub struct AccelAs {
    /// The scratch directory, for the test's files too.
    pub dir: Scratch,
    /// The link.
    pub path: PathBuf,
}

impl AccelAs {
    /// A link named `program` in a scratch directory for `test`.
    pub fn new(program: &str, test: &str) -> AccelAs {
        let dir = Scratch::new(&format!("{program}-{test}"));
        let path = dir.path(program);
        std::os::unix::fs::symlink(ACCEL, &path).unwrap();
        AccelAs { dir, path }
    }

    /// The link, as an argument.
    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// accel as `PROGRAM ARGS`, stdio piped.
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S]) -> Child {
        piped(Command::new(&self.path).args(args))
    }

    /// Runs `PROGRAM ARGS` with `data` on stdin: its status, stdout and stderr.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S], data: &[u8]) -> (ExitStatus, Vec<u8>, String) {
        run_fed(self.spawn(args), data)
    }
}

/// Sends a line through `child` (piped) and reads it back, so that accel is known to be up and
/// moving data; returns its stdin and stdout.
pub fn line_through(child: &mut Child) -> (ChildStdin, ChildStdout) {
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin.write_all(b"before\n").unwrap();
    let mut got = [0u8; 7];
    stdout.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"before\n");
    (stdin, stdout)
}

/// A fresh pipe: (read end, write end), close-on-exec.
pub fn pipe() -> (OwnedFd, OwnedFd) {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe")
}

/// Deterministic bytes that differ everywhere (so a lost, repeated or reordered block shows).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Deterministic text that compresses as prose does (3 to 6 times with zstd): words from a
/// short list, in an order drawn from `seed`, in lines.
pub fn prose(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 32] = [
        "the",
        "buffer",
        "stream",
        "pipe",
        "of",
        "and",
        "receiver",
        "sender",
        "bytes",
        "frame",
        "a",
        "compressed",
        "link",
        "level",
        "zstd",
        "offset",
        "to",
        "confirmed",
        "input",
        "output",
        "in",
        "network",
        "resumed",
        "with",
        "backlog",
        "ratio",
        "is",
        "every",
        "snapshot",
        "dataset",
        "send",
        "receive",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let draw = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        out.extend_from_slice(WORDS[(draw >> 59) as usize].as_bytes());
        out.push(if draw & 0xf == 0 { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// Asserts two byte strings are equal, saying where they first differ rather than dumping MiBs.
#[track_caller]
pub fn assert_same(got: &[u8], want: &[u8], context: &str) {
    if got != want {
        let at =
            got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{context}: output differs from input at byte {at} (got {} bytes, want {})",
            got.len(),
            want.len()
        );
    }
}

/// Runs `f` on a thread and waits at most `timeout` for its result; `None` if it did not finish.
pub fn within<T: Send + 'static>(
    timeout: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(timeout).ok()
}

/// Waits for `child` to exit: its status, or `None` if it has not exited within `patience`
/// (it is left running).
pub fn exited(child: &mut Child, patience: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `child` to exit, killing it and failing the test after `timeout`.
#[track_caller]
pub fn wait_within(child: &mut Child, timeout: Duration) -> ExitStatus {
    exited(child, timeout).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("accel did not exit within {timeout:?}")
    })
}

/// Polls `condition` until it holds, failing the test after `timeout`. For conditions that
/// depend on another process's progress (memory given back, a line arriving).
#[track_caller]
pub fn eventually(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `data` to `sink` in pieces of `chunk` bytes, then closes it.
pub fn feed(mut sink: impl Write, data: &[u8], chunk: usize) -> std::io::Result<()> {
    for piece in data.chunks(chunk.max(1)) {
        sink.write_all(piece)?;
    }
    Ok(())
}

/// Reads everything from `source`.
pub fn drain(mut source: impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    source.read_to_end(&mut out).expect("read accel's output");
    out
}

/// A line from `/proc/PID/status`, in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Writes `size` bytes in `write_size` pieces into `command`'s stdin while nobody reads its stdout. Returns whether
/// the producer finished (wrote everything and closed) within `timeout`, and if so checks that
/// the consumer, reading only afterwards, gets every byte intact.
pub fn producer_finishes_before_consumer_reads(
    mut command: Command,
    size: usize,
    write_size: usize,
    timeout: Duration,
) -> bool {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdin = child.stdin.take().unwrap();
    let data = pattern(size, 16);
    let sent = data.clone();
    let finished = within(timeout, move || feed(stdin, &sent, write_size).is_ok()).is_some();
    if finished {
        // Only now does the consumer read its first byte.
        let out = drain(child.stdout.take().unwrap());
        assert_same(&out, &data, "consumer after producer finished");
        assert!(wait_within(&mut child, GENEROUS).success());
    } else {
        let _ = child.kill();
        let _ = child.wait();
    }
    finished
}

/// Runs `script` in bash with `$ACCEL` set to the binary under test.
pub fn sh(script: &str) -> std::process::Output {
    Command::new("bash").arg("-c").arg(script).env("ACCEL", ACCEL).output().expect("run bash")
}

/// Held by a test while what it does as `nobody` must not overlap another's: the per-user pipe
/// quota is one for all of `nobody`'s processes, so one test's pipes going away would hand
/// another's accel the quota it was meant to find spent.
pub static AS_NOBODY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// accel run as `nobody` (the tests run as root, who passes every permission and quota check):
/// a copy of the binary in `dir` (which `nobody` may not reach in the build directory), with
/// `--engine engine`. `then` runs in the child, as `nobody`, before accel starts.
pub fn accel_as_nobody(
    dir: &std::path::Path,
    engine: &str,
    then: impl Fn() + Send + Sync + 'static,
) -> Command {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    std::fs::set_permissions(dir, PermissionsExt::from_mode(0o755)).unwrap();
    let binary = dir.join(format!("accel-{engine}"));
    std::fs::copy(ACCEL, &binary).unwrap();
    std::fs::set_permissions(&binary, PermissionsExt::from_mode(0o755)).unwrap();
    // A binary just written can meet ETXTBSY for a moment (another test's child, forked while
    // the copy was open, still holds it until it execs): wait until it can be run.
    eventually(GENEROUS, "the copied binary can be run", || {
        !matches!(
            Command::new(&binary).arg("--version").output(),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY)
        )
    });
    let mut command = Command::new(&binary);
    command.args(["--engine", engine]);
    // SAFETY: setgroups, setgid, setuid and what `then` does are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            then();
            Ok(())
        });
    }
    command
}

/// A directory of its own for one test (`name` says which), removed when dropped.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = tempfile::Builder::new().prefix(&format!("accel-{name}-")).tempdir().unwrap();
        Scratch(dir)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        self.0.path()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }

    /// The directory as an argument.
    pub fn arg(&self) -> &str {
        self.dir().to_str().unwrap()
    }

    /// A FIFO named `name`, for an output a test reads at its own pace.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let path = self.path(name);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        path
    }
}

/// A tmpfs of `size` mounted for one test, unmounted when dropped (needs root).
pub struct Tmpfs {
    pub dir: Scratch,
}

impl Tmpfs {
    pub fn mount(size: &str, name: &str) -> Tmpfs {
        let dir = Scratch::new(&format!("tmpfs-{name}"));
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.dir())
            .status()
            .expect("run mount");
        assert!(status.success(), "mount a tmpfs on {}", dir.dir().display());
        Tmpfs { dir }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.dir()).status();
    }
}

/// accel as `nobody` (see [`accel_as_nobody`]) with `args` and nothing on stdin is refused:
/// status 2, and `message` is all it says.
pub fn refused_as_nobody(dir: &std::path::Path, engine: &str, args: &[&str], message: &str) {
    let out = accel_as_nobody(dir, engine, || {}).args(args).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{message}\n"), "{args:?}");
}

/// The labels that begin the lines of a report so far (SIGUSR1), above its verdict.
pub const REPORT_LABELS: [&str; 8] = [
    "report so far, at ",
    "in ",
    "out ",
    "time ",
    "producer ",
    "consumer ",
    "peak fill ",
    "bytes went ",
];

/// Whether `line` is the verdict that ends a report so far.
pub fn is_verdict_so_far(line: &str) -> bool {
    let verdict = line.strip_prefix("so far, ").unwrap_or_default();
    verdict.starts_with("bottleneck: ") || verdict.starts_with("no bottleneck: ")
}

/// What a process said on stderr, collected by a thread as it goes, so that its pipe never
/// fills: a child that writes more than a pipe holds (64 KiB) to a stderr nobody reads blocks.
#[derive(Clone, Default)]
pub struct Said {
    text: Arc<Mutex<String>>,
    reader: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Said {
    /// Takes `child`'s stderr (piped) and starts reading it.
    pub fn collect(child: &mut Child) -> Said {
        let said = Said::default();
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
        let into = said.text.clone();
        // A line at a time, so that each is there to be looked at as soon as it is said; as
        // said (a last line without its newline stays without), to the end.
        let reader = thread::spawn(move || {
            let mut line = Vec::new();
            while stderr.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                into.lock().unwrap().push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
        });
        *said.reader.lock().unwrap() = Some(reader);
        said
    }

    /// What has been said so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Everything it said: waits until its stderr has closed (the process has exited, and
    /// so has any it started that shares its stderr), failing the test after [`GENEROUS`].
    #[track_caller]
    pub fn all(&self) -> String {
        if let Some(reader) = self.reader.lock().unwrap().take() {
            eventually(GENEROUS, "its stderr to close", || reader.is_finished());
            reader.join().expect("the stderr reader");
        }
        self.text()
    }

    /// Waits for `child`, whose stderr this collects, to exit: its status. After
    /// [`GENEROUS`], kills it and fails the test, showing what it said.
    #[track_caller]
    pub fn exit_of(&self, child: &mut Child) -> ExitStatus {
        exited(child, GENEROUS).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("it did not exit within {GENEROUS:?}; it said:\n{}", self.all())
        })
    }

    /// Waits for `child`, whose stderr this collects, to exit: its status and everything it
    /// said. After [`GENEROUS`], kills it and fails the test, showing what it said.
    #[track_caller]
    pub fn ended(&self, child: &mut Child) -> (ExitStatus, String) {
        (self.exit_of(child), self.all())
    }

    /// Everything `child`, whose stderr this collects, writes on its stdout (piped), to the
    /// end; then its status and everything it said. After [`GENEROUS`] without the end of its
    /// stdout, kills it and fails the test, showing what it said.
    #[track_caller]
    pub fn output_and_end(&self, child: &mut Child) -> (ExitStatus, Vec<u8>, String) {
        let stdout = child.stdout.take().expect("stdout piped");
        let Some(out) = within(GENEROUS, move || drain(stdout)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("its output did not end within {GENEROUS:?}; it said:\n{}", self.text());
        };
        let (status, said) = self.ended(child);
        (status, out, said)
    }

    /// Waits until a line containing `what` has been said; returns that line.
    #[track_caller]
    pub fn line_with(&self, what: &str) -> String {
        let mut found = None;
        eventually(GENEROUS, &format!("accel says {what:?}"), || {
            found = self.text().lines().find(|l| l.contains(what)).map(str::to_owned);
            found.is_some()
        });
        found.unwrap()
    }
}

/// accel with `--json` on stderr, where the test reads each event as it comes; `-v` and
/// other `args` too. Every line of stderr that is not an event is kept as text.
pub struct Watched {
    /// accel, its stdin and stdout piped.
    pub child: Child,
    /// Its events, each as it comes.
    pub events: mpsc::Receiver<Value>,
    text: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

impl Watched {
    /// `accel --engine ENGINE --json ARGS...`.
    pub fn start(engine: &str, args: &[&str]) -> Watched {
        let mut child = spawn_piped(engine, &[&["--json"], args].concat());
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (send, events) = mpsc::channel();
        let text = Arc::new(Mutex::new(String::new()));
        let kept = Arc::clone(&text);
        let reader = thread::spawn(move || {
            for line in stderr.lines() {
                let line = line.unwrap();
                match serde_json::from_str::<Value>(&line) {
                    Ok(event) if line.starts_with('{') => {
                        let _ = send.send(event);
                    }
                    _ => kept.lock().unwrap().push_str(&format!("{line}\n")),
                }
            }
        });
        Watched { child, events, text, reader }
    }

    /// Waits until `count` progress events in a row satisfy `condition`: a state accel itself
    /// reports to have lasted that many seconds (an event a second).
    pub fn until(&self, count: usize, what: &str, condition: impl Fn(&Value) -> bool) {
        let mut in_a_row = 0;
        while in_a_row < count {
            let event = self.events.recv_timeout(GENEROUS).unwrap_or_else(|_| panic!("{what}"));
            assert_eq!(event["event"], "progress", "{what}: the run ended first: {event}");
            in_a_row = if condition(&event) { in_a_row + 1 } else { 0 };
        }
    }

    /// Waits for the end: the summary, and the text beside the events.
    pub fn finish(mut self) -> (Value, String) {
        assert!(wait_within(&mut self.child, GENEROUS).success());
        self.reader.join().unwrap();
        let summary = self.events.try_iter().last().expect("a summary");
        assert_eq!(summary["event"], "summary");
        let text = self.text.lock().unwrap().clone();
        (summary, text)
    }
}

/// Waits for `child` (its stderr piped, and not yet taken) to exit, reading its stderr all the
/// while, so that a child saying more than a pipe holds is not blocked: its status and
/// everything it said. After [`GENEROUS`], kills it and fails the test, showing what it said.
/// (A child whose stderr must be read from its start: [`Said::collect`], then [`Said::ended`].)
#[track_caller]
pub fn ended(mut child: Child) -> (ExitStatus, String) {
    Said::collect(&mut child).ended(&mut child)
}

/// Reads `child`'s stderr up to the end of the first line containing `what` (or to the end
/// of stderr, if none does), within [`GENEROUS`]: what it read. A byte at a time, so that
/// what comes after stays in the pipe for whoever reads it next ([`ended`]).
#[track_caller]
pub fn said_until(child: &mut Child, what: &str) -> String {
    let mut stderr = child.stderr.take().expect("stderr piped");
    let wanted = what.to_owned();
    let (said, stderr) = within(GENEROUS, move || {
        let (mut said, mut line, mut byte) = (Vec::new(), Vec::new(), [0u8]);
        while let Ok(1) = stderr.read(&mut byte) {
            line.push(byte[0]);
            if byte[0] == b'\n' {
                let found = String::from_utf8_lossy(&line).contains(&wanted);
                said.append(&mut line);
                if found {
                    break;
                }
            }
        }
        said.append(&mut line);
        (String::from_utf8_lossy(&said).into_owned(), stderr)
    })
    .unwrap_or_else(|| panic!("no line with {what:?} on stderr within {GENEROUS:?}"));
    child.stderr = Some(stderr);
    said
}

/// The exact count of bytes a message states just before `label` (`" delivered, "`, `" read
/// but not delivered"`), in either of the forms accel writes a count in: `N bytes LABEL` below
/// 1 KiB, `X UNIT (N bytes) LABEL` from there, where `X UNIT` is N in KiB, MiB, ... to three
/// significant digits. The first place where a count comes before `label` counts; panics,
/// showing `text`, when there is none, or when the form does not suit the count (a size below
/// 1 KiB, none from there, or one that is not N's).
#[track_caller]
pub fn bytes_before(text: &str, label: &str) -> u64 {
    let found = text.match_indices(label).find_map(|(at, _)| {
        let before = &text[..at];
        before
            .strip_suffix(" bytes)")
            .map(|rest| (rest, true))
            .or_else(|| before.strip_suffix(" bytes").map(|rest| (rest, false)))
    });
    let Some((before, sized)) = found else {
        panic!("no count of bytes before {label:?} in {text}")
    };
    let start = before.rfind(|c: char| !c.is_ascii_digit()).map_or(0, |at| at + 1);
    let count: u64 = before[start..]
        .parse()
        .unwrap_or_else(|_| panic!("no number of bytes before {label:?} in {text}"));
    if !sized {
        assert!(count < 1024, "{count} bytes without their size, before {label:?} in {text}");
        return count;
    }
    // `X UNIT (` before the number: X must be the count in UNIT, as a person reads it.
    let size = before[..start].strip_suffix(" (").and_then(|size| {
        let mut words = size.rsplit(' ');
        Some((words.next()?, words.next()?))
    });
    let (unit, figure) = size.unwrap_or_else(|| panic!("no size before {count} in {text}"));
    let power = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        .iter()
        .position(|u| *u == unit)
        .unwrap_or_else(|| panic!("{unit:?} is not a unit, before {count} in {text}"));
    let figure: f64 = figure.parse().unwrap_or_else(|_| panic!("{figure:?} in {text}"));
    let exact = count as f64 / 1024f64.powi(power as i32 + 1);
    assert!(
        (1.0..1024.0).contains(&exact) && (figure - exact).abs() <= exact * 0.005 + 0.005,
        "{figure} {unit} is not {count} bytes, before {label:?} in {text}"
    );
    count
}

/// [`bytes_before`] reads both forms exactly, and fails on a count whose form is wrong.
#[test]
fn bytes_before_reads_a_count_in_either_form_and_only_a_true_one() {
    let said = "write to x: Broken pipe; 700 bytes delivered, 406 MiB (425197568 bytes) read but \
                not delivered";
    assert_eq!(bytes_before(said, " delivered, "), 700);
    assert_eq!(bytes_before(said, " read but not delivered"), 425_197_568);
    assert_eq!(bytes_before("all 8 MiB (8388608 bytes) read", " read"), 8 << 20);
    // Past a label with no count before it, to the one with a count.
    assert_eq!(bytes_before("read but not delivered; 3 bytes delivered", " delivered"), 3);
    for wrong in [
        "2048 bytes delivered",                 // no size from 1 KiB on
        "1 KiB (700 bytes) delivered",          // a size below 1 KiB
        "3 MiB (2097152 bytes) delivered",      // the size of another count
        "2 MB (2097152 bytes) delivered",       // not a unit accel writes
        "(2097152 bytes) delivered",            // no size at all
        "2097152 delivered",                    // no bytes
        "2 MiB (2097152 bytes) were delivered", // not the label
    ] {
        let read = std::panic::catch_unwind(|| bytes_before(wrong, " delivered"));
        assert!(read.is_err(), "{wrong:?} was read as {read:?}");
    }
}

/// [`ended`] reads stderr while the child runs: a child that says far more than a pipe holds
/// (64 KiB) before it exits is not blocked, and all it said comes back, to the last byte.
#[test]
fn ended_reads_stderr_while_the_child_runs() {
    let child = Command::new("bash")
        .args(["-c", "head -c 1000000 /dev/zero | tr '\\0' x >&2; printf end >&2; exit 3"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, said) = ended(child);
    assert_eq!(status.code(), Some(3));
    assert_eq!(said.len(), 1_000_003);
    assert!(said.starts_with("xxx") && said.ends_with("xend"), "as said, no newline added");
}

/// [`said_until`] takes what comes up to its line and leaves the rest in the pipe, for
/// [`ended`] to collect, though all of it came in one write.
#[test]
fn said_until_leaves_the_rest_in_the_pipe() {
    let scratch = Scratch::new("said-until");
    std::fs::write(scratch.path("said"), "one\ntwo: the line\nthree\nfour\n").unwrap();
    let mut child = Command::new("bash")
        .args(["-c", "cat \"$0\" >&2"])
        .arg(scratch.path("said"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(said_until(&mut child, "two"), "one\ntwo: the line\n");
    let (status, rest) = ended(child);
    assert!(status.success());
    assert_eq!(rest, "three\nfour\n");
}
