//! An sshd of the tests' own, for `--to ssh://` and `--from ssh://`: its own host key, an
//! authorized key made for the test, a loopback port, a known_hosts of its own, reached
//! through `ssh -F <its config>` as the host `accel-test`. Never the machine's sshd or keys.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::net::{Host, Netns, command, free_port};
use super::{GENEROUS, Scratch, eventually, require};

/// The host name the tests' ssh config gives the tests' sshd.
pub const HOST: &str = "accel-test";

/// A running sshd, killed and waited for when dropped.
pub struct Sshd {
    pub dir: Scratch,
    child: Child,
    pub port: u16,
}

/// Where sshd is, if installed.
fn sshd_program() -> Option<PathBuf> {
    ["/usr/sbin/sshd", "/usr/bin/sshd", "/sbin/sshd"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

impl Sshd {
    /// `None`, having said why, where there is no sshd (or ssh, ssh-keygen) to start.
    pub fn start() -> Option<Sshd> {
        Sshd::start_at(None, "127.0.0.1")
    }

    /// An sshd on `host` (its namespace and address), for a client in another namespace.
    pub fn start_on(host: &Host) -> Option<Sshd> {
        Sshd::start_at(Some(&host.netns), &host.addr)
    }

    fn start_at(netns: Option<&Netns>, address: &str) -> Option<Sshd> {
        let tools = Command::new("ssh-keygen").arg("-?").output().is_ok()
            && Command::new("ssh").arg("-V").output().is_ok();
        let program = sshd_program().filter(|_| tools);
        if !require("sshd, ssh and ssh-keygen (openssh-server, openssh-client)", program.is_some())
        {
            return None;
        }
        let dir = Scratch::new("sshd");
        for key in ["host", "client"] {
            let made = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "accel-test", "-f"])
                .arg(dir.path(key))
                .status()
                .unwrap();
            assert!(made.success(), "ssh-keygen {key}");
        }
        let public = |key: &str| std::fs::read_to_string(dir.path(&format!("{key}.pub"))).unwrap();
        std::fs::write(dir.path("authorized_keys"), public("client")).unwrap();
        std::fs::write(dir.path("known_hosts"), format!("{HOST} {}", public("host"))).unwrap();
        let port = free_port();
        let user =
            String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        std::fs::write(
            dir.path("sshd_config"),
            format!(
                "Port {port}\nListenAddress {address}\nHostKey {host}\nAuthorizedKeysFile {auth}\n\
                 PidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin yes\nLogLevel ERROR\n",
                host = dir.path("host").display(),
                auth = dir.path("authorized_keys").display(),
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path("ssh_config"),
            format!(
                "Host {HOST}\n  HostName {address}\n  Port {port}\n  User {user}\n  \
                 IdentityFile {client}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  \
                 GlobalKnownHostsFile /dev/null\n  HostKeyAlias {HOST}\n  \
                 StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n",
                user = user.trim(),
                client = dir.path("client").display(),
                known = dir.path("known_hosts").display(),
            ),
        )
        .unwrap();
        // sshd's privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let config = dir.path("sshd_config").display().to_string();
        let sshd = program.unwrap().display().to_string();
        let child = command(netns, &sshd, &["-D", "-e", "-f", &config])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        let sshd = Sshd { dir, child, port };
        let listening = || match netns {
            None => TcpStream::connect((address, port)).is_ok(),
            Some(netns) => command(Some(netns), "ss", &["-Hltn", &format!("sport = :{port}")])
                .output()
                .is_ok_and(|out| !out.stdout.is_empty()),
        };
        eventually(GENEROUS, "sshd listening", listening);
        Some(sshd)
    }

    /// `--ssh-command`'s value: ssh with this sshd's client config.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.dir.path("ssh_config").display())
    }

    /// `ssh://accel-test`.
    pub fn url(&self) -> String {
        format!("ssh://{HOST}")
    }

    /// The arguments that reach this sshd with the tests' accel as the remote one:
    /// `--ssh-command 'ssh -F …' --remote-accel ACCEL`, then `extra`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--ssh-command".into(),
            self.ssh_command(),
            "--remote-accel".into(),
            super::ACCEL.into(),
        ]
    }

    /// Kills (SIGKILL) the sshd processes of every session this sshd serves, not the
    /// listener, nor what they started (the remote accel): an outage that ends ssh alone.
    pub fn kill_sessions(&self) -> usize {
        // All found first: a killed parent's children are no longer its.
        let mut found = Vec::new();
        let mut parents = vec![self.child.id()];
        while let Some(parent) = parents.pop() {
            for pid in children(parent) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.starts_with("sshd") {
                    parents.push(pid);
                    found.push(pid);
                }
            }
        }
        for &pid in &found {
            // SAFETY: kills a process of this test's own sshd.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        found.len()
    }
}

/// The pids whose parent is `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The fields after the command's closing parenthesis: state, ppid, ...
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        if after.split_whitespace().nth(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(parent)
        {
            found.push(pid);
        }
    }
    found
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a process is given to go after it was told to.
pub const GONE_WITHIN: Duration = Duration::from_secs(30);
