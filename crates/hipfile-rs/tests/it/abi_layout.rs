//! Pins the x86_64 Linux layout of every struct shared with the C libraries (sizes and field
//! offsets from hipfile.h 0.2.0, which cufile.h matches).

use std::mem::{align_of, offset_of, size_of};

use hipfile::sys::*;

#[test]
fn file_error_is_two_ints() {
    assert_eq!(size_of::<FileError>(), 8);
    assert_eq!(offset_of!(FileError, err), 0);
    assert_eq!(offset_of!(FileError, drv_err), 4);
}

#[test]
fn file_descr() {
    assert_eq!(size_of::<FileDescr>(), 24);
    assert_eq!(align_of::<FileDescr>(), 8);
    assert_eq!(offset_of!(FileDescr, handle_type), 0);
    assert_eq!(offset_of!(FileDescr, handle), 8);
    assert_eq!(offset_of!(FileDescr, fs_ops), 16);
    assert_eq!(size_of::<DescrHandle>(), 8);
    let d = FileDescr::from_fd(7);
    assert_eq!(d.handle_type, HANDLE_TYPE_OPAQUE_FD);
    assert_eq!(HANDLE_TYPE_OPAQUE_FD, 1);
    // SAFETY: from_fd writes the fd member.
    assert_eq!(unsafe { d.handle.fd }, 7);
    assert!(d.fs_ops.is_null());
}

#[test]
fn driver_props() {
    assert_eq!(size_of::<DriverProps>(), 72);
    assert_eq!(offset_of!(DriverProps, nvfs), 0);
    assert_eq!(offset_of!(DriverPropsNvfs, major_version), 0);
    assert_eq!(offset_of!(DriverPropsNvfs, minor_version), 4);
    assert_eq!(
        offset_of!(DriverProps, nvfs) + offset_of!(DriverPropsNvfs, poll_thresh_size),
        8
    );
    assert_eq!(offset_of!(DriverPropsNvfs, max_direct_io_size), 16);
    assert_eq!(offset_of!(DriverPropsNvfs, driver_status_flags), 24);
    assert_eq!(offset_of!(DriverPropsNvfs, driver_control_flags), 28);
    assert_eq!(offset_of!(DriverProps, feature_flags), 32);
    assert_eq!(offset_of!(DriverProps, max_device_cache_size), 40);
    assert_eq!(offset_of!(DriverProps, per_buffer_cache_size), 48);
    assert_eq!(offset_of!(DriverProps, max_device_pinned_mem_size), 56);
    assert_eq!(offset_of!(DriverProps, max_batch_io_count), 64);
    assert_eq!(offset_of!(DriverProps, max_batch_io_timeout_msecs), 68);
}

#[test]
fn batch_structs() {
    assert_eq!(size_of::<IoParams>(), 64);
    assert_eq!(offset_of!(IoParams, mode), 0);
    assert_eq!(offset_of!(IoParams, batch), 8);
    assert_eq!(offset_of!(IoParamsBatch, dev_ptr_base), 0);
    assert_eq!(offset_of!(IoParamsBatch, file_offset), 8);
    assert_eq!(offset_of!(IoParamsBatch, dev_ptr_offset), 16);
    assert_eq!(offset_of!(IoParamsBatch, size), 24);
    assert_eq!(offset_of!(IoParams, fh), 40);
    assert_eq!(offset_of!(IoParams, opcode), 48);
    assert_eq!(offset_of!(IoParams, cookie), 56);

    assert_eq!(size_of::<IoEvents>(), 24);
    assert_eq!(offset_of!(IoEvents, cookie), 0);
    assert_eq!(offset_of!(IoEvents, status), 8);
    assert_eq!(offset_of!(IoEvents, ret), 16);
}

#[test]
fn constants() {
    assert_eq!(
        [
            STREAM_FIXED_BUF_OFFSET,
            STREAM_FIXED_FILE_OFFSET,
            STREAM_FIXED_FILE_SIZE,
            STREAM_PAGE_ALIGNED_INPUTS,
            STREAM_FLAGS_MASK
        ],
        [1, 2, 4, 8, 0xf]
    );
    assert_eq!(MAX_IO_BYTES, 0x7fff_f000);
    assert_eq!(BASE_ERR, 5000);
    assert_eq!(HANDLE_NOT_REGISTERED, 5027);
    assert_eq!(ASYNC_NOT_SUPPORTED, 5038);
    // Every code of each vendor is named except the two both headers leave unused: hipFile's
    // end at 5039, cuFile's at 5050.
    for (table, last) in [(OpErrorTable::HipFile, 5039), (OpErrorTable::CuFile, 5050)] {
        for code in 5001..=5060 {
            assert_eq!(
                op_error_info(table, code).is_some(),
                code <= last && code != 5021 && code != 5032,
                "{table:?} code {code}"
            );
        }
    }
    assert!(is_op_error(-5001) && is_op_error(5039) && !is_op_error(-5000) && !is_op_error(-1));
}

/// The statistics structs: hipFile 0.5's and cuFile 1.15's Level 1, cuFile 1.19's with its
/// vector I/O counters, and Level 3 over each (scripts/abi-check.py checks cufile.h's).
#[test]
fn stats_structs() {
    assert_eq!(size_of::<OpCounter>(), 16);
    assert_eq!(size_of::<StatsLevel1>(), 512);
    assert_eq!(size_of::<StatsLevel1Vectored>(), 624);
    assert_eq!(size_of::<PerGpuStats>(), 248);
    assert_eq!(offset_of!(StatsLevel1, read_bytes), 96);
    assert_eq!(offset_of!(StatsLevel3<StatsLevel1>, num_gpus), 1024);
    assert_eq!(offset_of!(StatsLevel3<StatsLevel1>, per_gpu_stats), 1032);
    assert_eq!(size_of::<StatsLevel3<StatsLevel1>>(), 1032 + 16 * 248);
    assert_eq!(
        size_of::<StatsLevel3<StatsLevel1Vectored>>(),
        1144 + 16 * 248
    );
    assert_eq!(offset_of!(PerGpuStats, n_nvfs_reads), 64);
    assert_eq!(offset_of!(PerGpuStats, n_posix_writes), 176);
}
