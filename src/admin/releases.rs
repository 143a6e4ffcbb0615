//! `tfreg deprecate|yank|delete`: a release's lifecycle, through the admin
//! API (a registry's URL, or the stores as the operator: [`super::Where`]).

use clap::{Args, ValueEnum};
use http::Method;
use tfreg_model::address::{Hostname, ModuleName, ProviderName};
use tfreg_model::protocol::{DeleteResult, LifecycleRequest, LifecycleResult};
use tfreg_model::router::{AdminRoute, LifecycleAction, PublishTarget, Route};
use tfreg_model::version::Version;

use super::Where;
use crate::cli_error::Result;

/// What kind of release an address names.
#[derive(Clone, Copy, ValueEnum)]
pub enum Kind {
    /// NAMESPACE/TYPE
    Provider,
    /// NAMESPACE/NAME/SYSTEM
    Module,
    /// HOSTNAME/NAMESPACE/TYPE (a provider imported for the network mirror)
    Mirror,
}

#[derive(Args)]
pub struct ReleaseArgs {
    #[arg(value_enum)]
    kind: Kind,
    /// NAMESPACE/TYPE, NAMESPACE/NAME/SYSTEM or HOSTNAME/NAMESPACE/TYPE.
    address: String,
    version: String,
}

impl ReleaseArgs {
    fn target(&self) -> Result<PublishTarget> {
        let version = Version::parse(&self.version)?;
        let parts: Vec<&str> = self.address.split('/').collect();
        Ok(match (self.kind, parts.as_slice()) {
            (Kind::Provider, [ns, ty]) => PublishTarget::Provider {
                provider: ProviderName::parse(ns, ty)?,
                version,
            },
            (Kind::Module, [ns, name, system]) => PublishTarget::Module {
                module: ModuleName::parse(ns, name, system)?,
                version,
            },
            (Kind::Mirror, [host, ns, ty]) => PublishTarget::Mirror {
                hostname: Hostname::parse(host)?,
                provider: ProviderName::parse(ns, ty)?,
                version,
            },
            (kind, _) => {
                return Err(format!(
                    "{:?} is not a {} address: use {}",
                    self.address,
                    match kind {
                        Kind::Provider => "provider",
                        Kind::Module => "module",
                        Kind::Mirror => "mirror",
                    },
                    match kind {
                        Kind::Provider => "NAMESPACE/TYPE",
                        Kind::Module => "NAMESPACE/NAME/SYSTEM",
                        Kind::Mirror => "HOSTNAME/NAMESPACE/TYPE",
                    }
                )
                .into());
            }
        })
    }
}

#[derive(Args)]
pub struct DeprecateArgs {
    #[command(flatten)]
    release: ReleaseArgs,
    /// What users should do instead (shown by `terraform init` for providers).
    #[arg(long, required_unless_present = "undo", conflicts_with = "undo")]
    message: Option<String>,
    /// Take the deprecation back.
    #[arg(long)]
    undo: bool,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct YankArgs {
    #[command(flatten)]
    release: ReleaseArgs,
    /// Why (kept in the audit trail and shown by `tfreg` and the admin API).
    #[arg(long, conflicts_with = "undo")]
    message: Option<String>,
    /// List the version again.
    #[arg(long)]
    undo: bool,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    release: ReleaseArgs,
    /// Delete it even though it was downloaded in the last 30 days (the
    /// registry refuses otherwise, naming who downloaded it: `tfreg usage`).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    r#where: Where,
}

async fn lifecycle(
    release: &ReleaseArgs,
    action: LifecycleAction,
    message: Option<String>,
    r#where: &Where,
) -> Result<()> {
    let release = release.target()?;
    let api = r#where.connect().await?;
    let result: LifecycleResult = api
        .send(
            AdminRoute::Lifecycle { release, action },
            Some(&LifecycleRequest { message }),
        )
        .await?;
    let verb = match action {
        LifecycleAction::Deprecate => "deprecated",
        LifecycleAction::Undeprecate => "no longer deprecated",
        LifecycleAction::Yank => "yanked: left out of versions lists, exact downloads still work",
        LifecycleAction::Unyank => "listed again",
    };
    r#where.show(&result, |result| {
        if result.changed {
            eprintln!("{}: {verb}", result.release);
        } else {
            eprintln!("{}: already {verb}; nothing changed", result.release);
        }
    })
}

pub async fn deprecate(args: DeprecateArgs) -> Result<()> {
    let action = if args.undo {
        LifecycleAction::Undeprecate
    } else {
        LifecycleAction::Deprecate
    };
    lifecycle(&args.release, action, args.message, &args.r#where).await
}

pub async fn yank(args: YankArgs) -> Result<()> {
    let action = if args.undo {
        LifecycleAction::Unyank
    } else {
        LifecycleAction::Yank
    };
    lifecycle(&args.release, action, args.message, &args.r#where).await
}

pub async fn delete(args: DeleteArgs) -> Result<()> {
    let release = args.release.target()?;
    let own = !matches!(release, PublishTarget::Mirror { .. });
    if !args.force && own && args.r#where.hostname_unknown() {
        return Err(
            "on the stores directly, the delete guard needs the registry's hostname to see who downloads the version: pass --hostname (as `tfreg serve --hostname`, the stack's TFREG_HOSTNAME), or --force"
                .into(),
        );
    }
    let api = args.r#where.connect().await?;
    let mut path = Route::Admin(AdminRoute::Delete { release }).path();
    if args.force {
        path.push_str("?force=true");
    }
    let result: DeleteResult = api.call(Method::DELETE, &path, None).await?;
    args.r#where.show(&result, |result| {
        eprintln!(
            "{}: deleted from every response; {} archive files removed",
            result.deleted, result.archives_removed
        );
        if !result.archives_left.is_empty() {
            eprintln!(
                "warning: could not remove {} archive files now (the store failed): {}",
                result.archives_left.len(),
                result.archives_left.join(", ")
            );
        }
    })
}
