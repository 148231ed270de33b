//! Loading: exact paths, typed errors that list what was searched, and the genuine HIP runtimes
//! (Debian's libamdhip64.so.5 of ROCm 5.2, and the newer 5.7 and 6.4 that
//! scripts/vendor-artefacts.sh unpacks) on a machine without an AMD GPU.

use std::path::{Path, PathBuf};
use test_support::skip::skip;

use hipfile::{Flavor, Library, LibraryPaths, LoadError, Runtime};

/// Exact paths for the I/O library and the runtime.
fn exact(io: Option<&Path>, runtime: Option<&Path>) -> LibraryPaths {
    LibraryPaths {
        io: io.map(Path::to_path_buf),
        runtime: runtime.map(Path::to_path_buf),
    }
}

fn libc_path() -> PathBuf {
    for p in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("no libc.so.6 found to test a library without the symbols");
}

const REAL_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// Set by scripts/vendor-artefacts.sh: unpacked Debian roots (':'-separated), each with a newer
/// HIP runtime and everything it needs, its own glibc included.
const VENDOR_HIP_ROOTS: &str = "HIPFILE_RS_VENDOR_HIP_ROOTS";
/// In a child started by such a root's dynamic loader: the runtime to check and the version
/// prefix it must report.
const CHILD_HIP: &str = "HIPFILE_RS_TEST_HIP";
const CHILD_HIP_VERSION: &str = "HIPFILE_RS_TEST_HIP_VERSION";

/// A test whose genuine library is missing says so loudly, and fails in CI (`CI=true`), where
/// .ci/run provides it.
fn missing(what: &str) {
    skip("no vendor artefact", what);
}

#[test]
fn a_bad_exact_path_is_the_only_path_tried() {
    let bogus = Path::new("/nonexistent/aiscp/libamdhip64.so.5");
    for flavor in [Flavor::HipFile, Flavor::CuFile] {
        let err = Library::load_from(flavor, &exact(None, Some(bogus)))
            .err()
            .expect("a missing library must not load");
        match &err {
            LoadError::NotFound { searched, .. } => assert_eq!(searched, &[bogus.to_path_buf()]),
            other => panic!("expected NotFound, got {other:?}"),
        }
        assert!(err.to_string().contains("/nonexistent/aiscp"), "{err}");
    }
}

#[test]
fn an_unloadable_file_is_reported_with_the_loader_reason() {
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("libhipfile.so.0");
    std::fs::write(&not_elf, b"this is not a shared object").unwrap();
    let err = Runtime::load_from(Flavor::HipFile, Some(&not_elf))
        .err()
        .expect("a text file must not load");
    match &err {
        LoadError::Unloadable {
            path,
            reason,
            searched,
            ..
        } => {
            assert_eq!(path, &not_elf);
            assert!(!reason.is_empty());
            assert_eq!(searched, std::slice::from_ref(&not_elf));
        }
        other => panic!("expected Unloadable, got {other:?}"),
    }
}

/// A FIFO would make the loader wait forever for a writer; a directory is no library either.
#[test]
fn a_path_that_is_no_regular_file_is_refused_without_opening_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("libamdhip64.so.5");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for path in [fifo.as_path(), dir.path()] {
        let err = Runtime::load_from(Flavor::HipFile, Some(path))
            .err()
            .expect("no library");
        match &err {
            LoadError::Unloadable {
                path: p, reason, ..
            } => {
                assert_eq!(p, path);
                assert_eq!(reason, "not a regular file");
            }
            other => panic!("expected Unloadable, got {other:?}"),
        }
    }
}

#[test]
fn a_library_without_the_symbols_names_the_missing_one() {
    let libc = libc_path();
    let err = Runtime::load_from(Flavor::HipFile, Some(&libc))
        .err()
        .expect("libc is no HIP runtime");
    match &err {
        LoadError::MissingSymbol { path, symbol } => {
            assert_eq!(path, &libc);
            assert_eq!(*symbol, "hipGetDeviceCount");
        }
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
    assert!(err.to_string().contains("hipGetDeviceCount"));

    let err = Runtime::load_from(Flavor::CuFile, Some(&libc))
        .err()
        .expect("libc is no CUDA driver");
    assert!(
        matches!(
            &err,
            LoadError::MissingSymbol {
                symbol: "cuInit",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn hipfile_path_pointing_at_libc_lacks_driver_open() {
    if !Path::new(REAL_HIP).exists() {
        skip(
            "no libamdhip64-5",
            &format!("{REAL_HIP} absent (apt-get install libamdhip64-5)"),
        );
        return;
    }
    let libc = libc_path();
    let err = Library::load_from(
        Flavor::HipFile,
        &exact(Some(&libc), Some(Path::new(REAL_HIP))),
    )
    .err()
    .expect("libc is no hipFile");
    assert!(
        matches!(&err, LoadError::MissingSymbol { symbol: "hipFileDriverOpen", path } if path == &libc),
        "{err:?}"
    );
}

#[test]
fn default_search_lists_every_candidate() {
    // Without exact paths, whatever is missing on this machine is reported with the full list.
    // (On a machine that has the libraries the load simply succeeds.)
    let result = Library::load(Flavor::CuFile).err();
    if let Some(LoadError::NotFound { library, searched }) = result {
        assert!(library == "libcuda" || library == "libcufile", "{library}");
        let shown: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        if library == "libcuda" {
            assert_eq!(shown[0], "libcuda.so.1");
        } else {
            assert_eq!(shown[0], "libcufile.so.0");
            assert!(shown
                .iter()
                .any(|p| p == "/usr/local/cuda/lib64/libcufile.so.0"));
        }
    }
    let result = Library::load(Flavor::HipFile).err();
    if let Some(LoadError::NotFound { library, searched }) = result {
        let shown: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        if library == "libhipfile" {
            assert_eq!(&shown[..2], ["libhipfile.so.0", "libhipfile.so"]);
            assert!(shown.iter().any(|p| p == "/opt/rocm/lib/libhipfile.so.0"));
        } else {
            assert_eq!(library, "libamdhip64");
            assert_eq!(shown[0], "libamdhip64.so.7");
        }
    }
}

#[test]
fn genuine_hip_runtime_reports_no_device() {
    if !Path::new(REAL_HIP).exists() {
        skip(
            "no libamdhip64-5",
            &format!("{REAL_HIP} absent (apt-get install libamdhip64-5)"),
        );
        return;
    }
    check_genuine_hip(Path::new(REAL_HIP), "HIP 5.2.");
}

/// Every symbol of our HIP table resolves, the version is the package's, and with no AMD GPU
/// the device count is hipErrorNoDevice.
fn check_genuine_hip(path: &Path, version_prefix: &str) {
    let rt = Runtime::load_from(Flavor::HipFile, Some(path))
        .expect("the genuine HIP runtime resolves every symbol we use");
    assert_eq!(rt.path(), path);
    assert_eq!(rt.flavor(), Flavor::HipFile);
    let version = rt.version().expect("hipRuntimeGetVersion");
    assert!(version.starts_with(version_prefix), "{version}");
    match rt.device_count() {
        Err(e) => {
            assert_eq!(e.code(), Some(100), "{e}");
            assert!(e.to_string().contains("hipGetDeviceCount"), "{e}");
        }
        Ok(n) => panic!("this machine has no AMD GPU, yet {n} reported"),
    }
}

/// Debian's newer runtimes need a newer glibc than the CI machine's, so each is checked in a
/// child of this test binary run by the dynamic loader of its own root.
#[test]
fn newer_genuine_hip_runtimes_report_no_device() {
    const NAME: &str = "loading::newer_genuine_hip_runtimes_report_no_device";
    if let (Some(lib), Ok(prefix)) = (
        std::env::var_os(CHILD_HIP),
        std::env::var(CHILD_HIP_VERSION),
    ) {
        check_genuine_hip(Path::new(&lib), &prefix);
        return;
    }
    let Some(roots) = std::env::var_os(VENDOR_HIP_ROOTS) else {
        missing(&format!(
            "{VENDOR_HIP_ROOTS} unset (scripts/vendor-artefacts.sh fetches HIP 5.7 and 6.4)"
        ));
        return;
    };
    let mut checked = Vec::new();
    for root in std::env::split_paths(&roots) {
        let libdir = root.join("usr/lib/x86_64-linux-gnu");
        // The real file is libamdhip64.so.MAJOR.MINOR.BUILD; its soname link points at it.
        let (lib, major_minor) = std::fs::read_dir(&libdir)
            .unwrap_or_else(|e| panic!("{}: {e}", libdir.display()))
            .filter_map(Result::ok)
            .find_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let rest = name.strip_prefix("libamdhip64.so.")?;
                let parts: Vec<&str> = rest.split('.').collect();
                (parts.len() == 3).then(|| (e.path(), format!("{}.{}", parts[0], parts[1])))
            })
            .unwrap_or_else(|| panic!("no libamdhip64.so.X.Y.Z in {}", libdir.display()));
        let search = format!(
            "{}:{}",
            root.join("lib/x86_64-linux-gnu").display(),
            libdir.display()
        );
        let out = std::process::Command::new(libdir.join("ld-linux-x86-64.so.2"))
            .arg("--library-path")
            .arg(&search)
            .arg(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--nocapture"])
            .env(CHILD_HIP, &lib)
            .env(CHILD_HIP_VERSION, format!("HIP {major_minor}."))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{}: {stdout}{}",
            lib.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked.push(major_minor);
    }
    assert!(!checked.is_empty(), "{VENDOR_HIP_ROOTS} names no root");
    eprintln!("genuine HIP runtimes checked: {}", checked.join(", "));
}

#[test]
fn the_crate_reads_no_variables_of_its_callers() {
    // aiscp's AISCP_* variables are read by aiscp and passed as paths; the crate's own search
    // must not see them. Run in a child so that setting a variable races with no other test.
    const CHILD: &str = "HIPFILE_RS_TEST_NO_VARIABLES";
    let bogus = "/nonexistent/aiscp/set-by-a-caller.so";
    if std::env::var_os(CHILD).is_none() {
        let name = "loading::the_crate_reads_no_variables_of_its_callers";
        let mut cmd = test_support::child::test_command(name);
        cmd.env(CHILD, "1").envs(
            [
                "AISCP_HIPFILE_LIB",
                "AISCP_HIP_LIB",
                "AISCP_CUFILE_LIB",
                "AISCP_CUDA_LIB",
            ]
            .map(|v| (v, bogus)),
        );
        test_support::child::run(&mut cmd).assert_passed(name);
        return;
    }
    for flavor in [Flavor::HipFile, Flavor::CuFile] {
        if let Err(LoadError::NotFound { searched, .. }) = Library::load(flavor) {
            assert!(
                !searched.iter().any(|p| p == Path::new(bogus)),
                "{flavor}: searched a caller's variable: {searched:?}"
            );
            assert!(searched.len() > 1, "{searched:?}");
        }
    }
}

/// The genuine HIP runtime has the module and launch calls, and ROCm 5.2's hiprtc (exported
/// from the runtime itself) compiles aiscp's digest kernels for an AMD architecture without
/// any GPU: the kernel source is proven to be hiprtc's C++, not only NVRTC's.
#[test]
fn genuine_hiprtc_compiles_the_digest_kernels() {
    if !Path::new(REAL_HIP).exists() {
        missing(&format!(
            "{REAL_HIP} absent (apt-get install libamdhip64-5)"
        ));
        return;
    }
    let runtime = Runtime::load_from(Flavor::HipFile, Some(Path::new(REAL_HIP))).unwrap();
    assert!(runtime.has_modules());
    let compiler = hipfile::Compiler::load_from(Flavor::HipFile, Some(Path::new(REAL_HIP)))
        .expect("ROCm 5.2's runtime exports hiprtc");
    assert_eq!(compiler.name(), "hiprtc");
    let source = include_str!("../../../engine/src/digest/kernels.cu");
    let image = compiler
        .compile(source, "kernels.cu", &["-O3", "--offload-arch=gfx90a"])
        .unwrap();
    assert!(image.len() > 1000, "{} bytes", image.len());
    let err = compiler
        .compile("this is not C++", "bad.cu", &["--offload-arch=gfx90a"])
        .unwrap_err();
    assert!(
        matches!(&err, hipfile::Error::Compile { call: "hiprtcCompileProgram", log, .. } if !log.is_empty()),
        "{err}"
    );
}

/// Where no libhiprtc is installed, the ROCm 5 runtime in use is its own compiler; a runtime
/// that exports no hiprtc (ROCm 6 split it out; libc stands in) gives the search's own
/// error, and no runtime other than the one in use is ever taken: an older hiprtc given a
/// newer GPU's architecture aborts the process.
#[test]
fn hiprtc_falls_back_to_the_runtime_in_use_only() {
    if !Path::new(REAL_HIP).exists() {
        missing(&format!(
            "{REAL_HIP} absent (apt-get install libamdhip64-5)"
        ));
        return;
    }
    if hipfile::Compiler::load(Flavor::HipFile).is_ok() {
        test_support::skip::not_here("a libhiprtc is installed: the search finds it first");
        return;
    }
    let own = hipfile::Compiler::load_for(Flavor::HipFile, None, Path::new(REAL_HIP)).unwrap();
    assert_eq!(own.path(), Path::new(REAL_HIP));
    let err = hipfile::Compiler::load_for(Flavor::HipFile, None, &libc_path())
        .err()
        .expect("libc exports no hiprtc");
    assert!(
        matches!(
            &err,
            LoadError::NotFound {
                library: "libhiprtc",
                ..
            }
        ),
        "{err:?}"
    );
}

/// Set by scripts/vendor-artefacts.sh to the genuine libnvrtc.so.12 of PyPI
/// nvidia-cuda-nvrtc-cu12.
const VENDOR_NVRTC: &str = "HIPFILE_RS_VENDOR_NVRTC_LIB";

/// The genuine NVRTC compiles aiscp's digest kernels to a CUBIN for Hopper (sm_90) without a
/// GPU, and a source that does not compile comes back with its log.
#[test]
fn genuine_nvrtc_compiles_the_digest_kernels() {
    let Some(path) = std::env::var_os(VENDOR_NVRTC) else {
        missing(&format!(
            "{VENDOR_NVRTC} unset (scripts/vendor-artefacts.sh fetches it)"
        ));
        return;
    };
    let compiler = hipfile::Compiler::load_from(Flavor::CuFile, Some(Path::new(&path))).unwrap();
    assert!(compiler.version().unwrap().starts_with("NVRTC 12."));
    let source = include_str!("../../../engine/src/digest/kernels.cu");
    let image = compiler
        .compile(source, "kernels.cu", &["--gpu-architecture=sm_90"])
        .unwrap();
    // An ELF object (a CUBIN), not PTX text.
    assert_eq!(&image[..4], b"\x7fELF");
    let err = compiler
        .compile("this is not C++", "bad.cu", &["--gpu-architecture=sm_90"])
        .unwrap_err();
    assert!(
        matches!(&err, hipfile::Error::Compile { call: "nvrtcCompileProgram", log, .. } if !log.is_empty()),
        "{err}"
    );
}
