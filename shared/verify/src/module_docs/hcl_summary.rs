//! A module directory's interface from its `.tf` files, by the rules of
//! HashiCorp's terraform-config-inspect (`tfconfig/load_hcl.go`): a variable
//! is required when it has no `default` attribute (`default = null` is a
//! default); a type is shown as written; a default is a value when it is a
//! literal; a resource's provider is its `provider` argument or its type's
//! prefix. Beyond tfconfig: `nullable`, `validation` blocks, `deprecated`.

use std::collections::BTreeMap;

use hcl::edit::Span;
use hcl::edit::expr::{Expression, ObjectKey};
use hcl::edit::parser::parse_body;
use hcl::edit::structure::{Block, Body};

use super::{
    DefaultValue, Input, ModuleCall, Output, Pos, RequiredProvider, Resource, Summary, Validation,
};

/// The interface of one module directory from its files `(name, text)`; and
/// a note for each file that does not parse (the others are still read).
pub fn summarise<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Summary, Vec<String>) {
    // With no deadline it never gives up.
    summarise_until(files, None).unwrap_or_default()
}

/// The deadline passed before every file was parsed.
#[derive(Debug)]
pub struct TimeUp;

/// [`summarise`], giving up when `deadline` has passed before a file.
pub fn summarise_until<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
    deadline: Option<std::time::Instant>,
) -> Result<(Summary, Vec<String>), TimeUp> {
    let mut files: Vec<(&str, &str)> = files.into_iter().collect();
    // Terraform reads a directory's files in name order.
    files.sort_by(|a, b| a.0.cmp(b.0));
    let mut summary = Summary::default();
    let mut notes = Vec::new();
    let mut providers: BTreeMap<String, RequiredProvider> = BTreeMap::new();
    for (file, src) in files {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(TimeUp);
        }
        let body = match parse_body(src) {
            Ok(body) => body,
            Err(e) => {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or("").trim().to_string();
                notes.push(format!("{file}: not read, HCL parse error: {first}"));
                continue;
            }
        };
        let file = File { name: file, src };
        read_body(&file, &body, &mut summary, &mut providers);
    }
    // Providers that resources use without declaring them.
    for resource in summary.resources.iter().chain(&summary.data_sources) {
        providers
            .entry(resource.provider.clone())
            .or_insert_with(|| bare_provider(&resource.provider));
    }
    summary.required_providers = providers.into_values().collect();
    summary.inputs.sort_by(|a, b| a.name.cmp(&b.name));
    summary.outputs.sort_by(|a, b| a.name.cmp(&b.name));
    summary.module_calls.sort_by(|a, b| a.name.cmp(&b.name));
    for list in [&mut summary.resources, &mut summary.data_sources] {
        list.sort_by(|a, b| (&a.r#type, &a.name).cmp(&(&b.r#type, &b.name)));
    }
    Ok((summary, notes))
}

struct File<'a> {
    name: &'a str,
    src: &'a str,
}

impl File<'_> {
    /// The text an expression was parsed from, as written.
    fn source(&self, expr: &Expression) -> String {
        expr.span()
            .and_then(|r| self.src.get(r))
            .map(str::to_string)
            .unwrap_or_else(|| expr.to_string())
            .trim()
            .to_string()
    }

    fn pos(&self, block: &Block) -> Pos {
        let offset = block.span().map_or(0, |r| r.start);
        let line = self
            .src
            .get(..offset)
            .map_or(1, |s| s.matches('\n').count() + 1);
        Pos {
            file: self.name.to_string(),
            line,
        }
    }
}

/// The value of an expression with no variables or functions: a literal.
fn literal(expr: &Expression) -> Option<hcl::Value> {
    use hcl::eval::Evaluate;
    hcl::Expression::from(expr.clone())
        .evaluate(&hcl::eval::Context::new())
        .ok()
}

fn literal_string(expr: &Expression) -> Option<String> {
    match literal(expr)? {
        hcl::Value::String(s) => Some(s),
        _ => None,
    }
}

fn literal_bool(expr: &Expression) -> Option<bool> {
    match literal(expr)? {
        hcl::Value::Bool(b) => Some(b),
        _ => None,
    }
}

fn attr<'b>(body: &'b Body, key: &str) -> Option<&'b Expression> {
    body.get_attribute(key).map(|a| &a.value)
}

/// A string attribute: its value when literal, else its expression as written.
fn text(file: &File, body: &Body, key: &str) -> Option<String> {
    attr(body, key).map(|e| literal_string(e).unwrap_or_else(|| file.source(e)))
}

fn read_body(
    file: &File,
    body: &Body,
    summary: &mut Summary,
    providers: &mut BTreeMap<String, RequiredProvider>,
) {
    for block in body.blocks() {
        let labels: Vec<&str> = block.labels.iter().map(|l| l.as_str()).collect();
        match (block.ident.as_str(), labels.as_slice()) {
            ("variable", [name]) => summary.inputs.push(input(file, block, name)),
            ("output", [name]) => summary.outputs.push(Output {
                name: name.to_string(),
                description: text(file, &block.body, "description"),
                sensitive: attr(&block.body, "sensitive")
                    .and_then(literal_bool)
                    .unwrap_or(false),
                pos: file.pos(block),
            }),
            ("resource", [ty, name]) => summary.resources.push(resource(file, block, ty, name)),
            ("data", [ty, name]) => summary.data_sources.push(resource(file, block, ty, name)),
            ("module", [name]) => summary.module_calls.push(ModuleCall {
                name: name.to_string(),
                source: text(file, &block.body, "source").unwrap_or_default(),
                version: text(file, &block.body, "version"),
                pos: file.pos(block),
            }),
            ("provider", [name]) => {
                providers
                    .entry(name.to_string())
                    .or_insert_with(|| bare_provider(name));
            }
            ("terraform", []) => terraform(file, &block.body, summary, providers),
            _ => {}
        }
    }
}

fn input(file: &File, block: &Block, name: &str) -> Input {
    let body = &block.body;
    let default = attr(body, "default").map(|e| match literal(e) {
        Some(value) => DefaultValue::Value(serde_json::to_value(value).unwrap_or_default()),
        None => DefaultValue::Expression(file.source(e)),
    });
    Input {
        name: name.to_string(),
        r#type: attr(body, "type").map(|e| match e.as_str() {
            // A legacy quoted type: `type = "string"`.
            Some(quoted) => quoted.to_string(),
            None => file.source(e),
        }),
        description: text(file, body, "description"),
        required: default.is_none(),
        default,
        sensitive: attr(body, "sensitive")
            .and_then(literal_bool)
            .unwrap_or(false),
        nullable: attr(body, "nullable")
            .and_then(literal_bool)
            .unwrap_or(true),
        validations: body
            .get_blocks("validation")
            .map(|v| Validation {
                condition: attr(&v.body, "condition")
                    .map(|e| file.source(e))
                    .unwrap_or_default(),
                error_message: text(file, &v.body, "error_message"),
            })
            .collect(),
        deprecated: text(file, body, "deprecated"),
        pos: file.pos(block),
    }
}

fn resource(file: &File, block: &Block, ty: &str, name: &str) -> Resource {
    let provider = match attr(&block.body, "provider") {
        // `provider = aws.west`: the local name is before the alias.
        Some(e) => file
            .source(e)
            .split('.')
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        None => ty.split('_').next().unwrap_or(ty).to_string(),
    };
    Resource {
        r#type: ty.to_string(),
        name: name.to_string(),
        provider,
        pos: file.pos(block),
    }
}

fn bare_provider(name: &str) -> RequiredProvider {
    RequiredProvider {
        name: name.to_string(),
        source: None,
        version_constraints: Vec::new(),
        configuration_aliases: Vec::new(),
    }
}

fn terraform(
    file: &File,
    body: &Body,
    summary: &mut Summary,
    providers: &mut BTreeMap<String, RequiredProvider>,
) {
    if let Some(v) = text(file, body, "required_version") {
        summary.required_core.push(v);
    }
    for block in body.get_blocks("required_providers") {
        for attribute in block.body.attributes() {
            let name = attribute.key.as_str().to_string();
            let entry = providers
                .entry(name.clone())
                .or_insert_with(|| bare_provider(&name));
            match &attribute.value {
                // Terraform 0.12's form: `aws = "~> 3.0"`, a version constraint.
                Expression::String(constraint) => entry
                    .version_constraints
                    .push(constraint.value().to_string()),
                Expression::Object(object) => {
                    for (key, value) in object {
                        let key = match key {
                            ObjectKey::Ident(ident) => ident.as_str().to_string(),
                            ObjectKey::Expression(e) => {
                                literal_string(e).unwrap_or_else(|| file.source(e))
                            }
                        };
                        let expr = value.expr();
                        match key.as_str() {
                            "source" => {
                                entry.source =
                                    Some(literal_string(expr).unwrap_or_else(|| file.source(expr)))
                            }
                            "version" => entry
                                .version_constraints
                                .push(literal_string(expr).unwrap_or_else(|| file.source(expr))),
                            "configuration_aliases" => {
                                if let Expression::Array(aliases) = expr {
                                    entry
                                        .configuration_aliases
                                        .extend(aliases.iter().map(|a| file.source(a)));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                other => entry.version_constraints.push(file.source(other)),
            }
        }
    }
}
