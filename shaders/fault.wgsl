// The run's index fault record (src/gpu/fault.rs), part of every module whose kernels read
// index tensors: [code, site, index, size]. The first invalid index of a run wins it; the
// host reads it with the run's next readback and raises the node's error.
@group(0) @binding(15) var<storage, read_write> fault: array<atomic<u32>, 4>;

// Report index `index` outside a dimension of `size` at site `site` (the kernel's parameter).
fn raise_index(site: u32, index: i32, size: u32) {
    if atomicMax(&fault[0], 1u) == 0u {
        atomicStore(&fault[1], site);
        atomicStore(&fault[2], bitcast<u32>(index));
        atomicStore(&fault[3], size);
    }
}

