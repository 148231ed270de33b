//! One way for a test to skip: [`skip`] when a prerequisite is missing (root, mount, a tool,
//! a library, a TMPDIR that makes holes or takes xattrs), [`not_here`] when the test has no
//! meaning on this machine (a GPU driver present, SELinux on).
//!
//! A skip must never look like a pass. In CI (`CI=true`) a missing prerequisite fails the
//! test: CI installs every one (.ci/run), so a missing one is a broken CI machine, not a
//! reason to test less. Outside CI each skip prints one `skipped: TEST: REASON` line (past
//! libtest's capture, so a passing test shows it too) and appends
//! `TEST<TAB>REASON` to the skip log ([`log_path`]), which `scripts/skip-summary.sh` counts
//! by reason at the end of a run.

use std::io::Write;
use std::path::PathBuf;

/// Where skips are logged: `AISCP_SKIP_LOG`, else `skipped.tsv` in the target directory
/// of the running test binary (`target/<profile>/deps/<binary>` -> `target/skipped.tsv`).
pub fn log_path() -> PathBuf {
    if let Some(path) = std::env::var_os("AISCP_SKIP_LOG") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current test binary");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the binary lives in target/<profile>/deps");
    target.join("skipped.tsv")
}

/// Whether this run is CI's, where a missing prerequisite is an error.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Records that the calling test skips because `reason` (a short, stable phrase that
/// groups in the summary: "no strace", "not root"); `detail` says more, on stderr only.
/// Panics in CI. The caller returns right after.
pub fn skip(reason: &str, detail: &str) {
    assert!(
        !in_ci(),
        "prerequisite missing in CI: {reason}{}{detail} (.ci/run installs it; a skip here \
         would pass a test that did not run)",
        if detail.is_empty() { "" } else { ": " }
    );
    record(reason, detail);
}

/// Records that the calling test does not apply on this machine (in CI too): not a
/// missing prerequisite but a machine where the behaviour tested cannot happen.
pub fn not_here(reason: &str) {
    record(reason, "");
}

fn record(reason: &str, detail: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_owned();
    // Straight to the process's stderr: libtest captures eprintln! of a passing test,
    // which would make the skip silent.
    let said = if detail.is_empty() {
        format!("skipped: {test}: {reason}\n")
    } else {
        format!("skipped: {test}: {reason}: {detail}\n")
    };
    let _ = std::io::stderr().write_all(said.as_bytes());
    let line = format!("{test}\t{}\n", reason.replace(['\t', '\n'], " "));
    let path = log_path();
    // One short O_APPEND write per line, so parallel tests and test binaries never
    // interleave within a line.
    let logged = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = logged {
        eprintln!("(could not log the skip to {}: {e})", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_logged_with_its_test_and_reason() {
        let dir = std::env::temp_dir().join(format!("skip-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        // Set for this process only; no other test here reads these variables.
        std::env::set_var("AISCP_SKIP_LOG", &log);
        std::env::remove_var("CI");
        not_here("a reason\twith a tab");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text,
            "skip::tests::a_skip_is_logged_with_its_test_and_reason\ta reason with a tab\n"
        );
        std::env::set_var("CI", "true");
        let failed = std::panic::catch_unwind(|| skip("no strace", "")).is_err();
        std::env::remove_var("CI");
        assert!(failed, "a missing prerequisite must fail in CI");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
