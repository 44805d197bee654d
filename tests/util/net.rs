//! Helpers between hosts: key files, receiving and sending accels, commands run inside a
//! network namespace, and two hosts of the tests' own ([`Veth`]: namespaces joined by a veth
//! pair, whose link `tc` shapes). Everything here talks to loopback or inside namespaces a
//! test made, and a namespace goes when its test ends, however it ends.

use std::net::TcpListener;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};

use super::{ACCEL, Said, Scratch, drain, is_root, require};

/// A new key file named `name` in `dir`, made by `accel --generate key FILE`.
pub fn make_key(dir: &Scratch, name: &str) -> String {
    let path = dir.path(name);
    let status = Command::new(ACCEL).args(["--generate", "key"]).arg(&path).status().unwrap();
    assert!(status.success(), "accel --generate key FILE");
    path.to_str().unwrap().to_owned()
}

/// A receiving accel, its port, what it writes, and what it says.
pub struct Receiver {
    pub child: Child,
    /// The port it listens on, as it said.
    pub port: u16,
    /// What it says, collected as it goes.
    pub said: Said,
}

/// A test that fails midway leaves no receiver behind.
impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// `accel --engine ENGINE --from HOST:0 ARGS...` (the system picks the port, accel says
    /// which); inside `wrap` (`ip netns exec`), when given.
    pub fn start(engine: &str, host: &str, args: &[&str], wrap: Option<&Netns>) -> Receiver {
        Receiver::at(engine, &format!("{host}:0"), args, wrap)
    }

    /// `accel --engine ENGINE --from FROM ARGS...`, once it says where it listens.
    pub fn at(engine: &str, from: &str, args: &[&str], wrap: Option<&Netns>) -> Receiver {
        Receiver::with_env(engine, from, args, wrap, &[])
    }

    /// As [`at`](Receiver::at), with `env` set in its environment (a test hook).
    pub fn with_env(
        engine: &str,
        from: &str,
        args: &[&str],
        wrap: Option<&Netns>,
        env: &[(&str, &str)],
    ) -> Receiver {
        let mut full = vec!["--engine", engine, "--from", from];
        full.extend_from_slice(args);
        let mut child = command(wrap, ACCEL, &full)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the receiver");
        let said = Said::collect(&mut child);
        let line = said.line_with("listening on ");
        let port = line.rsplit(':').next().unwrap().trim().parse().expect("a port");
        Receiver { child, port, said }
    }

    /// Everything it writes, read on a thread.
    pub fn output(&mut self) -> JoinHandle<Vec<u8>> {
        let stdout = self.child.stdout.take().unwrap();
        thread::spawn(move || drain(stdout))
    }

    /// Its stdout, for the test to read.
    pub fn stdout(&mut self) -> ChildStdout {
        self.child.stdout.take().unwrap()
    }

    /// Waits for it to end: its status and what it said.
    pub fn end(&mut self) -> (ExitStatus, String) {
        self.said.ended(&mut self.child)
    }
}

/// A sending accel, `accel --engine ENGINE --to TO ARGS...` (inside `wrap` when given), its
/// stdin and stderr piped.
pub fn sender(engine: &str, to: &str, args: &[&str], wrap: Option<&Netns>) -> Child {
    sender_with_env(engine, to, args, wrap, &[])
}

/// As [`sender`], with `env` set in its environment (a test hook).
pub fn sender_with_env(
    engine: &str,
    to: &str,
    args: &[&str],
    wrap: Option<&Netns>,
    env: &[(&str, &str)],
) -> Child {
    let mut full = vec!["--engine", engine, "--to", to];
    full.extend_from_slice(args);
    command(wrap, ACCEL, &full)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the sender")
}

/// `program args...`, inside `netns` when given.
pub fn command(netns: Option<&Netns>, program: &str, args: &[&str]) -> Command {
    match netns {
        None => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
        Some(netns) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", &netns.name, program]).args(args);
            command
        }
    }
}

/// A loopback port nobody listens on (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A network namespace made for one test, with loopback up; deleted (with its interfaces)
/// when dropped, however the test ends.
pub struct Netns {
    /// `accel-tPID-TAG`: the process's own, so that runs at once do not meet.
    pub name: String,
}

impl Netns {
    /// `None`, having said so, where namespaces cannot be made (not root, no `ip`).
    pub fn new(tag: &str) -> Option<Netns> {
        let can =
            is_root() && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
        if !require("root and `ip netns` (iproute2), for network namespaces", can) {
            return None;
        }
        let name = format!("accel-t{}-{tag}", std::process::id());
        ip(&["netns", "add", &name]);
        let netns = Netns { name };
        netns.ip(&["link", "set", "lo", "up"]);
        Some(netns)
    }

    /// `ip -n NAME ARGS...`, which must succeed.
    #[track_caller]
    pub fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        ip(&full);
    }

    /// Runs `body` on a thread that has joined this namespace, and returns what it returns.
    pub fn within<T: Send + 'static>(&self, body: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        thread::spawn(move || {
            let file = std::fs::File::open(path).unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: setns with a namespace descriptor; it moves only this thread.
            assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
            body()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// `ip ARGS...`, which must succeed.
#[track_caller]
fn ip(args: &[&str]) {
    must("ip", args);
}

/// `program ARGS...`, which must succeed.
#[track_caller]
fn must(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two hosts that exist only inside this machine: two network namespaces made for one test,
/// joined by a veth pair, each end with an address of its own. Traffic between them crosses a
/// real link, which `tc` can shape (these kernels have tbf and htb, no netem).
pub struct Veth {
    /// 10.213.N.1, on its end `va`.
    pub a: Host,
    /// 10.213.N.2, on its end `vb`.
    pub b: Host,
}

/// One end of a [`Veth`]: a namespace, its end of the pair, and its address on the link.
pub struct Host {
    /// Its namespace: what runs in it ([`command`], [`sender`], [`Receiver`]) is on this host.
    pub netns: Netns,
    /// The name of its end of the veth pair, inside its namespace.
    pub dev: &'static str,
    /// Its address on the link (without the prefix length, /24).
    pub addr: String,
}

impl Veth {
    /// Namespaces `TAGa` and `TAGb`, joined: `a` is 10.213.N.1, `b` is 10.213.N.2, N being
    /// `subnet`. `None`, having said so, where namespaces cannot be made.
    pub fn new(tag: &str, subnet: u8) -> Option<Veth> {
        let a = Netns::new(&format!("{tag}a"))?;
        let b = Netns::new(&format!("{tag}b"))?;
        let (dev_a, dev_b) = ("va", "vb");
        ip(&[
            "link", "add", dev_a, "netns", &a.name, "type", "veth", "peer", "name", dev_b, "netns",
            &b.name,
        ]);
        let host = |netns: Netns, dev, host: u8| {
            let addr = format!("10.213.{subnet}.{host}");
            netns.ip(&["addr", "add", &format!("{addr}/24"), "dev", dev]);
            netns.ip(&["link", "set", dev, "up"]);
            Host { netns, dev, addr }
        };
        Some(Veth { a: host(a, dev_a, 1), b: host(b, dev_b, 2) })
    }

    /// Each end limited to `rate` (as tc writes it: `200mbit`) by a token bucket (tbf).
    #[track_caller]
    pub fn limit(&self, rate: &str) {
        for host in [&self.a, &self.b] {
            let tbf = ["tbf", "rate", rate, "burst", "256kb", "latency", "50ms"];
            host.tc(&[&["qdisc", "add", "dev", host.dev, "root"][..], &tbf].concat());
        }
    }
}

impl Host {
    /// `tc -n NAME ARGS...` in its namespace (`host.dev` names its end), which must succeed.
    #[track_caller]
    pub fn tc(&self, args: &[&str]) {
        let mut full = vec!["-n", &self.netns.name];
        full.extend_from_slice(args);
        must("tc", &full);
    }
}
