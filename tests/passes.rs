//! The graph passes (`src/passes/`) on committed fixtures written by `torch.export.save`:
//! the graph before and after each pass, and the results, with every combination of passes,
//! still PyTorch's (the expected values come from the fixture generator).

mod common;

use common::*;
use pt2web::backends::{set_graph_passes, Pass, PassSet};
use pt2web::passes;
use pt2web::program::{Arg, Node, Program, Value, ValueKind};
use pt2web::runtime::{RValue, Session};

fn node_names(p: &Program) -> Vec<String> {
    p.graph.nodes.iter().map(|n| n.name.clone()).collect()
}

fn run_matches_torch(
    p: &Program,
    ins: &[pt2web::cpu::Tensor],
    want: &[pt2web::cpu::Tensor],
    what: &str,
) -> Session {
    let mut s = Session::new(p.clone()).unwrap();
    let got = s
        .run(ins.iter().cloned().map(RValue::Tensor).collect())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        let (max, _) = metrics(g.as_tensor().unwrap(), w);
        assert!(max <= 1e-5, "{what}: max abs error {max} against PyTorch");
    }
    s
}

/// On the GPU (where there is one): the first output within 1e-5 of PyTorch's, no node on the
/// CPU.
fn gpu_matches_torch(p: Program, ins: &[pt2web::cpu::Tensor], want: &[pt2web::cpu::Tensor]) {
    let Some(dev) = gpu_device() else {
        return;
    };
    let mut g = pt2web::gpu::GpuSession::new(p, dev).unwrap();
    let got = g
        .run(ins.iter().cloned().map(RValue::Tensor).collect())
        .unwrap();
    let (max, _) = metrics(got[0].as_tensor().unwrap(), &want[0]);
    assert!(max <= 1e-5, "GPU: max abs error {max} against PyTorch");
    assert_eq!(
        g.last_stats.fallback_nodes(),
        0,
        "{:?}",
        g.last_stats.fallbacks
    );
}

/// One test, since the pass switch is process-wide.
#[test]
fn passes_rewrite_tiny_gpt2_and_keep_its_results() {
    let (p, ins, want) = first_io_case("tiny_gpt2");
    let before = node_names(&p);
    let mut after = p.clone();
    let cleanup = PassSet::of(&[Pass::NoOps, Pass::DeadCode]);
    let report = passes::run(&mut after, cleanup);
    assert_eq!(
        (report.nodes_before, report.nodes_after),
        (92, 74),
        "{report}"
    );
    assert_eq!(
        report.removed,
        vec![("noop".to_string(), 14), ("dce".to_string(), 4)]
    );
    let kept = node_names(&after);
    let mut removed: Vec<&str> = before
        .iter()
        .filter(|n| !kept.contains(n))
        .map(String::as_str)
        .collect();
    removed.sort_unstable();
    assert_eq!(
        removed,
        [
            // No-ops: views and casts to what the value already is, an alias, the
            // inference dropouts, the integer `arange(seq) + 0`s.
            "add",
            "add_2",
            "add_3",
            "alias",
            "dropout",
            "dropout_1",
            "dropout_2",
            "expand_2",
            "reshape",
            "to",
            "to_1",
            "to_2",
            "view",
            "view_12",
            // Dead: the position ids HF builds and never reads here.
            "arange_2",
            "unsqueeze_4",
            "unsqueeze_5",
            "unsqueeze_6",
        ]
        .iter()
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    // Reads of a removed no-op read its input: the first embedding takes the input ids.
    let emb = after
        .graph
        .nodes
        .iter()
        .find(|n| n.name == "embedding")
        .unwrap();
    let Some(Arg::Tensor(ids)) = emb.arg("indices") else {
        panic!("embedding indices");
    };
    assert_eq!(after.graph.value(*ids).name, "input_ids");
    // Passes are idempotent.
    let again = passes::run(&mut after, cleanup);
    assert_eq!(again.nodes_after, again.nodes_before);

    // Fusion: GPT-2's tanh GELU (mul, pow, mul, add, mul, tanh, add, mul) is one node whose
    // body is those eight nodes in order, reading the MLP's first projection.
    let mut fused = after.clone();
    let report = passes::run(&mut fused, PassSet::of(&[Pass::Fuse]));
    assert_eq!(report.removed, vec![("fuse".to_string(), 7)], "{report}");
    assert_eq!(report.nodes_after, 67);
    let f: Vec<&Node> = fused
        .graph
        .nodes
        .iter()
        .filter(|n| n.target == "pt2web.fused_elementwise.default")
        .collect();
    assert_eq!(f.len(), 1);
    let Some(Arg::Graph(body)) = f[0].arg("body") else {
        panic!("fused body");
    };
    let ops: Vec<&str> = body.nodes.iter().map(|n| n.target.as_str()).collect();
    assert_eq!(
        ops,
        [
            "aten.mul.Tensor",
            "aten.pow.Tensor_Scalar",
            "aten.mul.Tensor",
            "aten.add.Tensor",
            "aten.mul.Tensor",
            "aten.tanh.default",
            "aten.add.Tensor",
            "aten.mul.Tensor",
        ]
    );
    let Some(Arg::Tensors(ins_f)) = f[0].arg("inputs") else {
        panic!("fused inputs");
    };
    assert_eq!(ins_f.len(), 1);
    let producer = fused
        .graph
        .nodes
        .iter()
        .find(|n| n.outputs.contains(&Arg::Tensor(ins_f[0])))
        .unwrap();
    assert_eq!(producer.target, "aten.view.default", "{}", producer.name);
    // Fusing again changes nothing.
    let again = passes::run(&mut fused, PassSet::of(&[Pass::Fuse]));
    assert_eq!(again.nodes_after, again.nodes_before, "{again}");

    for (set, nodes) in [
        // The epilogue pass joins the addmm to the ops after them (GELU, the residual adds,
        // which the inference dropouts no longer separate once the no-op pass removes them).
        (PassSet::ALL, 55),
        (cleanup, 74),
        (PassSet::NONE, 92),
        (PassSet::of(&[Pass::DeadCode]), 88),
        (PassSet::of(&[Pass::NoOps]), 78),
        (PassSet::of(&[Pass::Fuse]), 85),
    ] {
        set_graph_passes(set);
        let s = run_matches_torch(&p, &ins, &want, &format!("tiny_gpt2 with passes {set}"));
        assert_eq!(s.program.graph.nodes.len(), nodes, "passes {set}");
        assert_eq!(s.passes.nodes_after, nodes);
    }
    // Constant folding through the session: folded or not, PyTorch's results.
    for stem in [
        "const_fold_core",
        "const_fold_train",
        "const_fold_mutbuf_core",
    ] {
        let (p, ins, want) = first_io_case(stem);
        for set in [PassSet::ALL, PassSet::NONE, PassSet::of(&[Pass::ConstFold])] {
            set_graph_passes(set);
            let s = run_matches_torch(&p, &ins, &want, &format!("{stem} with passes {set}"));
            let folds = s
                .program
                .state
                .keys()
                .any(|k| k.starts_with(passes::FOLDED_PREFIX));
            assert_eq!(folds, set != PassSet::NONE, "{stem} with passes {set}");
        }
    }
    set_graph_passes(PassSet::ALL);

    // A dead pure node goes; a dead in-place one stays, and then no copy is removed from
    // that graph (something writes through a name).
    let (mut p, ins, want) = first_io_case("mlp_core");
    let n0 = p.graph.nodes.len();
    let Some(Arg::Tensor(x)) = p.graph.inputs.last().cloned() else {
        panic!("mlp_core input");
    };
    let kind = p.graph.value(x).kind.clone();
    assert!(matches!(kind, ValueKind::Tensor { .. }));
    let add = |p: &mut Program, name: &str, target: &str, input: usize| {
        let id = p.graph.values.len();
        p.graph.values.push(Value {
            name: name.into(),
            kind: kind.clone(),
        });
        p.graph.by_name.insert(name.into(), id);
        p.graph.nodes.push(Node {
            name: name.into(),
            target: target.into(),
            inputs: vec![("self".into(), Arg::Tensor(input))],
            outputs: vec![Arg::Tensor(id)],
            metadata: Default::default(),
        });
        id
    };
    let dead = add(&mut p, "dead_relu", "aten.relu.default", x);
    add(&mut p, "dead_neg", "aten.neg.default", dead);
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::ALL);
    // The dead nodes go; the epilogue pass joins the hidden layer's addmm and relu.
    assert_eq!(q.graph.nodes.len(), n0 - 1, "{r}");
    assert!(!node_names(&q).iter().any(|n| n.starts_with("dead_")));
    run_matches_torch(&q, &ins, &want, "mlp_core with dead nodes removed");

    let mut q = p.clone();
    let id = add(&mut q, "clone_in_place", "aten.clone.default", x);
    // (`zero_`, which functionalization does not rewrite: a `relu_` of the fresh clone would
    // become a dead `relu`.)
    add(&mut q, "zero_in_place", "aten.zero_.default", id);
    let r = passes::run(&mut q, PassSet::ALL);
    let names = node_names(&q);
    assert!(names.contains(&"zero_in_place".to_string()), "{r}");
    assert!(names.contains(&"clone_in_place".to_string()), "{r}");
    assert_eq!(
        r.removed,
        vec![
            ("functionalize".into(), 0),
            ("noop".into(), 0),
            ("dce".into(), 2),
            ("attention".into(), 0),
            ("cse".into(), 0),
            ("qparams".into(), 0),
            ("const_fold".into(), 0),
            ("fold_bn".into(), 0),
            ("fuse".into(), 0),
            ("epilogue".into(), 0),
            ("reinplace".into(), 0)
        ]
    );
}

/// What the fusion pass makes of the fusion cases (tests/fixgen/ops/fusion.py, core ATen):
/// the plan steps left, and that every fused node's body is nodes the chain held. A value
/// read twice or returned ends its chain; eight inputs are more than one chain reads.
#[test]
fn fusion_cases_fuse_as_designed() {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::program::Pt2Archive;
    let dir = fixtures().join("ops");
    let archive = Pt2Archive::open(
        "fusion.pt2",
        std::fs::read(dir.join("fusion.pt2")).unwrap(),
        pt2web::Limits::default(),
    )
    .unwrap();
    for (case, before, after, fused) in [
        ("hardswish_spelled", 4, 1, 1),
        ("gelu_tanh_spelled", 8, 1, 1),
        ("bias_act_scale", 4, 1, 1),
        ("masked", 4, 1, 1),
        // `x > 0` (bool) stays; where, exp, y * y and + 1 fuse.
        ("mask_made_inside", 5, 2, 1),
        // The transposes are views: inputs of the chain.
        ("transposed", 5, 3, 1),
        ("scalar_tensor", 4, 1, 1),
        // full_like is a factory, not a chain member.
        ("specials", 7, 4, 2),
        ("wide", 9, 2, 2),
        ("read_twice", 6, 3, 3),
        ("returned", 4, 2, 2),
        ("hardtanh_relu6", 6, 1, 1),
        ("gelu_erf_chain", 7, 1, 1),
    ] {
        let name = format!("{case}__core");
        let mut p = archive
            .program(Some(&name), &LoadOptions::default())
            .unwrap();
        let r = passes::run(&mut p, PassSet::of(&[Pass::Fuse]));
        assert_eq!(
            (r.nodes_before, r.nodes_after),
            (before, after),
            "{name}: {r}"
        );
        let nodes: Vec<&Node> = p
            .graph
            .nodes
            .iter()
            .filter(|n| n.target == "pt2web.fused_elementwise.default")
            .collect();
        assert_eq!(
            nodes.len(),
            fused,
            "{name}\n{}",
            passes::render_graph(&p.graph)
        );
        for n in nodes {
            let (Some(Arg::Graph(body)), Some(Arg::Tensors(ins))) =
                (n.arg("body"), n.arg("inputs"))
            else {
                panic!("{name}: fused node args");
            };
            assert!(body.nodes.len() >= 2 && body.nodes.len() <= 32, "{name}");
            assert!(ins.len() <= 6 && ins.len() == body.inputs.len(), "{name}");
            // The body's last node is the fused node's result.
            assert_eq!(body.nodes.last().unwrap().name, n.name, "{name}");
        }
    }
}

/// Batch-norm folding on the committed convnets (core ATen and training IR): the inference
/// batch norms go, the convolutions read new `pt2web_folded.*` constants, the original
/// parameters and buffers stay in the state, and the results are still PyTorch's.
#[test]
fn batch_norms_fold_into_convolutions() {
    for (stem, before, after) in [("convnet_core", 10, 8), ("convnet_train", 9, 7)] {
        let (p, ins, want) = first_io_case(stem);
        let mut q = p.clone();
        let r = passes::run(&mut q, PassSet::of(&[Pass::FoldBatchNorm]));
        assert_eq!(
            (r.nodes_before, r.nodes_after),
            (before, after),
            "{stem}: {r}"
        );
        assert!(
            !q.graph
                .nodes
                .iter()
                .any(|n| n.target.contains("batch_norm")),
            "{stem}"
        );
        let folded: Vec<&String> = q
            .state
            .keys()
            .filter(|k| k.starts_with(passes::FOLDED_PREFIX))
            .collect();
        assert_eq!(folded.len(), 4, "{stem}: {folded:?}");
        assert!(p.state.keys().all(|k| q.state.contains_key(k)), "{stem}");
        for n in q.graph.nodes.iter().filter(|n| n.target.contains("conv")) {
            for arg in ["weight", "bias"] {
                let Some(Arg::Tensor(v) | Arg::OptTensor(Some(v))) = n.arg(arg) else {
                    panic!("{stem}: {} has no {arg}", n.name)
                };
                assert!(
                    q.graph.value(*v).name.starts_with(passes::FOLDED_PREFIX),
                    "{stem}: {} reads {}",
                    n.name,
                    q.graph.value(*v).name
                );
            }
        }
        // Every pass set with the folding gives PyTorch's results (checked by the session).
        let s = Session::new(q.clone()).unwrap();
        let mut all = q.clone();
        passes::run(&mut all, PassSet::ALL);
        assert_eq!(s.program.graph.nodes.len(), all.graph.nodes.len());
        let mut s = Session::new(q).unwrap();
        let got = s
            .run(ins.iter().cloned().map(RValue::Tensor).collect())
            .unwrap();
        for (g, w) in got.iter().zip(&want) {
            let (max, _) = metrics(g.as_tensor().unwrap(), w);
            assert!(max <= 1e-5, "{stem}: max abs error {max} against PyTorch");
        }
    }
    // A batch norm whose running variance the program mutates is not folded; the other is.
    let (mut p, ..) = first_io_case("convnet_core");
    let var = p
        .graph
        .nodes
        .iter()
        .find(|n| n.target.contains("batch_norm"))
        .and_then(|n| match n.arg("running_var") {
            Some(Arg::Tensor(v)) => Some(p.graph.value(*v).name.clone()),
            _ => None,
        })
        .unwrap();
    let buffer = p
        .inputs
        .iter()
        .find(|s| s.name == var)
        .and_then(|s| match &s.kind {
            pt2web::program::InputKind::Buffer { name, .. } => Some(name.clone()),
            _ => None,
        })
        .unwrap();
    p.outputs.push(pt2web::program::OutputSpec {
        arg: Arg::None,
        kind: pt2web::program::OutputKind::BufferMutation { buffer },
    });
    let r = passes::run(&mut p, PassSet::of(&[Pass::FoldBatchNorm]));
    assert_eq!((r.nodes_before, r.nodes_after), (10, 9), "{r}");
}

/// What the epilogue pass makes of the epilogue cases (tests/fixgen/ops/epilogue.py) after
/// the passes before it: how many `pt2web.fused_epilogue` nodes each program has, and that
/// each holds its producer and its epilogue (one op or one fused chain) over the node's
/// inputs. A result read twice, a chain that broadcasts the result to a larger shape, and a
/// producer the pass does not know (`conv_transpose2d`) stay apart.
#[test]
fn epilogue_cases_fuse_as_designed() {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::program::Pt2Archive;
    let dir = fixtures().join("ops");
    let archive = Pt2Archive::open(
        "epilogue.pt2",
        std::fs::read(dir.join("epilogue.pt2")).unwrap(),
        pt2web::Limits::default(),
    )
    .unwrap();
    // (program, epilogue nodes, nodes after all passes)
    for (name, fused, after) in [
        ("conv_relu", 1, 1),
        ("conv_relu__core", 1, 1),
        ("conv_residual_relu", 1, 1),
        ("conv_residual_relu__core", 1, 1),
        ("conv_hardswish__core", 1, 1),
        ("depthwise_relu6__core", 1, 1),
        ("pointwise_silu__core", 1, 1),
        ("conv_bias_channel__core", 1, 1),
        ("linear_gelu", 1, 1),
        // permute(weight) stays a view before addmm.
        ("linear_gelu__core", 1, 2),
        ("linear_gelu_tanh_3d", 1, 1),
        // view(x), permute(weight), then addmm and the view of its result with the gelu.
        ("linear_gelu_tanh_3d__core", 1, 3),
        ("bmm_scale_mask", 1, 2),
        ("bmm_scale_mask__core", 1, 2),
        ("addmm_residual_strided__core", 1, 2),
        ("specials__core", 1, 1),
        ("dynamic_batch", 1, 1),
        ("conv_read_twice__core", 0, 2),
        ("conv_transpose_relu", 0, 2),
        ("conv_transpose_relu__core", 1, 1),
        ("broadcast_up", 0, 2),
        ("broadcast_up__core", 0, 3),
    ] {
        let mut p = archive
            .program(Some(name), &LoadOptions::default())
            .unwrap();
        let r = passes::run(&mut p, PassSet::ALL);
        let shown = passes::render_graph(&p.graph);
        assert_eq!(r.nodes_after, after, "{name}: {r}\n{shown}");
        let nodes: Vec<&Node> = p
            .graph
            .nodes
            .iter()
            .filter(|n| n.target == "pt2web.fused_epilogue.default")
            .collect();
        assert_eq!(nodes.len(), fused, "{name}\n{shown}");
        for n in nodes {
            let (Some(Arg::Tensors(ins)), Some(Arg::Graph(prod)), Some(Arg::Graph(epi))) =
                (n.arg("inputs"), n.arg("producer"), n.arg("epilogue"))
            else {
                panic!("{name}: fused epilogue args");
            };
            // The producer, and the reshapes of its result core ATen writes after it.
            assert!(!prod.nodes.is_empty(), "{name}");
            assert!(
                prod.nodes[1..]
                    .iter()
                    .all(|n| n.target == "aten.view.default"),
                "{name}"
            );
            assert_eq!(epi.nodes.len(), 1, "{name}");
            let Some(Arg::SymInts(sizes)) = n.arg("sizes") else {
                panic!("{name}: fused epilogue sizes");
            };
            assert_eq!(
                ins.len() + 1 + sizes.len(),
                prod.inputs.len() + epi.inputs.len(),
                "{name}"
            );
            // The epilogue's first input is the producer's result.
            assert_eq!(
                prod.value(match prod.outputs[..] {
                    [Arg::Tensor(v)] => v,
                    _ => panic!("{name}: producer output"),
                })
                .name,
                epi.value(match epi.inputs[0] {
                    Arg::Tensor(v) => v,
                    _ => panic!("{name}: epilogue input"),
                })
                .name,
                "{name}"
            );
        }
    }
}

/// The nodes of `p` that are gone from `q`, sorted.
fn removed_nodes(p: &Program, q: &Program) -> Vec<String> {
    let kept = node_names(q);
    let mut v: Vec<String> = node_names(p)
        .into_iter()
        .filter(|n| !kept.contains(n))
        .collect();
    v.sort();
    v
}

/// The constants the passes added to `q`, sorted.
fn folded_names(q: &Program) -> Vec<String> {
    q.state
        .keys()
        .filter(|k| k.starts_with(passes::FOLDED_PREFIX))
        .cloned()
        .collect()
}

/// The value the argument `arg` of node `node` reads.
fn arg_value<'a>(q: &'a Program, node: &str, arg: &str) -> &'a str {
    let n = q
        .graph
        .nodes
        .iter()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    match n.arg(arg) {
        Some(Arg::Tensor(v) | Arg::OptTensor(Some(v))) => &q.graph.value(*v).name,
        other => panic!("{node}.{arg}: {other:?}"),
    }
}

/// Constant folding on the committed ConstFold fixtures (tests/fixgen/gen_fixtures.py):
/// weights prepared in `forward` (a transposed copy, an f16 round trip times 2, a `cat` of two
/// parameters, a permuted buffer copied, arithmetic on a tensor constant) become
/// `pt2web_folded.*` constants read by the matmuls, and so does a small result 4x the bytes
/// of its buffer (`c.expand(4, 8).contiguous()`: results up to 4 MiB are stored whatever
/// they read); chains of views (the linear layer's transposed weight) stay; the assertion on the f16 intermediate is checked and goes, the one on the
/// parameter stays. The results are still PyTorch's.
#[test]
fn constants_fold_at_load() {
    let folded = |names: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = names
            .iter()
            .map(|n| format!("{}{n}", passes::FOLDED_PREFIX))
            .collect();
        v.sort();
        v
    };
    let sorted = |names: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    for (stem, before, after, gone, new, kept, reads) in [
        (
            "const_fold_core",
            28,
            13,
            sorted(&[
                "permute",
                "clone",
                "_to_copy",
                "_assert_tensor_metadata_1",
                "_to_copy_1",
                "mul",
                "permute_1",
                "cat",
                "permute_2",
                "permute_3",
                "clone_1",
                "mul_1",
                "add_5",
                "expand",
                "clone_2",
            ]),
            folded(&[
                "clone",
                "permute_1",
                "permute_2",
                "clone_1",
                "add_5",
                "clone_2",
            ]),
            ["permute_4", "_assert_tensor_metadata"],
            [
                ("mm", "mat2", "clone"),
                ("mm_1", "mat2", "permute_1"),
                ("mm_2", "mat2", "permute_2"),
                ("mm_3", "mat2", "clone_1"),
                ("mul_2", "other", "add_5"),
            ],
        ),
        (
            "const_fold_train",
            27,
            12,
            sorted(&[
                "t",
                "contiguous",
                "to",
                "_assert_tensor_metadata_default_1",
                "to_1",
                "mul",
                "t_1",
                "cat",
                "t_2",
                "permute",
                "contiguous_1",
                "mul_1",
                "add_5",
                "expand",
                "contiguous_2",
            ]),
            folded(&[
                "contiguous",
                "t_1",
                "t_2",
                "contiguous_1",
                "add_5",
                "contiguous_2",
            ]),
            ["linear", "_assert_tensor_metadata_default"],
            [
                ("matmul", "other", "contiguous"),
                ("matmul_1", "other", "t_1"),
                ("matmul_2", "other", "t_2"),
                ("matmul_3", "other", "contiguous_1"),
                ("mul_2", "other", "add_5"),
            ],
        ),
    ] {
        let (p, ins, want) = first_io_case(stem);
        let mut q = p.clone();
        let r = passes::run(&mut q, PassSet::of(&[Pass::ConstFold]));
        assert_eq!(
            (r.nodes_before, r.nodes_after),
            (before, after),
            "{stem}: {r}\n{}",
            passes::render_graph(&q.graph)
        );
        assert_eq!(r.removed, vec![("const_fold".to_string(), before - after)]);
        assert_eq!(removed_nodes(&p, &q), gone, "{stem}");
        assert_eq!(folded_names(&q), new, "{stem}");
        let names = node_names(&q);
        for k in kept {
            assert!(names.contains(&k.to_string()), "{stem}: {k} went");
        }
        for (node, arg, constant) in reads {
            assert_eq!(
                arg_value(&q, node, arg),
                format!("{}{constant}", passes::FOLDED_PREFIX),
                "{stem}: {node}.{arg}"
            );
        }
        // The view of the linear weight reads the parameter itself; the originals stay.
        let fc = if stem.ends_with("core") {
            arg_value(&q, "permute_4", "self")
        } else {
            arg_value(&q, "linear", "weight")
        };
        assert_eq!(fc, "p_fc_weight", "{stem}");
        assert!(p.state.keys().all(|k| q.state.contains_key(k)), "{stem}");
        // Stored contiguous, in the kernel's dtype: (w.half().float() * 2).t() is [16, 8] f32.
        let t = &q.state[&format!("{}{}", passes::FOLDED_PREFIX, reads[1].2)].tensor;
        assert_eq!(
            (t.dtype, t.sizes.as_slice()),
            (pt2web::DType::F32, &[16, 8][..])
        );
        assert!(t.is_contiguous(), "{stem}");
        // Folding again changes nothing.
        let again = passes::run(&mut q.clone(), PassSet::of(&[Pass::ConstFold]));
        assert_eq!(again.nodes_after, again.nodes_before, "{stem}: {again}");
        // The folded graph gives PyTorch's results (and so does every pass set the process
        // uses: the session applies them on top).
        run_matches_torch(&q, &ins, &want, &format!("{stem} folded"));
        run_matches_torch(&p, &ins, &want, &format!("{stem} as exported"));
    }

    // A buffer the program mutates is not folded: `scale.exp()` stays, `(w * 2).t()` goes.
    let (p, ins, want) = first_io_case("const_fold_mutbuf_core");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::ConstFold]));
    assert_eq!((r.nodes_before, r.nodes_after), (6, 4), "{r}");
    assert_eq!(removed_nodes(&p, &q), ["mul", "permute"]);
    assert_eq!(folded_names(&q), folded(&["permute"]));
    assert_eq!(arg_value(&q, "exp", "self"), "b_scale");
    run_matches_torch(&q, &ins, &want, "const_fold_mutbuf_core folded");

    // The same with a mutation of the permuted buffer added to const_fold_core's signature:
    // its copy is no longer folded.
    let (mut p, ..) = first_io_case("const_fold_core");
    p.outputs.push(pt2web::program::OutputSpec {
        arg: Arg::None,
        kind: pt2web::program::OutputKind::BufferMutation {
            buffer: "perm".into(),
        },
    });
    let r = passes::run(&mut p, PassSet::of(&[Pass::ConstFold]));
    assert_eq!((r.nodes_before, r.nodes_after), (28, 15), "{r}");
    let names = node_names(&p);
    assert!(names.contains(&"permute_3".to_string()) && names.contains(&"clone_1".to_string()));
    assert_eq!(
        folded_names(&p),
        folded(&["clone", "permute_1", "permute_2", "add_5", "clone_2"])
    );
}

/// A node the CPU kernel refuses, or whose result disagrees with torch's metadata, is left
/// in the graph with what reads it, and what it reads is folded instead; nothing fails.
#[test]
fn constant_folding_leaves_what_it_cannot_compute() {
    let (mut p, ..) = first_io_case("const_fold_core");
    let cat = p.graph.nodes.iter_mut().find(|n| n.name == "cat").unwrap();
    cat.inputs.retain(|(k, _)| k != "dim");
    cat.inputs.push(("dim".into(), Arg::Int(7)));
    let add_5 = p.graph.by_name["add_5"];
    if let ValueKind::Tensor { dtype, .. } = &mut p.graph.values[add_5].kind {
        *dtype = pt2web::DType::F16;
    }
    let r = passes::run(&mut p, PassSet::of(&[Pass::ConstFold]));
    assert_eq!((r.nodes_before, r.nodes_after), (28, 16), "{r}");
    let names = node_names(&p);
    for n in ["cat", "permute_2", "add_5"] {
        assert!(names.contains(&n.to_string()), "{n} went");
    }
    // `add_5` stays and reads `k * 2` folded.
    assert_eq!(
        arg_value(&p, "add_5", "self"),
        format!("{}mul_1", passes::FOLDED_PREFIX)
    );
    assert_eq!(
        folded_names(&p),
        ["clone", "clone_1", "clone_2", "mul_1", "permute_1"]
            .map(|n| format!("{}{n}", passes::FOLDED_PREFIX))
    );
}

/// The training IR's in-place ops on fresh results (`relu_`, `add_`, `hardswish_`) become
/// functional and the nodes after them read their results; an inference `dropout_` on a
/// view becomes `dropout`, which the no-op pass removes. The other passes then apply, and
/// the results are still PyTorch's.
#[test]
fn in_place_ops_are_functionalized() {
    let (p, ins, want) = first_io_case("inplace_train");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::Functionalize]));
    assert_eq!(r.removed, vec![("functionalize".to_string(), 4)], "{r}");
    let targets: Vec<&str> = q.graph.nodes.iter().map(|n| n.target.as_str()).collect();
    assert_eq!(
        targets,
        [
            "aten.conv2d.default",
            "aten.batch_norm.default",
            "aten.relu.default",
            "aten.conv2d.default",
            "aten.add.Tensor",
            "aten.hardswish.default",
            "aten.flatten.using_ints",
            "aten.dropout.default",
            "aten.mul.Tensor",
        ]
    );
    // hardswish reads the add's result, not the convolution's (which add_ wrote before).
    let reads = |name: &str, arg: &str| {
        let n = q.graph.nodes.iter().find(|n| n.name == name).unwrap();
        let Some(Arg::Tensor(v)) = n.arg(arg) else {
            panic!("{name}.{arg}");
        };
        q.graph.value(*v).name.clone()
    };
    assert_eq!(reads("hardswish_", "self"), "add_");
    assert_eq!(reads("conv2d_1", "input"), "relu_");
    run_matches_torch(&q, &ins, &want, "inplace_train, functionalized");
    // With every pass: conv+bn+relu and conv+add+hardswish are one epilogue node each.
    let mut all = p.clone();
    let r = passes::run(&mut all, PassSet::ALL);
    assert_eq!(
        r.nodes_after,
        4,
        "{r}\n{}",
        passes::render_graph(&all.graph)
    );
    run_matches_torch(&all, &ins, &want, "inplace_train, every pass");
}

/// Core ATen's decomposed attention (`bmm`, the two scales, the mask add, the
/// `_safe_softmax` decomposition, `bmm`) becomes one `pt2web.fused_attention` node reading
/// q, k, v (and the mask) where they lie, its scale the product of the two. (Its results
/// against PyTorch: the attention family of the op suites, on the CPU and on the GPU.)
#[test]
fn attention_cases_become_one_node() {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::program::Pt2Archive;
    let dir = fixtures().join("ops");
    let archive = Pt2Archive::open(
        "attention.pt2",
        std::fs::read(dir.join("attention.pt2")).unwrap(),
        pt2web::Limits::default(),
    )
    .unwrap();
    // (program, tensors read, embedding size)
    for (name, inputs, e) in [
        ("sdpa_basic__core", 3, 8.0f64),
        ("sdpa_bool_mask__core", 4, 8.0),
        ("sdpa_causal_rect__core", 4, 4.0),
    ] {
        let mut p = archive
            .program(Some(name), &LoadOptions::default())
            .unwrap();
        let before = p.graph.nodes.len();
        let r = passes::run(&mut p, PassSet::ALL);
        let shown = passes::render_graph(&p.graph);
        let fused: Vec<&Node> = p
            .graph
            .nodes
            .iter()
            .filter(|n| n.target == "pt2web.fused_attention.default")
            .collect();
        assert_eq!(fused.len(), 1, "{name}: {r}\n{shown}");
        let n = fused[0];
        let (Some(Arg::Tensors(ins)), Some(Arg::Graph(body)), Some(&Arg::Float(scale))) =
            (n.arg("inputs"), n.arg("body"), n.arg("scale"))
        else {
            panic!("{name}: fused attention args");
        };
        assert_eq!(ins.len(), inputs, "{name}\n{shown}");
        assert_eq!(n.arg("safe"), Some(&Arg::Bool(true)), "{name}");
        assert!(
            (scale - 1.0 / e.sqrt()).abs() < 1e-9,
            "{name}: scale {scale}"
        );
        let ops: Vec<&str> = body.nodes.iter().map(|n| n.target.as_str()).collect();
        for op in ["aten.bmm.default", "aten._softmax.default", "aten.any.dim"] {
            assert!(ops.contains(&op), "{name}: {ops:?}");
        }
        assert!(
            r.nodes_after + body.nodes.len() - 1 <= before,
            "{name}: {r}"
        );
    }
}

/// Core ATen's buffer updates of a static KV cache (`index_copy_` as `index_put`, a slice
/// assignment as `slice_scatter`, `index_put`) become in-place writes into the buffers, the
/// mutation outputs the buffers themselves; the outputs and the buffers after the call match
/// PyTorch. (On the GPU: tests/plan.rs.)
#[test]
fn buffer_updates_are_reinplaced() {
    let (p, ins, want) = first_io_case("kv_cache_core");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::Reinplace]));
    assert_eq!(r.removed, vec![("reinplace".to_string(), 3)], "{r}");
    let targets: Vec<&str> = q.graph.nodes.iter().map(|n| n.target.as_str()).collect();
    for t in ["aten.index_put.default", "aten.slice_scatter.default"] {
        assert!(!targets.contains(&t), "{t} left: {targets:?}");
    }
    assert_eq!(
        targets
            .iter()
            .filter(|t| **t == "aten.index_put_.default")
            .count(),
        2
    );
    // slice_scatter(b_v, copy, 1, 2, 4) -> copy_(slice(b_v, 1, 2, 4), copy)
    let at = targets
        .iter()
        .position(|t| *t == "aten.copy_.default")
        .expect("copy_");
    assert_eq!(targets[at - 1], "aten.slice.Tensor");
    for i in 0..3 {
        assert!(q.mutation_in_place(i), "mutation {i} is not its buffer");
        assert!(!p.mutation_in_place(i));
    }
    let s = run_matches_torch(&q, &ins, &want, "kv_cache_core, reinplaced");
    for (name, t) in first_io_buffers_after("kv_cache_core") {
        let (max, _) = metrics(&s.state[&name], &t);
        assert!(
            max <= 1e-6,
            "buffer {name} after the call: {max} from PyTorch"
        );
    }
    // Every pass: the same three rewrites, the same results.
    let mut all = p.clone();
    passes::run(&mut all, PassSet::ALL);
    assert!((0..3).all(|i| all.mutation_in_place(i)));
    run_matches_torch(&all, &ins, &want, "kv_cache_core, every pass");
}

/// Masks built from an input's shape alone (`full`, `full_like` of a slice, slice
/// assignments, an `arange` comparison), as torchvision's Swin builds its shifted-window
/// mask, are computed once at load: `full_like` reads only its input's (static) dtype and
/// sizes, and a result from no state at all is stored when it is at most 1 MiB.
#[test]
fn shape_only_masks_fold_at_load() {
    let (p, ins, want) = first_io_case("shape_mask_core");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::ConstFold]));
    let targets: Vec<&str> = q.graph.nodes.iter().map(|n| n.target.as_str()).collect();
    for t in [
        "aten.full.default",
        "aten.full_like.default",
        "aten.slice_scatter.default",
        "aten.arange.start_step",
        "aten.gt.Tensor",
    ] {
        assert!(
            !targets.contains(&t),
            "{t} left: {r}\n{}",
            passes::render_graph(&q.graph)
        );
    }
    assert_eq!(
        folded_names(&q),
        ["mul", "slice_scatter_2"].map(|n| format!("{}{n}", passes::FOLDED_PREFIX))
    );
    run_matches_torch(&q, &ins, &want, "shape_mask_core, folded");
}

/// torchvision's shifted-window attention in the training IR: the shift mask's `fill_`s
/// through slices of `new_zeros` become `fill` + `slice_scatter` (functionalization), so
/// the mask folds at load; the zero `pad` goes; the relative-position bias and the shift
/// mask (added through a rank-5 view) merge into one mask, and the `matmul` / `softmax.int`
/// attention becomes one fused node. Results still PyTorch's after each step.
#[test]
fn swin_training_ir_attention_fuses() {
    let (p, ins, want) = first_io_case("swin_block_train");
    let count = |q: &Program, t: &str| q.graph.nodes.iter().filter(|n| n.target == t).count();
    assert_eq!(count(&p, "aten.fill_.Scalar"), 9);
    let mut f = p.clone();
    let r = passes::run(&mut f, PassSet::of(&[Pass::Functionalize]));
    assert_eq!(r.removed, vec![("functionalize".to_string(), 9)], "{r}");
    assert_eq!(count(&f, "aten.fill_.Scalar"), 0);
    assert_eq!(count(&f, "aten.fill.Scalar"), 9);
    // Two slices per write (rows, then columns): two scatters each.
    assert_eq!(count(&f, "aten.slice_scatter.default"), 18);
    run_matches_torch(&f, &ins, &want, "swin_block_train, functionalized");

    let mut all = p.clone();
    let r = passes::run(&mut all, PassSet::ALL);
    let shown = passes::render_graph(&all.graph);
    for t in [
        "aten.fill.Scalar",
        "aten.new_zeros.default",
        "aten.pad.default",
        "aten.softmax.int",
    ] {
        assert_eq!(count(&all, t), 0, "{t} left: {r}\n{shown}");
    }
    let fused: Vec<&Node> = all
        .graph
        .nodes
        .iter()
        .filter(|n| n.target == "pt2web.fused_attention.default")
        .collect();
    assert_eq!(fused.len(), 1, "{r}\n{shown}");
    let Some(Arg::Tensors(reads)) = fused[0].arg("inputs") else {
        panic!("fused attention inputs");
    };
    // q, k, v and the one merged mask, computed at load.
    assert_eq!(reads.len(), 4, "{shown}");
    let mask = &all.graph.value(reads[3]).name;
    assert!(mask.starts_with(passes::FOLDED_PREFIX), "{mask}\n{shown}");
    assert!(r.nodes_after <= 22, "{r}\n{shown}");
    run_matches_torch(&all, &ins, &want, "swin_block_train, every pass");
}

/// Repeated work merges: tiny GPT-2 (core ATen) builds `arange(0, seq) + 0` three times for
/// its attention mask; common-subexpression elimination keeps one of each, and the no-op
/// pass then drops the integer `+ 0`. The results are still PyTorch's (the other io cases,
/// other batch and sequence sizes, run with every pass in tests/run_fixtures.rs).
#[test]
fn repeated_work_is_merged() {
    let (p, ins, want) = first_io_case("tiny_gpt2_core");
    let count = |q: &Program, t: &str| q.graph.nodes.iter().filter(|n| n.target == t).count();
    let adds_of_zero = |q: &Program| {
        q.graph
            .nodes
            .iter()
            .filter(|n| n.target == "aten.add.Tensor" && n.arg("other") == Some(&Arg::Int(0)))
            .count()
    };
    let aranges = count(&p, "aten.arange.start_step");
    assert_eq!(adds_of_zero(&p), 3);
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::Cse]));
    assert_eq!(r.removed, vec![("cse".to_string(), 8)], "{r}");
    assert_eq!(count(&q, "aten.arange.start_step"), aranges - 2, "{r}");
    assert_eq!(adds_of_zero(&q), 1);
    run_matches_torch(&q, &ins, &want, "tiny_gpt2_core, cse");
    let r = passes::run(&mut q, PassSet::of(&[Pass::NoOps]));
    assert_eq!(adds_of_zero(&q), 0, "{r}");
    run_matches_torch(&q, &ins, &want, "tiny_gpt2_core, cse and noop");
}

/// An f16 model's inference batch norms fold into its convolutions as f16 constants
/// (computed in f64 and rounded once); the results stay within f16 rounding of PyTorch's.
#[test]
fn f16_batch_norms_fold() {
    let (p, ins, want) = first_io_case("conv_bn_f16_core");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::FoldBatchNorm]));
    assert_eq!(r.removed, vec![("fold_bn".to_string(), 2)], "{r}");
    let folded: Vec<_> = q
        .state
        .iter()
        .filter(|(n, _)| n.starts_with(passes::FOLDED_PREFIX))
        .collect();
    assert_eq!(folded.len(), 4, "two weights and two biases");
    assert!(folded
        .iter()
        .all(|(_, e)| e.tensor.dtype == pt2web::DType::F16));
    for (program, what) in [(&p, "as exported"), (&q, "folded")] {
        let mut s = Session::with_passes(program.clone(), PassSet::NONE).unwrap();
        let got = s
            .run(ins.iter().cloned().map(RValue::Tensor).collect())
            .unwrap();
        let (max, _) = metrics(got[0].as_tensor().unwrap(), &want[0]);
        assert!(max <= 2e-2, "{what}: max abs error {max} against PyTorch");
        eprintln!("conv_bn_f16_core {what}: max abs error {max}");
    }
}

/// With `--weights int8`, PT2E's int8 linear weights (torchao's convert_pt2e: an int8
/// constant and a dequantize node) stay int8 at load: the linear layer becomes `pt2web.linear_q` over the same integers, the
/// dequantize node and the int8 constant go, and the results still match PyTorch (a
/// convolution's weight, which no quantized kernel takes, is dequantized as before).
#[test]
fn pt2e_int8_linear_weights_stay_int8() {
    use pt2web::DType;
    for stem in ["pt2e_static", "pt2e_static_core", "pt2e_dynamic"] {
        let (_, ins, want) = first_io_case(stem);
        let meta = metas().into_iter().find(|(s, _)| s == stem).unwrap().1;
        let opts = pt2web::archive::pt2::LoadOptions {
            weights: pt2web::passes::quantize::WeightFormat::Int8,
            ..Default::default()
        };
        let p = open(&meta).program(Some("model"), &opts).unwrap();
        let targets: Vec<&str> = p.graph.nodes.iter().map(|n| n.target.as_str()).collect();
        assert_eq!(
            targets
                .iter()
                .filter(|t| **t == "pt2web.linear_q.default")
                .count(),
            1,
            "{stem}: {targets:?}"
        );
        let int8: Vec<_> = p
            .state
            .iter()
            .filter(|(_, e)| e.tensor.dtype == DType::I8)
            .map(|(n, e)| (n.clone(), e.tensor.sizes.clone()))
            .collect();
        assert!(
            int8.iter().all(|(_, s)| s.len() == 4),
            "{stem}: only the conv weight stays int8: {int8:?}"
        );
        run_matches_torch(&p, &ins, &want, stem);
    }
}

/// With `--weights int8`, torchao's int8 weight-only layers (core ATen: `mm` of the int8
/// weight cast to f32, times the per-row scales) stay int8 at load: each becomes one
/// `pt2web.linear_q` over the same integers and scales, the int8 `[n, k]` weights and their
/// products, casts and views go, and the results still match torchao's eager output on the
/// CPU and the GPU. (The int4 layout has zero points, which the quantized kernels do not
/// take: that program keeps its folded f32 weights.)
#[test]
fn torchao_int8_weights_stay_int8() {
    use pt2web::DType;
    let stem = "quant_int8_core";
    let (mut p, ins, want) = first_io_case(stem);
    let report = pt2web::passes::quantize::torchao_int8(&mut p).unwrap();
    assert_eq!(report.weights, 2, "{report:?}");
    let ops = p.graph.op_histogram();
    assert_eq!(ops.get("pt2web.linear_q.default"), Some(&2), "{ops:?}");
    assert!(!ops.contains_key("aten.mm.default"), "{ops:?}");
    assert!(!ops.contains_key("aten._to_copy.default"), "{ops:?}");
    let int8: Vec<&String> = p
        .state
        .iter()
        .filter(|(_, e)| e.tensor.dtype == DType::I8 && e.tensor.sizes.iter().all(|&s| s > 1))
        .map(|(n, _)| n)
        .collect();
    assert!(int8.is_empty(), "int8 weights left as they were: {int8:?}");
    assert!(
        p.state.keys().any(|k| k.ends_with("original0.qweight")),
        "{:?}",
        p.state.keys()
    );
    run_matches_torch(&p, &ins, &want, stem);
    gpu_matches_torch(p, &ins, &want);
    // Loading with `--weights int8` does it (and quantizes the f32 embedding left too).
    let meta = metas().into_iter().find(|(s, _)| s == stem).unwrap().1;
    let opts = pt2web::archive::pt2::LoadOptions {
        weights: pt2web::passes::quantize::WeightFormat::Int8,
        ..Default::default()
    };
    let ops = open(&meta)
        .program(Some("model"), &opts)
        .unwrap()
        .graph
        .op_histogram();
    assert_eq!(ops.get("pt2web.linear_q.default"), Some(&2), "{ops:?}");
    assert_eq!(ops.get("pt2web.embedding_q.default"), Some(&1), "{ops:?}");
}

/// torchao's int4 weight-only layers (core ATen: `(q - zero_point) * scale` per group of 16,
/// then `permute` + `addmm`) keep their integers at load with `--weights int8|int4`: `q - zp`
/// as int8 with the group scales (`pt2web.linear_q`, group 16), the dequantization chain and
/// the int8 weights gone, and the results still torchao's on the CPU and the GPU.
#[test]
fn torchao_int4_weights_stay_quantized() {
    use pt2web::DType;
    let stem = "quant_int4_core";
    let (mut p, ins, want) = first_io_case(stem);
    let report = pt2web::passes::quantize::torchao_int4(&mut p).unwrap();
    assert_eq!(report.weights, 2, "{report:?}");
    let ops = p.graph.op_histogram();
    assert_eq!(ops.get("pt2web.linear_q.default"), Some(&2), "{ops:?}");
    for gone in [
        "aten.addmm.default",
        "aten.sub.Tensor",
        "aten._to_copy.default",
    ] {
        assert!(!ops.contains_key(gone), "{gone}: {ops:?}");
    }
    assert!(
        !p.state.values().any(|e| e.tensor.dtype == DType::I8),
        "{:?}",
        p.state.keys()
    );
    eprintln!(
        "torchao int4: {} weights, {} -> {} bytes",
        report.weights, report.f32_bytes, report.quantized_bytes
    );
    run_matches_torch(&p, &ins, &want, stem);
    gpu_matches_torch(p, &ins, &want);
}

/// The GPU's quantized linear (`shaders/quant.wgsl`) equals the CPU's, int8 and int4, in
/// both forms (`linear_q`, 4 output columns per invocation; `linear_q_split`, a workgroup per
/// 4 columns splitting K, forced through the row algorithm): on a layer whose 10 outputs are
/// not a multiple of 4 (convnet_train's classifier, batch 2: the streamed path), and on
/// decode_mlp's layers, whose 576-wide rows (144 int8 / 72 int4 words) take several words per
/// invocation of the split form; and on long_k_mlp's 32,768-wide rows (8,192 int8 / 4,096
/// int4 words), past the loop steps one invocation of a CPU adapter takes: there the
/// one-invocation form dequantizes the weight and multiplies in parts of K (issue 17), and
/// its sums run in another order.
#[test]
fn quantized_linear_on_the_gpu_equals_the_cpus_in_both_forms() {
    use pt2web::backends::{self, RowAlgorithm};
    use pt2web::passes::quantize::WeightFormat;
    let Some(dev) = gpu_device() else {
        return;
    };
    for (fixture, layers, outputs, tol) in [
        ("convnet_train", 1, 20, 1e-5),
        ("decode_mlp", 2, 36, 1e-5),
        ("long_k_mlp", 2, 8, 1e-4),
    ] {
        for fmt in [WeightFormat::Int8, WeightFormat::Int4 { group: 32 }] {
            let (mut p, ins, _) = first_io_case(fixture);
            let report = pt2web::passes::quantize::run(&mut p, fmt).unwrap();
            assert_eq!(report.weights, layers, "{fixture} {fmt:?}: {report:?}");
            let run = |b: &mut dyn pt2web::backend::Backend| {
                let out = b
                    .run(ins.iter().cloned().map(RValue::Tensor).collect())
                    .unwrap();
                out[0].as_tensor().unwrap().contiguous().to_vec::<f32>()
            };
            let cpu = run(&mut Session::new(p.clone()).unwrap());
            assert_eq!(cpu.len(), outputs);
            for form in [RowAlgorithm::Thread, RowAlgorithm::Workgroup] {
                backends::set_row_algorithm(form);
                let mut g = pt2web::gpu::GpuSession::new(p.clone(), dev.clone()).unwrap();
                let gpu = run(&mut g);
                backends::set_row_algorithm(RowAlgorithm::Auto);
                let d = cpu
                    .iter()
                    .zip(&gpu)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    d <= tol,
                    "{fixture} {fmt:?} {form:?}: GPU {gpu:?} vs CPU {cpu:?}"
                );
                assert_eq!(
                    g.last_stats.fallback_nodes(),
                    0,
                    "{:?}",
                    g.last_stats.fallbacks
                );
            }
        }
    }
}

/// The `qparams` pass gives pt2e_dynamic's `choose_qparams` (its scale read only by the
/// per-tensor quantize / dequantize) a float32 scale: the same value, so the CPU's results
/// are bit-equal to the program's as exported, and still PyTorch's.
#[test]
fn dynamic_quantization_scales_become_float32() {
    let (p, ins, want) = first_io_case("pt2e_dynamic");
    let mut q = p.clone();
    let r = passes::run(&mut q, PassSet::of(&[Pass::QParams]));
    let count = |p: &Program, t: &str| p.graph.nodes.iter().filter(|n| n.target == t).count();
    let before = count(&p, "quantized_decomposed.choose_qparams.tensor");
    assert!(before > 0);
    assert_eq!(r.removed, vec![("qparams".to_string(), before)], "{r}");
    assert_eq!(count(&q, "quantized_decomposed.choose_qparams.tensor"), 0);
    assert_eq!(count(&q, "pt2web.choose_qparams.default"), before);
    let run = |p: Program| {
        let mut s = Session::with_passes(p, PassSet::NONE).unwrap();
        let out = s
            .run(ins.iter().cloned().map(RValue::Tensor).collect())
            .unwrap();
        out[0].as_tensor().unwrap().contiguous().to_vec::<f32>()
    };
    let (exported, rewritten) = (run(p), run(q.clone()));
    assert!(
        exported
            .iter()
            .zip(&rewritten)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{exported:?} vs {rewritten:?}"
    );
    run_matches_torch(&q, &ins, &want, "pt2e_dynamic with float32 scales");
}
