//! The digest kernels' source (src/digest/kernels.cu) proven on the CPU, no GPU needed: g++
//! builds it with a shim (tests/it/kernel_source/shim.h) that runs each block's threads as real
//! threads meeting at a real barrier, and its results are compared with the blake3 and
//! crc-fast crates over sizes around the chunk and power-of-two edges and slice starts.

use blake3::hazmat::HasherExt;
use rand::RngCore;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CHUNK: u64 = 1024;

/// The harness binary, built once per test process; None (after a skip) without g++.
fn harness() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("harness");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/kernel_source/harness.cpp");
        let out = match Command::new("g++")
            .args([
                "-std=c++20",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pthread",
                "-o",
            ])
            .arg(&exe)
            .arg(&src)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                test_support::skip::skip("no g++", &e.to_string());
                return None;
            }
        };
        assert!(
            out.status.success(),
            "g++ failed on the kernel source:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some((dir, exe))
    });
    built.as_ref().map(|(_, exe)| exe.as_path())
}

/// The BLAKE3 nodes a slice is hashed as, by the digest interface's rule (written here
/// again, independently): greedy from `start`, each the largest power-of-two number of
/// chunks `start` is aligned to that fits, the tail shorter; a node at 0 longer than one
/// chunk split in halves.
fn nodes(start: u64, len: u64) -> Vec<(u64, u64)> {
    if len == 0 {
        return vec![(start, 0)];
    }
    let mut out = Vec::new();
    let (mut at, end) = (start, start + len);
    while at < end {
        let rest = end - at;
        let size = if rest < CHUNK {
            rest
        } else {
            let mut size = CHUNK;
            while (at == 0 || at % (size * 2) == 0) && size * 2 <= rest {
                size *= 2;
            }
            size
        };
        if at == 0 && size > CHUNK {
            out.push((0, size / 2));
            out.push((size / 2, size / 2));
        } else {
            out.push((at, size));
        }
        at += size;
    }
    out
}

fn random(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes
}

fn run(harness: &Path, args: &[String]) -> String {
    let out = Command::new(harness).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "harness {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The chaining value blake3's hazmat API gives the node `[at, at + bytes.len())`.
fn expected_cv(at: u64, bytes: &[u8]) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.set_input_offset(at);
    hasher.update(bytes);
    hasher
        .finalize_non_root()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sizes crossing 0, 1, 1023, 1024, 1025 and 2^k +- 1.
fn sizes() -> Vec<u64> {
    let mut sizes = vec![0, 1, 63, 64, 65, 1023, 1024, 1025, 3 * 1024 + 5];
    for k in [11, 12, 13, 16, 17, 20, 24] {
        sizes.extend([(1u64 << k) - 1, 1 << k, (1 << k) + 1]);
    }
    sizes
}

#[test]
fn blake3_kernels_match_the_blake3_crate() {
    let Some(harness) = harness() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slice");
    let file_arg = file.display().to_string();
    // Slice starts as the engine makes them (multiples of its slice size), and odd chunk
    // multiples that reach deep and shallow alignments.
    let starts = [
        0u64,
        4096,
        5 * 1024,
        1 << 20,
        3 << 20,
        (1 << 32) + (7 << 10),
    ];
    let mut checked = 0;
    // An empty slice is no subtree (the empty file's root is the host's, from `head`).
    for (n, &len) in sizes().iter().enumerate().filter(|&(_, &len)| len > 0) {
        let bytes = random(len as usize);
        std::fs::write(&file, &bytes).unwrap();
        for (k, &start) in starts.iter().enumerate() {
            // Block sizes that leave threads idle, loop in the reduction, or are one warp.
            let block_dim = [1u32, 3, 8, 32][(n + k) % 4];
            // At 0, also the whole slice as one node (its own run: nodes are reduced in
            // place, so one run's nodes never overlap): a tree of any shape, left-balanced.
            let mut runs = vec![nodes(start, len)];
            if start == 0 && len > CHUNK {
                runs.push(vec![(0, len)]);
            }
            for nodes in runs {
                let mut args = vec![
                    "blake3".to_owned(),
                    file_arg.clone(),
                    start.to_string(),
                    block_dim.to_string(),
                ];
                args.extend(nodes.iter().map(|&(at, size)| {
                    format!("{}:{}", (at - start) / CHUNK, size.div_ceil(CHUNK))
                }));
                let got = run(harness, &args);
                let want: Vec<String> = nodes
                    .iter()
                    .map(|&(at, size)| {
                        let rel = (at - start) as usize;
                        expected_cv(at, &bytes[rel..rel + size as usize])
                    })
                    .collect();
                let got: Vec<&str> = got.lines().collect();
                assert_eq!(got, want, "start {start} len {len} block {block_dim}");
                checked += nodes.len();
            }
        }
    }
    assert!(checked > 200, "{checked} nodes checked");
}

#[test]
fn crc_kernels_match_crc_fast() {
    let Some(harness) = harness() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slice");
    for (n, &len) in sizes().iter().enumerate() {
        let bytes = random(len as usize);
        std::fs::write(&file, &bytes).unwrap();
        for (kind, algorithm) in [
            (0, crc_fast::CrcAlgorithm::Crc32Iscsi),
            (1, crc_fast::CrcAlgorithm::Crc64Nvme),
        ] {
            // Per-thread blocks of one word (deep combining trees), odd sizes, and the
            // engine's own.
            for block in [4u64, 68, 4096] {
                // The harness spawns a thread per CPU "thread": keep it to thousands.
                if len / block > 4096 {
                    continue;
                }
                let block_dim = [1u32, 3, 8, 32][(n + kind as usize) % 4];
                let got = run(
                    harness,
                    &[
                        "crc".to_owned(),
                        kind.to_string(),
                        file.display().to_string(),
                        block.to_string(),
                        block_dim.to_string(),
                    ],
                );
                let want = crc_fast::checksum(algorithm, &bytes);
                assert_eq!(
                    u64::from_str_radix(got.trim(), 16).unwrap(),
                    want,
                    "{algorithm:?} len {len} block {block} threads {block_dim}"
                );
            }
        }
    }
}
