//! The digest kernels on a real GPU, for bench/gpu-digests.sh: compile and load time,
//! pieces of thousands of random slices compared with the CPU's, and the kernels' own rate
//! on data already in device memory. Prints tab-separated rows.
//!
//! Usage: gpu_digests [cufile|hipfile] [PIECES] [rate|norate]

use aiscp_engine::digest::launch::Scratch;
use aiscp_engine::digest::on_gpu::GpuDigests;
use aiscp_engine::digest::{Algorithm, Hashing, Piece};
use hipfile::DeviceBuffer;
use rand::{Rng, RngCore, SeedableRng};
use std::time::Instant;

const SLOT: usize = 1 << 30;
/// The region correctness slices come from, re-randomized every 64 slices.
const REGION: usize = 64 << 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let flavor: hipfile::Flavor = args.next().as_deref().unwrap_or("cufile").parse().unwrap();
    let pieces: usize = args.next().map_or(3000, |n| n.parse().unwrap());
    let rates = args.next().as_deref() != Some("norate");
    // aiscp's AISCP_*_LIB variables apply (the fake GPU library, for a dry run).
    use aiscp_engine::probe::{compiler_path, library_paths};
    let library =
        hipfile::Library::load_from(flavor, &library_paths(flavor)).expect("GPU libraries");
    let device = library.staging_device(0).expect("GPU 0");
    let digests = GpuDigests::new(flavor, compiler_path(flavor), 1);
    let started = Instant::now();
    digests.prepare(&device);
    digests.wait_ready().expect("the kernels compile");
    let compiled = started.elapsed();

    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
    let mut host = vec![0u8; SLOT];
    rng.fill_bytes(&mut host);
    let mut slot = device.alloc(SLOT).unwrap();
    slot.copy_from_host(0, &host).unwrap();
    let mut scratch = None;
    let started = Instant::now();
    hash_now(&digests, &mut scratch, &slot, 1024, 0, Algorithm::Blake3).unwrap();
    println!(
        "compile\t{:.3} s\tload+first slice\t{:.3} s\t{}",
        compiled.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        digests.describe().unwrap_or_default()
    );

    // Correctness: random lengths (small, around powers of two, large) and starts (0, chunk
    // multiples of every alignment, off the grid).
    let (mut checked, mut differ) = (0u64, 0u64);
    for i in 0..pieces {
        if i % 64 == 0 {
            rng.fill_bytes(&mut host[..REGION]);
            slot.copy_from_host(0, &host[..REGION]).unwrap();
        }
        let len = match rng.gen_range(0..10) {
            0..=3 => rng.gen_range(0..=5000),
            4..=6 => {
                let k = rng.gen_range(10..=26);
                ((1usize << k) as isize + rng.gen_range(-1..=1)) as usize
            }
            _ => rng.gen_range(0..=REGION),
        };
        let start = match rng.gen_range(0..10) {
            0..=1 => 0,
            2 => rng.gen_range(1..1u64 << 40),
            _ => (rng.gen_range(1..1u64 << 30) << rng.gen_range(0..10)) * 1024,
        };
        for algorithm in Algorithm::ALL {
            let got = hash_now(&digests, &mut scratch, &slot, len, start, algorithm).unwrap();
            let want = match (algorithm, start % 1024) {
                (Algorithm::Blake3, 1..) => None,
                _ => Some(Piece::of_bytes(algorithm, start, &host[..len])),
            };
            checked += 1;
            if got != want {
                differ += 1;
                println!("DIFFER\t{algorithm:?}\tstart {start}\tlen {len}");
            }
        }
    }
    println!("correctness\t{checked} pieces\t{differ} differ");

    // Rate on resident data: the whole hash call (table up, launches, result down, one
    // window wait), repeated; the CPU's Piece::of_bytes beside it.
    for algorithm in Algorithm::ALL.into_iter().filter(|_| rates) {
        for size in [SLOT, 64 << 20, 256 << 10] {
            let runs = (16usize << 30).div_ceil(size).clamp(8, 2000);
            for _ in 0..2 {
                hash_now(&digests, &mut scratch, &slot, size, 0, algorithm).unwrap();
            }
            let t = Instant::now();
            for _ in 0..runs {
                hash_now(&digests, &mut scratch, &slot, size, 0, algorithm).unwrap();
            }
            let gpu = (size * runs) as f64 / t.elapsed().as_secs_f64() / 1e9;
            let cpu_runs = runs.min(4);
            let t = Instant::now();
            for _ in 0..cpu_runs {
                std::hint::black_box(Piece::of_bytes(algorithm, 0, &host[..size]));
            }
            let cpu = (size * cpu_runs) as f64 / t.elapsed().as_secs_f64() / 1e9;
            println!(
                "rate\t{}\t{} bytes\t{runs} runs\tGPU {gpu:.1} GB/s\tCPU {cpu:.1} GB/s",
                algorithm.name(),
                size
            );
        }
    }
    println!("{}", digests.describe().unwrap_or_default());
}

/// A slice's piece, waited for: hashed (or queued, then collected) on GPU 0.
fn hash_now(
    digests: &GpuDigests,
    scratch: &mut Option<Scratch>,
    slot: &DeviceBuffer,
    len: usize,
    start: u64,
    algorithm: Algorithm,
) -> Result<Option<Piece>, hipfile::Error> {
    match digests.hash(0, scratch, slot, len, start, algorithm)? {
        Hashing::Done(piece) => Ok(piece),
        Hashing::Queued(queued) => digests.hashed(scratch, queued).map(Some),
    }
}
