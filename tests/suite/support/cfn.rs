//! CloudFormation templates as data: template.yaml's short-form intrinsics
//! (`!GetAtt`, `!If`, ...) read into the long JSON form a transformed
//! template has (`{"Fn::GetAtt": [...]}`), and either evaluated for one
//! set of parameters: conditions decided, `Fn::If` chosen, `AWS::NoValue`
//! dropped, parameters and pseudo parameters substituted, and the stack's
//! own resources named symbolically (`arn:Table`, `arn:Bucket/archives/*`,
//! `ref:FillFunction`), as a policy names them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The pseudo parameters a rehearsed stack has.
pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";

/// template.yaml, its intrinsics in the long form.
pub fn template_yaml() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml"))
        .expect("template.yaml at the repository root");
    let yaml: serde_norway::Value = serde_norway::from_str(&text).expect("template.yaml is YAML");
    long_form(&yaml)
}

/// A YAML value with its tags as the JSON intrinsics they stand for.
pub fn long_form(v: &serde_norway::Value) -> Value {
    use serde_norway::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => json!(b),
        Y::Number(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        Y::String(s) => json!(s),
        Y::Sequence(items) => Value::Array(items.iter().map(long_form).collect()),
        Y::Mapping(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.as_str().expect("string keys").to_string(), long_form(v)))
                .collect(),
        ),
        Y::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            let arg = long_form(&t.value);
            match (name, &arg) {
                ("Ref" | "Condition", _) => json!({ name: arg }),
                ("GetAtt", Value::String(s)) => {
                    let (id, attr) = s.split_once('.').expect("!GetAtt Resource.Attribute");
                    json!({"Fn::GetAtt": [id, attr]})
                }
                _ => json!({ format!("Fn::{name}"): arg }),
            }
        }
    }
}

/// One set of parameters, and the template's conditions decided for it.
pub struct Stack<'t> {
    pub template: &'t Value,
    pub region: String,
    pub account: String,
    pub params: BTreeMap<String, String>,
    pub conditions: BTreeMap<String, bool>,
}

impl<'t> Stack<'t> {
    /// The template with its parameters' defaults, then `given`.
    pub fn new(template: &'t Value, given: &[(&str, &str)]) -> Stack<'t> {
        Self::at(template, given, REGION, ACCOUNT)
    }

    /// [`Stack::new`] in `region` of `account`.
    pub fn at(
        template: &'t Value,
        given: &[(&str, &str)],
        region: &str,
        account: &str,
    ) -> Stack<'t> {
        let mut params: BTreeMap<String, String> = template["Parameters"]
            .as_object()
            .map(|p| {
                p.iter()
                    .filter_map(|(name, p)| {
                        let default = match &p["Default"] {
                            Value::String(s) => s.clone(),
                            Value::Number(n) => n.to_string(),
                            _ => return None,
                        };
                        Some((name.clone(), default))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (k, v) in given {
            params.insert(k.to_string(), v.to_string());
        }
        let mut stack = Stack {
            template,
            region: region.to_string(),
            account: account.to_string(),
            params,
            conditions: BTreeMap::new(),
        };
        let names: Vec<String> = template["Conditions"]
            .as_object()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        for name in names {
            let holds = stack.condition(&name);
            stack.conditions.insert(name, holds);
        }
        stack
    }

    fn condition(&self, name: &str) -> bool {
        if let Some(known) = self.conditions.get(name) {
            return *known;
        }
        let expr = &self.template["Conditions"][name];
        assert!(!expr.is_null(), "no condition {name}");
        self.truth(expr)
    }

    fn truth(&self, v: &Value) -> bool {
        let (op, args) = single(v).unwrap_or_else(|| panic!("not a condition: {v}"));
        let list = || args.as_array().expect("a condition's arguments");
        match op {
            "Fn::Not" => !self.truth(&list()[0]),
            "Fn::And" => list().iter().all(|c| self.truth(c)),
            "Fn::Or" => list().iter().any(|c| self.truth(c)),
            "Fn::Equals" => self.eval(&list()[0]) == self.eval(&list()[1]),
            "Condition" => self.condition(args.as_str().unwrap()),
            other => panic!("cannot decide {other}"),
        }
    }

    /// Whether resource `id` exists in this stack (its `Condition`).
    pub fn exists(&self, id: &str) -> bool {
        let r = &self.template["Resources"][id];
        !r.is_null() && r["Condition"].as_str().is_none_or(|c| self.condition(c))
    }

    /// `v` as CloudFormation makes it for this stack (`None`: `AWS::NoValue`).
    pub fn eval(&self, v: &Value) -> Option<Value> {
        if let Some((op, arg)) = single(v) {
            match op {
                "Ref" => return self.reference(arg.as_str().expect("Ref of a name")),
                "Fn::GetAtt" => {
                    let parts: Vec<&str> = arg
                        .as_array()
                        .expect("Fn::GetAtt [id, attribute]")
                        .iter()
                        .map(|p| p.as_str().unwrap())
                        .collect();
                    return Some(json!(attribute(parts[0], parts[1])));
                }
                "Fn::If" => {
                    let args = arg.as_array().expect("Fn::If [condition, then, else]");
                    let chosen = self.condition(args[0].as_str().unwrap());
                    return self.eval(&args[if chosen { 1 } else { 2 }]);
                }
                "Fn::Sub" => return Some(json!(self.sub(arg))),
                "Fn::Join" => {
                    let args = arg.as_array().unwrap();
                    let parts: Vec<String> = self
                        .eval(&args[1])
                        .and_then(|v| v.as_array().cloned())
                        .unwrap_or_default()
                        .iter()
                        .map(text)
                        .collect();
                    return Some(json!(parts.join(args[0].as_str().unwrap())));
                }
                "Fn::Split" => {
                    let args = arg.as_array().unwrap();
                    let whole = text(&self.eval(&args[1]).unwrap_or_default());
                    let parts: Vec<&str> = whole.split(args[0].as_str().unwrap()).collect();
                    return Some(json!(parts));
                }
                "Fn::Select" => {
                    let args = arg.as_array().unwrap();
                    let at = text(&args[0]).parse::<usize>().unwrap();
                    let list = self.eval(&args[1]).unwrap_or_default();
                    return list.get(at).cloned();
                }
                _ => {}
            }
        }
        Some(match v {
            Value::Array(items) => {
                Value::Array(items.iter().filter_map(|i| self.eval(i)).collect())
            }
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), self.eval(v)?)))
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        })
    }

    fn reference(&self, name: &str) -> Option<Value> {
        Some(json!(match name {
            "AWS::NoValue" => return None,
            "AWS::Region" => self.region.clone(),
            "AWS::AccountId" => self.account.clone(),
            "AWS::Partition" => "aws".to_string(),
            "AWS::URLSuffix" => "amazonaws.com".to_string(),
            "AWS::StackName" => "tfreg".to_string(),
            "AWS::StackId" => format!(
                "arn:aws:cloudformation:{}:{}:stack/tfreg/id",
                self.region, self.account
            ),
            param if self.params.contains_key(param) => self.params[param].clone(),
            resource => format!("ref:{resource}"),
        }))
    }

    fn sub(&self, arg: &Value) -> String {
        let (text_, vars) = match arg {
            Value::String(s) => (s.as_str(), BTreeMap::new()),
            Value::Array(args) => (
                args[0].as_str().unwrap(),
                args[1]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), text(&self.eval(v).unwrap_or_default())))
                    .collect(),
            ),
            other => panic!("Fn::Sub {other}"),
        };
        let mut out = String::new();
        let mut rest = text_;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find('}').expect("closing brace") + at;
            let name = &rest[at + 2..end];
            let value = match vars.get(name) {
                Some(v) => v.clone(),
                None => match name.split_once('.') {
                    Some((id, attr)) => attribute(id, attr),
                    None => text(&self.reference(name).unwrap_or_default()),
                },
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// A resource's attribute, symbolically: `arn:Id` for its ARN.
fn attribute(id: &str, attr: &str) -> String {
    match attr {
        "Arn" => format!("arn:{id}"),
        other => format!("{id}.{other}"),
    }
}

/// A value as text (a string, or a number's digits).
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The one key and its value of an intrinsic's object.
fn single(v: &Value) -> Option<(&str, &Value)> {
    let m = v.as_object()?;
    if m.len() != 1 {
        return None;
    }
    let (k, v) = m.iter().next()?;
    (k == "Ref" || k == "Condition" || k.starts_with("Fn::")).then_some((k.as_str(), v))
}
