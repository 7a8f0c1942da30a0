//! The operators an [`Expr`](super::Expr) can apply: sympy's core arithmetic, relations and
//! logic, and the functions torch defines in `torch/utils/_sympy/functions.py`.
//! One table maps every spelling the parsers accept to an [`Op`].

/// An operator or function applied to argument expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    // sympy core arithmetic
    Add,
    Mul,
    Pow,
    Abs,
    Floor,
    Ceiling,
    Min,
    Max,
    // torch integer functions (Python semantics: floor toward -inf, modulus signed like the divisor)
    FloorDiv,
    CleanDiv,
    CeilDiv,
    Mod,
    PythonMod,
    ModularIndexing,
    PowByNatural,
    LShift,
    RShift,
    CeilToInt,
    FloorToInt,
    TruncToInt,
    RoundToInt,
    IsNonOverlappingAndDense,
    // torch float functions
    ToFloat,
    IntTrueDiv,
    FloatTrueDiv,
    FloatPow,
    TruncToFloat,
    RoundDecimal,
    Math(MathFn),
    // misc
    Identity,
    Where,
    BitAnd,
    BitOr,
    BitXor,
    /// Python `~` on an integer (only the infix parser produces it).
    BitNot,
    // relations and logic
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Not,
    Xor,
}

/// The float functions torch wraps as `OpaqueUnaryFn_<name>` (evaluated like Python's `math`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MathFn {
    Sqrt,
    Cos,
    Cosh,
    Sin,
    Sinh,
    Tan,
    Tanh,
    Asin,
    Acos,
    Atan,
    Exp,
    Log,
    Asinh,
    Log2,
}

const MATH_FNS: &[(&str, MathFn)] = &[
    ("sqrt", MathFn::Sqrt),
    ("cos", MathFn::Cos),
    ("cosh", MathFn::Cosh),
    ("sin", MathFn::Sin),
    ("sinh", MathFn::Sinh),
    ("tan", MathFn::Tan),
    ("tanh", MathFn::Tanh),
    ("asin", MathFn::Asin),
    ("acos", MathFn::Acos),
    ("atan", MathFn::Atan),
    ("exp", MathFn::Exp),
    ("log", MathFn::Log),
    ("asinh", MathFn::Asinh),
    ("log2", MathFn::Log2),
];

impl MathFn {
    /// The `math` module name (`sqrt`, `log2`...).
    pub fn name(self) -> &'static str {
        MATH_FNS
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    pub fn apply(self, x: f64) -> f64 {
        match self {
            MathFn::Sqrt => x.sqrt(),
            MathFn::Cos => x.cos(),
            MathFn::Cosh => x.cosh(),
            MathFn::Sin => x.sin(),
            MathFn::Sinh => x.sinh(),
            MathFn::Tan => x.tan(),
            MathFn::Tanh => x.tanh(),
            MathFn::Asin => x.asin(),
            MathFn::Acos => x.acos(),
            MathFn::Atan => x.atan(),
            MathFn::Exp => x.exp(),
            MathFn::Log => x.ln(),
            MathFn::Asinh => x.asinh(),
            MathFn::Log2 => x.log2(),
        }
    }
}

/// Function names as sympy `srepr` writes them; the first spelling of an op is the one
/// Display prints. Aliases follow: sympy's short relation names and the spellings torch's
/// PythonPrinter uses in `guards_code`.
const NAMES: &[(&str, Op)] = &[
    ("Add", Op::Add),
    ("Mul", Op::Mul),
    ("Pow", Op::Pow),
    ("Abs", Op::Abs),
    ("floor", Op::Floor),
    ("ceiling", Op::Ceiling),
    ("Min", Op::Min),
    ("Max", Op::Max),
    ("FloorDiv", Op::FloorDiv),
    ("CleanDiv", Op::CleanDiv),
    ("CeilDiv", Op::CeilDiv),
    ("Mod", Op::Mod),
    ("PythonMod", Op::PythonMod),
    ("ModularIndexing", Op::ModularIndexing),
    ("PowByNatural", Op::PowByNatural),
    ("LShift", Op::LShift),
    ("RShift", Op::RShift),
    ("CeilToInt", Op::CeilToInt),
    ("FloorToInt", Op::FloorToInt),
    ("TruncToInt", Op::TruncToInt),
    ("RoundToInt", Op::RoundToInt),
    (
        "IsNonOverlappingAndDenseIndicator",
        Op::IsNonOverlappingAndDense,
    ),
    ("ToFloat", Op::ToFloat),
    ("IntTrueDiv", Op::IntTrueDiv),
    ("FloatTrueDiv", Op::FloatTrueDiv),
    ("FloatPow", Op::FloatPow),
    ("TruncToFloat", Op::TruncToFloat),
    ("RoundDecimal", Op::RoundDecimal),
    ("Identity", Op::Identity),
    ("Where", Op::Where),
    ("BitwiseFn_bitwise_and", Op::BitAnd),
    ("BitwiseFn_bitwise_or", Op::BitOr),
    ("BitwiseFn_bitwise_xor", Op::BitXor),
    ("BitwiseFn_bitwise_not", Op::BitNot),
    ("Equality", Op::Eq),
    ("Unequality", Op::Ne),
    ("StrictLessThan", Op::Lt),
    ("LessThan", Op::Le),
    ("StrictGreaterThan", Op::Gt),
    ("GreaterThan", Op::Ge),
    ("And", Op::And),
    ("Or", Op::Or),
    ("Not", Op::Not),
    ("Xor", Op::Xor),
    // aliases
    ("Eq", Op::Eq),
    ("Ne", Op::Ne),
    ("Lt", Op::Lt),
    ("Le", Op::Le),
    ("Gt", Op::Gt),
    ("Ge", Op::Ge),
    ("max", Op::Max),
    ("min", Op::Min),
    ("abs", Op::Abs),
    ("math.floor", Op::FloorToInt),
    ("math.ceil", Op::CeilToInt),
    ("math.trunc", Op::TruncToInt),
    ("int", Op::TruncToInt),
    ("float", Op::ToFloat),
    ("torch.sym_float", Op::ToFloat),
    ("torch.sym_max", Op::Max),
    ("torch.sym_min", Op::Min),
    ("torch.sym_ite", Op::Where),
    ("torch._sym_sqrt", Op::Math(MathFn::Sqrt)),
    ("torch.sym_sqrt", Op::Math(MathFn::Sqrt)),
    ("sqrt", Op::Math(MathFn::Sqrt)),
    ("exp", Op::Math(MathFn::Exp)),
    ("log", Op::Math(MathFn::Log)),
];

impl Op {
    /// Look a function name up (srepr names, sympy aliases, `OpaqueUnaryFn_*`, `math.*`).
    pub fn from_name(name: &str) -> Option<Op> {
        if let Some((_, op)) = NAMES.iter().find(|(n, _)| *n == name) {
            return Some(*op);
        }
        let math = name
            .strip_prefix("OpaqueUnaryFn_")
            .or_else(|| name.strip_prefix("math."))?;
        MATH_FNS
            .iter()
            .find(|(n, _)| *n == math)
            .map(|(_, f)| Op::Math(*f))
    }

    /// The srepr spelling (what Display prints for function-call forms).
    pub fn name(self) -> String {
        if let Op::Math(f) = self {
            return format!("OpaqueUnaryFn_{}", f.name());
        }
        NAMES
            .iter()
            .find(|(_, o)| *o == self)
            .map_or("?", |(n, _)| n)
            .to_string()
    }

    /// Allowed argument counts (min, max); checked when parsing so evaluation can index.
    pub fn arity(self) -> (usize, usize) {
        use Op::*;
        match self {
            Add | Mul | Min | Max | And | Or | Xor => (1, usize::MAX),
            IsNonOverlappingAndDense => (2, usize::MAX),
            ModularIndexing | Where => (3, 3),
            Abs | Floor | Ceiling | CeilToInt | FloorToInt | TruncToInt | RoundToInt | ToFloat
            | TruncToFloat | Math(_) | Identity | BitNot | Not => (1, 1),
            _ => (2, 2),
        }
    }

    /// Whether `n` arguments fit (arity, and sizes+strides pairs for the dense indicator).
    pub fn accepts(self, n: usize) -> bool {
        let (lo, hi) = self.arity();
        (lo..=hi).contains(&n) && (self != Op::IsNonOverlappingAndDense || n.is_multiple_of(2))
    }

    /// True for ops whose value is a boolean (relations and logic).
    pub fn is_boolean(self) -> bool {
        use Op::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge | And | Or | Not | Xor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, op) in NAMES {
            assert_eq!(Op::from_name(name), Some(*op), "{name}");
            assert_eq!(Op::from_name(&op.name()), Some(*op), "{name}");
        }
        for (name, f) in MATH_FNS {
            let op = Op::from_name(&format!("OpaqueUnaryFn_{name}")).unwrap();
            assert_eq!(op, Op::Math(*f));
            assert_eq!(Op::from_name(&op.name()), Some(op));
        }
        assert_eq!(Op::from_name("NoSuchFn"), None);
    }
}
