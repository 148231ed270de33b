//! How a client's waiting file goes to the engine: flown (queued in the engine's flight,
//! beside other clients' files) or copied in turn, a part at a time.

use super::connections::Job;
use super::recorder::{progress_to, ProgressTo};
use crate::service::wire::Handover;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// How a waiting file goes into the engine's flight: its length, whether DEST is cut, and
/// where its progress goes.
pub(super) struct Flying {
    pub(super) len: u64,
    pub(super) truncate: bool,
    pub(super) reports: Option<ProgressTo>,
}

/// What the engine queues: the largest file ([`aiscp_engine::Engine::queue_max`]; None:
/// none), and whether a larger one may fly all the same, on one slot
/// ([`aiscp_engine::Engine::flies_large_files`]).
pub(super) struct Queues {
    pub(super) max: Option<u64>,
    pub(super) large: bool,
}

/// Whether the client's first waiting file (`front`, its client on `sock`) flies, and how;
/// None: it is copied in turn. `others_busy`: another client has files waiting or in
/// flight.
pub(super) fn how_it_flies(
    front: &Job,
    sock: &Arc<OwnedFd>,
    queues: &Queues,
    others_busy: bool,
) -> Option<Flying> {
    let flying = |len, truncate, reports| {
        Some(Flying {
            len,
            truncate,
            reports,
        })
    };
    match front.handover {
        Handover::InFlight { len, truncate } if queues.max.is_some_and(|m| len <= m) => {
            flying(len, truncate, None)
        }
        // A source read to its end (a /proc file) may take any time: it flies on one
        // slot, never on this thread, whatever the route (files in flight bounce).
        Handover::InFlight { len: 0, truncate } => flying(0, truncate, None),
        Handover::InTurn { len: None } => flying(0, false, Some(progress_to(sock, front.id))),
        // A file too large to fly as the client sees it is copied with every slot, a
        // part at a time, while no other client has work; while others do, it flies
        // on one slot beside their files, so no client waits behind another's large
        // file (not on the library route, whose large files are the library's).
        Handover::InTurn { len: Some(len) } if queues.large && others_busy => {
            flying(len, true, Some(progress_to(sock, front.id)))
        }
        _ => None,
    }
}
