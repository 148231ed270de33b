//! Process-wide settings a GPU runtime reads from the environment once, when it initialises.
//!
//! `CUDA_DEVICE_MAX_CONNECTIONS` is how many hardware work queues the CUDA driver gives each
//! context (8 unless set). Every queue is set up when the context is created and torn down when
//! it is released, and that is most of the start-up a short copy pays: on the H200 machine a
//! context took 0.155 s to create and 0.095 s to release with 8 queues, 0.06 s and 0.03 s
//! with one, while a 4 GiB copy through the own bounce route ran as fast on one queue
//! (BENCHMARKS.md, "Where start-up goes"). That route's copies are short and wait behind
//! storage. cuFile's own streams (`--async`, the library route over nvidia-fs) were not
//! measured with one queue, so those runs keep CUDA's default. A value the user set is kept.
//! HIP reads other variables; this one is inert on AMD.

use super::{resolve_route, Request};
use hipfile::Flavor;
use std::ffi::OsString;
use std::sync::OnceLock;

/// The variable, as CUDA spells it.
pub const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// aiscp's value on the own bounce route when the user sets none.
const CONNECTIONS: &str = "1";

/// What [`set_defaults`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    /// The user's value (possibly empty, which CUDA reads as its default) is kept.
    Kept(OsString),
    /// aiscp set its value.
    Set,
    /// Left unset: cuFile's own streams would do the copying.
    LibraryRoute,
}

static DECISION: OnceLock<Decision> = OnceLock::new();

fn decide(current: Option<OsString>, library_route: bool) -> Decision {
    match current {
        Some(value) => Decision::Kept(value),
        None if library_route => Decision::LibraryRoute,
        None => Decision::Set,
    }
}

/// Sets the runtime variables the user left unset, for a run that will ask for `request`.
/// Later calls do nothing.
///
/// # Safety
/// No other thread may exist yet (or read the environment while this runs): setting a
/// variable races with every other thread's reads of the environment. Call it from `main`
/// before starting threads or initialising MPI.
pub unsafe fn set_defaults(request: &Request) {
    DECISION.get_or_init(|| {
        let (library_route, _) = resolve_route(Flavor::CuFile, request);
        let decision = decide(std::env::var_os(CUDA_CONNECTIONS), library_route);
        if decision == Decision::Set {
            std::env::set_var(CUDA_CONNECTIONS, CONNECTIONS);
        }
        decision
    });
}

/// For `--debug`: the work-queue setting the CUDA runtime starts with, and why.
pub fn describe() -> String {
    match DECISION.get() {
        Some(Decision::Set) => {
            format!(
                "{CUDA_CONNECTIONS}={CONNECTIONS} (aiscp's default; set the variable to choose)"
            )
        }
        Some(Decision::Kept(value)) => format!(
            "{CUDA_CONNECTIONS}={} (from the environment)",
            value.to_string_lossy()
        ),
        Some(Decision::LibraryRoute) => {
            format!("CUDA's default ({CUDA_CONNECTIONS} unset: cuFile's streams do the copying)")
        }
        None => match std::env::var_os(CUDA_CONNECTIONS) {
            Some(value) => format!("{CUDA_CONNECTIONS}={}", value.to_string_lossy()),
            None => format!("CUDA's default ({CUDA_CONNECTIONS} unset)"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_variable_gets_one_queue_on_the_bounce_route_only() {
        assert_eq!(decide(None, false), Decision::Set);
        assert_eq!(decide(None, true), Decision::LibraryRoute);
    }

    #[test]
    fn a_value_the_user_set_is_kept_even_empty() {
        for library_route in [false, true] {
            assert_eq!(
                decide(Some("4".into()), library_route),
                Decision::Kept("4".into())
            );
            assert_eq!(
                decide(Some(OsString::new()), library_route),
                Decision::Kept(OsString::new())
            );
        }
    }
}
