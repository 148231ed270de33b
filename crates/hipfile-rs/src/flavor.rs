//! Which vendor's pair of libraries is in use, with the few facts about it that need no
//! library loaded.

use std::path::Path;

/// Which vendor library fills the function table. Both have the same API shape and the same
/// 5000-based error codes up to 5038.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// AMD: libhipfile.so.0 + libamdhip64.so.{7,6,5}.
    HipFile,
    /// NVIDIA: libcufile.so.0 + libcuda.so.1.
    CuFile,
}

impl Flavor {
    /// Whose names and codes a library failure is read with.
    pub fn op_errors(self) -> crate::sys::OpErrorTable {
        match self {
            Flavor::HipFile => crate::sys::OpErrorTable::HipFile,
            Flavor::CuFile => crate::sys::OpErrorTable::CuFile,
        }
    }

    /// The library's name as its vendor writes it, for messages: `hipFile` or `cuFile`.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::HipFile => "hipFile",
            Flavor::CuFile => "cuFile",
        }
    }

    /// The kernel driver's device node that every GPU of this vendor needs (AMD's KFD,
    /// NVIDIA's control device). Without it the runtime can find no GPU.
    pub fn device_node(self) -> &'static Path {
        Path::new(match self {
            Flavor::HipFile => "/dev/kfd",
            Flavor::CuFile => "/dev/nvidiactl",
        })
    }

    /// Whether the vendor's kernel driver is there, so loading its libraries can be worth it.
    /// A cheap stat: a failed search for a library through the loader path costs tens of
    /// directory lookups (every path entry and glibc-hwcaps subdirectory, for every name),
    /// which measured 0.35 s with cold caches on the H200 machine for the four HIP names.
    pub fn driver_present(self) -> bool {
        // WSL2 exposes NVIDIA GPUs through /dev/dxg instead of the Linux driver's nodes.
        self.device_node().exists() || (self == Flavor::CuFile && Path::new("/dev/dxg").exists())
    }
}

impl std::fmt::Display for Flavor {
    /// The name used on command lines: `hipfile` or `cufile`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavor::HipFile => "hipfile",
            Flavor::CuFile => "cufile",
        })
    }
}

impl std::str::FromStr for Flavor {
    type Err = String;
    fn from_str(s: &str) -> Result<Flavor, String> {
        match s.to_ascii_lowercase().as_str() {
            "hipfile" => Ok(Flavor::HipFile),
            "cufile" => Ok(Flavor::CuFile),
            _ => Err(format!(
                "unknown GPU I/O library '{s}' (expected hipfile or cufile)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavor_names_round_trip() {
        for f in [Flavor::HipFile, Flavor::CuFile] {
            assert_eq!(f.to_string().parse::<Flavor>(), Ok(f));
        }
        assert_eq!("CuFile".parse::<Flavor>(), Ok(Flavor::CuFile));
        assert!("rocm".parse::<Flavor>().is_err());
    }
}
