//! What the fake keeps per device, as plain data the registry holds: each device's PCI
//! address (`AISCP_FAKE_GPU_BUS_IDS`) and which device each allocation belongs to, with the
//! bytes moved through it. The runtime calls that read and check them are in `topology`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_int;

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
