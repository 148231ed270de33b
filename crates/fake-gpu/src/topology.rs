//! Several devices: each one's PCI address (`AISCP_FAKE_GPU_BUS_IDS`), which device each
//! allocation belongs to, and the check that memory is used from a thread whose current
//! device is the memory's own (what a caller that keeps each worker on its device does).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int};

use crate::hip_runtime::HipError;
use crate::messages::*;
use crate::state::{fake, Registry};

/// The bus ids of `devices` devices: from `AISCP_FAKE_GPU_BUS_IDS` (comma-separated, one
/// per device, e.g. `0000:03:00.0,0000:43:00.0`), else `0000:1N:00.0` for device N.
/// A list of the wrong length or a malformed id aborts, so a broken test cannot pass.
pub fn bus_ids_from_env(devices: i32) -> Vec<String> {
    let count = usize::try_from(devices).unwrap_or(0);
    let Ok(text) = std::env::var("AISCP_FAKE_GPU_BUS_IDS") else {
        return (0..count)
            .map(|i| format!("0000:{:02x}:00.0", 0x10 + i))
            .collect();
    };
    let ids: Vec<String> = text.split(',').map(|s| s.trim().to_owned()).collect();
    let well_formed = |id: &str| {
        let b = id.as_bytes();
        b.len() == 12
            && b[4] == b':'
            && b[7] == b':'
            && b[10] == b'.'
            && id
                .split([':', '.'])
                .all(|p| u32::from_str_radix(p, 16).is_ok())
    };
    if ids.len() != count || !ids.iter().all(|id| well_formed(id)) {
        eprintln!(
            "fake-gpu: malformed AISCP_FAKE_GPU_BUS_IDS `{text}`: expected {count} id(s) like 0000:03:00.0"
        );
        std::process::abort();
    }
    ids
}

/// Per device: allocations made on it and bytes moved to or from its memory.
#[derive(Debug, Default)]
pub struct DeviceUse {
    /// Device allocation base -> the device current when it was made.
    pub alloc_device: HashMap<usize, c_int>,
    pub mallocs: BTreeMap<c_int, u64>,
    pub bytes: BTreeMap<c_int, u64>,
}

impl DeviceUse {
    pub fn allocated(&mut self, base: usize, device: c_int) {
        self.alloc_device.insert(base, device);
        *self.mallocs.entry(device).or_default() += 1;
    }

    pub fn freed(&mut self, base: usize) {
        self.alloc_device.remove(&base);
    }

    /// The report line: `devices: mallocs=N,N,... bytes=N,N,...`, one value per device.
    pub fn report_line(&self, devices: i32) -> String {
        let list = |m: &BTreeMap<c_int, u64>| {
            (0..devices)
                .map(|d| m.get(&d).copied().unwrap_or(0).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "devices: mallocs={} bytes={}",
            list(&self.mallocs),
            list(&self.bytes)
        )
    }
}

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
    let current = crate::hip_runtime::current_device();
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
    let fake = fake();
    if fake.devices == 0 {
        return HIP_ERROR_NO_DEVICE;
    }
    if device < 0 || device >= fake.devices {
        return HIP_ERROR_INVALID_DEVICE;
    }
    if bytes.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    *bytes = DEVICE_MEMORY;
    HIP_SUCCESS
}
