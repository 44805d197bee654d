//! The validated configuration: real types, conflicts resolved, nothing left to parse.

use crate::cli::{Cli, EngineArg};
use crate::size::parse_size;

/// The default buffer size, as `--help` shows it.
pub const DEFAULT_SIZE: u64 = 32 << 20;

/// Everything a run needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Most bytes held in accel's own buffer.
    pub size: usize,
    /// Which data path to use.
    pub engine: EngineArg,
    /// Report the route and its changes on stderr.
    pub debug: bool,
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
    /// Validates the raw command line.
    pub fn from_cli(cli: Cli) -> Result<Config, ConfigError> {
        let size = parse_size(&cli.size, 1).map_err(|reason| ConfigError {
            option: "-m",
            value: cli.size.clone(),
            reason: reason.to_string(),
        })?;
        #[cfg(not(target_os = "linux"))]
        if cli.engine == EngineArg::Splice {
            return Err(ConfigError {
                option: "--engine",
                value: "splice".into(),
                reason: "splice exists only on Linux; use auto or copy".into(),
            });
        }
        Ok(Config { size: size as usize, engine: cli.engine, debug: cli.debug })
    }
}

impl Default for Config {
    fn default() -> Config {
        Config { size: DEFAULT_SIZE as usize, engine: EngineArg::Auto, debug: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> Result<Config, ConfigError> {
        Config::from_cli(Cli::try_parse_from([&["accel"], args].concat()).unwrap())
    }

    #[test]
    fn defaults() {
        assert_eq!(config(&[]).unwrap(), Config::default());
    }

    #[test]
    fn size_errors_name_the_option_and_the_format() {
        let message = config(&["-m", "3Q"]).unwrap_err().to_string();
        assert!(message.starts_with("-m 3Q: not a size: expected"), "{message}");
        assert!(message.contains("512K, 32M, 1.5G"), "{message}");
        assert_eq!(config(&["--size=1.5G"]).unwrap().size, 3 << 29);
    }
}
