//! What more than one crate's suites need, written once: the fake GPU library built for this
//! test process and its exit report read into a typed [`fake_gpu::Report`], and seeded random
//! data. A dev-dependency only (the fake is a cdylib, so its test support cannot live in it as
//! a Rust module).

pub mod data;
pub mod fake_gpu;
pub mod skip;
