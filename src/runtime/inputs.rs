//! Inputs given by name (a safetensors file, `NAME=FILE.npy`, a JS object) put into the
//! program's flattened user-input order, with typed errors for a missing or unknown name.

use super::RValue;
use crate::error::{Error, Result};
use crate::program::Program;
use std::collections::BTreeMap;

/// Order named inputs as the program's user inputs (the names `pt2web info` shows: torch's
/// placeholder names, e.g. `x` or `batch_feat` for `batch["feat"]`). An unknown name and a
/// missing name are both [`Error::Input`] naming it and listing the expected names.
pub fn order_named_inputs(
    program: &Program,
    mut given: BTreeMap<String, RValue>,
) -> Result<Vec<RValue>> {
    let names: Vec<&str> = program
        .user_inputs()
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    let expected = || names.join(", ");
    if let Some(extra) = given.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(Error::Input {
            input: extra.clone(),
            msg: format!("not an input of the program (inputs: {})", expected()),
        });
    }
    names
        .iter()
        .map(|n| {
            given.remove(*n).ok_or_else(|| Error::Input {
                input: n.to_string(),
                msg: format!("missing (inputs: {})", expected()),
            })
        })
        .collect()
}
