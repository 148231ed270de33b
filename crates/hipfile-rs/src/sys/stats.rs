//! The statistics structs (cufile.h 1.15 and later; hipfile.h 0.5 and later), plain integers
//! every bit pattern of which is valid. `scripts/abi-check.py` holds them to cufile.h 1.19.

use std::ffi::c_char;

/// `CUfileOpCounter_t` / `hipFileOpCounter_t`: one kind of call, by outcome.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounter {
    pub ok: u64,
    pub err: u64,
}

/// `hipFileStatsLevel1_t` (hipFile 0.5) and `CUfileStatsLevel1_t` of the cuFile releases
/// without vector I/O (1.15): 512 bytes. Releases with `cuFileReadv` append
/// [`StatsVectorIo`] ([`StatsLevel1Vectored`]). Fields a library does not track read 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsLevel1 {
    pub read_ops: OpCounter,
    pub write_ops: OpCounter,
    pub hdl_register_ops: OpCounter,
    pub hdl_deregister_ops: OpCounter,
    pub buf_register_ops: OpCounter,
    pub buf_deregister_ops: OpCounter,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_bw_bytes_per_sec: u64,
    pub write_bw_bytes_per_sec: u64,
    pub read_lat_avg_us: u64,
    pub write_lat_avg_us: u64,
    pub read_ops_per_sec: u64,
    pub write_ops_per_sec: u64,
    pub read_lat_sum_us: u64,
    pub write_lat_sum_us: u64,
    pub batch_submit_ops: OpCounter,
    pub batch_complete_ops: OpCounter,
    pub batch_setup_ops: OpCounter,
    pub batch_cancel_ops: OpCounter,
    pub batch_destroy_ops: OpCounter,
    pub batch_enqueued_ops: OpCounter,
    pub batch_posix_enqueued_ops: OpCounter,
    pub batch_processed_ops: OpCounter,
    pub batch_posix_processed_ops: OpCounter,
    pub batch_nvfs_submit_ops: OpCounter,
    pub batch_p2p_submit_ops: OpCounter,
    pub batch_aio_submit_ops: OpCounter,
    pub batch_iouring_submit_ops: OpCounter,
    pub batch_mixed_io_submit_ops: OpCounter,
    pub batch_total_submit_ops: OpCounter,
    pub batch_read_bytes: u64,
    pub batch_write_bytes: u64,
    pub batch_read_bw_bytes: u64,
    pub batch_write_bw_bytes: u64,
    pub batch_submit_lat_avg_us: u64,
    pub batch_completion_lat_avg_us: u64,
    pub batch_submit_ops_per_sec: u64,
    pub batch_complete_ops_per_sec: u64,
    pub batch_submit_lat_sum_us: u64,
    pub batch_completion_lat_sum_us: u64,
    pub last_batch_read_bytes: u64,
    pub last_batch_write_bytes: u64,
}

/// The vector I/O (`cuFileReadv`/`Writev`) counters cuFile 1.19 appends to Level 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsVectorIo {
    pub readv_ops: OpCounter,
    pub writev_ops: OpCounter,
    pub readv_bytes: u64,
    pub writev_bytes: u64,
    pub readv_bw_bytes_per_sec: u64,
    pub writev_bw_bytes_per_sec: u64,
    pub readv_lat_avg_us: u64,
    pub writev_lat_avg_us: u64,
    pub readv_ops_per_sec: u64,
    pub writev_ops_per_sec: u64,
    pub readv_lat_sum_us: u64,
    pub writev_lat_sum_us: u64,
}

/// `CUfileStatsLevel1_t` of a cuFile that exports `cuFileReadv` (cufile.h 1.19: 624 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsLevel1Vectored {
    pub basic: StatsLevel1,
    pub vector: StatsVectorIo,
}

/// Buckets of each I/O size histogram in Level 2.
pub const STATS_HISTOGRAM_BUCKETS: usize = 32;
/// `CUFILE_GPU_UUID_LEN` / `HIPFILE_GPU_UUID_LEN`.
pub const GPU_UUID_LEN: usize = 16;
/// The per-GPU slots of Level 3 (cufile_stats.h's maxGpus, `HIPFILE_MAX_GPUS`).
pub const STATS_MAX_GPUS: usize = 16;

/// `CUfileStatsLevel2_t` / `hipFileStatsLevel2_t`, over the vendor's Level 1 `L1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StatsLevel2<L1> {
    pub basic: L1,
    pub read_size_kb_hist: [u64; STATS_HISTOGRAM_BUCKETS],
    pub write_size_kb_hist: [u64; STATS_HISTOGRAM_BUCKETS],
}

/// `CUfilePerGpuStats_t` / `hipFilePerGpuStats_t` (248 bytes; cuFile spells the written
/// bytes `writes_bytes`). "nvfs" is the library's fast path (nvidia-fs, AMD's AIS), "posix"
/// its fallback through host memory, "p2p" PCIe peer-to-peer DMA.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PerGpuStats {
    pub uuid: [c_char; GPU_UUID_LEN],
    pub read_bytes: u64,
    pub read_bw_bytes_per_sec: u64,
    pub read_utilization: u64,
    pub read_duration_us: u64,
    pub n_total_reads: u64,
    pub n_p2p_reads: u64,
    pub n_nvfs_reads: u64,
    pub n_posix_reads: u64,
    pub n_unaligned_reads: u64,
    pub n_dr_reads: u64,
    pub n_sparse_regions: u64,
    pub n_inline_regions: u64,
    pub n_reads_err: u64,
    pub write_bytes: u64,
    pub write_bw_bytes_per_sec: u64,
    pub write_utilization: u64,
    pub write_duration_us: u64,
    pub n_total_writes: u64,
    pub n_p2p_writes: u64,
    pub n_nvfs_writes: u64,
    pub n_posix_writes: u64,
    pub n_unaligned_writes: u64,
    pub n_dr_writes: u64,
    pub n_writes_err: u64,
    pub n_mmap: u64,
    pub n_mmap_ok: u64,
    pub n_mmap_err: u64,
    pub n_mmap_free: u64,
    pub reg_bytes: u64,
}

/// `CUfileStatsLevel3_t` / `hipFileStatsLevel3_t`, over the vendor's Level 1 `L1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StatsLevel3<L1> {
    pub detailed: StatsLevel2<L1>,
    pub num_gpus: u32,
    pub per_gpu_stats: [PerGpuStats; STATS_MAX_GPUS],
}

impl<L1: Default> Default for StatsLevel3<L1> {
    fn default() -> Self {
        StatsLevel3 {
            detailed: StatsLevel2 {
                basic: L1::default(),
                read_size_kb_hist: [0; STATS_HISTOGRAM_BUCKETS],
                write_size_kb_hist: [0; STATS_HISTOGRAM_BUCKETS],
            },
            num_gpus: 0,
            per_gpu_stats: [PerGpuStats::default(); STATS_MAX_GPUS],
        }
    }
}
