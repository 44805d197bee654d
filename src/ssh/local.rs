//! The side the user runs: `--to ssh://HOST -- CMD` (see the module above).
//!
//! It asks `ssh -G` where ssh connects, starts ssh with `accel --serve-ssh` there (in a
//! process group of its own, so that the terminal's Ctrl-C reaches this accel, which then
//! stops the remote command, and not ssh, which would cut the session first), sends the
//! request with a fresh key, reads the answer, and runs as an ordinary `--to` sender to the
//! port the remote accel listens on (or, through the session, to ssh's stdin and stdout
//! themselves: one end of a socketpair of this accel's own, whose other end is the run's
//! connection, with no thread or copy between). ssh's stderr (the remote accel's, and its command's) is
//! shown here, each line marked with the host; what ssh says before the answer is held, so
//! that a failure to start is one line. The remote command's status decides this one's when
//! it failed on its own.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::{Answer, Finished, GREETING, Request, read_text_line};
use crate::exit::Exit;
use crate::log::Log;
use crate::net::address::Address;
use crate::net::handshake::Ahead;
use crate::net::key::Key;
use crate::net::socket;
use crate::net::{self, Peering};
use crate::run;
use crate::run::config::{Config, Ssh, Target, Via};
use crate::run::stdio;
use crate::watch::JsonTarget;
use crate::words::{describe, span};

/// How long the remote accel has to say how its command ended once this run failed (it
/// stops the command: SIGTERM, SIGKILL 5 s later).
const STOP_PATIENCE: Duration = Duration::from_secs(10);

/// How long a failed start waits for the rest of ssh's stderr after ssh has exited (it ends
/// with ssh, unless something ssh started holds it).
const STDERR_PATIENCE: Duration = Duration::from_secs(2);

/// Pull: how long this accel waits for the remote sender's connection, unless
/// `--accept-timeout` says.
const ACCEPT_PATIENCE: Duration = Duration::from_secs(60);

/// Runs `config` (which has an ssh:// peer): starts the other end, runs the transfer, and
/// returns how accel ends.
pub fn run(config: &Config, closed: stdio::Closed) -> Exit {
    let ssh = config.ssh.as_ref().expect("an ssh:// peer");
    let host = ssh.host().to_owned();
    let log = Arc::new(Log::new(config.quiet, config.debug));
    if config.debug {
        // Both ends' notes, side by side, say where the start-up's time goes.
        crate::log::stamp_notes();
    }
    log.debug(format_args!("{host}: starting ssh"));
    let mut started = match Started::start(ssh, &config.net, &log) {
        Ok(started) => started,
        Err((exit, why)) => {
            eprintln!("accel: {host}: {why}");
            return exit;
        }
    };
    let mut direct = config.clone();
    direct.ssh = None;
    direct.net.key = Some(Arc::clone(&started.key));
    if started.through {
        // The session's end is the stream's: nothing to connect to again.
        direct.net.resume.within = Duration::ZERO;
        // The session carries one connection (`--via ssh` with several is refused up front;
        // this is the fallback): the remote sender of a pull makes the same choice.
        if config.net.streams > 1 {
            log.warn(format_args!("--streams {}: through ssh, one stream", config.net.streams));
            direct.net.streams = 1;
        }
        // Compressed only if asked: an older remote accel cannot be dialed again.
        direct.net.compress = config.net.compress_through_ssh();
    }
    match started.peer.take() {
        Some(Peer::Receiver { address, dialed }) => {
            direct.outputs.push(Target::Network(address));
            direct.net.dialed = dialed.map(IntoRawFd::into_raw_fd);
        }
        Some(Peer::Sender { address, listener }) => {
            direct.net.from = Some(address);
            direct.net.bound = listener.into_iter().map(IntoRawFd::into_raw_fd).collect();
            direct.net.accept_timeout.get_or_insert(ACCEPT_PATIENCE);
        }
        None => unreachable!("a peer"),
    }
    if let Some((session, peer)) = started.carried.take() {
        direct.net.carried = Some((OwnedFd::from(session).into_raw_fd(), peer));
    }
    direct.net.ahead = started.ahead.take();
    let stop_word = started.stop_word();
    run::signals::before_dying(Box::new(stop_word));
    log.debug(format_args!("{host}: the run starts"));
    let exit = run::run_with(&direct, closed, Arc::clone(&log));
    started.end(exit, ssh, config.stats, config.json.as_ref())
}

/// ssh started, the remote accel listening.
struct Started {
    child: Child,
    /// This accel's end of the session (ssh's stdin and stdout are the other): the control
    /// lines to the remote accel.
    control: Arc<Mutex<Option<UnixStream>>>,
    /// The same end, held open while the stream goes directly (ssh would end at a write
    /// into a closed socket).
    answers: Option<UnixStream>,
    /// Through ssh: the same end, the run's connection, and the ssh host's address to name
    /// it by.
    carried: Option<(UnixStream, SocketAddr)>,
    /// The one-time key.
    key: Arc<Key>,
    /// The stream's first handshake message, already sent on its connection (direct, or
    /// the session).
    ahead: Option<Ahead>,
    /// The remote accel, as this run's peer.
    peer: Option<Peer>,
    /// The thread that shows ssh's stderr; it ends with ssh.
    relay: Option<JoinHandle<()>>,
    /// What ssh's stderr said, and how the remote command ended.
    said: Arc<Mutex<Said>>,
    /// The stream goes through the ssh session.
    through: bool,
}

/// The remote accel, as the run's peer.
enum Peer {
    /// Push: a receiver, listening at this address; the stream's connection to it, made
    /// when the direct path was tried (none through ssh).
    Receiver { address: Address, dialed: Option<OwnedFd> },
    /// Pull: a sender, which connects to this accel's `listener` (named `address` in the
    /// messages); none through ssh.
    Sender { address: Address, listener: Option<OwnedFd> },
}

/// What ssh's stderr said: held (before the answer) or shown.
#[derive(Default)]
struct Said {
    /// The lines held; `None` once they are shown as they come.
    held: Option<Vec<String>>,
    /// The last line, for ssh's own failure.
    last: String,
    /// How the remote command ended, said last.
    finished: Option<Finished>,
}

impl Started {
    /// Starts ssh, sends the request, reads the answer.
    fn start(ssh: &Ssh, peering: &Peering, log: &Arc<Log>) -> Result<Started, (Exit, String)> {
        let network = |why: String| (Exit::Network, why);
        let host = ssh.host();
        let mut line = vec![ssh.remote_accel.clone(), "--serve-ssh".to_owned()];
        line.extend(ssh.remote_args.iter().cloned());
        let remote = shlex::try_join(line.iter().map(String::as_str))
            .map_err(|_| (Exit::Usage, "--remote-args: a word with a NUL byte".to_owned()))?;
        let mut command = Command::new(&ssh.program[0]);
        command.args(&ssh.program[1..]).args(["-T", "-x", "-a"]);
        if let Some(port) = ssh.port {
            command.arg("-p").arg(port.to_string());
        }
        command.arg(&ssh.destination).arg("--").arg(remote);
        // ssh's stdin and stdout: one end of a socketpair (ssh makes them non-blocking, which
        // harms no one else: that end is its alone); this accel's, the other.
        let cannot = |e: io::Error| network(format!("cannot start ssh: {}", describe(&e)));
        let (session, for_ssh) = socket::socketpair().map_err(cannot)?;
        let for_ssh_out = for_ssh.try_clone().map_err(cannot)?;
        let spawned = command
            .stdin(for_ssh)
            .stdout(for_ssh_out)
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn();
        // ssh's end closed here, so that ssh's exit is the end of the session for this one.
        drop(command);
        let mut child = spawned.map_err(|e| {
            network(format!("cannot run {}: {}; nothing was sent", ssh.program[0], describe(&e)))
        })?;
        log.debug(format_args!("{host}: ssh started"));
        // Made once ssh runs, which is on the critical path; the key waits in this process
        // until then.
        let key =
            Arc::new(Key::generate().map_err(|e| network(format!("no key: {}", describe(&e))))?);
        log.debug(format_args!("{host}: the one-time key is made"));
        // `ssh -G` is local, but a process of its own (tens of ms on a loaded machine): it
        // runs while ssh connects, which takes round trips; its answer is needed only once
        // the remote has said its port. Started after ssh, which is on the critical path.
        let resolving = {
            let ssh = ssh.clone();
            let log = Arc::clone(log);
            thread::spawn(move || {
                let resolved = resolve(&ssh);
                log.debug(format_args!("{}: ssh -G answered", ssh.host()));
                resolved
            })
        };
        let said = Arc::new(Mutex::new(Said { held: Some(Vec::new()), ..Said::default() }));
        let stderr = child.stderr.take().expect("piped");
        // Disconnected when the relay has read ssh's stderr to its end.
        let (stderr_end, stderr_read) = mpsc::channel::<()>();
        let relay = relay(stderr.into(), host.to_owned(), Arc::clone(&said), stderr_end, log);
        let mut session = UnixStream::from(session);
        // Pull: the remote sender connects back to a port of this accel's, on every
        // interface (only the key's holder is taken), at the address ssh came from.
        let listener = match ssh.push {
            true => None,
            false => Some(listen_for_sender().map_err(network)?),
        };
        let listening = match &listener {
            None => None,
            Some((_, port)) => {
                let probe = TcpListener::bind((Ipv6Addr::UNSPECIFIED, 0))
                    .or_else(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)))
                    .map_err(|e| network(format!("cannot listen: {}", describe(&e))))?;
                let probe_port = probe.local_addr().map_err(|e| network(describe(&e)))?.port();
                super::answer_probes(probe);
                Some((*port, probe_port))
            }
        };
        let request = Request {
            push: ssh.push,
            command: ssh.command.join(" "),
            ports: ssh.ports,
            via: ssh.via,
            listening,
            resume: peering.resume,
            debug: log.debugging(),
        };
        // The key only ever goes through this pipe, in a buffer zeroed when dropped.
        let key_line = key.to_line();
        let mut sent = session
            .write_all(format!("{GREETING}\n").as_bytes())
            .and_then(|()| session.write_all(key_line.as_bytes()))
            .and_then(|()| session.write_all(format!("{}\n", request.to_json()).as_bytes()));
        log.debug(format_args!("{host}: the request is written"));
        // Push through ssh: the stream's first handshake message right behind the request,
        // where the remote's run finds it once it starts, rather than a round trip later,
        // after the answer. It proves the key and carries no data: a remote that cannot
        // take the request leaves it unread.
        let mut ahead = None;
        let mut through_ssh = peering.clone();
        through_ssh.compress = peering.compress_through_ssh();
        if ssh.push && ssh.via == Via::Ssh && sent.is_ok() {
            let mut opening = net::opening_ahead(&through_ssh, 1, &key).map_err(network)?;
            sent = opening.send_ahead(&mut session);
            ahead = Some(Ahead::new(opening));
            log.debug(format_args!("{host}: the first handshake message is written"));
        }
        let answer = match sent {
            Ok(()) => read_text_line(&session).ok().flatten(),
            Err(_) => None,
        };
        log.debug(format_args!("{host}: the remote answered {:?}", answer.as_deref()));
        let failed = |child: &mut Child, said: &Mutex<Said>, answer: Option<&str>| {
            let status = child.wait().ok();
            // What ssh said decides what to say (an old accel's refusal, ssh's own error):
            // its stderr is read to the end, which comes with ssh's exit.
            let _ = stderr_read.recv_timeout(STDERR_PATIENCE);
            let said = said.lock().unwrap_or_else(|e| e.into_inner());
            Err(why_not_started(status, &said, answer))
        };
        let answered = answer.clone();
        let answer = answer.as_deref().and_then(Answer::parse);
        // The remote's probe port (push) is not used: the direct path is tried with the
        // stream's own connection (see `push_path`).
        let (port, through) = match (answer, &listener) {
            (Some(Answer::Port(port, _)), None) if ahead.is_none() => (Some(port), None),
            // Push through ssh (`--via ssh`): the remote carries the stream at once.
            (Some(Answer::Through(why)), None) if ahead.is_some() => (None, Some(why)),
            (Some(Answer::Dialing), Some((_, port))) => (Some(*port), None),
            (Some(Answer::Through(why)), Some((_, port))) => (Some(*port), Some(why)),
            (Some(Answer::NoPort(why)), _) => {
                return Err(network(format!("{why}; nothing was sent")));
            }
            (Some(Answer::Refused(why)), _) => {
                return Err(network(format!(
                    "the remote accel does not speak this protocol ({why}); nothing was sent"
                )));
            }
            (answer, _) => {
                // What it said as it said it: another version's refusal says which it speaks.
                let line = answer.map(|answer| answer.line()).or(answered);
                return failed(&mut child, &said, line.as_deref().map(str::trim_end));
            }
        };
        release(&said, ssh.host(), log);
        let resolved = resolving.join().unwrap_or_default();
        let host = match &resolved.hostname {
            Some(name) if name.contains(':') => format!("[{name}]"),
            Some(name) => name.clone(),
            None => ssh.host().to_owned(),
        };
        // Through ssh (push), the session is named by ssh's own port.
        let port = port.unwrap_or_else(|| resolved.ssh_peer(ssh).port());
        let address = Address::parse(&format!("{host}:{port}"), !ssh.push).map_err(network)?;
        let (peer, through) = match listener {
            None if ahead.is_some() => (Peer::Receiver { address, dialed: None }, through),
            None => {
                let path = push_path(ssh, &resolved, &address, log);
                if path.is_err() {
                    // `--via direct` cannot connect: the remote, listening, stops.
                    let _ = session.write_all(b"stop\n");
                }
                match path? {
                    Ok(mut connection) => {
                        // The first handshake message on the connection at once, before
                        // the run starts; then the connection is the run's, non-blocking.
                        let mut opening =
                            net::opening_ahead(peering, peering.streams, &key).map_err(network)?;
                        opening
                            .send_ahead(&mut connection)
                            .and_then(|()| connection.set_nonblocking(true))
                            .map_err(|e| network(format!("{address}: {}", describe(&e))))?;
                        ahead = Some(Ahead::new(opening));
                        // `--via direct`: the remote knew the path from the request.
                        if ssh.via == Via::Auto {
                            let _ = session.write_all(b"direct\n");
                        }
                        (Peer::Receiver { address, dialed: Some(connection.into()) }, None)
                    }
                    Err(why) => {
                        let _ = session.write_all(b"through-ssh\n");
                        // The session carries one connection.
                        let mut opening =
                            net::opening_ahead(&through_ssh, 1, &key).map_err(network)?;
                        if opening.send_ahead(&mut session).is_ok() {
                            ahead = Some(Ahead::new(opening));
                        }
                        (Peer::Receiver { address, dialed: None }, Some(why))
                    }
                }
            }
            Some((listener, _)) if through.is_some() => {
                // Nothing comes to the listener: the sender's connection is the session.
                drop(listener);
                (Peer::Sender { address, listener: None }, through)
            }
            Some((listener, _)) => (Peer::Sender { address, listener: Some(listener) }, None),
        };
        let (control, answers, carried) = match through {
            None => (Some(session.try_clone().map_err(cannot)?), Some(session), None),
            Some(why) => {
                if !why.is_empty() {
                    log.warn(format_args!("{why}; sending through ssh instead (slower)"));
                }
                (None, None, Some((session, resolved.ssh_peer(ssh))))
            }
        };
        let control = Arc::new(Mutex::new(control));
        let through = carried.is_some();
        let peer = Some(peer);
        Ok(Started { child, control, answers, carried, key, ahead, peer, relay, said, through })
    }

    /// What a terminating signal says before accel dies: `stop`, so that the remote command
    /// is stopped, not left holding what it writes. (Through ssh, the session's end is the
    /// stream's, and the remote stops its command then.)
    fn stop_word(&self) -> impl Fn() + Send + Sync + 'static {
        let control = Arc::clone(&self.control);
        move || {
            if let Ok(mut control) = control.try_lock() {
                if let Some(stdin) = control.as_mut() {
                    let _ = stdin.write_all(b"stop\n");
                }
            }
        }
    }

    /// After the local run: the remote command stopped if the run failed; its end heard
    /// (ssh's stderr read to its end); the status decided.
    fn end(mut self, exit: Exit, ssh: &Ssh, report: bool, json: Option<&JsonTarget>) -> Exit {
        if exit != Exit::Success {
            (self.stop_word())();
            // Through ssh, the session closed is the remote's word to stop.
            drop(self.control.lock().unwrap_or_else(|e| e.into_inner()).take());
            if !wait_for_exit(&mut self.child, STOP_PATIENCE) {
                let _ = self.child.kill();
            }
        }
        // The session ends once the remote accel has; then ssh's stderr, with the last line.
        let _ = self.child.wait();
        drop(self.control.lock().unwrap_or_else(|e| e.into_inner()).take());
        drop(self.answers.take());
        if let Some(relay) = self.relay.take() {
            let _ = relay.join();
        }
        let finished = self.said.lock().unwrap_or_else(|e| e.into_inner()).finished.take();
        let host = ssh.host();
        if let Some(finished) = finished.as_ref().filter(|_| report) {
            // With -v, after the report: what the remote command took.
            eprintln!(
                "accel: remote: {} on {host}: {}, {}, {}",
                ssh.command.join(" "),
                span(Duration::from_secs_f64(finished.seconds.max(0.0))),
                finished.how(),
                if self.through { "through ssh" } else { "direct" }
            );
        }
        if let Some(json) = json {
            self.say_json(json, ssh, finished.as_ref());
        }
        match finished {
            Some(finished) if finished.failed_on_its_own() => {
                eprintln!("accel: {host}: {}: {}", ssh.command.join(" "), finished.how());
                Exit::Command(finished.code())
            }
            Some(_) => exit,
            None if exit == Exit::Success => {
                eprintln!(
                    "accel: {host}: the stream was delivered, but how {} ended is not known: \
                     the ssh session ended first",
                    ssh.command.join(" ")
                );
                exit
            }
            None => exit,
        }
    }
}

impl Started {
    /// `{"event":"remote",...}` after the run's summary, in the same JSON lines: what the
    /// remote command took and how it ended (`null`s when the session ended before it said).
    fn say_json(&self, json: &JsonTarget, ssh: &Ssh, finished: Option<&Finished>) {
        let event = serde_json::json!({
            "event": "remote",
            "host": ssh.host(),
            "command": ssh.command.join(" "),
            "path": if self.through { "ssh" } else { "direct" },
            "seconds": finished.map(|finished| finished.seconds),
            "status": finished.and_then(|finished| finished.status),
            "signal": finished.and_then(|finished| finished.signal),
            "stopped": finished.map(|finished| finished.stopped),
        });
        let line = format!("{event}\n");
        let written = match json {
            JsonTarget::Stderr => io::stderr().write_all(line.as_bytes()),
            JsonTarget::File(path) => std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(line.as_bytes())),
        };
        if let Err(error) = written {
            eprintln!("accel: --json: cannot write the remote's event: {}", describe(&error));
        }
    }
}

/// Whether `child` exits within `patience` (it is then reaped by the next wait).
fn wait_for_exit(child: &mut Child, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            // Polled: a child's exit has no descriptor to wait on without taking it.
            Ok(None) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Push: whether the stream goes directly to `address` (its connection, blocking, which the
/// run takes over) or through ssh (why: empty with `--via ssh`). Status 6 when `--via
/// direct` cannot connect.
///
/// The direct path is tried with the stream's own connection rather than a probe's: a
/// probe, then the stream's connection, would cost two round trips before the handshake
/// where one does. The remote's listener sees nothing of it until the run handshakes on it.
fn push_path(
    ssh: &Ssh,
    resolved: &Resolved,
    address: &Address,
    log: &Log,
) -> Result<Result<TcpStream, String>, (Exit, String)> {
    match (ssh.via, &resolved.proxied) {
        (Via::Ssh, _) => return Ok(Err(String::new())),
        (Via::Auto, Some(proxy)) => {
            return Ok(Err(format!("{}: reached through a jump host ({proxy})", ssh.host())));
        }
        _ => {}
    }
    let targets = address.resolve().map_err(|e| (Exit::Network, describe(&e)))?;
    let mut why = String::new();
    for target in targets {
        match TcpStream::connect_timeout(&target, super::DIRECT_PATIENCE) {
            Ok(connection) => {
                log.debug(format_args!("{}: connected to {target}: the direct path", ssh.host()));
                return Ok(Ok(connection));
            }
            Err(error) => why = super::unreached(target, &error),
        }
    }
    match ssh.via {
        Via::Direct => Err((Exit::Network, format!("{why} (--via direct); nothing was sent"))),
        _ => Ok(Err(why)),
    }
}

/// Pull: a listening socket on every interface, on a port the system chooses, for the remote
/// sender to connect to; and that port.
fn listen_for_sender() -> Result<(OwnedFd, u16), String> {
    let every = SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0));
    let listener = socket::listen(every, true, None)
        .or_else(|_| socket::listen(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), false, None))
        .map_err(|e| format!("cannot listen for the remote sender: {}", describe(&e)))?;
    let port = socket::local_address(&listener).map_err(|e| describe(&e))?.port();
    Ok((listener, port))
}

/// Why the remote accel did not answer, from how ssh ended and what it said.
fn why_not_started(
    status: Option<ExitStatus>,
    said: &Said,
    answer: Option<&str>,
) -> (Exit, String) {
    let held = said.held.as_deref().unwrap_or_default();
    let last = said.last.as_str();
    let nothing = "nothing was sent";
    match status.and_then(|status| status.code()) {
        Some(255) => (Exit::Network, format!("ssh failed: {last}; {nothing}")),
        Some(127) => (
            Exit::Network,
            format!(
                "no accel on the remote PATH; install it there or give --remote-accel PATH; {nothing}"
            ),
        ),
        Some(126) => (Exit::Network, format!("the remote accel cannot be run: {last}; {nothing}")),
        Some(2) if held.iter().any(|line| line.contains("--serve-ssh")) => (
            Exit::Network,
            format!("the remote accel does not speak this protocol ({last}); {nothing}"),
        ),
        // The remote accel refused its --remote-args: its own line says why.
        Some(2) => (Exit::Usage, format!("the remote accel refused: {last}; {nothing}")),
        _ => {
            let what = match answer {
                Some(line) => format!("it answered {line:?}"),
                None if last.is_empty() => "it said nothing".to_owned(),
                None => last.to_owned(),
            };
            (
                Exit::Network,
                format!("the remote accel does not speak this protocol ({what}); {nothing}"),
            )
        }
    }
}

/// Relays ssh's stderr, line by line, marked with the host; held until [`release`].
/// `end` is dropped once the stderr has ended.
fn relay(
    stderr: OwnedFd,
    host: String,
    said: Arc<Mutex<Said>>,
    end: mpsc::Sender<()>,
    log: &Arc<Log>,
) -> Option<JoinHandle<()>> {
    let log = Arc::clone(log);
    let relay = thread::Builder::new().name("accel-ssh-stderr".into()).spawn(move || {
        let _end = end;
        let reader = BufReader::new(std::fs::File::from(stderr));
        for line in reader.split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line).trim_end().to_owned();
            let mut said = said.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(finished) = Finished::parse(&line) {
                said.finished = Some(finished);
                continue;
            }
            match &mut said.held {
                Some(held) => held.push(line.clone()),
                None => log.pass_on(&format!("{host}: {line}")),
            }
            said.last = line;
        }
    });
    relay.ok()
}

/// Shows the lines held, and from now on each as it comes.
fn release(said: &Mutex<Said>, host: &str, log: &Log) {
    let mut said = said.lock().unwrap_or_else(|e| e.into_inner());
    for line in said.held.take().unwrap_or_default() {
        log.pass_on(&format!("{host}: {line}"));
    }
}

/// Where ssh connects, as `ssh -G` says (with the user's own ssh words and port).
#[derive(Debug, Default)]
struct Resolved {
    /// `hostname`.
    hostname: Option<String>,
    /// `port`.
    port: Option<u16>,
    /// `proxyjump` or `proxycommand`: the direct path is not ssh's.
    proxied: Option<String>,
}

impl Resolved {
    /// The ssh server's address, to name the session's connection by in messages: its
    /// hostname when that is an address (nothing is looked up: through a jump host, the name
    /// may be the jump host's to know), and ssh's port.
    fn ssh_peer(&self, ssh: &Ssh) -> SocketAddr {
        let ip = self.hostname.as_deref().and_then(|name| name.parse::<IpAddr>().ok());
        let port = ssh.port.or(self.port).unwrap_or(22);
        SocketAddr::new(ip.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), port)
    }
}

/// Asks `ssh -G` for the hostname (and whether a jump host or proxy command is in the way);
/// nothing when it cannot say (the destination as typed is then the host).
fn resolve(ssh: &Ssh) -> Resolved {
    let mut command = Command::new(&ssh.program[0]);
    command.args(&ssh.program[1..]).arg("-G");
    if let Some(port) = ssh.port {
        command.arg("-p").arg(port.to_string());
    }
    let Ok(output) =
        command.arg(&ssh.destination).stdin(Stdio::null()).stderr(Stdio::null()).output()
    else {
        return Resolved::default();
    };
    let mut resolved = Resolved::default();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let (name, value) = line.split_once(' ').unwrap_or((line, ""));
        match name {
            "hostname" => resolved.hostname = Some(value.to_owned()),
            "port" => resolved.port = value.parse().ok(),
            "proxyjump" | "proxycommand" if value != "none" => {
                resolved.proxied = Some(format!("{name} {value}"));
            }
            _ => {}
        }
    }
    resolved
}
