//! The I/O library's own statistics (cuFile 1.15, hipFile 0.5 and later) as plain values:
//! what its read and write calls did, and per GPU whether they took the fast path or the
//! fallback through host memory.
//!
//! The structs grew between releases (cuFile 1.19 appended vector I/O counters to Level 1,
//! which moves everything in Level 3), so each call is given room to spare and read with the
//! layout of the release loaded (`sys::IoFunctions::vector_io`); per-GPU counts are kept only
//! when they add up to the Level 1 totals, so a layout this crate does not know is reported
//! as such instead of read as numbers.

use std::ffi::c_void;
use std::mem::size_of;

use crate::library::{Driver, Library};
use crate::{sys, Error};

/// Calls of one kind by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCount {
    pub ok: u64,
    pub failed: u64,
}

impl From<sys::OpCounter> for OpCount {
    fn from(c: sys::OpCounter) -> OpCount {
        OpCount {
            ok: c.ok,
            failed: c.err,
        }
    }
}

/// One GPU's slot of Level 3: which path the library's calls took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuIoStats {
    /// The slot in the library's table (hipFile: the GPU's ordinal).
    pub slot: u32,
    /// The GPU's UUID in hex, where the library fills it.
    pub uuid: Option<String>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Reads by the fast path (nvidia-fs or AMD's AIS, and PCIe peer-to-peer DMA).
    pub fast_reads: u64,
    /// Reads by the fallback: POSIX I/O through host memory.
    pub fallback_reads: u64,
    pub fast_writes: u64,
    pub fallback_writes: u64,
    pub unaligned_reads: u64,
    pub unaligned_writes: u64,
    pub read_errors: u64,
    pub write_errors: u64,
}

/// The library's counters since statistics started (for cuFile, [`Driver::start_stats`]; for
/// hipFile, its first call: it counts unless `HIPFILE_STATS_LEVEL=0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoStats {
    pub reads: OpCount,
    pub writes: OpCount,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub file_registrations: OpCount,
    pub buffer_registrations: OpCount,
    /// Level 3's GPUs with any I/O, or why there are none.
    pub per_gpu: Result<Vec<GpuIoStats>, String>,
}

/// Why the library gives no statistics.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// An older release: no statistics calls.
    #[error("{library} has no {symbol} (cuFile 1.15 and hipFile 0.5 added statistics)")]
    Missing {
        library: String,
        symbol: &'static str,
    },
    #[error(transparent)]
    Call(#[from] Error),
}

/// Room past the largest struct known, for a later release's larger one.
const SPARE: usize = 16 << 10;

impl Library {
    /// `T` as GetStatsL3 (`per_gpu`) or GetStatsL1 fills it, in a zeroed buffer with room
    /// for a larger struct of a later release.
    ///
    /// # Safety
    /// `T` is plain integers (every bit pattern valid) of at most 8-byte alignment.
    unsafe fn stats_as<T: Copy>(&self, per_gpu: bool) -> Result<T, Error> {
        let mut room = vec![0u64; (size_of::<T>() + SPARE) / 8];
        // SAFETY: zeroed, writable and larger than any release's struct.
        unsafe { self.get_stats(per_gpu, room.as_mut_ptr().cast::<c_void>())? };
        // SAFETY: 8-byte aligned, in bounds, any bit pattern valid (the caller's promise).
        Ok(unsafe { room.as_ptr().cast::<T>().read() })
    }
}

impl Driver {
    /// Asks the library to count per GPU from now on, at the cost the vendor warns of for
    /// higher levels (cuFile: `cuFileSetStatsLevel(3)` and `cuFileStatsStart`, which override
    /// cufile.json's `profile.cufile_stats`). hipFile has no such calls: nothing to do.
    pub fn start_stats(&self) -> Result<(), StatsError> {
        let lib = self.library();
        if !lib.has_stats() {
            return Err(missing(lib));
        }
        lib.stats_start(sys::STATS_LEVEL_PER_GPU)?;
        Ok(())
    }

    /// The library's counters now: Level 3 where it answers (else Level 1, with the reason
    /// per-GPU counts are absent).
    pub fn io_stats(&self) -> Result<IoStats, StatsError> {
        let lib = self.library();
        if !lib.has_stats() {
            return Err(missing(lib));
        }
        // SAFETY: the stats structs are plain integers, 8-byte aligned.
        let level3 = unsafe {
            match lib.stats_vector_io() {
                true => lib
                    .stats_as::<sys::StatsLevel3<sys::StatsLevel1Vectored>>(true)
                    .map(|s| (s.detailed.basic.basic, s.per_gpu_stats)),
                false => lib
                    .stats_as::<sys::StatsLevel3<sys::StatsLevel1>>(true)
                    .map(|s| (s.detailed.basic, s.per_gpu_stats)),
            }
        };
        let (basic, per_gpu) = match level3 {
            Ok((basic, gpus)) => (basic, per_gpu(&basic, &gpus)),
            Err(e) => {
                // SAFETY: as above.
                let basic = unsafe { lib.stats_as::<sys::StatsLevel1>(false)? };
                (basic, Err(format!("no Level 3 statistics: {e}")))
            }
        };
        Ok(IoStats {
            reads: basic.read_ops.into(),
            writes: basic.write_ops.into(),
            read_bytes: basic.read_bytes,
            write_bytes: basic.write_bytes,
            file_registrations: basic.hdl_register_ops.into(),
            buffer_registrations: basic.buf_register_ops.into(),
            per_gpu,
        })
    }
}

fn missing(lib: &Library) -> StatsError {
    StatsError::Missing {
        library: lib.io_library_path().display().to_string(),
        symbol: lib.stats_call(),
    }
}

/// The GPUs with any I/O, kept only when their bytes add up to Level 1's totals.
fn per_gpu(
    basic: &sys::StatsLevel1,
    gpus: &[sys::PerGpuStats; sys::STATS_MAX_GPUS],
) -> Result<Vec<GpuIoStats>, String> {
    let sum = |f: fn(&sys::PerGpuStats) -> u64| gpus.iter().map(f).fold(0u64, u64::wrapping_add);
    let (read, write) = (sum(|g| g.read_bytes), sum(|g| g.write_bytes));
    if (read, write) != (basic.read_bytes, basic.write_bytes) {
        return Err(format!(
            "the per-GPU counts ({read} bytes read, {write} written) do not add up to the \
             totals ({} and {})",
            basic.read_bytes, basic.write_bytes
        ));
    }
    Ok(gpus
        .iter()
        .zip(0u32..)
        .filter(|(g, _)| g.n_total_reads + g.n_total_writes + g.read_bytes + g.write_bytes > 0)
        .map(|(g, slot)| GpuIoStats {
            slot,
            uuid: g
                .uuid
                .iter()
                .any(|&b| b != 0)
                .then(|| g.uuid.iter().map(|&b| format!("{:02x}", b as u8)).collect()),
            read_bytes: g.read_bytes,
            write_bytes: g.write_bytes,
            fast_reads: g.n_nvfs_reads + g.n_p2p_reads,
            fallback_reads: g.n_posix_reads,
            fast_writes: g.n_nvfs_writes + g.n_p2p_writes,
            fallback_writes: g.n_posix_writes,
            unaligned_reads: g.n_unaligned_reads,
            unaligned_writes: g.n_unaligned_writes,
            read_errors: g.n_reads_err,
            write_errors: g.n_writes_err,
        })
        .collect())
}
