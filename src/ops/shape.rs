//! Op family: shape (being written).

use super::Registry;

pub(crate) fn register(r: &mut Registry) {
    let _ = r;
}
