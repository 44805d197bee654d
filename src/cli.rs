//! The command line as typed: clap's derive struct, whose doc comments are the `--help` text.
//!
//! Values stay raw strings where accel wants to word the error itself (`accel: -m 3Q: ...`);
//! `config.rs` turns this into a validated [`Config`](crate::config::Config). Nothing past
//! `config.rs` sees clap.

use std::path::PathBuf;

use clap::{ArgGroup, Parser, ValueEnum};

/// Short help: what accel is for, in a few lines.
const ABOUT: &str = "\
A pipeline buffer: reads stdin (or -i FILE) as fast as the producer writes and writes stdout
(or each -o FILE) as fast as its consumer reads, holding up to --size bytes in between, so
neither side waits on the other.";

const AFTER_HELP: &str = "\
Examples:
  bzip2 -dc big.tar.bz2 | accel | gzip -9 > big.tar.gz
  zfs send pool/fs@snap | accel -m 1G -o backup.zfs -o - --hash sha256 | ssh host zfs receive
  accel --generate key > K; copy K to the other host, then:
    there: accel --from :9090 --key-file K | zfs receive tank/fs
    here:  zfs send pool/fs@snap | accel --to there:9090 --key-file K

Exit status: 0 all input delivered; 1 reading failed (what was read was delivered);
2 usage error, nothing read; 3 writing an output failed (the message says what it missed);
4 stalled (--stall-timeout); 5 could not start, nothing read; 6 the network peer could not
be reached or did not authenticate, nothing read. Killed by SIGPIPE when the
consumer exits early, and by SIGINT/SIGTERM/SIGHUP when sent one, like cat. SIGUSR1 prints
the report so far.";

/// The raw command line.
#[derive(Debug, Parser)]
#[command(name = "accel", version, about = ABOUT, after_help = AFTER_HELP, args_override_self = true)]
#[command(group(ArgGroup::new("peer").args(["to", "from"]).multiple(true)))]
pub struct Cli {
    /// Read FILE instead of stdin (`-` is stdin).
    #[arg(short = 'i', long, value_name = "FILE", help_heading = "Input and output")]
    pub input: Option<PathBuf>,

    /// Write to FILE instead of stdout; repeat for several (`-` is stdout).
    ///
    /// Every output gets every byte, in order, each at its own pace: a slow output may fall
    /// behind by up to the buffer size before the producer is held back, and never slows a
    /// fast one within that. An existing regular file is refused unless -f or -a; devices,
    /// FIFOs and sockets are opened as they are.
    #[arg(short = 'o', long = "output", value_name = "FILE", help_heading = "Input and output")]
    pub outputs: Vec<PathBuf>,

    /// Overwrite existing files named by -o.
    #[arg(short = 'f', long, conflicts_with = "append", help_heading = "Input and output")]
    pub force: bool,

    /// Append to existing files named by -o.
    #[arg(short = 'a', long, help_heading = "Input and output")]
    pub append: bool,

    /// Flush file outputs to stable storage (fdatasync) before a successful exit.
    ///
    /// Status 0 then means the data is on the disk, not only in the page cache.
    #[arg(long, help_heading = "Input and output")]
    pub sync: bool,

    /// What a failing output does to the others, as tee: warn, warn-nopipe, exit, exit-nopipe.
    ///
    /// Without this option: a reader that goes away (EPIPE) ends accel by SIGPIPE, as for
    /// cat; another error is reported and the other outputs go on (status 3 at the end).
    /// `warn`: every error, EPIPE too, is reported and the others go on. `exit`: every error
    /// ends the run at once. The `-nopipe` modes only note a reader that went away, and the
    /// others go on. Bare `--output-error` means warn-nopipe. Every output that lost bytes
    /// is named, with the bytes it got and missed.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "warn-nopipe",
        help_heading = "Input and output"
    )]
    pub output_error: Option<OutputErrorArg>,

    /// Hash the stream: sha256, sha512, blake3, md5, sha1, sha224, sha384; repeatable.
    ///
    /// Printed at the end as sha256sum prints it (`<hex>  <input name>`, `-` for stdin), one
    /// line per hash in the order given, to stderr or --hash-file, and in the JSON summary.
    /// Each hash reads the buffer on a thread of its own; one slower than the outputs is the
    /// bottleneck, and the report says so.
    #[arg(long = "hash", value_name = "ALG", help_heading = "Input and output")]
    pub hashes: Vec<String>,

    /// Write the hash lines to FILE instead of stderr.
    #[arg(long, value_name = "FILE", requires = "hashes", help_heading = "Input and output")]
    pub hash_file: Option<PathBuf>,

    /// Buffer size (512K, 32M, 1.5G; binary units).
    ///
    /// At most this much is held. Memory is taken only as the backlog grows and given back as
    /// it drains, so a large size costs nothing until data actually waits.
    #[arg(
        short = 'm',
        long = "size",
        value_name = "SIZE",
        default_value = "32M",
        help_heading = "Buffer"
    )]
    pub size: String,

    /// Show the progress line even from a background job.
    ///
    /// By default it is shown when stderr is a terminal and accel's job holds the foreground,
    /// as pv does; never into a file or pipe.
    #[arg(short = 'p', long, help_heading = "Display", conflicts_with = "quiet")]
    pub progress: bool,

    /// Print nothing but errors.
    #[arg(short = 'q', long, help_heading = "Display")]
    pub quiet: bool,

    /// Print a report at the end, naming the bottleneck.
    ///
    /// Bytes, rates, how long each side waited on the other, peak fill, and which side was the
    /// bottleneck. Printed automatically after a progress line was shown.
    #[arg(short = 'v', long = "stats", help_heading = "Display")]
    pub stats: bool,

    /// Write NDJSON events to FILE (default: stderr).
    ///
    /// A progress event every second and a summary at the end; the README lists the fields.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "-",
        help_heading = "Display"
    )]
    pub json: Option<PathBuf>,

    /// Bytes to expect, for percent done and ETA.
    ///
    /// Default: what is left of stdin when it is a regular file.
    #[arg(short = 's', long, value_name = "SIZE", help_heading = "Display")]
    pub expect: Option<String>,

    /// Give up after DURATION (30s, 5m) without progress.
    ///
    /// When no byte has moved for that long while the transfer is not finished, accel says
    /// which side is stuck and exits with status 4.
    #[arg(long, value_name = "DURATION", help_heading = "Buffer")]
    pub stall_timeout: Option<String>,

    /// How bytes are moved.
    ///
    /// `auto` picks the fastest path that is safe for the descriptors; `splice` (Linux) moves
    /// them without copying where the kernel allows, with one output and no hash (several
    /// readers share the bytes through memory); `copy` is the portable path (read into the
    /// buffer, write out of it).
    #[arg(
        long,
        value_enum,
        value_name = "ENGINE",
        default_value_t = EngineArg::Auto,
        help_heading = "Buffer"
    )]
    pub engine: EngineArg,

    /// Say which way bytes go (splice, read, write) and why.
    ///
    /// On stderr: the route at the start, each change as it happens (a descriptor refusing
    /// splice, the pipe quota running out), and how many bytes took each way.
    #[arg(long, help_heading = "Display")]
    pub debug: bool,

    /// Send the stream to an accel --from on HOST (an output, beside any -o).
    ///
    /// HOST:PORT, [IPv6]:PORT, or a name that resolves. Encrypted and authenticated with
    /// --key-file; status 0 only once the receiver has confirmed every byte.
    #[arg(long = "to", value_name = "HOST:PORT", help_heading = "Network")]
    pub to: Vec<String>,

    /// Receive the input from an accel --to, listening on exactly ADDR (a bare PORT: every
    /// interface, safe only because the sender must prove it holds the key).
    ///
    /// ADDR is 127.0.0.1:9090, [::1]:9090 or a name; nothing else is listened on. A bare port
    /// (9090 or :9090) listens on every interface, IPv4 and IPv6: that is safe only because
    /// the sender must prove it holds the key; connections that do not are dropped, and
    /// accel goes on waiting. With --insecure, prefer an address. Port 0 lets the system
    /// choose, and accel says which.
    #[arg(
        long = "from",
        value_name = "[ADDR:]PORT",
        conflicts_with = "input",
        help_heading = "Network"
    )]
    pub from: Option<String>,

    /// The key both ends share, made by `accel --generate key > FILE`.
    ///
    /// Default: the file the environment variable ACCEL_KEY_FILE names. A key file that its
    /// group or others may read is refused, as ssh refuses such a private key.
    #[arg(long, value_name = "FILE", requires = "peer", help_heading = "Network")]
    pub key_file: Option<PathBuf>,

    /// Plain TCP: no authentication, no encryption, no truncation detection.
    ///
    /// The raw stream and nothing else, to talk to mbuffer -I/-O, nc or socat. Anyone who can
    /// reach the port can read or inject the stream, a receiver takes the first connection
    /// that comes, and a connection that drops early looks like the end of the stream.
    #[arg(long, conflicts_with = "key_file", requires = "peer", help_heading = "Network")]
    pub insecure: bool,

    /// With --from: give up (status 6) when no sender has authenticated within DURATION.
    ///
    /// Default: wait as long as it takes. A sender must connect and shake hands within 30 s
    /// (or --stall-timeout); --stall-timeout also covers a peer that stops responding
    /// mid-stream, and TCP keepalive notices one that vanished within about 90 s.
    #[arg(long, value_name = "DURATION", requires = "from", help_heading = "Network")]
    pub accept_timeout: Option<String>,

    /// Print the man page, a shell completion script, or a new key (`key`) to stdout.
    #[arg(long, value_enum, value_name = "WHAT", hide = true)]
    pub generate: Option<Generate>,
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

/// `--output-error` values, as tee's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputErrorArg {
    /// Report every failing output, EPIPE too; the others go on.
    Warn,
    /// As warn, but a reader that goes away is only noted.
    WarnNopipe,
    /// Any failing output ends the run at once.
    Exit,
    /// As exit, but a reader that goes away is only noted and the others go on.
    ExitNopipe,
}

/// `--generate` values: documentation derived from this very definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// The man page (roff).
    Man,
    /// bash completions.
    Bash,
    /// zsh completions.
    Zsh,
    /// fish completions.
    Fish,
    /// A new key file for --key-file (stdout, when a file, is made readable by its owner only).
    Key,
}

impl Generate {
    /// Writes the man page or completion script to `out`.
    pub fn write(self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use clap::CommandFactory;
        use clap_complete::Shell;
        let mut command = Cli::command();
        let shell = match self {
            Generate::Man => return clap_mangen::Man::new(command).render(out),
            Generate::Key => {
                crate::net::key::protect_stdout()?;
                let key = crate::net::key::Key::generate()?;
                return out.write_all(key.to_line().as_bytes());
            }
            Generate::Bash => Shell::Bash,
            Generate::Zsh => Shell::Zsh,
            Generate::Fish => Shell::Fish,
        };
        clap_complete::generate(shell, &mut command, "accel", out);
        Ok(())
    }
}
