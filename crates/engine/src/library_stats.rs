//! The I/O library's own counters over a run, in the engine's words: its callers print and
//! serialize them without knowing hipfile-rs.

use serde::Serialize;

/// The library's counters (`Config::library_stats`), or why there are none (the host
/// backend, the bounce route, a release without statistics, not asked for).
pub type LibraryStats = Result<LibraryCounters, String>;

/// Calls by outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Calls {
    pub ok: u64,
    pub failed: u64,
}

impl From<hipfile::OpCount> for Calls {
    fn from(c: hipfile::OpCount) -> Calls {
        Calls {
            ok: c.ok,
            failed: c.failed,
        }
    }
}

/// What the library says its own calls did over the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LibraryCounters {
    pub reads: Calls,
    pub writes: Calls,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub file_registrations: Calls,
    pub buffer_registrations: Calls,
    /// Per GPU with I/O: fast path against fallback; null when the library gives no
    /// per-GPU counts, with the reason in `per_gpu_absent`.
    pub per_gpu: Option<Vec<GpuCounters>>,
    pub per_gpu_absent: Option<String>,
}

/// One GPU's library calls by path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GpuCounters {
    /// The slot in the library's table (hipFile: the GPU's ordinal).
    pub slot: u32,
    pub uuid: Option<String>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub fast_path_reads: u64,
    pub fallback_reads: u64,
    pub fast_path_writes: u64,
    pub fallback_writes: u64,
    pub unaligned_reads: u64,
    pub unaligned_writes: u64,
    pub read_errors: u64,
    pub write_errors: u64,
}

impl From<hipfile::IoStats> for LibraryCounters {
    fn from(s: hipfile::IoStats) -> LibraryCounters {
        let (per_gpu, per_gpu_absent) = match s.per_gpu {
            Ok(gpus) => (
                Some(gpus.into_iter().map(GpuCounters::from).collect()),
                None,
            ),
            Err(why) => (None, Some(why)),
        };
        LibraryCounters {
            reads: s.reads.into(),
            writes: s.writes.into(),
            read_bytes: s.read_bytes,
            write_bytes: s.write_bytes,
            file_registrations: s.file_registrations.into(),
            buffer_registrations: s.buffer_registrations.into(),
            per_gpu,
            per_gpu_absent,
        }
    }
}

impl From<hipfile::GpuIoStats> for GpuCounters {
    fn from(g: hipfile::GpuIoStats) -> GpuCounters {
        GpuCounters {
            slot: g.slot,
            uuid: g.uuid,
            read_bytes: g.read_bytes,
            write_bytes: g.write_bytes,
            fast_path_reads: g.fast_reads,
            fallback_reads: g.fallback_reads,
            fast_path_writes: g.fast_writes,
            fallback_writes: g.fallback_writes,
            unaligned_reads: g.unaligned_reads,
            unaligned_writes: g.unaligned_writes,
            read_errors: g.read_errors,
            write_errors: g.write_errors,
        }
    }
}
