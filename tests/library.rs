//! The library and the command line are one implementation with two faces: on the same
//! input, with the same settings, they write the same bytes and tell a failure in the same
//! words.

use std::fs::File;
use std::process::Stdio;

use accel::{Buffer, Input, Output};

use crate::util::*;

/// `accel ARGS -i INPUT` (copy engine and auto), its stdout.
fn through_cli(engine: &str, args: &[&str], input: &std::path::Path) -> Vec<u8> {
    let output = accel(engine, args)
        .arg("-i")
        .arg(input)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run accel");
    assert!(output.status.success(), "accel {args:?}: {:?}", output.status);
    output.stdout
}

/// The same input and settings through the library, into a file; that file's bytes.
fn through_library(buffer: &Buffer, input: &std::path::Path, dir: &Scratch) -> Vec<u8> {
    let out = dir.path("library-out");
    let input = Input::fd(File::open(input).unwrap());
    let report = buffer.run(input, vec![Output::fd(File::create(&out).unwrap())]).unwrap();
    // Every byte read was delivered (the zeros of --pad are not input).
    assert_eq!(report.outputs[0].delivered, report.bytes_in);
    std::fs::read(&out).unwrap()
}

fn the_same_bytes_for_the_same_settings(engine: &str) {
    let dir = Scratch::new(&format!("library-cli-{engine}"));
    let input = dir.path("input");
    std::fs::write(&input, pattern(3 * 1024 * 1024 + 10_001, 21)).unwrap();
    let cases: [(&[&str], Buffer); 3] = [
        (&["-m", "256K"], Buffer::new().size(256 << 10)),
        (&["--block-size", "4096", "--pad"], Buffer::new().block_size(4096).pad(true)),
        (
            &["--input-block-size", "8192", "-m", "1M"],
            Buffer::new().input_block_size(8192).size(1 << 20),
        ),
    ];
    for (args, buffer) in cases {
        let cli = through_cli(engine, args, &input);
        let library = through_library(&buffer, &input, &dir);
        assert_same(&library, &cli, &format!("library against accel {args:?}"));
    }
}
per_engine!(the_same_bytes_for_the_same_settings);

#[test]
fn a_failing_output_is_told_in_the_same_words() {
    let dir = Scratch::new("library-cli-full");
    let input = dir.path("input");
    std::fs::write(&input, pattern(100_000, 3)).unwrap();
    let cli = accel("auto", &["-i"])
        .arg(&input)
        .args(["-o", "/dev/full"])
        .stdin(Stdio::null())
        .output()
        .expect("run accel");
    let cli = String::from_utf8_lossy(&cli.stderr).into_owned();
    let full = File::options().write(true).open("/dev/full").unwrap();
    let error = Buffer::new()
        .run(Input::fd(File::open(&input).unwrap()), vec![Output::fd(full).named("/dev/full")])
        .expect_err("/dev/full fails");
    let report = error.report().expect("a report");
    assert_eq!(report.outputs[0].delivered, 0);
    // The bytes read before the run ended depend on timing: the words up to them do not.
    let words = "write to /dev/full: No space left on device; 0 bytes delivered, ";
    assert!(cli.contains(&format!("accel: {words}")), "accel said: {cli}");
    assert!(error.to_string().starts_with(words), "the library said: {error}");
}
