//! The fake GPU library's own suite: the built `libfake_gpu.so` is dlopened and driven through
//! its exported symbols, exactly as hipfile-rs will (the fake is built and its report read by
//! crates/test-support).
//!
//! Every `unsafe` call here drives an export through the signature of its C header, with
//! pointers to live locals: that one contract is stated here instead of on each call.
#![allow(clippy::undocumented_unsafe_blocks)]

mod api;
mod devices;
mod faults;
mod io;
mod streams;
mod support;
