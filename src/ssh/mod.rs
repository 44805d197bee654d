//! Between hosts in one command: accel starts its other end through ssh (issue 34).
//!
//! `zfs send pool/fs@snap | accel --to ssh://backup -- zfs receive -s tank/fs` runs the
//! user's own `ssh` (so ~/.ssh/config, agents, ports, jump hosts and keys all work) with
//! `accel --serve-ssh` on the other host, as mosh and Eternal Terminal start their servers.
//! ssh only starts it: the data goes on accel's own transport (Noise, resumed after a drop),
//! directly to a port the remote accel listens on, at the address ssh itself connects to
//! (`ssh -G`'s `hostname`), not held to ssh's 2 MiB channel window or its one cipher thread.
//!
//! The session's protocol, in lines (this module's):
//! - local → remote, on ssh's stdin, the **request**: [`GREETING`], the fresh key as a key
//!   file's line, and a JSON line ([`Request`]: the role, the command, the ports, the path).
//!   The key goes only through this pipe: never on a command line, in the environment or in
//!   a file, and it stays in buffers that are zeroed when dropped (not inside a JSON value).
//! - remote → local, on ssh's stdout, the **answer** ([`Answer`]): the port it listens on,
//!   or why not, or that it does not speak this version; a push with `--via ssh`, that the
//!   session carries the stream (`through-ssh`: nothing to listen on).
//! - local → remote later: `stop` when the local run failed or was stopped (Ctrl-C,
//!   SIGTERM): the remote kills its command's process group, never closing its stdin first
//!   (an EOF would pass a cut stream off as whole to `cat > file`). The session's end
//!   is a stop too while a push's sender has not come yet (`net::Peering::met`): the local
//!   accel, killed before it connected, will never come; once it has, the end is an outage.
//! - local → remote, push with `--via auto`: `direct` once it connected, or `through-ssh`
//!   when the direct path is closed: from then on the session carries the stream
//!   ([`relay`]). The remote reads it before its run starts. With `--via direct` or `--via
//!   ssh` the request has said the path, and the remote's run starts at once. Pull: the
//!   remote connects back, and its answer says which path (`dialing`, `through-ssh WHY`).
//! - The first handshake message of a push is not held back for the run to start: the
//!   local sends it right behind the request (`--via ssh`), right behind `through-ssh`, or
//!   on the direct connection as soon as it is made (`net::Peering::ahead`). It proves the
//!   key and carries no data; the remote's run finds it waiting, so the set-up costs the
//!   round trips of ssh's session, the answer, the direct connection and the handshake's
//!   answer, and nothing else in series.
//!
//! Through the session, the local connection is an end of a socketpair of its own
//! (`net::socket::carried`) whose other end is ssh's stdin and stdout; the remote's reads and
//! writes sshd's pipes itself, through descriptions of its own opened anew through
//! `/proc/self/fd` (`net::socket::carried_by_pipes`: non-blocking, while sshd's stay as they
//! are), or where sshd gave no pipes, a socketpair of its own that [`relay`] bridges to them.
//! On it, frames' payloads are not sealed (ssh's cipher protects them; see `net::channel`);
//! each side knows its path from what it did itself (the local chose it, the remote opened
//! the pipes or made the socketpair), never from a peer's word.
//! - remote → local at the end, on ssh's stderr (its stdout may carry the stream): how the
//!   command ended ([`Finished`]), which decides the local status when the command failed on
//!   its own, as ssh returns its command's status.
//!
//! [`local`] is the side the user runs; [`serve`] is `accel --serve-ssh`, the other end. Each
//! then runs as an ordinary `--to` or `--from` run (run/), with the key in memory
//! (`net::Peering::key`) and, on the remote, the listening socket bound before the run
//! (`net::Peering::bound`), so as to say its port first.

pub mod local;
mod relay;
pub mod serve;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::time::Duration;

use serde_json::{Value, json};

use crate::net::Resume;
use crate::run::config::Via;

/// The first line of a request, and the start of every answer: the protocol and its version.
/// Version 2: through the session, frames' payloads go unsealed (ssh's cipher protects
/// them), and the remote learns the path from the local's `direct` or `through-ssh` before
/// its run starts. Version 3: the path word only with `--via auto`, the request saying the
/// rest; a push with `--via ssh` is answered `through-ssh`, not with a port, and its first
/// handshake message follows the request in the session. An older remote refuses a newer
/// request (and the other way round) with its own line, before anything is sent.
pub const GREETING: &str = "accel-ssh 3";

/// How long the direct path's connection may take before the stream goes through ssh
/// instead (`--via auto`): a path that is open answers in a round trip; a firewall that drops
/// packets never does.
pub const DIRECT_PATIENCE: Duration = Duration::from_secs(3);

/// `backup:41234: no answer in 3 s`, `backup:41234: connection refused`.
pub fn unreached(address: SocketAddr, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("{address}: no answer in {} s", DIRECT_PATIENCE.as_secs())
        }
        _ => format!("{address}: {}", crate::words::describe(error)),
    }
}

/// Takes the connections of a probe's `listener` and closes them, for the rest of the
/// process: the other side's try of the direct path.
pub fn answer_probes(listener: TcpListener) {
    let _ = listener.set_nonblocking(false);
    let _ = std::thread::Builder::new().name("accel-probe".into()).spawn(move || {
        while let Ok((connection, _)) = listener.accept() {
            drop(connection);
        }
    });
}

/// The longest line either side reads: a request's command is a shell line, not a file.
const LONGEST_LINE: usize = 64 << 10;

/// What the local accel asks of the remote one (the JSON line after the greeting and the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Push (`--to ssh://`): the remote receives, its command reads the stream. Pull
    /// (`--from ssh://`): the remote sends what its command writes.
    pub push: bool,
    /// The command line for the remote user's shell.
    pub command: String,
    /// `--remote-ports`.
    pub ports: Option<(u16, u16)>,
    /// `--via`.
    pub via: Via,
    /// Pull: the port the local accel listens on, which the remote sender connects to at the
    /// address the ssh connection came from (`SSH_CONNECTION`'s first field), and the port
    /// of its probe (see [`Answer::Port`]).
    pub listening: Option<(u16, u16)>,
    /// `--reconnect-for` and `--heartbeat`, which both ends must share: the local accel's.
    pub resume: Resume,
    /// The local accel's `--debug`: the remote's notes too, time-stamped alike, so that
    /// both ends' start-up steps can be set side by side.
    pub debug: bool,
}

impl Request {
    /// The JSON line (without its newline).
    pub fn to_json(&self) -> String {
        json!({
            "role": if self.push { "receive" } else { "send" },
            "command": self.command,
            "ports": self.ports.map(|(low, high)| json!([low, high])),
            "via": self.via.word(),
            "listening": self.listening.map(|(port, probe)| json!([port, probe])),
            "reconnect_for": self.resume.within.as_secs_f64(),
            "heartbeat": self.resume.heartbeat.as_secs_f64(),
            "debug": self.debug,
        })
        .to_string()
    }

    /// Reads the JSON line, saying what is wrong with it.
    pub fn from_json(line: &str) -> Result<Request, String> {
        let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let push = match value["role"].as_str() {
            Some("receive") => true,
            Some("send") => false,
            _ => return Err("no role (receive or send)".into()),
        };
        let command = value["command"].as_str().ok_or("no command")?.to_owned();
        let ports = match &value["ports"] {
            Value::Null => None,
            Value::Array(pair) => match pair.as_slice() {
                [low, high] => Some((port(low)?, port(high)?)),
                _ => return Err("ports: expected [low, high]".into()),
            },
            _ => return Err("ports: expected [low, high]".into()),
        };
        let via = match value["via"].as_str() {
            Some("auto") | None => Via::Auto,
            Some("direct") => Via::Direct,
            Some("ssh") => Via::Ssh,
            Some(other) => return Err(format!("via: {other}?")),
        };
        let listening = match &value["listening"] {
            Value::Null => None,
            Value::Array(pair) if pair.len() == 2 => Some((port(&pair[0])?, port(&pair[1])?)),
            _ => return Err("listening: expected [port, probe]".into()),
        };
        let seconds = |field: &str, default: Duration| match &value[field] {
            Value::Null => Ok(default),
            number => number
                .as_f64()
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| format!("{field}: {number}: not a duration")),
        };
        let given = Resume::default();
        let resume = Resume {
            within: seconds("reconnect_for", given.within)?,
            heartbeat: seconds("heartbeat", given.heartbeat)?,
        };
        let debug = value["debug"].as_bool().unwrap_or(false);
        Ok(Request { push, command, ports, via, listening, resume, debug })
    }
}

/// A port in a request.
fn port(value: &Value) -> Result<u16, String> {
    value.as_u64().and_then(|n| u16::try_from(n).ok()).ok_or_else(|| format!("{value}: not a port"))
}

/// The remote accel's answer to a request, on ssh's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It listens on this port (the stream's), and on the second (a probe's, which takes
    /// connections and closes them: the local accel's try of the direct path, unseen by the
    /// stream's listener, which would say that a stranger came).
    Port(u16, u16),
    /// It connects to the port the request named (pull).
    Dialing,
    /// The stream goes through the session (pull), for this reason (empty: `--via ssh`).
    Through(String),
    /// It could not listen (no free port in the range): the reason.
    NoPort(String),
    /// It does not speak the request's version: the reason.
    Refused(String),
}

impl Answer {
    /// The line, with its newline.
    pub fn line(&self) -> String {
        match self {
            Answer::Port(port, probe) => format!("{GREETING} port {port} probe {probe}\n"),
            Answer::Dialing => format!("{GREETING} dialing\n"),
            Answer::Through(why) => format!("{GREETING} through-ssh {why}\n"),
            Answer::NoPort(why) => format!("{GREETING} no-port {why}\n"),
            Answer::Refused(why) => format!("{GREETING} refused {why}\n"),
        }
    }

    /// Reads an answer line; `None` for what is not one of this version's.
    pub fn parse(line: &str) -> Option<Answer> {
        let rest = line.strip_prefix(GREETING)?.strip_prefix(' ')?;
        let (word, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        match word {
            "port" => {
                let (port, probe) = rest.split_once(" probe ")?;
                Some(Answer::Port(port.trim().parse().ok()?, probe.trim().parse().ok()?))
            }
            "dialing" => Some(Answer::Dialing),
            "through-ssh" => Some(Answer::Through(rest.to_owned())),
            "no-port" => Some(Answer::NoPort(rest.to_owned())),
            "refused" => Some(Answer::Refused(rest.to_owned())),
            _ => None,
        }
    }
}

/// How the remote command ended, said by the remote accel at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Its exit status, when it exited.
    pub status: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// The remote accel stopped it (the run failed or was stopped): its status is not the
    /// run's to take.
    pub stopped: bool,
    /// How long it ran.
    pub seconds: f64,
}

impl Finished {
    /// The line, with its newline.
    pub fn line(&self) -> String {
        let fields = json!({
            "status": self.status,
            "signal": self.signal,
            "stopped": self.stopped,
            "seconds": self.seconds,
        });
        format!("{GREETING} finished {fields}\n")
    }

    /// Reads a finished line.
    pub fn parse(line: &str) -> Option<Finished> {
        let rest = line.strip_prefix(GREETING)?.strip_prefix(" finished ")?;
        let value: Value = serde_json::from_str(rest).ok()?;
        let int = |field: &str| value[field].as_i64().and_then(|n| i32::try_from(n).ok());
        Some(Finished {
            status: int("status"),
            signal: int("signal"),
            stopped: value["stopped"].as_bool().unwrap_or(false),
            seconds: value["seconds"].as_f64().unwrap_or(0.0),
        })
    }

    /// Whether the command failed on its own: an exit status but 0, or a signal, when the
    /// remote accel did not stop it.
    pub fn failed_on_its_own(&self) -> bool {
        !self.stopped && (self.status.is_some_and(|status| status != 0) || self.signal.is_some())
    }

    /// `exited with status 1`, `killed by SIGKILL`.
    pub fn how(&self) -> String {
        match (self.status, self.signal) {
            (_, Some(signal)) => format!("killed by {}", signal_name(signal)),
            (Some(status), None) => format!("exited with status {status}"),
            (None, None) => "ended, how is not known".to_owned(),
        }
    }

    /// The status a shell would show: the exit status, or 128 + the signal.
    pub fn code(&self) -> u8 {
        match (self.status, self.signal) {
            (_, Some(signal)) => 128u8.saturating_add(signal as u8),
            (Some(status), None) => status as u8,
            (None, None) => 1,
        }
    }
}

/// `SIGKILL`, or the number where it has no common name.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

/// Reads one line from `fd` a byte at a time, so that nothing after it is taken from the
/// descriptor (what follows a control line may be for another reader); without its newline.
/// `None` at the end of the stream before any byte. Refuses a line longer than `longest`.
pub fn read_line(fd: impl AsFd, longest: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(&fd, &mut byte) {
            Ok(0) if line.is_empty() => return Ok(None),
            Ok(0) => return Ok(Some(line)),
            Ok(_) if byte[0] == b'\n' => return Ok(Some(line)),
            Ok(_) if line.len() >= longest => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a line too long"));
            }
            Ok(_) => line.push(byte[0]),
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// [`read_line`] as text, with the protocol's bound.
pub fn read_text_line(fd: impl AsFd) -> io::Result<Option<String>> {
    Ok(read_line(fd, LONGEST_LINE)?.map(|line| String::from_utf8_lossy(&line).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let request = Request {
            push: true,
            command: "zfs receive -s 'tank/fs'".into(),
            ports: Some((41000, 41099)),
            via: Via::Direct,
            listening: None,
            resume: Resume { within: Duration::ZERO, heartbeat: Duration::from_millis(250) },
            debug: true,
        };
        assert_eq!(Request::from_json(&request.to_json()), Ok(request.clone()));
        let pull = Request {
            push: false,
            ports: None,
            via: Via::Auto,
            listening: Some((9, 10)),
            ..request
        };
        assert_eq!(Request::from_json(&pull.to_json()), Ok(pull));
        assert!(Request::from_json("{\"command\": \"x\"}").unwrap_err().contains("role"));
    }

    #[test]
    fn answers_and_ends_read_back_as_written() {
        for answer in [
            Answer::Port(41234, 41235),
            Answer::Dialing,
            Answer::Through("10.0.0.1:4: connection refused".into()),
            Answer::NoPort("no free port in 41000-41001".into()),
            Answer::Refused("accel-ssh 2?".into()),
        ] {
            let line = answer.line();
            assert_eq!(Answer::parse(line.trim_end()), Some(answer));
        }
        assert_eq!(Answer::parse("accel-ssh 1 port 9 probe 10"), None);
        let finished = Finished { status: Some(3), signal: None, stopped: false, seconds: 1.5 };
        assert_eq!(Finished::parse(finished.line().trim_end()), Some(finished.clone()));
        assert!(finished.failed_on_its_own());
        assert_eq!((finished.code(), finished.how().as_str()), (3, "exited with status 3"));
        let killed = Finished { status: None, signal: Some(9), stopped: false, seconds: 0.0 };
        assert_eq!((killed.code(), killed.how().as_str()), (137, "killed by SIGKILL"));
        assert!(!Finished { stopped: true, ..killed }.failed_on_its_own());
    }
}
