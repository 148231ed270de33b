//! TEST DOUBLE of `libhipfile.so.0` and `libamdhip64`: not a GPU.
//!
//! One cdylib exports the hipFile and HIP runtime symbols aiscp loads at run time (point
//! `AISCP_HIPFILE_LIB` and `AISCP_HIP_LIB` at it). "Device" memory is host memory, reads
//! and writes really go to the file, and the real library's rules are enforced and
//! recorded, so tests without a GPU can prove the copier drives the API correctly. Faults
//! are injected through `AISCP_FAKE_GPU_FAULTS`; `AISCP_FAKE_GPU_REPORT` gets a report of
//! leaks, misuse and byte counts at exit. See README.md for the whole contract.
//!
//! Every export's safety contract is the C header's (pointers valid as documented there),
//! so the individual `unsafe extern "C" fn`s do not repeat it, and their bodies rely on it
//! throughout: the workspace's unsafe-block lints are off in this test double.
#![allow(
    clippy::missing_safety_doc,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

mod current;
mod device_use;
mod faults;
mod hip_runtime;
mod hipfile_api;
mod io;
mod kernels;
mod launch;
mod lib_stats;
mod memory;
mod messages;
mod state;
mod topology;
