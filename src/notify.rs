//! systemd's notify protocol (`Type=notify`): `READY=1` once the databases are synced and the
//! first reconcile is done, `STATUS=` with what is exposed after each reconcile, and the
//! watchdog fed only while the reconcile loop makes progress (a hung apply stops feeding it,
//! so systemd restarts the agent, which withdraws nothing). Without `NOTIFY_SOCKET` (no
//! systemd, a container) every call is a no-op.

use std::sync::Arc;

use sd_notify::NotifyState;
use tracing::{debug, warn};

use crate::telemetry::Telemetry;

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        debug!("sd_notify: {e}");
    }
}

/// The agent is ready: tell systemd, with the first status line.
pub(crate) fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A new status line (`systemctl status` shows it).
pub(crate) fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// The agent is stopping (SIGTERM): nothing is withdrawn.
pub(crate) fn stopping() {
    send(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping; exposed state left in place"),
    ]);
}

/// Feed the watchdog (`WatchdogSec=`) at half its period, while the loop is live.
pub(crate) fn spawn_watchdog(telemetry: Arc<Telemetry>) {
    let Some(period) = sd_notify::watchdog_enabled() else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period / 2);
        let mut starving = false;
        loop {
            tick.tick().await;
            let health = telemetry.health();
            if health.live {
                if starving {
                    warn!("the reconcile loop makes progress again: feeding the watchdog");
                    starving = false;
                }
                send(&[NotifyState::Watchdog]);
            } else if !starving {
                warn!(
                    "not feeding the systemd watchdog: {}",
                    health.reasons.join("; ")
                );
                starving = true;
            }
        }
    });
}
