//! The function tables: each symbol a table resolves, by the names tried, with its
//! parameter and return sizes.

use std::mem::{size_of, MaybeUninit};

use hipfile::sys::*;
use serde_json::{json, Value};

/// A C function pointer type whose parameter and return sizes can be printed.
pub trait CFunction {
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
pub fn functions(names: &IoSymbols, version: Value) -> Value {
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
