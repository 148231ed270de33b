//! Bounded places for connections (those saying hello, those served), each held by a uid:
//! so many in all, and so many for any one uid, so that on a service shared with other users
//! one user cannot take every place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(super) struct Places {
    total: usize,
    per_uid: usize,
    taken: Mutex<HashMap<u32, usize>>,
}

/// Why a place could not be had.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Full {
    /// Every place is taken.
    All(usize),
    /// This uid holds all it may.
    Uid(usize),
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::All(n) => write!(f, "{n} clients already"),
            Full::Uid(n) => write!(f, "this user has {n} clients already"),
        }
    }
}

/// One place, given back when dropped.
pub(super) struct Place {
    places: Arc<Places>,
    uid: u32,
}

impl Places {
    pub(super) fn new(total: usize, per_uid: usize) -> Arc<Places> {
        Arc::new(Places {
            total,
            per_uid,
            taken: Mutex::new(HashMap::new()),
        })
    }

    pub(super) fn take(self: &Arc<Self>, uid: u32) -> Result<Place, Full> {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        if taken.values().sum::<usize>() >= self.total {
            return Err(Full::All(self.total));
        }
        let held = taken.entry(uid).or_default();
        if *held >= self.per_uid {
            return Err(Full::Uid(self.per_uid));
        }
        *held += 1;
        Ok(Place {
            places: Arc::clone(self),
            uid,
        })
    }

    /// Places taken now.
    pub(super) fn count(&self) -> usize {
        let taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        taken.values().sum()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut taken = self.places.taken.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = taken.get_mut(&self.uid) {
            *held -= 1;
            if *held == 0 {
                taken.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_all_and_per_uid_and_given_back() {
        let places = Places::new(3, 2);
        let a1 = places.take(1).unwrap();
        let _a2 = places.take(1).unwrap();
        assert_eq!(places.take(1).err(), Some(Full::Uid(2)));
        let _b1 = places.take(2).unwrap();
        assert_eq!(places.take(3).err(), Some(Full::All(3)));
        assert_eq!(places.count(), 3);
        drop(a1);
        assert_eq!(places.count(), 2);
        assert!(places.take(3).is_ok());
    }
}
