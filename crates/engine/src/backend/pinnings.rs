//! What the bounce windows' pinned memory turned out to be, for --debug at the end of a run:
//! the runtime's own pinned memory, taken where it refuses to register ours, makes the
//! route's reads slower (BENCHMARKS.md, "Pinned windows on huge pages"), and a user should
//! be able to see that it happened and why.

use hipfile::Pinning;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The windows allocated in a run, counted by how they were pinned.
#[derive(Default)]
pub(super) struct Pinnings {
    /// Ours, registered: asking for huge pages, and not (windows under 2 MiB).
    huge: AtomicUsize,
    small: AtomicUsize,
    /// The runtime's own.
    allocated: AtomicUsize,
    /// The runtime's first refusal to register ours.
    refusal: Mutex<Option<String>>,
}

impl Pinnings {
    pub(super) fn record(&self, pinning: Option<Pinning>) {
        let count = match pinning {
            None => return,
            Some(Pinning::Registered { huge_pages: true }) => &self.huge,
            Some(Pinning::Registered { huge_pages: false }) => &self.small,
            Some(Pinning::Allocated { refusal }) => {
                self.refusal.lock().unwrap().get_or_insert(refusal);
                &self.allocated
            }
        };
        count.fetch_add(1, Ordering::Relaxed);
    }

    /// One line saying how the run's windows were pinned; None when it allocated none.
    pub(super) fn describe(&self) -> Option<String> {
        let refusal = self.refusal.lock().unwrap().clone().unwrap_or_default();
        let kinds = [
            (&self.huge, "aiscp's own memory, huge pages asked for"),
            (
                &self.small,
                "aiscp's own memory, 4 KiB pages (each under 2 MiB)",
            ),
            (
                &self.allocated,
                &format!("the runtime's pinned memory, as registering ours was refused: {refusal}"),
            ),
        ];
        let said: Vec<String> = kinds
            .iter()
            .map(|(count, what)| (count.load(Ordering::Relaxed), what))
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} on {what}"))
            .collect();
        (!said.is_empty()).then(|| format!("pinned windows: {}", said.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_each_kind_and_the_first_refusal() {
        let p = Pinnings::default();
        assert_eq!(p.describe(), None);
        p.record(None);
        assert_eq!(p.describe(), None);
        p.record(Some(Pinning::Registered { huge_pages: true }));
        p.record(Some(Pinning::Registered { huge_pages: true }));
        assert_eq!(
            p.describe().unwrap(),
            "pinned windows: 2 on aiscp's own memory, huge pages asked for"
        );
        p.record(Some(Pinning::Registered { huge_pages: false }));
        for why in ["first", "second"] {
            p.record(Some(Pinning::Allocated {
                refusal: why.to_owned(),
            }));
        }
        assert_eq!(
            p.describe().unwrap(),
            "pinned windows: 2 on aiscp's own memory, huge pages asked for; 1 on aiscp's own \
             memory, 4 KiB pages (each under 2 MiB); 2 on the runtime's pinned memory, as \
             registering ours was refused: first"
        );
    }
}
