//! Where a GPU copier's start-up time goes: times each step aiscp takes before the first byte
//! moves (loading the runtime, loading the I/O library, the runtime's initialisation, the
//! device context, opening the I/O driver, the first device allocation), in this order.
//!
//! ```text
//! startup [hipfile|cufile] [--driver] [--exit=drop|exit|_exit]
//! ```
//!
//! The runtime is loaded on its own first so that its cost shows apart; the I/O-library step
//! then includes finding the (already loaded) runtime again, as `Library::load` does.
//!
//! Run it with cold caches (`sync; echo 3 > /proc/sys/vm/drop_caches`) to see what a cold
//! benchmark pays. Without `--driver` the I/O driver is left closed, as on aiscp's bounce route.
//!
//! Teardown: by default each object is dropped in turn and timed (the two pinned windows,
//! the buffer, the context, the libraries). `--exit=exit` drops nothing and calls exit(0), so
//! the runtime's own exit handlers clean up; `--exit=_exit` leaves everything to the kernel.
//! Time the whole process (`time startup --exit=...`) to compare what each costs.

use std::process::ExitCode;
use std::time::Instant;

use hipfile::{Flavor, Library, Runtime};

fn main() -> ExitCode {
    let mut flavor = Flavor::CuFile;
    let mut driver = false;
    let mut exit = Ending::DropAll;
    for arg in std::env::args().skip(1) {
        match (arg.as_str(), arg.parse::<Flavor>()) {
            ("--driver", _) => driver = true,
            ("--exit=drop", _) => exit = Ending::DropAll,
            ("--exit=exit", _) => exit = Ending::Exit,
            ("--exit=_exit", _) => exit = Ending::RawExit,
            (_, Ok(f)) => flavor = f,
            (_, Err(e)) => {
                eprintln!("startup: {e}\nusage: startup [hipfile|cufile] [--driver] [--exit=drop|exit|_exit]");
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
    let buffer = match device.alloc(64 << 20) {
        Ok(buffer) => buffer,
        Err(e) => return fail("allocating", &e),
    };
    step("first 64 MiB allocation");
    let windows = match (device.alloc_window(16 << 20), device.alloc_window(16 << 20)) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(e), _) | (_, Err(e)) => return fail("allocating pinned windows", &e),
    };
    step("two 16 MiB pinned windows");
    match exit {
        Ending::DropAll => {}
        // What is left to the process's exit when nothing is given back first: libc's exit
        // (the runtime's own exit handlers run), or _exit (the kernel alone cleans up).
        Ending::Exit | Ending::RawExit => {
            println!("{:<28} (left to {})", "teardown", exit.name());
            std::mem::forget((windows, buffer, device, library, runtime));
            match exit {
                Ending::Exit => std::process::exit(0),
                // SAFETY: ends the process; nothing after it runs.
                _ => unsafe { libc::_exit(0) },
            }
        }
    }
    drop(windows);
    step("teardown: free the windows");
    drop(buffer);
    step("teardown: free the buffer");
    drop(device);
    step("teardown: release the context");
    drop(library);
    drop(runtime);
    step("teardown: unload");
    ExitCode::SUCCESS
}

/// How the example ends once everything is allocated.
#[derive(Clone, Copy)]
enum Ending {
    /// Every object dropped in turn, each timed.
    DropAll,
    /// Nothing dropped; `exit(0)`.
    Exit,
    /// Nothing dropped; `_exit(0)`.
    RawExit,
}

impl Ending {
    fn name(self) -> &'static str {
        match self {
            Ending::DropAll => "drop",
            Ending::Exit => "exit",
            Ending::RawExit => "_exit",
        }
    }
}
