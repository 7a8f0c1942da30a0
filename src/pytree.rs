//! pytree TreeSpecs as torch serializes them (`treespec_dumps`): `[1, {"type": ..., "context":
//! "<json>", "children_spec": [...]}]`. Types pt2web cannot import (a library's ModelOutput, a
//! user dataclass) keep their type name and field names, so outputs can still be structured.

use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// What kind of container a TreeSpec node is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NodeKind {
    Leaf,
    /// `None` as a value (a node with no children).
    None,
    Tuple,
    List,
    /// dict / OrderedDict / defaultdict: keys in flatten order.
    Dict {
        keys: Vec<Value>,
    },
    /// A namedtuple, a dataclass, or a registered class (e.g. ModelOutput): its type name and
    /// the field names of its children where the context gives them.
    Struct {
        type_name: String,
        fields: Vec<String>,
    },
}

/// One node of a TreeSpec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeSpec {
    #[serde(flatten)]
    pub kind: NodeKind,
    /// The serialized type name as torch wrote it (`builtins.tuple`...); `None` for a leaf.
    pub type_name: Option<String>,
    pub children: Vec<TreeSpec>,
}

/// A value structured by a TreeSpec.
#[derive(Debug, Clone, PartialEq)]
pub enum PyTree<T> {
    Leaf(T),
    None,
    Tuple(Vec<PyTree<T>>),
    List(Vec<PyTree<T>>),
    Dict(Vec<(Value, PyTree<T>)>),
    Struct {
        type_name: String,
        fields: Vec<(String, PyTree<T>)>,
    },
}

impl TreeSpec {
    /// Parse the string torch stores in `module_call_graph[..].signature.in_spec/out_spec`.
    /// `namedtuple_fields` is the GraphModule's `treespec_namedtuple_fields`.
    pub fn parse(
        s: &str,
        namedtuple_fields: &BTreeMap<String, Vec<String>>,
        max_depth: usize,
    ) -> Result<TreeSpec> {
        let v: Value = serde_json::from_str(s)
            .map_err(|e| Error::schema("treespec", format!("not JSON: {e}")))?;
        let arr = v
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| Error::schema("treespec", "expected [protocol, spec]"))?;
        match arr[0].as_i64() {
            Some(1) => {}
            other => {
                return Err(Error::Version {
                    file: "treespec".into(),
                    what: "pytree protocol".into(),
                    found: format!("{other:?}"),
                    supported: "1".into(),
                })
            }
        }
        Self::from_json(&arr[1], namedtuple_fields, max_depth)
    }

    fn from_json(v: &Value, nt: &BTreeMap<String, Vec<String>>, depth: usize) -> Result<TreeSpec> {
        if depth == 0 {
            return Err(Error::limit("treespec nesting depth", 1, 0));
        }
        let bad = |m: &str| Error::schema("treespec", m.to_string());
        let obj = v.as_object().ok_or_else(|| bad("node is not an object"))?;
        let children_json = obj
            .get("children_spec")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("node has no children_spec list"))?;
        let children = children_json
            .iter()
            .map(|c| Self::from_json(c, nt, depth - 1))
            .collect::<Result<Vec<_>>>()?;
        let type_name = match obj.get("type") {
            None | Some(Value::Null) => {
                return Ok(TreeSpec {
                    kind: NodeKind::Leaf,
                    type_name: None,
                    children: vec![],
                })
            }
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(bad("type is not a string")),
        };
        // The context is itself a JSON document stored as a string.
        let context: Value = match obj.get("context") {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
            Some(other) => other.clone(),
            None => Value::Null,
        };
        let n = children.len();
        let kind = match type_name.as_str() {
            "builtins.tuple" => NodeKind::Tuple,
            "builtins.list" | "torch.fx.immutable_collections.immutable_list" => NodeKind::List,
            "builtins.NoneType" => NodeKind::None,
            "builtins.dict"
            | "collections.OrderedDict"
            | "torch.fx.immutable_collections.immutable_dict" => NodeKind::Dict {
                keys: context.as_array().cloned().unwrap_or_default(),
            },
            "collections.defaultdict" => NodeKind::Dict {
                keys: context
                    .get("dict_context")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            },
            "collections.namedtuple" => {
                let name = context.as_str().unwrap_or("namedtuple").to_string();
                let fields = nt
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| (0..n).map(|i| format!("_{i}")).collect());
                NodeKind::Struct {
                    type_name: name,
                    fields,
                }
            }
            _ => NodeKind::Struct {
                type_name: type_name.clone(),
                fields: struct_fields(&context, n),
            },
        };
        if let NodeKind::Dict { keys } = &kind {
            if keys.len() != n {
                return Err(bad(&format!(
                    "{type_name} has {} keys but {n} children",
                    keys.len()
                )));
            }
        }
        if let NodeKind::Struct { fields, type_name } = &kind {
            if fields.len() != n {
                return Err(bad(&format!(
                    "{type_name} has {} fields but {n} children",
                    fields.len()
                )));
            }
        }
        Ok(TreeSpec {
            kind,
            type_name: Some(type_name),
            children,
        })
    }

    /// Number of leaves (flattened values).
    pub fn num_leaves(&self) -> usize {
        match self.kind {
            NodeKind::Leaf => 1,
            _ => self.children.iter().map(TreeSpec::num_leaves).sum(),
        }
    }

    /// Paths of the leaves in flatten order, like torch's keystr: `[0]['feat']`, `.logits`.
    pub fn leaf_paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.paths_into(String::new(), &mut out);
        out
    }

    fn paths_into(&self, prefix: String, out: &mut Vec<String>) {
        match &self.kind {
            NodeKind::Leaf => out.push(prefix),
            NodeKind::None => {}
            NodeKind::Tuple | NodeKind::List => {
                for (i, c) in self.children.iter().enumerate() {
                    c.paths_into(format!("{prefix}[{i}]"), out);
                }
            }
            NodeKind::Dict { keys } => {
                for (k, c) in keys.iter().zip(&self.children) {
                    let k = match k {
                        Value::String(s) => format!("['{s}']"),
                        other => format!("[{other}]"),
                    };
                    c.paths_into(format!("{prefix}{k}"), out);
                }
            }
            NodeKind::Struct { fields, .. } => {
                for (f, c) in fields.iter().zip(&self.children) {
                    c.paths_into(format!("{prefix}.{f}"), out);
                }
            }
        }
    }

    /// Rebuild the structure from flattened leaves (in flatten order).
    pub fn unflatten<T>(&self, leaves: Vec<T>) -> Result<PyTree<T>> {
        if leaves.len() != self.num_leaves() {
            return Err(Error::Verify(format!(
                "pytree expects {} leaves, got {}",
                self.num_leaves(),
                leaves.len()
            )));
        }
        let mut it = leaves.into_iter();
        Ok(self.build(&mut it))
    }

    fn build<T>(&self, it: &mut dyn Iterator<Item = T>) -> PyTree<T> {
        let kids = |it: &mut dyn Iterator<Item = T>| -> Vec<PyTree<T>> {
            self.children.iter().map(|c| c.build(it)).collect()
        };
        match &self.kind {
            // num_leaves was checked, so the iterator cannot run dry here.
            NodeKind::Leaf => it.next().map(PyTree::Leaf).unwrap_or(PyTree::None),
            NodeKind::None => PyTree::None,
            NodeKind::Tuple => PyTree::Tuple(kids(it)),
            NodeKind::List => PyTree::List(kids(it)),
            NodeKind::Dict { keys } => PyTree::Dict(keys.iter().cloned().zip(kids(it)).collect()),
            NodeKind::Struct { type_name, fields } => PyTree::Struct {
                type_name: type_name.clone(),
                fields: fields.iter().cloned().zip(kids(it)).collect(),
            },
        }
    }
}

/// Field names from a dataclass-like context: `["a", "b"]`, `[["a", "b"], []]` (dataclass
/// flat/none fields), `{"keys": [...]}`; positional names otherwise.
fn struct_fields(ctx: &Value, n: usize) -> Vec<String> {
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let candidates = [
        strings(ctx),
        ctx.as_array().and_then(|a| a.first()).and_then(strings),
        ctx.get("keys").and_then(strings),
        ctx.as_array().and_then(|a| a.get(1)).and_then(strings),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|f| f.len() == n)
        .unwrap_or_else(|| (0..n).map(|i| format!("_{i}")).collect())
}

impl fmt::Display for TreeSpec {
    /// A compact, Python-like rendering: `((*, {'mask': *}), {})`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, items: &[TreeSpec]| -> fmt::Result {
            for (i, c) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{c}")?;
            }
            Ok(())
        };
        match &self.kind {
            NodeKind::Leaf => f.write_str("*"),
            NodeKind::None => f.write_str("None"),
            NodeKind::Tuple => {
                f.write_str("(")?;
                join(f, &self.children)?;
                if self.children.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            NodeKind::List => {
                f.write_str("[")?;
                join(f, &self.children)?;
                f.write_str("]")
            }
            NodeKind::Dict { keys } => {
                f.write_str("{")?;
                for (i, (k, c)) in keys.iter().zip(&self.children).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match k {
                        Value::String(s) => write!(f, "'{s}': {c}")?,
                        other => write!(f, "{other}: {c}")?,
                    }
                }
                f.write_str("}")
            }
            NodeKind::Struct { type_name, fields } => {
                let short = type_name.rsplit('.').next().unwrap_or(type_name);
                write!(f, "{short}(")?;
                for (i, (n, c)) in fields.iter().zip(&self.children).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{n}={c}")?;
                }
                f.write_str(")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": "builtins.dict", "context": "[\"feat\", \"mask\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}]}, {"type": "builtins.dict", "context": "[]", "children_spec": []}]}]"#;

    #[test]
    fn parse_count_and_paths() {
        let t = TreeSpec::parse(SPEC, &BTreeMap::new(), 64).unwrap();
        assert_eq!(t.num_leaves(), 3);
        assert_eq!(
            t.leaf_paths(),
            vec!["[0][0]", "[0][1]['feat']", "[0][1]['mask']"]
        );
        assert_eq!(t.to_string(), "((*, {'feat': *, 'mask': *}), {})");
        let tree = t.unflatten(vec![1, 2, 3]).unwrap();
        match tree {
            PyTree::Tuple(v) => assert_eq!(v.len(), 2),
            _ => panic!(),
        }
        assert!(t.unflatten(vec![1]).is_err());
    }

    #[test]
    fn unknown_classes_keep_names() {
        let s = r#"[1, {"type": "transformers.modeling_outputs.BaseModelOutput", "context": "[[\"last_hidden_state\"], []]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]"#;
        let t = TreeSpec::parse(s, &BTreeMap::new(), 64).unwrap();
        assert_eq!(t.leaf_paths(), vec![".last_hidden_state"]);
        assert!(t.to_string().starts_with("BaseModelOutput("));
    }

    #[test]
    fn malformed_specs_error() {
        for bad in [
            "",
            "[]",
            "[2, {}]",
            "[1, 5]",
            r#"[1, {"type": "builtins.dict", "context": "[\"a\"]", "children_spec": []}]"#,
        ] {
            assert!(TreeSpec::parse(bad, &BTreeMap::new(), 64).is_err(), "{bad}");
        }
        let open = "{\"type\": \"builtins.list\", \"context\": \"null\", \"children_spec\": [";
        let deep = format!("[1, {}{}]", open.repeat(100), "]}".repeat(100));
        assert!(TreeSpec::parse(&deep, &BTreeMap::new(), 64).is_err());
    }
}
