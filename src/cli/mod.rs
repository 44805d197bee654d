//! The command line as typed: clap's derive struct, whose doc comments are the `--help` text.
//!
//! Values stay raw strings where accel wants to word the error itself (`accel: -m 3Q: ...`);
//! `validate.rs` turns this into a validated [`Config`](crate::run::config::Config). Nothing past
//! `validate.rs` sees clap.

pub mod manual;
pub mod mbuffer;
pub mod pv;
pub mod usage;
pub mod validate;

use std::path::{Path, PathBuf};

use clap::{ArgGroup, Parser, ValueEnum};

use crate::exit::Exit;

/// Whether `argv0`, the name accel was started by, is `name` (its last component): how
/// accel knows it runs as `mbuffer` or `pv`, through a link.
pub fn started_as(argv0: Option<&std::ffi::OsString>, name: &str) -> bool {
    argv0.and_then(|arg| Path::new(arg).file_name()).is_some_and(|base| base == name)
}

/// Writes `text` (a help or a version) to stdout; the status for `main`: 0, or 1 when stdout
/// would not take it.
pub fn print(text: &str) -> i32 {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Short help: what accel is for, in a few lines.
const ABOUT: &str = "\
A pipeline buffer: reads stdin (or each FILE in turn, as cat) as fast as the producer writes
and writes stdout (or each -o FILE) as fast as its consumer reads, holding up to --size bytes
in between, so neither side waits on the other.";

const AFTER_HELP: &str = "\
Examples:
  bzip2 -dc big.tar.bz2 | accel | gzip -9 > big.tar.gz
  zfs send pool/fs@snap | accel -m 1G -o backup.zfs -o - --hash sha256 | ssh host zfs receive
  zfs send pool/fs@snap | accel --to ssh://backup -- zfs receive -s tank/fs
  without ssh: accel --generate key K; copy K to the other host, then:
    there: accel --from :9090 --key-file K | zfs receive tank/fs
    here:  zfs send pool/fs@snap | accel --to there:9090 --key-file K

Exit status: 0 all input delivered; 1 reading failed (what was read was delivered);
2 usage error, nothing read; 3 writing an output failed (the message says what it missed);
4 stalled (--stall-timeout); 5 could not start, nothing read; 6 the network peer could not
be reached or did not authenticate, nothing read; 7 spilled bytes could not be read back (the
message says what each output missed); 8 a thread of accel's own failed (a bug; the message
says what was delivered). Killed by SIGPIPE when the consumer exits early, and by
SIGINT/SIGTERM/SIGHUP when sent one, like cat, saying how many bytes were read but not
delivered. SIGUSR1 prints the report so far. `man accel` (see --generate) has the JSON fields,
the signals and the statuses in full.

Run as mbuffer (ln -s \"$(command -v accel)\" /usr/local/bin/mbuffer), accel reads mbuffer's
command line, for syncoid, znapzend, btrbk and zfs_autobackup; `mbuffer -h` says how. Run as
pv (ln -s \"$(command -v accel)\" /usr/local/bin/pv), it reads pv's: `pv -pterb FILE`, syncoid's
`pv -p -t -e -r -b -s SIZE`; `pv -h` lists what it takes and how it differs from pv.";

/// The raw command line.
#[derive(Debug, Parser)]
#[command(name = "accel", version, about = ABOUT, after_help = AFTER_HELP, args_override_self = true)]
#[command(group(ArgGroup::new("peer").args(["to", "from"]).multiple(true)))]
pub struct Cli {
    /// Read FILE instead of stdin (`-` is stdin); as a FILE operand.
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
    /// Printed at the end as sha256sum prints it (`<hex>  <input name>`, `-` for stdin, the
    /// address as given for --from), one
    /// line per hash in the order given, to stderr or --hash-file, and in the JSON summary.
    /// Each hash reads the buffer on a thread of its own; one slower than the outputs is the
    /// bottleneck, and the report says so.
    #[arg(long = "hash", value_name = "ALG", help_heading = "Input and output")]
    pub hashes: Vec<String>,

    /// Write the hash lines to FILE instead of stderr.
    #[arg(long, value_name = "FILE", help_heading = "Input and output")]
    pub hash_file: Option<PathBuf>,

    /// Buffer size (512K, 32M, 1.5G; binary units K, M, G, T, P, E), or a share of memory (2%).
    ///
    /// At most this much is held. Memory is taken only as the backlog grows and given back as
    /// it drains, so a large size costs nothing until data actually waits. A size above what
    /// this process may have (the machine's memory, ulimit -v or -d, a memory cgroup's limit)
    /// is held to that, and accel says so once. Given twice, the last one counts.
    #[arg(
        short = 'm',
        long = "size",
        value_name = "SIZE",
        default_value = "32M",
        help_heading = "Buffer"
    )]
    pub size: String,

    /// Cap the output at RATE bytes per second (10M = 10 MiB/s), smoothly.
    ///
    /// A fine-grained token bucket: in any tenth of a second, about a tenth of RATE goes out;
    /// a consumer that stalls banks no credit for a burst later. Change it while accel runs
    /// with `accel -R PID -r RATE`; 0 (or none) is no limit.
    #[arg(short = 'r', long = "rate", value_name = "RATE", help_heading = "Flow control")]
    pub rate: Option<String>,

    /// Cap reading the input at RATE bytes per second.
    #[arg(long, value_name = "RATE", help_heading = "Flow control")]
    pub input_rate: Option<String>,

    /// Write nothing until the buffer holds SIZE or PCT% of -m (or input ended), and again
    /// each time it has run empty.
    ///
    /// For tape drives, which stop and rewind ("shoe-shine") when data comes too slowly.
    /// As mbuffer's -P.
    #[arg(long, value_name = "SIZE|PCT%", help_heading = "Flow control")]
    pub start_at: Option<String>,

    /// Once the buffer was full, read again only when it has drained below SIZE or PCT% of -m.
    ///
    /// As mbuffer's -p.
    #[arg(long, value_name = "SIZE|PCT%", help_heading = "Flow control")]
    pub resume_at: Option<String>,

    /// Make every write to an output exactly SIZE bytes (tape blocks).
    ///
    /// Partial data then waits for its block to fill: the only case where it does. The last
    /// block is short, unless --pad.
    #[arg(long, value_name = "SIZE", help_heading = "Flow control")]
    pub block_size: Option<String>,

    /// Fill the last block with zeros to --block-size; the report says how many.
    #[arg(long, requires = "block_size", help_heading = "Flow control")]
    pub pad: bool,

    /// Make every read from the input ask for exactly SIZE bytes (tape blocks).
    ///
    /// A tape refuses a read smaller than its block; accel then says so.
    #[arg(long, value_name = "SIZE", help_heading = "Flow control")]
    pub input_block_size: Option<String>,

    /// Talk to the accel running as process PID: with -r or --input-rate, change its limits;
    /// alone, print its report so far.
    ///
    /// Only the same user (or root) can. Every accel listens on a socket under
    /// $XDG_RUNTIME_DIR/accel (or /tmp/accel-UID), in a directory only its user may enter;
    /// -R talks only to a socket of its own user, in such a directory, with process PID
    /// listening (else status 1).
    #[arg(short = 'R', long = "remote", value_name = "PID", help_heading = "Flow control")]
    pub remote: Option<u32>,

    /// Show the progress line even from a background job.
    ///
    /// By default it is shown when stderr is a terminal and accel's job holds the foreground,
    /// as pv does; never into a file or pipe.
    #[arg(short = 'p', long, help_heading = "Display")]
    pub progress: bool,

    /// Say nothing about the run: no progress line, verdict or report, no warnings.
    ///
    /// Errors still appear, and so does what is asked for by name: --json, the --hash lines,
    /// --debug, -n and --progress-fd. Of -q and a -p or -v, the one given last counts.
    #[arg(short = 'q', long, help_heading = "Display", overrides_with_all = ["progress", "stats"])]
    pub quiet: bool,

    /// Print the full report at the end, naming the bottleneck.
    ///
    /// Bytes, rates, how long each side waited on the other, peak fill, and which side was the
    /// bottleneck. Without -v, a progress line that was shown is left standing at the end
    /// with the verdict alone under it.
    #[arg(short = 'v', long = "stats", help_heading = "Display")]
    pub stats: bool,

    /// Write NDJSON events to FILE (default: stderr).
    ///
    /// A progress event every second (or --interval) and a summary at the end, also after
    /// errors and signals; `man accel` lists the fields.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "-",
        help_heading = "Display"
    )]
    pub json: Option<PathBuf>,

    /// Bytes to expect, for percent done and ETA (pv's -s).
    ///
    /// Default: what is left of stdin (or of the FILEs) when it is a regular file (they all
    /// are). There is no -s: pv's means this, mbuffer's a block size (--block-size here), and
    /// neither may be taken silently for the other.
    #[arg(long, value_name = "SIZE", help_heading = "Display")]
    pub expect: Option<String>,

    /// When the memory buffer is full, spill further input to an unnamed file in DIR.
    ///
    /// Read back in order after what is in memory; memory stays within -m, the disk is given
    /// back as it drains, and a full disk holds the producer rather than losing a byte. DIR
    /// must support O_TMPFILE, fallocate and hole punching (ext4, xfs, btrfs, tmpfs).
    #[arg(long, value_name = "DIR", help_heading = "Buffer")]
    pub spill: Option<PathBuf>,

    /// The most disk the spill may take (default: as much as leaves 5% of the file system
    /// free).
    #[arg(long, value_name = "SIZE", requires = "spill", help_heading = "Buffer")]
    pub spill_size: Option<String>,

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

    /// Name this accel in its progress line, report and JSON, as pv -N does.
    ///
    /// For several accels in one pipeline: each says whose line and report it is. Accels that
    /// draw on the same terminal share it, each on a row of its own, named or not.
    #[arg(short = 'N', long, value_name = "NAME", help_heading = "Display")]
    pub name: Option<String>,

    /// Progress as numbers, for scripts: one line per interval, as pv -n.
    ///
    /// The percent done when the size is known (--expect, or regular files read), as `dialog
    /// --gauge` reads it; otherwise the bytes delivered so far. Instead of the progress line,
    /// on stderr (or --progress-fd) whether or not it is a terminal; the last line is the
    /// final figure. For every counter, use --json.
    #[arg(short = 'n', long, help_heading = "Display")]
    pub numeric: bool,

    /// How often progress is updated (0.2s, 5s; at least 0.1s).
    ///
    /// Default: the progress line twice a second, -n lines and --json progress events once a
    /// second. Given, it sets all three.
    #[arg(long, value_name = "DURATION", help_heading = "Display")]
    pub interval: Option<String>,

    /// Write progress to the open descriptor FD instead of stderr.
    ///
    /// A terminal gets the redrawn line (drawn whether or not accel's job holds its
    /// foreground); a file or pipe gets one line per interval; -n writes its numbers there.
    /// The verdict follows the last line; errors, warnings and the -v report stay on stderr.
    /// E.g. `--progress-fd 3 3>/dev/pts/4` draws on another terminal, `3>>progress.log`
    /// keeps a log.
    #[arg(long, value_name = "FD", help_heading = "Display")]
    pub progress_fd: Option<String>,

    /// Send the stream to an accel --from on HOST (an output, beside any -o); or with
    /// ssh://[USER@]HOST[:PORT] -- CMD, to CMD on HOST, through an accel started there by ssh.
    ///
    /// HOST:PORT, [IPv6]:PORT, or a name that resolves. Encrypted and authenticated with
    /// --key-file; status 0 only once the receiver has confirmed its outputs took every byte.
    /// With ssh://, no key file: ssh starts the remote accel and gives it a fresh key on its
    /// stdin; CMD (a line for the remote shell, as ssh runs it) reads the stream; its stderr
    /// is shown here, marked with the host, and its exit status is accel's.
    #[arg(long = "to", value_name = "HOST:PORT", help_heading = "Network")]
    pub to: Vec<String>,

    /// Receive the input from an accel --to, listening on exactly ADDR (a bare PORT: every
    /// interface, safe only because the sender must prove it holds the key); or with
    /// ssh://[USER@]HOST[:PORT] -- CMD, from CMD run on HOST.
    ///
    /// With ssh://, as --to ssh:// but the other way: CMD writes the stream there, and it
    /// comes out here.
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

    /// The key both ends share, made by `accel --generate key FILE`.
    ///
    /// Default: the file the environment variable ACCEL_KEY_FILE names. A key file that its
    /// group or others may read, or another user's, is refused, as ssh refuses such a private
    /// key.
    #[arg(long, value_name = "FILE", requires = "peer", help_heading = "Network")]
    pub key_file: Option<PathBuf>,

    /// Plain TCP: no authentication, no encryption, no truncation detection, no resuming.
    ///
    /// The raw stream and nothing else, to talk to mbuffer -I/-O, nc or socat. Anyone who can
    /// reach the port can read or inject the stream, a receiver takes the first connection
    /// that comes, and a connection that drops early looks like the end of the stream. A
    /// dropped connection cannot be resumed: a raw stream has no offsets.
    #[arg(long, conflicts_with = "key_file", requires = "peer", help_heading = "Network")]
    pub insecure: bool,

    /// With --from: give up (status 6) when no sender has authenticated within DURATION.
    ///
    /// Default: wait as long as it takes. A sender must connect and shake hands within 30 s
    /// (or --stall-timeout). A peer that stops responding mid-stream is noticed by the
    /// heartbeats (--heartbeat), and waited for (--reconnect-for).
    #[arg(long, value_name = "DURATION", requires = "from", help_heading = "Network")]
    pub accept_timeout: Option<String>,

    /// With --to: while the receiver refuses the connection (it is not listening yet), try
    /// again for up to DURATION, then give up (status 6); 0: at once. [default: 10s]
    ///
    /// For a receiver started a moment after its sender, as a cron job that starts the
    /// receiver through ssh, then the sender. A first connection that drops once the receiver
    /// answered, before the stream began, is tried again too. Any other failure (no answer,
    /// no route, the wrong key) is said at once.
    #[arg(long, value_name = "DURATION", requires = "to", help_heading = "Network")]
    pub connect_for: Option<String>,

    /// When a connection drops, connect again (--to) or wait for the sender (--from) for up
    /// to DURATION, then go on at the exact byte; 0: fail at once. [default: 10m]
    ///
    /// A reset or an abort, a path gone silent (see --heartbeat), or an end without the
    /// end-of-stream mark: the sender connects again 0.2 s later, then 1, 2, 4, ... up to 30 s
    /// apart, and a last time at the end of DURATION, each try waiting a heartbeat for an
    /// answer; the receiver takes it back once it has proved it holds the key and names the
    /// same stream. The sender keeps what the receiver has not confirmed in its buffer (-m,
    /// then --spill), so nothing is lost or written twice. At the end of DURATION both fail
    /// (status 3 and 1), saying what was delivered; the receiver waits four heartbeats and a
    /// try longer, to be there for the sender's last try. Not with --insecure. A sender that dies cannot be resumed:
    /// its input is gone (with zfs send, resume with `zfs send -t TOKEN`).
    #[arg(long, value_name = "DURATION", requires = "peer", help_heading = "Network")]
    pub reconnect_for: Option<String>,

    /// How often each end says it is there when it has nothing else to send; a peer silent
    /// for four heartbeats is taken as gone. [default: 5s]
    ///
    /// Notices a frozen NAT mapping or a dead peer in seconds (TCP alone takes hours). Both
    /// ends should use the same value.
    #[arg(long, value_name = "DURATION", requires = "peer", help_heading = "Network")]
    pub heartbeat: Option<String>,

    /// The TCP congestion control of accel's own connections: an algorithm the kernel
    /// offers (bbr, cubic, reno, ...), or system for the system's default. [default: bbr where
    /// the kernel offers it, else the system's]
    ///
    /// BBR keeps its pace on a long path where a little random loss makes CUBIC (most systems'
    /// default) slow down again and again. It is asked for on the sockets accel dials and
    /// listens on, with --insecure too; a peer that is not accel (mbuffer, nc) keeps its own,
    /// and the sender's algorithm is the one that sets the pace. --debug says which each
    /// connection got, and why BBR could not be had. A name the kernel does not offer, or does
    /// not allow users without CAP_NET_ADMIN, is refused at the start (status 2), naming those
    /// it does.
    #[arg(long, value_name = "ALGO|system", requires = "peer", help_heading = "Network")]
    pub congestion: Option<String>,

    /// With --to ssh:// or --from ssh://: the program that runs ssh, split into words as a
    /// shell would, as rsync's -e. [default: ACCEL_SSH, else ssh]
    ///
    /// E.g. `--ssh-command 'ssh -i ~/.ssh/backup -o ConnectTimeout=5'`. accel adds `-T -x -a`
    /// (no terminal, no X11 or agent forwarding), `-p PORT` from the URL, the destination and
    /// the remote accel's command line; it asks `ssh -G` (with the same words) where ssh
    /// connects, so as to connect there directly.
    #[arg(long, value_name = "COMMAND", help_heading = "Network")]
    pub ssh_command: Option<String>,

    /// With ssh://: the accel to run on the other host. [default: accel, on the remote PATH]
    #[arg(long, value_name = "PATH", help_heading = "Network")]
    pub remote_accel: Option<String>,

    /// With ssh://: options for the remote accel, split as a shell would (`-m 1G --spill
    /// /var/tmp`), checked there.
    #[arg(long, value_name = "ARGS", help_heading = "Network")]
    pub remote_args: Option<String>,

    /// With ssh://: where the data goes: auto (directly, else through the ssh session,
    /// said once with the reason), direct (directly or status 6), ssh (through the session).
    /// [default: auto]
    ///
    /// Directly is accel's own encrypted connection to the port the remote accel listens on,
    /// at the address ssh connects to: resumed after a drop, and not held to ssh's 2 MiB
    /// window or its one cipher thread. Through the session, the same frames go over ssh's
    /// stdin and stdout, their payloads not encrypted a second time inside ssh's cipher: it
    /// works wherever ssh does (a jump host, a closed port), at ssh's speed, and a drop of
    /// the session ends the run, over one connection (--streams above 1 is refused with
    /// --via ssh).
    #[arg(long, value_name = "auto|direct|ssh", help_heading = "Network")]
    pub via: Option<String>,

    /// With ssh://: the remote accel listens on a free port of LOW-HIGH (a range the
    /// firewall opens), else on one its system chooses.
    #[arg(long, value_name = "LOW-HIGH", help_heading = "Network")]
    pub remote_ports: Option<String>,

    /// The remote end of a run started through ssh: reads its request on stdin.
    #[arg(long, hide = true)]
    pub serve_ssh: bool,

    /// The words after `--` with an ssh:// peer: the remote command (set by usage.rs).
    #[arg(skip)]
    pub remote_command: Vec<String>,

    /// With --to: carry the stream over N connections, 1 to 16 [default: 1].
    ///
    /// Each connection is a session of its own (its own keys, its own thread sealing), and
    /// takes the next frame when it can send, so a path that caps each connection (a
    /// per-flow limit, a long fat pipe one TCP window cannot fill) or a CPU that one cipher
    /// thread cannot keep up with carries more. The receiver takes as many as it allows (16)
    /// and puts the frames back in order, holding at most a quarter of its -m out of order
    /// (the sender never has more than that beyond what the receiver's buffer took in), and
    /// its buffer and those frames together within its -m (the sender never has more than
    /// that beyond what the receiver's outputs took): the reorder window is part of -m, and a
    /// stalled consumer is absorbed up to -m, as over one connection. Above 1, the
    /// receiver must be an accel that takes several streams; an older one refuses, saying so.
    /// With ssh://, over the direct connection (with --from ssh://, the remote accel sends,
    /// over N); --via ssh carries one and refuses N above 1; a fallback through ssh (--via
    /// auto) carries one, said in a line.
    // Not `requires = "peer"`: the remote end (`--serve-ssh`) takes it too, from the local
    // --streams or --remote-args (see validate.rs).
    #[arg(long, value_name = "N", help_heading = "Network")]
    pub streams: Option<String>,

    /// With --to: compress each frame with zstd before it is sealed: auto (the level follows
    /// the bottleneck), none, zstd (level 3) or zstd:LEVEL (-7 to 22). [default: auto]
    ///
    /// Each frame (64 KiB) is compressed with what came before it on the connection (a 4 MiB
    /// window, as zstd over the whole stream), or sent as it is after a run of frames that
    /// did not shrink by 3 %; then trials thin out to one in 16, so random or already
    /// compressed data costs almost nothing. With auto, it starts at level
    /// 1; every quarter of a second the sender looks at what held it: its writes waiting for
    /// the socket or the receiver's confirmations (the link is the bottleneck: a higher level,
    /// if its ratio on this data moves more of the stream), or compressing while the socket
    /// had room (the CPU is: a lower level, down to no compression at all); it moves to the
    /// level predicted, from the speed and ratio it sees, to move the most, and leaves one
    /// that moved less; --debug says each change and why. Where compressing alone would hold
    /// the sending thread half the time, each batch's frames (1 MiB) are compressed on up to
    /// 4 threads (the cores), each thread's run a zstd frame of its own; not random data.
    /// The receiver decompresses whatever each frame says:
    /// nothing to set there. Offsets, confirmations and resuming count stream bytes,
    /// uncompressed. A receiver of an older accel, whose compressed frames keep no history:
    /// with auto, the sender connects again and sends uncompressed, said once; a level asked
    /// for is refused there (status 6), as is auto through the ssh session (--via ssh).
    /// Through the ssh session (--via ssh, or where the direct path is closed), frames are
    /// compressed only if --compress is given: an older accel there cannot be connected to
    /// again. Not with --insecure: a raw stream stays raw. With --from ssh://, the remote
    /// accel sends, and compresses as asked.
    #[arg(long, value_name = "HOW", help_heading = "Network")]
    pub compress: Option<String>,

    /// Print the man page, a completion script (bash, zsh, fish) or a new key (key) to stdout.
    ///
    /// The man page's FILES section says where each goes, e.g. `accel --generate man >
    /// ~/.cargo/share/man/man1/accel.1`, where man finds it while ~/.cargo/bin is on PATH.
    /// `--generate key FILE` writes the key into a new FILE only its owner may read (an
    /// existing FILE is refused). A key goes to stdout only when that is a pipe or a terminal,
    /// or a file nobody else may open: `> FILE` is refused when the shell made FILE readable
    /// by others, since whoever opened it in time would read the key.
    #[arg(long, value_enum, value_name = "WHAT", help_heading = "Setup")]
    pub generate: Option<Generate>,

    /// Read each FILE in turn instead of stdin (`-` is stdin), as cat and pv do.
    ///
    /// Every FILE is checked before a byte is read: one that does not exist, is a directory or
    /// cannot be read is refused (status 2), as `-i FILE` is; one that has gone when it is
    /// reached fails the input there (status 1). When all are regular files, their total size
    /// is expected, for percent done and ETA. With `--generate key`, the one FILE is the key
    /// file to write.
    #[arg(
        value_name = "FILE",
        conflicts_with_all = ["input", "from"],
        help_heading = "Input and output"
    )]
    pub files: Vec<PathBuf>,
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
    /// The man page (roff), complete on its own.
    Man,
    /// bash completions.
    Bash,
    /// zsh completions.
    Zsh,
    /// fish completions.
    Fish,
    /// A new key file for --key-file: `--generate key FILE` (made readable by its owner only).
    Key,
    /// The man page as Markdown, which the repository keeps as doc/accel.md.
    #[value(hide = true)]
    Markdown,
}

impl Generate {
    /// Writes the man page, a completion script or a key file (into `file`, or stdout);
    /// otherwise how accel ends, and why (for `accel: `).
    pub fn run(self, file: Option<&Path>) -> Result<(), (Exit, String)> {
        use crate::net::key::{self, NotWritten};
        use clap::CommandFactory;
        use clap_complete::Shell;
        let shell = match (self, file) {
            (Generate::Key, file) => {
                return key::generate(file).map_err(|not| match not {
                    NotWritten::Refused(why) => (Exit::Usage, why),
                    NotWritten::Failed(why) => (Exit::OutputFailed, why),
                });
            }
            (_, Some(file)) => {
                return Err((
                    Exit::Usage,
                    format!(
                        "{}: unexpected operand: only --generate key writes to a file; the \
                         others print to stdout",
                        file.display()
                    ),
                ));
            }
            (Generate::Man, None) => {
                return crate::cli::manual::write(Cli::command(), &mut std::io::stdout().lock())
                    .map_err(|e| (Exit::OutputFailed, format!("--generate: {e}")));
            }
            (Generate::Markdown, None) => {
                return crate::cli::manual::markdown(Cli::command(), &mut std::io::stdout().lock())
                    .map_err(|e| (Exit::OutputFailed, format!("--generate: {e}")));
            }
            (Generate::Bash, None) => Shell::Bash,
            (Generate::Zsh, None) => Shell::Zsh,
            (Generate::Fish, None) => Shell::Fish,
        };
        clap_complete::generate(shell, &mut Cli::command(), "accel", &mut std::io::stdout().lock());
        Ok(())
    }
}
