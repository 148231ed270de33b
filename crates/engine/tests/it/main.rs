//! The engine's suites, as a library without the aiscp binary: one module per area, in one
//! test binary so they compile and link once.

mod fake_gpu;
mod host;
mod kernel_hiprtc;
mod kernel_source;
mod plan;
mod queue;
mod support;
