//! The I/O library (libhipfile / libcufile) with its runtime, and the driver it opens. Every
//! call into the I/O library lives in [`crate::io_ops`]; the devices they hand out are made
//! in [`crate::device`].

use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{decode_file_error, Failure};
use crate::runtime::Runtime;
use crate::{load, sys, Error, Flavor, LibraryPaths, LoadError};

/// The loaded libraries and their resolved function table. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Library {
    pub(crate) inner: Arc<LibraryInner>,
}

pub(crate) struct LibraryInner {
    pub(crate) io: sys::IoFunctions,
    pub(crate) names: &'static sys::IoSymbols,
    runtime: Runtime,
    /// Dropped after `io`, which points into it.
    io_lib: load::Loaded,
    read_ahead: crate::readahead::ReadAhead,
}

impl Library {
    /// Finds and loads the I/O library and the GPU runtime of `flavor` (see the crate's
    /// search list).
    pub fn load(flavor: Flavor) -> Result<Library, LoadError> {
        Library::load_from(flavor, &LibraryPaths::default())
    }

    /// Loads the I/O library and the GPU runtime of `flavor`, each from its exact path in
    /// `paths` when given, else found by the search.
    pub fn load_from(flavor: Flavor, paths: &LibraryPaths) -> Result<Library, LoadError> {
        // Before anything is mapped, so the reads overlap the loading; stopped on return if
        // the load fails.
        let read_ahead = crate::readahead::start(flavor, paths);
        // The runtime first: the I/O library needs it, and on a machine with neither the
        // runtime is the more telling thing to report missing.
        let runtime = Runtime::load_from(flavor, paths.runtime.as_deref())?;
        let (io, io_lib) = load::load_io(flavor, paths.io.as_deref())?;
        Ok(Library {
            inner: Arc::new(LibraryInner {
                io,
                names: match flavor {
                    Flavor::HipFile => &sys::HIPFILE_SYMBOLS,
                    Flavor::CuFile => &sys::CUFILE_SYMBOLS,
                },
                runtime,
                io_lib,
                read_ahead,
            }),
        })
    }

    pub fn flavor(&self) -> Flavor {
        self.inner.runtime.flavor()
    }

    /// Where libhipfile / libcufile was found.
    pub fn io_library_path(&self) -> &Path {
        &self.inner.io_lib.path
    }

    /// The files asked to be read ahead of loading (the likely runtime and I/O library).
    pub fn read_ahead(&self) -> &[PathBuf] {
        self.inner.read_ahead.files()
    }

    /// Where libamdhip64 / libcuda was found.
    pub fn runtime_library_path(&self) -> &Path {
        self.inner.runtime.path()
    }

    /// The GPU runtime this library runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    pub fn device_count(&self) -> Result<u32, Error> {
        self.inner.runtime.device_count()
    }

    /// Device `index`'s PCI address; see [`Runtime::pci_bus_id`].
    pub fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error> {
        self.inner.runtime.pci_bus_id(index)
    }

    /// Opens the driver once; it is closed when the last clone of the `Driver` is dropped.
    pub fn open_driver(&self) -> Result<Driver, Error> {
        if self.flavor() == Flavor::CuFile {
            // cuFile runs on the driver API, which refuses every call before cuInit.
            self.inner.runtime.cuda()?;
        }
        self.driver_open()?;
        Ok(Driver {
            inner: Arc::new(DriverInner { lib: self.clone() }),
        })
    }

    pub(crate) fn error(&self, call: &'static str, failure: Failure) -> Error {
        Error::from_failure(
            self.flavor().op_errors(),
            call,
            failure,
            |c: c_int| self.op_text(c),
            |c| self.inner.runtime.error_text(c),
        )
    }

    pub(crate) fn check_file_error(
        &self,
        call: &'static str,
        e: sys::FileError,
    ) -> Result<(), Error> {
        decode_file_error(e).map_err(|f| self.error(call, f))
    }

    pub(crate) fn invalid(&self, what: String) -> Error {
        Error::Library {
            code: sys::INVALID_VALUE,
            name: "InvalidValue",
            text: what,
        }
    }
}

/// An open hipFile/cuFile driver. Clone shares it; closed once, on the last drop.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<DriverInner>,
}

struct DriverInner {
    lib: Library,
}

impl Drop for DriverInner {
    fn drop(&mut self) {
        // SAFETY: balances the DriverOpen that created this; every object using the driver
        // holds a clone of it, so none is alive now.
        unsafe { self.lib.driver_close() };
    }
}

impl Driver {
    pub fn library(&self) -> &Library {
        &self.inner.lib
    }
}
