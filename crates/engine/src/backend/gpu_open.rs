//! How a GPU backend comes up: which GPUs a run takes, why one did not come up (in words
//! that name the step), and what --debug says of what was loaded.

use super::request::GpuChoice;
use hipfile::{Error, Flavor};

/// Why a GPU backend did not come up, by step: messages differ, and only a missing
/// library is a reason to try the next flavor quietly.
#[derive(Debug)]
pub enum OpenError {
    /// The libraries are missing or unusable, or there is no GPU.
    Library(Error),
    /// hipFileDriverOpen / cuFileDriverOpen failed.
    Driver(Error),
    /// The GPU asked for does not exist or cannot be selected.
    Device(Error),
}

impl OpenError {
    /// The message for `flavor`, e.g. "cannot open the hipFile driver: ...".
    pub fn describe(&self, flavor: Flavor) -> String {
        let name = flavor.name();
        match self {
            OpenError::Library(e) => format!("{name}: {e}"),
            OpenError::Driver(e) => format!("cannot open the {name} driver: {e}"),
            OpenError::Device(e @ Error::NoSuchDevice { .. }) => e.to_string(),
            // The library is fine: the GPU is full, often held by another process.
            OpenError::Device(
                e @ Error::Runtime {
                    code: hipfile::sys::RUNTIME_OUT_OF_MEMORY,
                    ..
                },
            ) => format!(
                "{name} loaded, but the GPU has no free memory for a context ({e}); another \
                 process may be holding it"
            ),
            OpenError::Device(e) => format!("{name}: cannot select the GPU: {e}"),
        }
    }
}

/// The GPUs `choice` names among the `count` there are, in the run's order.
pub(super) fn chosen_gpus(choice: &GpuChoice, count: u32) -> Result<Vec<u32>, OpenError> {
    let indices = match choice {
        GpuChoice::List(list) => list.clone(),
        GpuChoice::All | GpuChoice::Auto => (0..count).collect(),
        GpuChoice::Local(n) => vec![n % count],
    };
    match indices.iter().find(|&&i| i >= count) {
        Some(&index) => Err(OpenError::Device(Error::NoSuchDevice { index, count })),
        None => Ok(indices),
    }
}

/// --debug: what was loaded, and what the library reads ahead.
pub(super) fn describe_load(library: &hipfile::Library, count: u32) -> String {
    let read_ahead: Vec<String> = library
        .read_ahead()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    format!(
        "loaded {} and {}: {count} GPU(s); read ahead: {}",
        library.io_library_path().display(),
        library.runtime_library_path().display(),
        if read_ahead.is_empty() {
            "none".to_owned()
        } else {
            read_ahead.join(", ")
        },
    )
}

/// Each GPU chosen by index, with its PCI address where the runtime says.
pub(super) fn gpu_labels(indices: &[u32], bus_ids: &[Option<String>]) -> Vec<String> {
    indices
        .iter()
        .zip(bus_ids)
        .map(|(i, id)| match id {
            Some(id) => format!("{i} ({id})"),
            None => i.to_string(),
        })
        .collect()
}

/// --debug: the backend, its version and the GPUs chosen of the `count` there are.
pub(super) fn describe_backend(
    library: &hipfile::Library,
    flavor: Flavor,
    version: Option<&str>,
    gpus: &[String],
    count: u32,
) -> String {
    format!(
        "backend {} ({}{}), runtime {}, GPU {} of {count}",
        flavor.name(),
        library.io_library_path().display(),
        version.map(|v| format!(", {v}")).unwrap_or_default(),
        library.runtime_library_path().display(),
        gpus.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::OpenError;
    use hipfile::{Error, Flavor};

    #[test]
    fn a_full_gpu_is_named_as_such() {
        let e = OpenError::Device(Error::Runtime {
            call: "cuDevicePrimaryCtxRetain",
            code: hipfile::sys::RUNTIME_OUT_OF_MEMORY,
            text: "out of memory".into(),
        });
        assert_eq!(
            e.describe(Flavor::CuFile),
            "cuFile loaded, but the GPU has no free memory for a context \
             (cuDevicePrimaryCtxRetain: out of memory (error 2)); another process may be holding it"
        );
    }
}
