use super::*;

/// A module laid out as the registry's standard structure asks, with the
/// constructs real modules use (in the style of terraform-aws-modules/vpc).
const VARIABLES_TF: &str = r#"
variable "name" {
  description = "Name to be used on all the resources as identifier"
  type        = string
}

variable "cidr" {
  description = <<-EOT
    The IPv4 CIDR block for the VPC.
    Ignored when `use_ipam_pool` is true.
  EOT
  type    = string
  default = "10.0.0.0/16"

  validation {
    condition     = can(cidrhost(var.cidr, 0))
    error_message = "Must be a valid IPv4 CIDR block."
  }
  validation {
    condition     = !startswith(var.cidr, "0.")
    error_message = "Must not start with 0."
  }
}

variable "subnets" {
  type = map(object({
    cidr_block = string
    az         = optional(string)
    public     = optional(bool, false)
    tags       = optional(map(string), {})
  }))
  default = {}
}

variable "master_password" {
  type      = string
  sensitive = true
  nullable  = false
}

variable "kms_key_arn" {
  type    = string
  default = null
}

variable "legacy" {
  type    = "list"
  default = ["a", "b"]
}

variable "tags" {
  description = "A map of tags"
  type        = map(string)
  default     = { Terraform = "true", "kubernetes.io/role" = "elb" }
}

variable "computed_default" {
  default    = "${upper("x")}-y"
  deprecated = "Use name instead."
}
"#;

const MAIN_TF: &str = r#"
terraform {
  required_version = ">= 1.3"
  required_providers {
    aws = {
      source                = "hashicorp/aws"
      version               = ">= 5.0, < 7.0"
      configuration_aliases = [aws.peer]
    }
    random = "~> 3.0"
  }
}

resource "aws_vpc" "this" {
  count      = var.create ? 1 : 0
  cidr_block = var.cidr
  tags       = merge({ Name = var.name }, var.tags)
}

resource "aws_vpc_peering_connection_accepter" "peer" {
  provider = aws.peer
  vpc_peering_connection_id = "pcx-1"
}

resource "random_id" "suffix" {
  byte_length = 4
}

resource "null_resource" "noop" {}

data "aws_availability_zones" "available" {
  state = "available"
}

module "flow_log" {
  source  = "terraform-aws-modules/vpc/aws//modules/flow-log"
  version = "~> 5.0"
  for_each = { for k, v in var.subnets : k => v if v.public }
}

locals {
  azs = [for az in data.aws_availability_zones.available.names : az]
}
"#;

const OUTPUTS_TF: &str = r#"
output "vpc_id" {
  description = "The ID of the VPC"
  value       = try(aws_vpc.this[0].id, null)
}

output "password" {
  value     = var.master_password
  sensitive = true
}
"#;

fn module() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("variables.tf", VARIABLES_TF.as_bytes()),
        ("main.tf", MAIN_TF.as_bytes()),
        ("outputs.tf", OUTPUTS_TF.as_bytes()),
        (
            "README.md",
            b"# VPC\n\nCreates a VPC.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n" as &[u8],
        ),
        (
            "modules/flow-log/main.tf",
            b"variable \"vpc_id\" {\n  type = string\n}\noutput \"id\" {\n  value = var.vpc_id\n}\n"
                as &[u8],
        ),
        ("modules/flow-log/README.md", b"# sub\n" as &[u8]),
        (
            "examples/simple/main.tf",
            b"module \"vpc\" {\n  source = \"../../\"\n  name   = \"simple\"\n}\n" as &[u8],
        ),
        (
            "examples/simple/terraform.tfvars",
            b"name = \"x\"\n" as &[u8],
        ),
        (
            "modules/flow-log/nested/deeper/x.tf",
            b"variable \"ignored\" {}\n" as &[u8],
        ),
        ("scripts/setup.sh", b"#!/bin/sh\n" as &[u8]),
    ]
}

fn input<'a>(docs: &'a Summary, name: &str) -> &'a Input {
    docs.inputs
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no input {name} in {:?}", docs.inputs))
}

#[test]
fn inputs_with_types_defaults_and_validations_as_written() {
    let docs = extract(module());
    assert!(docs.notes.is_empty(), "{:?}", docs.notes);
    let root = &docs.root;
    let names: Vec<&str> = root.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cidr",
            "computed_default",
            "kms_key_arn",
            "legacy",
            "master_password",
            "name",
            "subnets",
            "tags"
        ]
    );

    let name = input(root, "name");
    assert!(name.required);
    assert_eq!(name.default, None);
    assert_eq!(name.r#type.as_deref(), Some("string"));
    assert_eq!(
        name.description.as_deref(),
        Some("Name to be used on all the resources as identifier")
    );
    assert_eq!(
        name.pos,
        Pos {
            file: "variables.tf".into(),
            line: 2
        }
    );

    let cidr = input(root, "cidr");
    assert!(!cidr.required);
    assert_eq!(
        cidr.default,
        Some(DefaultValue::Value(serde_json::json!("10.0.0.0/16")))
    );
    // A heredoc description, its indentation removed (`<<-`).
    assert_eq!(
        cidr.description.as_deref(),
        Some("The IPv4 CIDR block for the VPC.\nIgnored when `use_ipam_pool` is true.\n")
    );
    assert_eq!(cidr.validations.len(), 2);
    assert_eq!(cidr.validations[0].condition, "can(cidrhost(var.cidr, 0))");
    assert_eq!(
        cidr.validations[0].error_message.as_deref(),
        Some("Must be a valid IPv4 CIDR block.")
    );
    assert_eq!(
        cidr.validations[1].condition,
        "!startswith(var.cidr, \"0.\")"
    );

    // A complex type exactly as written, optional() attributes included.
    let subnets = input(root, "subnets");
    assert_eq!(
        subnets.r#type.as_deref(),
        Some(
            "map(object({\n    cidr_block = string\n    az         = optional(string)\n    public     = optional(bool, false)\n    tags       = optional(map(string), {})\n  }))"
        )
    );
    assert_eq!(
        subnets.default,
        Some(DefaultValue::Value(serde_json::json!({})))
    );

    let password = input(root, "master_password");
    assert!(password.required && password.sensitive && !password.nullable);

    // `default = null` is a default (terraform-config-inspect and Terraform agree).
    let kms = input(root, "kms_key_arn");
    assert!(!kms.required);
    assert_eq!(
        kms.default,
        Some(DefaultValue::Value(serde_json::Value::Null))
    );
    assert!(kms.nullable);

    // Terraform 0.11's quoted type.
    assert_eq!(input(root, "legacy").r#type.as_deref(), Some("list"));

    let tags = input(root, "tags");
    assert_eq!(
        tags.default,
        Some(DefaultValue::Value(
            serde_json::json!({ "Terraform": "true", "kubernetes.io/role": "elb" })
        ))
    );

    // Not a literal: shown as written.
    let computed = input(root, "computed_default");
    assert_eq!(
        computed.default,
        Some(DefaultValue::Expression("\"${upper(\"x\")}-y\"".into()))
    );
    assert_eq!(computed.r#type, None);
    assert_eq!(computed.deprecated.as_deref(), Some("Use name instead."));
}

#[test]
fn outputs_resources_module_calls_and_requirements() {
    let docs = extract(module());
    let root = &docs.root;
    let outputs: Vec<(&str, bool, Option<&str>)> = root
        .outputs
        .iter()
        .map(|o| (o.name.as_str(), o.sensitive, o.description.as_deref()))
        .collect();
    assert_eq!(
        outputs,
        [
            ("password", true, None),
            ("vpc_id", false, Some("The ID of the VPC"))
        ]
    );

    let resources: Vec<(&str, &str, &str)> = root
        .resources
        .iter()
        .map(|r| (r.r#type.as_str(), r.name.as_str(), r.provider.as_str()))
        .collect();
    assert_eq!(
        resources,
        [
            ("aws_vpc", "this", "aws"),
            ("aws_vpc_peering_connection_accepter", "peer", "aws"),
            ("null_resource", "noop", "null"),
            ("random_id", "suffix", "random"),
        ]
    );
    assert_eq!(root.data_sources.len(), 1);
    assert_eq!(root.data_sources[0].r#type, "aws_availability_zones");

    assert_eq!(root.module_calls.len(), 1);
    let call = &root.module_calls[0];
    assert_eq!(
        call.source,
        "terraform-aws-modules/vpc/aws//modules/flow-log"
    );
    assert_eq!(call.version.as_deref(), Some("~> 5.0"));

    assert_eq!(root.required_core, [">= 1.3"]);
    let providers: Vec<(&str, Option<&str>, Vec<&str>)> = root
        .required_providers
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.source.as_deref(),
                p.version_constraints.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        providers,
        [
            ("aws", Some("hashicorp/aws"), vec![">= 5.0, < 7.0"]),
            // Used by a resource, declared nowhere.
            ("null", None, vec![]),
            // Terraform 0.12's `name = "constraint"`.
            ("random", None, vec!["~> 3.0"]),
        ]
    );
    assert_eq!(
        root.required_providers[0].configuration_aliases,
        ["aws.peer"]
    );
}

#[test]
fn submodules_and_examples_by_the_standard_layout() {
    let docs = extract(module());
    assert_eq!(docs.submodules.keys().collect::<Vec<_>>(), ["flow-log"]);
    let sub = &docs.submodules["flow-log"];
    assert_eq!(sub.inputs.len(), 1);
    assert_eq!(sub.inputs[0].name, "vpc_id");
    assert_eq!(sub.outputs[0].name, "id");
    assert_eq!(docs.examples.keys().collect::<Vec<_>>(), ["simple"]);
    assert_eq!(docs.examples["simple"].module_calls[0].source, "../../");
    // Deeper directories are not modules of the layout; nothing of them is read.
    assert!(docs.root.inputs.iter().all(|i| i.name != "ignored"));
    let readme = docs.readme_html.as_deref().unwrap();
    assert!(readme.contains("<h1>VPC</h1>"), "{readme}");
    assert!(readme.contains("<table>"), "{readme}");
}

#[test]
fn a_module_without_readme_or_variables() {
    let docs = extract([("main.tf", b"resource \"null_resource\" \"x\" {}\n" as &[u8])]);
    assert_eq!(docs.readme_html, None);
    assert!(docs.root.inputs.is_empty() && docs.root.outputs.is_empty());
    assert_eq!(docs.root.resources.len(), 1);
    assert_eq!(extract([]), ModuleDocs::default());
}

#[test]
fn a_file_that_does_not_parse_is_noted_and_the_rest_is_read() {
    let docs = extract([
        ("broken.tf", b"variable \"a\" {\n  type = \n}\n" as &[u8]),
        ("ok.tf", b"variable \"b\" {}\n" as &[u8]),
        ("binary.tf", &[0xffu8, 0xfe, 0x00][..]),
        ("override.tf", b"variable \"b\" { default = 1 }\n" as &[u8]),
        ("modules/x/bad.tf", b"output {" as &[u8]),
    ]);
    assert_eq!(docs.root.inputs.len(), 1);
    assert_eq!(docs.root.inputs[0].name, "b");
    assert!(
        docs.root.inputs[0].required,
        "the override file is not applied"
    );
    assert_eq!(docs.notes.len(), 4, "{:?}", docs.notes);
    assert!(
        docs.notes
            .iter()
            .any(|n| n.starts_with("broken.tf: not read, HCL parse error"))
    );
    assert!(
        docs.notes
            .iter()
            .any(|n| n.starts_with("binary.tf: not read (not UTF-8)"))
    );
    assert!(
        docs.notes
            .iter()
            .any(|n| n.starts_with("override.tf: an override file"))
    );
    assert!(
        docs.notes
            .iter()
            .any(|n| n.starts_with("modules/x/bad.tf: not read"))
    );
}

#[test]
fn an_oversized_file_is_not_read() {
    let big = format!(
        "variable \"a\" {{}}\n{}",
        "# pad\n".repeat(MAX_FILE_BYTES / 6 + 1)
    );
    let docs = extract([("big.tf", big.as_bytes())]);
    assert!(docs.root.inputs.is_empty());
    assert!(
        docs.notes[0].starts_with("big.tf: not read ("),
        "{:?}",
        docs.notes
    );
}

#[test]
fn a_hostile_readme_keeps_its_text_and_loses_everything_that_runs() {
    let hostile = r#"# Title

<script>window.__xss = 1</script>
<img src="x" onerror="window.__xss = 1">
<iframe src="https://evil.example"></iframe>
<a href="javascript:window.__xss=1">click</a>
[md link](javascript:alert(1))
<div onclick="alert(1)" style="position:fixed">styled</div>
<svg onload="alert(1)"><circle /></svg>
<form action="https://evil.example"><input name="token"></form>
<object data="x.swf"></object>
<a href="https://example.com/docs">docs</a>

Markdown links: [md link 2](javascript:alert(1)) [relative](./docs/usage.md) [anchor](#usage)

<style>body { display: none }</style>
<details><summary>More</summary>hidden text</details>

```hcl
module "x" {}
```
"#;
    let html = render_markdown(hostile);
    for gone in [
        // A link inside a raw HTML block stays text (CommonMark): harmless.
        "<script",
        "onerror",
        "<iframe",
        "href=\"javascript",
        "onclick",
        "style=",
        "<svg",
        "onload",
        "<form",
        "<object",
        "<style",
        "<img",
        "href=\"./docs",
        "window.__xss",
    ] {
        assert!(!html.contains(gone), "{gone} survived:\n{html}");
    }
    for kept in [
        "<h1>Title</h1>",
        "styled",
        "click",
        "md link",
        "md link 2",
        "relative",
        r#"<a href="https://example.com/docs" rel="noopener noreferrer nofollow">docs</a>"#,
        r##"<a href="#usage" rel="noopener noreferrer nofollow">anchor</a>"##,
        "<details><summary>More</summary>hidden text</details>",
        r#"<code class="language-hcl">module "x" {}"#,
    ] {
        assert!(html.contains(kept), "{kept} is missing:\n{html}");
    }
}

/// Task lists keep their checkboxes, as pulldown-cmark renders them
/// (disabled); any other `<input>` (a fake "enter your token" box, a
/// password field, an image button, a hidden field) is at most such a
/// checkbox: no text box, no name, no value, no form target.
#[test]
fn inputs_are_only_the_checkboxes_of_task_lists() {
    let html = render_markdown("- [x] done\n- [ ] to do\n");
    assert_eq!(html.matches("<input").count(), 2, "{html}");
    assert_eq!(html.matches(r#"type="checkbox""#).count(), 2, "{html}");
    assert_eq!(html.matches("disabled").count(), 2, "{html}");
    assert_eq!(html.matches("checked").count(), 1, "{html}");

    let hostile = r#"<p>Paste your registry token:
<input type="text" name="token" placeholder="tfreg_..." value="x" autofocus>
<input type="password" name="secret">
<input name="untyped">
<input type="image" src="https://evil.example/x.png" formaction="https://evil.example">
<input type="hidden" name="h" value="v">
<input type="submit" value="Sign in">
<input type="checkbox" checked onclick="alert(1)" form="f" name="c">
</p>
"#;
    let html = render_markdown(hostile);
    assert!(html.contains("Paste your registry token"), "{html}");
    let inputs: Vec<&str> = html
        .split("<input")
        .skip(1)
        .map(|rest| rest.split('>').next().unwrap())
        .collect();
    assert_eq!(inputs.len(), 7, "{html}");
    for attrs in inputs {
        assert!(attrs.contains(r#"type="checkbox""#), "{attrs}");
        assert!(attrs.contains("disabled"), "{attrs}");
        for gone in [
            "text",
            "password",
            "image",
            "hidden",
            "submit",
            "name=",
            "value=",
            "placeholder",
            "autofocus",
            "src=",
            "formaction",
            "onclick",
            "form=",
        ] {
            assert!(!attrs.contains(gone), "{gone} survived in <input{attrs}>");
        }
    }
}

#[test]
fn docs_round_trip_through_json() {
    let docs = extract(module());
    let json = serde_json::to_string(&docs).unwrap();
    assert_eq!(serde_json::from_str::<ModuleDocs>(&json).unwrap(), docs);
}

#[test]
fn the_description_is_the_readmes_first_paragraph_as_text() {
    let md = "# VPC\n\n[![badge](https://x/b.svg)](https://x)\n\n<div>raw</div>\n\nCreates a **VPC** with `subnets`\nand routes.\n\nMore.";
    // A badge-only paragraph has link text but no words of its own: it is
    // the first paragraph all the same, as on GitHub; the raw HTML block is not.
    assert_eq!(first_paragraph(md).as_deref(), Some("badge"));
    assert_eq!(
        first_paragraph("# T\n\nCreates a **VPC** with `subnets`\nand routes.\n\nMore.").as_deref(),
        Some("Creates a VPC with subnets and routes.")
    );
    assert_eq!(first_paragraph("# Only a title\n"), None);
    let long = "word ".repeat(200);
    let d = first_paragraph(&long).unwrap();
    assert_eq!(d.chars().count(), readme::MAX_DESCRIPTION_CHARS);
    assert!(d.ends_with('…'));
    let docs = extract([
        ("README.md", b"# M\n\nMakes things.\n" as &[u8]),
        ("main.tf", b"" as &[u8]),
    ]);
    assert_eq!(docs.description.as_deref(), Some("Makes things."));
}

#[test]
fn reads_names_exactly_the_files_extract_reads() {
    for path in [
        "main.tf",
        "./variables.tf",
        "README.md",
        "readme",
        "modules/a/main.tf",
        "examples/b/main.tf",
    ] {
        assert!(reads(path), "{path}");
    }
    for path in [
        "modules/a/README.md",
        "modules/a/b/main.tf",
        "scripts/x.tf",
        "main.tf.json",
        "LICENSE",
        "docs/README.md",
    ] {
        assert!(!reads(path), "{path}");
    }
}

#[test]
fn stored_docs_fit_their_item_leaving_out_the_largest_parts_first() {
    let docs = extract(module());
    let whole = docs.stored(usize::MAX);
    assert_eq!(serde_json::from_slice::<ModuleDocs>(&whole).unwrap(), docs);
    // One byte short: the README (the largest part) goes, with a note.
    let fitted: ModuleDocs = serde_json::from_slice(&docs.stored(whole.len() - 1)).unwrap();
    assert_eq!(fitted.readme_html, None);
    assert_eq!(fitted.root, docs.root);
    assert_eq!(fitted.submodules, docs.submodules);
    assert!(
        fitted
            .notes
            .iter()
            .any(|n| n.starts_with("the README: left out")),
        "{:?}",
        fitted.notes
    );
    let tiny: ModuleDocs = serde_json::from_slice(&docs.stored(10)).unwrap();
    assert!(tiny.root.inputs.is_empty());
    assert_eq!(tiny.notes.len(), 1);
}

// Bounds on what one module's docs may cost (issue 35: an 8.9 MB module
// expanding to 479 MB of `.tf` cost 5.1 s of CPU and 72 MB at publish).

#[test]
fn past_the_time_bound_only_the_readme_is_shown_and_a_note_says_why() {
    let files = [
        ("README.md", b"# Net\n\nA network.\n" as &[u8]),
        ("main.tf", b"variable \"a\" {}\n"),
    ];
    let late = extract_until(files, None, std::time::Instant::now());
    assert_eq!(late.unread, Some(Unread::Time));
    assert!(late.docs.root.inputs.is_empty());
    assert_eq!(late.docs.description.as_deref(), Some("A network."));
    assert_eq!(
        late.docs.notes,
        [
            "The module's docs were not read in full: reading its .tf files took longer than 2s; the inputs, outputs and resources are not shown."
        ]
    );
    let in_time = extract_until(
        files,
        None,
        std::time::Instant::now() + std::time::Duration::from_secs(60),
    );
    assert_eq!(in_time.unread, None);
    assert_eq!(in_time.docs.root.inputs.len(), 1);
    assert_eq!(in_time.docs, extract(files));
}

#[test]
fn a_bound_passed_in_the_archive_reads_no_tf_at_all() {
    let files = [
        ("README.md", b"# Net\n\nA network.\n" as &[u8]),
        ("main.tf", b"variable \"a\" {}\n"),
    ];
    for (unread, why) in [
        (
            Unread::Bytes,
            "its .tf files pass 2097152 bytes in all; the inputs, outputs and resources are not shown",
        ),
        (
            Unread::Files,
            "it has more than 500 .tf files; the inputs, outputs and resources are not shown",
        ),
    ] {
        let got = extract_bounded(files, Some(unread.clone()));
        assert_eq!(got.unread, Some(unread));
        assert!(got.docs.root.inputs.is_empty());
        assert!(got.docs.readme_html.is_some());
        assert_eq!(
            got.docs.notes,
            [format!("The module's docs were not read in full: {why}.")]
        );
    }
}
