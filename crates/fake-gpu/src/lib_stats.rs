//! What hipFile 0.5's statistics calls (hipFileGetStatsL1/L2/L3, exported in `hipfile_api`)
//! report, as plain data the registry holds: counts of what the fake actually did: each read and write call by outcome and the bytes it returned,
//! registrations by outcome, and per device which path a call took. The fake's "fast path" is
//! a call on an O_DIRECT descriptor (what the real fastpath needs); any other is its POSIX
//! fallback. Fields the fake does not model (bandwidths, latencies, batches, histograms,
//! UUIDs) read 0, as hipFile leaves the fields it does not track.
//!
//! The structs are written at their byte offsets (hipFile 0.5's layout: `hipFileStatsLevel1_t`
//! 512 bytes, Level 2 adds two 32-bucket histograms, Level 3 a `uint32_t num_gpus` and 16
//! `hipFilePerGpuStats_t` of 248 bytes from offset 1032); hipfile-rs's suite reads them back
//! through its own `sys` structs, which scripts/abi-check.py holds to cufile.h.

use std::collections::BTreeMap;

use crate::faults::IoOp;

/// Level 1's size, and where Level 3's fields start.
const LEVEL1_SIZE: usize = 512;
const LEVEL2_SIZE: usize = LEVEL1_SIZE + 2 * 32 * 8;
const NUM_GPUS_AT: usize = LEVEL2_SIZE;
const PER_GPU_AT: usize = LEVEL2_SIZE + 8;
const PER_GPU_SIZE: usize = 248;
const MAX_GPUS: usize = 16;

/// A call by outcome (`hipFileOpCounter_t`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcomes {
    pub ok: u64,
    pub err: u64,
}

impl Outcomes {
    fn add(&mut self, ok: bool) {
        match ok {
            true => self.ok += 1,
            false => self.err += 1,
        }
    }
}

/// One device's calls by path.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub fast_reads: u64,
    pub fallback_reads: u64,
    pub fast_writes: u64,
    pub fallback_writes: u64,
    pub read_errors: u64,
    pub write_errors: u64,
}

/// What the statistics calls report, kept in the registry.
#[derive(Debug, Default)]
pub struct LibStats {
    pub reads: Outcomes,
    pub writes: Outcomes,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub handle_registrations: Outcomes,
    pub buffer_registrations: Outcomes,
    pub devices: BTreeMap<i32, DeviceIo>,
}

/// Which registration a call made.
#[derive(Clone, Copy)]
pub enum Registration {
    Handle,
    Buffer,
}

impl LibStats {
    /// Counts one registration call by its outcome.
    pub fn registered(&mut self, what: Registration, ok: bool) {
        match what {
            Registration::Handle => self.handle_registrations.add(ok),
            Registration::Buffer => self.buffer_registrations.add(ok),
        }
    }

    /// Counts one read or write call: `result` as returned to the caller, `direct` whether
    /// its descriptor was O_DIRECT (None: refused before the file was looked at), on
    /// `device`, the device holding its buffer (None: not device memory).
    pub fn count(&mut self, op: IoOp, device: Option<i32>, direct: Option<bool>, result: isize) {
        let bytes = u64::try_from(result).ok();
        let (calls, total) = match op {
            IoOp::Read => (&mut self.reads, &mut self.read_bytes),
            IoOp::Write => (&mut self.writes, &mut self.write_bytes),
        };
        calls.add(bytes.is_some());
        *total += bytes.unwrap_or(0);
        let Some(device) = device else { return };
        let d = self.devices.entry(device).or_default();
        let (done, fast, fallback, errors) = match op {
            IoOp::Read => (
                &mut d.read_bytes,
                &mut d.fast_reads,
                &mut d.fallback_reads,
                &mut d.read_errors,
            ),
            IoOp::Write => (
                &mut d.write_bytes,
                &mut d.fast_writes,
                &mut d.fallback_writes,
                &mut d.write_errors,
            ),
        };
        *done += bytes.unwrap_or(0);
        match (bytes, direct) {
            (None, _) => *errors += 1,
            (Some(_), Some(true)) => *fast += 1,
            (Some(_), _) => *fallback += 1,
        }
    }

    /// Fills the caller's Level 1, 2 or 3 struct at `out`, zeroed first, for `gpus` devices.
    ///
    /// # Safety
    /// `out` is writable for [`Level::size`] bytes.
    pub unsafe fn write(&self, out: *mut u8, level: Level, gpus: i32) {
        std::ptr::write_bytes(out, 0, level.size());
        let counters = [
            self.reads,
            self.writes,
            self.handle_registrations,
            Outcomes::default(),
            self.buffer_registrations,
        ];
        for (i, c) in counters.iter().enumerate() {
            put(out, 16 * i, c.ok);
            put(out, 16 * i + 8, c.err);
        }
        put(out, 96, self.read_bytes);
        put(out, 104, self.write_bytes);
        if level != Level::PerGpu {
            return;
        }
        let gpus = u32::try_from(gpus.clamp(0, MAX_GPUS as i32)).unwrap_or(0);
        out.add(NUM_GPUS_AT).cast::<u32>().write_unaligned(gpus);
        for (&device, d) in self.devices.range(0..MAX_GPUS as i32) {
            let at = PER_GPU_AT + PER_GPU_SIZE * device as usize;
            // read_bytes @16, n_total_reads @48, n_nvfs_reads @64, n_posix_reads @72,
            // n_reads_err @112; write_bytes @120, n_total_writes @152, n_nvfs_writes @168,
            // n_posix_writes @176, n_writes_err @200.
            for (offset, value) in [
                (16, d.read_bytes),
                (48, d.fast_reads + d.fallback_reads),
                (64, d.fast_reads),
                (72, d.fallback_reads),
                (112, d.read_errors),
                (120, d.write_bytes),
                (152, d.fast_writes + d.fallback_writes),
                (168, d.fast_writes),
                (176, d.fallback_writes),
                (200, d.write_errors),
            ] {
                put(out, at + offset, value);
            }
        }
    }
}

/// Which struct a statistics call fills.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Basic,
    Histograms,
    PerGpu,
}

impl Level {
    /// The struct's size in hipFile 0.5.
    pub fn size(self) -> usize {
        match self {
            Level::Basic => LEVEL1_SIZE,
            Level::Histograms => LEVEL2_SIZE,
            Level::PerGpu => PER_GPU_AT + PER_GPU_SIZE * MAX_GPUS,
        }
    }
}

/// Writes `value` at byte `at` of the struct at `out`.
///
/// # Safety
/// `out` must point to a writable struct of at least `at + 8` bytes.
unsafe fn put(out: *mut u8, at: usize, value: u64) {
    // SAFETY: the caller's contract.
    unsafe { out.add(at).cast::<u64>().write_unaligned(value) }
}
