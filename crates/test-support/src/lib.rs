//! What more than one crate's suites need, written once: the fake GPU library built for this
//! test process and its exit report read into a typed [`fake_gpu::Report`], seeded random
//! data, and child processes (a test re-run alone, a wait with a deadline). A dev-dependency only (the fake is a cdylib, so its test support cannot live in it as
//! a Rust module).

pub mod child;
pub mod data;
pub mod fake_gpu;
pub mod skip;
