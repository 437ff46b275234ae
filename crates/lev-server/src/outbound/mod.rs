//! Where lev's outbound calls may go: webhook deliveries and Slack's Web API
//! (`api_url`), the URLs an admin or a config file gives.
//!
//! A URL is read as the WHATWG URL standard reads it (the `url` crate, the
//! parser reqwest itself uses), so `127.1`, `0x7f000001`, `2130706433`,
//! `0177.0.0.1`, `%31%32%37.0.0.1` and full-width digits are the address
//! they spell, `127.0.0.1`; an IPv6 address that carries an IPv4 one
//! (`::ffff:127.0.0.1`, `::127.0.0.1`, NAT64 `64:ff9b::7f00:1`, 6to4,
//! Teredo) is judged by both.
//!
//! Refused, always: lev's own listener (this host's addresses, loopback or
//! unspecified, at lev's port). Refused unless `lev serve --webhook-allow
//! CIDR` names them: loopback, unspecified (`0.0.0.0`, `::`: they reach this
//! host), this host's own addresses, link-local (`169.254.0.0/16`,
//! `fe80::/10`), cloud metadata (`169.254.169.254`, `fd00:ec2::254`,
//! `100.100.100.200`, `168.63.129.16`, and the names `metadata.google.internal`
//! and `metadata.goog`), multicast, broadcast and reserved ranges, and the
//! names `localhost` and `*.localhost`. Private ranges (`10/8`, `172.16/12`,
//! `192.168/16`, `fc00::/7`, `100.64/10`) are allowed: webhooks to services
//! on an internal network are what a deployment needs.
//!
//! Checked three times: when a webhook is added (a 422 naming the problem),
//! before each attempt (an endpoint stored earlier, or added on a replica
//! with other settings), and when a name is resolved for a connection
//! ([`GuardedResolver`], the client's only resolver): a name whose
//! addresses are refused is never connected to, so DNS that answers
//! differently between the check and the connection (rebinding) gains
//! nothing. Redirects are not followed and no proxy is used.

pub mod client;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

/// Longest URL accepted.
pub const MAX_URL: usize = 2048;

/// An address range, `ADDR/PREFIX` (a bare address is the one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `10.0.0.0/8`, `127.0.0.1`, `fd00::/8`.
    ///
    /// # Errors
    /// A message naming what was found.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let expected =
            || format!("expected an address range such as 10.0.0.0/8 or fd00::/8, found {t:?}");
        let (addr, prefix) = match t.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (t, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| expected())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().map_err(|_| expected())?
            }
            Some(_) => return Err(expected()),
            None => max,
        };
        if prefix > max {
            return Err(format!("{t:?}: the prefix is at most {max}"));
        }
        Ok(Self { net, prefix })
    }

    /// Whether `ip` is in the range (an IPv4 range holds no IPv6 address:
    /// an IPv6 address carrying an IPv4 one is tried as that one too).
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// Where outbound calls may go: what the admin allowed beyond the default,
/// and lev's own listener.
#[derive(Debug, Clone, Default)]
pub struct OutboundPolicy {
    /// `--webhook-allow`: ranges otherwise refused that may be reached.
    pub allow: Vec<Cidr>,
    /// The server's own listener, never reached.
    pub own: Option<SocketAddr>,
}

/// The IPv4 address an IPv6 address carries, where it means that address:
/// IPv4-mapped, IPv4-compatible, NAT64 (`64:ff9b::/96` and the local-use
/// `64:ff9b:1::/48`), 6to4 (`2002::/16`) and Teredo's client (`2001::/32`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let from = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    match s {
        // ::a.b.c.d, but not :: and ::1 themselves.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(from(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] | [0x64, 0xff9b, 1, _, _, _, hi, lo] => {
            Some(from(hi, lo))
        }
        [0x2002, hi, lo, ..] => Some(from(hi, lo)),
        [0x2001, 0, _, _, _, _, hi, lo] => Some(from(!hi, !lo)),
        _ => None,
    }
}

/// Why `ip` is refused unless allowed, when it is.
fn refused_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            Some(match (a, b, c, d) {
                (0, ..) => "an unspecified address (it reaches this host)",
                (127, ..) => "a loopback address",
                (169, 254, 169, 254)
                | (169, 254, 170, 2)
                | (100, 100, 100, 200)
                | (168, 63, 129, 16) => "a cloud metadata address",
                (169, 254, ..) => "a link-local address",
                (224..=239, ..) => "a multicast address",
                (255, 255, 255, 255) => "the broadcast address",
                (240..=255, ..) => "a reserved address",
                _ => return None,
            })
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            Some(if v6.is_unspecified() {
                "an unspecified address (it reaches this host)"
            } else if v6.is_loopback() {
                "a loopback address"
            } else if s == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] {
                "a cloud metadata address"
            } else if s[0] & 0xffc0 == 0xfe80 {
                "a link-local address"
            } else if s[0] & 0xff00 == 0xff00 {
                "a multicast address"
            } else {
                return None;
            })
        }
    }
}

/// Whether `ip` is one of this host's own addresses: the system lets a
/// socket bind to it.
fn is_this_host(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// Names that mean an address refused by default: what they mean.
fn refused_name(name: &str) -> Option<(&'static str, IpAddr)> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        Some((
            "a name of this host's loopback",
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        ))
    } else if matches!(
        name.as_str(),
        "metadata.google.internal"
            | "metadata.goog"
            | "instance-data"
            | "instance-data.ec2.internal"
    ) {
        Some((
            "a cloud metadata name",
            IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
        ))
    } else {
        None
    }
}

fn single(ip: IpAddr) -> Cidr {
    Cidr {
        net: ip,
        prefix: if ip.is_ipv4() { 32 } else { 128 },
    }
}

impl OutboundPolicy {
    fn allowed(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|c| c.contains(ip))
    }

    /// Whether `ip` (at `port`, when known) may be connected to; the
    /// message says why not and what would allow it.
    ///
    /// # Errors
    /// A message naming the address and what it is.
    pub fn check_ip(&self, ip: IpAddr, port: Option<u16>) -> Result<(), String> {
        let inner = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let all = std::iter::once(ip).chain(inner);
        let shown = match inner {
            Some(v4) => format!("{ip} (IPv4 {v4})"),
            None => ip.to_string(),
        };
        if let (Some(own), Some(port)) = (self.own, port)
            && port == own.port()
            && all.clone().any(|a| a == own.ip() || is_this_host(a))
        {
            return Err(format!(
                "{shown} port {port}, this lev server's own listener: a webhook must go \
                 elsewhere"
            ));
        }
        if all.clone().any(|a| self.allowed(a)) {
            return Ok(());
        }
        let class = all
            .clone()
            .find_map(|a| refused_class(a).map(|c| (a, c)))
            .or_else(|| {
                all.clone()
                    .find(|a| is_this_host(*a))
                    .map(|a| (a, "an address of this host"))
            });
        match class {
            Some((a, class)) => Err(format!(
                "{shown}, {class}: lev sends nothing there unless lev serve --webhook-allow \
                 {} allows it",
                single(a)
            )),
            None => Ok(()),
        }
    }

    /// Whether a host name may be resolved at all (`localhost`, metadata
    /// names); its addresses are checked when it is resolved.
    ///
    /// # Errors
    /// A message naming the name and what it means.
    pub fn check_name(&self, name: &str, port: Option<u16>) -> Result<(), String> {
        let Some((what, means)) = refused_name(name) else {
            return Ok(());
        };
        if let (Some(own), Some(port)) = (self.own, port)
            && port == own.port()
            && means.is_loopback()
        {
            return Err(format!(
                "{name} port {port}, this lev server's own listener: a webhook must go \
                 elsewhere"
            ));
        }
        if self.allowed(means) {
            return Ok(());
        }
        Err(format!(
            "{name}, {what}: lev sends nothing there unless lev serve --webhook-allow {} \
             allows it",
            single(means)
        ))
    }

    /// Check a URL as given: http(s), a host, not too long, no credentials,
    /// no blanks or controls, and a host that may be reached (an address as
    /// the URL standard reads it; a name by [`Self::check_name`], its
    /// addresses when it is resolved).
    ///
    /// # Errors
    /// A message starting `url: ` naming what is wrong.
    pub fn check_url(&self, text: &str) -> Result<Url, String> {
        if text.len() > MAX_URL {
            return Err(format!(
                "url: at most {MAX_URL} bytes, found {}",
                text.len()
            ));
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err("url: holds spaces or control characters".into());
        }
        let shown = || text.chars().take(80).collect::<String>();
        let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(format!(
                "url: expected an http:// or https:// URL, found {:?}",
                shown()
            ));
        }
        let url = Url::parse(text).map_err(|e| {
            format!(
                "url: expected an http:// or https:// URL with a host, found {:?}: {e}",
                shown()
            )
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err("url: user names and passwords in the URL are not accepted".into());
        }
        let port = url.port_or_known_default();
        let checked = match url.host() {
            Some(Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip), port),
            Some(Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip), port),
            Some(Host::Domain(name)) if !name.is_empty() => self.check_name(name, port),
            _ => return Err("url: the host is missing".into()),
        };
        checked.map_err(|e| {
            // The host as written (the address it spells may read otherwise).
            let written = text
                .split_once("://")
                .map_or(text, |(_, rest)| rest)
                .split(['/', '\\', '?', '#'])
                .next()
                .unwrap_or_default();
            format!("url: {written} reaches {e}")
        })?;
        Ok(url)
    }

    /// [`Self::check_url`], then, for a name at lev's own port, its
    /// addresses now (a name for this host at lev's port is lev itself;
    /// the resolver cannot see the port, and refuses this host's addresses
    /// only unless they are allowed).
    ///
    /// # Errors
    /// A message naming what is wrong.
    pub async fn check_before_send(&self, text: &str) -> Result<(), String> {
        let url = self.check_url(text)?;
        let (Some(own), Some(Host::Domain(name)), Some(port)) =
            (self.own, url.host(), url.port_or_known_default())
        else {
            return Ok(());
        };
        if port != own.port() {
            return Ok(());
        }
        let addrs = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::net::lookup_host((name, port)),
        )
        .await
        .map_err(|_| format!("cannot resolve {name}: no answer within 5 s"))?
        .map_err(|e| format!("cannot resolve {name}: {e}"))?;
        for addr in addrs {
            self.check_ip(addr.ip(), Some(port))
                .map_err(|e| format!("url: {name} resolves to {e}"))?;
        }
        Ok(())
    }
}

/// The outbound client's resolver: the system's, with every address
/// [`OutboundPolicy::check_ip`] refuses left out; a name left with none
/// fails to connect, saying why.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<OutboundPolicy>,
}

impl GuardedResolver {
    /// A resolver for `policy`.
    #[must_use]
    pub fn new(policy: Arc<OutboundPolicy>) -> Self {
        Self { policy }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let name = name.as_str().to_owned();
        Box::pin(async move {
            policy
                .check_name(&name, None)
                .map_err(|e| format!("refused: {e}"))?;
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let mut kept = Vec::with_capacity(found.len());
            let mut refusal = None;
            for addr in found {
                match policy.check_ip(addr.ip(), None) {
                    Ok(()) => kept.push(addr),
                    Err(e) => {
                        refusal.get_or_insert(e);
                    }
                }
            }
            if kept.is_empty() {
                let why = refusal.unwrap_or_else(|| "no address".to_owned());
                return Err(format!("refused: {name} resolves to {why}").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(kept.into_iter());
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> OutboundPolicy {
        OutboundPolicy {
            allow: Vec::new(),
            own: Some("127.0.0.1:7420".parse().unwrap()),
        }
    }

    #[test]
    fn every_spelling_of_loopback_is_loopback() {
        let p = policy();
        for url in [
            "http://127.0.0.1:9000/",
            "http://127.1:9000/",
            "http://0x7f000001:9000/",
            "http://2130706433:9000/",
            "http://0177.0.0.1:9000/",
            "http://0x7f.1:9000/",
            "http://127.0.0.1.:9000/",
            "http://%31%32%37.0.0.1:9000/",
            "http://%31%32%37%2e%30%2e%30%2e%31:9000/",
            "http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}:9000/",
            "http://[::1]:9000/",
            "http://[::ffff:127.0.0.1]:9000/",
            "http://[::ffff:7f00:1]:9000/",
            "http://[0:0:0:0:0:ffff:127.0.0.1]:9000/",
            "http://[::127.0.0.1]:9000/",
            "http://[64:ff9b::127.0.0.1]:9000/",
            "http://[64:ff9b:1::7f00:1]:9000/",
            "http://[2002:7f00:1::]:9000/",
            "http://localhost:9000/",
            "http://LOCALHOST.:9000/",
            "http://a.b.localhost:9000/",
            "HTTP://127.0.0.1:9000/",
        ] {
            let e = p.check_url(url).unwrap_err();
            assert!(e.contains("loopback"), "{url}: {e}");
            assert!(e.contains("--webhook-allow"), "{url}: {e}");
        }
    }

    #[test]
    fn this_host_metadata_link_local_and_unspecified_are_refused() {
        let p = policy();
        for (url, what) in [
            ("http://0.0.0.0:9000/", "unspecified"),
            ("http://0:9000/", "unspecified"),
            ("http://[::]:9000/", "unspecified"),
            ("http://[::ffff:0.0.0.0]:9000/", "unspecified"),
            ("http://169.254.169.254/latest/meta-data/", "metadata"),
            ("http://[::ffff:169.254.169.254]/", "metadata"),
            ("http://0xa9fea9fe/", "metadata"),
            ("http://[fd00:ec2::254]/", "metadata"),
            ("http://100.100.100.200/", "metadata"),
            ("http://metadata.google.internal/", "metadata"),
            ("http://METADATA.GOOGLE.INTERNAL./", "metadata"),
            ("http://169.254.1.2/", "link-local"),
            ("http://[fe80::1]/", "link-local"),
            ("http://224.0.0.1/", "multicast"),
            ("http://255.255.255.255/", "broadcast"),
        ] {
            let e = p.check_url(url).unwrap_err();
            assert!(e.contains(what), "{url}: {e}");
        }
    }

    #[test]
    fn the_own_listener_is_refused_even_when_loopback_is_allowed() {
        let mut p = policy();
        p.allow = vec![
            Cidr::parse("127.0.0.0/8").unwrap(),
            Cidr::parse("::1").unwrap(),
        ];
        for url in [
            "http://127.0.0.1:7420/",
            "http://127.1:7420/",
            "http://[::ffff:127.0.0.1]:7420/",
            "http://localhost:7420/",
            "http://0.0.0.0:7420/",
        ] {
            let e = p.check_url(url).unwrap_err();
            assert!(e.contains("own listener"), "{url}: {e}");
        }
        // Loopback elsewhere is allowed now.
        for url in [
            "http://127.0.0.1:9000/",
            "http://localhost:9000/",
            "http://[::1]:9000/",
        ] {
            p.check_url(url).unwrap();
        }
    }

    #[test]
    fn private_and_public_addresses_and_names_are_allowed() {
        let p = policy();
        for url in [
            "https://example.com/hook",
            "http://10.1.2.3:8080/",
            "http://192.168.1.10/",
            "http://172.16.0.1/",
            "http://[fd12::1]/",
            "http://100.64.0.1/",
            "http://hooks.internal:7420/",
        ] {
            p.check_url(url).unwrap();
        }
        for (url, what) in [
            ("ftp://example.com/", "http:// or https://"),
            ("example.com/hook", "http:// or https://"),
            ("https://user:pw@example.com/", "passwords"),
            ("http://", "http://"),
            ("http://ex ample.com/", "spaces"),
        ] {
            let e = p.check_url(url).unwrap_err();
            assert!(e.contains(what), "{url}: {e}");
        }
    }

    #[test]
    fn cidrs_parse_and_contain() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.9.8.7".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(!c.contains("::ffff:10.0.0.1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        assert!(
            Cidr::parse("::/0")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert_eq!(
            Cidr::parse("127.0.0.1").unwrap().to_string(),
            "127.0.0.1/32"
        );
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "x/8",
            "10.0.0.0/+8",
            "10/8",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
        // Allowed by the range it carries, as the IPv4 address inside.
        let p = OutboundPolicy {
            allow: vec![Cidr::parse("127.0.0.0/8").unwrap()],
            own: None,
        };
        p.check_url("http://[::ffff:127.0.0.1]:9000/").unwrap();
    }

    /// Names are judged by what they resolve to when connecting: a name of
    /// this host (here its loopback) is left with no address.
    #[tokio::test]
    async fn the_resolver_leaves_out_refused_addresses() {
        use reqwest::dns::Resolve as _;
        let r = GuardedResolver::new(Arc::new(policy()));
        let e = match r.resolve("localhost".parse().unwrap()).await {
            Ok(_) => panic!("localhost resolved"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("refused") && e.contains("loopback"), "{e}");
        let allowed = GuardedResolver::new(Arc::new(OutboundPolicy {
            allow: vec![
                Cidr::parse("127.0.0.0/8").unwrap(),
                Cidr::parse("::1").unwrap(),
            ],
            own: None,
        }));
        let addrs: Vec<SocketAddr> = match allowed.resolve("localhost".parse().unwrap()).await {
            Ok(a) => a.collect(),
            Err(e) => panic!("{e}"),
        };
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
