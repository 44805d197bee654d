//! The `accel` binary: parse, run, end as the exit policy says.
//!
//! accel defines the C `main` itself instead of Rust's, because Rust's runtime reopens closed
//! standard descriptors on /dev/null before its `main` runs; accel must see them closed to say so
//! (`accel >&-` would otherwise discard everything silently). See `run/stdio.rs`.

#![no_main]

// The library is the package's (accel-buffer); the program calls it accel.
extern crate accel_buffer as accel;

use std::ffi::{CStr, OsStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;

use accel::cli::usage::Refusal;
use accel::exit::Exit;
use accel::run::config::Config;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let closed = accel::run::stdio::claim();
    // SAFETY: the C runtime passes argc valid NUL-terminated strings.
    let args: Vec<OsString> = (0..argc as usize)
        .map(|i| OsStr::from_bytes(unsafe { CStr::from_ptr(*argv.add(i)) }.to_bytes()).into())
        .collect();
    if accel::cli::mbuffer::invoked_as(args.first()) {
        return accel::cli::mbuffer::main(&args, closed);
    }
    if accel::cli::pv::invoked_as(args.first()) {
        return accel::cli::pv::main(&args, closed);
    }
    let cli = match accel::cli::usage::parse(&args) {
        Ok(cli) => cli,
        Err(Refusal::Shown(help)) => {
            let _ = help.print();
            return help.exit_code();
        }
        Err(Refusal::Usage(why)) => {
            eprintln!("accel: {why}");
            return i32::from(Exit::Usage.code());
        }
    };
    if let Some(what) = cli.generate {
        return match what.run(cli.files.first().map(std::path::PathBuf::as_path)) {
            Ok(()) => 0,
            Err((exit, why)) => {
                eprintln!("accel: {why}");
                i32::from(exit.code())
            }
        };
    }
    if cli.serve_ssh {
        // The other end of `--to ssh://`: its options are --remote-args, checked here.
        return match Config::from_cli(cli, false) {
            Ok(config) => accel::ssh::serve::serve(config, closed),
            Err(error) => {
                eprintln!("accel: {error}");
                i32::from(Exit::Usage.code())
            }
        };
    }
    let stderr_is_terminal = rustix::termios::isatty(rustix::stdio::stderr());
    let exit = match Config::from_cli(cli, stderr_is_terminal) {
        Ok(config) if config.ssh.is_some() => accel::ssh::local::run(&config, closed),
        Ok(config) => accel::run::run(&config, closed),
        Err(error) => {
            eprintln!("accel: {error}");
            Exit::Usage
        }
    };
    exit.terminate()
}
