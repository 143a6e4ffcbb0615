//! What each page shows, as askama templates (`shared/templates/ui/`):
//! plain data, escaped by the template engine. The one exception is a
//! README's HTML, sanitised at publish time (`tfreg_verify::module_docs`) and
//! marked `|safe` in one template.

use askama::Template;

use tfreg_model::docs::{DefaultValue, ModuleDocs, Summary};
use tfreg_store::catalog::listing::{Entry, Kind};

/// What every page's frame needs.
#[derive(Debug, Clone)]
pub struct Layout {
    pub title: String,
    pub hostname: String,
    pub css: &'static str,
    pub js: &'static str,
    /// A session is open (show sign-out).
    pub signed_in: bool,
    /// Whose session, and what it may do: `alice · read:*, publish:acme`
    /// (empty: not known).
    pub signed_in_as: String,
    /// Link to the cache's page: the principal may open it
    /// ([`crate::cached::may_see`]).
    pub cache_link: bool,
    /// The search box's text.
    pub query: String,
}

/// A provider or module in a list.
#[derive(Debug, Clone)]
pub struct Row {
    pub kind: &'static str,
    pub address: String,
    pub href: String,
    pub latest: Option<String>,
    pub deprecated: bool,
    pub versions: usize,
    pub description: String,
    pub updated: String,
}

impl Row {
    pub fn of(e: &Entry) -> Row {
        let (kind, href) = match e.kind {
            Kind::Module => ("module", format!("/ui/modules/{}", e.address)),
            Kind::Provider => ("provider", format!("/ui/providers/{}", e.address)),
        };
        Row {
            kind,
            address: e.address.clone(),
            href,
            latest: e.latest.clone(),
            deprecated: e.latest_deprecated,
            versions: e.versions,
            description: e.description.clone().unwrap_or_default(),
            updated: date(e.updated_at),
        }
    }
}

/// `2026-11-23` of a unix time.
pub fn date(unix: u64) -> String {
    tfreg_model::date::ymd(unix)
}

#[derive(Template)]
#[template(path = "ui/home.html")]
pub struct Home {
    pub layout: Layout,
    pub recent: Vec<Row>,
    pub namespaces: Vec<(String, usize)>,
    pub modules: usize,
    pub providers: usize,
}

#[derive(Template)]
#[template(path = "ui/search.html")]
pub struct Search {
    pub layout: Layout,
    pub results: Vec<Row>,
    pub kind: String,
    pub total: usize,
}

#[derive(Template)]
#[template(path = "ui/namespace.html")]
pub struct Namespace {
    pub layout: Layout,
    pub namespace: String,
    pub rows: Vec<Row>,
}

/// One version in a page's version list.
#[derive(Debug, Clone)]
pub struct VersionLink {
    pub version: String,
    pub href: String,
    pub current: bool,
    pub deprecated: Option<String>,
    pub yanked: bool,
}

/// A release's lifecycle marks, as a page shows them.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    pub deprecated: Option<String>,
    pub yanked: Option<String>,
}

#[derive(Template)]
#[template(path = "ui/module.html")]
pub struct Module {
    pub layout: Layout,
    pub address: String,
    pub namespace: String,
    pub version: String,
    pub published: String,
    pub marks: Marks,
    pub usage: String,
    /// Its `oci://` source for OpenTofu (issue 40), when its zip is made.
    pub oci_source: Option<String>,
    pub versions: Vec<VersionLink>,
    pub docs: Option<DocsView>,
    /// Its downloads (`None`: the counts could not be read).
    pub downloads: Option<crate::usage::UsageView>,
}

/// A module version's docs, ready to show.
#[derive(Debug, Clone)]
pub struct DocsView {
    pub description: String,
    pub readme_html: Option<String>,
    pub root: SummaryView,
    pub submodules: Vec<(String, SummaryView)>,
    pub examples: Vec<(String, SummaryView)>,
    pub notes: Vec<String>,
}

/// One module directory's interface.
#[derive(Debug, Clone)]
pub struct SummaryView {
    pub inputs: Vec<InputView>,
    pub outputs: Vec<(String, String, bool)>,
    pub resources: Vec<(String, String)>,
    pub data_sources: Vec<(String, String)>,
    pub module_calls: Vec<(String, String, String)>,
    pub providers: Vec<(String, String, String)>,
    pub required_core: String,
}

#[derive(Debug, Clone)]
pub struct InputView {
    pub name: String,
    pub ty: String,
    pub default: String,
    pub description: String,
    pub required: bool,
    pub sensitive: bool,
    pub nullable: bool,
    pub validations: Vec<String>,
}

impl DocsView {
    pub fn of(docs: ModuleDocs) -> DocsView {
        DocsView {
            description: docs.description.unwrap_or_default(),
            readme_html: docs.readme_html,
            root: SummaryView::of(&docs.root),
            submodules: docs
                .submodules
                .iter()
                .map(|(n, s)| (n.clone(), SummaryView::of(s)))
                .collect(),
            examples: docs
                .examples
                .iter()
                .map(|(n, s)| (n.clone(), SummaryView::of(s)))
                .collect(),
            notes: docs.notes,
        }
    }
}

impl SummaryView {
    pub fn of(s: &Summary) -> SummaryView {
        SummaryView {
            inputs: s
                .inputs
                .iter()
                .map(|i| InputView {
                    name: i.name.clone(),
                    ty: i.r#type.clone().unwrap_or_else(|| "any".into()),
                    default: match &i.default {
                        None => String::new(),
                        Some(DefaultValue::Value(v)) => {
                            serde_json::to_string_pretty(v).unwrap_or_default()
                        }
                        Some(DefaultValue::Expression(e)) => e.clone(),
                    },
                    description: i.description.clone().unwrap_or_default(),
                    required: i.required,
                    sensitive: i.sensitive,
                    nullable: i.nullable,
                    validations: i
                        .validations
                        .iter()
                        .map(|v| match &v.error_message {
                            Some(m) => m.clone(),
                            None => v.condition.clone(),
                        })
                        .collect(),
                })
                .collect(),
            outputs: s
                .outputs
                .iter()
                .map(|o| {
                    (
                        o.name.clone(),
                        o.description.clone().unwrap_or_default(),
                        o.sensitive,
                    )
                })
                .collect(),
            resources: s
                .resources
                .iter()
                .map(|r| (r.r#type.clone(), r.name.clone()))
                .collect(),
            data_sources: s
                .data_sources
                .iter()
                .map(|r| (r.r#type.clone(), r.name.clone()))
                .collect(),
            module_calls: s
                .module_calls
                .iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        m.source.clone(),
                        m.version.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            providers: s
                .required_providers
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        p.source.clone().unwrap_or_default(),
                        p.version_constraints.join(", "),
                    )
                })
                .collect(),
            required_core: s.required_core.join(", "),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
            && self.outputs.is_empty()
            && self.resources.is_empty()
            && self.data_sources.is_empty()
            && self.module_calls.is_empty()
            && self.providers.is_empty()
    }
}

/// One platform of a provider release.
#[derive(Debug, Clone)]
pub struct PlatformView {
    pub os: String,
    pub arch: String,
    pub filename: String,
    pub size: String,
    pub hashes: Vec<String>,
}

#[derive(Template)]
#[template(path = "ui/provider.html")]
pub struct Provider {
    pub layout: Layout,
    pub address: String,
    pub namespace: String,
    pub version: String,
    pub published: String,
    pub marks: Marks,
    pub protocols: String,
    pub key_id: String,
    pub platforms: Vec<PlatformView>,
    pub required_providers: String,
    /// OpenTofu's `oci_mirror` block for it (issue 40).
    pub oci_mirror: String,
    pub lock_entry: String,
    pub versions: Vec<VersionLink>,
    /// Its downloads (`None`: the counts could not be read).
    pub downloads: Option<crate::usage::UsageView>,
}

#[derive(Template)]
#[template(path = "ui/sign_in.html")]
pub struct SignIn {
    pub layout: Layout,
    pub next: String,
    pub error: String,
    pub signed_out: bool,
    /// "Sign in with NAME"'s link, where an identity provider is
    /// configured; empty where not.
    pub sso_href: String,
    /// The identity provider's name on that link.
    pub sso_name: String,
}

#[derive(Template)]
#[template(path = "ui/error.html")]
pub struct ErrorPage {
    pub layout: Layout,
    pub status: u16,
    pub heading: String,
    pub message: String,
}

/// `1.5 MB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} KB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_sizes() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_795_392_000), "2026-11-23");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(size(999), "999 B");
        assert_eq!(size(6_800_000), "6.8 MB");
    }
}
