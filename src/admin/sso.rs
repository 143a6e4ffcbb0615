//! `tfreg sso map|unmap|list` and `tfreg trust add|list|remove`: who gets
//! which token by signing in (identity-provider groups), and which CI jobs
//! may publish to a namespace (trust policies), through the admin API (a
//! registry's URL, or the stores as the operator: [`super::Where`]).

use std::collections::BTreeMap;

use clap::{Args, Subcommand, ValueEnum};
use tfreg_model::protocol::{
    AddedTrust, MappedGroup, MappingList, RemovedTrust, TrustList, UnmappedGroup,
};
use tfreg_model::router::AdminRoute;
use tfreg_model::sso::{GroupMapping, Namespaces, Unmap};
use tfreg_model::text::escaped;
use tfreg_model::token::Scope;
use tfreg_model::trust::{IssuerKind, TrustPolicy, TrustRecord, check_policy_id};

use super::{ScopeArg, Where, WhereArgs, namespace, when};
use crate::cli_error::Result;

#[derive(Subcommand)]
pub enum SsoCommand {
    /// Give members of an identity-provider group a scope on namespaces when
    /// they sign in (replaces the group's mapping).
    Map(MapArgs),
    /// Remove a group's mapping (tokens already issued stay until they expire).
    Unmap(UnmapArgs),
    /// List group mappings: group, scope, namespaces.
    List(WhereArgs),
}

#[derive(Args)]
pub struct MapArgs {
    /// The group as the identity provider sends it (Keycloak: a path such as /acme/platform).
    group: String,
    /// read, publish or admin.
    #[arg(long, value_enum)]
    scope: ScopeArg,
    /// A namespace the group gets (repeatable); default: every namespace.
    #[arg(long)]
    namespace: Vec<String>,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct UnmapArgs {
    group: String,
    #[command(flatten)]
    r#where: Where,
}

fn namespaces(n: &Namespaces) -> String {
    match n {
        Namespaces::All => "*".into(),
        Namespaces::Only(names) => names.join(","),
    }
}

fn print_mappings(list: &MappingList) {
    if list.mappings.is_empty() {
        eprintln!("no group mappings: nobody gets a token by signing in");
        return;
    }
    println!("{:<40}  {:<8}  NAMESPACES", "GROUP", "SCOPE");
    for m in &list.mappings {
        println!(
            "{:<40}  {:<8}  {}",
            escaped(m.group()),
            m.scope().as_str(),
            namespaces(m.namespaces())
        );
    }
}

pub async fn sso(cmd: SsoCommand) -> Result<()> {
    match cmd {
        SsoCommand::Map(args) => {
            let names = if args.namespace.is_empty() {
                vec!["*".to_string()]
            } else {
                args.namespace
            };
            let mapping = GroupMapping::new(&args.group, Scope::from(args.scope), &names)?;
            let api = args.r#where.connect().await?;
            let mapped: MappedGroup = api.send(AdminRoute::MapGroup, Some(&mapping)).await?;
            args.r#where.show(&mapped, |m| {
                let was = m
                    .replaced
                    .as_ref()
                    .map(|old| {
                        format!(
                            " (was {} on {})",
                            old.scope().as_str(),
                            namespaces(old.namespaces())
                        )
                    })
                    .unwrap_or_default();
                eprintln!(
                    "group {} now gives {} on {}{was}",
                    escaped(m.mapping.group()),
                    m.mapping.scope().as_str(),
                    namespaces(m.mapping.namespaces())
                );
            })
        }
        SsoCommand::Unmap(args) => {
            let unmap = Unmap { group: args.group };
            tfreg_model::sso::check_group(&unmap.group)?;
            let api = args.r#where.connect().await?;
            let gone: UnmappedGroup = api.send(AdminRoute::UnmapGroup, Some(&unmap)).await?;
            args.r#where.show(&gone, |g| {
                eprintln!("group {} is no longer mapped", escaped(g.removed.group()));
            })
        }
        SsoCommand::List(args) => {
            let api = args.r#where.connect().await?;
            let list: MappingList = api.send(AdminRoute::ListMappings, None::<&()>).await?;
            args.r#where.show(&list, print_mappings)
        }
    }
}

#[derive(Subcommand)]
pub enum TrustCommand {
    /// Let CI jobs whose OIDC token comes from --issuer with every --claim
    /// publish to a namespace (a numeric id must be pinned exactly).
    Add(TrustAddArgs),
    /// List trust policies: a namespace's, or every namespace's.
    List(TrustListArgs),
    /// Remove a trust policy by its id (as `tfreg trust list` shows it).
    Remove(TrustRemoveArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum KindArg {
    Github,
    Gitlab,
    Other,
}

#[derive(Args)]
pub struct TrustAddArgs {
    namespace: String,
    /// The CI system's OIDC issuer, e.g. https://token.actions.githubusercontent.com.
    #[arg(long)]
    issuer: String,
    /// What the issuer is, when the registry cannot tell (a self-managed GitLab: gitlab).
    #[arg(long, value_enum)]
    kind: Option<KindArg>,
    /// An audience the token must also carry.
    #[arg(long)]
    audience: Option<String>,
    /// A required claim, NAME=VALUE (a trailing * matches by prefix); repeatable.
    #[arg(long, required = true, value_parser = claim)]
    claim: Vec<(String, String)>,
    #[command(flatten)]
    r#where: Where,
}

fn claim(text: &str) -> std::result::Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

#[derive(Args)]
pub struct TrustListArgs {
    /// Only this namespace's policies.
    namespace: Option<String>,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct TrustRemoveArgs {
    namespace: String,
    /// The policy's id (12 hex digits).
    id: String,
    #[command(flatten)]
    r#where: Where,
}

fn claims(p: &TrustPolicy) -> String {
    p.claims()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_policies(policies: &[TrustRecord]) {
    println!(
        "{:<16}  {:<12}  {:<44}  {:<20}  CLAIMS",
        "NAMESPACE", "ID", "ISSUER", "ADDED"
    );
    for r in policies {
        println!(
            "{:<16}  {:<12}  {:<44}  {:<20}  {}",
            r.namespace,
            r.id,
            escaped(r.policy.issuer()),
            when(Some(r.added_at)),
            escaped(&claims(&r.policy))
        );
    }
}

pub async fn trust(cmd: TrustCommand) -> Result<()> {
    match cmd {
        TrustCommand::Add(args) => {
            let namespace = namespace(&args.namespace)?;
            let mut required = BTreeMap::new();
            for (k, v) in args.claim {
                if required.insert(k.clone(), v).is_some() {
                    return Err(format!("--claim {k} given twice").into());
                }
            }
            let kind = args.kind.map(|k| match k {
                KindArg::Github => IssuerKind::GitHub,
                KindArg::Gitlab => IssuerKind::GitLab,
                KindArg::Other => IssuerKind::Other,
            });
            let policy = TrustPolicy::new(&args.issuer, kind, args.audience.as_deref(), &required)?;
            let api = args.r#where.connect().await?;
            let added: AddedTrust = api
                .send(AdminRoute::AddTrust { namespace }, Some(&policy))
                .await?;
            args.r#where.show(&added, |a| {
                let p = &a.policy;
                if a.added {
                    eprintln!("{} now trusts policy {}", p.namespace, p.id);
                } else {
                    eprintln!("{} already had policy {}: unchanged", p.namespace, p.id);
                }
                println!("{}", p.id);
            })
        }
        TrustCommand::List(args) => {
            let namespace = args.namespace.as_deref().map(namespace).transpose()?;
            let api = args.r#where.connect().await?;
            let list: TrustList = api
                .send(AdminRoute::ListTrust { namespace }, None::<&()>)
                .await?;
            args.r#where.show(&list, |l| print_policies(&l.policies))
        }
        TrustCommand::Remove(args) => {
            let namespace = namespace(&args.namespace)?;
            let id = check_policy_id(&args.id)?;
            let api = args.r#where.connect().await?;
            let removed: RemovedTrust = api
                .send(AdminRoute::RemoveTrust { namespace, id }, None::<&()>)
                .await?;
            args.r#where.show(&removed, |r| {
                eprintln!(
                    "{} no longer trusts policy {}",
                    r.removed.namespace, r.removed.id
                );
            })
        }
    }
}
