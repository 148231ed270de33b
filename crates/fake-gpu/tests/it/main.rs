//! The fake GPU library's own suite: the built cdylib driven through its C ABI.

mod abi;
mod support;
