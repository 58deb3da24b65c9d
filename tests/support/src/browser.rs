//! Headless Chromium for the browser tests (the consoles', the CORS page's): where it is, the flags every test
//! starts it with, and where screenshots go.

use std::path::{Path, PathBuf};

/// The Chromium to drive: `$CHROMIUM`, else Debian's `/usr/bin/chromium` (`.ci/run` installs it).
pub fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// The flags of a headless run with its own profile in `profile`: no sandbox (CI runs as root), no GPU, no QUIC, no
/// first-run or background traffic, a fixed 1400x1000 window without scroll bars (screenshots of equal size).
pub fn headless_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1400,1000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// Where the console tests write their screenshots: `$A2A_CONSOLE_SCREENSHOTS`, else `console-screenshots` in the
/// target directory (the parent of the test's `CARGO_TARGET_TMPDIR`), which `.ci/run` publishes as CI artifacts.
pub fn screenshots(target_tmpdir: &Path) -> PathBuf {
    std::env::var_os("A2A_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_tmpdir.parent().expect("target dir").join("console-screenshots"))
}
