//! FILE operands, read in turn as `cat` and `pv` read them, and accel run as `pv` (a link):
//! pv's command lines as syncoid, btrbk and people at a terminal write them.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;

use crate::util::control::with_socket_in;
use crate::util::terminal::{PRODUCER, has_tmux, is_verdict, screens_of};
use crate::util::*;

/// `accel ARGS` (engine `engine`) with `stdin` on its stdin: its status, stdout and stderr.
fn run_with(engine: &str, args: &[&str], stdin: &[u8]) -> (ExitStatus, Vec<u8>, String) {
    run_fed(spawn_piped(engine, args), stdin)
}

/// Files of these sizes in `scratch`, each its own pattern; their paths.
fn files(scratch: &Scratch, sizes: &[usize]) -> Vec<PathBuf> {
    sizes
        .iter()
        .enumerate()
        .map(|(at, &size)| {
            let path = scratch.path(&format!("file{at}"));
            std::fs::write(&path, pattern(size, 40 + at as u64)).unwrap();
            path
        })
        .collect()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `accel A B - C`: each file in turn, stdin where `-` stands, byte for byte, with a buffer
/// small enough that the backlog, the pool pipes and memory all take part; an empty file
/// between two others changes nothing.
fn files_are_read_in_turn(engine: &str) {
    let scratch = Scratch::new("files-in-turn");
    let paths = files(&scratch, &[(3 << 20) + 17, 0, 100_003, 1]);
    let stdin = pattern(777_777, 49);
    let [a, empty, b, c] = [0, 1, 2, 3].map(|at| text(&paths[at]));
    for (args, want) in [
        (vec![a, empty, b], [&paths[0], &paths[2]].map(|p| std::fs::read(p).unwrap()).concat()),
        (
            vec![a, "-", b, c],
            [
                std::fs::read(a).unwrap(),
                stdin.clone(),
                std::fs::read(b).unwrap(),
                std::fs::read(c).unwrap(),
            ]
            .concat(),
        ),
    ] {
        let mut all = vec!["-q", "-m", "256K"];
        all.extend(&args);
        let (status, out, said) = run_with(engine, &all, &stdin);
        assert_eq!(status.code(), Some(0), "{args:?}: {said}");
        assert_same(&out, &want, &format!("accel {args:?}"));
        assert_eq!(said, "", "{args:?}");
    }
}

per_engine!(files_are_read_in_turn);

/// A FILE operand that is missing, a directory, or unreadable is refused before a byte is
/// read, the first file included: status 2, one line naming it.
#[test]
fn an_operand_that_cannot_be_read_is_refused_before_anything_is_read() {
    let scratch = Scratch::new("files-refused");
    let paths = files(&scratch, &[1000]);
    let missing = scratch.path("missing");
    std::fs::create_dir(scratch.path("dir")).unwrap();
    for (operand, why) in
        [(missing.clone(), "No such file or directory"), (scratch.path("dir"), "is a directory")]
    {
        let args = [text(&paths[0]), text(&operand)];
        let (status, out, said) = run_with("auto", &args, b"");
        assert_eq!(status.code(), Some(2), "{said}");
        assert_eq!(said, format!("accel: {}: {why}\n", operand.display()));
        assert!(out.is_empty(), "{} bytes were written", out.len());
    }
    // One operand alone, as -i FILE is refused, without the option's name.
    let (status, _, said) = run_with("auto", &[text(&missing)], b"");
    assert_eq!(status.code(), Some(2));
    assert_eq!(said, format!("accel: {}: No such file or directory\n", missing.display()));
}

/// A file removed once accel has started fails the input when it is reached: status 1, the
/// file named, what came before it delivered.
#[test]
fn a_file_gone_when_it_is_reached_fails_the_input() {
    let scratch = Scratch::new("files-gone");
    let fifo = scratch.fifo("first");
    let later = files(&scratch, &[5000]).remove(0);
    let mut child = spawn_piped("auto", &["-q", text(&fifo), text(&later)]);
    let said = Said::collect(&mut child);
    let mut first = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    // A line through shows accel past its checks, reading the first file.
    first.write_all(b"first\n").unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = [0u8; 6];
    stdout.read_exact(&mut got).unwrap();
    std::fs::remove_file(&later).unwrap();
    drop(first);
    let rest = drain(stdout);
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(rest.is_empty());
    assert_eq!(
        said,
        format!(
            "accel: read from {}, {}: {}: No such file or directory; the 6 bytes read before it \
             were delivered\n",
            fifo.display(),
            later.display(),
            later.display()
        )
    );
}

/// When every operand is a regular file, their total is the size expected: the final `-n`
/// figure is 100 (percent done), not a count of bytes. With stdin (a pipe) among them, the
/// size is unknown and the figure is the bytes delivered.
#[test]
fn regular_files_give_their_total_as_the_size_expected() {
    let scratch = Scratch::new("files-size");
    let paths = files(&scratch, &[300_000, 200_000]);
    let (a, b) = (text(&paths[0]), text(&paths[1]));
    let (status, out, said) = run_with("auto", &["-n", "--interval", "60", a, b], b"");
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(out.len(), 500_000);
    assert_eq!(said, "100\n");
    let (status, _, said) = run_with("auto", &["-n", "--interval", "60", a, "-", b], b"abc");
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(said, "500003\n");
}

/// A FILE operand that is also the output is refused, naming it, as `-i` is.
#[test]
fn an_operand_that_is_the_output_is_refused() {
    let scratch = Scratch::new("files-output");
    let paths = files(&scratch, &[1000, 1000]);
    let output = std::fs::OpenOptions::new().append(true).open(&paths[1]).unwrap();
    let status = accel("auto", &[text(&paths[0]), text(&paths[1])])
        .stdout(output)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&status.stderr),
        format!(
            "accel: {} and stdout are the same file: input file is output file\n",
            paths[1].display()
        )
    );
}

// ----- accel as pv -----

/// The pv lines of syncoid (`-p -t -e -r -b -s SIZE`, SIZE a full u64 or 0 for unknown), of
/// btrbk before 0.27 (`-trab` for --progress, `-q -L 10m` for its rate limit) and of pyznap
/// (`-f -w 100 -s SIZE`): every byte through, status 0; with stderr not a terminal, nothing
/// said but what -f asks for, a line per interval.
#[test]
fn the_pv_lines_tools_write_pass_every_byte() {
    let link = AccelAs::new("pv", "tools");
    let data = pattern((3 << 20) + 5, 50);
    let size = data.len().to_string();
    let invocations: &[&[&str]] = &[
        &["-p", "-t", "-e", "-r", "-b", "-s", &size],
        &["-p", "-t", "-e", "-r", "-b", "-s", "18446744073709551615"],
        &["-p", "-t", "-e", "-r", "-b", "-s", "0"],
        &["-trab"],
        &["-q", "-L", "10m"],
    ];
    for args in invocations {
        let (status, out, said) = link.run(args, &data);
        assert_eq!(status.code(), Some(0), "pv {args:?}: {said}");
        assert_same(&out, &data, &format!("pv {args:?}"));
        assert_eq!(said, "", "pv {args:?} with stderr not a terminal");
    }
    let (status, out, said) = link.run(&["-f", "-w", "100", "-s", &size], &data);
    assert_eq!(status.code(), Some(0), "{said}");
    assert_same(&out, &data, "pv -f -w 100");
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines.len() >= 2, "the final line and the verdict: {said}");
    let last = lines[lines.len() - 2];
    assert!(last.contains("100%") && last.chars().count() <= 100, "{said}");
}

/// pv's own examples and habits: `pv FILE | ...`, `pv -s $(stat ...) < FILE`, FILE operands
/// and options in any order, `--` before a name that starts with `-`, `-` for stdin.
#[test]
fn files_and_options_in_pvs_order() {
    let link = AccelAs::new("pv", "files");
    let paths = files(&link.dir, &[200_000, 300_000]);
    let dashed = link.dir.path("-pterb");
    std::fs::write(&dashed, b"dashed").unwrap();
    let stdin = pattern(1000, 51);
    let read = |path: &Path| std::fs::read(path).unwrap();
    let cases: Vec<(Vec<&str>, Vec<u8>)> = vec![
        (vec![text(&paths[0]), "-q"], read(&paths[0])),
        (
            vec!["-q", text(&paths[0]), "-", text(&paths[1])],
            [read(&paths[0]), stdin.clone(), read(&paths[1])].concat(),
        ),
        (vec!["-q", "--", text(&dashed)], b"dashed".to_vec()),
        (vec!["-qs", "1000"], stdin.clone()),
    ];
    for (args, want) in cases {
        let (status, out, said) = link.run(&args, &stdin);
        assert_eq!(status.code(), Some(0), "pv {args:?}: {said}");
        assert_same(&out, &want, &format!("pv {args:?}"));
    }
}

/// `pv -n`, as `dialog --gauge` reads it: whole numbers, one per line, the percent done,
/// never going back, ending at 100; with `-l` and `-b`, the lines; with `-t`, the seconds first.
#[test]
fn numeric_output_for_dialog() {
    let link = AccelAs::new("pv", "numeric");
    let path = link.dir.path("data");
    std::fs::write(&path, pattern(4 << 20, 52)).unwrap();
    // Slowly enough for several lines: 4 MiB at 4 MiB/s, a line every 0.2 s.
    let (status, out, said) = link.run(&["-n", "-i", "0.2", "-L", "4m", text(&path)], b"");
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(out.len(), 4 << 20);
    let figures: Vec<u64> = said.lines().map(|l| l.parse().expect("a whole number")).collect();
    assert!(figures.len() >= 2, "{said}");
    assert!(figures.windows(2).all(|w| w[0] <= w[1]), "{said}");
    assert_eq!(figures.last(), Some(&100), "{said}");
    assert!(figures.iter().all(|&f| f <= 100), "{said}");

    let lines = "one\ntwo\nthree\n".repeat(1000);
    let (status, _, said) = link.run(&["-n", "-l", "-b", "-i", "60"], lines.as_bytes());
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(said, "3000\n");
    let (_, _, said) = link.run(&["-n", "-l", "-s", "6000", "-i", "60"], lines.as_bytes());
    assert_eq!(said, "50\n");
    let (_, _, said) = link.run(&["-n", "-0", "-b", "-i", "60"], b"a\0b\0c");
    assert_eq!(said, "2\n");
    // What accel does differently is not said into what reads the numbers.
    let (_, _, said) = link.run(&["-n", "-K", "-i", "60"], b"12345");
    assert_eq!(said, "5\n");
    let (_, _, said) = link.run(&["-n", "-t", "-b", "-i", "60"], b"12345");
    let (seconds, count) = said.trim_end().split_once(' ').expect(&said);
    assert!(seconds.parse::<f64>().is_ok() && seconds.contains('.'), "{said}");
    assert_eq!(count, "5");
}

/// `pv ARGS` fed for ever (as `yes` feeds it) while its stdout is read up to `most` bytes,
/// then let go: its status, and what it wrote.
fn fed_for_ever(link: &AccelAs, args: &[&str], most: usize) -> (ExitStatus, Vec<u8>) {
    let mut child = piped(Command::new(&link.path).args(args));
    let said = Said::collect(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        let block = "y\n".repeat(1 << 15);
        while stdin.write_all(block.as_bytes()).is_ok() {}
    });
    let mut stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let (mut got, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        while got.len() < most {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        got
    });
    // Killed, and so failing, if it does not end by itself.
    let (status, _) = said.ended(&mut child);
    writer.join().unwrap();
    (status, reader.join().unwrap())
}

/// `-S -s SIZE` stops after SIZE bytes, as if the input ended there: status 0, the output
/// ends there, however much more the producer would write; spliced or not (`-C`).
#[test]
fn stop_at_size() {
    let link = AccelAs::new("pv", "stop");
    for args in [&["-q", "-S", "-s", "1000000"][..], &["-q", "-S", "-s", "1000000", "-C"]] {
        let (status, got) = fed_for_ever(&link, args, usize::MAX);
        assert_eq!(status.code(), Some(0), "pv {args:?}");
        assert_same(&got, "y\n".repeat(500_000).as_bytes(), &format!("pv {args:?}"));
    }
}

/// pv exits 0 when its consumer goes away, which makes a cut-short stream look whole; accel
/// as pv dies by SIGPIPE, as cat does.
#[test]
fn a_consumer_that_went_away_is_not_a_success() {
    use std::os::unix::process::ExitStatusExt;
    let link = AccelAs::new("pv", "epipe");
    let (status, got) = fed_for_ever(&link, &["-q"], 10);
    assert!(got.len() >= 10);
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status}");
}

/// Each refusal is one line, `accel: pv ...`, status 2, nothing read: an unknown option, a
/// bad size, a missing FILE, an option accel does not do.
#[test]
fn refusals_are_one_line_with_status_2() {
    let link = AccelAs::new("pv", "refusals");
    let missing = link.dir.path("missing");
    let cases: &[(&[&str], String)] = &[
        (&["-j"], "accel: pv -j: unknown option; pv -h lists the options accel takes\n".into()),
        (&["-ptj"], "accel: pv -j: unknown option; pv -h lists the options accel takes\n".into()),
        (
            &["-s", "lots"],
            "accel: pv -s lots: not a size: expected a number with an optional K, M, G or T \
             (multiples of 1024), e.g. 100M or 1.5G\n"
                .into(),
        ),
        (&["-L"], "accel: pv -L: a value RATE must follow it\n".into()),
        (&[text(&missing)], format!("accel: {}: No such file or directory\n", missing.display())),
        (
            &["-E"],
            "accel: pv -E: accel never turns what cannot be read into zeros: a read error ends \
             the run (status 1), what was read delivered; dd conv=noerror,sync or ddrescue do \
             that\n"
                .into(),
        ),
    ];
    for (args, want) in cases {
        let (status, out, said) = link.run(args, b"data");
        assert_eq!(status.code(), Some(2), "pv {args:?}: {said}");
        assert_eq!(&said, want, "pv {args:?}");
        assert!(out.is_empty(), "pv {args:?}");
    }
}

/// Every option in the real pv's `-h` is in accel's `pv -h`; each one accel refuses is refused
/// with its reason and status 2, and each one it takes is taken: a run with it moves every
/// byte (`-R`, `-Q`, `-d`, `-P` aside: they do not move bytes).
#[test]
fn every_option_of_pvs_help_is_done_or_refused() {
    let link = AccelAs::new("pv", "options");
    let ours = Command::new(&link.path).arg("-h").output().unwrap();
    assert!(ours.status.success());
    let ours = String::from_utf8(ours.stdout).unwrap();
    // `  -s, --size SIZE ...`: the letter, and whether a value follows the long name.
    let options = |help: &str| -> Vec<(char, bool)> {
        help.lines()
            .filter_map(|line| {
                let line = line.trim_start().strip_prefix('-')?;
                let letter = line.chars().next()?;
                let words: Vec<&str> = line.split_whitespace().take(3).collect();
                let value =
                    words.get(2).is_some_and(|w| w.starts_with(|c: char| c.is_ascii_uppercase()));
                (line.chars().nth(1) == Some(',')).then_some((letter, value))
            })
            .collect()
    };
    let listed = options(&ours);
    let mut theirs: Vec<(char, bool)> = Vec::new();
    if require("pv (apt-get install pv)", has("pv", "-V")) {
        let help = Command::new("pv").arg("-h").output().unwrap();
        theirs = options(&String::from_utf8_lossy(&help.stdout));
        assert!(theirs.len() > 30, "{theirs:?}");
    }
    theirs.extend(listed.iter().copied());
    let data = pattern(100_000, 53);
    for (letter, takes_value) in theirs {
        let line = ours
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("-{letter},")))
            .unwrap_or_else(|| panic!("pv -{letter} is not in accel's pv -h: {listed:?}"));
        if let Some((_, why)) = line.split_once(": refused: ") {
            let mut args = vec![format!("-{letter}")];
            if takes_value {
                args.push("1".into());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (status, out, said) = link.run(&args, b"");
            assert_eq!(status.code(), Some(2), "pv -{letter}: {said}");
            assert_eq!(said, format!("accel: pv -{letter}: {why}\n"), "pv -{letter}");
            assert!(out.is_empty());
            continue;
        }
        let value = match letter {
            'A' | 'w' | 'H' | 'm' => "10",
            'D' | 'i' => "0.5",
            's' | 'L' | 'B' => "1M",
            'F' => "%b %t",
            'N' => "name",
            'u' => "plain",
            'x' => "window",
            'o' => continue, // its own test, below
            'R' | 'Q' | 'd' | 'P' | 'h' | 'V' => continue,
            _ if takes_value => panic!("pv -{letter}: no value chosen for it here"),
            _ => "",
        };
        let mut args = vec![format!("-{letter}")];
        if !value.is_empty() {
            args.push(value.into());
        }
        args.push("-q".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, out, said) = link.run(&args, &data);
        assert_eq!(status.code(), Some(0), "pv {args:?}: {said}");
        if letter == 'X' || letter == 'S' {
            assert!(out.len() <= data.len(), "pv {args:?}");
        } else {
            assert_same(&out, &data, &format!("pv {args:?}"));
        }
    }
}

/// `-o FILE` writes FILE, over what was there, as pv's does; `-X` throws it away.
#[test]
fn output_and_discard() {
    let link = AccelAs::new("pv", "output");
    let out = link.dir.path("out");
    std::fs::write(&out, "old contents, longer than the new").unwrap();
    let (status, stdout, said) = link.run(&["-q", "-o", text(&out)], b"new");
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(stdout.is_empty());
    assert_eq!(std::fs::read(&out).unwrap(), b"new");
    let (status, stdout, _) = link.run(&["-qX"], b"gone");
    assert_eq!((status.code(), stdout.len()), (Some(0), 0));
}

/// `pv -R PID -L RATE` changes the cap of an accel running as pv, as `accel -R PID -r RATE`:
/// a run capped at 10 KiB/s that would take minutes ends once the cap is lifted.
#[test]
fn remote_lifts_a_running_ones_cap() {
    let link = AccelAs::new("pv", "remote");
    let runtime = Scratch::new("pv-remote-runtime");
    let mut command = Command::new(&link.path);
    command.args(["-q", "-L", "10k"]);
    let (mut child, _) = with_socket_in(&runtime, command);
    let said = Said::collect(&mut child);
    let stdin = child.stdin.take().unwrap();
    let data = pattern(4 << 20, 54);
    let sent = data.clone();
    let writer = thread::spawn(move || feed(stdin, &sent, 1 << 16));
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || drain(stdout));
    let pid = child.id().to_string();
    let out = Command::new(&link.path)
        .args(["-R", &pid, "-L", "0", "-N", "x"])
        .env("XDG_RUNTIME_DIR", runtime.dir())
        .output()
        .unwrap();
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{told}");
    assert!(told.contains("→ none"), "{told}");
    assert!(
        told.starts_with("accel: pv -R: only -L changes a running accel; not sent: -N\n"),
        "{told}"
    );
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(0), "{said}");
    writer.join().unwrap().unwrap();
    assert_same(&reader.join().unwrap(), &data, "pv -L 10k, lifted");
}

// ----- on a real terminal -----

/// The final line on `screen` that shows progress, and the line under it.
fn final_line(screen: &str) -> (&str, &str) {
    let lines: Vec<&str> = screen.lines().filter(|l| !l.is_empty()).collect();
    let at = lines
        .iter()
        .rposition(|l| l.contains("0:00:"))
        .unwrap_or_else(|| panic!("no progress line left standing: {screen}"));
    (lines[at], lines.get(at + 1).copied().unwrap_or_default())
}

/// `pv -pterb -L 2m FILE`: the parts pv's switches name, in accel's line (bytes and rates in
/// and out, the time, the bar, percent done and ETA; no fill), the cap shown; the run takes
/// as long as the cap makes it, and the final line stands at 100 % with the verdict under it.
#[test]
fn pterb_and_a_rate_cap_on_a_terminal() {
    if !has_tmux() {
        return;
    }
    let link = AccelAs::new("pv", "pterb");
    let file = link.dir.path("data");
    std::fs::write(&file, pattern(7 << 20, 55)).unwrap();
    let script =
        format!("\"{}\" -pterb -L 2m {} > /dev/null; echo DONE; sleep 30", link.arg(), text(&file));
    let screens = screens_of("pterb", &script);
    let drawn: Vec<&String> = screens.iter().filter(|s| s.contains("ETA")).collect();
    assert!(!drawn.is_empty(), "{screens:#?}");
    for screen in &drawn {
        let line = screen.lines().find(|l| l.contains("ETA")).unwrap();
        // At 80 columns, the input's side gives way first.
        assert!(line.starts_with("out ") && line.contains("max 2 MiB/s"), "{line}");
        assert!(line.contains("%") && line.contains("[") && !line.contains("buf"), "{line}");
    }
    let (last, under) = final_line(screens.last().unwrap());
    assert!(last.ends_with("100%") && !last.contains("ETA"), "{last}");
    assert!(is_verdict(under), "{under}");
    // 7 MiB at 2 MiB/s: at least three seconds, however loaded the machine.
    let elapsed = last.split_whitespace().find(|w| w.starts_with("0:00:")).unwrap();
    assert!(elapsed >= "0:00:03", "{last}");
}

/// `pv -s $(stat -c %s FILE) < FILE` through a pipe: the size given makes the percent done;
/// `pv -N name -c` twice in a pipeline: each named, on a row of its own; `pv -l`: lines.
#[test]
fn size_names_and_lines_on_a_terminal() {
    if !has_tmux() {
        return;
    }
    let link = AccelAs::new("pv", "terminal");
    let pv = link.arg();
    let file = link.dir.path("data");
    std::fs::write(&file, pattern(6 << 20, 56)).unwrap();
    let file = text(&file);
    let script = format!(
        "cat {file} | \"{pv}\" -s $(stat -c %s {file}) -L 3m > /dev/null; echo DONE; sleep 30"
    );
    let screen = screens_of("size", &script).pop().unwrap();
    let (last, _) = final_line(&screen);
    assert!(last.contains("100%") && last.contains("6 MiB"), "{last}");

    let producer = PRODUCER;
    let script = format!(
        "{producer} | \"{pv}\" -N first -c | gzip -1 | \"{pv}\" -N second -c > /dev/null; \
         echo DONE; sleep 30"
    );
    let screens = screens_of("names", &script);
    let rows = |screen: &str, name: &str| {
        screen
            .lines()
            .filter(|l| l.starts_with(&format!("{name}: ")) && l.contains("0:00:"))
            .count()
    };
    assert!(
        screens.iter().all(|s| rows(s, "first") <= 1 && rows(s, "second") <= 1),
        "{screens:#?}"
    );
    assert!(
        screens.iter().any(|s| rows(s, "first") == 1 && rows(s, "second") == 1),
        "{screens:#?}"
    );

    let script = format!(
        "for i in $(seq 20); do seq 1 20000; sleep 0.1; done | \"{pv}\" -l > /dev/null; \
         echo DONE; sleep 30"
    );
    let screen = screens_of("lines", &script).pop().unwrap();
    let (last, _) = final_line(&screen);
    assert!(last.starts_with("in  400k lines "), "{last}");
}

/// `pv -n` into `dialog --gauge`, as its manual suggests: the gauge moves and the pipeline
/// ends when pv does.
#[test]
fn numeric_into_a_dialog_gauge() {
    if !has_tmux() || !require("dialog (apt-get install dialog)", has("dialog", "--version")) {
        return;
    }
    let link = AccelAs::new("pv", "dialog");
    let file = link.dir.path("data");
    std::fs::write(&file, pattern(6 << 20, 57)).unwrap();
    let script = format!(
        "( \"{}\" -n -i 0.2 -L 3m {} > /dev/null ) 2>&1 | dialog --gauge copying 10 60; \
         clear; echo DONE; sleep 30",
        link.arg(),
        text(&file)
    );
    let screens = screens_of("gauge", &script);
    let percents: Vec<u64> = screens
        .iter()
        .filter_map(|s| {
            let at = s.find('%')?;
            s[..at].rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        })
        .collect();
    assert!(percents.iter().any(|&p| p > 0 && p < 100), "the gauge moved: {screens:#?}");
    assert!(screens.last().unwrap().contains("DONE"));
}

/// `-W`: nothing before the first byte, so every line drawn counts some; `-D 60`: nothing at
/// all from a run shorter than that, the final line neither.
#[test]
fn wait_and_delay_hold_the_display_back() {
    let link = AccelAs::new("pv", "hold");
    let mut child = piped(Command::new(&link.path).args(["-W", "-f", "-b", "-i", "0.1"]));
    let said = Said::collect(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    // Ticks go by with nothing read (without -W, each would draw `0 B`)...
    thread::sleep(std::time::Duration::from_millis(600));
    stdin.write_all(&pattern(1 << 20, 58)).unwrap();
    drop(stdin);
    drain(child.stdout.take().unwrap());
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(0));
    let counts: Vec<&str> = said.lines().filter(|l| l.starts_with("in ")).collect();
    assert!(!counts.is_empty(), "{said}");
    assert!(counts.iter().all(|l| !l.starts_with("in      0 B")), "{said}");

    let (status, out, said) = link.run(&["-D", "60", "-f", "-i", "0.1"], &pattern(1 << 20, 59));
    assert_eq!((status.code(), out.len()), (Some(0), 1 << 20));
    assert_eq!(said, "", "nothing shown before 60 seconds");
}
