//! Process-wide settings a GPU runtime reads from the environment once, when it initialises.
//!
//! `CUDA_DEVICE_MAX_CONNECTIONS` is how many hardware work queues the CUDA driver gives each
//! context (8 unless set). Every queue is set up when the context is created and torn down when
//! it is released, and that is most of the start-up a short copy pays: on the H200 machine a
//! context took 0.155 s to create and 0.095 s to release with 8 queues, 0.06 s and 0.03 s
//! with one, while a 4 GiB copy through the own bounce route ran as fast on one queue
//! (bench/results/HISTORY.md, "Where start-up goes"). That route's copies are short and wait behind
//! storage. cuFile's own streams (`--async`, the library route over nvidia-fs) were not
//! measured with one queue, so those runs keep CUDA's default. A value the user set is kept.
//! HIP reads other variables; this one is inert on AMD.

use super::request::{resolve_route, BackendChoice, Request};
use hipfile::Flavor;
use std::sync::OnceLock;

/// The variable, as CUDA spells it.
pub const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// aiscp's value on the own bounce route when the user sets none.
const CONNECTIONS: &str = "1";

/// What [`set_defaults`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// The user's value (possibly empty, which CUDA reads as its default) is kept.
    Kept,
    /// aiscp set its value.
    Set,
    /// Left unset: cuFile's own streams would do the copying.
    LibraryRoute,
}

static DECISION: OnceLock<Decision> = OnceLock::new();

fn decide(user_set: bool, library_route: bool) -> Decision {
    match (user_set, library_route) {
        (true, _) => Decision::Kept,
        (false, true) => Decision::LibraryRoute,
        (false, false) => Decision::Set,
    }
}

/// Sets the runtime variables the user left unset, for a run that will ask for `request`
/// (nothing for host memory). Later calls do nothing.
///
/// # Safety
/// No other thread may exist yet (or read the environment while this runs): setting a
/// variable races with every other thread's reads of the environment. Call it from `main`
/// before starting threads or initialising MPI.
pub unsafe fn set_defaults(request: &Request) {
    if request.backend == BackendChoice::Host {
        return;
    }
    DECISION.get_or_init(|| {
        let (library_route, _) = resolve_route(Flavor::CuFile, request);
        let decision = decide(std::env::var_os(CUDA_CONNECTIONS).is_some(), library_route);
        if decision == Decision::Set {
            std::env::set_var(CUDA_CONNECTIONS, CONNECTIONS);
        }
        decision
    });
}

/// For `--debug`: the work-queue setting the CUDA runtime starts with, and why.
pub fn describe() -> String {
    let value = std::env::var_os(CUDA_CONNECTIONS).map(|v| v.to_string_lossy().into_owned());
    match (DECISION.get(), value) {
        (Some(Decision::Set), _) => {
            format!(
                "{CUDA_CONNECTIONS}={CONNECTIONS} (aiscp's default; set the variable to choose)"
            )
        }
        (Some(Decision::LibraryRoute), _) => {
            format!("CUDA's default ({CUDA_CONNECTIONS} unset: cuFile's streams do the copying)")
        }
        (_, Some(value)) => format!("{CUDA_CONNECTIONS}={value} (from the environment)"),
        (_, None) => format!("CUDA's default ({CUDA_CONNECTIONS} unset)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_variable_gets_one_queue_on_the_bounce_route_only() {
        assert_eq!(decide(false, false), Decision::Set);
        assert_eq!(decide(false, true), Decision::LibraryRoute);
    }

    #[test]
    fn a_value_the_user_set_is_kept() {
        assert_eq!(decide(true, false), Decision::Kept);
        assert_eq!(decide(true, true), Decision::Kept);
    }
}
