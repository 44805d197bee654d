//! Watching the pipeline: NDJSON, the report's verdict, SIGUSR1, the stall watchdog, and the
//! progress line on a real terminal.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

use crate::util::*;

/// Runs accel with a producer that writes `total` bytes in `piece`s with `producer_pause`
/// between them, and a consumer that reads `piece`s with `consumer_pause` between them.
/// Returns accel's stderr and the `--json` events.
fn paced(
    engine: &str,
    args: &[&str],
    total: usize,
    piece: usize,
    producer_pause: Duration,
    consumer_pause: Duration,
) -> (String, Vec<Value>) {
    let json = std::env::temp_dir().join(format!(
        "accel-json-{}-{engine}-{}",
        std::process::id(),
        args.join("")
    ));
    let json_arg = format!("--json={}", json.display());
    let mut child = spawn_piped(engine, &[&[json_arg.as_str()], args].concat());
    let mut stdin = child.stdin.take().unwrap();
    let producer = thread::spawn(move || {
        let data = pattern(piece, 1);
        for _ in 0..total / piece {
            stdin.write_all(&data).unwrap();
            thread::sleep(producer_pause);
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; piece];
    let mut got = 0;
    while let Ok(n @ 1..) = stdout.read(&mut buf) {
        got += n;
        thread::sleep(consumer_pause);
    }
    producer.join().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(wait_within(&mut child, GENEROUS).success(), "{stderr}");
    assert_eq!(got, total / piece * piece);
    let events = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    std::fs::remove_file(&json).unwrap();
    (stderr, events)
}

fn summary_of(events: &[Value]) -> &Value {
    let last = events.last().expect("some events");
    assert_eq!(last["event"], "summary", "the summary comes last");
    assert_eq!(events.iter().filter(|e| e["event"] == "summary").count(), 1);
    last
}

/// The documented summary fields, with the right types and values.
fn json_summary_has_the_documented_fields(engine: &str) {
    let (stderr, events) = paced(engine, &[], 4 << 20, 1 << 20, Duration::ZERO, Duration::ZERO);
    assert!(stderr.is_empty(), "--json=FILE writes nothing else: {stderr}");
    let summary = summary_of(&events);
    for field in ["bytes_in", "bytes_out", "peak_fill_bytes", "exit", "capacity_bytes"] {
        assert!(summary[field].is_u64(), "{field} in {summary}");
    }
    for field in ["seconds", "producer_blocked_s", "consumer_starved_s"] {
        assert!(summary[field].is_f64(), "{field} in {summary}");
    }
    assert_eq!(summary["bytes_in"], 4 << 20);
    assert_eq!(summary["bytes_out"], 4 << 20);
    assert_eq!(summary["exit"], 0);
    assert_eq!(summary["capacity_bytes"], 32 << 20);
    assert!(["producer", "consumer", "none"].contains(&summary["bottleneck"].as_str().unwrap()));
    let tiers = &summary["tiers"];
    let total: u64 =
        ["through", "pipes", "memory"].iter().map(|t| tiers[t].as_u64().unwrap()).sum();
    assert_eq!(total, 4 << 20, "every byte took one way: {tiers}");
}

/// accel with `--json` on stderr, where the test reads each event as it comes; `-v` and
/// other `args` too. Every line of stderr that is not an event is kept as text.
struct Watched {
    child: std::process::Child,
    events: mpsc::Receiver<Value>,
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: thread::JoinHandle<()>,
}

impl Watched {
    fn start(engine: &str, args: &[&str]) -> Watched {
        let mut child = spawn_piped(engine, &[&["--json"], args].concat());
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (send, events) = mpsc::channel();
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = std::sync::Arc::clone(&text);
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
    fn until(&self, count: usize, what: &str, condition: impl Fn(&Value) -> bool) {
        let mut in_a_row = 0;
        while in_a_row < count {
            let event = self.events.recv_timeout(GENEROUS).unwrap_or_else(|_| panic!("{what}"));
            assert_eq!(event["event"], "progress", "{what}: the run ended first: {event}");
            in_a_row = if condition(&event) { in_a_row + 1 } else { 0 };
        }
    }

    /// Waits for the end: the summary, and the text beside the events.
    fn finish(mut self) -> (Value, String) {
        assert!(wait_within(&mut self.child, GENEROUS).success());
        self.reader.join().unwrap();
        let summary = self.events.try_iter().last().expect("a summary");
        assert_eq!(summary["event"], "summary");
        let text = self.text.lock().unwrap().clone();
        (summary, text)
    }
}

/// The consumer reads nothing until accel itself reports the producer held back by a full
/// buffer for two seconds, then drains at once: the consumer is the bottleneck, by the
/// times accel measured. Returns the summary and the rest of stderr.
fn a_slow_consumer(engine: &str, args: &[&str]) -> (Value, String) {
    let mut watched = Watched::start(engine, &[&["-m", "256K"], args].concat());
    let stdin = watched.child.stdin.take().unwrap();
    let producer = thread::spawn(move || feed(stdin, &pattern(6 << 20, 1), 64 << 10));
    watched.until(2, "the producer held back", |e| e["fill_bytes"] == e["capacity_bytes"]);
    let got = drain(watched.child.stdout.take().unwrap());
    producer.join().unwrap().unwrap();
    assert_eq!(got.len(), 6 << 20);
    watched.finish()
}

/// The producer writes nothing until accel reports the consumer waiting for two seconds,
/// then writes everything at once: the producer is the bottleneck.
fn a_slow_producer(engine: &str) -> Value {
    let mut watched = Watched::start(engine, &[]);
    watched.until(2, "the consumer waiting", |e| e["bytes_in"] == 0);
    let stdin = watched.child.stdin.take().unwrap();
    let producer = thread::spawn(move || feed(stdin, &pattern(3 << 20, 2), 64 << 10));
    let got = drain(watched.child.stdout.take().unwrap());
    producer.join().unwrap().unwrap();
    assert_eq!(got.len(), 3 << 20);
    watched.finish().0
}

/// A slow consumer is named as the bottleneck, and so is a slow producer.
fn verdict_names_the_slow_side(engine: &str) {
    let waits = |summary: &Value| {
        let seconds = |field: &str| summary[field].as_f64().unwrap();
        (seconds("producer_blocked_s"), seconds("consumer_starved_s"))
    };
    let (summary, _) = a_slow_consumer(engine, &[]);
    assert_eq!(summary["bottleneck"], "consumer", "{summary}");
    let (held, waited) = waits(&summary);
    assert!(held > waited, "{summary}");
    let summary = a_slow_producer(engine);
    assert_eq!(summary["bottleneck"], "producer", "{summary}");
    let (held, waited) = waits(&summary);
    assert!(waited > held, "{summary}");
}

/// `-v` prints the report at the end, with exact byte counts and the verdict in plain words.
fn stats_report(engine: &str) {
    let (_, text) = a_slow_consumer(engine, &["-v"]);
    assert!(text.contains(" 6291456 bytes "), "exact byte count in {text}");
    assert!(text.contains("bottleneck: consumer"), "{text}");
}

per_engine!(json_summary_has_the_documented_fields, verdict_names_the_slow_side, stats_report);

/// The consumer goes away: the summary still comes, saying how accel ended.
#[test]
fn json_summary_on_broken_pipe() {
    let json = std::env::temp_dir().join(format!("accel-json-epipe-{}", std::process::id()));
    let script = format!("yes | \"$ACCEL\" --json={} | head -c 10 >/dev/null", json.display());
    let out = Command::new("bash").arg("-c").arg(script).env("ACCEL", ACCEL).output().unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::remove_file(&json).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["exit"], 141);
    assert_eq!(summary["signal"], "SIGPIPE");
}

/// `--json` without a file writes NDJSON to stderr.
#[test]
fn json_to_stderr() {
    let out = accel("auto", &["--json"]).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["bytes_in"], 0);
    assert_eq!(summary["bottleneck"], "none");
}

/// SIGUSR1 prints the report so far, and the run goes on.
fn sigusr1_prints_the_report_so_far(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let data = pattern(3 << 20, 2);
    stdin.write_all(&data).unwrap();
    // Once the consumer has it all, accel has certainly taken all 3 MiB in.
    let mut got = vec![0u8; data.len()];
    stdout.read_exact(&mut got).unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    kill_process(Pid::from_child(&child), Signal::USR1).unwrap();
    let report = within(GENEROUS, move || {
        let mut text = String::new();
        while !text.contains("bottleneck") {
            if stderr.read_line(&mut text).unwrap() == 0 {
                break;
            }
        }
        (text, stderr)
    })
    .expect("a report after SIGUSR1");
    assert!(report.0.contains("bottleneck"), "{}", report.0);
    let bytes_in = report.0.lines().find(|l| l.starts_with("in ")).unwrap_or_default();
    assert!(bytes_in.contains(" 3145728 bytes"), "the bytes so far: {}", report.0);
    // Still running: the rest goes through and accel ends normally.
    stdin.write_all(b"more").unwrap();
    drop(stdin);
    assert_eq!(drain(stdout), b"more");
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// `--stall-timeout`: no input while stdin stays open names the producer; data nobody reads
/// names the consumer. Both exit 4.
fn stall_timeout_names_the_stuck_side(engine: &str) {
    let mut child = spawn_piped(engine, &["--stall-timeout", "1s"]);
    let stdin = child.stdin.take().unwrap();
    let status = wait_within(&mut child, GENEROUS);
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(4), "--engine {engine}: {stderr}");
    assert!(
        stderr.contains("stalled: no input from stdin for")
            && stderr.contains("the producer is not writing"),
        "{stderr}"
    );
    drop(stdin);

    let mut child = spawn_piped(engine, &["--stall-timeout", "1s", "-m", "256K"]);
    let mut stdin = child.stdin.take().unwrap();
    // Nobody reads: stdout's pipe and the buffer fill, then nothing moves.
    let _ = stdin.write_all(&pattern(4 << 20, 3));
    let status = wait_within(&mut child, GENEROUS);
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(4), "--engine {engine}: {stderr}");
    assert!(
        stderr.contains("stalled: nothing written to stdout for")
            && stderr.contains("its reader is not reading"),
        "{stderr}"
    );
}

per_engine!(sigusr1_prints_the_report_so_far, stall_timeout_names_the_stuck_side);

/// Interrupted with a report asked for: the report comes, then accel dies by the signal.
#[test]
fn signal_prints_the_report_then_ends_by_it() {
    let mut child = spawn_piped("auto", &["-v"]);
    let mut stdin = child.stdin.take().unwrap();
    let data = pattern(1 << 20, 5);
    stdin.write_all(&data).unwrap();
    // Mid-stream: the data has passed, the producer is still connected.
    let mut got = vec![0u8; data.len()];
    child.stdout.take().unwrap().read_exact(&mut got).unwrap();
    assert_same(&got, &data, "before the signal");
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let status = wait_within(&mut child, GENEROUS);
    assert_eq!(status.signal(), Some(Signal::TERM.as_raw()));
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("bottleneck"), "{stderr}");
}

// ----- a real terminal -----

/// Runs tmux against the server `socket`; its stdout, and whether it succeeded.
fn tmux(socket: &str, args: &[&str]) -> (String, bool) {
    let out = Command::new("tmux").args(["-L", socket]).args(args).output().expect("run tmux");
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.success())
}

/// The screens of a 100x20 terminal running `script`, sampled until `DONE` appears.
fn screens_of(session: &str, script: &str) -> Vec<String> {
    // A server of its own: a shared one exits when its last session is killed, and a session
    // started meanwhile would be lost with it.
    let socket = format!("accel-tests-{}-{session}", std::process::id());
    let size = ["-x", "100", "-y", "20"];
    let command = ["bash", "--norc", "-c", script];
    let (_, started) =
        tmux(&socket, &[&["new-session", "-d", "-s", session], &size[..], &command].concat());
    assert!(started, "tmux could not start a session");
    let mut screens = Vec::new();
    let deadline = Instant::now() + GENEROUS;
    loop {
        let (screen, _) = tmux(&socket, &["capture-pane", "-p", "-t", session]);
        let finished = screen.contains("DONE");
        screens.push(screen);
        if finished || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    tmux(&socket, &["kill-server"]);
    screens
}

fn has_progress_line(screen: &str) -> bool {
    screen.lines().any(|l| l.contains("buf ") && l.contains('%') && l.contains("out "))
}

/// On a terminal, in the foreground: the line appears, changes, and is cleaned up, and the
/// report follows. In a background job: nothing is drawn.
#[test]
fn progress_on_a_real_terminal() {
    if !require("tmux (.ci/run installs it)", Command::new("tmux").arg("-V").output().is_ok()) {
        return;
    }
    let producer = "for i in $(seq 24); do head -c 300000 /dev/zero; sleep 0.1; done";
    let foreground = format!("{producer} | \"{ACCEL}\" > /dev/null; echo DONE; sleep 30");
    let screens = screens_of("fg", &foreground);
    let drawn: Vec<_> = screens.iter().filter(|s| has_progress_line(s)).collect();
    assert!(drawn.len() >= 2, "the progress line appears while the pipeline runs: {screens:#?}");
    assert!(drawn.windows(2).any(|w| w[0] != w[1]), "and updates");
    let last = screens.last().unwrap();
    assert!(last.contains("DONE"), "{last}");
    assert!(!has_progress_line(last), "the line is cleaned up: {last}");
    assert!(
        last.contains("bottleneck") || last.contains("no bottleneck"),
        "the report follows: {last}"
    );

    // A background job (job control on): no line, and so no report.
    let background =
        format!("set -m; ( {producer} | \"{ACCEL}\" > /dev/null ) & wait; echo DONE; sleep 30");
    let screens = screens_of("bg", &background);
    assert!(screens.last().unwrap().contains("DONE"));
    assert!(
        screens.iter().all(|s| !has_progress_line(s) && !s.contains("bottleneck")),
        "{screens:#?}"
    );
}
