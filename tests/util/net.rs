//! Helpers between hosts: key files, receiving and sending accels, and network namespaces
//! (made for one test, removed however it ends) joined by a veth pair. Every address here is
//! on loopback or inside a namespace a test made.

use std::net::TcpListener;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};

use super::{ACCEL, Said, Scratch, drain, is_root, require};

/// A new key file named `name` in `dir`, made by `accel --generate key FILE`.
pub(crate) fn make_key(dir: &Scratch, name: &str) -> String {
    let path = dir.path(name);
    let status = Command::new(ACCEL).args(["--generate", "key"]).arg(&path).status().unwrap();
    assert!(status.success(), "accel --generate key FILE");
    path.to_str().unwrap().to_owned()
}

/// A receiving accel, its port, what it writes, and what it says.
pub(crate) struct Receiver {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) said: Said,
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
    /// which). `command` wraps it (`ip netns exec`), when given.
    pub(crate) fn start(engine: &str, host: &str, args: &[&str], wrap: Option<&Netns>) -> Receiver {
        Receiver::at(engine, &format!("{host}:0"), args, wrap)
    }

    /// `accel --engine ENGINE --from FROM ARGS...`, once it says where it listens.
    pub(crate) fn at(engine: &str, from: &str, args: &[&str], wrap: Option<&Netns>) -> Receiver {
        let mut full = vec!["--engine", engine, "--from", from];
        full.extend_from_slice(args);
        let mut child = command(wrap, ACCEL, &full)
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
    pub(crate) fn output(&mut self) -> JoinHandle<Vec<u8>> {
        let stdout = self.child.stdout.take().unwrap();
        thread::spawn(move || drain(stdout))
    }

    pub(crate) fn stdout(&mut self) -> ChildStdout {
        self.child.stdout.take().unwrap()
    }

    /// Waits for it to end: its status and what it said.
    pub(crate) fn end(&mut self) -> (ExitStatus, String) {
        self.said.ended(&mut self.child)
    }
}

/// A sending accel, `accel --engine ENGINE --to TO ARGS...`, its stdin and stderr piped.
pub(crate) fn sender(engine: &str, to: &str, args: &[&str], wrap: Option<&Netns>) -> Child {
    let mut full = vec!["--engine", engine, "--to", to];
    full.extend_from_slice(args);
    command(wrap, ACCEL, &full)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the sender")
}

/// `program args...`, inside `netns` when given.
pub(crate) fn command(netns: Option<&Netns>, program: &str, args: &[&str]) -> Command {
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
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A network namespace made for one test, with loopback up; deleted (with its interfaces)
/// when dropped, however the test ends.
pub(crate) struct Netns {
    pub(crate) name: String,
}

impl Netns {
    /// `None`, having said so, where namespaces cannot be made (not root, no `ip`).
    pub(crate) fn new(tag: &str) -> Option<Netns> {
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
    pub(crate) fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        ip(&full);
    }

    /// Runs `body` on a thread that has joined this namespace, and returns what it returns.
    pub(crate) fn within<T: Send + 'static>(&self, body: impl FnOnce() -> T + Send + 'static) -> T {
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
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces joined by a veth pair: `a` is 10.213.N.1, `b` is 10.213.N.2 (addresses
/// that exist only inside them), limited to `rate` by a `tbf` on each side when given.
pub(crate) fn linked(
    tag: &str,
    subnet: u8,
    rate: Option<&str>,
) -> Option<(Netns, Netns, String, String)> {
    let a = Netns::new(&format!("{tag}a"))?;
    let b = Netns::new(&format!("{tag}b"))?;
    ip(&[
        "link", "add", "va", "netns", &a.name, "type", "veth", "peer", "name", "vb", "netns",
        &b.name,
    ]);
    let (addr_a, addr_b) = (format!("10.213.{subnet}.1"), format!("10.213.{subnet}.2"));
    for (ns, dev, addr) in [(&a, "va", &addr_a), (&b, "vb", &addr_b)] {
        ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
        if let Some(rate) = rate {
            let status = Command::new("tc")
                .args(["-n", &ns.name, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate])
                .args(["burst", "256kb", "latency", "50ms"])
                .status()
                .unwrap();
            assert!(status.success(), "tc tbf");
        }
    }
    Some((a, b, addr_a, addr_b))
}
