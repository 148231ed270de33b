//! The workers' queue of batches: one mutex and a condition variable, so a batch sent wakes
//! the one worker that takes it. (A channel's receiver shared behind a mutex woke two: the
//! worker waiting in `recv` while holding the mutex, then the next one in line for it.)

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

struct Jobs<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    queue: VecDeque<T>,
    /// The sender is gone: once the queue is empty, the workers end.
    closed: bool,
    /// Receivers alive: with none, a send fails (as a channel's does).
    receivers: usize,
}

/// The sending end (one, the caller's); dropping it closes the queue.
pub(crate) struct Sender<T>(Arc<Jobs<T>>);

/// A receiving end, one a worker; cloned for each.
pub(crate) struct Receiver<T>(Arc<Jobs<T>>);

/// An empty, open queue.
pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let jobs = Arc::new(Jobs {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            closed: false,
            receivers: 1,
        }),
        ready: Condvar::new(),
    });
    (Sender(Arc::clone(&jobs)), Receiver(jobs))
}

impl<T> Jobs<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T> Sender<T> {
    /// Queues `item` and wakes one waiting worker; it comes back when every receiver is
    /// gone.
    pub(crate) fn send(&self, item: T) -> Result<(), T> {
        let mut state = self.0.lock();
        if state.receivers == 0 {
            return Err(item);
        }
        state.queue.push_back(item);
        drop(state);
        self.0.ready.notify_one();
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_all();
    }
}

impl<T> Receiver<T> {
    /// The next item, waiting for one; None once the queue is closed and empty.
    pub(crate) fn recv(&self) -> Option<T> {
        let mut state = self.0.lock();
        loop {
            if let Some(item) = state.queue.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.0.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Receiver<T> {
        self.0.lock().receivers += 1;
        Receiver(Arc::clone(&self.0))
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.lock().receivers -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::channel;

    #[test]
    fn items_come_in_order_then_none_once_closed() {
        let (tx, rx) = channel();
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Some(1));
        assert_eq!(rx.recv(), Some(2));
        assert_eq!(rx.recv(), None);
    }

    #[test]
    fn a_send_fails_once_every_receiver_is_gone() {
        let (tx, rx) = channel();
        let other = rx.clone();
        drop(rx);
        tx.send(1).unwrap();
        drop(other);
        assert_eq!(tx.send(2), Err(2));
    }

    #[test]
    fn a_waiting_worker_is_woken() {
        let (tx, rx) = channel();
        let worker = std::thread::spawn(move || (rx.recv(), rx.recv()));
        tx.send(7).unwrap();
        drop(tx);
        assert_eq!(worker.join().unwrap(), (Some(7), None));
    }
}
