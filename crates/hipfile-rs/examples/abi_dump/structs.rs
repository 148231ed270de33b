//! The size, alignment and flattened fields of every `sys` struct but the statistics ones.

use std::mem::{align_of, offset_of, size_of};

use hipfile::sys::*;
use serde_json::{json, Value};

pub fn structs() -> Value {
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
