//! A pause for tests that race a change of the filesystem against one step of a copy.
//!
//! With `AISCP_TEST_PAUSE=POINT:PATH` in the environment, the copy, on first reaching
//! POINT, creates the file PATH and waits until it is removed; the test makes its change
//! meanwhile. Unset (always, outside tests), [`pause`] does nothing but one lookup made
//! once per run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The point and the file of `AISCP_TEST_PAUSE`, if set.
fn plan() -> Option<&'static (String, PathBuf)> {
    static PLAN: OnceLock<Option<(String, PathBuf)>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let raw = std::env::var_os("AISCP_TEST_PAUSE")?;
        let raw = raw.to_str()?;
        let (point, path) = raw.split_once(':')?;
        Some((point.to_owned(), PathBuf::from(path)))
    })
    .as_ref()
}

/// Waits at `point`, the first time it is reached, while the test's file exists (see the
/// module comment).
pub fn pause(point: &str) {
    static DONE: AtomicBool = AtomicBool::new(false);
    let Some((wanted, path)) = plan() else {
        return;
    };
    if wanted != point || DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    if std::fs::write(path, point).is_err() {
        return;
    }
    while path.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
}
