//! A run's byte budget, checked on its Plan before anything is allocated: every tensor the
//! meta pass sized against [`Limits::max_tensor_bytes`], the peak of live activations
//! against [`Limits::max_live_bytes`]. Sizes that depend on tensor data (`nonzero`,
//! `repeat_interleave` of a tensor of counts...) are upper bounds here and are checked
//! exactly by their kernels once known (`ops::factory::check_alloc`).

use super::Plan;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::meta::memory::is_view;
use crate::meta::{MValue, MetaTensor};
use crate::program::Program;

/// Refuse a Plan whose run would need a tensor or a peak past the program's limits, naming
/// the node, its op and the size.
pub fn check(program: &Program, plan: &Plan) -> Result<()> {
    let limits: &Limits = &program.limits;
    // Where the meta pass stopped (an op without a shape rule, a size that depends on
    // tensor data), the sizes it can still know; kernels check the others.
    let partial;
    let (inferred, memory) = match &plan.meta {
        Ok(inferred) => (inferred, plan.memory.clone()),
        Err(_) => match crate::meta::infer_partial(program, &super::metas(&plan.signature)) {
            Ok(p) => {
                partial = p;
                // A peak of the values known: a lower bound of the real one.
                let m = crate::meta::estimate(program, &partial);
                (&partial, Some(m))
            }
            Err(_) => return Ok(()),
        },
    };
    // Views share their base's storage: only what a node allocates is counted.
    for node in program.graph.nodes.iter().filter(|n| !is_view(&n.target)) {
        let mut ids = Vec::new();
        node.outputs.iter().for_each(|a| a.values(&mut ids));
        for id in ids {
            let tensors: Vec<&MetaTensor> = match inferred.values.get(id) {
                Some(Some(MValue::Tensor(t))) => vec![t],
                Some(Some(MValue::Tensors(ts))) => ts.iter().collect(),
                Some(Some(MValue::OptTensors(ts))) => ts.iter().flatten().collect(),
                _ => continue,
            };
            for t in tensors.into_iter().filter(|t| !t.data_dependent) {
                if t.nbytes() > limits.max_tensor_bytes {
                    return Err(Error::limit(
                        format!(
                            "the bytes of {} {:?} made by node '{}' ({}) \
                             (Limits::max_tensor_bytes)",
                            t.dtype, t.sizes, node.name, node.target
                        ),
                        t.nbytes(),
                        limits.max_tensor_bytes,
                    ));
                }
            }
        }
    }
    if let Some(m) = memory.filter(|m| !m.data_dependent) {
        if m.peak_activation_bytes > limits.max_live_bytes {
            return Err(Error::limit(
                format!(
                    "the bytes of inputs and intermediate values alive at node '{}' \
                     (Limits::max_live_bytes)",
                    m.peak_node.as_deref().unwrap_or("<inputs>")
                ),
                m.peak_activation_bytes,
                limits.max_live_bytes,
            ));
        }
    }
    Ok(())
}

/// On wasm32 a failed allocation traps the whole instance. Before a run, reserve the
/// Plan's peak once with `try_reserve` (which fails without trapping) and give it back to
/// the allocator, so that a run the instance cannot hold is refused with
/// [`Error::OutOfMemory`] instead. Native targets have nothing to do.
pub fn reserve(plan: &Plan) -> Result<()> {
    #[cfg(target_arch = "wasm32")]
    if let Some(m) = &plan.memory {
        // The inputs are allocated already.
        let needed = m.peak_activation_bytes.saturating_sub(m.input_bytes);
        let mut probe: Vec<u8> = Vec::new();
        if probe
            .try_reserve_exact(usize::try_from(needed).unwrap_or(usize::MAX))
            .is_err()
        {
            return Err(Error::OutOfMemory {
                memory: crate::error::WASM_MEMORY,
                what: format!(
                    "the run's inputs and intermediate values at their peak (node '{}')",
                    m.peak_node.as_deref().unwrap_or("<inputs>")
                ),
                requested: needed,
                allocated: (core::arch::wasm32::memory_size(0) as u64) << 16,
                limit: 4 << 30,
            });
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = plan;
    Ok(())
}
