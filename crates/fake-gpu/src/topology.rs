//! Several devices: the runtime calls that answer with a device's PCI address, memory and
//! architecture,
//! and the check that memory is used from a thread whose current device is the memory's own
//! (what a caller that keeps each worker on its device does). The per-device data itself is
//! in `device_use`.

use std::ffi::{c_char, c_int};

use crate::current::{current_device, HipError};
use crate::messages::*;
use crate::state::{fake, Registry};

/// Accounts `bytes` moved through the device memory at `addr` by `call` on this thread, and
/// records misuse when the memory belongs to a device other than the thread's current one.
pub fn used(reg: &mut Registry, call: &str, addr: usize, bytes: usize) {
    let Some((base, _)) = reg.device_alloc_holding(addr, 1) else {
        return;
    };
    let Some(&device) = reg.devices.alloc_device.get(&base) else {
        return;
    };
    *reg.devices.bytes.entry(device).or_default() += bytes as u64;
    let current = current_device();
    if current != device {
        reg.misuse(format!(
            "{call} on memory {addr:#x} of device {device} from a thread whose current device is {current}"
        ));
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetPCIBusId(
    pci_bus_id: *mut c_char,
    len: c_int,
    device: c_int,
) -> HipError {
    let fake = fake();
    if fake.devices == 0 {
        return HIP_ERROR_NO_DEVICE;
    }
    let Some(id) = usize::try_from(device)
        .ok()
        .and_then(|d| fake.bus_ids.get(d))
    else {
        return HIP_ERROR_INVALID_DEVICE;
    };
    if pci_bus_id.is_null() || len <= id.len() as c_int {
        return HIP_ERROR_INVALID_VALUE;
    }
    std::ptr::copy_nonoverlapping(id.as_ptr(), pci_bus_id.cast(), id.len());
    *pci_bus_id.add(id.len()) = 0;
    HIP_SUCCESS
}

/// What the fake reports as each device's memory (hipDeviceTotalMem). Allocations are lazy
/// mappings, so this is a number to report, not a limit (`malloc>BYTES` faults limit).
pub const DEVICE_MEMORY: usize = 64 << 30;

#[no_mangle]
pub unsafe extern "C" fn hipDeviceTotalMem(bytes: *mut usize, device: c_int) -> HipError {
    if let Err(e) = check_device(device, bytes.is_null()) {
        return e;
    }
    *bytes = DEVICE_MEMORY;
    HIP_SUCCESS
}

/// What a runtime call about `device` answers before it looks further: no device, an
/// ordinal out of range, or a null output (`null_out`).
fn check_device(device: c_int, null_out: bool) -> Result<(), HipError> {
    let devices = fake().devices;
    if devices == 0 {
        Err(HIP_ERROR_NO_DEVICE)
    } else if device < 0 || device >= devices {
        Err(HIP_ERROR_INVALID_DEVICE)
    } else if null_out {
        Err(HIP_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// The architecture every fake device reports (`gcnArchName`): `AISCP_FAKE_GPU_ARCH`, else
/// an MI300X's. A code object compiled for another is refused (`kernels`).
pub fn arch() -> String {
    std::env::var("AISCP_FAKE_GPU_ARCH").unwrap_or_else(|_| "gfx942:sramecc+:xnack-".into())
}

/// The size the fake fills of a caller's hipDeviceProp_t: less than any ROCm release's.
const PROPS_LEN: usize = 1024;
/// Where the fake puts `gcnArchName`, past `name` (the caller finds it by its form; real
/// releases put it elsewhere).
const ARCH_AT: usize = 700;

/// ROCm 6's hipGetDeviceProperties: the fake fills `name` and `gcnArchName` alone.
#[no_mangle]
pub unsafe extern "C" fn hipGetDevicePropertiesR0600(props: *mut u8, device: c_int) -> HipError {
    if let Err(e) = check_device(device, props.is_null()) {
        return e;
    }
    let arch = arch();
    let mut fields = vec![0u8; PROPS_LEN];
    let name = b"fake-gpu device";
    fields[..name.len()].copy_from_slice(name);
    let arch = &arch.as_bytes()[..arch.len().min(255)];
    fields[ARCH_AT..ARCH_AT + arch.len()].copy_from_slice(arch);
    std::ptr::copy_nonoverlapping(fields.as_ptr(), props, PROPS_LEN);
    HIP_SUCCESS
}
