//! --verify for files another process copied (the staging service's client takes back
//! whole files the service copied): the read-back threads of files in flight here
//! ([`crate::read_back`]), offered to a caller that is not the engine.

use crate::queue::{read_back_one, Finished};
use crate::read_back::{Checking, ReadBacks};
use crate::verify::Buffers;
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// The read-back threads for files another process copied (the staging service's client
/// takes back whole files the service copied): the same threads, check and --debug lines
/// as files in flight here, so every --verify of a file in flight follows one rule.
pub struct ReadBackPool {
    /// Declared first: dropped (its threads joined, their files read back) before the rest.
    threads: Option<ReadBacks<Finished>>,
    done_tx: mpsc::Sender<Finished>,
    done: mpsc::Receiver<Finished>,
    checking: Checking,
    /// Files handed in and not yet taken back.
    waiting: usize,
}

impl ReadBackPool {
    /// Threads that read files back under `config`'s stop flag and test pause; --debug lines
    /// are stamped from now.
    pub fn start(config: &crate::config::Config) -> ReadBackPool {
        let (done_tx, done) = mpsc::channel();
        let checking = Checking {
            verify: config.verify.unwrap_or(crate::config::Verify::Bytes),
            pause: config.pause,
            debug: config.debug.then(Instant::now),
            stop: Arc::clone(&config.cancel),
        };
        let threads = ReadBacks::start(&done_tx, read_back_one, checking.clone());
        ReadBackPool {
            threads,
            done_tx,
            done,
            checking,
            waiting: 0,
        }
    }

    /// Reads back a file whose copy ended well, its writeback started first, on a thread
    /// (here where none could be started); [`ReadBackPool::next`] gives it back, its result
    /// the read-back's.
    pub fn check(&mut self, f: Finished) {
        self.waiting += 1;
        crate::verify::start_writeback(&f.job.dst);
        let sent = match self.threads.as_ref().and_then(ReadBacks::sender) {
            Some(files) => files.send(f).map_err(|e| e.0),
            None => Err(f),
        };
        if let Err(mut f) = sent {
            read_back_one(&mut f, &self.checking, &mut Buffers::default());
            let _ = self.done_tx.send(f);
        }
    }

    /// How many files are being read back (they are still in flight).
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// A file whose read-back has ended; with `block`, waits for one while any is waiting.
    pub fn next(&mut self, block: bool) -> Option<Finished> {
        if self.waiting == 0 {
            return None;
        }
        let f = match block {
            true => self.done.recv().ok(),
            false => self.done.try_recv().ok(),
        }?;
        self.waiting -= 1;
        Some(f)
    }
}
