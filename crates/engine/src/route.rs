//! How one side of a file's copy moves its bytes: the route's one name table, for the
//! progress view, `--stats`, `--debug` and the staging service's wire.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// How SOURCE is read, or DEST written, for one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Route {
    /// The GPU I/O library straight between the file and device memory.
    Direct,
    /// POSIX I/O with O_DIRECT through the host window.
    ODirect,
    /// POSIX I/O through the page cache and the host window.
    Bounce,
    /// A sequential source read until EOF (the name in output predates the word).
    Stream,
}

impl Route {
    const NAMES: [(Route, &'static str); 4] = [
        (Route::Direct, "direct"),
        (Route::ODirect, "O_DIRECT"),
        (Route::Bounce, "bounce"),
        (Route::Stream, "stream"),
    ];

    /// The name output and the wire use.
    pub fn name(self) -> &'static str {
        Route::NAMES
            .iter()
            .find(|(r, _)| *r == self)
            .map_or("", |(_, n)| n)
    }

    /// The route a name stands for (None: not one of [`Route::name`]'s).
    pub fn from_name(name: &str) -> Option<Route> {
        Route::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(r, _)| *r)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Route {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Route {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Route, D::Error> {
        let name = String::deserialize(d)?;
        Route::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown route {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    #[test]
    fn names_round_trip() {
        for (route, name) in Route::NAMES {
            assert_eq!(route.name(), name);
            assert_eq!(Route::from_name(name), Some(route));
        }
        assert_eq!(Route::from_name("other"), None);
    }
}
