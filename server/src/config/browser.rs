//! What browsers may reach on the API port: which other origins may call it over gRPC-Web,
//! and whether the console is served.

use clap::Args;

/// Cross-origin callers and the console.
#[derive(Debug, Clone, Args)]
pub struct BrowserSettings {
    /// Origins (scheme://host[:port]) allowed to call the API from a browser over gRPC-Web,
    /// comma-separated; empty: only pages served by this server (the console) may call it.
    #[arg(
        long,
        env = "RANKING_CORS_ORIGINS",
        value_name = "RANKING_CORS_ORIGINS",
        default_value = "",
        value_parser = parse_origins
    )]
    pub cors_origins: Origins,

    /// `on` serves the web console at /console/ on the API port; `off` serves none.
    #[arg(long, env = "RANKING_CONSOLE", value_name = "RANKING_CONSOLE", default_value = "on", value_parser = parse_switch)]
    pub console: bool,

    /// Host names (`host[:port]`, comma-separated; without a port: any port) the API port
    /// answers HTTP/1.1 and browser requests for; others get 421. Empty: the listen address
    /// and the loopback names.
    #[arg(
        long,
        env = "RANKING_ALLOWED_HOSTS",
        value_name = "RANKING_ALLOWED_HOSTS",
        default_value = "",
        value_parser = parse_hosts
    )]
    pub allowed_hosts: AllowedHosts,
}

impl BrowserSettings {
    /// The hosts allowed on a server listening on `listen`: the list given, else the listen
    /// address (unless it is a wildcard) and the loopback names.
    pub fn hosts_for(&self, listen: std::net::SocketAddr) -> AllowedHosts {
        if !self.allowed_hosts.0.is_empty() {
            return self.allowed_hosts.clone();
        }
        let mut hosts: Vec<(String, Option<u16>)> =
            ["localhost", "127.0.0.1", "::1"].iter().map(|h| (h.to_string(), None)).collect();
        if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
            hosts.push((listen.ip().to_string(), None));
        }
        AllowedHosts(hosts)
    }
}

/// Host names a browser or HTTP/1.1 request may name, each with the port it must name
/// (`None`: any), lowercase, IPv6 addresses without brackets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts(pub Vec<(String, Option<u16>)>);

impl AllowedHosts {
    /// Whether a `Host` value (`host[:port]`, `[v6]:port`) names an allowed host.
    pub fn admits(&self, value: &str) -> bool {
        let Some((host, port)) = split_host(value) else { return false };
        self.0.iter().any(|(allowed, p)| allowed.eq_ignore_ascii_case(host) && p.is_none_or(|p| Some(p) == port))
    }
}

/// `host[:port]` or `[v6][:port]` split; `None` when the port is not a number.
fn split_host(value: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = value.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match value.rsplit_once(':') {
        // A bare IPv6 address has colons of its own.
        Some((host, port)) if !host.contains(':') => Some((host, Some(port.parse().ok()?))),
        _ => Some((value, None)),
    }
}

fn parse_hosts(value: &str) -> Result<AllowedHosts, String> {
    let mut hosts = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let Some((host, port)) = split_host(entry) else {
            return Err(format!("{entry:?} is not host[:port]"));
        };
        if host.is_empty() || host.contains(['/', '*', '@', ' ', '[', ']']) {
            return Err(format!("{entry:?} is not host[:port] (no scheme, path or wildcard)"));
        }
        hosts.push((host.to_ascii_lowercase(), port));
    }
    Ok(AllowedHosts(hosts))
}

/// Origins allowed to make cross-origin calls, each as a browser sends it in `Origin`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins(pub Vec<String>);

/// A browser's `Origin` is `scheme://host[:port]` exactly: no path, no trailing slash, no
/// wildcard. A list entry in any other form would never match and silently allow nothing.
fn parse_origins(value: &str) -> Result<Origins, String> {
    let mut origins = Vec::new();
    for origin in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let Some((scheme, rest)) = origin.split_once("://") else {
            return Err(format!("{origin:?} is not an origin: expected scheme://host[:port]"));
        };
        if !matches!(scheme, "http" | "https") {
            return Err(format!("{origin:?}: the scheme must be http or https"));
        }
        if rest.is_empty() || rest.contains(['/', '*', '?', '#', '@', ' ']) {
            return Err(format!(
                "{origin:?} is not an origin: expected scheme://host[:port], without a path or wildcard"
            ));
        }
        if tonic::codegen::http::HeaderValue::from_str(origin).is_err() {
            return Err(format!("{origin:?} is not a valid header value"));
        }
        origins.push(origin.to_string());
    }
    Ok(Origins(origins))
}

fn parse_switch(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?}: expected on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(parse_origins("").expect("empty"), Origins::default());
        assert_eq!(
            parse_origins(" https://shop.example , http://127.0.0.1:5173").expect("two"),
            Origins(vec!["https://shop.example".into(), "http://127.0.0.1:5173".into()])
        );
        for bad in ["shop.example", "https://shop.example/", "https://*.example", "ftp://x", "https://"] {
            assert!(parse_origins(bad).is_err(), "{bad} refused");
        }
    }

    #[test]
    fn hosts_name_a_host_and_maybe_its_port() {
        let hosts = parse_hosts("Shop.Example, 10.0.0.7:50051, [fd00::1]:443").expect("three");
        assert!(hosts.admits("shop.example") && hosts.admits("SHOP.example:8080"), "any port without one");
        assert!(hosts.admits("10.0.0.7:50051") && !hosts.admits("10.0.0.7:50052") && !hosts.admits("10.0.0.7"));
        assert!(hosts.admits("[fd00::1]:443") && !hosts.admits("[fd00::1]"));
        assert!(!hosts.admits("rebind.attacker.test:50051") && !hosts.admits("shop.example:x"));
        for bad in ["https://shop.example", "*.example", "shop.example:port"] {
            assert!(parse_hosts(bad).is_err(), "{bad} refused");
        }
        let settings =
            BrowserSettings { cors_origins: Origins::default(), console: true, allowed_hosts: AllowedHosts::default() };
        let loopback = settings.hosts_for("127.0.0.1:50051".parse().expect("addr"));
        assert!(loopback.admits("localhost:50051") && loopback.admits("127.0.0.1:1") && loopback.admits("[::1]:80"));
        assert!(!loopback.admits("rebind.attacker.test:50051"));
        let bound = settings.hosts_for("10.1.2.3:50051".parse().expect("addr"));
        assert!(bound.admits("10.1.2.3:50051"));
    }

    #[test]
    fn the_console_switch_is_on_or_off() {
        assert_eq!(parse_switch("on"), Ok(true));
        assert_eq!(parse_switch("off"), Ok(false));
        assert!(parse_switch("yes").is_err());
    }
}
