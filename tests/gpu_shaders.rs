//! Every WGSL shader variant parsed and validated by naga (no GPU needed), uniform layouts
//! checked against the Rust structs, and the GPU storage conversions of i64 and bool.

use pt2web::cpu::Data;
use pt2web::gpu::kernels::{
    AttentionMeta, BagMeta, BatchNormMeta, ConvMeta, ElemMeta, FftMeta, GateMeta, HistMeta,
    IndexMeta, MatmulMeta, PoolMeta, ReduceMeta, ResampleMeta, RowMeta, ScatterMeta, SelectMeta,
    ShapeMeta, SortMeta,
};
use pt2web::gpu::shaders::{all_variants, Shader, Variant, MATH};
use pt2web::gpu::store::{from_gpu_bytes, to_gpu_bytes};
use pt2web::DType;

use naga::valid::{Capabilities, ValidationFlags, Validator};

/// What a device gives a variant: `shader-f16` for the f16 forms, `subgroups` for the
/// subgroup forms, nothing else.
fn caps(v: &Variant) -> Capabilities {
    let mut c = Capabilities::empty();
    if v.elems.uses_f16() {
        c |= Capabilities::SHADER_FLOAT16;
    }
    if v.shader.uses_subgroups() {
        c |= Capabilities::SUBGROUP;
    }
    c
}

fn validate(v: &Variant) -> Result<(), String> {
    let source = v.source();
    let src: &str = &source;
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| format!("{}: parse error:\n{}", v.label(), e.emit_to_string(src)))?;
    let mut validator = Validator::new(ValidationFlags::all(), caps(v));
    let info = validator.validate(&module).map_err(|e| {
        format!(
            "{}: validation error:\n{}",
            v.label(),
            e.emit_to_string(src)
        )
    })?;
    if !module
        .entry_points
        .iter()
        .any(|ep| ep.name == v.entry && ep.stage == naga::ShaderStage::Compute)
    {
        return Err(format!(
            "{}: no compute entry point '{}'",
            v.label(),
            v.entry
        ));
    }
    let mut constants = naga::back::PipelineConstants::default();
    if let Some((n, val)) = v.constant {
        if !module
            .overrides
            .iter()
            .any(|(_, o)| o.name.as_deref() == Some(n))
        {
            return Err(format!("{}: no override constant '{n}'", v.label()));
        }
        constants.insert(n.to_string(), val as f64);
    }
    let (m, _) = naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        Some((naga::ShaderStage::Compute, v.entry)),
        &constants,
    )
    .map_err(|e| format!("{}: override constants: {e}", v.label()))?;
    Validator::new(ValidationFlags::all(), caps(v))
        .validate(&m)
        .map_err(|e| {
            format!(
                "{}: validation error after specialisation:\n{}",
                v.label(),
                e.emit_to_string(src)
            )
        })?;
    Ok(())
}

#[test]
fn every_shader_variant_validates() {
    let variants = all_variants();
    for s in Shader::ALL {
        assert!(
            variants.iter().any(|v| v.shader == s),
            "{} has no declared variant",
            s.name()
        );
    }
    let errors: Vec<String> = variants.iter().filter_map(|v| validate(v).err()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// No shader spells +-inf or NaN as a constant expression (`bitcast<f32>(0x7f800000u)`):
/// naga accepts it, but Tint, Chromium's WGSL compiler, rejects a constant that is not a
/// finite f32, so the shader would fail only in the browser. A private variable holding the
/// bits (`var<private> INF_BITS: u32 = 0x7f800000u;`) is the portable form.
#[test]
fn no_constant_inf_or_nan() {
    let mut bad = Vec::new();
    for s in Shader::ALL {
        let v = all_variants().into_iter().find(|v| v.shader == s).unwrap();
        for (i, line) in v.source().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("").to_ascii_lowercase();
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            for bits in ["(0x7f8", "(0xff8", "(0x7fc", "(0xffc"] {
                if compact.contains(&format!("bitcast<f32>{bits}")) {
                    bad.push(format!("{}:{}: {}", s.name(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "constant inf/NaN:\n{}", bad.join("\n"));
}

/// The `Meta` struct of each shader has the size of the Rust struct that fills it.
#[test]
fn uniform_layouts_match() {
    for (s, size) in [
        (Shader::Elementwise, std::mem::size_of::<ElemMeta>()),
        (Shader::Matmul, std::mem::size_of::<MatmulMeta>()),
        (Shader::Matmul4, std::mem::size_of::<MatmulMeta>()),
        (Shader::Matmul4x16, std::mem::size_of::<MatmulMeta>()),
        (Shader::Rows, std::mem::size_of::<RowMeta>()),
        (Shader::RowsSubgroup, std::mem::size_of::<RowMeta>()),
        (Shader::Reduce, std::mem::size_of::<ReduceMeta>()),
        (
            Shader::Random,
            std::mem::size_of::<pt2web::gpu::random::RandMeta>(),
        ),
        (Shader::Conv, std::mem::size_of::<ConvMeta>()),
        (Shader::Norm, std::mem::size_of::<BatchNormMeta>()),
        (Shader::Pool, std::mem::size_of::<PoolMeta>()),
        (Shader::Index, std::mem::size_of::<IndexMeta>()),
        (Shader::Ints, std::mem::size_of::<ElemMeta>()),
        (Shader::Shape, std::mem::size_of::<ShapeMeta>()),
        (Shader::Scatter, std::mem::size_of::<ScatterMeta>()),
        (Shader::Sort, std::mem::size_of::<SortMeta>()),
        (Shader::Resample, std::mem::size_of::<ResampleMeta>()),
        (Shader::Rnn, std::mem::size_of::<GateMeta>()),
        (Shader::Linalg, std::mem::size_of::<MatmulMeta>()),
        (Shader::Select, std::mem::size_of::<SelectMeta>()),
        (Shader::Attention, std::mem::size_of::<AttentionMeta>()),
        (Shader::Complex, std::mem::size_of::<ElemMeta>()),
        (Shader::Fft, std::mem::size_of::<FftMeta>()),
        (Shader::Bag, std::mem::size_of::<BagMeta>()),
        (Shader::Histogram, std::mem::size_of::<HistMeta>()),
    ] {
        let module = naga::front::wgsl::parse_str(s.module())
            .unwrap_or_else(|e| panic!("{}: {}", s.name(), e.emit_to_string(s.module())));
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let (h, _) = module
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some("Meta"))
            .unwrap_or_else(|| panic!("{}: no struct Meta", s.name()));
        assert_eq!(
            layouter[h].size as usize,
            size,
            "{}: WGSL Meta size vs the Rust struct",
            s.name()
        );
    }
}

#[test]
fn int64_out_of_int32_range_is_an_error_not_a_wrap() {
    let e = to_gpu_bytes(&Data::I64(vec![1, 1 << 40]), "input 'idx'").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("input 'idx'") && msg.contains("1099511627776"),
        "{msg}"
    );
    let ok = to_gpu_bytes(&Data::I64(vec![-5, i32::MAX as i64]), "x").unwrap();
    let back = from_gpu_bytes(DType::I64, &ok, 2).unwrap();
    assert_eq!(back, Data::I64(vec![-5, i32::MAX as i64]));
    let b = to_gpu_bytes(&Data::Bool(vec![true, false]), "m").unwrap();
    assert_eq!(
        from_gpu_bytes(DType::Bool, &b, 2).unwrap(),
        Data::Bool(vec![true, false])
    );
}

/// f16 is stored packed (two per word, the last word zero-padded) and comes back exactly.
#[test]
fn f16_storage_round_trips() {
    use half::f16;
    let v: Vec<f16> = [1.5f32, -0.0, 65504.0, f32::INFINITY, 6.0e-8]
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let b = to_gpu_bytes(&Data::F16(v.clone()), "x").unwrap();
    assert_eq!(b.len(), 12, "5 halves padded to 3 words");
    assert_eq!(pt2web::gpu::store::gpu_bytes(DType::F16, 5), 12);
    assert_eq!(from_gpu_bytes(DType::F16, &b, 5).unwrap(), Data::F16(v));
}

/// Every shader that has f16 forms declares the lines `Variant::source` rewrites (else the
/// f16 form would silently be the f32 one).
#[test]
fn f16_forms_rewrite_their_types() {
    use pt2web::gpu::shaders::Elems;
    let f16: Vec<Variant> = all_variants()
        .into_iter()
        .filter(|v| v.elems.uses_f16())
        .collect();
    assert!(!f16.is_empty());
    for v in f16 {
        assert!(Variant::has_elem_aliases(v.shader), "{}", v.label());
        let src = v.source();
        assert!(src.starts_with("enable f16;"), "{}", v.label());
        let want_out = matches!(v.elems, Elems::F16 | Elems::F32ToF16 | Elems::F16Acc);
        assert_eq!(src.contains("alias TOut = f16;"), want_out, "{}", v.label());
        assert_eq!(
            src.contains("const OUT_F16: bool = true;"),
            want_out,
            "{}",
            v.label()
        );
    }
}

/// The op codes the shaders switch on come from the Rust enums (`UnaryOp`, `ScatterOp`...):
/// each shader names every code of its enums (a `case UnaryOp_Silu:` rather than `case
/// 12u:`, which naga resolves against the generated constants), and no `OP` switch or test
/// is written with a bare number.
#[test]
fn shader_op_codes_come_from_the_rust_enums() {
    use pt2web::gpu::shaders::op_codes;
    let mut problems = Vec::new();
    for codes in op_codes() {
        for (variant, _) in codes.codes {
            let name = codes.const_name(variant);
            let used = codes.shaders.iter().any(|s| {
                // The elementwise module includes the op functions of math.wgsl.
                let math = if *s == Shader::Elementwise { MATH } else { "" };
                s.source().lines().chain(math.lines()).any(|l| {
                    l.split("//")
                        .next()
                        .unwrap_or("")
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == name)
                })
            });
            if !used {
                problems.push(format!("{name} is not used by {:?}", codes.shaders));
            }
        }
    }
    let sources = Shader::ALL.iter().map(|s| (s.name(), s.source()));
    for (name, src) in sources.chain([("math.wgsl", MATH)]) {
        let mut in_op_switch = false;
        for (i, line) in src.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("switch OP") || code.contains("switch op ") {
                in_op_switch = true;
            }
            let bare_case = in_op_switch
                && code.trim_start().starts_with("case ")
                && code.trim_start()[5..].starts_with(|c: char| c.is_ascii_digit());
            let bare_test = ["OP == ", "OP != ", "OP < ", "OP > ", "OP <= ", "OP >= "]
                .iter()
                .any(|t| {
                    code.match_indices(t).any(|(j, _)| {
                        let before = code[..j].chars().last();
                        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                            && code[j + t.len()..].starts_with(|c: char| c.is_ascii_digit())
                    })
                });
            if bare_case || bare_test {
                problems.push(format!(
                    "{}:{}: a bare op code: {}",
                    name,
                    i + 1,
                    line.trim()
                ));
            }
            if in_op_switch && code.trim() == "}" && line.starts_with("    }") {
                in_op_switch = false;
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The kernels generated for fused elementwise chains (src/gpu/kernels/fused.rs): every
/// chain the fusion pass makes of the fusion cases, and of the other op families, parses and
/// validates with naga, and its parameter block matches `FusedMeta`.
#[test]
fn generated_fused_kernels_validate() {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::program::Pt2Archive;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
    let mut checked = 0;
    for fam in ["fusion", "activation", "elementwise"] {
        let file = format!("{fam}.pt2");
        let archive = Pt2Archive::open(
            &file,
            std::fs::read(dir.join(&file)).unwrap(),
            pt2web::Limits::default(),
        )
        .unwrap();
        for name in archive.program_names().to_vec() {
            let mut p = archive
                .program(Some(&name), &LoadOptions::default())
                .unwrap();
            pt2web::passes::run(&mut p, pt2web::backends::PassSet::ALL);
            for n in p
                .graph
                .nodes
                .iter()
                .filter(|n| n.target == "pt2web.fused_elementwise.default")
            {
                let src = pt2web::gpu::kernels::fused_source(n)
                    .unwrap_or_else(|| panic!("{fam}/{name}: no kernel for {}", n.name));
                let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
                    panic!("{fam}/{name} {}: {}\n{src}", n.name, e.emit_to_string(&src))
                });
                Validator::new(ValidationFlags::all(), Capabilities::empty())
                    .validate(&module)
                    .unwrap_or_else(|e| {
                        panic!("{fam}/{name} {}: {}", n.name, e.emit_to_string(&src))
                    });
                let meta = module
                    .types
                    .iter()
                    .find(|(_, t)| t.name.as_deref() == Some("Meta"))
                    .map(|(_, t)| t.inner.size(module.to_ctx()))
                    .unwrap();
                assert_eq!(
                    meta as usize,
                    std::mem::size_of::<pt2web::gpu::kernels::FusedMeta>()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} fused kernels");
}

/// The producer kernels with a fused epilogue (src/gpu/kernels/epilogue.rs): for every
/// epilogue the pass makes of the epilogue cases, each producer variant's module with it
/// parses and validates with naga, and its `Meta` is the producer's own followed by
/// `EpilogueMeta`.
#[test]
fn generated_epilogue_kernels_validate() {
    use pt2web::archive::pt2::LoadOptions;
    use pt2web::program::Pt2Archive;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops");
    let meta_size = |src: &str| {
        let module = naga::front::wgsl::parse_str(src).unwrap();
        let size = module
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some("Meta"))
            .map(|(_, t)| t.inner.size(module.to_ctx()))
            .unwrap();
        size as usize
    };
    let archive = Pt2Archive::open(
        "epilogue.pt2",
        std::fs::read(dir.join("epilogue.pt2")).unwrap(),
        pt2web::Limits::default(),
    )
    .unwrap();
    let mut checked = 0;
    for name in archive.program_names().to_vec() {
        let mut p = archive
            .program(Some(&name), &LoadOptions::default())
            .unwrap();
        pt2web::passes::run(&mut p, pt2web::backends::PassSet::ALL);
        for n in p
            .graph
            .nodes
            .iter()
            .filter(|n| n.target == "pt2web.fused_epilogue.default")
        {
            let sources = pt2web::gpu::kernels::epilogue_sources(n);
            assert_eq!(
                sources.len(),
                pt2web::gpu::kernels::producer_variants().len(),
                "{name}: no epilogue kernels for {}",
                n.name
            );
            for ((label, src), v) in sources
                .iter()
                .zip(pt2web::gpu::kernels::producer_variants())
            {
                let module = naga::front::wgsl::parse_str(src)
                    .unwrap_or_else(|e| panic!("{name} {label}: {}\n{src}", e.emit_to_string(src)));
                Validator::new(ValidationFlags::all(), Capabilities::empty())
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{name} {label}: {}", e.emit_to_string(src)));
                assert_eq!(
                    meta_size(src),
                    meta_size(&v.source())
                        + std::mem::size_of::<pt2web::gpu::kernels::EpilogueMeta>(),
                    "{name} {label}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 7 * 15, "only {checked} epilogue kernels");
}
