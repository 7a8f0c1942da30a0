// One time step of a recurrent layer's gates (src/gpu/kernels/rnn.rs), one thread per
// (batch row, hidden unit), f32. `xg` holds the input projections x @ W_ih^T + b_ih of every
// step ([T * B, G * H], this step's rows from `xoff`), `hg` the hidden projection
// h @ W_hh^T + b_hh of this step ([B, G * H]), `prev` the previous cell state (LSTM) or hidden
// state (GRU) as rows of `pstride` from `poff`. Writes h' to out[0 .. B * H] and, for LSTM,
// c' to out[B * H ..]. Gate order follows torch: LSTM i, f, g, o; GRU r, z, n with
// n = tanh(x_n + r * (W_hn h + b_hn)).
// `Meta` mirrors `GateMeta` in src/gpu/kernels/rnn.rs.

struct Meta {
    numel: u32,
    row: u32,
    // 0 LSTM, 1 GRU, 2 tanh, 3 relu
    kind: u32,
    hidden: u32,
    xoff: u32,
    poff: u32,
    pstride: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> xg: array<f32>;
@group(0) @binding(3) var<storage, read> hg: array<f32>;
@group(0) @binding(4) var<storage, read> prev: array<f32>;

fn sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

fn tanh_(x: f32) -> f32 {
    // Some drivers compute tanh as (e^2x - 1) / (e^2x + 1), which is NaN for large |x|.
    return tanh(clamp(x, -20.0, 20.0));
}

@compute @workgroup_size(64)
fn gates(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let h = params.hidden;
    let b = i / h;
    let j = i % h;
    var g = 1u;
    if params.kind == 0u {
        g = 4u;
    } else if params.kind == 1u {
        g = 3u;
    }
    let xb = params.xoff + b * g * h;
    let hb = b * g * h;
    if params.kind == 0u {
        let ig = sigmoid(xg[xb + j] + hg[hb + j]);
        let fg = sigmoid(xg[xb + h + j] + hg[hb + h + j]);
        let gg = tanh_(xg[xb + 2u * h + j] + hg[hb + 2u * h + j]);
        let og = sigmoid(xg[xb + 3u * h + j] + hg[hb + 3u * h + j]);
        let c = fg * prev[params.poff + b * params.pstride + j] + ig * gg;
        out[params.numel + i] = c;
        out[i] = og * tanh_(c);
    } else if params.kind == 1u {
        let r = sigmoid(xg[xb + j] + hg[hb + j]);
        let z = sigmoid(xg[xb + h + j] + hg[hb + h + j]);
        let n = tanh_(xg[xb + 2u * h + j] + r * hg[hb + 2u * h + j]);
        out[i] = (1.0 - z) * n + z * prev[params.poff + b * params.pstride + j];
    } else if params.kind == 2u {
        out[i] = tanh_(xg[xb + j] + hg[hb + j]);
    } else {
        let v = xg[xb + j] + hg[hb + j];
        // NaN propagates (relu keeps NaN).
        out[i] = select(v, 0.0, v < 0.0);
    }
}
