//! The parent/child harness: the fake reads its environment once per process and writes its
//! report at exit, so every scenario runs in a child process. [`run`] re-executes this test
//! binary with `FAKE_GPU_SCENARIO` set; the child runs [`child_scenario_entry`] (which
//! asserts inside the child) and exits, and the parent checks the exit status and the report.

use std::fs;

use crate::api::Api;
use test_support::fake_gpu::{library, Report};

pub struct Outcome {
    pub status: std::process::ExitStatus,
    pub stderr: String,
    pub report: Option<Report>,
    /// What the child left in `{dir}/result`, if anything.
    pub result: String,
    /// The trace file `{dir}/trace`, if the child wrote one.
    pub trace: String,
}

impl Outcome {
    /// The report the child wrote at exit (a child that aborted writes none).
    pub fn report(&self) -> &Report {
        self.report
            .as_ref()
            .unwrap_or_else(|| panic!("the child wrote no report:\n{}", self.stderr))
    }

    /// The child passed and left neither leaks nor misuse.
    pub fn assert_clean(&self) {
        self.assert_passed();
        self.report().assert_clean();
    }

    pub fn assert_passed(&self) {
        assert!(
            self.status.success(),
            "child failed ({:?}):\n{}",
            self.status,
            self.stderr
        );
    }
}

/// Runs `scenario` in a child process with `env` on top of a clean fake-gpu environment.
pub fn run(scenario: &str, env: &[(&str, &str)]) -> Outcome {
    let lib = library();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let report = tmp.path().join("report.txt");
    let mut child = test_support::child::test_command("support::child_scenario_entry");
    child
        .env("FAKE_GPU_SCENARIO", scenario)
        .env("FAKE_GPU_LIB", lib)
        .env("FAKE_GPU_DIR", tmp.path())
        .env("AISCP_FAKE_GPU_REPORT", &report);
    for var in [
        "AISCP_FAKE_GPU_FAULTS",
        "AISCP_FAKE_GPU_DEVICES",
        "AISCP_FAKE_GPU_TRACE",
    ] {
        child.env_remove(var);
    }
    for (k, v) in env {
        child.env(k, v.replace("{dir}", &tmp.path().to_string_lossy()));
    }
    let out = test_support::child::run(&mut child);
    Outcome {
        status: out.status,
        stderr: out.stdout + &out.stderr,
        report: report.exists().then(|| Report::read(&report)),
        result: fs::read_to_string(tmp.path().join("result")).unwrap_or_default(),
        trace: fs::read_to_string(tmp.path().join("trace")).unwrap_or_default(),
    }
}

/// Harness plumbing, not a test of its own: does nothing unless started by [`run`].
#[test]
pub fn child_scenario_entry() {
    let Ok(scenario) = std::env::var("FAKE_GPU_SCENARIO") else {
        return;
    };
    let api = Api::load();
    match scenario.as_str() {
        "copy" => crate::io::scenario_copy(api),
        "identity" => crate::io::scenario_identity(api),
        "o_direct" => crate::io::scenario_o_direct(api),
        "o_direct_short" => crate::io::scenario_o_direct_short(api),
        "unregistered" => crate::io::scenario_unregistered(api),
        "range" => crate::io::scenario_range(api),
        "cap" => crate::io::scenario_cap(api),
        "io_faults" => crate::faults::scenario_io_faults(api),
        "code_faults" => crate::faults::scenario_code_faults(api),
        "always_faults" => crate::faults::scenario_always_faults(api),
        "corrupt_faults" => crate::faults::scenario_corrupt_faults(api),
        "runtime_faults" => crate::faults::scenario_runtime_faults(api),
        "devices" => crate::devices::scenario_devices(api),
        "bus_ids" => crate::devices::scenario_bus_ids(api),
        "leaks" => crate::devices::scenario_leaks(api),
        "host_register" => crate::devices::scenario_host_register(api),
        "async" => crate::streams::scenario_async(api),
        "async_misuse" => crate::streams::scenario_async_misuse(api),
        "threads" => crate::streams::scenario_threads(api),
        other => panic!("unknown scenario {other}"),
    }
}
