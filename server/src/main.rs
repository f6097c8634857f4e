//! `ranking-server`: settings → telemetry → build → serve until SIGINT/SIGTERM.

use clap::Parser;
use ranking_server::config::Settings;
use ranking_server::startup::Application;

// glibc malloc serialises the many small per-call allocations of HTTP/2, protobuf and the
// Redis client on its arena locks under load (seen as futex waits in a profile of the read
// path); mimalloc keeps them thread-local. Figures in BENCHMARKS.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<std::process::ExitCode> {
    let settings = Settings::parse();
    if let Some(path) = &settings.check_profile {
        return Ok(check_profile(path));
    }
    serve(settings)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `--check-profile FILE`: the profile's layout, or its problems (exit code 2).
fn check_profile(path: &std::path::Path) -> std::process::ExitCode {
    match ranking_server::config::profile::load(path) {
        Ok(profile) => {
            print!("{}", ranking_server::domain::profile::text::describe(&profile));
            std::process::ExitCode::SUCCESS
        }
        Err(problem) => {
            eprintln!("invalid scoring profile: {problem}");
            std::process::ExitCode::from(2)
        }
    }
}

#[tokio::main]
async fn serve(settings: Settings) -> anyhow::Result<()> {
    let _telemetry = ranking_server::telemetry::init("info");
    let app = Application::build(settings).await?;
    app.run_until_stopped(shutdown_signal()).await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
