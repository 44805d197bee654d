//! What a run is configured with: where bytes come from and go, the buffer, the flow, the
//! hashes, the display; every value in its real type (sizes in bytes, durations, outputs,
//! policies, decisions about the terminal), nothing left to parse. The command line is read
//! into it by `cli::config`.

use std::path::PathBuf;
use std::time::Duration;

use crate::endpoint::Producer;
use crate::endpoint::open::Existing;
use crate::engine::digest::Algorithm;
use crate::engine::{OutputErrors, Preference};
use crate::net::{self, address::Address};
use crate::watch::{JsonTarget, Look, Visibility};

/// The default buffer size, as `--help` shows it.
pub const DEFAULT_SIZE: u64 = 32 << 20;

/// Everything a run needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where bytes come from: `-i FILE`, or stdin (`None`)...
    pub input: Option<PathBuf>,
    /// ...or FILE operands, read in turn (`-` is stdin).
    pub files: Vec<PathBuf>,
    /// Stop reading after this many bytes, as if the input ended there (pv's `-S`).
    pub stop_after: Option<u64>,
    /// Count lines ending in this byte, and show them (pv's `-l`, `-0`).
    pub lines: Option<u8>,
    /// How progress looks, where pv's switches chose (accel run as pv).
    pub look: Look,
    /// Where they go, in order; stdout alone when no `-o` was given.
    pub outputs: Vec<Target>,
    /// What `-o` does to an existing regular file.
    pub existing: Existing,
    /// Flush file outputs to stable storage before a successful exit.
    pub sync: bool,
    /// What a failing output does to the others.
    pub output_errors: OutputErrors,
    /// The hashes of the stream to compute.
    pub hashes: Vec<Algorithm>,
    /// Where the hash lines go, if not to stderr.
    pub hash_file: Option<PathBuf>,
    /// Most bytes held in accel's own buffer.
    pub size: usize,
    /// Which data path to prefer.
    pub engine: Preference,
    /// Whether and when to draw the progress line.
    pub progress: Visibility,
    /// Print the report at the end.
    pub stats: bool,
    /// Print nothing but errors.
    pub quiet: bool,
    /// Where NDJSON goes, if anywhere.
    pub json: Option<JsonTarget>,
    /// Bytes expected, when the user said (`-s`).
    pub expect: Option<u64>,
    /// Give up after this long without a byte moving.
    pub stall_timeout: Option<Duration>,
    /// Report the route and its changes on stderr.
    pub debug: bool,
    /// Rate limits, watermarks, blocks.
    pub flow: FlowConfig,
    /// `-R PID`: talk to that accel instead of moving data.
    pub remote: Option<u32>,
    /// `--spill DIR`: where input goes once memory is full.
    pub spill: Option<PathBuf>,
    /// `--spill-size`: the most disk the spill may take.
    pub spill_size: Option<u64>,
    /// What this accel is called in its line, report and JSON (`-N`).
    pub name: Option<String>,
    /// Progress as numbers, a line per interval (`-n`).
    pub numeric: bool,
    /// How often progress is updated, when the user said (`--interval`).
    pub interval: Option<Duration>,
    /// The descriptor progress goes to instead of stderr (`--progress-fd`).
    pub progress_fd: Option<i32>,
    /// `--from`, the key, `--insecure`, `--accept-timeout` (each `--to` is in `outputs`).
    pub net: net::Peering,
    /// `--to ssh://` or `--from ssh://`: the other end started through ssh (see ssh/).
    pub ssh: Option<Ssh>,
    /// The program that writes stdin, when accel started it (`--serve-ssh`, pulled from):
    /// stdin has ended only once it exited 0.
    pub producer: Option<Producer>,
}

/// Flow control as given; the percentages are of the buffer, resolved once its size is
/// known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowConfig {
    /// `-r`: the output's rate limit, bytes per second.
    pub rate: Option<u64>,
    /// `--input-rate`.
    pub input_rate: Option<u64>,
    /// `--start-at`.
    pub start_at: Option<Level>,
    /// `--resume-at`.
    pub resume_at: Option<Level>,
    /// `--block-size`.
    pub block_size: Option<usize>,
    /// `--pad`.
    pub pad: bool,
    /// `--input-block-size`.
    pub input_block_size: Option<usize>,
}

impl FlowConfig {
    /// The buffer the blocks need, and the option that asks it: an output block, and beside
    /// it a whole input block less a byte (the input waits for a block's room, the output for
    /// a whole block); `None` without blocks. A read of a page, accel's own least, is not
    /// counted: the buffer is raised by less than that where needed.
    pub fn blocks_need(&self) -> Option<(&'static str, usize)> {
        match (self.block_size, self.input_block_size) {
            (Some(out), Some(input)) => Some(("--block-size", out + input - 1)),
            (Some(out), None) => Some(("--block-size", out)),
            (None, Some(input)) => Some(("--input-block-size", input)),
            (None, None) => None,
        }
    }
}

/// A fill level of the buffer: a size, or a share of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// This many bytes.
    Bytes(u64),
    /// This percentage of the buffer.
    Percent(f64),
}

impl Level {
    /// The level in bytes, for a buffer of `capacity` bytes.
    pub fn of(self, capacity: usize) -> usize {
        match self {
            Level::Bytes(bytes) => (bytes as usize).min(capacity),
            Level::Percent(percent) => (capacity as f64 * percent / 100.0) as usize,
        }
    }
}

/// An output as `-o` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `-o -`, or no `-o` at all.
    Stdout,
    /// `-o FILE`.
    Path(PathBuf),
    /// `--to HOST:PORT`.
    Network(Address),
}

/// The other end of a run started through ssh: `--to ssh://[USER@]HOST[:PORT] -- CMD` (push)
/// or `--from ssh://... -- CMD` (pull), and the options that say how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    /// `[USER@]HOST` as typed, given to ssh as its destination (so ~/.ssh/config's aliases
    /// work).
    pub destination: String,
    /// `:PORT`, ssh's port (`-p`).
    pub port: Option<u16>,
    /// Push (`--to`: the remote command reads the stream) or pull (`--from`: it writes it).
    pub push: bool,
    /// The words after `--`: the remote command, joined by spaces for the remote shell, as
    /// ssh joins them.
    pub command: Vec<String>,
    /// `--ssh-command` or `ACCEL_SSH`, split as a shell would: the program that runs ssh.
    pub program: Vec<String>,
    /// `--remote-accel`: the accel to run there.
    pub remote_accel: String,
    /// `--remote-args`, split as a shell would: the remote accel's own options.
    pub remote_args: Vec<String>,
    /// `--via`: where the data goes.
    pub via: Via,
    /// `--remote-ports LOW-HIGH`: where the remote may listen.
    pub ports: Option<(u16, u16)>,
}

impl Ssh {
    /// The host as the messages name it: the destination without its user.
    pub fn host(&self) -> &str {
        self.destination.rsplit('@').next().unwrap_or(&self.destination)
    }
}

/// `--via`: the path of the data of a run started through ssh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Directly, else through the ssh session (the default).
    Auto,
    /// Directly, or fail (status 6).
    Direct,
    /// Through the ssh session, always.
    Ssh,
}

impl Via {
    /// The word the command line and the request use.
    pub fn word(self) -> &'static str {
        match self {
            Via::Auto => "auto",
            Via::Direct => "direct",
            Via::Ssh => "ssh",
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            input: None,
            files: Vec::new(),
            stop_after: None,
            lines: None,
            look: Look::default(),
            outputs: vec![Target::Stdout],
            existing: Existing::Refuse,
            sync: false,
            output_errors: OutputErrors::Default,
            hashes: Vec::new(),
            hash_file: None,
            size: DEFAULT_SIZE as usize,
            engine: Preference::Auto,
            progress: Visibility::Off,
            stats: false,
            quiet: false,
            json: None,
            expect: None,
            stall_timeout: None,
            debug: false,
            flow: FlowConfig::default(),
            remote: None,
            spill: None,
            spill_size: None,
            name: None,
            numeric: false,
            interval: None,
            progress_fd: None,
            // The window over several connections: a quarter of the buffer (cli/validate.rs).
            net: net::Peering {
                window: DEFAULT_SIZE / 4,
                hold: DEFAULT_SIZE,
                ..net::Peering::default()
            },
            ssh: None,
            producer: None,
        }
    }
}
