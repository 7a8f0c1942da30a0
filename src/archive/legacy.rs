//! The torch 2.5 layout of `torch.export.save`: entries at the top of the zip,
//! `serialized_exported_program.json` (schema 7.x, sympy `str()` expressions), and the state
//! dict, constants and example inputs as torch.save pickles.

use super::pt2::{state_dict_from_pickle, LoadOptions, RawProgram};
use super::ArchiveReader;
use crate::error::Result;
use crate::pickle;

pub const PROGRAM_JSON: &str = "serialized_exported_program.json";
pub const STATE_DICT: &str = "serialized_state_dict.pt";
pub const CONSTANTS: &str = "serialized_constants.pt";
pub const EXAMPLE_INPUTS: &str = "serialized_example_inputs.pt";
pub const EXTRA_DIR: &str = "extra_files/";

pub(super) fn load_raw(r: &ArchiveReader, opts: &LoadOptions) -> Result<RawProgram> {
    let ep = crate::schema::parse_exported_program(
        PROGRAM_JSON,
        &r.read_bytes(PROGRAM_JSON)?,
        opts.expected_opset_version.as_ref(),
    )?;
    let read = |f: &str| -> Result<Vec<u8>> {
        if r.has_record(f) {
            r.read_bytes(f)
        } else {
            Ok(Vec::new())
        }
    };
    let weights = state_dict_from_pickle(STATE_DICT, &read(STATE_DICT)?, r.limits())?;
    let constants = state_dict_from_pickle(CONSTANTS, &read(CONSTANTS)?, r.limits())?;
    let ex = read(EXAMPLE_INPUTS)?;
    let sample_inputs = (!ex.is_empty()).then(|| {
        pickle::load_torch_save(EXAMPLE_INPUTS, &ex, r.limits()).map_err(|e| e.to_string())
    });
    Ok(RawProgram {
        name: "model".into(),
        file: PROGRAM_JSON.into(),
        ep,
        weights,
        constants,
        custom_objects: Vec::new(),
        sample_inputs,
        sample_inputs_bytes: (!ex.is_empty()).then(|| ex.clone()),
    })
}
