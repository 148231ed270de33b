//! Unit tests of the read-back: sizes across chunk boundaries, the offsets and lengths a
//! mismatch names, buffers kept between files.

use super::*;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::AtomicBool;

/// A small read size, so that tests cross many chunk boundaries cheaply.
const CHUNK: usize = 64 << 10;

/// Deterministic pseudo-random bytes (xorshift), so a failure reproduces.
fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> (File, std::path::PathBuf) {
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    (File::open(&path).unwrap(), path)
}

fn check(src: &[u8], dst: &[u8]) -> Result<Verified, VerifyError> {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = file_with(dir.path(), "a", src);
    let (d, _) = file_with(dir.path(), "b", dst);
    // Short names, as a user in that directory would have typed them.
    let mut buffers = Buffers::default();
    let (a, b) = (Path::new("a"), Path::new("b"));
    verify_in_chunks(
        (&s, a),
        (&d, b),
        (CHUNK, &AtomicBool::new(false)),
        &mut buffers,
    )
}

#[test]
fn identical_files_verify_at_boundary_sizes() {
    let sizes = [
        0,
        1,
        4095,
        4096,
        4097,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        2 * CHUNK + 12345,
    ];
    for (i, len) in sizes.into_iter().enumerate() {
        let bytes = data(len, i as u64 + 1);
        let v = check(&bytes, &bytes).unwrap_or_else(|e| panic!("size {len}: {e}"));
        assert_eq!(v.bytes, len as u64);
        let xxh3 = xxhash_rust::xxh3::xxh3_128(&bytes);
        assert_eq!(v.checked, Checked::Bytes { xxh3 }, "size {len}");
    }
}

#[test]
fn first_differing_offset_is_named() {
    let len = CHUNK + 3 * 4096 + 17;
    let bytes = data(len, 7);
    let offsets = [0, 1, 4095, 4096, 4097, CHUNK - 1, CHUNK, len - 1];
    for off in offsets {
        let mut tampered = bytes.clone();
        tampered[off] ^= 0x5a;
        // A second, later difference must not hide the first one.
        if off + 10 < len {
            tampered[off + 10] ^= 1;
        }
        let e = check(&bytes, &tampered).expect_err("tampered copy verified");
        assert_eq!(e.offset(), Some(off as u64), "{e}");
        assert!(matches!(e, VerifyError::Differs { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("verification failed: 'b' differs from 'a' at offset {off}")
        );
    }
}

#[test]
fn a_shorter_or_longer_copy_fails_where_it_ends() {
    let bytes = data(3 * 4096 + 5, 9);
    let e = check(&bytes, &bytes[..4096]).expect_err("short copy verified");
    assert_eq!(e.offset(), Some(4096));
    assert_eq!(
        e.to_string(),
        format!(
            "verification failed: 'b' is 4096 bytes long, 'a' is {}",
            bytes.len()
        )
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 100]);
    let e = check(&bytes, &longer).expect_err("padded copy verified");
    assert_eq!(e.offset(), Some(bytes.len() as u64));
    assert!(
        e.to_string()
            .contains(&format!("'b' is {} bytes long", longer.len())),
        "{e}"
    );
    let e = check(&bytes, &[]).expect_err("empty copy verified");
    assert_eq!(e.offset(), Some(0));
}

#[test]
fn a_padded_copy_longer_than_a_chunk_reports_its_full_length() {
    let bytes = data(100, 3);
    let mut longer = bytes.clone();
    longer.resize(CHUNK + 100, 0);
    let e = check(&bytes, &longer).expect_err("padded copy verified");
    assert_eq!(e.offset(), Some(100));
    assert!(
        e.to_string()
            .contains(&format!("'b' is {} bytes long, 'a' is 100", longer.len())),
        "{e}"
    );
}

#[test]
fn a_write_only_destination_is_read_back_through_a_new_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = data(10_000, 5);
    let (s, sp) = file_with(dir.path(), "a", &bytes);
    let dp = dir.path().join("b");
    let mut d = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&dp)
        .unwrap();
    d.write_all(&bytes).unwrap();
    verify(&s, &sp, &d, &dp, &AtomicBool::new(false)).unwrap();
    // A name replaced after the copy does not matter: the descriptor's inode is checked.
    std::fs::remove_file(&dp).unwrap();
    std::fs::write(&dp, b"something else").unwrap();
    verify(&s, &sp, &d, &dp, &AtomicBool::new(false)).unwrap();
}

#[test]
fn streams_and_devices_cannot_be_verified() {
    let dir = tempfile::tempdir().unwrap();
    let (d, dp) = file_with(dir.path(), "b", b"x");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let s = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let e = verify(&s, &fifo, &d, &dp, &AtomicBool::new(false)).expect_err("a FIFO verified");
    assert!(e.to_string().starts_with("cannot verify "), "{e}");
    let null = OpenOptions::new().write(true).open("/dev/null").unwrap();
    let e = verify(
        &d,
        &dp,
        &null,
        Path::new("/dev/null"),
        &AtomicBool::new(false),
    )
    .expect_err("/dev/null verified");
    assert_eq!(
        e.to_string(),
        "cannot verify '/dev/null': not a regular file"
    );
    // A /proc file: regular, size 0, yet a read gives data. An empty file verifies.
    let proc = Path::new("/proc/self/status");
    let p = File::open(proc).unwrap();
    let e = verify(&p, proc, &d, &dp, &AtomicBool::new(false)).expect_err("/proc verified");
    assert_eq!(
        e.to_string(),
        "cannot verify '/proc/self/status': its size is 0 but reading it gives data \
         (it cannot be read twice)"
    );
    let (empty, ep) = file_with(dir.path(), "empty", b"");
    let (e2, e2p) = file_with(dir.path(), "empty2", b"");
    assert_eq!(
        verify(&empty, &ep, &e2, &e2p, &AtomicBool::new(false))
            .unwrap()
            .bytes,
        0
    );
}

/// Buffers kept from a longer file hold its bytes past the next file's end: they must
/// never count, whether the files match or one is cut short.
#[test]
fn kept_buffers_carry_nothing_to_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut buffers = Buffers::default();
    let (a, b) = (Path::new("a"), Path::new("b"));
    for (i, len) in [200_000usize, 5, 70_000, 0, 4096, 250_000, 1]
        .into_iter()
        .enumerate()
    {
        let bytes = data(len, 40 + i as u64);
        let (s, _) = file_with(dir.path(), "a", &bytes);
        let (d, _) = file_with(dir.path(), "b", &bytes);
        let v = verify_in_chunks(
            (&s, a),
            (&d, b),
            (VERIFY_CHUNK, &AtomicBool::new(false)),
            &mut buffers,
        )
        .unwrap();
        assert_eq!(v.bytes, len as u64);
        // The same SOURCE against a DEST one byte short, then one byte changed.
        if len > 0 {
            let (d, _) = file_with(dir.path(), "b", &bytes[..len - 1]);
            let e = verify_in_chunks(
                (&s, a),
                (&d, b),
                (VERIFY_CHUNK, &AtomicBool::new(false)),
                &mut buffers,
            );
            assert_eq!(
                e.expect_err("short copy verified").offset(),
                Some(len as u64 - 1)
            );
            let mut changed = bytes.clone();
            changed[len / 2] ^= 1;
            let (d, _) = file_with(dir.path(), "b", &changed);
            let e = verify_in_chunks(
                (&s, a),
                (&d, b),
                (VERIFY_CHUNK, &AtomicBool::new(false)),
                &mut buffers,
            );
            assert_eq!(
                e.expect_err("changed copy verified").offset(),
                Some(len as u64 / 2)
            );
        }
    }
}

#[test]
fn first_difference_finds_the_lowest_index() {
    let a = data(20_000, 11);
    assert_eq!(first_difference(&a, &a), None);
    for i in [0, 1, 4095, 4096, 8191, 19_999] {
        let mut b = a.clone();
        b[i] ^= 1;
        assert_eq!(first_difference(&a, &b), Some(i));
    }
}

#[test]
fn by_digest_a_dest_as_copied_verifies_and_a_changed_or_cut_one_does_not() {
    use crate::digest::Algorithm;
    let stop = AtomicBool::new(false);
    for len in [0usize, 1, 4095, 4096, (VERIFY_CHUNK * 2) + 5] {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        std::fs::write(&path, &bytes).unwrap();
        let dst = File::open(&path).unwrap();
        let copied = Copied {
            size: len as u64,
            digest: Some(Algorithm::Blake3.of_bytes(&bytes)),
        };
        let src = (&dst, path.as_path());
        let ok = crate::verify::check(
            Verify::Sums,
            src,
            (&dst, &path),
            &copied,
            &mut Buffers::default(),
            &stop,
        );
        let v = ok.unwrap_or_else(|e| panic!("{len}: {e}"));
        assert_eq!(v.bytes, len as u64);
        assert_eq!(v.checked, Checked::Digest(copied.digest.clone().unwrap()));
        if len == 0 {
            continue;
        }
        // A byte changed since, or the file cut: the digest read back is not the copy's.
        let mut changed = bytes.clone();
        changed[len / 2] ^= 1;
        for now in [&changed[..], &bytes[..len - 1]] {
            std::fs::write(&path, now).unwrap();
            let dst = File::open(&path).unwrap();
            let err = crate::verify::check(
                Verify::Sums,
                (&dst, &path),
                (&dst, &path),
                &copied,
                &mut Buffers::default(),
                &stop,
            )
            .unwrap_err();
            assert!(
                matches!(err, VerifyError::Digest { .. }) && err.to_string().contains(" as copied"),
                "{len}: {err}"
            );
        }
    }
}
