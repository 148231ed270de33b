//! Where a GPU copier's start-up time goes: times each step aiscp takes before the first byte
//! moves (loading the runtime, loading the I/O library, the runtime's initialisation, the
//! device context, opening the I/O driver, the first device allocation), in this order.
//!
//! ```text
//! startup [hipfile|cufile] [--driver]
//! ```
//!
//! The runtime is loaded on its own first so that its cost shows apart; the I/O-library step
//! then includes finding the (already loaded) runtime again, as `Library::load` does.
//!
//! Run it with cold caches (`sync; echo 3 > /proc/sys/vm/drop_caches`) to see what a cold
//! benchmark pays. Without `--driver` the I/O driver is left closed, as on aiscp's bounce route.

use std::process::ExitCode;
use std::time::Instant;

use hipfile::{Flavor, Library, Runtime};

fn main() -> ExitCode {
    let mut flavor = Flavor::CuFile;
    let mut driver = false;
    for arg in std::env::args().skip(1) {
        match (arg.as_str(), arg.parse::<Flavor>()) {
            ("--driver", _) => driver = true,
            (_, Ok(f)) => flavor = f,
            (_, Err(e)) => {
                eprintln!("startup: {e}\nusage: startup [hipfile|cufile] [--driver]");
                return ExitCode::from(2);
            }
        }
    }
    let mut last = Instant::now();
    let mut step = |what: &str| {
        let now = Instant::now();
        println!("{what:<28} {:8.3} s", (now - last).as_secs_f64());
        last = now;
    };
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("startup: {what}: {e}");
        ExitCode::FAILURE
    };
    let runtime = match Runtime::load(flavor) {
        Ok(r) => r,
        Err(e) => return fail("loading the runtime", &e),
    };
    step(&format!("load {}", runtime.path().display()));
    let library = match Library::load(flavor) {
        Ok(l) => l,
        Err(e) => return fail("loading the I/O library", &e),
    };
    step(&format!("load {}", library.io_library_path().display()));
    match library.device_count() {
        Ok(n) => step(&format!("init + count ({n} GPU)")),
        Err(e) => return fail("counting GPUs", &e),
    }
    let device = if driver {
        let d = match library.open_driver() {
            Ok(d) => d,
            Err(e) => return fail("opening the driver", &e),
        };
        step("open I/O driver");
        d.device(0)
    } else {
        library.staging_device(0)
    };
    let device = match device {
        Ok(d) => d,
        Err(e) => return fail("opening GPU 0", &e),
    };
    step("device 0 context");
    match device.alloc(64 << 20) {
        Ok(buffer) => {
            step("first 64 MiB allocation");
            drop(buffer);
        }
        Err(e) => return fail("allocating", &e),
    }
    drop(device);
    drop(library);
    drop(runtime);
    step("teardown");
    ExitCode::SUCCESS
}
