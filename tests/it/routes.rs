//! The ways a file's bytes can go, for tests that must cover each: host memory, the fake
//! GPU's library route, its bounce route, `--async`, and the route `auto` chooses on it (the
//! library's, with files under 1 MiB in flight on the bounce route).

use crate::support::{aiscp_command, Backend};
use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Host,
    Library,
    Bounce,
    Async,
    /// No --route: what `auto` chooses on hipFile.
    Auto,
}

pub const ROUTES: [Route; 5] = [
    Route::Host,
    Route::Library,
    Route::Bounce,
    Route::Async,
    Route::Auto,
];
/// The fake GPU's routes only.
pub const GPU_ROUTES: [Route; 4] = [Route::Library, Route::Bounce, Route::Async, Route::Auto];

impl Route {
    /// `aiscp` set up for this route, in `dir`, its fake GPU report (if any) at `report`, no
    /// faults and no inherited route or in-flight settings.
    pub fn aiscp(self, dir: &Path, report: &Path) -> Command {
        let mut cmd = aiscp_command();
        cmd.current_dir(dir)
            .env_remove("AISCP_FAKE_GPU_FAULTS")
            .env_remove("AISCP_ROUTE")
            .env_remove("AISCP_IN_FLIGHT")
            .stdin(std::process::Stdio::null());
        let backend = match self {
            Route::Host => Backend::Host,
            _ => Backend::FakeGpu,
        };
        backend.apply(&mut cmd, report);
        match self {
            Route::Host | Route::Auto => {}
            Route::Library => {
                cmd.args(["--route", "library"]);
            }
            Route::Bounce => {
                cmd.args(["--route", "bounce"]);
            }
            Route::Async => {
                cmd.arg("--async");
            }
        }
        cmd
    }
}
