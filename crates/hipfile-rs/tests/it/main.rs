//! hipfile-rs's suites: the ABI layouts, loading, every call against the fake GPU library,
//! and the `roundtrip` example; one test binary, so they compile and link once.

mod abi_layout;
mod fake_gpu;
mod loading;
mod roundtrip_example;
mod support;
