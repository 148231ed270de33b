//! The GPU runtime alone (libamdhip64 or libcuda): loaded, initialised once, and able to name
//! its own errors. Every call into it lives in [`crate::runtime_ops`].

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::error::{decode_runtime_status, Failure};
use crate::{load, sys, Error, Flavor, LoadError};

/// The GPU runtime alone: enough to count devices on a machine that has no hipFile/cuFile.
/// Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

pub(crate) struct RuntimeInner {
    flavor: Flavor,
    pub(crate) table: sys::RuntimeFunctions,
    /// Modules and launches, where the runtime has them (see [`crate::Module`]).
    pub(crate) modules: Option<sys::ModuleFunctions>,
    /// `cuInit(0)`'s status, run once before the first CUDA call.
    pub(crate) cuda_init: OnceLock<sys::RuntimeStatus>,
    /// Dropped last: the table points into it.
    lib: load::Loaded,
}

impl Runtime {
    /// Finds and loads the GPU runtime of `flavor` (see the crate's search list).
    pub fn load(flavor: Flavor) -> Result<Runtime, LoadError> {
        Runtime::load_from(flavor, None)
    }

    /// Loads the GPU runtime of `flavor` from `path` alone when given, else finds it.
    pub fn load_from(flavor: Flavor, path: Option<&Path>) -> Result<Runtime, LoadError> {
        let (table, lib) = load::load_runtime(flavor, path)?;
        let modules = load::module_functions(&lib, flavor);
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                flavor,
                table,
                modules,
                cuda_init: OnceLock::new(),
                lib,
            }),
        })
    }

    pub fn flavor(&self) -> Flavor {
        self.inner.flavor
    }

    /// Whether the runtime has the module and launch calls [`crate::Module`] needs.
    pub fn has_modules(&self) -> bool {
        self.inner.modules.is_some()
    }

    /// Where libamdhip64 / libcuda was found.
    pub fn path(&self) -> &Path {
        &self.inner.lib.path
    }

    pub(crate) fn error(&self, call: &'static str, code: sys::RuntimeStatus) -> Error {
        Error::from_failure(
            self.inner.flavor.op_errors(),
            call,
            Failure::Runtime(code),
            |_| None,
            |c| self.error_text(c),
        )
    }

    pub(crate) fn check(
        &self,
        call: &'static str,
        status: sys::RuntimeStatus,
    ) -> Result<(), Error> {
        decode_runtime_status(status).map_err(|_| self.error(call, status))
    }
}
