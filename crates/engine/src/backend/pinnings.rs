//! What the bounce windows' pinned memory turned out to be, for --debug at the end of a run:
//! the runtime's own pinned memory, taken where it refuses to register ours, makes the
//! route's reads slower (BENCHMARKS.md, "Pinned windows on huge pages"), and a user should
//! be able to see that it happened and why.

use hipfile::{Flavor, Pinning};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The windows allocated in a run, counted by how they were pinned.
#[derive(Default)]
pub(super) struct Pinnings {
    registered: AtomicUsize,
    allocated: AtomicUsize,
    /// The runtime's first refusal to register our memory.
    refusal: Mutex<Option<String>>,
}

impl Pinnings {
    pub(super) fn record(&self, pinning: Option<Pinning>) {
        match pinning {
            None => {}
            Some(Pinning::Registered) => {
                self.registered.fetch_add(1, Ordering::Relaxed);
            }
            Some(Pinning::Allocated { refusal }) => {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                self.refusal.lock().unwrap().get_or_insert(refusal);
            }
        }
    }

    /// One line saying how the run's windows were pinned; None when it allocated none.
    pub(super) fn describe(&self, flavor: Flavor) -> Option<String> {
        let (register, alloc) = match flavor {
            Flavor::HipFile => ("hipHostRegister", "hipHostMalloc"),
            Flavor::CuFile => ("cuMemHostRegister", "cuMemHostAlloc"),
        };
        let registered = self.registered.load(Ordering::Relaxed);
        let allocated = self.allocated.load(Ordering::Relaxed);
        let ours = format!("{registered} on aiscp's own huge-page mapping, pinned with {register}");
        let refusal = self.refusal.lock().unwrap().clone().unwrap_or_default();
        let theirs =
            format!("{allocated} from {alloc}, because {register} refused ours: {refusal}");
        match (registered, allocated) {
            (0, 0) => None,
            (_, 0) => Some(format!("pinned windows: {ours}")),
            (0, _) => Some(format!("pinned windows: {theirs}")),
            _ => Some(format!("pinned windows: {ours}; {theirs}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_each_kind_and_the_first_refusal() {
        let p = Pinnings::default();
        assert_eq!(p.describe(Flavor::CuFile), None);
        p.record(None);
        assert_eq!(p.describe(Flavor::CuFile), None);
        p.record(Some(Pinning::Registered));
        p.record(Some(Pinning::Registered));
        assert_eq!(
            p.describe(Flavor::CuFile).unwrap(),
            "pinned windows: 2 on aiscp's own huge-page mapping, pinned with cuMemHostRegister"
        );
        for why in ["first", "second"] {
            p.record(Some(Pinning::Allocated {
                refusal: why.to_owned(),
            }));
        }
        assert_eq!(
            p.describe(Flavor::HipFile).unwrap(),
            "pinned windows: 2 on aiscp's own huge-page mapping, pinned with hipHostRegister; \
             2 from hipHostMalloc, because hipHostRegister refused ours: first"
        );
    }
}
