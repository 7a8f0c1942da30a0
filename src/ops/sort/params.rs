//! The parameters of sort / argsort / msort, topk and searchsorted / bucketize, parsed once
//! from the node with torch's defaults and checks. The CPU kernels (`mod.rs`) and the GPU
//! kernels (`src/gpu/kernels/sort.rs`) take them from here; `dim` is wrapped by each kernel
//! against its input's rank.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::OpCtx;

/// sort (.default / .stable), argsort and msort (dim 0, ascending).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SortParams {
    pub dim: i64,
    pub descending: bool,
}

impl SortParams {
    pub fn parse(ctx: &OpCtx) -> Result<SortParams> {
        if ctx.target().starts_with("aten.msort") {
            return Ok(SortParams {
                dim: 0,
                descending: false,
            });
        }
        Ok(SortParams {
            dim: ctx.int_or("dim", -1)?,
            descending: ctx.bool_or("descending", false)?,
        })
    }
}

/// topk: the `k` largest (or smallest) along `dim`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TopK {
    pub k: i64,
    pub dim: i64,
    pub largest: bool,
}

impl TopK {
    pub fn parse(ctx: &OpCtx) -> Result<TopK> {
        Ok(TopK {
            k: ctx.int("k")?,
            dim: ctx.int_or("dim", -1)?,
            largest: ctx.bool_or("largest", true)?,
        })
    }
}

/// searchsorted / bucketize: which side of equal elements a value goes, and the index dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Search {
    pub right: bool,
    /// I32 with `out_int32`, else I64.
    pub out_dtype: DType,
}

impl Search {
    pub fn parse(ctx: &OpCtx) -> Result<Search> {
        let right = match ctx.opt_str("side")?.as_deref() {
            Some("right") => true,
            Some("left") => {
                if ctx.bool_or("right", false)? {
                    return Err(ctx.err("side and right can't be set to opposites, got side of left while right was True"));
                }
                false
            }
            Some(other) => {
                return Err(ctx.err(format!(
                    "side can only be 'left' or 'right' but got '{other}'"
                )))
            }
            None => ctx.bool_or("right", false)?,
        };
        let out_dtype = if ctx.bool_or("out_int32", false)? {
            DType::I32
        } else {
            DType::I64
        };
        Ok(Search { right, out_dtype })
    }
}
