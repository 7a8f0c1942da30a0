// The subgroup form of rows.wgsl's group reductions (`Shader::RowsSubgroup`: rows.wgsl with
// its `<group reductions>` block replaced by this file, for devices with `subgroups`).
// Each subgroup reduces in registers and one elected invocation per subgroup leaves the
// result in workgroup memory (the other slots hold the identity; the lane counted 0 among
// the active ones is the subgroup's); after one barrier each
// invocation combines a stripe of the 64 slots and a last subgroup operation gives the total:
// two barriers per reduction instead of the tree's seven. Nothing assumes a subgroup size
// or how invocations map to subgroups: a subgroup's size and an invocation's lane in it are
// counted with subgroup operations (every invocation is active where these are called).
var<workgroup> part: array<f32, 64>;

fn reduce_max(v: f32, l: u32) -> f32 {
    let ninf = -bitcast<f32>(INF_BITS);
    let lane = subgroupExclusiveAdd(1u);
    let n = subgroupAdd(1u);
    part[l] = select(ninf, subgroupMax(v), lane == 0u);
    workgroupBarrier();
    var t = ninf;
    for (var i = lane; i < 64u; i = i + n) {
        t = max(t, part[i]);
    }
    let r = subgroupMax(t);
    workgroupBarrier();
    return r;
}

fn reduce_sum(v: f32, l: u32) -> f32 {
    let lane = subgroupExclusiveAdd(1u);
    let n = subgroupAdd(1u);
    part[l] = select(0.0, subgroupAdd(v), lane == 0u);
    workgroupBarrier();
    var t = 0.0;
    for (var i = lane; i < 64u; i = i + n) {
        t = t + part[i];
    }
    let r = subgroupAdd(t);
    workgroupBarrier();
    return r;
}
