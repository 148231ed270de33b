//! aiscp's end-to-end suites, one module per area, all run against the built binary (and GNU
//! cp where they compare), in one test binary so they compile and link once.

mod arg_fuzz;
mod atomic;
mod big_slices;
mod cli;
mod completions;
mod docs;
mod doctor;
mod engine_cli;
mod engine_paths;
mod engine_route;
mod faults;
mod file_ends;
mod flags;
mod full_disk;
mod fuzz_vs_cp;
mod guarantees;
mod in_flight;
/// Only with `--features mpi`, on a machine with Open MPI: the tests start `mpirun` themselves.
#[cfg(feature = "mpi")]
mod mpi;
mod multi_gpu;
mod output;
mod parity;
mod progress;
mod routes;
mod service;
mod signals;
mod source_changes;
mod stats;
mod sums;
mod sums_gpu;
mod support;
mod trees;
mod vendor_cufile;
mod verify;
mod verify_trees;
mod walk_order;
