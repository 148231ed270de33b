//! The digest kernels' source compiled by AMD's own run-time compiler, no AMD GPU needed:
//! Debian's ROCm 5.2 runtime (libamdhip64.so.5, which exports hiprtc, with libamd-comgr2)
//! loaded by hipfile-rs's [`Compiler`] as aiscp loads it, given the engine's options for an
//! architecture, must return an AMD GPU code object for that architecture that exports
//! every kernel the engine looks up, with its kernel descriptor (`NAME.kd`, what
//! hipModuleGetFunction finds). What a GPU must still show: that the kernels run and hash
//! right there (kernel_source.rs proves the source's results on the CPU, the H100 runs prove
//! the CUDA build's). hipfile-rs's own `genuine_hiprtc_compiles_the_digest_kernels` checks
//! the compiler's calls and errors; this one the engine's options and what they produce.

use aiscp_engine::digest::launch::KERNEL_NAMES;
use aiscp_engine::digest::on_gpu::{compile_options, SOURCE};
use hipfile::{Compiler, Flavor};
use std::path::Path;
use std::process::Command;

const REAL_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
/// `e_machine` of an AMD GPU code object.
const EM_AMDGPU: u16 = 224;
/// Architectures ROCm 5.2's compiler knows, as a GPU names itself (hipDeviceProp_t's
/// gcnArchName, which aiscp passes on whole, target features included), with the
/// `EF_AMDGPU_MACH` value and the feature bits the image must carry (xnack 0x300, sramecc
/// 0xc00: any, off or on; 0 where the architecture lacks both): MI100, MI200 (MI210/MI250),
/// RDNA2. (ROCm 5.2's compiler aborts the process on architectures newer than itself,
/// gfx942 and gfx1100 among them.)
const ARCHS: [(&str, u32, u32); 4] = [
    ("gfx908:sramecc-:xnack-", 0x30, 0xa00),
    ("gfx90a:sramecc+:xnack-", 0x3f, 0xe00),
    ("gfx90a", 0x3f, 0x500),
    ("gfx1030", 0x36, 0x000),
];

#[test]
fn amd_hiprtc_compiles_every_kernel_for_each_architecture() {
    if !Path::new(REAL_HIP).exists() {
        test_support::skip::skip(
            "no libamdhip64-5",
            &format!("{REAL_HIP} absent (apt-get install libamdhip64-5)"),
        );
        return;
    }
    // Never unloaded, as aiscp never unloads it (dlclose of a runtime crashed at exit).
    let compiler: &Compiler = Box::leak(Box::new(
        Compiler::load_from(Flavor::HipFile, Some(Path::new(REAL_HIP)))
            .expect("ROCm 5.2's runtime exports hiprtc"),
    ));
    assert_eq!(compiler.name(), "hiprtc");
    let dir = tempfile::tempdir().unwrap();
    for (arch, mach, features) in ARCHS {
        let options = compile_options(Flavor::HipFile, Some(arch));
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let image = compiler
            .compile(SOURCE, "kernels.cu", &options)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(&image[..4], b"\x7fELF", "{arch}: not an ELF image");
        assert_eq!(image[4], 2, "{arch}: not a 64-bit ELF");
        let kind = u16::from_le_bytes(image[16..18].try_into().unwrap());
        assert_eq!(
            kind, 3,
            "{arch}: not a shared object (what hipModuleLoadData loads)"
        );
        let machine = u16::from_le_bytes(image[18..20].try_into().unwrap());
        assert_eq!(machine, EM_AMDGPU, "{arch}: e_machine");
        let flags = u32::from_le_bytes(image[48..52].try_into().unwrap());
        assert_eq!(
            flags & 0xff,
            mach,
            "{arch}: EF_AMDGPU_MACH of e_flags {flags:#x}"
        );
        assert_eq!(
            flags & 0xf00,
            features,
            "{arch}: feature bits of e_flags {flags:#x}"
        );

        let path = dir.path().join(format!("{}.co", arch.replace(':', "_")));
        std::fs::write(&path, &image).unwrap();
        let symbols = exported_symbols(&path);
        for name in KERNEL_NAMES {
            for (symbol, kind) in [(name.to_owned(), "FUNC"), (format!("{name}.kd"), "OBJECT")] {
                assert!(
                    symbols.contains(&(symbol.clone(), kind.to_owned())),
                    "{arch}: no global {kind} {symbol} in {symbols:?}"
                );
            }
        }
    }
}

/// The global symbols of an ELF file as (name, type), read by binutils' readelf.
fn exported_symbols(path: &Path) -> Vec<(String, String)> {
    let out = Command::new("readelf")
        .arg("-Ws")
        .arg(path)
        .output()
        .expect("readelf (binutils, which gcc brings) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() == 8 && f[4] == "GLOBAL").then(|| (f[7].to_owned(), f[3].to_owned()))
        })
        .collect()
}
