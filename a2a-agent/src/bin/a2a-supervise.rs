//! `a2a-supervise PROGRAM [ARGS...]`: runs a `command` handler's program so that it dies with its agent (HDL-5).
//!
//! The agent starts this supervisor in a process group of its own, with `A2A_SUPERVISOR_PARENT` set to the agent's
//! process id. The supervisor starts the program (same group, same standard streams, same environment), waits for
//! it and exits with its status. Every 100 ms it checks that its parent is still the agent; when the agent is gone
//! (killed with `kill -9`, crashed), it kills its whole process group — the program and whatever it started — so
//! that nothing of the execution runs on beside a new agent that takes the work over. (A parent-death signal alone
//! would need code in the child between `fork` and `exec`, which is `unsafe`; and it would stop the program but
//! not what the program started.)

#[cfg(unix)]
use std::process::Command;
use std::process::ExitCode;
#[cfg(unix)]
use std::sync::mpsc;
#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
/// How often the supervisor checks that its agent is alive.
const CHECK_EVERY: Duration = Duration::from_millis(100);

#[cfg(not(unix))]
fn main() -> ExitCode {
    eprintln!("a2a-supervise runs on Unix only");
    ExitCode::from(2)
}

#[cfg(unix)]
fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: a2a-supervise PROGRAM [ARGS...] (started by a2a-server for command handlers)");
        return ExitCode::from(2);
    };
    let expected: Option<i32> = std::env::var("A2A_SUPERVISOR_PARENT").ok().and_then(|v| v.parse().ok());
    let parent_alive = || match expected {
        Some(pid) => rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) == Some(pid),
        // Started by hand: the parent it had at start.
        None => true,
    };
    if !parent_alive() {
        return ExitCode::from(137);
    }
    // The agent runs without transparent huge pages (LIM-7); its handler's program gets the system's setting back.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(false);
    let mut child = match Command::new(&program).args(args).env_remove("A2A_SUPERVISOR_PARENT").spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("a2a-supervise: cannot start `{}`: {e}", program.to_string_lossy());
            return ExitCode::from(127);
        }
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    loop {
        match rx.recv_timeout(CHECK_EVERY) {
            Ok(Ok(status)) => {
                use std::os::unix::process::ExitStatusExt;
                let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1);
                return ExitCode::from(u8::try_from(code).unwrap_or(1));
            }
            Ok(Err(e)) => {
                eprintln!("cannot wait for `{}`: {e}", program.to_string_lossy());
                return ExitCode::from(1);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return ExitCode::from(1),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !parent_alive() {
                    // The agent is gone: the whole group goes, this supervisor with it.
                    let _ = rustix::process::kill_current_process_group(rustix::process::Signal::KILL);
                    return ExitCode::from(137);
                }
            }
        }
    }
}
