//! Out-of-range indices are errors naming the op, the dimension and the index (run through
//! the index fixtures with bad indices).

use crate::archive::pt2::LoadOptions;
use crate::cpu::Tensor;
use crate::program::Pt2Archive;
use crate::runtime::{RValue, Session};
use crate::Limits;

fn run(program: &str, inputs: Vec<Tensor>) -> crate::error::Result<Vec<RValue>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ops/index.pt2");
    let archive = Pt2Archive::open(
        "index.pt2",
        std::fs::read(path).expect("index fixture"),
        Limits::default(),
    )
    .expect("archive");
    let mut s = Session::new(
        archive
            .program(Some(program), &LoadOptions::default())
            .expect("program"),
    )
    .expect("session");
    s.run(inputs.into_iter().map(RValue::Tensor).collect())
}

fn x34() -> Tensor {
    Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4])
}

fn idx(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

#[test]
fn out_of_range_index_names_op_dim_and_index() {
    let cases: Vec<(&str, Vec<Tensor>, &str, &str)> = vec![
        (
            "index_1d",
            vec![x34(), idx(&[0, 3, 1])],
            "aten.index.Tensor",
            "index 3 is out of range for dimension 0",
        ),
        (
            "index_dim1",
            vec![x34(), idx(&[0, -5, 1])],
            "aten.index.Tensor",
            "index -5 is out of range for dimension 1",
        ),
        (
            "index_select",
            vec![x34(), idx(&[2, -1, 0])],
            "aten.index_select",
            "index -1 is out of bounds for dimension 1",
        ),
        (
            "gather",
            vec![x34(), Tensor::from_vec(vec![0i64, 0, 4, 1, 2, 3], &[3, 2])],
            "aten.gather",
            "index 4 is out of bounds for dimension 1",
        ),
        (
            "embedding_fn",
            vec![
                Tensor::from_vec(vec![0f32; 18], &[6, 3]),
                idx(&[5, 6, 0, 0]),
            ],
            "aten.embedding",
            "index 6 is out of bounds for dimension 0",
        ),
        (
            "scatter_add",
            vec![
                Tensor::from_vec(vec![1f32; 6], &[2, 3]),
                Tensor::from_vec(vec![0i64, 1, 0, 3, 2, 2, 1, 0], &[2, 4]),
                Tensor::from_vec(vec![0f32; 8], &[2, 4]),
            ],
            "aten.scatter_add",
            "index 3 is out of bounds for dimension 1",
        ),
    ];
    for (prog, inputs, op, msg) in cases {
        for p in [prog.to_string(), format!("{prog}__core")] {
            let err = run(&p, inputs.clone()).unwrap_err().to_string();
            assert!(err.contains(op) && err.contains(msg), "{p}: {err}");
        }
    }
}

#[test]
fn negative_indices_wrap_where_torch_wraps() {
    let outs = run("index_1d", vec![x34(), idx(&[-1, -3, 1])]).unwrap();
    assert_eq!(
        outs[0].as_tensor().unwrap().to_vec::<f32>(),
        vec![8., 9., 10., 11., 0., 1., 2., 3., 4., 5., 6., 7.]
    );
}

/// issue 16's index ops refuse bad indices with errors naming the op and the argument (the
/// embedding_bag and put fixtures).
#[test]
fn bag_and_put_name_their_bad_inputs() {
    let f = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s);
    let bag_inputs = |ids: &[i64], offs: &[i64]| {
        vec![
            f(vec![0.5; 40], &[10, 4]),
            idx(ids),
            idx(offs),
            f(vec![1.0; ids.len()], &[ids.len()]),
            Tensor::from_vec(vec![0i64; 12], &[3, 4]),
        ]
    };
    let cases: Vec<(&str, Vec<Tensor>, &str, &str)> = vec![
        (
            "embedding_bag",
            bag_inputs(&[1, 2, 10, 5, 4, 3, 2, 9, 2], &[0, 3, 3, 7]),
            "embedding_bag",
            "index 10 is out of range for a weight of 10 rows",
        ),
        (
            "embedding_bag",
            bag_inputs(&[1, 2, 4, 5, 4, 3, 2, 9, 2], &[0, 5, 3, 7]),
            "embedding_bag",
            "offsets must be non-decreasing",
        ),
        (
            "put",
            vec![
                x34(),
                idx(&[0, -1, 12, 7]),
                f(vec![1.0; 4], &[4]),
                Tensor::from_vec(vec![1i64; 4], &[2, 2]),
                f(vec![1.0; 4], &[2, 2]),
            ],
            "aten.put",
            "index 12 is out of range for dimension 0 with size 12",
        ),
    ];
    for (prog, inputs, op, msg) in cases {
        for p in [prog.to_string(), format!("{prog}__core")] {
            let err = run(&p, inputs.clone()).unwrap_err().to_string();
            assert!(err.contains(op) && err.contains(msg), "{p}: {err}");
        }
    }
}
