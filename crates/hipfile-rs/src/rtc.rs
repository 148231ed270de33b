//! The run-time compiler: hiprtc (AMD) or NVRTC (NVIDIA), loaded like the other libraries,
//! turning a kernel source into a code object / CUBIN that [`crate::Device::load_module`]
//! loads. No CUDA or ROCm is needed to build this crate, and a machine without the compiler
//! only loses what needs it.

use std::ffi::{c_char, c_int, CString};
use std::path::Path;

use crate::runtime_ops::c_text;
use crate::{load, sys, Error, Flavor, LoadError};

/// A loaded hiprtc / NVRTC. `Send + Sync`: programs are made and dropped per call.
pub struct Compiler {
    flavor: Flavor,
    table: sys::RtcFunctions,
    /// Dropped last: the table points into it.
    lib: load::Loaded,
}

/// Where the compilers are looked for: `libhiprtc.so.7`, `.6`, `.5`, `libhiprtc.so` (AMD)
/// and `libnvrtc.so.13`, `.12`, `.11.2`, `.11.1`, `libnvrtc.so` (NVIDIA), on the loader
/// path, then in the flavor's directories (see the crate's search list).
impl Compiler {
    /// Finds and loads `flavor`'s compiler.
    pub fn load(flavor: Flavor) -> Result<Compiler, LoadError> {
        Compiler::load_from(flavor, None)
    }

    /// Loads `flavor`'s compiler from `path` alone when given, else finds it.
    pub fn load_from(flavor: Flavor, path: Option<&Path>) -> Result<Compiler, LoadError> {
        let (table, lib) = load::load_compiler(flavor, path)?;
        Ok(Compiler { flavor, table, lib })
    }

    /// The compiler for GPUs that `runtime` (the loaded HIP or CUDA runtime's file) drives:
    /// `path` alone when given, else the one found; where none is found, a HIP runtime that
    /// exports hiprtc itself (ROCm 5) is its own compiler. Never another ROCm's runtime: an
    /// older hiprtc given a newer GPU's architecture aborts the process (ROCm 5.2 on gfx942).
    pub fn load_for(
        flavor: Flavor,
        path: Option<&Path>,
        runtime: &Path,
    ) -> Result<Compiler, LoadError> {
        match Compiler::load_from(flavor, path) {
            Err(not_found) if path.is_none() && flavor == Flavor::HipFile => {
                Compiler::load_from(flavor, Some(runtime)).map_err(|_| not_found)
            }
            loaded => loaded,
        }
    }

    /// "hiprtc" or "NVRTC", for messages.
    pub fn name(&self) -> &'static str {
        match self.flavor {
            Flavor::HipFile => "hiprtc",
            Flavor::CuFile => "NVRTC",
        }
    }

    /// Where the library was found.
    pub fn path(&self) -> &Path {
        &self.lib.path
    }

    /// "NVRTC 12.4" / "hiprtc 6.2", when the library tells.
    pub fn version(&self) -> Option<String> {
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: valid out pointers.
        let status = unsafe { (self.table.version?)(&mut major, &mut minor) };
        (status == 0).then(|| format!("{} {major}.{minor}", self.name()))
    }

    fn names(&self) -> &'static sys::RtcSymbols {
        match self.flavor {
            Flavor::HipFile => &sys::HIPRTC_SYMBOLS,
            Flavor::CuFile => &sys::NVRTC_SYMBOLS,
        }
    }

    fn error(&self, call: &'static str, code: sys::RtcStatus, log: String) -> Error {
        // SAFETY: returns a static string for any value.
        let text = c_text(unsafe { (self.table.get_error_string)(code) })
            .unwrap_or_else(|| "unknown compiler error".to_owned());
        Error::Compile {
            call,
            code,
            text,
            log,
        }
    }

    fn check(&self, call: &'static str, code: sys::RtcStatus) -> Result<(), Error> {
        match code {
            0 => Ok(()),
            _ => Err(self.error(call, code, String::new())),
        }
    }

    /// Compiles `source` (named `name` in messages) with `options` into a loadable image
    /// (a code object on AMD, a CUBIN on NVIDIA). A source that does not compile is an
    /// [`Error::Compile`] carrying the compiler's log.
    pub fn compile(&self, source: &str, name: &str, options: &[&str]) -> Result<Vec<u8>, Error> {
        let names = self.names();
        let invalid = |what: &str| Error::Os(std::io::Error::other(format!("{what} holds a NUL")));
        let source = CString::new(source).map_err(|_| invalid("the kernel source"))?;
        let name = CString::new(name).map_err(|_| invalid("the program name"))?;
        let options = options
            .iter()
            .map(|o| CString::new(*o))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| invalid("a compiler option"))?;
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut program: sys::RtcProgram = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call; no headers.
        self.check(names.create_program, unsafe {
            (self.table.create_program)(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        })?;
        let program = Program {
            compiler: self,
            raw: program,
        };
        // SAFETY: a live program; the option strings outlive the call.
        let status = unsafe {
            (self.table.compile_program)(
                program.raw,
                option_ptrs.len() as c_int,
                option_ptrs.as_ptr(),
            )
        };
        if status != 0 {
            return Err(self.error(names.compile_program, status, program.log()));
        }
        let mut size = 0usize;
        // SAFETY: a compiled program; valid out pointer.
        self.check(names.get_code_size, unsafe {
            (self.table.get_code_size)(program.raw, &mut size)
        })?;
        let mut code = vec![0u8; size];
        // SAFETY: `code` has the size the compiler gave.
        self.check(names.get_code, unsafe {
            (self.table.get_code)(program.raw, code.as_mut_ptr().cast())
        })?;
        Ok(code)
    }
}

/// A program, destroyed on drop.
struct Program<'c> {
    compiler: &'c Compiler,
    raw: sys::RtcProgram,
}

impl Program<'_> {
    /// The compilation log, trimmed; empty when the compiler has none.
    fn log(&self) -> String {
        let table = &self.compiler.table;
        let mut size = 0usize;
        // SAFETY: a live program; valid out pointer.
        if unsafe { (table.get_log_size)(self.raw, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut log = vec![0u8; size];
        // SAFETY: `log` has the size the compiler gave.
        if unsafe { (table.get_log)(self.raw, log.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        String::from_utf8_lossy(&log[..end]).trim().to_owned()
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: created by CreateProgram, destroyed once.
        let _ = unsafe { (self.compiler.table.destroy_program)(&mut self.raw) };
    }
}
