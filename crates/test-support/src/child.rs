//! Child processes for the suites, written once: one test of this test binary re-run alone
//! in a child (how a case runs against the fake GPU library, which reads its settings from
//! the environment when it loads and writes its report at exit, or with variables no other
//! test may see), and a wait that kills a child past its deadline, so a hung child fails
//! its test instead of hanging the suite.

use std::io::Read;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The command that re-runs test `name` of this test binary (its path, e.g.
/// `fake_gpu::child_process_entry`) alone, on one thread, its output shown.
pub fn test_command(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    cmd
}

/// What a child did.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Whether the child test passed, and ran: a name that matches no test runs none.
    pub fn passed(&self) -> bool {
        self.status.success() && self.stdout.contains("1 passed")
    }

    /// Fails with the child's output unless it [passed](Ran::passed); `what` names it.
    pub fn assert_passed(&self, what: &str) {
        assert!(
            self.passed(),
            "child {what} failed ({:?}):\n{}\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
    }
}

/// Runs `cmd` to its end with its output captured.
pub fn run(cmd: &mut Command) -> Ran {
    let out = cmd.output().expect("the child starts");
    Ran {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Fails the test unless `child` is still running; `what` says what it should be doing
/// ("waiting on the FIFO"). A child that ended shows its status and stderr, which say why
/// (a library missing on this machine, an option refused) where the status alone would not.
pub fn assert_running(child: &mut Child, what: &str) {
    if let Some(status) = child.try_wait().expect("try_wait on a child") {
        panic!(
            "{what}: it ended first ({status:?}); its stderr:\n{}",
            stderr_of(child)
        );
    }
}

/// What an exited child wrote to its piped stderr ("" when it was not piped). Waits at most
/// two seconds: a grandchild may still hold the pipe open (a shell's command).
pub fn stderr_of(child: &mut Child) -> String {
    let Some(mut pipe) = child.stderr.take() else {
        return String::new();
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(bytes);
    });
    match rx.recv_timeout(Duration::from_secs(2)) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => "(still held open by another process after 2 s)".to_owned(),
    }
}

/// Waits up to `limit` for `child` to exit; past it, kills and reaps it and returns None.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait on a child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
