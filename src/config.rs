//! The validated configuration: real types, conflicts resolved, decisions about the terminal
//! taken; nothing left to parse.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{Cli, EngineArg, OutputErrorArg};
use crate::digest::Algorithm;
use crate::engine::Preference;
use crate::exit::OutputErrors;
use crate::net::{self, address::Address};
use crate::open::Existing;
use crate::size::parse_size;

/// The default buffer size, as `--help` shows it.
pub const DEFAULT_SIZE: u64 = 32 << 20;

/// Everything a run needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where bytes come from: `-i FILE`, or stdin (`None`).
    pub input: Option<PathBuf>,
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
    pub progress: Progress,
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
    /// `--from`, the key, `--insecure`, `--accept-timeout` (each `--to` is in `outputs`).
    pub net: net::Settings,
}

/// When the progress line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Never (`-q`, or stderr is not a terminal).
    Off,
    /// While accel's job holds the terminal's foreground (pv's rule: nothing from a
    /// background job).
    Foreground,
    /// Whenever stderr is a terminal (`-p`).
    Always,
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

/// Where `--json` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    /// `--json`: stderr, beside any messages.
    Stderr,
    /// `--json=FILE`.
    File(PathBuf),
}

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
    pub fn from_cli(cli: Cli, stderr_is_terminal: bool) -> Result<Config, ConfigError> {
        let size = parse_size(&cli.size, 1).map_err(|reason| ConfigError {
            option: "-m",
            value: cli.size.clone(),
            reason: reason.to_string(),
        })?;
        let expect = match &cli.expect {
            None => None,
            Some(text) => Some(parse_size(text, 0).map_err(|reason| ConfigError {
                option: "-s",
                value: text.clone(),
                reason: reason.to_string(),
            })?),
        };
        let stall_timeout = duration_option("--stall-timeout", &cli.stall_timeout)?;
        let engine = match cli.engine {
            EngineArg::Auto => Preference::Auto,
            EngineArg::Copy => Preference::Copy,
            EngineArg::Splice if crate::sys::CAN_SPLICE => Preference::Splice,
            EngineArg::Splice => {
                return Err(ConfigError {
                    option: "--engine",
                    value: "splice".into(),
                    reason: "splice exists only on Linux; use auto or copy".into(),
                });
            }
        };
        let hashes = cli
            .hashes
            .iter()
            .map(|name| {
                Algorithm::named(name).ok_or_else(|| ConfigError {
                    option: "--hash",
                    value: name.clone(),
                    reason: format!(
                        "not a hash accel knows: expected one of {}",
                        Algorithm::ALL.map(Algorithm::name).join(", ")
                    ),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let net = network_settings(&cli)?;
        let input = cli.input.filter(|path| path.as_os_str() != "-");
        let mut outputs: Vec<Target> = cli
            .outputs
            .into_iter()
            .map(|path| if path.as_os_str() == "-" { Target::Stdout } else { Target::Path(path) })
            .collect();
        for text in &cli.to {
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
        let existing = if cli.force {
            Existing::Overwrite
        } else if cli.append {
            Existing::Append
        } else {
            Existing::Refuse
        };
        let output_errors = match cli.output_error {
            None => OutputErrors::Default,
            Some(OutputErrorArg::Warn) => OutputErrors::Warn,
            Some(OutputErrorArg::WarnNopipe) => OutputErrors::WarnNoPipe,
            Some(OutputErrorArg::Exit) => OutputErrors::Exit,
            Some(OutputErrorArg::ExitNopipe) => OutputErrors::ExitNoPipe,
        };
        let json = cli.json.map(|path| {
            if path.as_os_str() == "-" { JsonTarget::Stderr } else { JsonTarget::File(path) }
        });
        let progress = if cli.quiet || !stderr_is_terminal {
            Progress::Off
        } else if cli.progress {
            Progress::Always
        } else if json == Some(JsonTarget::Stderr) {
            // NDJSON on the terminal is what was asked for; a redrawn line would garble it.
            Progress::Off
        } else {
            Progress::Foreground
        };
        Ok(Config {
            input,
            outputs,
            existing,
            sync: cli.sync,
            output_errors,
            hashes,
            hash_file: cli.hash_file,
            size: size as usize,
            engine,
            progress,
            stats: cli.stats && !cli.quiet,
            quiet: cli.quiet,
            json,
            expect,
            stall_timeout,
            debug: cli.debug,
            net,
        })
    }
}

/// `--from`, `--key-file` (or `ACCEL_KEY_FILE`), `--insecure`, `--accept-timeout`.
fn network_settings(cli: &Cli) -> Result<net::Settings, ConfigError> {
    let from = match &cli.from {
        None => None,
        Some(text) => Some(Address::parse(text, true).map_err(|reason| ConfigError {
            option: "--from",
            value: text.clone(),
            reason,
        })?),
    };
    let peers = from.is_some() || !cli.to.is_empty();
    let key_file = match (&cli.key_file, cli.insecure) {
        (Some(path), _) => Some(path.clone()),
        // With --insecure, a key named by the environment is simply not used.
        (None, true) => None,
        (None, false) => {
            std::env::var_os(net::key::ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
        }
    };
    if peers && !cli.insecure && key_file.is_none() {
        let option = if from.is_some() { "--from" } else { "--to" };
        let value = cli.from.clone().unwrap_or_else(|| cli.to[0].clone());
        return Err(ConfigError {
            option,
            value,
            reason: "a key is needed: --key-file FILE (or ACCEL_KEY_FILE=FILE), made by \
                     `accel --generate key > FILE` and copied to the other end; or --insecure \
                     for plain TCP"
                .into(),
        });
    }
    let accept_timeout = duration_option("--accept-timeout", &cli.accept_timeout)?;
    Ok(net::Settings { from, key_file, insecure: cli.insecure, accept_timeout })
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

/// Parses `30s`, `5m`, `1.5h`, `250ms`, or a bare number of seconds.
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
    Duration::try_from_secs_f64(seconds).map_err(|_| "too long".to_owned())
}

impl Default for Config {
    fn default() -> Config {
        Config {
            input: None,
            outputs: vec![Target::Stdout],
            existing: Existing::Refuse,
            sync: false,
            output_errors: OutputErrors::Default,
            hashes: Vec::new(),
            hash_file: None,
            size: DEFAULT_SIZE as usize,
            engine: Preference::Auto,
            progress: Progress::Off,
            stats: false,
            quiet: false,
            json: None,
            expect: None,
            stall_timeout: None,
            debug: false,
            net: net::Settings::default(),
        }
    }
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
        assert_eq!(config(&[], true).unwrap().progress, Progress::Foreground);
    }

    #[test]
    fn size_errors_name_the_option_and_the_format() {
        let message = config(&["-m", "3Q"], false).unwrap_err().to_string();
        assert!(message.starts_with("-m 3Q: not a size: expected"), "{message}");
        assert!(message.contains("512K, 32M, 1.5G"), "{message}");
        assert_eq!(config(&["--size=1.5G"], false).unwrap().size, 3 << 29);
        let message = config(&["-s", "lots"], false).unwrap_err().to_string();
        assert!(message.starts_with("-s lots: not a size"), "{message}");
        assert_eq!(config(&["-s", "0"], false).unwrap().expect, Some(0));
    }

    #[test]
    fn progress_follows_the_terminal_and_the_flags() {
        let progress = |args: &[&str], terminal| config(args, terminal).unwrap().progress;
        assert_eq!(progress(&["-p"], false), Progress::Off, "no terminal, no line");
        assert_eq!(progress(&["-p"], true), Progress::Always);
        assert_eq!(progress(&["-q"], true), Progress::Off);
        assert_eq!(progress(&["--json"], true), Progress::Off, "NDJSON owns stderr");
        assert_eq!(progress(&["--json=x.ndjson"], true), Progress::Foreground);
        assert_eq!(config(&["--json"], false).unwrap().json, Some(JsonTarget::Stderr));
        assert!(!config(&["-q", "-v"], true).unwrap().stats, "quiet wins");
    }

    #[test]
    fn durations() {
        let ok = |text| parse_duration(text).unwrap();
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("2"), Duration::from_secs(2));
        for bad in ["", "s", "5x", "-1s", "0", "1e999"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let message = config(&["--stall-timeout", "soon"], false).unwrap_err().to_string();
        assert!(message.starts_with("--stall-timeout soon: not a duration: expected"), "{message}");
    }
}
