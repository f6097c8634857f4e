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
    fn the_console_switch_is_on_or_off() {
        assert_eq!(parse_switch("on"), Ok(true));
        assert_eq!(parse_switch("off"), Ok(false));
        assert!(parse_switch("yes").is_err());
    }
}
