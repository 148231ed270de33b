//! A file rewritten by another process while the ranks copy its parts, DEST on a ramfs: a
//! filesystem whose SEEK_DATA calls every byte data (generic_file_llseek, as on NFSv3, 9p
//! and FUSE without lseek), so DEST's own holes cannot say which ranges no part wrote.

use super::{host, mpirun_command, text, CHUNK, SMALL_PARTS};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use test_support::skip::skip;

/// A ramfs mounted on `dir/mnt`, unmounted on drop.
struct Ramfs {
    mnt: PathBuf,
}

impl Ramfs {
    /// None (with the reason recorded) where this process may not mount.
    fn mount(dir: &Path) -> Option<Ramfs> {
        let mnt = dir.join("mnt");
        fs::create_dir(&mnt).unwrap();
        match Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(&mnt)
            .output()
        {
            Ok(o) if o.status.success() => Some(Ramfs { mnt }),
            Ok(o) => {
                skip("no mount rights", &text(&o.stderr));
                None
            }
            Err(e) => {
                skip("no mount", &format!("cannot run mount: {e}"));
                None
            }
        }
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// Rewrites `path` until `stop` is set: cut to 0, then written again 64 KiB at a time with a
/// pause after each write (every byte nonzero, never a hole), up to a length below `2 * len`
/// that changes each pass, so ranks planning their parts meanwhile find it short, then long.
fn rewrite_until(path: &Path, len: usize, stop: &AtomicBool) {
    let mut pass = 0usize;
    while !stop.load(Ordering::SeqCst) {
        pass += 1;
        let value = 1 + (pass % 255) as u8;
        let total = (pass * 524_309 % (2 * len)).max(1);
        let mut f = fs::File::create(path).unwrap();
        for at in (0..total).step_by(CHUNK) {
            f.write_all(&vec![value; CHUNK.min(total - at)]).unwrap();
            // Slow enough that a rank's plan often finds the file part way back.
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A file rewritten in a loop while three ranks copy it in parts of 256 KiB: a part planned
/// while the file was cut short sees no data in its range, and one planned after it grew
/// back does. The finish must look at the first part's range again (a NUL byte in DEST is
/// one SOURCE never held), without DEST's holes to say where it is. The race is not
/// certain in any one round; on the code that took the holes from DEST, about one round
/// in five gave NUL bytes.
#[test]
fn a_file_rewritten_while_ranks_copy_it_never_gains_nul_bytes_on_a_ramfs() {
    const LEN: usize = 1 << 20;
    for round in 0..60 {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let Some(ramfs) = Ramfs::mount(dir) else {
            return;
        };
        let src = dir.join("f000");
        fs::write(&src, vec![1u8; 2 * LEN]).unwrap();
        let stop = AtomicBool::new(false);
        let dst = ramfs.mnt.join("f000");
        let out = std::thread::scope(|s| {
            s.spawn(|| rewrite_until(&src, LEN, &stop));
            let mut args = SMALL_PARTS.to_vec();
            args.extend(["f000", dst.to_str().unwrap()]);
            let out = mpirun_command(3, dir, &host(), |_| (vec![], vec![]), &args, None).output();
            stop.store(true, Ordering::SeqCst);
            out.unwrap()
        });
        assert!(out.status.success(), "round {round}: {}", text(&out.stderr));
        let got = fs::read(&dst).unwrap();
        if let Some(at) = got.iter().position(|&b| b == 0) {
            panic!("round {round}: a NUL byte at {at} of {}", got.len());
        }
    }
}
