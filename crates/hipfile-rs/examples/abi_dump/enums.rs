//! The vendors' enum values.

use hipfile::sys::*;
use serde_json::{json, Value};

/// Enum values by our constant names; the checker maps each to the vendor's enumerator.
pub fn enums() -> Value {
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
