//! Network addresses as people type them, and what they resolve to.
//!
//! `HOST:PORT` (a name, or an IPv4 address), `[IPv6]:PORT`, and for a receiver also `:PORT` or
//! a bare `PORT`: every interface. An IPv6 address must be in brackets, since its colons would
//! otherwise swallow the port. Names are resolved by the system (`getaddrinfo`, so
//! `/etc/hosts` and DNS), once, when accel starts.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// A host (or every interface) and a port, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The host name or address literal (without brackets); `None` for every interface.
    pub host: Option<String>,
    /// The port; 0 lets a receiver's system choose one (accel then says which).
    pub port: u16,
    /// The text as typed, for messages.
    text: String,
}

/// What an address may look like; shown whenever one is rejected.
const FORMAT: &str = "expected HOST:PORT, e.g. backup:9090, 192.0.2.7:9090 or [2001:db8::7]:9090";

impl Address {
    /// Parses `text`; `listening` allows `:PORT` and a bare `PORT` (every interface).
    pub fn parse(text: &str, listening: bool) -> Result<Address, String> {
        let text = text.trim();
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (literal, port) =
                rest.split_once("]:").ok_or_else(|| format!("not an address: {FORMAT}"))?;
            literal
                .parse::<Ipv6Addr>()
                .map_err(|_| format!("{literal} is not an IPv6 address: {FORMAT}"))?;
            (Some(literal.to_owned()), port)
        } else if let Some((host, port)) = text.rsplit_once(':') {
            if host.contains(':') {
                return Err(format!(
                    "an IPv6 address needs brackets, as in [{host}]:{port}: {FORMAT}"
                ));
            }
            ((!host.is_empty()).then(|| host.to_owned()), port)
        } else if text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
            (None, text)
        } else {
            return Err(format!("not an address: {FORMAT}"));
        };
        let port: u16 = port.parse().map_err(|_| format!("{port:?} is not a port: {FORMAT}"))?;
        if host.is_none() && !listening {
            return Err(format!("which host? {FORMAT}"));
        }
        if port == 0 && !listening {
            return Err(format!("port 0 cannot be connected to: {FORMAT}"));
        }
        Ok(Address { host, port, text: text.to_owned() })
    }

    /// The socket addresses to connect to or listen on, in the resolver's order, each once.
    /// Every interface is `[::]` (both families, where the system has IPv6).
    pub fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        let Some(host) = &self.host else {
            return Ok(vec![SocketAddr::from((Ipv6Addr::UNSPECIFIED, self.port))]);
        };
        let mut found: Vec<SocketAddr> = Vec::new();
        for address in (host.as_str(), self.port).to_socket_addrs().map_err(|error| {
            // std says "failed to lookup address information: <gai_strerror>"; keep the cause.
            let text = error.to_string();
            let why = text.rsplit(": ").next().unwrap_or(&text).to_owned();
            io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {host}: {why}"))
        })? {
            if !found.contains(&address) {
                found.push(address);
            }
        }
        Ok(found)
    }

    /// Whether this means every interface (no host given).
    pub fn every_interface(&self) -> bool {
        self.host.is_none()
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// IPv4's every-interface address, for systems without IPv6.
pub const EVERY_IPV4: Ipv4Addr = Ipv4Addr::UNSPECIFIED;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_people_type() {
        let ok = |text, listening| Address::parse(text, listening).unwrap();
        let a = ok("backup:9090", false);
        assert_eq!((a.host.as_deref(), a.port), (Some("backup"), 9090));
        let a = ok("[::1]:9090", false);
        assert_eq!((a.host.as_deref(), a.port), (Some("::1"), 9090));
        let a = ok("127.0.0.1:0", true);
        assert_eq!((a.host.as_deref(), a.port), (Some("127.0.0.1"), 0));
        for every in [":9090", "9090"] {
            let a = ok(every, true);
            assert!(a.every_interface(), "{every}");
            assert_eq!(a.port, 9090);
            assert_eq!(a.to_string(), every);
        }
    }

    #[test]
    fn refusals_teach_the_format() {
        let err = |text, listening| Address::parse(text, listening).unwrap_err();
        assert!(err("::1:9090", false).contains("[::1]:9090"), "{}", err("::1:9090", false));
        assert!(err("backup", false).contains("expected HOST:PORT"));
        assert!(err("backup:http", false).contains("not a port"));
        assert!(err("backup:70000", false).contains("not a port"));
        assert!(err(":9090", false).contains("which host?"));
        assert!(err("9090", false).contains("which host?"));
        assert!(err("backup:0", false).contains("port 0"));
        assert!(err("[nonsense]:1", false).contains("not an IPv6 address"));
    }

    #[test]
    fn literals_resolve_without_asking_anyone() {
        let a = Address::parse("[::1]:9", false).unwrap();
        assert_eq!(a.resolve().unwrap(), vec!["[::1]:9".parse().unwrap()]);
        let a = Address::parse("127.0.0.1:9", false).unwrap();
        assert_eq!(a.resolve().unwrap(), vec!["127.0.0.1:9".parse().unwrap()]);
        let a = Address::parse(":9", true).unwrap();
        assert_eq!(a.resolve().unwrap(), vec!["[::]:9".parse().unwrap()]);
    }
}
