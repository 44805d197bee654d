//! accel as a drop-in mbuffer: run under the name `mbuffer` (a link), accel reads mbuffer's
//! command line, so that the backup tools which build one (syncoid, zfs_autobackup, btrbk,
//! znapzend, pyznap, TrueNAS) get accel without a change.
//!
//! mbuffer's command line is translated into accel's own words (`-R 10M` becomes `-r 10485760`,
//! `-I 9090` becomes `--from 9090 --insecure`), which then go through the same parsing and
//! validation as any accel command line (`usage.rs`, `validate.rs`). What is mbuffer's own is
//! done here: its option syntax (one option per word; a value glued or separate, `-s128k`;
//! the last of a repeated option wins), its sizes (`calcint` in mbuffer.c: a number and one
//! suffix `k m g t b %` in either case, anything after the suffix ignored, a bare number
//! above 100 taken as bytes), its defaults files, and how it ends: status 0 on success and
//! 1 on any failure, a consumer that went away included (never death by SIGPIPE), and with
//! `-q` nothing at all on stderr when all went well.
//!
//! Every option of mbuffer's `-h` is in [`OPTIONS`], either with what accel does for it or
//! refused with the reason (`accel: mbuffer -n: ...`, status 1 as mbuffer's usage errors).
//!
//! The one deliberate difference: `-s` sets the size of every write only where a block size
//! can be observed (a tape or other character device that is not a terminal, a packet-mode
//! pipe). Into an ordinary pipe, file or socket, accel forwards what it has at once rather than
//! holding partial data until a block fills, which is where it beats mbuffer on latency.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use crate::cli::usage::{self, Refusal};
use crate::exit::Exit;
use crate::run::config::Config;

/// The program name that makes accel read mbuffer's command line.
pub const NAME: &str = "mbuffer";

/// Whether accel was started as `mbuffer` (argv\[0\]'s last component).
pub fn invoked_as(argv0: Option<&OsString>) -> bool {
    crate::cli::started_as(argv0, NAME)
}

/// What accel does with one of mbuffer's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Taken, doing what the text says.
    Maps(&'static str),
    /// Refused at once, for the reason given.
    Refused(&'static str),
}

/// One option of mbuffer's: its name, the placeholder of its value if it takes one, and what
/// accel does with it.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// As typed: `-s`, `--append`.
    pub name: &'static str,
    /// `Some("<size>")` when it takes a value.
    pub value: Option<&'static str>,
    /// Mapped or refused.
    pub handling: Handling,
}

const VOLUMES: &str = "multi-volume operation (volume changes) is not supported; accel ends with an error where \
     mbuffer would ask for the next volume";

/// mbuffer's options (20230301's `-h`, plus `-H`, `--md5` and `--hash`), in `-h`'s order.
pub const OPTIONS: &[Opt] = &[
    opt("-b", Some("<num>"), Handling::Maps("buffer of <num> blocks of -s (when -m is not given)")),
    opt(
        "-s",
        Some("<size>"),
        Handling::Maps(
            "block size: every write is exactly <size> to a tape or other character device and \
             to a packet-mode pipe; into ordinary pipes, files and sockets accel forwards data \
             as it comes, without waiting for a block to fill",
        ),
    ),
    opt(
        "-m",
        Some("<size>"),
        Handling::Maps("buffer size in b,k,M,G,T or % of memory (default 32M)"),
    ),
    opt(
        "-L",
        None,
        Handling::Refused(
            "locking the buffer in memory is not supported: accel takes memory only as data waits, and gives it back",
        ),
    ),
    opt("-d", None, Handling::Refused("the device's block size is not looked up: give it with -s")),
    opt("-D", Some("<size>"), Handling::Refused(VOLUMES)),
    opt(
        "-P",
        Some("<num>"),
        Handling::Maps("start writing once the buffer is <num>% full (accel --start-at)"),
    ),
    opt(
        "-p",
        Some("<num>"),
        Handling::Maps("resume reading once the buffer is below <num>% (accel --resume-at)"),
    ),
    opt("-i", Some("<file>"), Handling::Maps("read <file> instead of stdin")),
    opt("-o", Some("<file>"), Handling::Maps("write <file> (repeatable; - is stdout)")),
    opt("--append", None, Handling::Maps("append to existing output files")),
    opt("--truncate", None, Handling::Maps("overwrite existing output files")),
    opt(
        "-I",
        Some("[<h>:]<p>"),
        Handling::Maps(
            "receive the input over TCP on port <p>, listening on address <h> if given (every \
             interface if not); one connection, plain TCP as mbuffer's, encrypted when \
             ACCEL_KEY_FILE names a key",
        ),
    ),
    opt(
        "-O",
        Some("<h>:<p>"),
        Handling::Maps(
            "send the stream over TCP to <h>:<p> (repeatable); plain TCP as mbuffer's, \
             encrypted when ACCEL_KEY_FILE names a key",
        ),
    ),
    opt("-n", Some("<num>"), Handling::Refused(VOLUMES)),
    opt("-t", None, Handling::Maps("beyond -m, spill to an unnamed file in $TMPDIR (or /var/tmp)")),
    opt(
        "-T",
        Some("<file>"),
        Handling::Refused(
            "a named buffer file is not supported: accel's spill file is unnamed; use -t, with TMPDIR naming the directory",
        ),
    ),
    opt("-l", Some("<file>"), Handling::Maps("write messages to <file> instead of stderr")),
    opt(
        "-u",
        Some("<num>"),
        Handling::Refused("a pause after each write is not supported: limit the rate with -R"),
    ),
    opt("-r", Some("<rate>"), Handling::Maps("limit reading to <rate> bytes per second (b,k,M,G)")),
    opt("-R", Some("<rate>"), Handling::Maps("limit writing to <rate> bytes per second (b,k,M,G)")),
    opt("-f", None, Handling::Maps("overwrite existing output files")),
    opt("-a", Some("<time>"), Handling::Refused(VOLUMES)),
    opt("-A", Some("<cmd>"), Handling::Refused(VOLUMES)),
    opt(
        "-v",
        Some("<level>"),
        Handling::Maps("0 or 1: no warnings (as -q); 5 or 6: say how bytes move (accel --debug)"),
    ),
    opt(
        "-q",
        None,
        Handling::Maps("quiet: no status; nothing at all on stderr when all went well"),
    ),
    opt("-Q", None, Handling::Maps("accepted: accel writes no status lines to a log")),
    opt(
        "-c",
        None,
        Handling::Maps(
            "flush file outputs to stable storage before a successful exit (accel --sync)",
        ),
    ),
    opt("-e", None, Handling::Maps("stop at the first error of any output")),
    opt("--pid", None, Handling::Maps("print this process's PID on stderr")),
    opt(
        "-W",
        Some("<time>"),
        Handling::Maps(
            "end with an error when nothing moved for <time> seconds; with -I, also the longest wait for the sender",
        ),
    ),
    opt("-4", None, Handling::Maps("IPv4 for -I and -O")),
    opt("-6", None, Handling::Maps("IPv6 for -I and -O")),
    opt("-0", None, Handling::Maps("IPv4 or IPv6 for -I and -O (the default)")),
    opt("--no-direct", None, Handling::Maps("accepted: accel never uses O_DIRECT")),
    opt(
        "--tcpbuffer",
        Some("<size>"),
        Handling::Maps("accepted: accel sizes its socket buffers itself"),
    ),
    opt(
        "--tcptimeo",
        Some("<msec>"),
        Handling::Maps(
            "end with an error when the network moved nothing for <msec> (as -W, unless -W is given)",
        ),
    ),
    opt(
        "--tapeaware",
        None,
        Handling::Refused(
            "writing to the end of a tape is not supported: a full tape (ENOSPC) ends accel with an error",
        ),
    ),
    opt(
        "--direct",
        None,
        Handling::Maps("accepted: accel's spill file stays out of the page cache anyway"),
    ),
    opt(
        "-H",
        None,
        Handling::Maps("print the MD5 hash of the stream at the end (accel --hash md5)"),
    ),
    opt("--md5", None, Handling::Maps("as -H")),
    opt(
        "--hash",
        Some("<alg>"),
        Handling::Maps("print a hash of the stream at the end; list: the algorithms"),
    ),
    opt(
        "-Z",
        None,
        Handling::Refused("not an option of mbuffer either (listed as unsupported by its -h)"),
    ),
    opt(
        "-B",
        None,
        Handling::Refused("not an option of mbuffer either (listed as unsupported by its -h)"),
    ),
    opt("-V", None, Handling::Maps("print the version")),
    opt("--version", None, Handling::Maps("print the version")),
    opt("-h", None, Handling::Maps("print this help")),
    opt("--help", None, Handling::Maps("print this help")),
];

const fn opt(name: &'static str, value: Option<&'static str>, handling: Handling) -> Opt {
    Opt { name, value, handling }
}

/// The address family `-4`, `-6` and `-0` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// A buffer size as given: bytes, or a share of the machine's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Amount {
    Bytes(u64),
    Percent(f64),
}

/// What mbuffer's command line (and defaults files) ask for.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Request {
    quiet: bool,
    verbose: Option<i64>,
    blocks: Option<u64>,
    block_size: Option<u64>,
    size: Option<Amount>,
    start_at: Option<f64>,
    resume_at: Option<f64>,
    input: Option<OsString>,
    outputs: Vec<OsString>,
    force: bool,
    append: bool,
    listen: Option<String>,
    send_to: Vec<String>,
    family: Family,
    read_rate: Option<u64>,
    write_rate: Option<u64>,
    timeout: Option<u64>,
    tcp_timeout_ms: Option<u64>,
    sync: bool,
    errors_fatal: bool,
    hashes: Vec<String>,
    spill: bool,
    /// `--pid`: say the PID first.
    pub print_pid: bool,
    /// `-l FILE`: where stderr goes.
    pub log: Option<OsString>,
    /// What the defaults files had that accel could not use.
    warnings: Vec<String>,
}

/// What a command line comes to.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A run.
    Run(Box<Request>),
    /// `-h`, `--help`: [`help`] to stdout.
    Help,
    /// `-V`, `--version`.
    Version,
    /// `--hash list`.
    HashList,
}

/// Parses mbuffer's command line `args` (program name first) over `defaults` (from the
/// defaults files), or says why not: `mbuffer -n: <why>`, for `accel: ` to prefix.
pub fn parse(args: &[OsString], defaults: Request) -> Result<Parsed, String> {
    let mut request = defaults;
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        let (option, glued) = match OPTIONS.iter().find(|o| o.name == text) {
            Some(option) => (option, None),
            // A value glued to a short option: `-s128k`, as mbuffer's argcheck.
            None => match OPTIONS.iter().find(|o| {
                o.value.is_some() && o.name.len() == 2 && text.len() > 2 && text.starts_with(o.name)
            }) {
                // The value as given, bytes and all (a path need not be UTF-8).
                Some(option) => (option, Some(OsStr::from_bytes(&word.as_bytes()[2..]).into())),
                None => {
                    return Err(format!(
                        "mbuffer {text}: unknown option; mbuffer -h lists the options"
                    ));
                }
            },
        };
        if let Handling::Refused(why) = option.handling {
            return Err(format!("mbuffer {}: {why}", option.name));
        }
        let value = match (option.value, glued) {
            (None, _) => None,
            (Some(_), Some(value)) => Some(value),
            (Some(placeholder), None) => Some(words.next().cloned().ok_or_else(|| {
                format!("mbuffer {}: a value {placeholder} must follow it", option.name)
            })?),
        };
        match apply(&mut request, option.name, value)? {
            None => {}
            Some(shown) => return Ok(shown),
        }
    }
    Ok(Parsed::Run(Box::new(request)))
}

/// Sets what option `name` (with `value`) asks for; `Some` for one that ends parsing.
fn apply(r: &mut Request, name: &str, value: Option<OsString>) -> Result<Option<Parsed>, String> {
    let raw = value.clone().unwrap_or_default();
    let text = raw.to_string_lossy().into_owned();
    let bad = |why: &str| format!("mbuffer {name} {text}: {why}");
    match name {
        "-b" => r.blocks = Some(whole(&text).filter(|n| *n > 0).ok_or_else(|| bad(NOT_COUNT))?),
        "-s" => match amount(&text).map_err(|why| bad(&why))? {
            Amount::Bytes(bytes) => r.block_size = Some(bytes),
            Amount::Percent(_) => return Err(bad("a block size cannot be a share of memory")),
        },
        "-m" => r.size = Some(amount(&text).map_err(|why| bad(&why))?),
        "-r" | "-R" | "--tcpbuffer" => {
            let bytes = match amount(&text).map_err(|why| bad(&why))? {
                Amount::Bytes(bytes) => bytes,
                Amount::Percent(_) => return Err(bad("a share of memory is only for -m")),
            };
            match name {
                "-r" => r.read_rate = Some(bytes),
                "-R" => r.write_rate = Some(bytes),
                _ => {}
            }
        }
        "-P" => {
            r.start_at = Some(
                number(&text)
                    .filter(|p| *p > 0.0 && *p <= 100.0)
                    .ok_or_else(|| bad("must be more than 0 and at most 100 (percent)"))?,
            )
        }
        "-p" => {
            r.resume_at = Some(
                number(&text)
                    .filter(|p| *p >= 0.0 && *p < 100.0)
                    .ok_or_else(|| bad("must be at least 0 and less than 100 (percent)"))?,
            )
        }
        "-i" => r.input = Some(raw),
        "-o" => r.outputs.push(raw),
        "--append" => r.append = true,
        "--truncate" | "-f" => r.force = true,
        "-I" => r.listen = Some(text),
        "-O" => r.send_to.push(text),
        "-t" => r.spill = true,
        "-l" => r.log = Some(raw),
        "-v" => {
            r.verbose =
                Some(whole(&text).ok_or_else(|| bad("not a level: expected 0 to 6"))? as i64)
        }
        "-q" => r.quiet = true,
        "-Q" | "--no-direct" | "--direct" => {}
        "-c" => r.sync = true,
        "-e" => r.errors_fatal = true,
        "--pid" => r.print_pid = true,
        "-W" => r.timeout = Some(whole(&text).filter(|n| *n > 0).ok_or_else(|| bad(NOT_SECONDS))?),
        "--tcptimeo" => {
            r.tcp_timeout_ms = Some(
                whole(&text)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad("not a number of milliseconds"))?,
            )
        }
        "-4" => r.family = Family::V4,
        "-6" => r.family = Family::V6,
        "-0" => r.family = Family::Any,
        "-H" | "--md5" => r.hashes.push("md5".into()),
        "--hash" if text == "list" => return Ok(Some(Parsed::HashList)),
        "--hash" => {
            let name = text.to_ascii_lowercase();
            if crate::engine::digest::Algorithm::named(&name).is_none() {
                return Err(bad("not a hash accel knows; --hash list lists them"));
            }
            r.hashes.push(name);
        }
        "-V" | "--version" => return Ok(Some(Parsed::Version)),
        "-h" | "--help" => return Ok(Some(Parsed::Help)),
        _ => unreachable!("{name} is in OPTIONS but not handled"),
    }
    Ok(None)
}

const NOT_COUNT: &str = "not a number of blocks";
const NOT_SECONDS: &str = "not a number of seconds (more than 0)";

/// mbuffer's `strtol`: the leading digits, whatever follows.
fn whole(text: &str) -> Option<u64> {
    let text = text.trim_start();
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    text[..end].parse().ok()
}

/// mbuffer's `%lf`: the leading number, whatever follows.
fn number(text: &str) -> Option<f64> {
    leading_number(text).map(|(n, _)| n)
}

/// The leading decimal number of `text` and what follows it.
fn leading_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim_start();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let value = text[..end].parse::<f64>().ok().filter(|n| n.is_finite())?;
    Some((value, &text[end..]))
}

/// mbuffer's sizes and rates (`calcint`): a number and one suffix `k m g t` (binary), `b`
/// (bytes, at least 128) or `%` (of memory, below 90), in either case; what follows the
/// suffix is ignored (`16MB`). A bare number must be above 100 (bytes): mbuffer takes a
/// smaller one for a forgotten suffix.
fn amount(text: &str) -> Result<Amount, String> {
    let (value, rest) = leading_number(text)
        .ok_or("not a size: expected a number with k, m, g, t, b or %, e.g. 128k or 16M")?;
    if value <= 0.0 {
        return Err("must be more than 0".into());
    }
    let Some(suffix) = rest.chars().next() else {
        if value <= 100.0 {
            return Err("too small for bytes: a suffix is missing (k, m, g, t, b or %)?".into());
        }
        return Ok(Amount::Bytes(value as u64));
    };
    let scale = match suffix.to_ascii_lowercase() {
        'k' => 1u64 << 10,
        'm' => 1 << 20,
        'g' => 1 << 30,
        't' => 1 << 40,
        'b' if value < 128.0 => return Err("fewer than 128 bytes".into()),
        'b' => 1,
        '%' if value >= 90.0 => return Err("a share of memory must be below 90%".into()),
        '%' => return Ok(Amount::Percent(value)),
        other => {
            return Err(format!("'{other}' is not a suffix: expected k, m, g, t, b or %"));
        }
    };
    let bytes = value * scale as f64;
    if bytes >= u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(Amount::Bytes(bytes as u64))
}

/// Reads mbuffer's defaults files, `/etc/mbuffer.rc` then `~/.mbuffer.rc`, into a request;
/// each line `key = value` (also `key value`, `key: value`), `#` starts a comment. A line
/// accel cannot use is ignored with a warning, as mbuffer does; the warnings are said once
/// the command line is read, unless it says -q (nothing on stderr when all goes well).
pub fn defaults() -> Request {
    let mut request = Request::default();
    let home = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".mbuffer.rc"));
    for path in [Some(PathBuf::from("/etc/mbuffer.rc")), home].into_iter().flatten() {
        if let Ok(text) = std::fs::read_to_string(&path) {
            for warning in read_defaults(&text, &mut request) {
                request.warnings.push(format!("{}: {warning}", path.display()));
            }
        }
    }
    request
}

/// The keys of mbuffer's defaults files that accel takes, and the option each stands for.
const KEYS: &[(&str, &str)] = &[
    ("numblocks", "-b"),
    ("blocksize", "-s"),
    ("totalmem", "-m"),
    ("maxreadspeed", "-r"),
    ("maxwritespeed", "-R"),
    ("startread", "-p"),
    ("startwrite", "-P"),
    ("timeout", "-W"),
    ("tcpbuffer", "--tcpbuffer"),
];

/// Applies the defaults file `text` to `request`; returns the warnings for lines ignored.
fn read_defaults(text: &str, request: &mut Request) -> Vec<String> {
    let mut warnings = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let key_end = line.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(line.len());
        let (key, rest) = line.split_at(key_end);
        let value = rest.trim_start_matches([' ', '\t', '=', ':']).trim();
        let said = |why: &str| format!("line {}: {line}: {why}; ignored", number + 1);
        let key = key.to_ascii_lowercase();
        if value.is_empty() {
            warnings.push(said("expected key = value"));
            continue;
        }
        let yes = || match value.to_ascii_lowercase().as_str() {
            "yes" | "on" | "1" => Some(true),
            "no" | "off" | "0" => Some(false),
            _ => None,
        };
        match key.as_str() {
            "showstatus" => match yes() {
                Some(show) => request.quiet = !show,
                None => warnings.push(said("expected yes or no")),
            },
            // mbuffer's status log and lock: nothing of accel's to set.
            "logstatus" => {}
            "memlock" | "pause" | "autoloadtime" => {
                warnings.push(said("not supported by accel (see mbuffer -h)"))
            }
            _ => match KEYS.iter().find(|(name, _)| *name == key) {
                Some((_, option)) => {
                    // totalmem below 100 is a percentage, as mbuffer has it.
                    let value = match (key.as_str(), whole(value)) {
                        ("totalmem", Some(n))
                            if n < 100 && value.bytes().all(|b| b.is_ascii_digit()) =>
                        {
                            format!("{n}%")
                        }
                        _ => value.to_owned(),
                    };
                    if let Err(why) = apply(request, option, Some(value.into())) {
                        warnings.push(said(&why));
                    }
                }
                None => warnings.push(said("unknown key")),
            },
        }
    }
    warnings
}

/// What the translation needs to know of the process's surroundings.
pub struct Surroundings<'a> {
    /// The machine's physical memory, for `-m N%`.
    pub memory: Option<u64>,
    /// Whether a key is configured (`ACCEL_KEY_FILE`): then `-I`/`-O` are encrypted.
    pub keyed: bool,
    /// Whether writes of exactly the block size can be observed on an output (`None`:
    /// stdout) or read from the input: a character device that is not a terminal, or a
    /// packet-mode pipe.
    pub blocks_observable: &'a dyn Fn(Option<&Path>, bool) -> bool,
    /// The addresses of a host, for `-4`/`-6` with `-O`.
    pub resolve: &'a dyn Fn(&str) -> Vec<std::net::SocketAddr>,
}

impl Request {
    /// `-q`, or `-v` 0 or 1 (or `showstatus = no`): nothing said when all goes well.
    fn is_quiet(&self) -> bool {
        self.quiet || self.verbose.is_some_and(|level| level <= 1)
    }

    /// The accel command line that does what this request asks, program name first.
    pub fn accel_args(&self, here: &Surroundings<'_>) -> Result<Vec<OsString>, String> {
        let mut args: Vec<OsString> = vec!["accel".into()];
        let mut push = |words: &[&dyn AsRef<OsStr>]| {
            args.extend(words.iter().map(|word| word.as_ref().to_owned()));
        };
        if self.is_quiet() {
            push(&[&"-q"]);
        }
        if self.verbose.is_some_and(|level| level >= 5) {
            push(&[&"--debug"]);
        }
        // Every failing output is said, a consumer gone away too: status 1, never SIGPIPE.
        push(&[if self.errors_fatal { &"--output-error=exit" } else { &"--output-error=warn" }]);
        let block = self.block_size.unwrap_or(128 << 10);
        let size = match (self.size, self.blocks) {
            (Some(Amount::Bytes(bytes)), _) => Some(bytes),
            (Some(Amount::Percent(percent)), _) => {
                let memory = here.memory.ok_or(
                    "mbuffer -m: the machine's memory is not known here: give a size, e.g. 1G",
                )?;
                Some(crate::size::share_of_memory(memory, percent))
            }
            (None, Some(blocks)) => Some(blocks.saturating_mul(block)),
            (None, None) => None,
        };
        if let Some(size) = size {
            push(&[&"-m", &size.to_string()]);
        }
        if let Some(bytes) = self.block_size {
            let to_stdout = self.outputs.is_empty() && self.send_to.is_empty();
            let outputs = self.outputs.iter().map(|o| (o != "-").then(|| Path::new(o)));
            let observed = (to_stdout && (here.blocks_observable)(None, true))
                || outputs.into_iter().any(|path| (here.blocks_observable)(path, true));
            if observed {
                push(&[&"--block-size", &bytes.to_string()]);
            }
            let input = self.input.as_deref().filter(|i| *i != "-").map(Path::new);
            if self.listen.is_none() && (here.blocks_observable)(input, false) {
                push(&[&"--input-block-size", &bytes.to_string()]);
            }
        }
        if let Some(percent) = self.start_at {
            push(&[&"--start-at", &format!("{percent}%")]);
        }
        if let Some(percent) = self.resume_at {
            push(&[&"--resume-at", &format!("{percent}%")]);
        }
        if let Some(input) = &self.input {
            if self.listen.is_some() {
                return Err("mbuffer -i: cannot be used with -I: one input only".into());
            }
            push(&[&"-i", input]);
        }
        for output in &self.outputs {
            push(&[&"-o", output]);
        }
        if self.force && self.append {
            return Err("mbuffer --append: cannot be used with -f or --truncate".into());
        }
        if self.force {
            push(&[&"-f"]);
        }
        if self.append {
            push(&[&"-a"]);
        }
        if let Some(rate) = self.read_rate {
            push(&[&"--input-rate", &rate.to_string()]);
        }
        if let Some(rate) = self.write_rate {
            push(&[&"-r", &rate.to_string()]);
        }
        if let Some(listen) = &self.listen {
            push(&[&"--from", &self.listen_address(listen)]);
            if let Some(seconds) = self.timeout {
                push(&[&"--accept-timeout", &format!("{seconds}s")]);
            }
        }
        for to in &self.send_to {
            push(&[&"--to", &self.send_address(to, here)?]);
        }
        if (self.listen.is_some() || !self.send_to.is_empty()) && !here.keyed {
            push(&[&"--insecure"]);
        }
        match (self.timeout, self.tcp_timeout_ms) {
            (Some(seconds), _) => push(&[&"--stall-timeout", &format!("{seconds}s")]),
            (None, Some(ms)) => push(&[&"--stall-timeout", &format!("{ms}ms")]),
            (None, None) => {}
        }
        if self.sync {
            push(&[&"--sync"]);
        }
        for hash in &self.hashes {
            push(&[&"--hash", hash]);
        }
        if self.spill {
            let dir = std::env::var_os("TMPDIR").unwrap_or_else(|| "/var/tmp".into());
            push(&[&"--spill", &dir]);
        }
        Ok(args)
    }

    /// `-I`'s `[HOST:]PORT` as accel's `--from`: a bare port listens on every interface (of
    /// the family `-4`/`-6` asks for); `HOST:PORT` listens on HOST alone.
    fn listen_address(&self, listen: &str) -> String {
        let bare = !listen.contains(':') || listen.starts_with(':');
        let port = listen.trim_start_matches(':');
        match (bare, self.family) {
            (true, Family::V4) => format!("0.0.0.0:{port}"),
            (true, Family::V6) => format!("[::]:{port}"),
            _ => listen.to_owned(),
        }
    }

    /// `-O`'s `HOST:PORT` as accel's `--to`; with `-4`/`-6`, HOST's address of that family.
    fn send_address(&self, to: &str, here: &Surroundings<'_>) -> Result<String, String> {
        let wanted = match self.family {
            Family::Any => return Ok(to.to_owned()),
            Family::V4 => std::net::SocketAddr::is_ipv4,
            Family::V6 => std::net::SocketAddr::is_ipv6,
        };
        (here.resolve)(to).into_iter().find(wanted).map(|a| a.to_string()).ok_or_else(|| {
            let family = if self.family == Family::V4 { "IPv4" } else { "IPv6" };
            format!("mbuffer -O {to}: no {family} address (-{})", &family[3..])
        })
    }
}

/// mbuffer's `-h`, in accel's words: every option and what accel does with it.
pub fn help() -> String {
    let mut text = format!(
        "usage: mbuffer [Options]\n\
         This is accel {}, reading mbuffer's command line. Every option of mbuffer's is \
         either done as below or refused.\nOptions:\n",
        env!("CARGO_PKG_VERSION")
    );
    for option in OPTIONS {
        let head = format!("{} {}", option.name, option.value.unwrap_or_default());
        let what = match option.handling {
            Handling::Maps(what) => what.to_owned(),
            Handling::Refused(why) => format!("refused: {why}"),
        };
        let _ = writeln!(text, "{:<18}: {what}", head.trim_end());
    }
    text.push_str(
        "Sizes and rates: a number and k, m, g, t (1k = 1024), b (bytes) or % (of memory, -m \
         only). Defaults files: /etc/mbuffer.rc, ~/.mbuffer.rc.\n\
         Exit status: 0 when every byte was delivered, 1 otherwise; SIGINT, SIGTERM and SIGHUP \
         end it by that signal. `accel --help` has the rest.\n",
    );
    text
}

/// Runs accel on mbuffer's command line `args`; the status to return from `main`.
pub fn main(args: &[OsString], closed: crate::run::stdio::Closed) -> i32 {
    let request = match parse(args, defaults()) {
        Ok(Parsed::Run(request)) => *request,
        Ok(Parsed::Help) => return crate::cli::print(&help()),
        Ok(Parsed::Version) => {
            return crate::cli::print(&format!(
                "accel {}, running as mbuffer (it reads mbuffer's command line; mbuffer -h \
                 says how)\n",
                env!("CARGO_PKG_VERSION")
            ));
        }
        Ok(Parsed::HashList) => {
            let names = crate::engine::digest::Algorithm::names();
            eprintln!("valid hash functions are:\n\t{}", names.join("\n\t"));
            return 0;
        }
        Err(why) => {
            eprintln!("accel: {why}");
            return 1;
        }
    };
    if let Some(log) = &request.log {
        if let Err(error) = log_to(Path::new(log)) {
            eprintln!("accel: mbuffer -l {}: {error}", Path::new(log).display());
            return 1;
        }
    }
    if !request.is_quiet() {
        for warning in &request.warnings {
            eprintln!("accel: {warning}");
        }
    }
    if request.print_pid {
        eprintln!("accel: PID is {}", std::process::id());
    }
    let here = Surroundings {
        memory: crate::sys::physical_memory(),
        keyed: std::env::var_os(crate::net::key::ENV).is_some_and(|key| !key.is_empty()),
        blocks_observable: &blocks_observable,
        resolve: &|host| {
            use std::net::ToSocketAddrs;
            host.to_socket_addrs().map(Iterator::collect).unwrap_or_default()
        },
    };
    let args = match request.accel_args(&here) {
        Ok(args) => args,
        Err(why) => {
            eprintln!("accel: {why}");
            return 1;
        }
    };
    let cli = match usage::parse(&args) {
        Ok(cli) => cli,
        Err(Refusal::Usage(why)) => {
            eprintln!("accel: mbuffer: {why}");
            return 1;
        }
        Err(Refusal::Shown(_)) => return 1,
    };
    let stderr_is_terminal = rustix::termios::isatty(rustix::stdio::stderr());
    let exit = match Config::from_cli(cli, stderr_is_terminal) {
        Ok(config) => crate::run::run(&config, closed),
        Err(error) => {
            eprintln!("accel: mbuffer: {error}");
            return 1;
        }
    };
    // mbuffer's statuses: 0, or 1 for any failure. (INT, TERM and HUP never get here: the
    // signal thread ends accel by the signal, as in accel's own mode.)
    if exit == Exit::Success { 0 } else { 1 }
}

/// `-l FILE`: stderr goes to FILE from here on (created, or truncated, as mbuffer does).
fn log_to(path: &Path) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let file = rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::APPEND | OFlags::CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )?;
    // Onto descriptor 2, which run/stdio.rs made sure is open.
    Ok(rustix::stdio::dup2_stderr(&file)?)
}

/// Whether a block size can be observed on the output or input at `path` (`None`: stdout
/// or stdin): a character device that is not a terminal, or a packet-mode pipe.
fn blocks_observable(path: Option<&Path>, output: bool) -> bool {
    let stat = match path {
        Some(path) => rustix::fs::stat(path),
        None if output => rustix::fs::fstat(rustix::stdio::stdout()),
        None => rustix::fs::fstat(rustix::stdio::stdin()),
    };
    let Ok(stat) = stat else { return false };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::CharacterDevice => match path {
            Some(path) => !path.starts_with("/dev/tty") && !path.starts_with("/dev/pts"),
            None if output => !rustix::termios::isatty(rustix::stdio::stdout()),
            None => !rustix::termios::isatty(rustix::stdio::stdin()),
        },
        FileType::Fifo if path.is_none() && output => {
            rustix::fs::fcntl_getfl(rustix::stdio::stdout()).is_ok_and(crate::sys::is_packet_mode)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accel command line for mbuffer's `args`, with `observable` saying whether blocks
    /// can be seen on the outputs, or why it is refused.
    fn translated(args: &str, observable: bool) -> Result<String, String> {
        let args: Vec<OsString> =
            std::iter::once("mbuffer").chain(args.split_whitespace()).map(Into::into).collect();
        let Parsed::Run(request) = parse(&args, Request::default())? else {
            return Ok("shown".into());
        };
        let here = Surroundings {
            memory: Some(10 << 30),
            keyed: false,
            blocks_observable: &|_, output| observable && output,
            resolve: &|_| vec!["[::1]:9090".parse().unwrap(), "127.0.0.1:9090".parse().unwrap()],
        };
        let args = request.accel_args(&here)?;
        Ok(args[1..].iter().map(|arg| arg.to_string_lossy()).collect::<Vec<_>>().join(" "))
    }

    #[test]
    fn the_backup_tools_command_lines_translate() {
        let cases = [
            // syncoid
            ("-R 10M -q -s 128k -m 16M", "-q --output-error=warn -m 16777216 -r 10485760"),
            (
                "-r 10M -q -s 128k -m 16M",
                "-q --output-error=warn -m 16777216 --input-rate 10485760",
            ),
            (
                "-r 1G -W 60 -I 127.0.0.1:9090 -q -s 128k -m 16M",
                "-q --output-error=warn -m 16777216 --input-rate 1073741824 \
                 --from 127.0.0.1:9090 --accept-timeout 60s --insecure --stall-timeout 60s",
            ),
            // zfs_autobackup: glued values
            ("-q -s128k -m16M -R10M", "-q --output-error=warn -m 16777216 -r 10485760"),
            // btrbk: lower case, a share of memory
            (
                "-v 1 -q -s 128k -m 512m -r 10m -R 10m",
                "-q --output-error=warn -m 536870912 --input-rate 10485760 -r 10485760",
            ),
            ("-v 1 -m 5%", "-q --output-error=warn -m 536870912"),
            // znapzend: the last of a repeated option wins; direct mode
            (
                "-q -s 256k -W 600 -m 1G -R 1M -R 10M",
                "-q --output-error=warn -m 1073741824 -r 10485760 --stall-timeout 600s",
            ),
            (
                "-q -s 256k -W 600 -m 1G -4 -I 9090",
                "-q --output-error=warn -m 1073741824 --from 0.0.0.0:9090 --accept-timeout 600s \
                 --insecure --stall-timeout 600s",
            ),
            (
                "-q -s 256k -m 1G -4 -O host:9090",
                "-q --output-error=warn -m 1073741824 --to 127.0.0.1:9090 --insecure",
            ),
            ("-q -6 -O host:9090", "-q --output-error=warn --to [::1]:9090 --insecure"),
            // pyznap; TrueNAS
            ("-q -s 128K -m 512M", "-q --output-error=warn -m 536870912"),
            (
                "-q -Q -m 1048576b -r 10485760 -R 1048576",
                "-q --output-error=warn -m 1048576 --input-rate 10485760 -r 1048576",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(translated(args, false).as_deref(), Ok(expected), "mbuffer {args}");
        }
    }

    #[test]
    fn each_mapped_option_becomes_accels() {
        let cases = [
            ("-b 10 -s 4k", "--output-error=warn -m 40960"),
            ("-P 90 -p 20", "--output-error=warn --start-at 90% --resume-at 20%"),
            ("-i in -o a -o - -f", "--output-error=warn -i in -o a -o - -f"),
            ("--truncate -o a", "--output-error=warn -o a -f"),
            ("--append -o a", "--output-error=warn -o a -a"),
            ("-t", "--output-error=warn --spill "),
            ("-l log --pid -Q --no-direct --direct -0 --tcpbuffer 1M", "--output-error=warn"),
            ("--tcptimeo 1500", "--output-error=warn --stall-timeout 1500ms"),
            ("-W 5 --tcptimeo 1500", "--output-error=warn --stall-timeout 5s"),
            ("-v 5", "--debug --output-error=warn"),
            ("-v 5 -v 3", "--output-error=warn"),
            ("-c -e", "--output-error=exit --sync"),
            ("-H --md5 --hash SHA256", "--output-error=warn --hash md5 --hash md5 --hash sha256"),
            ("-h -n 2", "shown"),
            ("-V", "shown"),
            ("--hash list", "shown"),
        ];
        for (args, expected) in cases {
            let got = translated(args, false).unwrap();
            // -t names the spill directory from the environment: not compared.
            let got =
                if args == "-t" { got.trim_end_matches(|c| c != ' ').to_owned() } else { got };
            assert_eq!(got, expected, "mbuffer {args}");
        }
        // -s is exact only where it can be seen.
        assert_eq!(
            translated("-s 64k -m 1M", true).as_deref(),
            Ok("--output-error=warn -m 1048576 --block-size 65536")
        );
    }

    #[test]
    fn sizes_as_mbuffer_reads_them() {
        let bytes = |text| match amount(text) {
            Ok(Amount::Bytes(bytes)) => Ok(bytes),
            Ok(Amount::Percent(p)) => Ok(p as u64 + 1_000_000_000_000_000),
            Err(why) => Err(why),
        };
        assert_eq!(bytes("128k"), Ok(128 << 10));
        assert_eq!(bytes("128K"), Ok(128 << 10));
        assert_eq!(bytes("16MB"), Ok(16 << 20), "what follows the suffix is ignored");
        assert_eq!(bytes("1.5g"), Ok(3 << 29));
        assert_eq!(bytes("2T"), Ok(2 << 40));
        assert_eq!(bytes("512b"), Ok(512));
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("5%"), Ok(1_000_000_000_000_005));
        assert_eq!(bytes("100b"), Err("fewer than 128 bytes".into()));
        assert!(bytes("64").unwrap_err().contains("suffix is missing"));
        assert!(bytes("95%").unwrap_err().contains("below 90%"));
        assert!(bytes("3q").unwrap_err().contains("'q' is not a suffix"));
        assert!(bytes("lots").unwrap_err().starts_with("not a size"));
        assert!(bytes("0k").unwrap_err().contains("more than 0"));
    }

    #[test]
    fn refusals_name_the_option_and_why() {
        let said = |args: &str| translated(args, false).unwrap_err();
        for option in OPTIONS {
            if let Handling::Refused(why) = option.handling {
                let args =
                    format!("{} {}", option.name, if option.value.is_some() { "1" } else { "" });
                assert_eq!(said(&args), format!("mbuffer {}: {why}", option.name));
            }
        }
        assert_eq!(said("-x"), "mbuffer -x: unknown option; mbuffer -h lists the options");
        assert_eq!(said("-qv"), "mbuffer -qv: unknown option; mbuffer -h lists the options");
        assert_eq!(said("-m"), "mbuffer -m: a value <size> must follow it");
        assert_eq!(said("-s 5%"), "mbuffer -s 5%: a block size cannot be a share of memory");
        assert_eq!(said("-R 5%"), "mbuffer -R 5%: a share of memory is only for -m");
        assert_eq!(said("-W 0"), format!("mbuffer -W 0: {NOT_SECONDS}"));
        assert_eq!(said("-i a -I 9090"), "mbuffer -i: cannot be used with -I: one input only");
        assert_eq!(
            said("--hash whirlpool"),
            "mbuffer --hash whirlpool: not a hash accel knows; --hash list lists them"
        );
    }

    #[test]
    fn defaults_files_set_what_options_would() {
        let mut request = Request::default();
        let warnings = read_defaults(
            "# mbuffer defaults\nblocksize = 128k\nTotalmem: 1G\nmaxwritespeed 10M # a comment\n\
             timeout = 60\nshowstatus = no\nmemlock = yes\nbogus = 1\nnumblocks\n",
            &mut request,
        );
        assert_eq!(request.block_size, Some(128 << 10));
        assert_eq!(request.size, Some(Amount::Bytes(1 << 30)));
        assert_eq!(request.write_rate, Some(10 << 20));
        assert_eq!(request.timeout, Some(60));
        assert!(request.quiet);
        assert_eq!(
            warnings,
            [
                "line 7: memlock = yes: not supported by accel (see mbuffer -h); ignored",
                "line 8: bogus = 1: unknown key; ignored",
                "line 9: numblocks: expected key = value; ignored",
            ]
        );
        // The command line comes after the defaults, and wins.
        let args: Vec<OsString> = ["mbuffer", "-W", "5"].map(Into::into).to_vec();
        let Ok(Parsed::Run(request)) = parse(&args, request) else { panic!() };
        assert_eq!(request.timeout, Some(5));
        let mut request = Request::default();
        read_defaults("totalmem = 5", &mut request);
        assert_eq!(request.size, Some(Amount::Percent(5.0)));
    }

    #[test]
    fn invoked_by_the_name_mbuffer_only() {
        let named = |name: &str| invoked_as(Some(&OsString::from(name)));
        assert!(named("mbuffer"));
        assert!(named("/usr/local/bin/mbuffer"));
        assert!(!named("accel"));
        assert!(!named("mbuffer2"));
        assert!(!invoked_as(None));
    }
}
