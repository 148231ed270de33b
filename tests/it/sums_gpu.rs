//! --sums with the digests taken on the (fake) GPU: the fake library compiles and runs the
//! digest kernels by name (crates/fake-gpu/src/kernels.rs), so this proves the plumbing end
//! to end (compile, load, launches on each slot's stream, pieces merged into the manifest),
//! and that a compile failure falls back to the CPU with the same digests and says so under
//! --debug. The kernels' own code is proven by crates/engine/tests/it/kernel_source.rs.

use crate::support::{aiscp_command, fake_gpu_lib, random_bytes, Backend, Report};
use base64::Engine as _;
use std::fs;
use std::path::Path;

/// Files over the chunk and slice edges (64 KiB slices below), enough of them that slices are
/// hashed after the kernels are ready.
fn make_tree(src: &Path) -> Vec<(String, Vec<u8>)> {
    fs::create_dir_all(src).unwrap();
    let mut files = Vec::new();
    let sizes = [
        1usize,
        1023,
        1024,
        1025,
        65535,
        65536,
        65537,
        300_000,
        (1 << 20) + 3,
    ];
    for i in 0..36 {
        let len = sizes[i % sizes.len()];
        let name = format!("f{i:02}");
        let bytes = random_bytes(len, 7000 + i as u64);
        fs::write(src.join(&name), &bytes).unwrap();
        files.push((format!("dst/{name}"), bytes));
    }
    files
}

/// The digest of `bytes` as the manifest prints it, by the blake3 and crc crates.
fn reference(algorithm: &str, bytes: &[u8]) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    match algorithm {
        "blake3" => blake3::hash(bytes).to_hex().to_string(),
        "crc64nvme" => b64(&crc::Crc::<u64>::new(&crc::CRC_64_NVME)
            .checksum(bytes)
            .to_be_bytes()),
        _ => b64(&crc::Crc::<u32>::new(&crc::CRC_32_ISCSI)
            .checksum(bytes)
            .to_be_bytes()),
    }
}

/// Copies a tree with `--sums=ALGORITHM --debug` on the fake GPU with `faults`; checks every
/// manifest line and returns the --debug line saying where digests were computed.
fn copy_with_sums(algorithm: &str, faults: &str) -> String {
    copy_on(algorithm, faults, "gfx942:sramecc+:xnack-")
}

/// [`copy_with_sums`] on fake GPUs of architecture `arch`.
fn copy_on(algorithm: &str, faults: &str, arch: &str) -> String {
    copy_compiled_by(algorithm, faults, arch, None)
}

/// [`copy_on`] with the compiler loaded from `compiler` where given.
fn copy_compiled_by(algorithm: &str, faults: &str, arch: &str, compiler: Option<&Path>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let files = make_tree(&dir.path().join("src"));
    let report = dir.path().join("report");
    let mut cmd = aiscp_command();
    cmd.current_dir(dir.path())
        .args(["-r", "--debug", "--chunk-size=64K"])
        .arg(format!("--sums={algorithm}"))
        .args(["src", "dst"])
        .env("AISCP_FAKE_GPU_FAULTS", faults)
        .env("AISCP_FAKE_GPU_ARCH", arch);
    Backend::FakeGpu.apply(&mut cmd, &report);
    if let Some(compiler) = compiler {
        cmd.env("AISCP_HIPRTC_LIB", compiler);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    Report::read(&report).assert_clean();
    let mut want: Vec<String> = files
        .iter()
        .map(|(name, bytes)| format!("{}  {name}", reference(algorithm, bytes)))
        .collect();
    want.sort();
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    got.sort();
    assert_eq!(got, want, "{algorithm} with faults `{faults}`");
    stderr
        .lines()
        .find_map(|l| {
            l.split_once("digests computed ")
                .map(|(_, rest)| rest.to_owned())
        })
        .unwrap_or_else(|| panic!("no digests line under --debug:\n{stderr}"))
}

#[test]
fn digests_from_the_gpu_kernels_match_independent_ones() {
    for algorithm in ["blake3", "crc64nvme", "crc32c"] {
        // The first run compiles, the others load what it kept.
        let said = copy_with_sums(algorithm, "");
        assert!(said.starts_with("on the GPU (hiprtc 6.4, "), "{said}");
    }
}

#[test]
fn a_failed_compile_gives_the_same_digests_from_the_cpu_and_says_why() {
    for algorithm in ["blake3", "crc32c"] {
        let said = copy_with_sums(algorithm, "compile=fail");
        assert!(
            said.starts_with(
                "on the CPU: hiprtc: hiprtcCompileProgram: HIPRTC_ERROR_COMPILATION (error 6): \
                 fake-gpu: compilation failed"
            ),
            "{said}"
        );
    }
}

/// The kernel cache file a `--debug` digests line names, when it names one.
fn cached_at(said: &str) -> Option<std::path::PathBuf> {
    let (_, rest) = said.split_once("from the kernel cache, ")?;
    rest.split_once(')').map(|(path, _)| path.into())
}

#[test]
fn compiled_kernels_are_kept_for_the_next_run_and_a_bad_copy_is_compiled_again() {
    let first = copy_with_sums("blake3", "");
    assert!(
        first.starts_with("on the GPU (hiprtc 6.4, compiled in "),
        "{first}"
    );
    let second = copy_with_sums("crc64nvme", "");
    let cached = cached_at(&second).unwrap_or_else(|| panic!("not from the cache: {second}"));
    assert!(second.starts_with("on the GPU (hiprtc 6.4, from the kernel cache, "));

    // A flipped bit: the file is not read, and the kernels are compiled (and kept) again.
    let mut bytes = fs::read(&cached).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(&cached, &bytes).unwrap();
    let third = copy_with_sums("blake3", "");
    assert!(third.contains("compiled in "), "{third}");
    let kept = copy_with_sums("crc32c", "");
    assert_eq!(cached_at(&kept), Some(cached.clone()), "{kept}");

    // A whole file whose image the GPU refuses: removed, compiled afresh within the run,
    // and every digest still right.
    let image = b"not a code object\0";
    let mut bad = b"aiscp digest kernels 1\nhiprtc 6.4\n".to_vec();
    bad.extend_from_slice(blake3::hash(image).to_hex().as_bytes());
    bad.push(b'\n');
    bad.extend_from_slice(image);
    fs::write(&cached, &bad).unwrap();
    let fourth = copy_with_sums("blake3", "");
    assert!(fourth.contains("compiled in "), "{fourth}");
    let kept = copy_with_sums("blake3", "");
    assert_eq!(cached_at(&kept), Some(cached), "{kept}");
}

/// Kernels compiled for one GPU architecture are kept for it alone: a run on another
/// compiles its own (the GPU would refuse the first's code object), and each later run
/// finds its own architecture's image, whichever ran last.
#[test]
fn kept_kernels_serve_only_the_architecture_they_were_compiled_for() {
    let (mi300, mi250) = ("gfx942:sramecc+:xnack-", "gfx90a:sramecc+:xnack-");
    let first = copy_on("blake3", "", mi300);
    assert!(first.contains("compiled in "), "{first}");
    let other = copy_on("blake3", "", mi250);
    assert!(other.contains("compiled in "), "{other}");
    let again = copy_on("crc32c", "", mi300);
    let kept = cached_at(&again).unwrap_or_else(|| panic!("not from the cache: {again}"));
    let theirs = cached_at(&copy_on("crc64nvme", "", mi250)).expect("the other's image kept");
    assert_ne!(kept, theirs);
}

/// A kept image is found before the compiler is loaded (loading NVRTC from a cold page cache
/// outlasted the first slices, which then hashed on the CPU): a run whose compiler cannot be
/// loaded at all hashes every slice on the GPU from the cache.
#[test]
fn kept_kernels_serve_a_run_without_loading_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let compiler = dir.path().join("libhiprtc.so");
    std::os::unix::fs::symlink(fake_gpu_lib(), &compiler).unwrap();
    let arch = "gfx942:sramecc+:xnack-";
    let first = copy_compiled_by("blake3", "", arch, Some(&compiler));
    assert!(first.contains("compiled in "), "{first}");

    fs::remove_file(&compiler).unwrap();
    fs::write(&compiler, b"not a library").unwrap();
    let second = copy_compiled_by("crc32c", "", arch, Some(&compiler));
    assert!(
        second.starts_with("on the GPU (hiprtc 6.4, from the kernel cache, ")
            && !second.contains("CPU"),
        "{second}"
    );
}

/// A run that ends before its compile does (a small tree) waits for it at the end, so that
/// the next run finds the kernels kept: without the wait every short run compiled again,
/// for nothing, and none ever found an image in the cache.
#[test]
fn a_run_shorter_than_its_compile_keeps_the_kernels_for_the_next() {
    let first = copy_with_sums("blake3", "compile=slow:1500");
    assert!(
        first.starts_with("on the CPU: the kernels were still compiling"),
        "{first}"
    );
    let second = copy_with_sums("crc32c", "");
    assert!(
        second.starts_with("on the GPU (hiprtc 6.4, from the kernel cache, "),
        "{second}"
    );
}

/// The wait for a compile at the end of a run gives way to a signal: the run dies by it at
/// once, as cp would, instead of after the wait's few seconds.
#[test]
fn a_signal_ends_the_wait_for_a_compile() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    make_tree(&dir.path().join("src"));
    let report = dir.path().join("report");
    let mut cmd = aiscp_command();
    cmd.current_dir(dir.path())
        .args(["-r", "--sums", "--sums-file=sums", "src", "dst"])
        .env("AISCP_FAKE_GPU_FAULTS", "compile=slow:20000");
    Backend::FakeGpu.apply(&mut cmd, &report);
    let mut child = cmd.spawn().unwrap();
    // The copy of the small tree is over long before this; the compile is not.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let signalled = std::time::Instant::now();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let took = signalled.elapsed();
    assert!(took.as_secs_f64() < 3.0, "died {took:?} after the signal");
}
