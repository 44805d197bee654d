//! What accel says about its command line (issue 11, item 6): every refusal is one line,
//! `accel: <what>: <why>`, with status 2 and nothing read; repeated options, the size
//! suffixes, the memory warning, and what `-q` silences.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::util::*;

/// accel `args` with 1 MiB on stdin: its status, stdout's length, and stderr.
fn run(args: &[&str]) -> (Option<i32>, usize, String) {
    let mut child = spawn_piped("auto", args);
    let said = Said::collect(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    // A refusing accel may have gone before the producer is done.
    let producer = std::thread::spawn(move || {
        let _ = stdin.write_all(&pattern(1 << 20, 11));
    });
    let stdout = drain(child.stdout.take().unwrap());
    let (status, stderr) = said.ended(&mut child);
    producer.join().unwrap();
    (status.code(), stdout.len(), stderr)
}

#[test]
fn each_refusal_is_one_line_with_status_2() {
    let cases: [(&[&str], &str); 13] = [
        (&["--bogus"], "--bogus: unknown option; accel --help lists the options"),
        (&["--engine", "foo"], "--engine foo: not a value it takes: expected auto, splice or copy"),
        (&["--json="], "--json=: no value after '='"),
        (
            &["--json", "out.json"],
            "--json out.json: the value of --json goes after '=': --json=out.json (--json alone \
             takes none)",
        ),
        (
            &["-m", "-5"],
            "-m -5: not a size: expected a number of bytes with an optional binary suffix K, M, \
             G, T, P or E (also KiB, MB, ...; 1K = 1024), e.g. 512K, 32M, 1.5G",
        ),
        (&["-m"], "-m: a SIZE must follow it"),
        (&["-f", "-a"], "-f: cannot be used with -a"),
        (
            &["--hash-file", "sums"],
            "--hash-file sums: no --hash was given: name the hash to write, e.g. --hash sha256",
        ),
        // A FILE operand is read, as cat reads it; one that is not there is said at once.
        (&["backup.tar"], "backup.tar: No such file or directory"),
        // pv's habits, pointed to accel's nearest option (issue 37).
        (
            &["-pterb"],
            "-pterb: pv's display switches; accel's progress line shows the time, the rates and \
             bytes, the buffer's fill, and with a size the bar, percent done and ETA, without \
             them; or run accel as pv (see accel --help) to choose",
        ),
        (&["-L", "1m"], "-L: unknown option; for pv's -L (rate limit) use -r 1m"),
        (&["-C"], "-C: unknown option; for pv's -C use --engine copy"),
        (&["-i", "0.5"], "-i 0.5: No such file or directory; pv's -i SEC is --interval here"),
    ];
    for (args, why) in cases {
        let (status, written, stderr) = run(args);
        assert_eq!(stderr, format!("accel: {why}\n"), "{args:?}");
        assert_eq!((status, written), (Some(2), 0), "{args:?}: status 2, nothing passed");
    }
}

#[test]
fn the_last_of_a_repeated_option_counts() {
    let (status, written, stderr) = run(&["-m", "1M", "-m", "2M", "--json"]);
    assert_eq!((status, written), (Some(0), 1 << 20), "{stderr}");
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(summary["capacity_bytes"], 2 << 20);
}

/// Every suffix the size message lists is taken; a size beyond the machine's memory runs,
/// held to the memory, saying so once.
#[test]
fn sizes_as_the_message_says() {
    let (status, written, stderr) = run(&["-m", "1P"]);
    assert_eq!((status, written), (Some(0), 1 << 20), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("accel: -m 1 PiB is more than "), "{stderr}");
    assert!(stderr.contains(" allows; at most "), "{stderr}");
    let (status, _, stderr) = run(&["-m", "1P", "-q"]);
    assert_eq!((status, stderr.as_str()), (Some(0), ""), "-q silences warnings");
}

/// `-q` silences what accel says about the run, not what was asked for by name, nor errors;
/// of `-q` and `-v`, the later counts.
#[test]
fn quiet_means_one_thing() {
    let (_, _, stderr) = run(&["-q", "-v"]);
    assert!(stderr.contains("bottleneck"), "-v after -q: the report: {stderr}");
    let (_, _, stderr) = run(&["-v", "-q"]);
    assert_eq!(stderr, "", "-q after -v: nothing");
    let (_, _, stderr) = run(&["-q", "--json"]);
    let summary: Value = serde_json::from_str(&stderr).expect("the summary, asked for");
    assert_eq!(summary["event"], "summary");
    let (_, _, stderr) = run(&["-q", "--hash", "md5"]);
    assert_eq!(stderr.lines().count(), 1, "the hash line, asked for: {stderr}");
    let (_, _, stderr) = run(&["-q", "--debug"]);
    assert!(stderr.starts_with("accel: "), "--debug, asked for: {stderr}");
    let (status, _, stderr) = run(&["-q", "-i", "/nonexistent"]);
    assert_eq!(status, Some(2));
    assert!(stderr.starts_with("accel: -i /nonexistent: "), "errors always: {stderr}");
}

/// Issue 11, item 8: `--help` lists `--generate`, and the man page it makes stands alone.
#[test]
fn help_lists_generate_and_the_man_page_is_whole() {
    let out = accel("auto", &["--help"]).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--generate <WHAT>"), "{help}");
    assert!(help.contains("-q, --quiet") && help.contains("--json, the --hash lines"), "{help}");
    let out = accel("auto", &["--generate", "man"]).stdin(Stdio::null()).output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    for section in ["JSON FIELDS", "SIGNALS", "EXIT STATUS", "FILES"] {
        assert!(page.contains(&format!(".SH \"{section}\"")), "{section}");
    }
}

/// Issue 17, item 4: a duration too long for the clock (`10000000000000000000` seconds passed
/// the parser, then overflowed an instant and aborted with status 134) is refused by every
/// duration option, saying the longest there is; a hundred years is still taken.
#[test]
fn a_duration_beyond_the_clock_is_refused() {
    let huge = "10000000000000000000";
    let cases: [&[&str]; 4] = [
        &["--stall-timeout", huge],
        &["--stall-timeout", huge, "--to", "127.0.0.1:9", "--insecure"],
        &["--interval", huge],
        &["--from", "127.0.0.1:0", "--insecure", "--accept-timeout", huge],
    ];
    for args in cases {
        let option = args.iter().find(|a| a.ends_with("timeout") || **a == "--interval").unwrap();
        let (status, written, stderr) = run(args);
        assert_eq!(
            stderr,
            format!("accel: {option} {huge}: too long: at most 100 years (3155760000s)\n"),
            "{args:?}"
        );
        assert_eq!((status, written), (Some(2), 0), "{args:?}: status 2, nothing passed");
    }
    let (status, written, stderr) =
        run(&["--stall-timeout", "3155760000", "--interval", "876000h"]);
    assert_eq!((status, written), (Some(0), 1 << 20), "a hundred years is taken: {stderr}");
}

/// Issue 17, item 12: a `--spill-size` below what the spill reserves at once (1 MiB) could
/// never spill a byte (`full with 0 B on disk`): it is refused, saying the least it takes.
#[test]
fn a_spill_size_below_a_step_is_refused() {
    let dir = Scratch::new("spill-size");
    let (status, written, stderr) = run(&["--spill", dir.arg(), "--spill-size", "500K"]);
    assert_eq!(
        stderr,
        "accel: --spill-size 500K: too small: the spill takes disk 1 MiB at a time; at least 1M\n"
    );
    assert_eq!((status, written), (Some(2), 0), "status 2, nothing passed");
    let (status, written, stderr) = run(&["--spill", dir.arg(), "--spill-size", "1M"]);
    assert_eq!((status, written), (Some(0), 1 << 20), "1 MiB is taken: {stderr}");
}
