//! The calling thread's current device, per thread as in HIP, and the runtime's error type:
//! what the runtime calls set and the accounting of device memory reads, kept apart from
//! both so neither has to import the other.

use std::cell::Cell;
use std::ffi::c_int;

/// `hipError_t`.
pub type HipError = c_int;

thread_local! {
    /// Every thread starts on device 0.
    static CURRENT_DEVICE: Cell<c_int> = const { Cell::new(0) };
}

/// The calling thread's current device.
pub fn current_device() -> c_int {
    CURRENT_DEVICE.get()
}

/// Makes `device` the calling thread's current device.
pub fn set_current_device(device: c_int) {
    CURRENT_DEVICE.set(device);
}
