//! Prints, as one JSON object, the ABI this crate assumes: the size, alignment and field
//! offsets of every `sys` struct, the vendors' enum values, and each symbol the function
//! tables resolve with its parameter and return sizes. `scripts/abi-check.py` compares it with
//! the vendors' own artefacts (AMD's hipFile wrappers, NVIDIA's cufile.h and libcufile), which
//! cannot be loaded into a Rust test.
//!
//! Fields are listed flattened in declaration order: a nested struct by its own fields, a
//! union by its largest member (the first on a tie), so that both sides reduce to the same
//! list of scalars however each spells its unions.

use std::mem::{align_of, offset_of, size_of, MaybeUninit};

use hipfile::sys::*;
use serde_json::{json, Value};

/// A C function pointer type whose parameter and return sizes can be printed.
trait CFunction {
    fn shape() -> Value;
}

macro_rules! c_function {
    ($($arg:ident),*) => {
        impl<R, $($arg),*> CFunction for unsafe extern "C" fn($($arg),*) -> R {
            fn shape() -> Value {
                json!({ "params": [$(size_of::<$arg>()),*], "ret": size_of::<R>() })
            }
        }
    };
}
c_function!();
c_function!(A);
c_function!(A, B);
c_function!(A, B, C);
c_function!(A, B, C, D);
c_function!(A, B, C, D, E);
c_function!(A, B, C, D, E, F);
c_function!(A, B, C, D, E, F, G);

impl<T: CFunction> CFunction for Option<T> {
    fn shape() -> Value {
        T::shape()
    }
}

/// The shape of the function type behind a field pointer (the field itself is never read).
fn shape_at<T: CFunction>(_field: *const T) -> Value {
    T::shape()
}

/// The names a table field may be resolved by.
trait SymbolNames {
    fn list(&self) -> Vec<&'static str>;
}
impl SymbolNames for &'static str {
    fn list(&self) -> Vec<&'static str> {
        vec![self]
    }
}
impl SymbolNames for &'static [&'static str] {
    fn list(&self) -> Vec<&'static str> {
        self.to_vec()
    }
}
impl SymbolNames for Option<&'static str> {
    fn list(&self) -> Vec<&'static str> {
        self.iter().copied().collect()
    }
}

/// One entry per `IoFunctions` field: the names tried and the function's shape.
fn functions(names: &IoSymbols, version: Value) -> Value {
    let table = MaybeUninit::<IoFunctions>::uninit();
    let t = table.as_ptr();
    let mut out = Vec::new();
    macro_rules! field {
        ($($f:ident),*) => {$(
            // SAFETY: only the field's address is formed, nothing is read.
            let shape = shape_at(unsafe { &raw const (*t).$f });
            out.push(json!({ "field": stringify!($f), "symbols": names.$f.list(), "shape": shape }));
        )*};
    }
    field!(
        driver_open,
        driver_close,
        handle_register,
        handle_deregister,
        buf_register,
        buf_deregister,
        read,
        write,
        read_async,
        write_async,
        stream_register,
        stream_deregister,
        get_op_error_string,
        use_count,
        get_stats_l1,
        get_stats_l3,
        set_stats_level,
        stats_start
    );
    out.push(json!({ "field": "get_version", "symbols": [names.get_version], "shape": version }));
    // Statistics arrived in hipFile 0.5 (and cuFile 1.15): a vendor artefact of an older
    // release cannot have them.
    for fn_entry in &mut out {
        let stats = matches!(
            fn_entry["field"].as_str(),
            Some("get_stats_l1" | "get_stats_l3" | "set_stats_level" | "stats_start")
        );
        if stats {
            fn_entry["since"] = json!({ "hipfile": [0, 5, 0], "cufile": [1, 15, 0] });
        }
    }
    json!({ "functions": out, "all_symbols": names.names() })
}

/// `[path, offset, size]` of a field; `$base` adds the offset of an enclosing field.
macro_rules! leaf {
    ($ty:ty, $base:expr, $path:literal, $field:ident, $fty:ty) => {
        json!([$path, $base + offset_of!($ty, $field), size_of::<$fty>()])
    };
}

fn structs() -> Value {
    let nvfs = offset_of!(DriverProps, nvfs);
    let batch = offset_of!(IoParams, batch);
    json!({
        "FileError": {
            "vendors": ["hipfile", "cufile"],
            "size": size_of::<FileError>(), "align": align_of::<FileError>(),
            "fields": [
                leaf!(FileError, 0, "err", err, i32),
                leaf!(FileError, 0, "drv_err", drv_err, RuntimeStatus),
            ],
        },
        "FileDescr": {
            "vendors": ["hipfile", "cufile"],
            "size": size_of::<FileDescr>(), "align": align_of::<FileDescr>(),
            "fields": [
                leaf!(FileDescr, 0, "handle_type", handle_type, i32),
                leaf!(DescrHandle, offset_of!(FileDescr, handle), "handle.h_file", h_file, *mut u8),
                leaf!(FileDescr, 0, "fs_ops", fs_ops, *const u8),
            ],
        },
        // cuFile's CUfileDrvProps has 32-bit cache and pinned sizes where hipFile has 64-bit
        // ones; nothing here passes it to cuFile.
        "DriverProps": {
            "vendors": ["hipfile"],
            "size": size_of::<DriverProps>(), "align": align_of::<DriverProps>(),
            "fields": [
                leaf!(DriverPropsNvfs, nvfs, "nvfs.major_version", major_version, u32),
                leaf!(DriverPropsNvfs, nvfs, "nvfs.minor_version", minor_version, u32),
                leaf!(DriverPropsNvfs, nvfs, "nvfs.poll_thresh_size", poll_thresh_size, u64),
                leaf!(DriverPropsNvfs, nvfs, "nvfs.max_direct_io_size", max_direct_io_size, u64),
                leaf!(DriverPropsNvfs, nvfs, "nvfs.driver_status_flags", driver_status_flags, u32),
                leaf!(DriverPropsNvfs, nvfs, "nvfs.driver_control_flags", driver_control_flags, u32),
                leaf!(DriverProps, 0, "feature_flags", feature_flags, u32),
                leaf!(DriverProps, 0, "max_device_cache_size", max_device_cache_size, u64),
                leaf!(DriverProps, 0, "per_buffer_cache_size", per_buffer_cache_size, u64),
                leaf!(DriverProps, 0, "max_device_pinned_mem_size", max_device_pinned_mem_size, u64),
                leaf!(DriverProps, 0, "max_batch_io_count", max_batch_io_count, u32),
                leaf!(DriverProps, 0, "max_batch_io_timeout_msecs", max_batch_io_timeout_msecs, u32),
            ],
        },
        "IoParams": {
            "vendors": ["hipfile", "cufile"],
            "size": size_of::<IoParams>(), "align": align_of::<IoParams>(),
            "fields": [
                leaf!(IoParams, 0, "mode", mode, i32),
                leaf!(IoParamsBatch, batch, "u.batch.dev_ptr_base", dev_ptr_base, *mut u8),
                leaf!(IoParamsBatch, batch, "u.batch.file_offset", file_offset, i64),
                leaf!(IoParamsBatch, batch, "u.batch.dev_ptr_offset", dev_ptr_offset, i64),
                leaf!(IoParamsBatch, batch, "u.batch.size", size, usize),
                leaf!(IoParams, 0, "fh", fh, FileHandleRaw),
                leaf!(IoParams, 0, "opcode", opcode, i32),
                leaf!(IoParams, 0, "cookie", cookie, *mut u8),
            ],
        },
        "IoEvents": {
            "vendors": ["hipfile", "cufile"],
            "size": size_of::<IoEvents>(), "align": align_of::<IoEvents>(),
            "fields": [
                leaf!(IoEvents, 0, "cookie", cookie, *mut u8),
                leaf!(IoEvents, 0, "status", status, i32),
                leaf!(IoEvents, 0, "ret", ret, usize),
            ],
        },
    })
}

/// The statistics structs as cufile.h 1.19 has them (the vectored Level 1 and the levels
/// over it), and the per-GPU and counter structs both vendors share; hipFile 0.5's and cuFile
/// 1.15's Level 1 is `StatsLevel1`, checked here as the prefix of the vectored one.
fn stats_structs() -> Value {
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

/// Enum values by our constant names; the checker maps each to the vendor's enumerator.
fn enums() -> Value {
    let op_errors = |table| {
        (0..=5100)
            .filter_map(|code| op_error_info(table, code).map(|(name, _)| json!([name, code])))
            .collect::<Vec<_>>()
    };
    json!({
        "op_errors": {
            "hipfile": op_errors(OpErrorTable::HipFile),
            "cufile": op_errors(OpErrorTable::CuFile),
        },
        "handle_types": [
            ["HandleTypeOpaqueFD", HANDLE_TYPE_OPAQUE_FD],
            ["HandleTypeOpaqueWin32", HANDLE_TYPE_OPAQUE_WIN32],
            ["HandleTypeUserspaceFS", HANDLE_TYPE_USERSPACE_FS],
        ],
        "opcodes": [["BatchRead", BATCH_READ], ["BatchWrite", BATCH_WRITE]],
        "batch_modes": [["Batch", BATCH_MODE]],
        "statuses": [
            ["Waiting", STATUS_WAITING],
            ["Pending", STATUS_PENDING],
            ["Invalid", STATUS_INVALID],
            ["Canceled", STATUS_CANCELED],
            ["Complete", STATUS_COMPLETE],
            ["Timeout", STATUS_TIMEOUT],
            ["Failed", STATUS_FAILED],
        ],
        "base_err": BASE_ERR,
    })
}

fn main() {
    let hip_version = <HipFileVersionFn as CFunction>::shape();
    let cu_version = <CuFileVersionFn as CFunction>::shape();
    let mut structs = structs();
    if let (Some(all), Value::Object(stats)) = (structs.as_object_mut(), stats_structs()) {
        all.extend(stats);
    }
    let dump = json!({
        "pointer_size": size_of::<usize>(),
        "structs": structs,
        "enums": enums(),
        "tables": {
            "hipfile": functions(&HIPFILE_SYMBOLS, hip_version),
            "cufile": functions(&CUFILE_SYMBOLS, cu_version),
        },
    });
    println!("{dump:#}");
}
