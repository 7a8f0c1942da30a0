//! The ops-and-dtypes support page (`docs/ops.md`, `pt2web ops`), generated from the op
//! table and the GPU table, so that it cannot drift from what runs: every target pt2web
//! knows, its family, whether the CPU has a kernel (and a complex one), whether the meta
//! device has a shape rule, and what the GPU backend does with it (a kernel with the dtypes
//! it serves, a view, a readback, a load-time decomposition, or the CPU kernel).
//! `tests/op_table.rs` checks that the committed page is this function's output.

use crate::dtype::DType;
use crate::gpu::kernels::support::{gpu_supports, has_gpu_path, Support};
use crate::gpu::kernels::table::{gpu_table, On};
use std::fmt::Write;

/// The dtypes the page asks the GPU table about, with the names torch prints.
const DTYPES: [(DType, &str); 11] = [
    (DType::F32, "f32"),
    (DType::F16, "f16"),
    (DType::BF16, "bf16"),
    (DType::F64, "f64"),
    (DType::I64, "i64"),
    (DType::I32, "i32"),
    (DType::I16, "i16"),
    (DType::I8, "i8"),
    (DType::U8, "u8"),
    (DType::Bool, "bool"),
    (DType::Complex64, "c64"),
];

/// Whether a node of `target` whose data tensors are `d` runs a GPU kernel: asked with the
/// tensor layouts ops take (one to three `d` inputs; an int64 index or a bool mask beside;
/// `d`, bool or int64 outputs; a factory with no tensor input).
fn gpu_serves(target: &str, d: DType) -> bool {
    use DType::{Bool, I64};
    let probes: [(&[DType], &[DType]); 14] = [
        (&[d], &[d]),
        (&[d, d], &[d]),
        (&[d, d, d], &[d]),
        (&[d], &[Bool]),
        (&[d, d], &[Bool]),
        (&[d, I64], &[d]),
        (&[d, I64, d], &[d]),
        (&[d], &[I64]),
        (&[d], &[d, I64]),
        (&[], &[d]),
        (&[Bool, d, d], &[d]),
        (&[d, Bool], &[d]),
        (&[Bool], &[d]),
        (&[Bool, d], &[d]),
    ];
    probes
        .iter()
        .any(|(i, o)| gpu_supports(target, i, o) == Support::Gpu)
}

/// The overloads a GPU registration covers, in words.
fn overloads(on: On) -> String {
    let list = |os: &[&str]| os.join(", ");
    match on {
        On::All => "every overload".into(),
        On::NotOut => "every overload but `out=`".into(),
        On::Only(os) => format!("overloads {}", list(os)),
        On::Except(os) => format!("every overload but {}", list(os)),
        On::Prefix(ps) => format!("overloads starting {}", list(ps)),
    }
}

/// An overload `on` serves, to ask the GPU table with.
fn some_overload(op: &str, on: On) -> String {
    match on {
        On::Only(os) | On::Prefix(os) if !os.is_empty() => format!("{op}.{}", os[0]),
        _ => format!("{op}.default"),
    }
}

/// The GPU column of one table name: what the backend does, and the dtypes a kernel serves.
fn gpu_cell(name: &str, any_overload: bool, cpu: bool) -> (String, String) {
    let regs: Vec<On> = gpu_table()
        .registrations()
        .into_iter()
        .filter(|(op, _)| {
            let base = if any_overload {
                name
            } else {
                name.rsplit_once('.').map_or(name, |(op, _)| op)
            };
            op == base
        })
        .map(|(_, on)| on)
        .collect();
    let target = match (any_overload, regs.first()) {
        (true, Some(&on)) => some_overload(name, on),
        (true, None) => format!("{name}.default"),
        (false, _) => name.to_string(),
    };
    let dtypes = || {
        let v: Vec<&str> = DTYPES
            .iter()
            .filter(|(d, _)| gpu_serves(&target, *d))
            .map(|(_, n)| *n)
            .collect();
        v.join(" ")
    };
    match gpu_supports(&target, &[DType::F32], &[DType::F32]) {
        Support::View => ("view".into(), String::new()),
        _ if crate::gpu::kernels::lookup(&target).is_some() => {
            let which = if any_overload && !regs.is_empty() {
                let v: Vec<String> = regs.iter().map(|&on| overloads(on)).collect();
                format!("kernel ({})", v.join("; "))
            } else {
                "kernel".into()
            };
            (which, dtypes())
        }
        _ if has_gpu_path(&target) => ("readback / decomposed".into(), dtypes()),
        _ if cpu => ("CPU kernel".into(), String::new()),
        _ => ("—".into(), String::new()),
    }
}

/// The support page, in Markdown.
pub fn support_page() -> String {
    let table = super::table();
    let mut defs: Vec<_> = table.defs().iter().collect();
    defs.sort_by(|a, b| (a.family, &a.name).cmp(&(b.family, &b.name)));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Ops and dtypes pt2web runs\n\n\
         Generated from the op table (`src/ops/`) and the GPU table (`src/gpu/kernels/`) by \
         `pt2web ops` (`src/ops/doc.rs`); `tests/op_table.rs` fails when this page is stale \
         (regenerate: `cargo run --release -p pt2web-native -- ops > docs/ops.md`).\n\n\
         To see whether one model runs, and where, before or after exporting it: \
         `pt2web check model.pt2 --device gpu` lists each of its ops with the node counts \
         that run a GPU kernel, are views, or fall back to the CPU kernel, and why.\n\n\
         Columns:\n\
         - **CPU**: a CPU kernel (every backend's reference and fallback); `+complex` where \
         complex tensors have their own kernel.\n\
         - **meta**: a shape and dtype rule (the Plan's meta pass, `pt2web check`, the meta \
         device).\n\
         - **GPU**: `kernel` (WGSL), `view` (metadata only), `readback / decomposed` (control \
         flow, data-dependent sizes, or ops rewritten into others that have kernels), or \
         `CPU kernel` (the node runs on the CPU inside a GPU session); `—` where only the \
         meta device knows the op.\n\
         - **GPU dtypes**: the dtypes of a node's data tensors that the kernel serves (index \
         tensors int64). f16 needs an adapter with `shader-f16`; float64 and complex128 always \
         run on the CPU (WGSL has no f64). A kernel can still decline one node for its \
         arguments (`pt2web run --json` counts fallbacks).\n\
         - A name without an overload (`aten.add`) covers all of the op's overloads.\n"
    );
    let gpu_kernels = defs
        .iter()
        .filter(|d| {
            gpu_cell(&d.name, d.any_overload, d.cpu.is_some())
                .0
                .starts_with("kernel")
        })
        .count();
    let _ = writeln!(
        out,
        "{} names in {} families; {} with a GPU kernel.\n",
        defs.len(),
        {
            let mut f: Vec<_> = defs.iter().map(|d| d.family).collect();
            f.dedup();
            f.len()
        },
        gpu_kernels
    );
    let mut family = "";
    for d in &defs {
        if d.family != family {
            family = d.family;
            let _ = writeln!(
                out,
                "\n## {family}\n\n| op | CPU | meta | GPU | GPU dtypes |\n|---|---|---|---|---|"
            );
        }
        let cpu = match (d.cpu.is_some(), d.complex.is_some()) {
            (true, true) => "yes +complex",
            (true, false) => "yes",
            (false, true) => "complex only",
            (false, false) => "—",
        };
        let (gpu, dtypes) = gpu_cell(&d.name, d.any_overload, d.cpu.is_some());
        let _ = writeln!(
            out,
            "| `{}` | {cpu} | {} | {gpu} | {dtypes} |",
            d.name,
            if d.rule.is_some() { "yes" } else { "—" },
        );
    }
    let _ = writeln!(
        out,
        "\n## Decomposed at load\n\n\
         These targets are rewritten when a program loads (`src/passes/decompose/`) into ops \
         above, so they run wherever those do.\n\n| target | becomes |\n|---|---|"
    );
    for (t, to) in crate::passes::decompose::decomposed_targets() {
        let _ = writeln!(out, "| `{t}` | {to} |");
    }
    out
}
