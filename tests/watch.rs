//! Watching the pipeline: NDJSON, the report's verdict, SIGUSR1, the stall watchdog, and the
//! progress line on a real terminal.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

use crate::util::terminal::{PRODUCER, has_tmux, is_verdict, screens_of};
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
    let said = Said::collect(&mut child);
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
    let (status, stderr) = said.ended(&mut child);
    assert!(status.success(), "{stderr}");
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
    kill_process(Pid::from_child(&child), Signal::USR1).unwrap();
    let report = said_until(&mut child, "bottleneck");
    assert!(report.contains("bottleneck"), "{}", report);
    // Issue 11, item 5: it says it is the report so far, and its verdict is one so far.
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with("report so far, at ") && lines[0].ends_with("; the run goes on"));
    assert!(lines.last().unwrap().starts_with("so far, "), "{}", report);
    let bytes_in = report.lines().find(|l| l.starts_with("in ")).unwrap_or_default();
    assert!(bytes_in.contains(" 3145728 bytes"), "the bytes so far: {}", report);
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
    let (status, stderr) = ended(child);
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
    let (status, stderr) = ended(child);
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
    let (status, stderr) = ended(child);
    assert_eq!(status.signal(), Some(Signal::TERM.as_raw()));
    assert!(stderr.contains("bottleneck"), "{stderr}");
}

/// Issue 11, item 2: `-N` names the accel in its JSON, progress and summary alike; without
/// it, the name is null.
#[test]
fn json_carries_the_name() {
    let mut watched = Watched::start("auto", &["-N", "backup", "--interval", "0.1s"]);
    let event = watched.events.recv_timeout(GENEROUS).expect("a progress event");
    assert_eq!((&event["event"], &event["name"]), (&"progress".into(), &"backup".into()));
    drop(watched.child.stdin.take());
    let (summary, _) = watched.finish();
    assert_eq!(summary["name"], "backup");
    let out = accel("auto", &["--json"]).stdin(Stdio::null()).output().unwrap();
    let summary: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(summary["name"].is_null(), "{summary}");
}

/// Issue 11, item 9: `--interval` sets how often progress comes: JSON events closer together
/// than the default second. (A gap is never shorter than asked: the watcher sleeps it.)
#[test]
fn interval_sets_the_pace() {
    let watched = Watched::start("auto", &["--interval", "0.2s"]);
    let seconds: Vec<f64> = (0..6)
        .map(|_| {
            watched.events.recv_timeout(GENEROUS).expect("progress")["seconds"].as_f64().unwrap()
        })
        .collect();
    assert!(seconds.windows(2).any(|w| w[1] - w[0] < 0.9), "{seconds:?}");
    let out = accel("auto", &["--interval", "0.01s"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: --interval 0.01s: too short: at least 0.1s\n"
    );
}

/// A producer writing 4 MiB in 64 KiB pieces, 20 ms apart (1.3 s), piped into `accel ARGS`,
/// whose stdout is thrown away; what the script `then` prints. Both run in a directory of
/// their own, removed after.
fn paced_script(args: &str, then: &str) -> std::process::Output {
    sh(&format!(
        "dir=$(mktemp -d) && cd \"$dir\" || exit; \
         for i in $(seq 64); do head -c 65536 /dev/zero; sleep 0.02; done | \"$ACCEL\" {args} \
         >/dev/null; {then}; cd / && rm -r \"$dir\""
    ))
}

/// Issue 11, item 9: `-n` writes a number per interval, whatever stderr is: the percent done
/// with a size, rising to 100; the bytes delivered without one.
#[test]
fn numeric_progress_for_scripts() {
    let out = paced_script("-n --expect 4M --interval 0.1s 2>numbers", "echo $?; cat numbers");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("0"), "accel's status first: {text}");
    let numbers: Vec<u64> =
        lines.map(|l| l.parse().unwrap_or_else(|_| panic!("{l:?} in {text}"))).collect();
    assert!(numbers.len() >= 3, "a number per interval: {text}");
    assert!(
        numbers.windows(2).all(|w| w[0] <= w[1]) && numbers.iter().all(|&n| n <= 100),
        "{text}"
    );
    assert_eq!(numbers.last(), Some(&100), "{text}");
    let out = paced_script("-n --interval 0.1s 2>numbers", "tail -n 1 numbers");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4194304\n");
}

/// Issue 11, item 9: `--progress-fd` sends the progress elsewhere: into a file, a line per
/// interval, named, then the verdict; nothing of it on stderr. A descriptor that is not open
/// is refused before anything is read.
#[test]
fn progress_to_another_descriptor() {
    let out = paced_script(
        "-N copy --interval 0.2s --progress-fd 3 3>progress 2>errors",
        "cat progress; echo ---; cat errors",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (progress, errors) = text.split_once("---\n").unwrap();
    assert_eq!(errors, "", "{text}");
    let lines: Vec<&str> = progress.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    for line in &lines[..lines.len() - 1] {
        assert!(line.starts_with("copy: in ") && is_progress_line(line), "{line:?}");
    }
    assert!(lines[lines.len() - 2].contains("out    4 MiB"), "the final line: {text}");
    let verdict = lines.last().unwrap().strip_prefix("copy: ").unwrap();
    assert!(is_verdict(verdict), "{text}");

    let out = sh("echo data | \"$ACCEL\" --progress-fd 9");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing read, nothing written");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "accel: --progress-fd 9: Bad file descriptor; open it in the shell, e.g. 3>progress.log\n"
    );
}

// ----- a real terminal -----

fn has_progress_line(screen: &str) -> bool {
    screen.lines().any(is_progress_line)
}

fn is_progress_line(line: &str) -> bool {
    line.contains("buf ") && line.contains('%') && line.contains("out ")
}

/// Issue 11, item 3: on a terminal, in the foreground, the line appears, changes, and is left
/// standing at the end with one line of verdict under it, not the report; `-v` adds the
/// report. In a background job nothing is drawn.
#[test]
fn progress_on_a_real_terminal() {
    if !has_tmux() {
        return;
    }
    let foreground = format!("{PRODUCER} | \"{ACCEL}\" > /dev/null; echo DONE; sleep 30");
    let screens = screens_of("fg", &foreground);
    let drawn: Vec<_> = screens.iter().filter(|s| has_progress_line(s)).collect();
    assert!(drawn.len() >= 2, "the progress line appears while the pipeline runs: {screens:#?}");
    assert!(drawn.windows(2).any(|w| w[0] != w[1]), "and updates");
    let last = screens.last().unwrap();
    let lines: Vec<&str> = last.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "the line, the verdict, DONE: {last}");
    assert!(is_progress_line(lines[0]) && lines[0].contains(" 6.87 MiB "), "{last}");
    assert!(is_verdict(lines[1]), "{last}");
    assert_eq!(lines[2], "DONE");

    let stats = format!("{PRODUCER} | \"{ACCEL}\" -v > /dev/null; echo DONE; sleep 30");
    let last = screens_of("stats", &stats).pop().unwrap();
    let lines: Vec<&str> = last.lines().filter(|l| !l.is_empty()).collect();
    assert!(is_progress_line(lines[0]), "{last}");
    assert!(lines[1].starts_with("in ") && lines[1].contains(" 7200000 bytes "), "{last}");
    assert!(is_verdict(lines[lines.len() - 2]), "the report ends with the verdict: {last}");

    // A background job (job control on): no line, and so no verdict.
    let background =
        format!("set -m; ( {PRODUCER} | \"{ACCEL}\" > /dev/null ) & wait; echo DONE; sleep 30");
    let screens = screens_of("bg", &background);
    assert!(screens.last().unwrap().contains("DONE"));
    assert!(
        screens.iter().all(|s| !has_progress_line(s) && !s.contains("bottleneck")),
        "{screens:#?}"
    );
}

/// Issue 23, item 6: the consumer goes away while the line is up. accel ends by SIGPIPE, as
/// `cat` does, and under its line says whose reader went away and what it did not get, not a
/// verdict that reads as if the run had finished.
#[test]
fn a_consumer_that_went_away_is_said_under_the_line() {
    if !has_tmux() {
        return;
    }
    let script = format!(
        "{PRODUCER} | \"{ACCEL}\" | head -c 3000000 > /dev/null; \
         echo \"DONE ${{PIPESTATUS[1]}}\"; sleep 30"
    );
    let last = screens_of("gone", &script).pop().unwrap();
    let lines: Vec<&str> = last.lines().filter(|l| !l.is_empty()).collect();
    assert!(is_progress_line(lines[0]), "{last}");
    assert!(lines[1].starts_with("the reader of stdout went away: "), "{last}");
    assert!(lines.iter().all(|l| !is_verdict(l)), "{last}");
    assert_eq!(lines.last(), Some(&"DONE 141"), "{last}");
}

/// Issue 11, item 2: two named accels in one pipeline, on one terminal: each draws on a row
/// of its own, never over the other's; at the end each final line stands with its verdict.
#[test]
fn two_named_accels_share_a_terminal() {
    if !has_tmux() {
        return;
    }
    let script = format!(
        "{PRODUCER} | \"{ACCEL}\" -N first --expect 7200000 | gzip -1 | \"{ACCEL}\" -N second \
         > /dev/null; echo DONE; sleep 30"
    );
    let screens = screens_of("two", &script);
    let rows = |screen: &str, name: &str| -> usize {
        let prefix = format!("{name}: ");
        screen.lines().filter(|l| l.starts_with(&prefix) && is_progress_line(l)).count()
    };
    for screen in &screens {
        for line in screen.lines() {
            assert!(!(line.contains("first:") && line.contains("second:")), "garbled: {screen}");
        }
        assert!(rows(screen, "first") <= 1 && rows(screen, "second") <= 1, "{screen}");
    }
    assert!(
        screens.iter().any(|s| rows(s, "first") == 1 && rows(s, "second") == 1),
        "both lines are up at once: {screens:#?}"
    );
    let last = screens.last().unwrap();
    assert!(last.contains("DONE"), "{last}");
    let lines: Vec<&str> = last.lines().collect();
    for name in ["first", "second"] {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("{name}: ")) && is_progress_line(l))
            .unwrap_or_else(|| panic!("{name}'s final line stands: {last}"));
        let verdict = lines[at + 1].strip_prefix(&format!("{name}: ")).unwrap_or_default();
        assert!(is_verdict(verdict), "{name}'s verdict under its line: {last}");
    }
    assert!(last.contains("first: ") && last.contains("100%"), "{last}");
}
