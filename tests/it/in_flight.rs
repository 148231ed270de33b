//! Files in flight keep cp's decisions where a copy's outcome decides the next operand.

use crate::support::{aiscp_command, paused_at, program, BACKENDS};
use std::fs;
use std::process::Command;
use std::thread;
use std::time::Duration;

/// A copy that fails at once, finished while its operand is still being recorded, is not
/// "just created": a later operand with the same DEST name is copied (and fails on its own),
/// as cp does. On the bounce route (the library route copies /proc files in turn) aiscp pauses right after queueing the first file, long enough for the worker
/// to fail reading /proc/self/mem; before the fix the failure was taken in before DEST was
/// remembered, so DEST stayed "just created" and the second operand was refused.
#[test]
fn a_file_that_fails_at_once_is_not_just_created() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("t")).unwrap();
        let args = ["/proc/self/mem", "/proc/thread-self/mem", "t"];
        let mut cmd = aiscp_command();
        cmd.current_dir(d).args(args);
        backend.apply(&mut cmd, &d.join("report"));
        // The library route streams a /proc file in turn; the bounce route queues it.
        cmd.env("AISCP_ROUTE", "bounce");
        let out = paused_at(cmd, "queued", d, || {
            thread::sleep(Duration::from_millis(300))
        });
        let cp = Command::new("cp")
            .current_dir(d)
            .args(args)
            .output()
            .unwrap();
        let ours =
            String::from_utf8_lossy(&out.stderr).replace(&*program().to_string_lossy(), "cp");
        let theirs = String::from_utf8_lossy(&cp.stderr);
        assert!(!ours.contains("panicked"), "{backend:?}: {ours}");
        assert_eq!(ours, theirs, "{backend:?}: stderr differs from GNU cp's");
        assert_eq!(out.status.code(), cp.status.code(), "{backend:?}");
        assert_eq!(out.status.code(), Some(1), "{backend:?}");
        backend.assert_report_clean(&d.join("report"));
    }
}

/// A malformed AISCP_IN_FLIGHT is refused before anything is copied, with the value named,
/// exit 1, as a bad --backend or AISCP_ROUTE is; a well-formed one is taken.
#[test]
fn a_bad_in_flight_setting_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), b"hi\n").unwrap();
    for value in ["-1", "abc", "99999999999999999999999", ",,,", "", "1,2,3,4"] {
        let out = aiscp_command()
            .current_dir(dir.path())
            .env("AISCP_BACKEND", "host")
            .env("AISCP_IN_FLIGHT", value)
            .args(["a", "b"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{value:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "{}: invalid value '{value}' for AISCP_IN_FLIGHT: expected \
                 FILES[,BYTES[,DIRECT_FROM]], whole numbers\n",
                program().display()
            ),
            "{value:?}"
        );
        assert!(!dir.path().join("b").exists(), "{value:?}: copied anyway");
    }
    for value in ["0", "4,1048576", "4, 1048576, 65536"] {
        let out = aiscp_command()
            .current_dir(dir.path())
            .env("AISCP_BACKEND", "host")
            .env("AISCP_IN_FLIGHT", value)
            .args(["a", "b"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{value:?}: {out:?}");
    }
}
