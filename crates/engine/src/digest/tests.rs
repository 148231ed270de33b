//! Digests from pieces against independent whole-file implementations (the blake3 crate's
//! own `hash`, the `crc` crate's catalogue), over sizes that cross every tree boundary and
//! pieces cut, dropped and kept as copies leave them.

use super::*;
use proptest::prelude::*;
use std::io::Write;
use test_support::data::random_bytes;

fn reference(algorithm: Algorithm, bytes: &[u8]) -> String {
    match algorithm {
        Algorithm::Blake3 => blake3::hash(bytes).to_hex().to_string(),
        Algorithm::Crc64Nvme => {
            let crc = crc::Crc::<u64>::new(&crc::CRC_64_NVME).checksum(bytes);
            base64_of(&crc.to_be_bytes())
        }
        Algorithm::Crc32c => {
            let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(bytes);
            base64_of(&crc.to_be_bytes())
        }
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn dest_of(bytes: &[u8]) -> std::fs::File {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    f
}

/// The digest of `bytes` from pieces over `cuts` (slice boundaries), keeping those `keep`
/// says, with `kept` the prefix the pieces stand for.
fn from_pieces(
    algorithm: Algorithm,
    bytes: &[u8],
    cuts: &[u64],
    keep: impl Fn(usize) -> bool,
    kept: u64,
) -> DestDigest {
    let pieces = Pieces::new(algorithm);
    let mut start = 0;
    for (i, &end) in cuts.iter().chain([bytes.len() as u64].iter()).enumerate() {
        if end > start && keep(i) {
            let slice = &bytes[start as usize..end as usize];
            pieces.add(Piece::of_bytes(algorithm, start, slice));
        }
        start = start.max(end);
    }
    pieces
        .finish(&dest_of(bytes), kept, bytes.len() as u64)
        .unwrap()
}

const SIZES: &[usize] = &[
    0,
    1,
    1023,
    1024,
    1025,
    2047,
    2048,
    2049,
    3072,
    4095,
    4096,
    4097,
    65535,
    65536,
    65537,
    1 << 20,
    (1 << 20) + 1,
    (3 << 20) - 1,
];

#[test]
fn whole_files_in_one_piece_match_the_references() {
    for &size in SIZES {
        let bytes = random_bytes(size, size as u64);
        for algorithm in Algorithm::ALL {
            let got = from_pieces(algorithm, &bytes, &[], |_| true, size as u64);
            assert_eq!(
                got.digest.to_string(),
                reference(algorithm, &bytes),
                "{algorithm:?} {size}"
            );
            assert_eq!(
                got.read_back, 0,
                "{algorithm:?} {size}: one piece vouches for all"
            );
            assert_eq!(got.digest, algorithm.of_bytes(&bytes));
        }
    }
}

#[test]
fn slices_of_every_chunk_size_match() {
    let bytes = random_bytes((5 << 20) + 777, 7);
    for chunk in [4096u64, 8192, 12288, 65536, 1 << 20, 3 << 20] {
        let cuts: Vec<u64> = (1..)
            .map(|i| i * chunk)
            .take_while(|&c| c < bytes.len() as u64)
            .collect();
        for algorithm in Algorithm::ALL {
            let got = from_pieces(algorithm, &bytes, &cuts, |_| true, u64::MAX);
            assert_eq!(
                got.digest.to_string(),
                reference(algorithm, &bytes),
                "{chunk}"
            );
            assert_eq!(got.read_back, 0);
        }
    }
}

#[test]
fn pieces_past_kept_or_off_the_chunk_grid_are_read_back() {
    let bytes = random_bytes(300_000, 9);
    // Cuts off the 1 KiB grid (a SOURCE that grew past a plan's end), a piece missing.
    let cuts = [4096, 10_000, 65536, 131_072, 200_000];
    for algorithm in Algorithm::ALL {
        let got = from_pieces(algorithm, &bytes, &cuts, |i| i != 5, 131_072);
        assert_eq!(got.digest.to_string(), reference(algorithm, &bytes));
        // [4096, 65536) is off the grid at 10,000; [65536, 131072) counts; the rest is
        // past `kept`, the last also dropped.
        assert_eq!(got.read_back, 300_000 - 4096 - 65536);
    }
}

#[test]
fn a_piece_dest_no_longer_holds_never_counts() {
    // The pieces say what SOURCE had; DEST was rewritten past 8192 by the finish.
    let old = random_bytes(50_000, 1);
    let mut dest = old.clone();
    dest[9000] ^= 0xff;
    for algorithm in Algorithm::ALL {
        let pieces = Pieces::new(algorithm);
        pieces.add(Piece::of_bytes(algorithm, 0, &old[..8192]));
        pieces.add(Piece::of_bytes(algorithm, 8192, &old[8192..]));
        let got = pieces
            .finish(&dest_of(&dest), 8192, dest.len() as u64)
            .unwrap();
        assert_eq!(got.digest.to_string(), reference(algorithm, &dest));
    }
}

#[test]
fn a_dest_shorter_than_its_size_is_an_error_not_a_digest() {
    let pieces = Pieces::new(Algorithm::Blake3);
    let err = pieces.finish(&dest_of(b"short"), 0, 100).unwrap_err();
    assert!(err.to_string().contains("shrank"), "{err}");
}

#[test]
fn gpu_made_pieces_are_checked_for_shape() {
    let nodes = vec![[0u8; 32]; subtrees(4096, 8192).len()];
    assert!(Piece::from_subtrees(4096, 8192, nodes.clone(), Vec::new()).is_some());
    assert!(Piece::from_subtrees(4096, 8192, nodes[1..].to_vec(), Vec::new()).is_none());
    assert!(Piece::from_subtrees(0, 100, vec![[0; 32]], vec![0; 99]).is_none());
    assert!(Piece::from_crc(Algorithm::Blake3, 0, 1, 0).is_none());
    let bytes = random_bytes(5000, 3);
    let cpu = Piece::of_bytes(Algorithm::Crc32c, 0, &bytes);
    let crc = piece::crc(Algorithm::Crc32c, &bytes);
    assert_eq!(Piece::from_crc(Algorithm::Crc32c, 0, 5000, crc), Some(cpu));
}

#[test]
fn subtrees_are_aligned_tree_nodes() {
    assert_eq!(subtrees(0, 1000), vec![0..1000]);
    assert_eq!(subtrees(0, 4096), vec![0..2048, 2048..4096]);
    assert_eq!(subtrees(0, 5000), vec![0..4096, 4096..5000]);
    assert_eq!(subtrees(4096, 12288), vec![4096..8192, 8192..16384]);
    assert_eq!(subtrees(6144, 3000), vec![6144..8192, 8192..9144]);
    for node in subtrees(3 << 20, 5 << 20) {
        let len = node.end - node.start;
        assert!(len.is_power_of_two() && node.start % len == 0, "{node:?}");
    }
}

#[test]
fn names_and_formats() {
    for algorithm in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(algorithm.name()), Some(algorithm));
    }
    // S3's documented value for "Hello World" style checks is base64 of the big-endian CRC.
    let digest = Algorithm::Crc32c.of_bytes(b"123456789");
    assert_eq!(digest.bytes(), &0xe306_9283u32.to_be_bytes());
    assert_eq!(digest.to_string(), "4waSgw==");
    assert_eq!(
        Algorithm::Crc64Nvme.of_bytes(b"123456789").bytes(),
        &0xae8b_1486_0a79_9888u64.to_be_bytes()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_slicing_and_any_kept_prefix_give_dest_s_digest(
        size in 0usize..200_000,
        chunk_kib in 1u64..40,
        dropped in proptest::collection::vec(any::<bool>(), 0..64),
        kept_frac in 0.0f64..1.2,
        seed in any::<u64>(),
    ) {
        let bytes = random_bytes(size, seed);
        let chunk = chunk_kib * 1024;
        let cuts: Vec<u64> = (1..).map(|i| i * chunk).take_while(|&c| c < size as u64).collect();
        let kept = (size as f64 * kept_frac) as u64;
        for algorithm in Algorithm::ALL {
            let keep = |i: usize| !dropped.get(i).copied().unwrap_or(false);
            let got = from_pieces(algorithm, &bytes, &cuts, keep, kept);
            prop_assert_eq!(got.digest.to_string(), reference(algorithm, &bytes));
        }
    }
}
