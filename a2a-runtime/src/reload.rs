//! What the agent and the gateway share to reload their configuration file in place (OPS-4) and to reopen their log
//! files (OPS-5): the settings that only a restart changes, and the operator's signals.
//!
//! A reload reads the file again, builds everything the new file describes beside what is running, and swaps it in
//! whole; an invalid file is refused (`reload refused: …`) and the old configuration keeps serving. A setting listed
//! as restart-only keeps its running value: a change to it is logged (`… needs a restart`) and ignored.

/// The keys (dotted TOML paths; a section name covers the whole section) whose value differs between the two
/// configuration texts. A text that does not parse as TOML differs nowhere (it is refused elsewhere).
pub fn changed_keys<'k>(old: &str, new: &str, keys: &[&'k str]) -> Vec<&'k str> {
    let (Ok(old), Ok(new)) = (old.parse::<toml::Table>(), new.parse::<toml::Table>()) else { return Vec::new() };
    keys.iter().copied().filter(|k| lookup(&old, k) != lookup(&new, k)).collect()
}

/// `new` with the running (`old`) value of every key in `keys`, as TOML text: what a reload builds from when a
/// restart-only setting changed (the change is ignored, OPS-4).
pub fn keep_running(old: &str, new: &str, keys: &[&str]) -> Result<String, String> {
    let old = old.parse::<toml::Table>().map_err(|e| e.to_string())?;
    let mut new = new.parse::<toml::Table>().map_err(|e| e.to_string())?;
    for k in keys {
        set(&mut new, k, lookup(&old, k).cloned());
    }
    toml::to_string(&new).map_err(|e| e.to_string())
}

fn lookup<'a>(t: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.');
    let mut v = t.get(parts.next()?)?;
    for p in parts {
        v = v.as_table()?.get(p)?;
    }
    Some(v)
}

fn set(t: &mut toml::Table, key: &str, value: Option<toml::Value>) {
    let (parent, last) = match key.rsplit_once('.') {
        Some((p, l)) => (Some(p), l),
        None => (None, key),
    };
    let mut table = t;
    if let Some(p) = parent {
        for part in p.split('.') {
            if value.is_none() && !table.contains_key(part) {
                return;
            }
            let entry = table.entry(part.to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(next) = entry.as_table_mut() else { return };
            table = next;
        }
    }
    match value {
        Some(v) => {
            table.insert(last.to_owned(), v);
        }
        None => {
            table.remove(last);
        }
    }
}

/// What the operator asked for by signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGHUP`: reload the configuration (OPS-4) and reopen log files (OPS-5).
    Reload,
    /// `SIGUSR1`: reopen log files only (OPS-5), as nginx does.
    Reopen,
}

/// The operator's signals, `SIGHUP` and `SIGUSR1`. Made before the process says it serves: from then on these signals
/// no longer end the process (their default action), they are delivered here.
pub struct Signals {
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    usr1: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts listening (inside a Tokio runtime). A signal that cannot be listened to is logged.
    pub fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, signal = name, "cannot listen to the signal");
                    None
                }
            };
            Signals {
                hup: listen(SignalKind::hangup(), "SIGHUP"),
                usr1: listen(SignalKind::user_defined1(), "SIGUSR1"),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal (never completes where there are none).
    pub async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        if s.recv().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = recv(&mut self.hup) => Signal::Reload,
                () = recv(&mut self.usr1) => Signal::Reopen,
            }
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

/// For a process without a configuration file to re-read (`--demo`, `--sessions-demo`): `SIGHUP` and `SIGUSR1`
/// are logged, never the end of it (OPS-4, OPS-5).
pub fn log_and_carry_on(mut signals: Signals, who: &'static str) {
    tokio::spawn(async move {
        loop {
            match signals.next().await {
                Signal::Reload => {
                    tracing::info!("SIGHUP: {who} has no configuration file to re-read; nothing reloaded (OPS-4)")
                }
                Signal::Reopen => tracing::info!("SIGUSR1: {who} writes no log file; nothing to reopen (OPS-5)"),
            }
        }
    });
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::{changed_keys, keep_running};

    #[test]
    fn changed_and_kept_keys() {
        let old = "[a]\nx = 1\ny = 2\n[s]\nk = \"v\"\n";
        let new = "[a]\nx = 1\ny = 3\n[t]\nz = true\n";
        assert_eq!(changed_keys(old, new, &["a.x", "a.y", "s", "t.z", "u"]), vec!["a.y", "s", "t.z"]);
        let kept: toml::Table = keep_running(old, new, &["a.y", "s", "t.z"]).expect("kept").parse().expect("toml");
        let want: toml::Table = "[a]\nx = 1\ny = 2\n[s]\nk = \"v\"\n[t]\n".parse().expect("toml");
        assert_eq!(kept, want);
    }
}
