//! --verify for files in flight, off the workers: a file whose data is written has its
//! writeback started at once and goes to a few read-back threads, so the workers (and their
//! slots) go on to the next files while its pages reach the device and it is read back. A
//! worker reading its own file back would wait for that file's whole writeback first
//! (bench/results/HISTORY.md, "--verify at copy speed").
//!
//! Bounds: a file waiting here is still in flight (it counts against the files-in-flight
//! limit until the caller takes its result), so the descriptors are those of the files in
//! flight plus one reopened DEST per read-back thread; memory is at most three buffers per
//! thread of [`crate::verify::VERIFY_CHUNK`] each, fitted to the file, besides the two of
//! 256 KiB a thread keeps for small files (12.5 MiB a thread, 50 MiB for all four).

use crate::verify::Buffers;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Read-back threads: enough that several files' writebacks and reads are at the device at
/// once (a thread mostly waits on it), few enough to stay a small cost beside the workers.
pub(crate) const THREADS: usize = 4;

/// The read-back threads of one flight: each file `T` sent is read back by the flight's
/// check and handed on to the flight's `done` channel.
pub(crate) struct ReadBacks<T> {
    files: Option<mpsc::Sender<T>>,
    threads: Vec<JoinHandle<()>>,
}

/// What every read-back needs besides the file.
#[derive(Clone)]
pub(crate) struct Checking {
    /// How a file is checked.
    pub(crate) verify: crate::config::Verify,
    pub(crate) pause: fn(&'static str),
    /// The engine's start, for --debug stamps; None without --debug.
    pub(crate) debug: Option<Instant>,
    /// The run's stop flag (a signal): read-backs end at their next chunk, interrupted.
    pub(crate) stop: Arc<AtomicBool>,
}

/// Reads one file back, its outcome written into it, through the thread's buffers.
pub(crate) type Check<T> = fn(&mut T, &Checking, &mut Buffers);

impl<T: Send + 'static> ReadBacks<T> {
    /// Starts up to [`THREADS`] threads; None when none could be started (the workers then
    /// read their files back themselves).
    pub(crate) fn start(
        done: &mpsc::Sender<T>,
        check: Check<T>,
        checking: Checking,
    ) -> Option<ReadBacks<T>> {
        let (tx, rx) = mpsc::channel::<T>();
        let rx = Arc::new(Mutex::new(rx));
        let threads: Vec<_> = (0..THREADS)
            .filter_map(|i| {
                let (rx, done, checking) = (Arc::clone(&rx), done.clone(), checking.clone());
                std::thread::Builder::new()
                    .name(format!("aiscp-verify-{i}"))
                    .spawn(move || run(&rx, &done, check, checking))
                    .ok()
            })
            .collect();
        (!threads.is_empty()).then_some(ReadBacks {
            files: Some(tx),
            threads,
        })
    }

    /// Where a worker sends a file whose data is written (its writeback started).
    pub(crate) fn sender(&self) -> Option<mpsc::Sender<T>> {
        self.files.clone()
    }
}

impl<T> Drop for ReadBacks<T> {
    /// The threads end once every sender is gone and the files sent are read back: call it
    /// after the workers (which hold senders) are joined.
    fn drop(&mut self) {
        self.files = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One read-back thread: each file sent is checked and handed on to `done`.
fn run<T>(files: &Mutex<mpsc::Receiver<T>>, done: &mpsc::Sender<T>, check: Check<T>, c: Checking) {
    let mut buffers = Buffers::default();
    loop {
        let next = files.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(mut f) = next else {
            return;
        };
        check(&mut f, &c, &mut buffers);
        if done.send(f).is_err() {
            return;
        }
    }
}
