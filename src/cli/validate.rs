//! The command line read into a run's [`Config`]: every value parsed and checked against the
//! others, conflicts resolved, decisions about the terminal taken.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{Cli, EngineArg, OutputErrorArg};
use crate::endpoint::open::Existing;
use crate::engine::digest::Algorithm;
use crate::engine::{OutputErrors, Preference};
use crate::net::{self, address::Address};
use crate::run::config::{Config, FlowConfig, Level, Ssh, Target, Via};
use crate::size::{Bytes, parse_size};
use crate::watch::{JsonTarget, Visibility};
use crate::words::printable;

/// The shortest `--interval`: a terminal redrawn more often only flickers.
pub const SHORTEST_INTERVAL: Duration = Duration::from_millis(100);

/// A command-line value that makes no sense; shown as `accel: -m 3Q: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("{option} {value}: {reason}")]
pub struct ConfigError {
    option: &'static str,
    value: String,
    reason: String,
}

impl Config {
    /// Validates the raw command line; `stderr_is_terminal` decides about the progress line.
    /// The groups of options are checked in this order, so that of two bad values the same
    /// one is always named.
    pub fn from_cli(cli: Cli, stderr_is_terminal: bool) -> Result<Config, ConfigError> {
        let size = buffer_size(&cli)?;
        let flow = flow(&cli, size)?;
        let spill_size = spill_size(&cli)?;
        let expect = match &cli.expect {
            None => None,
            Some(text) => Some(parse_size(text, 0).map_err(|reason| ConfigError {
                option: "--expect",
                value: text.clone(),
                reason: reason.to_string(),
            })?),
        };
        let stall_timeout = duration_option("--stall-timeout", &cli.stall_timeout)?;
        let engine = engine(&cli)?;
        let hashes = hashes(&cli)?;
        let display = display(&cli, stderr_is_terminal)?;
        let ssh = ssh_settings(&cli)?;
        let net = network_settings(&cli, size)?;
        let mut outputs = outputs(&cli)?;
        if ssh.as_ref().is_some_and(|ssh| ssh.push) && cli.outputs.is_empty() {
            // The stream goes to the remote command; stdout only when -o - says so.
            outputs.retain(|target| *target != Target::Stdout);
        }
        let (existing, output_errors) = (existing(&cli), output_errors(&cli));
        Ok(Config {
            input: cli.input.filter(|path| path.as_os_str() != "-"),
            files: cli.files,
            stop_after: None,
            lines: None,
            look: Default::default(),
            outputs,
            existing,
            sync: cli.sync,
            output_errors,
            hashes,
            hash_file: cli.hash_file,
            size: size as usize,
            engine,
            progress: display.progress,
            stats: cli.stats && !cli.quiet,
            quiet: cli.quiet,
            json: display.json,
            expect,
            stall_timeout,
            debug: cli.debug,
            flow,
            remote: cli.remote,
            spill: cli.spill,
            spill_size,
            name: cli.name.map(|name| printable(&name)).filter(|name| !name.is_empty()),
            numeric: cli.numeric,
            interval: display.interval,
            progress_fd: display.progress_fd,
            net,
            ssh,
            producer: None,
        })
    }
}

/// `-m`: a size, or a share of the machine's memory.
fn buffer_size(cli: &Cli) -> Result<u64, ConfigError> {
    crate::size::parse_buffer_size(&cli.size, crate::sys::physical_memory).map_err(|reason| {
        ConfigError { option: "-m", value: cli.size.clone(), reason: reason.to_string() }
    })
}

/// `--spill-size`: at least what the spill takes at once.
fn spill_size(cli: &Cli) -> Result<Option<u64>, ConfigError> {
    let Some(text) = &cli.spill_size else { return Ok(None) };
    let fail = |reason: String| ConfigError { option: "--spill-size", value: text.clone(), reason };
    let size = parse_size(text, 1).map_err(|reason| fail(reason.to_string()))?;
    if let Some(why) = crate::buffer::spill_size_refused(size) {
        return Err(fail(why));
    }
    Ok(Some(size))
}

/// `--engine`: splice only where there is splice.
fn engine(cli: &Cli) -> Result<Preference, ConfigError> {
    match cli.engine {
        EngineArg::Auto => Ok(Preference::Auto),
        EngineArg::Copy => Ok(Preference::Copy),
        EngineArg::Splice if crate::sys::CAN_SPLICE => Ok(Preference::Splice),
        EngineArg::Splice => Err(ConfigError {
            option: "--engine",
            value: "splice".into(),
            reason: "splice exists only on Linux; use auto or copy".into(),
        }),
    }
}

/// `--hash`, each a hash accel knows; `--hash-file` only with one.
fn hashes(cli: &Cli) -> Result<Vec<Algorithm>, ConfigError> {
    let hashes = cli
        .hashes
        .iter()
        .map(|name| {
            Algorithm::named(name).ok_or_else(|| ConfigError {
                option: "--hash",
                value: name.clone(),
                reason: format!(
                    "not a hash accel knows: expected one of {}",
                    Algorithm::names().join(", ")
                ),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let (Some(path), true) = (&cli.hash_file, hashes.is_empty()) {
        return Err(ConfigError {
            option: "--hash-file",
            value: path.display().to_string(),
            reason: "no --hash was given: name the hash to write, e.g. --hash sha256".into(),
        });
    }
    Ok(hashes)
}

/// How progress is shown: how often, where, whether at all; where `--json` goes.
struct Display {
    interval: Option<Duration>,
    progress_fd: Option<i32>,
    json: Option<JsonTarget>,
    progress: Visibility,
}

/// `--interval`, `--progress-fd`, `--json`, and the progress line's visibility from them,
/// `-p`, `-q`, `-n` and whether stderr is a terminal.
fn display(cli: &Cli, stderr_is_terminal: bool) -> Result<Display, ConfigError> {
    let interval = match &cli.interval {
        None => None,
        Some(text) => Some(
            parse_duration(text)
                .and_then(|interval| {
                    (interval >= SHORTEST_INTERVAL)
                        .then_some(interval)
                        .ok_or_else(|| "too short: at least 0.1s".to_owned())
                })
                .map_err(|reason| ConfigError {
                    option: "--interval",
                    value: text.clone(),
                    reason,
                })?,
        ),
    };
    let progress_fd = match &cli.progress_fd {
        None => None,
        Some(text) => {
            Some(text.trim().parse::<i32>().ok().filter(|fd| *fd >= 0).ok_or_else(|| {
                ConfigError {
                    option: "--progress-fd",
                    value: text.clone(),
                    reason: "not a descriptor: expected a number such as 3, opened by the shell \
                         (3>progress.log)"
                        .into(),
                }
            })?)
        }
    };
    let json = cli.json.clone().map(|path| {
        if path.as_os_str() == "-" { JsonTarget::Stderr } else { JsonTarget::File(path) }
    });
    let progress = if cli.numeric || progress_fd.is_some() {
        // Asked for by name, and not drawn over a terminal's other lines: always written.
        Visibility::Always
    } else if cli.quiet || !stderr_is_terminal {
        Visibility::Off
    } else if cli.progress {
        Visibility::Always
    } else if json == Some(JsonTarget::Stderr) {
        // NDJSON on the terminal is what was asked for; a redrawn line would garble it.
        Visibility::Off
    } else {
        Visibility::Foreground
    };
    Ok(Display { interval, progress_fd, json, progress })
}

/// The outputs in order (`-o`, then `--to`), stdout when none was given; none named twice.
fn outputs(cli: &Cli) -> Result<Vec<Target>, ConfigError> {
    let mut outputs: Vec<Target> = cli
        .outputs
        .iter()
        .map(
            |path| {
                if path.as_os_str() == "-" { Target::Stdout } else { Target::Path(path.clone()) }
            },
        )
        .collect();
    for text in cli.to.iter().filter(|text| !is_ssh(text)) {
        let address = Address::parse(text, false).map_err(|reason| ConfigError {
            option: "--to",
            value: text.clone(),
            reason,
        })?;
        outputs.push(Target::Network(address));
    }
    if outputs.is_empty() {
        outputs.push(Target::Stdout);
    }
    for (at, target) in outputs.iter().enumerate() {
        if outputs[..at].contains(target) {
            let value = match target {
                Target::Stdout => "-".to_owned(),
                Target::Path(path) => path.display().to_string(),
                Target::Network(address) => address.to_string(),
            };
            return Err(ConfigError {
                option: "-o",
                value,
                reason: "named twice: each output gets every byte once".into(),
            });
        }
    }
    Ok(outputs)
}

/// What `-o` does to an existing regular file: `--force`, `--append`, or refuse.
fn existing(cli: &Cli) -> Existing {
    if cli.force {
        Existing::Overwrite
    } else if cli.append {
        Existing::Append
    } else {
        Existing::Refuse
    }
}

/// `--output-error`: what a failing output does to the others.
fn output_errors(cli: &Cli) -> OutputErrors {
    match cli.output_error {
        None => OutputErrors::Default,
        Some(OutputErrorArg::Warn) => OutputErrors::Warn,
        Some(OutputErrorArg::WarnNopipe) => OutputErrors::WarnNoPipe,
        Some(OutputErrorArg::Exit) => OutputErrors::Exit,
        Some(OutputErrorArg::ExitNopipe) => OutputErrors::ExitNoPipe,
    }
}

/// Validates the flow-control options against each other and the buffer size `size`.
fn flow(cli: &Cli, size: u64) -> Result<FlowConfig, ConfigError> {
    let fail = |option: &'static str, value: &str, reason: String| ConfigError {
        option,
        value: value.to_owned(),
        reason,
    };
    // 0 (or none, off, unlimited) is no limit, as pv's `-L 0`: what lifts a limit while
    // accel runs (`-R PID -r 0`) and what a script passes when it wants none.
    let rate = |option: &'static str, text: &Option<String>| -> Result<Option<u64>, ConfigError> {
        let Some(text) = text else { return Ok(None) };
        let bytes = text.trim().strip_suffix("/s").unwrap_or(text.trim());
        if ["none", "off", "unlimited"].iter().any(|word| bytes.eq_ignore_ascii_case(word)) {
            return Ok(Some(0));
        }
        parse_size(bytes, 0).map(Some).map_err(|e| fail(option, text, e.to_string()))
    };
    let block = |option: &'static str,
                 text: &Option<String>|
     -> Result<Option<usize>, ConfigError> {
        let Some(text) = text else { return Ok(None) };
        let bytes = parse_size(text, 1).map_err(|e| fail(option, text, e.to_string()))?;
        if bytes > size {
            return Err(fail(option, text, format!("larger than the buffer (-m {})", Bytes(size))));
        }
        Ok(Some(bytes as usize))
    };
    let level = |option: &'static str, text: &Option<String>, full_allowed: bool| {
        let Some(text) = text else { return Ok(None) };
        let level = parse_level(text).map_err(|reason| fail(option, text, reason))?;
        let beyond = match level {
            Level::Percent(p) => p > 100.0 || (p == 100.0 && !full_allowed),
            Level::Bytes(b) => b > size || (b == size && !full_allowed),
        };
        if beyond {
            let limit = if full_allowed { "at most" } else { "below" };
            return Err(fail(
                option,
                text,
                format!("must be {limit} the buffer (-m {}, 100%)", Bytes(size)),
            ));
        }
        Ok(Some(level))
    };
    let start_at = level("--start-at", &cli.start_at, true)?;
    let resume_at = level("--resume-at", &cli.resume_at, false)?;
    if let (Some(start), Some(resume)) = (start_at, resume_at) {
        let capacity = size as usize;
        if resume.of(capacity) >= start.of(capacity) {
            return Err(fail(
                "--resume-at",
                cli.resume_at.as_deref().unwrap_or_default(),
                format!(
                    "must be below --start-at {}: reading resumes as the buffer drains, before \
                     writing would wait for it to fill",
                    cli.start_at.as_deref().unwrap_or_default()
                ),
            ));
        }
    }
    let flow = FlowConfig {
        rate: rate("-r", &cli.rate)?,
        input_rate: rate("--input-rate", &cli.input_rate)?,
        start_at,
        resume_at,
        block_size: block("--block-size", &cli.block_size)?,
        pad: cli.pad,
        input_block_size: block("--input-block-size", &cli.input_block_size)?,
    };
    if let (Some(text), Some(input), Some((_, need))) =
        (&cli.block_size, &cli.input_block_size, flow.blocks_need())
    {
        if need as u64 > size {
            return Err(fail(
                "--block-size",
                text,
                format!(
                    "a block and a read of --input-block-size {input} must fit in the buffer \
                     together: -m {}K or more (not {})",
                    need.div_ceil(1024),
                    Bytes(size)
                ),
            ));
        }
    }
    Ok(flow)
}

/// Parses a fill level: `50%`, `12.5%`, or a size (`16M`).
fn parse_level(text: &str) -> Result<Level, String> {
    match text.trim().strip_suffix('%') {
        Some(number) => number
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p >= 0.0)
            .map(Level::Percent)
            .ok_or_else(|| "not a percentage: expected e.g. 50% or 12.5%".to_owned()),
        None => parse_size(text, 0)
            .map(Level::Bytes)
            .map_err(|e| format!("{e}; or a share of the buffer, e.g. 50%")),
    }
}

/// `--from`, `--key-file` (or `ACCEL_KEY_FILE`), `--insecure`, `--accept-timeout`,
/// `--connect-for`, `--reconnect-for`, `--heartbeat`, `--compress`, `--congestion` (its name is
/// checked against the kernel's when the network opens, with the others' files and ports).
fn network_settings(cli: &Cli, size: u64) -> Result<net::Peering, ConfigError> {
    let from = match &cli.from {
        None => None,
        Some(text) if is_ssh(text) => None,
        Some(text) => Some(Address::parse(text, true).map_err(|reason| ConfigError {
            option: "--from",
            value: text.clone(),
            reason,
        })?),
    };
    let peers = from.is_some() || cli.to.iter().any(|text| !is_ssh(text));
    let key_file = match (&cli.key_file, cli.insecure) {
        (Some(path), _) => Some(path.clone()),
        // With --insecure, a key named by the environment is simply not used.
        (None, true) => None,
        (None, false) => {
            std::env::var_os(net::key::ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
        }
    };
    let key_file_from_env = cli.key_file.is_none() && key_file.is_some();
    if peers && !cli.insecure && key_file.is_none() {
        let option = if from.is_some() { "--from" } else { "--to" };
        let value = from.as_ref().map_or_else(
            || cli.to.iter().find(|text| !is_ssh(text)).cloned().unwrap_or_default(),
            |_| cli.from.clone().unwrap_or_default(),
        );
        return Err(ConfigError {
            option,
            value,
            reason: "a key is needed: --key-file FILE (or ACCEL_KEY_FILE=FILE), made by \
                     `accel --generate key FILE` and copied to the other end; or --insecure \
                     for plain TCP"
                .into(),
        });
    }
    let accept_timeout = duration_option("--accept-timeout", &cli.accept_timeout)?;
    let mut resume = net::Resume::default();
    match cli.reconnect_for.as_deref().map(str::trim) {
        // 0: no resuming, as parse_duration takes only positive durations.
        Some(zero) if zero.parse::<f64>() == Ok(0.0) => resume.within = Duration::ZERO,
        _ => {
            if let Some(within) = duration_option("--reconnect-for", &cli.reconnect_for)? {
                resume.within = within;
            }
        }
    }
    if let Some(heartbeat) = duration_option("--heartbeat", &cli.heartbeat)? {
        if heartbeat < Duration::from_millis(10) {
            return Err(ConfigError {
                option: "--heartbeat",
                value: cli.heartbeat.clone().unwrap_or_default(),
                reason: "at least 10ms: a peer must have time to answer".into(),
            });
        }
        resume.heartbeat = heartbeat;
    }
    if cli.insecure && cli.reconnect_for.as_ref().is_some_and(|_| !resume.within.is_zero()) {
        return Err(ConfigError {
            option: "--reconnect-for",
            value: cli.reconnect_for.clone().unwrap_or_default(),
            reason: "plain TCP (--insecure) cannot resume a stream: it has no offsets".into(),
        });
    }
    let insecure = cli.insecure;
    let connect_for = match cli.connect_for.as_deref().map(str::trim) {
        // 0: no second try, as parse_duration takes only positive durations.
        Some(zero) if zero.parse::<f64>() == Ok(0.0) => Duration::ZERO,
        _ => duration_option("--connect-for", &cli.connect_for)?.unwrap_or(net::CONNECT_FOR),
    };
    let congestion = match &cli.congestion {
        None => net::Congestion::Preferred,
        Some(text) => net::Congestion::parse(text).map_err(|reason| ConfigError {
            option: "--congestion",
            value: text.clone(),
            reason,
        })?,
    };
    let compress = match &cli.compress {
        // Plain TCP is a raw stream, whatever the default.
        None if cli.insecure => net::compress::Compress::None,
        None => net::compress::Compress::default(),
        Some(text) => net::compress::Compress::parse(text).map_err(|reason| ConfigError {
            option: "--compress",
            value: text.clone(),
            reason,
        })?,
    };
    // The sender compresses: this accel with --to, the remote one when pulling through ssh
    // (the option goes there), and the remote end itself (`--serve-ssh`), which sends when
    // pulled from and ignores it when pushed to.
    let pulls_through_ssh = cli.from.as_deref().is_some_and(is_ssh);
    if cli.compress.is_some() && cli.to.is_empty() && !pulls_through_ssh && !cli.serve_ssh {
        return Err(ConfigError {
            option: "--compress",
            value: cli.compress.clone().unwrap_or_default(),
            reason: "the sender compresses (with --to, or --from ssh://); a receiver (--from) \
                     decompresses whatever each frame says, with nothing to set"
                .into(),
        });
    }
    if cli.insecure && compress != net::compress::Compress::None {
        return Err(ConfigError {
            option: "--compress",
            value: cli.compress.clone().unwrap_or_default(),
            reason: "plain TCP (--insecure) is a raw stream, for mbuffer and nc: it is never \
                     compressed"
                .into(),
        });
    }
    Ok(net::Peering {
        compress,
        compress_asked: cli.compress.is_some(),
        from,
        key_file,
        key_file_from_env,
        insecure,
        accept_timeout,
        connect_for,
        resume,
        congestion,
        key: None,
        bound: Vec::new(),
        dialed: None,
        carried: None,
        carried_out: None,
        ahead: None,
        streams: streams(cli)?,
        // A quarter of the buffer, and part of it: the sender has at most this beyond what
        // the receiver's input took in (the reorder map's bound), and at most the whole
        // buffer beyond what its outputs took (the map and the backlog together).
        window: size / 4,
        hold: size,
        met: None,
    })
}

/// `--streams N`: the connections of each `--to`'s stream, 1 to 16.
fn streams(cli: &Cli) -> Result<u8, ConfigError> {
    let Some(text) = &cli.streams else { return Ok(1) };
    let fail = |reason: &str| ConfigError {
        option: "--streams",
        value: text.clone(),
        reason: reason.into(),
    };
    if cli.to.is_empty() && cli.from.is_none() && !cli.serve_ssh {
        return Err(fail("only with --to or --from"));
    }
    let streams: u8 = text.trim().parse().map_err(|_| fail("a number of connections, 1 to 16"))?;
    if !(1..=net::wire::MOST_STREAMS).contains(&streams) {
        return Err(fail("a number of connections, 1 to 16"));
    }
    if cli.insecure && streams > 1 {
        return Err(fail(
            "plain TCP (--insecure) has no offsets to put several connections in order",
        ));
    }
    Ok(streams)
}

/// Whether a `--to`/`--from` value is an ssh:// URL: the other end started through ssh.
fn is_ssh(text: &str) -> bool {
    text.starts_with(SSH_SCHEME)
}

/// The scheme of a peer started through ssh.
const SSH_SCHEME: &str = "ssh://";

/// The environment variable that names the program that runs ssh (as `--ssh-command`).
pub const SSH_ENV: &str = "ACCEL_SSH";

/// `--to ssh://…` or `--from ssh://…` with `-- CMD`, and the options only they take
/// (`--ssh-command` or `ACCEL_SSH`, `--remote-accel`, `--remote-args`, `--via`,
/// `--remote-ports`), each refused without them.
fn ssh_settings(cli: &Cli) -> Result<Option<Ssh>, ConfigError> {
    let urls: Vec<(&'static str, &String)> = cli
        .to
        .iter()
        .map(|text| ("--to", text))
        .chain(cli.from.iter().map(|text| ("--from", text)))
        .filter(|(_, text)| is_ssh(text))
        .collect();
    let error = |option: &'static str, value: &str, reason: &str| ConfigError {
        option,
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    let (option, url) = match urls.as_slice() {
        [] => {
            let only = [
                ("--ssh-command", &cli.ssh_command),
                ("--remote-accel", &cli.remote_accel),
                ("--remote-args", &cli.remote_args),
                ("--via", &cli.via),
                ("--remote-ports", &cli.remote_ports),
            ];
            if let Some((option, Some(value))) = only.into_iter().find(|(_, v)| v.is_some()) {
                return Err(error(option, value, "only with --to ssh://HOST or --from ssh://HOST"));
            }
            return Ok(None);
        }
        [one] => *one,
        [_, (option, second), ..] => {
            return Err(error(option, second, "one ssh:// peer per run"));
        }
    };
    let rest = &url[SSH_SCHEME.len()..];
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (destination, port) = match rest.rsplit_once(':') {
        Some((destination, port)) if !port.contains(']') => {
            let port = port.parse::<u16>().ok().filter(|&port| port != 0).ok_or_else(|| {
                error(
                    option,
                    url,
                    &format!("{port:?} is not a port: expected ssh://[USER@]HOST[:PORT]"),
                )
            })?;
            (destination, Some(port))
        }
        _ => (rest, None),
    };
    // ssh takes an IPv6 address bare: `ssh ::1`, not `ssh [::1]`.
    let destination = destination.replace(['[', ']'], "");
    let host = destination.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || destination.contains('/') || destination.starts_with('-') {
        return Err(error(
            option,
            url,
            "which host? expected ssh://[USER@]HOST[:PORT], e.g. ssh://backup or ssh://root@backup:2222",
        ));
    }
    if cli.remote_command.is_empty() {
        return Err(error(
            option,
            url,
            "which command there? add -- CMD after the options, e.g. -- 'cat > /backup/x' or -- zfs receive -s tank/fs",
        ));
    }
    if let Some(path) = &cli.key_file {
        let value = path.display().to_string();
        return Err(error(
            "--key-file",
            &value,
            "not with ssh://: a fresh key is made for each run and given through ssh",
        ));
    }
    if cli.insecure {
        return Err(error("--insecure", url, "not with ssh://: the stream is always encrypted"));
    }
    if option == "--from" && !cli.files.is_empty() {
        let value = cli.files[0].display().to_string();
        return Err(error(
            "--from",
            &value,
            "the input is the remote command's output: no FILE operands",
        ));
    }
    let words = |option: &'static str, text: &str| {
        shlex::split(text).filter(|words| !words.is_empty()).ok_or_else(|| {
            error(option, text, "not words a shell could split (an unmatched quote?)")
        })
    };
    let program = match (&cli.ssh_command, std::env::var(SSH_ENV).ok().filter(|v| !v.is_empty())) {
        (Some(text), _) => words("--ssh-command", text)?,
        (None, Some(text)) => words("ACCEL_SSH", &text)?,
        (None, None) => vec!["ssh".to_owned()],
    };
    let mut remote_args = match &cli.remote_args {
        Some(text) if !text.trim().is_empty() => words("--remote-args", text)?,
        _ => Vec::new(),
    };
    // Pulling, the remote accel is the sender: it compresses as asked here, and carries the
    // stream over as many connections.
    if let (Some(how), "--from") = (&cli.compress, option) {
        remote_args.extend(["--compress".to_owned(), how.clone()]);
    }
    if let (Some(count), "--from") = (&cli.streams, option) {
        remote_args.extend(["--streams".to_owned(), count.trim().to_owned()]);
    }
    let via = match cli.via.as_deref().map(str::trim) {
        None | Some("auto") => Via::Auto,
        Some("direct") => Via::Direct,
        Some("ssh") => Via::Ssh,
        Some(other) => return Err(error("--via", other, "expected auto, direct or ssh")),
    };
    // The session carries one byte stream, one connection's: several connections
    // are for a direct path (a per-flow limit, one cipher thread), which `--via ssh` gave up.
    // Refused rather than quietly made one: both were asked for, and a run that silently
    // carries less than asked hides it (`--via auto` still may fall back).
    if via == Via::Ssh && streams(cli)? > 1 {
        let count = cli.streams.clone().unwrap_or_default();
        return Err(error(
            "--streams",
            &count,
            "only over a direct connection; --via ssh carries one stream",
        ));
    }
    let ports = match &cli.remote_ports {
        None => None,
        Some(text) => {
            let range = text.split_once('-').and_then(|(low, high)| {
                Some((low.trim().parse::<u16>().ok()?, high.trim().parse::<u16>().ok()?))
            });
            match range {
                Some((low, high)) if low > 0 && low <= high => Some((low, high)),
                _ => {
                    return Err(error(
                        "--remote-ports",
                        text,
                        "expected LOW-HIGH, e.g. 41000-41099",
                    ));
                }
            }
        }
    };
    Ok(Some(Ssh {
        destination,
        port,
        push: option == "--to",
        command: cli.remote_command.clone(),
        program,
        remote_accel: cli.remote_accel.clone().unwrap_or_else(|| "accel".to_owned()),
        remote_args,
        via,
        ports,
    }))
}

/// A duration option's value, if given (`option` names it in the error).
fn duration_option(
    option: &'static str,
    text: &Option<String>,
) -> Result<Option<Duration>, ConfigError> {
    let Some(text) = text else { return Ok(None) };
    let duration = parse_duration(text).map_err(|reason| ConfigError {
        option,
        value: text.clone(),
        reason,
    })?;
    Ok(Some(duration))
}

/// What a duration argument may look like; shown whenever one is rejected.
const DURATION_FORMAT: &str = "a number with an optional unit ms, s, m or h (seconds if none), \
     e.g. 30s, 5m, 1.5h";

/// The longest duration taken: a hundred years, as good as never. Longer ones are refused, not
/// clamped: beyond about 292 billion years, a deadline (an instant plus the duration) does not
/// exist, and asking for it aborted accel.
pub const LONGEST_DURATION: Duration = Duration::from_secs(3_155_760_000);

/// Parses `30s`, `5m`, `1.5h`, `250ms`, or a bare number of seconds; at most
/// [`LONGEST_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("not a duration: expected {DURATION_FORMAT}")),
    };
    let seconds = number
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("not a positive duration: expected {DURATION_FORMAT}"))?;
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|duration| *duration <= LONGEST_DURATION)
        .ok_or_else(|| format!("too long: at most 100 years ({}s)", LONGEST_DURATION.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str], terminal: bool) -> Result<Config, ConfigError> {
        Config::from_cli(Cli::try_parse_from([&["accel"], args].concat()).unwrap(), terminal)
    }

    #[test]
    fn defaults() {
        assert_eq!(config(&[], false).unwrap(), Config::default());
        assert_eq!(config(&[], true).unwrap().progress, Visibility::Foreground);
    }

    #[test]
    fn size_errors_name_the_option_and_the_format() {
        let message = config(&["-m", "3Q"], false).unwrap_err().to_string();
        assert!(message.starts_with("-m 3Q: not a size: expected"), "{message}");
        assert!(message.contains("512K, 32M, 1.5G"), "{message}");
        assert_eq!(config(&["--size=1.5G"], false).unwrap().size, 3 << 29);
        let message = config(&["--expect", "lots"], false).unwrap_err().to_string();
        assert!(message.starts_with("--expect lots: not a size"), "{message}");
        assert_eq!(config(&["--expect", "0"], false).unwrap().expect, Some(0));
    }

    #[test]
    fn progress_follows_the_terminal_and_the_flags() {
        let progress = |args: &[&str], terminal| config(args, terminal).unwrap().progress;
        assert_eq!(progress(&["-p"], false), Visibility::Off, "no terminal, no line");
        assert_eq!(progress(&["-p"], true), Visibility::Always);
        assert_eq!(progress(&["-q"], true), Visibility::Off);
        assert_eq!(progress(&["--json"], true), Visibility::Off, "NDJSON owns stderr");
        assert_eq!(progress(&["--json=x.ndjson"], true), Visibility::Foreground);
        assert_eq!(config(&["--json"], false).unwrap().json, Some(JsonTarget::Stderr));
        // Of -q and -v or -p, the later one counts, so that an alias can be overridden.
        assert!(config(&["-q", "-v"], true).unwrap().stats);
        assert!(!config(&["-v", "-q"], true).unwrap().stats);
        assert_eq!(progress(&["-q", "-p"], true), Visibility::Always);
        assert_eq!(progress(&["-p", "-q"], true), Visibility::Off);
        // Asked for by name, progress is written whatever stderr is, and -q does not stop it.
        assert_eq!(progress(&["-n"], false), Visibility::Always);
        assert_eq!(progress(&["-q", "--progress-fd", "3"], false), Visibility::Always);
    }

    #[test]
    fn the_last_of_a_repeated_option_counts() {
        assert_eq!(config(&["-m", "1M", "-m", "2M"], false).unwrap().size, 2 << 20);
        assert_eq!(config(&["-N", "a", "-N", "b"], false).unwrap().name.as_deref(), Some("b"));
    }

    #[test]
    fn display_options() {
        let ok = |args: &[&str]| config(args, false).unwrap();
        assert_eq!(ok(&["--interval", "250ms"]).interval, Some(Duration::from_millis(250)));
        let message = config(&["--interval", "10ms"], false).unwrap_err().to_string();
        assert_eq!(message, "--interval 10ms: too short: at least 0.1s");
        assert_eq!(ok(&["--progress-fd", "3"]).progress_fd, Some(3));
        let message = config(&["--progress-fd", "log"], false).unwrap_err().to_string();
        assert!(message.starts_with("--progress-fd log: not a descriptor"), "{message}");
        assert_eq!(ok(&["-N", "gz\x1b[2J\n"]).name.as_deref(), Some("gz?[2J?"));
        assert_eq!(ok(&["-N", ""]).name, None);
        let message = config(&["--hash-file", "sums"], false).unwrap_err().to_string();
        assert_eq!(
            message,
            "--hash-file sums: no --hash was given: name the hash to write, e.g. --hash sha256"
        );
    }

    #[test]
    fn durations() {
        let ok = |text| parse_duration(text).unwrap();
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("2"), Duration::from_secs(2));
        assert_eq!(ok("3155760000"), LONGEST_DURATION);
        for bad in ["", "s", "5x", "-1s", "0", "1e999", "3155760001", "10000000000000000000"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let message = config(&["--stall-timeout", "soon"], false).unwrap_err().to_string();
        assert!(message.starts_with("--stall-timeout soon: not a duration: expected"), "{message}");
    }
}
