//! What every suite that loads the fake GPU library (crates/fake-gpu) needs, once: the
//! library built for this test process ([`library`]) and its exit report read into a typed
//! [`Report`]. A dev-dependency only: the fake is a cdylib, so its test support cannot live
//! in it as a Rust module.

mod library;
mod report;

pub use library::library;
pub use report::{Devices, Report, Stats};
