//! `accel --serve-ssh`: the other end of a run started through ssh (see the module above).
//!
//! It reads the request on its stdin (bounded in size and time), detaches from the session
//! (SIGHUP and SIGPIPE ignored: the session's pipes may vanish with an outage, and writes to
//! them are best effort, never fatal), listens, says its port on stdout, starts the command
//! (`$SHELL -c CMD`, as sshd runs one, in a process group of its own) and runs as an ordinary
//! `--from` receiver whose output is the command's stdin. Its own stderr and the command's
//! go through a pipe of its own to a thread that relays them to the session's stderr: the
//! command never writes into a pipe that is gone. At the end it says how the command ended.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use super::{Answer, Finished, GREETING, Request, read_line, read_text_line};
use crate::endpoint::Producer;
use crate::exit::Exit;
use crate::log::Log;
use crate::net::Met;
use crate::net::address::Address;
use crate::net::key::Key;
use crate::net::socket;
use crate::run;
use crate::run::config::{Config, Target, Via};
use crate::run::stdio;
use crate::words::describe;

/// How long the request may take to come: ssh has started this accel, so it is on its way.
const REQUEST_PATIENCE: Duration = Duration::from_secs(30);

/// How long the remote waits for its sender's first connection, unless `--remote-args`
/// says (`--accept-timeout`): the local accel connects as soon as it has the port.
const ACCEPT_PATIENCE: Duration = Duration::from_secs(60);

/// Through ssh: how long the run may take to end after the session has (see [`follow`]).
const SESSION_GRACE: Duration = Duration::from_secs(5);

/// How long a command stopped with SIGTERM has to end before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// Runs the remote end: `config` is the remote accel's own (from `--remote-args`). Returns
/// the process's exit status.
pub fn serve(mut config: Config, closed: stdio::Closed) -> i32 {
    // Before any thread of the run starts: the session's end (SIGHUP) and a write into it
    // once gone (SIGPIPE) must not end the remote end.
    crate::sys::ignore_signal(libc::SIGHUP);
    crate::sys::ignore_signal(libc::SIGPIPE);
    if closed.stdin || closed.stdout {
        eprintln!(
            "accel: --serve-ssh: run by accel through ssh, which gives it a stdin and a stdout"
        );
        return i32::from(Exit::Usage.code());
    }
    let (request, key) = match read_request() {
        Ok(Some(read)) => read,
        Ok(None) => return i32::from(Exit::Network.code()),
        Err(why) => {
            eprintln!("accel: --serve-ssh: {why}");
            return i32::from(Exit::Network.code());
        }
    };
    if request.debug {
        config.debug = true;
        crate::log::stamp_notes();
    }
    let log = Arc::new(Log::new(false, config.debug));
    log.debug(format_args!("--serve-ssh: the request is read"));
    match Session::open(request, key, &mut config, &log) {
        Ok(session) => session.run(config, closed, &log),
        Err(why) => {
            eprintln!("accel: {why}");
            i32::from(Exit::Network.code())
        }
    }
}

/// Reads the request from stdin: the greeting, the key, the JSON line. `None` when a request
/// of another version was answered with a refusal.
fn read_request() -> Result<Option<(Request, Key)>, String> {
    let (read, timed_out) = mpsc::channel::<()>();
    // Bounded in time: a session that never says anything must not leave this accel behind.
    thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = timed_out.recv_timeout(REQUEST_PATIENCE) {
            eprintln!("accel: --serve-ssh: no request within {} s", REQUEST_PATIENCE.as_secs());
            std::process::exit(i32::from(Exit::Network.code()));
        }
    });
    let stdin = io::stdin();
    let greeting = read_text_line(stdin.as_fd()).map_err(|e| describe(&e))?;
    let greeting = greeting.ok_or("the session ended before the request")?;
    if greeting != GREETING {
        let why = format!(
            "this accel ({}) speaks {GREETING}, not {greeting:?}",
            env!("CARGO_PKG_VERSION")
        );
        let _ = io::stdout().write_all(Answer::Refused(why).line().as_bytes());
        return Ok(None);
    }
    let key_line = read_line(stdin.as_fd(), 256).map_err(|e| describe(&e))?.map(Zeroizing::new);
    let key = key_line
        .and_then(|line| std::str::from_utf8(&line).ok().and_then(Key::from_text))
        .ok_or("the request has no key")?;
    let json = read_text_line(stdin.as_fd()).map_err(|e| describe(&e))?;
    let request = Request::from_json(&json.unwrap_or_default())
        .map_err(|why| format!("the request: {why}"))?;
    let _ = read.send(());
    Ok(Some((request, key)))
}

/// The remote end once its request came: the command started, the session's descriptors set
/// aside for the control lines and the relay.
struct Session {
    /// A copy of the session's stderr, for how the command ended (the last line, after every
    /// line relayed).
    said_to: OwnedFd,
    /// The command, in a process group of its own.
    child: Child,
    /// A copy of the command's stdin (push), held so that it sees the end of the stream only
    /// once this accel says so: never when the run failed.
    held_stdin: Option<OwnedFd>,
    /// When the command started.
    started: Instant,
    /// The relay of stderr to the session's, and when it has relayed everything.
    relayed: mpsc::Receiver<()>,
    /// What the control thread and the end share.
    shared: Arc<Shared>,
}

/// What the control thread (or the relay through ssh) and the end of the run share.
#[derive(Default)]
struct Shared {
    /// This accel has stopped the command (the run failed, or `stop` came).
    stopped: AtomicBool,
    /// How the command ended is being said: the end of the session is no longer a stop.
    ending: AtomicBool,
}

/// How the session goes on after the answer.
enum Control {
    /// The stream goes directly: the control lines, only `stop` from now on. A push's
    /// receiver raises the flag once its sender has come: until then, the session's end
    /// is the local accel's (killed before it connected), and stops this one.
    Stop(Option<Met>),
    /// The stream goes through the session: the run's connection reads and writes the
    /// session's pipes itself (`None`), or they are relayed to this end of a socketpair, whose
    /// other end is the run's connection (sshd gave no pipes).
    Through(Option<OwnedFd>),
}

impl Session {
    /// Sets the descriptors aside, listens, answers, starts the command and makes `config`
    /// the run's: a receiver on the bound socket, with the key, into the command.
    fn open(request: Request, key: Key, config: &mut Config, log: &Log) -> Result<Session, String> {
        let dup = |fd: BorrowedFd<'_>| {
            rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(|e| describe(&e.into()))
        };
        let control_out = dup(io::stdout().as_fd())?;
        let control_in = dup(io::stdin().as_fd())?;
        let session_err = dup(io::stderr().as_fd())?;
        let said_to = dup(session_err.as_fd())?;
        let relayed = relay_stderr(session_err).map_err(|e| describe(&e))?;
        let stderr_copy = || {
            rustix::io::fcntl_dupfd_cloexec(io::stderr().as_fd(), 3)
                .map(Stdio::from)
                .map_err(|e| describe(&e.into()))
        };
        let shell = std::env::var_os("SHELL").filter(|s| !s.is_empty()).unwrap_or("/bin/sh".into());
        let mut command = Command::new(shell);
        // A copy of stderr: this accel's own is closed on exec.
        command.arg("-c").arg(&request.command).process_group(0).stderr(stderr_copy()?);
        let spawn = |command: &mut Command| {
            command.spawn().map_err(|e| format!("{}: {}", request.command, describe(&e)))
        };
        let (child, held_stdin, control) = if request.push && request.via == Via::Ssh {
            // `--via ssh`: the session carries the stream from the start, and the sender's
            // first handshake message follows the request in it.
            write_best_effort(&control_out, Answer::Through(String::new()).line().as_bytes());
            log.debug(format_args!("--serve-ssh: answered through-ssh"));
            config.net.from = Some(Address::parse(&ssh_client().to_string(), true)?);
            let control = carry(config, &control_in, &control_out)?;
            let (child, held) = receive_into(&mut command, config, spawn, dup, log)?;
            (child, Some(held), control)
        } else if request.push {
            let listener = listen(request.ports, None)?;
            let bound = socket::local_address(&listener).map_err(|e| describe(&e))?;
            let probe = listen(request.ports, Some(bound.port()))?;
            let probe_port = socket::local_address(&probe).map_err(|e| describe(&e))?.port();
            super::answer_probes(TcpListener::from(probe));
            let answer = Answer::Port(bound.port(), probe_port);
            write_best_effort(&control_out, answer.line().as_bytes());
            log.debug(format_args!("--serve-ssh: answered {}", answer.line().trim_end()));
            let address =
                Address::parse(&bound.to_string(), true).map_err(|why| why.to_string())?;
            config.net.from = Some(address);
            let (mut child, held) = receive_into(&mut command, config, spawn, dup, log)?;
            // With `--via auto`, the local accel says which path it took once it tried the
            // direct one: this side's own knowledge of the path, before the run starts (its
            // connection, if direct, waits in the listener's queue meanwhile). With `--via
            // direct`, the request said it: the run starts at once.
            let path = match request.via {
                Via::Direct => Some("direct".to_owned()),
                _ => read_text_line(&control_in).ok().flatten(),
            };
            log.debug(format_args!("--serve-ssh: the path: {path:?}"));
            let control = match path.as_deref().map(str::trim) {
                Some("direct") => {
                    config.net.bound = vec![listener.into_raw_fd()];
                    let met = Met::default();
                    config.net.met = Some(met.clone());
                    Control::Stop(Some(met))
                }
                Some("through-ssh") => {
                    // Nothing comes to the listener: the stream is the session's.
                    drop(listener);
                    carry(config, &control_in, &control_out)?
                }
                said => {
                    crate::sys::stop_group(child.id(), TERM_GRACE);
                    let _ = child.wait();
                    return Err(format!("the local accel went before saying the path ({said:?})"));
                }
            };
            (child, Some(held), control)
        } else {
            let (address, control) = match pull_path(&request)? {
                Ok((address, connection)) => {
                    write_best_effort(&control_out, Answer::Dialing.line().as_bytes());
                    // The stream's own connection, which tried the path: the run takes it.
                    config.net.dialed = Some(OwnedFd::from(connection).into_raw_fd());
                    (address, Control::Stop(None))
                }
                Err(why) => {
                    let address = Address::parse(&ssh_client().to_string(), true)?;
                    write_best_effort(&control_out, Answer::Through(why).line().as_bytes());
                    // The session carries one connection: the local accel says so.
                    config.net.streams = 1;
                    (address, carry(config, &control_in, &control_out)?)
                }
            };
            command.stdin(Stdio::null()).stdout(Stdio::piped());
            let mut child = spawn(&mut command)?;
            log.debug(format_args!("--serve-ssh: the command is started"));
            let stdout: OwnedFd = child.stdout.take().expect("piped").into();
            crate::sys::replace(stdout.as_fd(), io::stdin().as_fd()).map_err(|e| describe(&e))?;
            config.outputs = vec![Target::Network(address)];
            // A command that fails mid-way closes its stdout as one that finished does: the
            // stream ends (End, not Abort) only once it exited 0, so that the local consumer
            // is never handed a cut stream as a whole one, even when the session, which says
            // how the command ended, is gone by then.
            config.producer = Some(Producer { pid: child.id(), command: request.command.clone() });
            (child, None, control)
        };
        config.net.key = Some(Arc::new(key));
        // Both ends resume alike: the local accel's --reconnect-for and --heartbeat; through
        // ssh, nothing resumes (the session's end is the stream's).
        config.net.resume = request.resume;
        if config.net.carried.is_some() {
            config.net.resume.within = Duration::ZERO;
            // A pull's sender: compressed only if the local accel passed --compress on (an
            // older one, which would refuse it, passes nothing unless asked).
            config.net.compress = config.net.compress_through_ssh();
        }
        // The local accel says what the link does (connected, resumed); the remote's own
        // warnings, which would repeat it, only with --remote-args --debug or -v. Its errors
        // are always said.
        config.quiet = config.quiet || !(config.debug || config.stats);
        config.input = None;
        config.files.clear();
        let shared = Arc::new(Shared::default());
        let said = dup(said_to.as_fd())?;
        follow(control, control_in, control_out, said, child.id(), Arc::clone(&shared));
        Ok(Session { said_to, child, held_stdin, started: Instant::now(), relayed, shared })
    }

    /// Runs the transfer into the command, ends the command (its stdin closed after a whole
    /// stream, else stopped), says how it ended, and returns this process's status.
    fn run(mut self, config: Config, closed: stdio::Closed, log: &Log) -> i32 {
        log.debug(format_args!("--serve-ssh: the run starts"));
        let exit = run::run(&config, closed);
        // From here the command's end is this thread's: the session's end no longer stops it
        // (through ssh, the local accel may close the session once it has the Ack).
        self.shared.ending.store(true, Relaxed);
        // A command that ended before the run did (a failing `zfs receive`) ended on its own.
        let ended_first = matches!(self.child.try_wait(), Ok(Some(_)));
        let status = if exit == Exit::Success || ended_first {
            // The end of the stream, for the command: every copy of its stdin closed.
            drop(self.held_stdin.take());
            let _ = crate::sys::retire(io::stdout().as_fd());
            self.child.wait()
        } else {
            self.shared.stopped.store(true, Relaxed);
            crate::sys::stop_group(self.child.id(), TERM_GRACE);
            self.child.wait()
        };
        let stopped = self.shared.stopped.load(Relaxed);
        let finished = match status {
            Ok(status) => Finished {
                status: status.code(),
                signal: status.signal(),
                stopped,
                seconds: self.started.elapsed().as_secs_f64(),
            },
            Err(_) => Finished { status: None, signal: None, stopped, seconds: 0.0 },
        };
        // Every line said before the end is relayed before it: stderr closed here, the relay
        // ends when the command's copies are closed too.
        let _ = crate::sys::retire(io::stderr().as_fd());
        let _ = self.relayed.recv_timeout(Duration::from_secs(1));
        write_best_effort(&self.said_to, finished.line().as_bytes());
        match (exit, finished.failed_on_its_own()) {
            (Exit::Success, true) => i32::from(finished.code()),
            (exit, _) => i32::from(exit.code()),
        }
    }
}

/// Push: starts `command` with its stdin a pipe that becomes this accel's stdout (the run's
/// output), and its stdout this accel's stderr; the command and a copy of its stdin.
fn receive_into(
    command: &mut Command,
    config: &mut Config,
    spawn: impl Fn(&mut Command) -> Result<Child, String>,
    dup: impl Fn(BorrowedFd<'_>) -> Result<OwnedFd, String>,
    log: &Log,
) -> Result<(Child, OwnedFd), String> {
    // What a receiving command prints goes where its stderr goes: this accel's stdout is
    // the stream's.
    let stderr = rustix::io::fcntl_dupfd_cloexec(io::stderr().as_fd(), 3)
        .map_err(|e| describe(&e.into()))?;
    command.stdin(Stdio::piped()).stdout(Stdio::from(stderr));
    let mut child = spawn(command)?;
    log.debug(format_args!("--serve-ssh: the command is started"));
    let stdin: OwnedFd = child.stdin.take().expect("piped").into();
    let held = dup(stdin.as_fd())?;
    crate::sys::replace(stdin.as_fd(), io::stdout().as_fd()).map_err(|e| describe(&e))?;
    config.net.accept_timeout.get_or_insert(ACCEPT_PATIENCE);
    config.outputs = vec![Target::Stdout];
    Ok((child, held))
}

/// Through the session: the run's connection (`config`'s) reads the session's stdin and
/// writes its stdout, `session_in` and `session_out`, through descriptions of their pipes of
/// this accel's own, which it makes non-blocking (never sshd's: the flag would be theirs
/// too). Where they are not pipes, a socketpair whose one end is the run's connection, and
/// the other the relay's, bridged to the session once the control thread takes it.
fn carry(
    config: &mut Config,
    session_in: &OwnedFd,
    session_out: &OwnedFd,
) -> Result<Control, String> {
    config.net.bound = Vec::new();
    let reader = crate::sys::private_reader(session_in.as_fd());
    if let (Some(reader), Some(writer)) = (reader, crate::sys::private_writer(session_out.as_fd()))
    {
        config.net.carried = Some((reader.into_raw_fd(), ssh_client()));
        config.net.carried_out = Some(writer.into_raw_fd());
        return Ok(Control::Through(None));
    }
    let (run_end, relay_end) =
        socket::socketpair().map_err(|e| format!("cannot relay through ssh: {}", describe(&e)))?;
    config.net.carried = Some((run_end.into_raw_fd(), ssh_client()));
    Ok(Control::Through(Some(relay_end)))
}

/// The ssh client's address (`SSH_CONNECTION`'s first two fields), to name the session's
/// connection by in messages.
fn ssh_client() -> SocketAddr {
    let connection = std::env::var("SSH_CONNECTION").unwrap_or_default();
    let mut fields = connection.split_whitespace();
    let ip = fields.next().and_then(|ip| ip.parse::<IpAddr>().ok());
    let port = fields.next().and_then(|port| port.parse::<u16>().ok());
    SocketAddr::new(ip.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), port.unwrap_or(0))
}

/// A listening socket on the address the ssh connection came to (`SSH_CONNECTION`'s third
/// field; every interface without it), on a port of `ports` or the system's choice.
fn listen(ports: Option<(u16, u16)>, taken: Option<u16>) -> Result<OwnedFd, String> {
    let server = std::env::var("SSH_CONNECTION").ok().and_then(|connection| {
        connection.split_whitespace().nth(2).and_then(|ip| ip.parse::<IpAddr>().ok())
    });
    let (ip, both) = match server {
        Some(ip) => (ip, false),
        None => (IpAddr::V6(Ipv6Addr::UNSPECIFIED), true),
    };
    let (low, high) = ports.unwrap_or((0, 0));
    let mut last = None;
    for port in (low..=high).filter(|&port| port == 0 || Some(port) != taken) {
        match socket::listen(SocketAddr::new(ip, port), both, None) {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    let why = last.map(|e| describe(&e)).unwrap_or_default();
    Err(match ports {
        Some((low, high)) => format!("cannot listen on {ip}, ports {low}-{high}: {why}"),
        None => format!("cannot listen on {ip}: {why}"),
    })
}

/// Writes to a descriptor of the session, which may be gone: never fatal.
fn write_best_effort(fd: &OwnedFd, bytes: &[u8]) {
    let _ = rustix::io::write(fd, bytes);
}

/// Makes stderr a pipe of this accel's own, relayed by a thread to `session_err` as long as
/// that takes it, then read and dropped: neither this accel nor its command ever writes into
/// a pipe that is gone. The receiver hears when every writer has closed.
fn relay_stderr(session_err: OwnedFd) -> io::Result<mpsc::Receiver<()>> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    crate::sys::replace(write.as_fd(), io::stderr().as_fd())?;
    drop(write);
    let (done, relayed) = mpsc::channel();
    thread::Builder::new().name("accel-relay".into()).spawn(move || {
        let mut read = std::fs::File::from(read);
        let mut buffer = [0u8; 4096];
        let mut open = true;
        while let Ok(n @ 1..) = read.read(&mut buffer) {
            open = open && rustix::io::write(&session_err, &buffer[..n]).is_ok();
        }
        let _ = done.send(());
    })?;
    Ok(relayed)
}

/// Pull: where the remote sender connects, the local accel's port at the address the ssh
/// connection came from (`SSH_CONNECTION`'s first field), and the stream's connection there
/// (non-blocking, for the run to take over: a probe first would cost a round trip more),
/// unless `--via ssh`; else, why the stream goes through ssh. Status 6 with `--via direct`
/// when it cannot connect.
fn pull_path(request: &Request) -> Result<Result<(Address, TcpStream), String>, String> {
    let client = std::env::var("SSH_CONNECTION").ok().and_then(|connection| {
        connection.split_whitespace().next().and_then(|ip| ip.parse::<IpAddr>().ok())
    });
    let (client, port) = match (client, request.listening, request.via) {
        (_, _, Via::Ssh) => return Ok(Err(String::new())),
        (Some(client), Some((port, _probe)), _) => (client, port),
        (_, _, Via::Direct) => {
            return Err("no SSH_CONNECTION: where to connect to? (--via direct)".into());
        }
        _ => return Ok(Err("no SSH_CONNECTION to say where to connect to".into())),
    };
    let back = SocketAddr::new(client, port);
    let connected = TcpStream::connect_timeout(&back, super::DIRECT_PATIENCE)
        .and_then(|connection| connection.set_nonblocking(true).map(|()| connection));
    match connected {
        Ok(connection) => Ok(Ok((Address::parse(&back.to_string(), false)?, connection))),
        Err(error) => {
            let why = super::unreached(back, &error);
            match request.via {
                Via::Direct => {
                    Err(format!("the remote accel cannot connect back to {why} (--via direct)"))
                }
                _ => Ok(Err(format!("connecting back to {why}"))),
            }
        }
    }
}

/// Waits until every writer of the pipe `fd` reads from has closed it, reading nothing.
fn hung_up(fd: &OwnedFd) {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::empty())];
    while matches!(rustix::event::poll(&mut fds, None), Err(rustix::io::Errno::INTR) | Ok(0)) {}
}

/// Follows the control lines after the answer, on a thread of its own: `stop` stops the
/// command and ends this accel; `through-ssh` (push) turns the session into the stream's path.
/// The end of the session is not a stop (an outage may end ssh alone), unless the stream
/// went through it: then it is the end of the stream, and the command is stopped; or unless
/// no sender has come yet to a push's direct path: the local accel that would have is gone.
fn follow(
    control: Control,
    control_in: OwnedFd,
    control_out: OwnedFd,
    said_to: OwnedFd,
    child: u32,
    shared: Arc<Shared>,
) {
    let stop = move |shared: &Shared| {
        if shared.ending.load(Relaxed) {
            return;
        }
        shared.stopped.store(true, Relaxed);
        crate::sys::stop_group(child, TERM_GRACE);
        let finished =
            Finished { status: None, signal: Some(libc::SIGTERM), stopped: true, seconds: 0.0 };
        write_best_effort(&said_to, finished.line().as_bytes());
        std::process::exit(128 + libc::SIGTERM);
    };
    let _ = thread::Builder::new().name("accel-control".into()).spawn(move || {
        match control {
            Control::Through(Some(end)) => {
                if let Ok(relay) = super::relay::bridge(end, control_in, control_out) {
                    let _ = relay.join();
                }
            }
            // The run reads the session's stdin itself: its end is when sshd closes it.
            Control::Through(None) => {
                drop(control_out);
                hung_up(&control_in);
            }
            Control::Stop(met) => loop {
                let Ok(Some(line)) = read_text_line(&control_in) else {
                    // An outage once the sender came: it comes back. Before, nobody will.
                    if met.is_some_and(|met| !met.is_raised()) {
                        stop(&shared);
                    }
                    return;
                };
                if line.trim() == "stop" {
                    stop(&shared);
                }
            },
        }
        // Through ssh, the session's end is the stream's: the local accel closes it once it
        // has the Ack, and the run here then ends at once (its connection's end follows);
        // a run still going after a while lost its session mid-stream, and is stopped.
        let deadline = Instant::now() + SESSION_GRACE;
        while !shared.ending.load(Relaxed) && Instant::now() < deadline {
            // Polled: the flag is the main thread's, set when the run returns.
            thread::sleep(Duration::from_millis(20));
        }
        stop(&shared);
    });
}
