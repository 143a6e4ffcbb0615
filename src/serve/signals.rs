//! SIGTERM and Ctrl-C, installed before anything else starts, so that a stop
//! is honoured at any moment: during start-up, while serving, while draining.

use crate::cli_error::Result;

/// The stop signals, registered when installed.
pub struct Stop {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Stop {
    pub fn install() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let term = signal(SignalKind::terminate())
                .map_err(|e| format!("cannot install the SIGTERM handler: {e}"))?;
            let int = signal(SignalKind::interrupt())
                .map_err(|e| format!("cannot install the SIGINT handler: {e}"))?;
            Ok(Self { term, int })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves at the next SIGTERM or SIGINT.
    pub async fn wait(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {},
            _ = self.int.recv() => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
