//! FILE operands, read in turn as `cat` and `pv` read them, and accel run as `pv` (a link):
//! pv's command lines as syncoid, btrbk and people at a terminal write them.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

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
    let status = wait_within(&mut child, GENEROUS);
    let said = said.all();
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
