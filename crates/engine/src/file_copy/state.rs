//! One file's copy as a value, apart from its methods (in its parent and siblings) so that
//! each of them imports it from here.

use crate::bounce::Names;
use crate::job::SparseMode;
use crate::worker::{Handle, SideRoute};
use std::fs::File;

/// SOURCE's side and DEST's, opened for the data phase, each with why it is not direct.
pub(crate) type Sides<'fd, S> = [(SideRoute<Handle<'fd, S>>, &'static str); 2];

/// One regular SOURCE into one regular DEST.
pub(crate) struct FileCopy<'a> {
    pub(crate) src: &'a File,
    pub(crate) dst: &'a File,
    pub(crate) names: &'a Names<'a>,
    pub(crate) sparse: SparseMode,
    /// SOURCE may hold holes, so its plan looks its extents up ([`crate::QueuedJob`]'s
    /// field of the same name).
    pub(crate) may_have_holes: bool,
}
