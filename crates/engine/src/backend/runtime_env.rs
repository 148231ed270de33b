//! Process-wide settings a GPU runtime reads from the environment once, when it initialises.
//!
//! `CUDA_DEVICE_MAX_CONNECTIONS` is how many hardware work queues the CUDA driver gives each
//! context (8 unless set). Every queue is set up when the context is created and torn down when
//! it is released, and that is most of the start-up a short copy pays: on the H200 machine a
//! context took 0.155 s to create and 0.095 s to release with 8 queues, 0.06 s and 0.03 s
//! with one, while a 4 GiB copy ran as fast on one queue (BENCHMARKS.md, "Start-up: the
//! context's work queues"). A copier's stream copies are short and queue behind storage, so
//! they gain nothing from more queues. A value the user set is kept. HIP reads other variables;
//! this one is inert on AMD.

use std::ffi::OsString;
use std::sync::OnceLock;

/// The variable, as CUDA spells it.
pub const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// aiscp's value when the user sets none.
const CONNECTIONS: &str = "1";

/// What [`set_defaults`] found: `Some(value)` when the user had set the variable.
static FOUND: OnceLock<Option<OsString>> = OnceLock::new();

/// The value to set, given what the environment holds: none when the user chose one (even
/// an empty one, which CUDA then reads as its own default).
fn default_for(current: Option<&OsString>) -> Option<&'static str> {
    match current {
        Some(_) => None,
        None => Some(CONNECTIONS),
    }
}

/// Sets the runtime variables the user left unset. Call it first thing in `main`, before any
/// thread exists: setting a variable races with every other thread's reads of the
/// environment. Later calls do nothing.
pub fn set_defaults() {
    FOUND.get_or_init(|| {
        let current = std::env::var_os(CUDA_CONNECTIONS);
        if let Some(value) = default_for(current.as_ref()) {
            std::env::set_var(CUDA_CONNECTIONS, value);
        }
        current
    });
}

/// For `--debug`: the work-queue setting the CUDA runtime starts with, and whose it is.
pub fn describe() -> String {
    let value = std::env::var_os(CUDA_CONNECTIONS)
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unset: CUDA's default of 8".to_owned());
    let whose = match FOUND.get() {
        Some(None) => "aiscp's default; set the variable to choose",
        Some(Some(_)) | None => "from the environment",
    };
    format!("{CUDA_CONNECTIONS}={value} ({whose})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_variable_gets_one_queue() {
        assert_eq!(default_for(None), Some("1"));
    }

    #[test]
    fn a_value_the_user_set_is_kept_even_empty() {
        assert_eq!(default_for(Some(&OsString::from("4"))), None);
        assert_eq!(default_for(Some(&OsString::new())), None);
    }
}
