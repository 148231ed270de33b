//! The fake GPU library's own suite: the built cdylib driven through its C ABI (the fake is
//! built and its report read by crates/fake-gpu-support).

mod abi;
