//! What a module version's page shows beyond the protocol's data: its
//! README as sanitised HTML and the interface its `.tf` files declare. Read
//! once at publish (the verification layer extracts it), stored with the
//! version, shown by the web UI. Pure data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything a module version's page shows beyond the protocol's data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleDocs {
    /// The README's first paragraph as plain text: what lists and search show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The root README (`README.md`, any case), rendered and sanitised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme_html: Option<String>,
    pub root: Summary,
    /// By directory name under `modules/`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub submodules: BTreeMap<String, Summary>,
    /// By directory name under `examples/`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub examples: BTreeMap<String, Summary>,
    /// What could not be read, one line each (`variables.tf: parse error at 3:7 ...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One module directory's interface, each list sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub resources: Vec<Resource>,
    pub data_sources: Vec<Resource>,
    pub module_calls: Vec<ModuleCall>,
    pub required_providers: Vec<RequiredProvider>,
    /// Every `required_version` constraint of its `terraform` blocks.
    pub required_core: Vec<String>,
}

/// A `variable` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    /// The type as written (`map(object({ a = string }))`); a legacy quoted
    /// type (`"string"`) without its quotes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Absent when the variable is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DefaultValue>,
    /// No `default` attribute (a `default = null` is a default: null).
    pub required: bool,
    pub sensitive: bool,
    /// `nullable = false` makes null an invalid value; default true.
    pub nullable: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<Validation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    pub pos: Pos,
}

/// A default as a value when it is a literal, else as the expression written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultValue {
    Value(serde_json::Value),
    Expression(String),
}

/// A `validation` block of a variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub condition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// An `output` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub sensitive: bool,
    pub pos: Pos,
}

/// A `resource` or `data` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// The resource type, e.g. `aws_s3_bucket`.
    pub r#type: String,
    pub name: String,
    /// The provider's local name: the `provider` argument's first part, or
    /// the type's prefix before its first `_`.
    pub provider: String,
    pub pos: Pos,
}

/// A `module` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleCall {
    pub name: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub pos: Pos,
}

/// A provider the module needs: an entry of `required_providers`, or a
/// provider only named by a `provider` block or a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequiredProvider {
    /// Its local name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub version_constraints: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configuration_aliases: Vec<String>,
}

/// Where a block starts: file (relative to its module directory) and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pos {
    pub file: String,
    pub line: usize,
}

impl ModuleDocs {
    /// The docs as stored: JSON of at most `max` bytes. What does not fit is
    /// left out, largest first (the README, the examples, the submodules,
    /// then the notes), and a note says so.
    pub fn stored(&self, max: usize) -> Vec<u8> {
        let encode = |d: &ModuleDocs| serde_json::to_vec(d).unwrap_or_default();
        let mut docs = self.clone();
        let mut data = encode(&docs);
        type Cut = fn(&mut ModuleDocs) -> Option<&'static str>;
        let cuts: [Cut; 4] = [
            |d| d.readme_html.take().map(|_| "the README"),
            |d| (!std::mem::take(&mut d.examples).is_empty()).then_some("the examples"),
            |d| (!std::mem::take(&mut d.submodules).is_empty()).then_some("the submodules"),
            |d| (!std::mem::take(&mut d.notes).is_empty()).then_some("the notes"),
        ];
        for cut in cuts {
            if data.len() <= max {
                break;
            }
            if let Some(what) = cut(&mut docs) {
                docs.notes
                    .push(format!("{what}: left out (the docs passed {max} bytes)"));
                data = encode(&docs);
            }
        }
        if data.len() > max {
            // Only the root's interface is left, and it is too large itself.
            let kept = ModuleDocs {
                description: docs.description.clone(),
                notes: vec![format!(
                    "the module's interface is too large to show (more than {max} bytes)"
                )],
                ..ModuleDocs::default()
            };
            data = encode(&kept);
        }
        data
    }
}
