//! serde types for `models/*.json` (torch's export schema, `torch/_export/serde/schema.py`,
//! schema version 8.x) and the payload configs of the weights and constants.
//!
//! torch serializes a union as a one-key object (`{"as_tensor": {...}}`), which is serde's
//! externally tagged enum. Unknown fields are ignored (minor versions add fields); an unknown
//! union variant is an error that names it. Floats may be the strings "Infinity", "-Infinity"
//! and "NaN".

mod float;

use crate::dtype::DType;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use float::JsonF64;

/// The schema major version pt2web reads.
pub const SCHEMA_MAJOR: i64 = 8;
/// The newest minor version pt2web was written against (newer minors are read, unknown fields ignored).
pub const SCHEMA_MINOR: i64 = 20;
/// torch 2.5 wrote schema 7.x (the legacy archive layout).
pub const LEGACY_SCHEMA_MAJOR: i64 = 7;
/// Highest `aten` opset version pt2web knows.
pub const MAX_ATEN_OPSET: i64 = 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub index: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymExprHint {
    AsInt(i64),
    AsBool(bool),
    AsFloat(JsonF64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SymExpr {
    pub expr_str: String,
    #[serde(default)]
    pub hint: Option<SymExprHint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymInt {
    AsExpr(SymExpr),
    AsInt(i64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymFloat {
    AsExpr(SymExpr),
    AsFloat(JsonF64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymBool {
    AsExpr(SymExpr),
    AsBool(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorMeta {
    pub dtype: DType,
    pub sizes: Vec<SymInt>,
    pub requires_grad: bool,
    pub device: Device,
    pub strides: Vec<SymInt>,
    pub storage_offset: SymInt,
    pub layout: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymIntArgument {
    AsName(String),
    AsInt(i64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymFloatArgument {
    AsName(String),
    AsFloat(JsonF64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymBoolArgument {
    AsName(String),
    AsBool(bool),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TensorArgument {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenArgument {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionalTensorArgument {
    AsTensor(TensorArgument),
    AsNone(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphArgument {
    pub name: String,
    pub graph: Box<Graph>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomObjArgument {
    pub name: String,
    pub class_fqn: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComplexValue {
    pub real: JsonF64,
    pub imag: JsonF64,
}

/// A node argument or graph input/output. Every kind of schema 8.x.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Argument {
    AsNone(bool),
    AsTensor(TensorArgument),
    AsTensors(Vec<TensorArgument>),
    AsInt(i64),
    AsInts(Vec<i64>),
    AsFloat(JsonF64),
    AsFloats(Vec<JsonF64>),
    AsString(String),
    AsStrings(Vec<String>),
    AsSymInt(SymIntArgument),
    AsSymInts(Vec<SymIntArgument>),
    AsScalarType(DType),
    AsMemoryFormat(i64),
    AsLayout(i64),
    AsDevice(Device),
    AsBool(bool),
    AsBools(Vec<bool>),
    AsSymBool(SymBoolArgument),
    AsSymBools(Vec<SymBoolArgument>),
    AsGraph(GraphArgument),
    AsOptionalTensors(Vec<OptionalTensorArgument>),
    AsCustomObj(CustomObjArgument),
    AsOperator(String),
    AsSymFloat(SymFloatArgument),
    AsSymFloats(Vec<SymFloatArgument>),
    AsOptionalTensor(OptionalTensorArgument),
    AsComplex(ComplexValue),
    AsNestedTensors(Vec<Vec<TensorArgument>>),
    AsIntLists(Vec<Vec<i64>>),
    AsStringToArgument(BTreeMap<String, Argument>),
    AsFloatLists(Vec<Vec<JsonF64>>),
}

impl Argument {
    /// The schema's name for this kind (`as_tensor`...), for messages.
    pub fn kind(&self) -> &'static str {
        use Argument::*;
        match self {
            AsNone(_) => "as_none",
            AsTensor(_) => "as_tensor",
            AsTensors(_) => "as_tensors",
            AsInt(_) => "as_int",
            AsInts(_) => "as_ints",
            AsFloat(_) => "as_float",
            AsFloats(_) => "as_floats",
            AsString(_) => "as_string",
            AsStrings(_) => "as_strings",
            AsSymInt(_) => "as_sym_int",
            AsSymInts(_) => "as_sym_ints",
            AsScalarType(_) => "as_scalar_type",
            AsMemoryFormat(_) => "as_memory_format",
            AsLayout(_) => "as_layout",
            AsDevice(_) => "as_device",
            AsBool(_) => "as_bool",
            AsBools(_) => "as_bools",
            AsSymBool(_) => "as_sym_bool",
            AsSymBools(_) => "as_sym_bools",
            AsGraph(_) => "as_graph",
            AsOptionalTensors(_) => "as_optional_tensors",
            AsCustomObj(_) => "as_custom_obj",
            AsOperator(_) => "as_operator",
            AsSymFloat(_) => "as_sym_float",
            AsSymFloats(_) => "as_sym_floats",
            AsOptionalTensor(_) => "as_optional_tensor",
            AsComplex(_) => "as_complex",
            AsNestedTensors(_) => "as_nested_tensors",
            AsIntLists(_) => "as_int_lists",
            AsStringToArgument(_) => "as_string_to_argument",
            AsFloatLists(_) => "as_float_lists",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedArgument {
    pub name: String,
    pub arg: Argument,
    #[serde(default)]
    pub kind: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub target: String,
    pub inputs: Vec<NamedArgument>,
    pub outputs: Vec<Argument>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub is_hop_single_tensor_return: Option<bool>,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub inputs: Vec<Argument>,
    pub outputs: Vec<Argument>,
    pub nodes: Vec<Node>,
    pub tensor_values: BTreeMap<String, TensorMeta>,
    #[serde(default)]
    pub sym_int_values: BTreeMap<String, SymInt>,
    #[serde(default)]
    pub sym_bool_values: BTreeMap<String, SymBool>,
    #[serde(default)]
    pub is_single_tensor_return: bool,
    #[serde(default)]
    pub custom_obj_values: BTreeMap<String, CustomObjArgument>,
    #[serde(default)]
    pub sym_float_values: BTreeMap<String, SymFloat>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInputSpec {
    pub arg: Argument,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstantValue {
    AsNone(bool),
    AsInt(i64),
    AsFloat(JsonF64),
    AsString(String),
    AsBool(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputToConstantInputSpec {
    pub name: String,
    pub value: ConstantValue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputToParameterSpec {
    pub arg: TensorArgument,
    pub parameter_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputToBufferSpec {
    pub arg: TensorArgument,
    pub buffer_name: String,
    pub persistent: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputToTensorConstantSpec {
    pub arg: TensorArgument,
    pub tensor_constant_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputToCustomObjSpec {
    pub arg: CustomObjArgument,
    pub custom_obj_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputTokenSpec {
    pub arg: TokenArgument,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputSpec {
    UserInput(UserInputSpec),
    Parameter(InputToParameterSpec),
    Buffer(InputToBufferSpec),
    TensorConstant(InputToTensorConstantSpec),
    CustomObj(InputToCustomObjSpec),
    Token(InputTokenSpec),
    ConstantInput(InputToConstantInputSpec),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserOutputSpec {
    pub arg: Argument,
}

/// Output specs whose payload is a tensor and a target name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossOutputSpec {
    pub arg: TensorArgument,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferMutationSpec {
    pub arg: TensorArgument,
    pub buffer_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParameterMutationSpec {
    pub arg: TensorArgument,
    pub parameter_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientToParameterSpec {
    pub arg: TensorArgument,
    pub parameter_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientToUserInputSpec {
    pub arg: TensorArgument,
    pub user_input_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInputMutationSpec {
    pub arg: TensorArgument,
    pub user_input_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputTokenSpec {
    pub arg: TokenArgument,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputSpec {
    UserOutput(UserOutputSpec),
    LossOutput(LossOutputSpec),
    BufferMutation(BufferMutationSpec),
    GradientToParameter(GradientToParameterSpec),
    GradientToUserInput(GradientToUserInputSpec),
    UserInputMutation(UserInputMutationSpec),
    Token(OutputTokenSpec),
    ParameterMutation(ParameterMutationSpec),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphSignature {
    pub input_specs: Vec<InputSpec>,
    pub output_specs: Vec<OutputSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeConstraint {
    #[serde(default, with = "float::big_int")]
    pub min_val: Option<i64>,
    #[serde(default, with = "float::big_int")]
    pub max_val: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleCallSignature {
    pub inputs: Vec<Argument>,
    pub outputs: Vec<Argument>,
    pub in_spec: String,
    pub out_spec: String,
    #[serde(default)]
    pub forward_arg_names: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleCallEntry {
    pub fqn: String,
    #[serde(default)]
    pub signature: Option<ModuleCallSignature>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedTupleDef {
    pub field_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphModule {
    pub graph: Graph,
    pub signature: GraphSignature,
    pub module_call_graph: Vec<ModuleCallEntry>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub treespec_namedtuple_fields: BTreeMap<String, NamedTupleDef>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaVersion {
    pub major: i64,
    pub minor: i64,
}

/// The top-level object of `models/NAME.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedProgram {
    pub graph_module: GraphModule,
    pub opset_version: BTreeMap<String, i64>,
    pub range_constraints: BTreeMap<String, RangeConstraint>,
    pub schema_version: SchemaVersion,
    #[serde(default)]
    pub verifiers: Vec<String>,
    #[serde(default)]
    pub torch_version: Option<String>,
    #[serde(default)]
    pub guards_code: Vec<String>,
}

/// One entry of `model_weights_config.json` / `model_constants_config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadMeta {
    pub path_name: String,
    pub is_param: bool,
    pub use_pickle: bool,
    #[serde(default)]
    pub tensor_meta: Option<TensorMeta>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadConfig {
    pub config: BTreeMap<String, PayloadMeta>,
}

/// Which opset versions a caller accepts (as `torch.export.load(expected_opset_version=)`).
pub type OpsetVersions = BTreeMap<String, i64>;

/// Turn a serde_json error into a schema error that names the file and, for an unknown union
/// variant, says which kind was not recognised.
fn json_error(file: &str, e: serde_json::Error) -> Error {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let kind = rest.split('`').next().unwrap_or("?");
        return Error::schema(file, format!("unknown argument/spec kind '{kind}' ({msg})"));
    }
    Error::schema(file, msg)
}

/// Parse `models/NAME.json`, checking the schema version before anything else so a future
/// major version gets a version error rather than a confusing field error.
pub fn parse_exported_program(
    file: &str,
    bytes: &[u8],
    expected_opset: Option<&OpsetVersions>,
) -> Result<ExportedProgram> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| json_error(file, e))?;
    if let Some(v) = value.get("schema_version") {
        let major = v.get("major").and_then(|m| m.as_i64());
        let minor = v.get("minor").and_then(|m| m.as_i64());
        match (major, minor) {
            (Some(SCHEMA_MAJOR), Some(_))
            | (Some(LEGACY_SCHEMA_MAJOR), Some(_))
            | (Some(0), Some(0)) => {}
            (Some(ma), Some(mi)) => {
                return Err(Error::Version {
                    file: file.into(),
                    what: "schema_version".into(),
                    found: format!("{ma}.{mi}"),
                    supported: format!("{LEGACY_SCHEMA_MAJOR}.x (torch 2.5), {SCHEMA_MAJOR}.x"),
                })
            }
            _ => return Err(Error::schema(file, "schema_version is not {major, minor}")),
        }
    }
    let ep: ExportedProgram = serde_json::from_value(value).map_err(|e| json_error(file, e))?;
    check_opsets(file, &ep.opset_version, expected_opset)?;
    Ok(ep)
}

/// Check the program's opsets against what pt2web implements and what the caller expects.
pub fn check_opsets(
    file: &str,
    found: &BTreeMap<String, i64>,
    expected: Option<&OpsetVersions>,
) -> Result<()> {
    for (ns, &ver) in found {
        if let Some(exp) = expected.and_then(|e| e.get(ns)) {
            if *exp != ver {
                return Err(Error::Version {
                    file: file.into(),
                    what: format!("opset '{ns}'"),
                    found: ver.to_string(),
                    supported: format!("{exp} (expected by the caller)"),
                });
            }
        }
        if ns == "aten" && !(1..=MAX_ATEN_OPSET).contains(&ver) {
            return Err(Error::Version {
                file: file.into(),
                what: "opset 'aten'".into(),
                found: ver.to_string(),
                supported: format!("1..={MAX_ATEN_OPSET}"),
            });
        }
    }
    Ok(())
}

/// Parse a payload config (`model_weights_config.json` or `model_constants_config.json`).
pub fn parse_payload_config(file: &str, bytes: &[u8]) -> Result<PayloadConfig> {
    serde_json::from_slice(bytes).map_err(|e| json_error(file, e))
}

#[cfg(test)]
mod tests;
