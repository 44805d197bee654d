//! The command line as typed: clap's derive struct, whose doc comments are the `--help` text.
//!
//! Values stay raw strings where accel wants to word the error itself (`accel: -m 3Q: ...`);
//! `config.rs` turns this into a validated [`Config`](crate::config::Config). Nothing past
//! `config.rs` sees clap.

use clap::{Parser, ValueEnum};

/// Short help: what accel is for, in a few lines.
const ABOUT: &str = "\
A pipeline buffer: reads stdin as fast as the producer writes and writes stdout as fast as the
consumer reads, holding up to --size bytes in between, so neither side waits on the other.";

const AFTER_HELP: &str = "\
Example:
  bzip2 -dc big.tar.bz2 | accel | gzip -9 > big.tar.gz

Exit status: 0 all input delivered; 1 reading failed (what was read was delivered);
2 usage error; 3 writing failed (buffered bytes lost). Killed by SIGPIPE when the
consumer exits early, and by SIGINT/SIGTERM/SIGHUP when sent one, like cat.";

/// The raw command line.
#[derive(Debug, Parser)]
#[command(name = "accel", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Buffer size: at most this much is held in memory (binary suffixes: 512K, 32M, 1.5G).
    /// Memory is taken only as the backlog grows and given back as it drains.
    #[arg(short = 'm', long = "size", value_name = "SIZE", default_value = "32M")]
    pub size: String,

    /// How bytes are moved: `auto` picks the fastest path that is safe for the descriptors;
    /// `splice` (Linux) moves them without copying where the kernel allows; `copy` is the
    /// portable path (read into the buffer, write out of it).
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,

    /// Say on stderr which way bytes go at each side (splice, read, write), and each change of
    /// way as it happens (a descriptor refusing splice, the pipe quota running out).
    #[arg(long)]
    pub debug: bool,
}

/// `--engine` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The fastest path that is safe for the descriptors at hand.
    Auto,
    /// Zero-copy (Linux): splice straight through, or through a few internal pipes, and copy
    /// only beyond them or where a descriptor cannot be spliced safely.
    Splice,
    /// Portable: read into the buffer, write from it.
    Copy,
}
