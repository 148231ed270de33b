//! Which backend a run stages through, with the one spelling output and the staging
//! service's wire use.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// What a run stages through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// AMD's hipFile, into GPU memory.
    HipFile,
    /// NVIDIA's cuFile, into GPU memory.
    CuFile,
    /// Host memory, no GPU.
    Host,
}

impl Backend {
    const NAMES: [(Backend, &'static str); 3] = [
        (Backend::HipFile, "hipFile"),
        (Backend::CuFile, "cuFile"),
        (Backend::Host, "host memory"),
    ];

    /// The name output and the wire use.
    pub fn name(self) -> &'static str {
        Backend::NAMES
            .iter()
            .find(|(b, _)| *b == self)
            .map_or("", |(_, n)| n)
    }

    /// The backend a name stands for (None: not one of [`Backend::name`]'s).
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(b, _)| *b)
    }

    /// The backend of a GPU library.
    pub(crate) fn of(flavor: hipfile::Flavor) -> Backend {
        match flavor {
            hipfile::Flavor::HipFile => Backend::HipFile,
            hipfile::Flavor::CuFile => Backend::CuFile,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Backend {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Backend {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Backend, D::Error> {
        let name = String::deserialize(d)?;
        Backend::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown backend {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::Backend;

    #[test]
    fn names_round_trip() {
        for (backend, name) in Backend::NAMES {
            assert_eq!(backend.name(), name);
            assert_eq!(Backend::from_name(name), Some(backend));
        }
        assert_eq!(Backend::from_name("other"), None);
    }
}
