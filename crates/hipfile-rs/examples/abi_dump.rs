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
        use_count
    );
    out.push(json!({ "field": "get_version", "symbols": [names.get_version], "shape": version }));
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
    let dump = json!({
        "pointer_size": size_of::<usize>(),
        "structs": structs(),
        "enums": enums(),
        "tables": {
            "hipfile": functions(&HIPFILE_SYMBOLS, hip_version),
            "cufile": functions(&CUFILE_SYMBOLS, cu_version),
        },
    });
    println!("{dump:#}");
}
