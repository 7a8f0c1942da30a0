// Inference batch norm over a contiguous [N, C, *] input with running statistics:
// out = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], one thread per element.
// `Meta` mirrors `BatchNormMeta` in src/gpu/kernels/pool.rs.

struct Meta {
    numel: u32,
    channels: u32,
    // Elements per channel within one image (product of the spatial dims).
    inner: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // Bit 0: weight present, bit 1: bias present.
    flags: u32,
    eps: f32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> mean: array<f32>;
@group(0) @binding(4) var<storage, read> var_: array<f32>;
@group(0) @binding(5) var<storage, read> weight: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;

@compute @workgroup_size(64)
fn batch_norm(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let c = (i / params.inner) % params.channels;
    var scale = 1.0 / sqrt(var_[c] + params.eps);
    if (params.flags & 1u) != 0u {
        scale = scale * weight[c];
    }
    var shift = 0.0;
    if (params.flags & 2u) != 0u {
        shift = bias[c];
    }
    out[i] = (x[i] - mean[c]) * scale + shift;
}
