//! Who moves a file's data, each a [`mover::DataMover`] the copier hands it to: this
//! process's engine (`local_engine`), the staging service (`service_client`), or the MPI
//! ranks (`mpi_coordinator`, with `--features mpi`). The service's and the ranks' own ends
//! are `service` and `ranks`, beside this.

pub mod local_engine;
pub mod mover;
#[cfg(feature = "mpi")]
pub mod mpi_coordinator;
pub mod service_client;
