//! Prints, as one JSON object, the ABI this crate assumes: the size, alignment and field
//! offsets of every `sys` struct, the vendors' enum values, and each symbol the function
//! tables resolve with its parameter and return sizes. `scripts/abi-check.py` compares it with
//! the vendors' own artefacts (AMD's hipFile wrappers, NVIDIA's cufile.h and libcufile), which
//! cannot be loaded into a Rust test.
//!
//! Fields are listed flattened in declaration order: a nested struct by its own fields, a
//! union by its largest member (the first on a tie), so that both sides reduce to the same
//! list of scalars however each spells its unions.
//!
//! One module per ABI area: `functions` (the function tables), `structs`, `stats` (the
//! statistics structs) and `enums`.

use std::mem::size_of;

use hipfile::sys::*;
use serde_json::{json, Value};

/// `[path, offset, size]` of a field; `$base` adds the offset of an enclosing field.
macro_rules! leaf {
    ($ty:ty, $base:expr, $path:literal, $field:ident, $fty:ty) => {
        json!([$path, $base + offset_of!($ty, $field), size_of::<$fty>()])
    };
}

mod enums;
mod functions;
mod stats;
mod structs;

use functions::{functions, CFunction};

fn main() {
    let hip_version = <HipFileVersionFn as CFunction>::shape();
    let cu_version = <CuFileVersionFn as CFunction>::shape();
    let mut structs = structs::structs();
    if let (Some(all), Value::Object(stats)) = (structs.as_object_mut(), stats::stats_structs()) {
        all.extend(stats);
    }
    let dump = json!({
        "pointer_size": size_of::<usize>(),
        "structs": structs,
        "enums": enums::enums(),
        "tables": {
            "hipfile": functions(&HIPFILE_SYMBOLS, hip_version),
            "cufile": functions(&CUFILE_SYMBOLS, cu_version),
        },
    });
    println!("{dump:#}");
}
