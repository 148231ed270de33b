//! The statistics structs, as the vendors' headers lay them out.

use std::mem::{align_of, offset_of, size_of};

use hipfile::sys::*;
use serde_json::{json, Value};

/// The statistics structs as cufile.h 1.19 has them (the vectored Level 1 and the levels
/// over it), and the per-GPU and counter structs both vendors share; hipFile 0.5's and cuFile
/// 1.15's Level 1 is `StatsLevel1`, checked here as the prefix of the vectored one.
pub fn stats_structs() -> Value {
    let base = offset_of!(StatsLevel1Vectored, basic);
    let vector = offset_of!(StatsLevel1Vectored, vector);
    let level1 = json!([
        leaf!(StatsLevel1, base, "read_ops", read_ops, OpCounter),
        leaf!(StatsLevel1, base, "write_ops", write_ops, OpCounter),
        leaf!(
            StatsLevel1,
            base,
            "hdl_register_ops",
            hdl_register_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "hdl_deregister_ops",
            hdl_deregister_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "buf_register_ops",
            buf_register_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "buf_deregister_ops",
            buf_deregister_ops,
            OpCounter
        ),
        leaf!(StatsLevel1, base, "read_bytes", read_bytes, u64),
        leaf!(StatsLevel1, base, "write_bytes", write_bytes, u64),
        leaf!(
            StatsLevel1,
            base,
            "read_bw_bytes_per_sec",
            read_bw_bytes_per_sec,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "write_bw_bytes_per_sec",
            write_bw_bytes_per_sec,
            u64
        ),
        leaf!(StatsLevel1, base, "read_lat_avg_us", read_lat_avg_us, u64),
        leaf!(StatsLevel1, base, "write_lat_avg_us", write_lat_avg_us, u64),
        leaf!(StatsLevel1, base, "read_ops_per_sec", read_ops_per_sec, u64),
        leaf!(
            StatsLevel1,
            base,
            "write_ops_per_sec",
            write_ops_per_sec,
            u64
        ),
        leaf!(StatsLevel1, base, "read_lat_sum_us", read_lat_sum_us, u64),
        leaf!(StatsLevel1, base, "write_lat_sum_us", write_lat_sum_us, u64),
        leaf!(
            StatsLevel1,
            base,
            "batch_submit_ops",
            batch_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_complete_ops",
            batch_complete_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_setup_ops",
            batch_setup_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_cancel_ops",
            batch_cancel_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_destroy_ops",
            batch_destroy_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_enqueued_ops",
            batch_enqueued_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_posix_enqueued_ops",
            batch_posix_enqueued_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_processed_ops",
            batch_processed_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_posix_processed_ops",
            batch_posix_processed_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_nvfs_submit_ops",
            batch_nvfs_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_p2p_submit_ops",
            batch_p2p_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_aio_submit_ops",
            batch_aio_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_iouring_submit_ops",
            batch_iouring_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_mixed_io_submit_ops",
            batch_mixed_io_submit_ops,
            OpCounter
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_total_submit_ops",
            batch_total_submit_ops,
            OpCounter
        ),
        leaf!(StatsLevel1, base, "batch_read_bytes", batch_read_bytes, u64),
        leaf!(
            StatsLevel1,
            base,
            "batch_write_bytes",
            batch_write_bytes,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_read_bw_bytes",
            batch_read_bw_bytes,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_write_bw_bytes",
            batch_write_bw_bytes,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_submit_lat_avg_us",
            batch_submit_lat_avg_us,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_completion_lat_avg_us",
            batch_completion_lat_avg_us,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_submit_ops_per_sec",
            batch_submit_ops_per_sec,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_complete_ops_per_sec",
            batch_complete_ops_per_sec,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_submit_lat_sum_us",
            batch_submit_lat_sum_us,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "batch_completion_lat_sum_us",
            batch_completion_lat_sum_us,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "last_batch_read_bytes",
            last_batch_read_bytes,
            u64
        ),
        leaf!(
            StatsLevel1,
            base,
            "last_batch_write_bytes",
            last_batch_write_bytes,
            u64
        ),
        leaf!(StatsVectorIo, vector, "readv_ops", readv_ops, OpCounter),
        leaf!(StatsVectorIo, vector, "writev_ops", writev_ops, OpCounter),
        leaf!(StatsVectorIo, vector, "readv_bytes", readv_bytes, u64),
        leaf!(StatsVectorIo, vector, "writev_bytes", writev_bytes, u64),
        leaf!(
            StatsVectorIo,
            vector,
            "readv_bw_bytes_per_sec",
            readv_bw_bytes_per_sec,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "writev_bw_bytes_per_sec",
            writev_bw_bytes_per_sec,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "readv_lat_avg_us",
            readv_lat_avg_us,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "writev_lat_avg_us",
            writev_lat_avg_us,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "readv_ops_per_sec",
            readv_ops_per_sec,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "writev_ops_per_sec",
            writev_ops_per_sec,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "readv_lat_sum_us",
            readv_lat_sum_us,
            u64
        ),
        leaf!(
            StatsVectorIo,
            vector,
            "writev_lat_sum_us",
            writev_lat_sum_us,
            u64
        ),
    ]);
    let per_gpu = json!([
        leaf!(PerGpuStats, 0, "uuid", uuid, [i8; GPU_UUID_LEN]),
        leaf!(PerGpuStats, 0, "read_bytes", read_bytes, u64),
        leaf!(
            PerGpuStats,
            0,
            "read_bw_bytes_per_sec",
            read_bw_bytes_per_sec,
            u64
        ),
        leaf!(PerGpuStats, 0, "read_utilization", read_utilization, u64),
        leaf!(PerGpuStats, 0, "read_duration_us", read_duration_us, u64),
        leaf!(PerGpuStats, 0, "n_total_reads", n_total_reads, u64),
        leaf!(PerGpuStats, 0, "n_p2p_reads", n_p2p_reads, u64),
        leaf!(PerGpuStats, 0, "n_nvfs_reads", n_nvfs_reads, u64),
        leaf!(PerGpuStats, 0, "n_posix_reads", n_posix_reads, u64),
        leaf!(PerGpuStats, 0, "n_unaligned_reads", n_unaligned_reads, u64),
        leaf!(PerGpuStats, 0, "n_dr_reads", n_dr_reads, u64),
        leaf!(PerGpuStats, 0, "n_sparse_regions", n_sparse_regions, u64),
        leaf!(PerGpuStats, 0, "n_inline_regions", n_inline_regions, u64),
        leaf!(PerGpuStats, 0, "n_reads_err", n_reads_err, u64),
        leaf!(PerGpuStats, 0, "write_bytes", write_bytes, u64),
        leaf!(
            PerGpuStats,
            0,
            "write_bw_bytes_per_sec",
            write_bw_bytes_per_sec,
            u64
        ),
        leaf!(PerGpuStats, 0, "write_utilization", write_utilization, u64),
        leaf!(PerGpuStats, 0, "write_duration_us", write_duration_us, u64),
        leaf!(PerGpuStats, 0, "n_total_writes", n_total_writes, u64),
        leaf!(PerGpuStats, 0, "n_p2p_writes", n_p2p_writes, u64),
        leaf!(PerGpuStats, 0, "n_nvfs_writes", n_nvfs_writes, u64),
        leaf!(PerGpuStats, 0, "n_posix_writes", n_posix_writes, u64),
        leaf!(
            PerGpuStats,
            0,
            "n_unaligned_writes",
            n_unaligned_writes,
            u64
        ),
        leaf!(PerGpuStats, 0, "n_dr_writes", n_dr_writes, u64),
        leaf!(PerGpuStats, 0, "n_writes_err", n_writes_err, u64),
        leaf!(PerGpuStats, 0, "n_mmap", n_mmap, u64),
        leaf!(PerGpuStats, 0, "n_mmap_ok", n_mmap_ok, u64),
        leaf!(PerGpuStats, 0, "n_mmap_err", n_mmap_err, u64),
        leaf!(PerGpuStats, 0, "n_mmap_free", n_mmap_free, u64),
        leaf!(PerGpuStats, 0, "reg_bytes", reg_bytes, u64),
    ]);
    type Level2 = StatsLevel2<StatsLevel1Vectored>;
    type Level3 = StatsLevel3<StatsLevel1Vectored>;
    json!({
        "OpCounter": {
            "vendors": ["cufile"],
            "size": size_of::<OpCounter>(), "align": align_of::<OpCounter>(),
            "fields": [
                leaf!(OpCounter, 0, "ok", ok, u64),
                leaf!(OpCounter, 0, "err", err, u64),
            ],
        },
        "StatsLevel1Vectored": {
            "vendors": ["cufile"],
            "size": size_of::<StatsLevel1Vectored>(), "align": align_of::<StatsLevel1Vectored>(),
            "fields": level1,
        },
        "StatsLevel2Vectored": {
            "vendors": ["cufile"],
            "size": size_of::<Level2>(), "align": align_of::<Level2>(),
            "fields": [
                leaf!(Level2, 0, "basic", basic, StatsLevel1Vectored),
                leaf!(Level2, 0, "read_size_kb_hist", read_size_kb_hist, [u64; STATS_HISTOGRAM_BUCKETS]),
                leaf!(Level2, 0, "write_size_kb_hist", write_size_kb_hist, [u64; STATS_HISTOGRAM_BUCKETS]),
            ],
        },
        "PerGpuStats": {
            "vendors": ["cufile"],
            "size": size_of::<PerGpuStats>(), "align": align_of::<PerGpuStats>(),
            "fields": per_gpu,
        },
        "StatsLevel3Vectored": {
            "vendors": ["cufile"],
            "size": size_of::<Level3>(), "align": align_of::<Level3>(),
            "fields": [
                leaf!(Level3, 0, "detailed", detailed, Level2),
                leaf!(Level3, 0, "num_gpus", num_gpus, u32),
                leaf!(Level3, 0, "per_gpu_stats", per_gpu_stats, [PerGpuStats; STATS_MAX_GPUS]),
            ],
        },
    })
}
