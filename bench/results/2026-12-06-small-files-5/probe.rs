use io_uring::{opcode, types, IoUring};
use std::ffi::CString;
use std::time::Instant;

fn cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn tcpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let mode = &args[2];
    let n: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(16);
    let workers: u32 = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(0);
    let names: Vec<CString> = {
        let mut v: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| CString::new(e.unwrap().file_name().into_encoded_bytes()).unwrap()).collect();
        v.sort();
        v
    };
    let cdir = CString::new(dir.as_str()).unwrap();
    let dfd = unsafe { libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    let mut fds = Vec::with_capacity(names.len());
    let (t0, c0, tc0) = (Instant::now(), cpu(), tcpu());
    let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if mode == "sync" {
        for nm in &names {
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            unsafe { libc::fstatat(dfd, nm.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
            let fd = unsafe { libc::openat(dfd, nm.as_ptr(), flags) };
            let mut st2: libc::stat = unsafe { std::mem::zeroed() };
            unsafe { libc::fstat(fd, &mut st2) };
            assert_eq!(st.st_ino, st2.st_ino);
            fds.push(fd);
            if fds.len() >= 256 { for f in fds.drain(..) { unsafe { libc::close(f) }; } }
        }
    } else {
        let mut ring = IoUring::new(256).unwrap();
        if workers > 0 {
            let mut w = [workers, workers];
            ring.submitter().register_iowq_max_workers(&mut w).unwrap();
        }
        let empty = CString::new("").unwrap();
        let mut sx: Vec<libc::statx> = vec![unsafe { std::mem::zeroed() }; n];
        let mut sx2: Vec<libc::statx> = vec![unsafe { std::mem::zeroed() }; n];
        let mut ofd = vec![-1i32; n];
        for chunk in names.chunks(n) {
            let k = chunk.len();
            if mode == "uring3" || mode == "uring2" {
                // round 1: statx of names (uring3) or statx+open linked (uring2)
                for (i, nm) in chunk.iter().enumerate() {
                    let e = opcode::Statx::new(types::Fd(dfd), nm.as_ptr(), &mut sx[i] as *mut _ as *mut _)
                        .flags(libc::AT_SYMLINK_NOFOLLOW).mask(libc::STATX_BASIC_STATS).build().user_data(i as u64);
                    unsafe { ring.submission().push(&e).unwrap() };
                    if mode == "uring2" {
                        let o = opcode::OpenAt::new(types::Fd(dfd), nm.as_ptr()).flags(flags).build().user_data((1000 + i) as u64);
                        unsafe { ring.submission().push(&o).unwrap() };
                    }
                }
                let want = if mode == "uring2" { 2 * k } else { k };
                ring.submit_and_wait(want).unwrap();
                let mut got = 0;
                while got < want {
                    for c in ring.completion() { got += 1; if c.user_data() >= 1000 { ofd[c.user_data() as usize - 1000] = c.result(); } }
                    if got < want { ring.submit_and_wait(1).unwrap(); }
                }
                if mode == "uring3" {
                    for (i, nm) in chunk.iter().enumerate() {
                        let o = opcode::OpenAt::new(types::Fd(dfd), nm.as_ptr()).flags(flags).build().user_data(i as u64);
                        unsafe { ring.submission().push(&o).unwrap() };
                    }
                    ring.submit_and_wait(k).unwrap();
                    let mut got = 0;
                    while got < k { for c in ring.completion() { got += 1; ofd[c.user_data() as usize] = c.result(); } if got < k { ring.submit_and_wait(1).unwrap(); } }
                }
            } else if mode == "openring" {
                for (i, nm) in chunk.iter().enumerate() {
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    unsafe { libc::fstatat(dfd, nm.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
                    sx[i].stx_ino = st.st_ino;
                    let o = opcode::OpenAt::new(types::Fd(dfd), nm.as_ptr()).flags(flags).build().user_data(i as u64);
                    unsafe { ring.submission().push(&o).unwrap() };
                }
                ring.submit_and_wait(k).unwrap();
                let mut got = 0;
                while got < k { for c in ring.completion() { got += 1; ofd[c.user_data() as usize] = c.result(); } if got < k { ring.submit_and_wait(1).unwrap(); } }
                for i in 0..k {
                    let mut st2: libc::stat = unsafe { std::mem::zeroed() };
                    unsafe { libc::fstat(ofd[i], &mut st2) };
                    assert_eq!(sx[i].stx_ino, st2.st_ino);
                    fds.push(ofd[i]);
                }
                if fds.len() >= 256 { for f in fds.drain(..) { unsafe { libc::close(f) }; } }
                continue;
            } else { // "sync-stat-open" then uring fstat? mode uring1: sync stat+open, uring fstat batch
                for (i, nm) in chunk.iter().enumerate() {
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    unsafe { libc::fstatat(dfd, nm.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
                    sx[i].stx_ino = st.st_ino;
                    ofd[i] = unsafe { libc::openat(dfd, nm.as_ptr(), flags) };
                }
            }
            for i in 0..k {
                let e = opcode::Statx::new(types::Fd(ofd[i]), empty.as_ptr(), &mut sx2[i] as *mut _ as *mut _)
                    .flags(libc::AT_EMPTY_PATH).mask(libc::STATX_BASIC_STATS).build().user_data(i as u64);
                unsafe { ring.submission().push(&e).unwrap() };
            }
            ring.submit_and_wait(k).unwrap();
            let mut got = 0;
            while got < k { for _c in ring.completion() { got += 1; } if got < k { ring.submit_and_wait(1).unwrap(); } }
            for i in 0..k { assert_eq!(sx[i].stx_ino, sx2[i].stx_ino); fds.push(ofd[i]); }
            if fds.len() >= 256 { for f in fds.drain(..) { unsafe { libc::close(f) }; } }
        }
    }
    let (wall, c, tc) = (t0.elapsed().as_secs_f64(), cpu() - c0, tcpu() - tc0);
    for fd in fds { unsafe { libc::close(fd) }; }
    println!("{mode} n={n} w={workers} wall={wall:.4} cpu={c:.4} thread={tc:.4}");
}
