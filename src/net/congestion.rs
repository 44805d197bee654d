//! Which TCP congestion control accel's own connections ask for (`--congestion`).
//!
//! On a long path with a little loss, CUBIC (most systems' default) takes each lost packet for
//! congestion and shrinks its window: at 80 ms and 0.5 % loss one flow carries a few Mbit/s
//! (the Mathis bound). BBR paces to the bandwidth and round trip it measures and does not
//! take random loss for congestion. So where the kernel offers BBR, accel asks for it
//! (`TCP_CONGESTION`) on every socket of its own: the one it dials before it connects, and
//! the one it listens on before it listens, whose connections the kernel gives the same
//! algorithm. `--congestion system` keeps the system's default, `--congestion NAME` asks for
//! another. The sending side's algorithm is the one that sets the stream's pace (the receiver
//! sends only acknowledgements and small frames), so each end asks for itself, and a peer that
//! is not accel (mbuffer or nc over `--insecure`) keeps its own.
//!
//! The choice is settled once, at the start ([`Congestion::settle`]), on a socket made only
//! to ask: a name this system will not give is refused before anything is read (status 2);
//! BBR that cannot be had leaves the system's default, and `--debug` says why. Each
//! connection then says under `--debug` which algorithm it got, as the kernel reads it back.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType, ipproto};

use crate::log::Log;
use crate::sys::{self, CongestionControls};
use crate::words::describe;

/// The algorithm accel asks for unless told otherwise.
pub const PREFERRED: &str = "bbr";

/// What the command line asks for (`--congestion`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Congestion {
    /// BBR where the kernel offers it, else the system's default.
    #[default]
    Preferred,
    /// `--congestion system`: the system's default, not asked for.
    System,
    /// `--congestion NAME`: that algorithm, or a refusal at the start.
    Named(String),
}

impl Congestion {
    /// `--congestion`'s value: `system`, or an algorithm's name.
    pub fn parse(text: &str) -> Result<Congestion, String> {
        match text.trim() {
            "" => Err("an algorithm's name (e.g. bbr, cubic, reno), or system".into()),
            "system" => Ok(Congestion::System),
            name => Ok(Congestion::Named(name.to_owned())),
        }
    }

    /// The algorithm every socket of the run asks for (`None`: the system's default), said
    /// under `--debug`; a named one this system will not give is refused, in words that
    /// name what it offers.
    pub fn settle(&self, log: &Log) -> Result<Option<Arc<str>>, String> {
        let controls = sys::congestion_controls();
        let default = match &controls {
            Some(controls) => format!("the system's default, {}", controls.default),
            None => "the system's default".to_owned(),
        };
        match self {
            Congestion::System => {
                log.debug(format_args!("TCP congestion control: {default} (--congestion system)"));
                Ok(None)
            }
            Congestion::Preferred => match ask_on_a_new_socket(PREFERRED) {
                Ok(()) => {
                    log.debug(format_args!(
                        "TCP congestion control: {PREFERRED}, asked for ({default}; \
                         --congestion system keeps it)"
                    ));
                    Ok(Some(PREFERRED.into()))
                }
                Err(error) => {
                    let why = why_not(PREFERRED, &error, controls.as_ref());
                    log.debug(format_args!("TCP congestion control: {default}: {why}"));
                    Ok(None)
                }
            },
            Congestion::Named(name) => match ask_on_a_new_socket(name) {
                Ok(()) => {
                    log.debug(format_args!("TCP congestion control: {name} (--congestion)"));
                    Ok(Some(name.as_str().into()))
                }
                Err(error) => {
                    let why = why_not(name, &error, controls.as_ref());
                    Err(format!("--congestion {name}: {why}; or system, for {default}"))
                }
            },
        }
    }
}

/// Asks for `name` on a TCP socket made for that alone: what every socket of the run would
/// meet. Where no socket can be made, there is nothing to refuse yet (the network's own
/// sockets will say why they cannot be made).
fn ask_on_a_new_socket(name: &str) -> io::Result<()> {
    let flags = SocketFlags::CLOEXEC;
    let socket = [AddressFamily::INET, AddressFamily::INET6].into_iter().find_map(|family| {
        rustix::net::socket_with(family, SocketType::STREAM, flags, Some(ipproto::TCP)).ok()
    });
    match socket {
        Some(socket) => sys::set_congestion_control(socket.as_fd(), name),
        None => Ok(()),
    }
}

/// Why `name` could not be had, in words: what the kernel said, and what it offers.
fn why_not(name: &str, error: &io::Error, controls: Option<&CongestionControls>) -> String {
    let listed = |names: &[String]| names.join(" ");
    match (error.raw_os_error().map(Errno::from_raw_os_error), controls) {
        (Some(Errno::NOENT), Some(controls)) => format!(
            "this kernel does not offer {name}: it offers {} \
             (tcp_available_congestion_control; a module not loaded is loaded by root: \
             `modprobe tcp_{name}`)",
            listed(&controls.available)
        ),
        (Some(Errno::PERM), Some(controls)) => format!(
            "{name} is not allowed to users without CAP_NET_ADMIN: \
             net.ipv4.tcp_allowed_congestion_control lists {}",
            listed(&controls.allowed)
        ),
        _ if error.kind() == io::ErrorKind::Unsupported => {
            "this system does not let a program choose its TCP congestion control".to_owned()
        }
        _ => describe(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controls() -> CongestionControls {
        CongestionControls {
            available: vec!["reno".into(), "cubic".into()],
            allowed: vec!["reno".into(), "cubic".into()],
            default: "cubic".into(),
        }
    }

    #[test]
    fn the_option_reads_system_or_a_name() {
        assert_eq!(Congestion::parse("system"), Ok(Congestion::System));
        assert_eq!(Congestion::parse(" bbr "), Ok(Congestion::Named("bbr".into())));
        assert!(Congestion::parse(" ").is_err());
        assert_eq!(Congestion::default(), Congestion::Preferred);
    }

    #[test]
    fn why_not_names_what_the_kernel_offers() {
        let missing = io::Error::from_raw_os_error(libc::ENOENT);
        let why = why_not("bbr", &missing, Some(&controls()));
        assert!(why.starts_with("this kernel does not offer bbr: it offers reno cubic "), "{why}");
        assert!(why.contains("`modprobe tcp_bbr`"), "{why}");
        let refused = io::Error::from_raw_os_error(libc::EPERM);
        let why = why_not("bbr", &refused, Some(&controls()));
        assert!(why.ends_with("tcp_allowed_congestion_control lists reno cubic"), "{why}");
        let elsewhere = io::Error::from(io::ErrorKind::Unsupported);
        assert!(why_not("bbr", &elsewhere, None).contains("does not let a program choose"));
    }
}
