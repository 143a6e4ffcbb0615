//! `tfreg gc` and `tfreg verify` (issue 39), on the stores themselves: a
//! data directory, or a stack's table and bucket with this machine's AWS
//! credentials (the operator's; no function's role may list or scan).
//! Not admin API routes: a large registry's verify outlasts a Lambda's 15
//! minutes, and neither verb belongs to the functions' least privilege.
//! Each run is audited (actor `operator`); gc deletes only with `--apply`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tfreg_model::token::Principal;
use tfreg_store::catalog::audit::{self, Event, Outcome};
use tfreg_store::maintenance::{self, VerifyReport, transfer};

use crate::admin::Where;
use crate::cli_error::Result;

mod archive;

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg gc                       # what would be deleted, on ./tfreg-data
  tfreg gc --apply               # delete it
  tfreg gc --apply --grace 1h    # objects unreferenced for an hour or more")]
pub struct GcArgs {
    /// Delete what is found; without it, only say what would be deleted.
    #[arg(long)]
    apply: bool,
    /// Leave an unreferenced object alone until it is this old (a publish
    /// keeps its files before its release refers to them): at least 15m,
    /// longer than any publish's `complete` takes.
    #[arg(long, default_value = "24h", value_parser = grace)]
    grace: Duration,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg verify                   # every stored file against its record, on ./tfreg-data
  tfreg verify --json            # the mismatches as JSON")]
pub struct VerifyArgs {
    #[command(flatten)]
    r#where: Where,
}

/// The shortest grace allowed: a Lambda's longest run.
const MIN_GRACE: Duration = Duration::from_secs(15 * 60);

fn grace(s: &str) -> std::result::Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_GRACE {
        return Err(format!(
            "{s} is shorter than {}: a publish at work could lose its files",
            humantime::format_duration(MIN_GRACE)
        ));
    }
    Ok(d)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!("{what} [{{bar:30}}] {{pos}}/{{len}} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar
    } else {
        ProgressBar::hidden()
    }
}

/// A `progress(done, of)` that moves `bar`.
fn follows(bar: &ProgressBar) -> impl Fn(usize, usize) + Send + Sync + '_ {
    |done, of| {
        bar.set_length(of as u64);
        bar.set_position(done as u64);
    }
}

async fn record(
    items: &dyn tfreg_store::ItemStore,
    action: &str,
    target: &str,
    outcome: Outcome,
    detail: String,
) {
    let event = Event {
        at: now(),
        actor: Principal::Operator.actor(),
        action: action.into(),
        target: target.into(),
        outcome,
        status: 0,
        detail: Some(detail),
        request_id: format!("cli-{:016x}", rand::random::<u64>()),
    };
    audit::record(items, &event, true).await;
}

pub async fn gc(args: GcArgs) -> Result<()> {
    let registry = args.r#where.stores("gc").await?;
    let bar = bar(0, "deleting");
    let progress = follows(&bar);
    let report = maintenance::gc(
        registry.items.as_ref(),
        registry.blobs.as_ref(),
        now(),
        args.grace.as_secs(),
        args.apply,
        &progress,
    )
    .await?;
    bar.finish_and_clear();
    if args.apply {
        record(
            registry.items.as_ref(),
            "gc",
            "archives/, uploads/",
            Outcome::Ok,
            format!(
                "deleted {} objects ({} unreferenced for {} or more), {} left for a later run",
                report.deleted,
                report.garbage.len(),
                humantime::format_duration(args.grace),
                report.recent
            ),
        )
        .await;
    }
    args.r#where.show(&report, |r| {
        for g in &r.garbage {
            let why = serde_json::to_value(g.why)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            println!(
                "{}{}  {why}",
                if args.apply { "deleted " } else { "" },
                g.key
            );
        }
        println!(
            "{} objects, {} files referred to; {} {}, {} too recent to collect (grace {})",
            r.objects,
            r.referenced,
            r.garbage.len(),
            if args.apply {
                "deleted"
            } else {
                "to delete (dry run: --apply deletes them)"
            },
            r.recent,
            humantime::format_duration(args.grace)
        );
    })
}

pub async fn verify(args: VerifyArgs) -> Result<()> {
    let registry = args.r#where.stores("verify").await?;
    let (items, blobs) = (registry.items.as_ref(), registry.blobs.as_ref());
    let files = maintenance::promised(items, blobs, now()).await?;
    let bar = bar(files.len() as u64, "verifying");
    let mut report = VerifyReport {
        checked: 0,
        bytes: 0,
        mismatches: vec![],
    };
    for (key, promised) in &files {
        bar.set_message(key.file_name().to_string());
        let (mismatch, bytes) = maintenance::check(blobs, key, promised).await?;
        report.checked += 1;
        report.bytes += bytes;
        if let Some(m) = mismatch {
            let found = match &m.found {
                Some(f) => format!("sha256 {} ({} bytes)", f.sha256, f.size),
                None => "nothing".into(),
            };
            record(
                items,
                "verify.mismatch",
                key.as_str(),
                Outcome::Failed,
                format!(
                    "{} promises sha256 {}; the store has {found}",
                    m.record, m.expected_sha256
                ),
            )
            .await;
            report.mismatches.push(m);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let bad = report.mismatches.len();
    args.r#where.show(&report, |r| {
        for m in &r.mismatches {
            match &m.found {
                Some(f) => println!(
                    "MISMATCH {}: {} promises sha256 {}, the store has {} ({} bytes)",
                    m.key, m.record, m.expected_sha256, f.sha256, f.size
                ),
                None => println!(
                    "MISSING {}: {} promises sha256 {}, the store has nothing",
                    m.key, m.record, m.expected_sha256
                ),
            }
        }
        println!(
            "{} files, {} bytes read; {} not what their records promise",
            r.checked,
            r.bytes,
            r.mismatches.len()
        );
    })?;
    if bad > 0 {
        return Err(format!("{bad} stored files are not what their records promise (audited as verify.mismatch); nothing was changed").into());
    }
    Ok(())
}

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg export ./backup              # everything in ./tfreg-data; --table and --bucket for a stack
  tfreg export ./backup.tar          # the same as one tar archive
  tfreg export ./widget --name acme/widget --constraint '>= 2.0'")]
pub struct ExportArgs {
    /// A new, empty directory to write the export into, or a new file
    /// ending in `.tar` to write it as one archive.
    dir: std::path::PathBuf,
    /// Only this namespace's providers, mirror imports, modules, signing
    /// keys, trust policies and download counts (repeatable); without it,
    /// everything, tokens and the audit trail included.
    #[arg(long = "namespace")]
    namespaces: Vec<String>,
    /// Only this provider (NAMESPACE/TYPE) or module (NAMESPACE/NAME/SYSTEM),
    /// with its namespace's signing keys and trust policies (repeatable).
    #[arg(long = "name")]
    names: Vec<String>,
    /// Only the versions meeting this version constraint (`>= 1.2, < 2.0`).
    #[arg(long)]
    constraint: Option<String>,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg import ./backup              # into ./tfreg-data (what is there already is merged); --table and --bucket for a stack
  tfreg import ./backup.tar          # an export written as one archive")]
pub struct ImportArgs {
    /// A directory `tfreg export` wrote, or its `.tar` archive.
    dir: std::path::PathBuf,
    #[command(flatten)]
    r#where: Where,
}

/// Is `path` an export as one archive (`.tar`)?
fn is_archive(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "tar")
}

pub async fn export(args: ExportArgs) -> Result<()> {
    for name in &args.names {
        tfreg_cache::sync::Wanted::parse(name)?;
    }
    let constraint = args
        .constraint
        .as_deref()
        .map(tfreg_model::constraint::Constraints::parse)
        .transpose()?;
    let registry = args.r#where.stores("export").await?;
    // An archive is written from a directory beside it, then renamed into
    // place whole: a file of that name is a whole export.
    let staging = if is_archive(&args.dir) {
        if args.dir.exists() {
            return Err(format!("{} exists: export into a new file", args.dir.display()).into());
        }
        let parent = args
            .dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        Some(
            tempfile::Builder::new()
                .prefix(".tfreg-export-")
                .tempdir_in(parent)
                .map_err(|e| format!("{}: {e}", parent.display()))?,
        )
    } else {
        None
    };
    let dir = staging
        .as_ref()
        .map_or(args.dir.clone(), |t| t.path().join("export"));
    let bar = bar(0, "exporting");
    let progress = follows(&bar);
    let exported = transfer::export(
        registry.items.as_ref(),
        registry.blobs.as_ref(),
        &dir,
        &transfer::Selection {
            namespaces: args.namespaces.clone(),
            names: args.names.clone(),
            constraint,
        },
        (args.r#where.hostname().as_deref(), now()),
        &progress,
    )
    .await
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    if staging.is_some() {
        let (from, to) = (dir.clone(), args.dir.clone());
        tokio::task::spawn_blocking(move || archive::pack(&from, &to))
            .await
            .map_err(|e| e.to_string())??;
    }
    record(
        registry.items.as_ref(),
        "export",
        &args.dir.display().to_string(),
        Outcome::Ok,
        format!(
            "{} items, {} files ({} bytes)",
            exported.items, exported.files, exported.bytes
        ),
    )
    .await;
    args.r#where.show(&exported, |e| {
        println!(
            "exported {} items and {} files ({} bytes) to {}",
            e.items,
            e.files,
            e.bytes,
            args.dir.display()
        );
    })
}

pub async fn import(args: ImportArgs) -> Result<()> {
    let registry = args.r#where.stores("import").await?;
    // An archive is unpacked into a private directory first; the import
    // then checks it as it checks any export.
    let unpacked = if is_archive(&args.dir) {
        let to = tempfile::Builder::new()
            .prefix("tfreg-import-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory to unpack into: {e}"))?;
        let (from, into) = (args.dir.clone(), to.path().to_path_buf());
        tokio::task::spawn_blocking(move || archive::unpack(&from, &into))
            .await
            .map_err(|e| e.to_string())??;
        Some(to)
    } else {
        None
    };
    let dir = unpacked
        .as_ref()
        .map_or(args.dir.clone(), |t| t.path().to_path_buf());
    let bar = bar(0, "importing");
    let progress = follows(&bar);
    let imported = transfer::import(
        registry.items.as_ref(),
        registry.blobs.as_ref(),
        &dir,
        (args.r#where.hostname().as_deref(), now()),
        &progress,
    )
    .await;
    bar.finish_and_clear();
    let target = args.dir.display().to_string();
    let imported = match imported {
        Ok(i) => i,
        Err(e) => {
            record(
                registry.items.as_ref(),
                "import",
                &target,
                Outcome::Refused,
                e.to_string(),
            )
            .await;
            return Err(e.to_string().into());
        }
    };
    record(
        registry.items.as_ref(),
        "import",
        &target,
        Outcome::Ok,
        format!(
            "{} items and {} files written, {} and {} already there, {} versions indexed",
            imported.items_written,
            imported.files_written,
            imported.items_present,
            imported.files_present,
            imported.reindexed
        ),
    )
    .await;
    args.r#where.show(&imported, |i| {
        println!(
            "imported {} items and {} files ({} items and {} files were already there); {} versions indexed",
            i.items_written, i.files_written, i.items_present, i.files_present, i.reindexed
        );
    })
}

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg reindex                  # every versions index and listing entry of ./tfreg-data, from the releases,
                                 # and the docs and OCI zips of module versions that have none, from their archives")]
pub struct ReindexArgs {
    #[command(flatten)]
    r#where: Where,
}

pub async fn reindex(args: ReindexArgs) -> Result<()> {
    let registry = args.r#where.stores("reindex").await?;
    let items = registry.items.as_ref();
    // Docs first: a module's listing entry takes its description from them.
    let (documented, unreadable) = read_missing_docs(items, registry.blobs.as_ref()).await?;
    let zipped = make_missing_zips(items, registry.blobs.as_ref()).await?;
    let bar = bar(0, "reindexing");
    let progress = follows(&bar);
    let rebuilt = maintenance::reindex(items, &progress).await?;
    bar.finish_and_clear();
    record(
        items,
        "reindex",
        "versions indexes",
        Outcome::Ok,
        format!(
            "{rebuilt} providers and modules reindexed from their releases; docs read for {documented} module versions; OCI zips made for {zipped}"
        ),
    )
    .await;
    args.r#where.show(
        &serde_json::json!({
            "reindexed": rebuilt,
            "docs_read": documented,
            "docs_unreadable": unreadable,
            "zips_made": zipped,
        }),
        |_| {
            for (what, why) in &unreadable {
                println!("no docs for {what}: {why}");
            }
            println!(
                "{rebuilt} providers and modules reindexed from their releases; docs read for {documented} module versions; OCI zips made for {zipped}"
            );
        },
    )
}

/// Make the zip the OCI view serves (issue 40) for every module version
/// published before it, from its archive as stored; how many. An archive
/// that no longer reads is left without one (its docs say why).
async fn make_missing_zips(
    items: &dyn tfreg_store::ItemStore,
    blobs: &dyn tfreg_store::BlobStore,
) -> Result<usize> {
    let mut made = 0;
    for (module, release) in maintenance::unzipped_modules(items).await? {
        let claimed = blobs.claim(&release.file.key, release.file.size).await?;
        let version = tfreg_model::version::Version::parse(&release.version)?;
        match tfreg_store::keep_module_zip(
            items,
            blobs,
            &module,
            &version,
            &release.file.sha256,
            &claimed.file,
            tfreg_verify::archives::module_zip::zip_file,
        )
        .await
        {
            Ok(_) => made += 1,
            Err(e) => eprintln!("no OCI zip for {module} {}: {e}", release.version),
        }
    }
    Ok(made)
}

/// Read and store the docs of every module version that has none, from its
/// archive as stored (checked as a publish checks it); how many, and those
/// whose archive a publish would refuse today (left without docs).
async fn read_missing_docs(
    items: &dyn tfreg_store::ItemStore,
    blobs: &dyn tfreg_store::BlobStore,
) -> Result<(usize, Vec<(String, String)>)> {
    let todo = maintenance::undocumented_modules(items).await?;
    let (mut read, mut unreadable) = (0, Vec::new());
    for (module, release) in todo {
        let claimed = blobs.claim(&release.file.key, release.file.size).await?;
        let file = claimed.file.try_clone().map_err(|e| e.to_string())?;
        let docs = tokio::task::spawn_blocking(move || {
            tfreg_verify::archives::module::checked_docs(std::io::BufReader::new(file))
        })
        .await
        .map_err(|e| e.to_string())?;
        let what = format!("{module} {}", release.version);
        match docs {
            Ok(docs) => {
                let version = tfreg_model::version::Version::parse(&release.version)?;
                tfreg_store::catalog::put_module_docs(
                    items,
                    &module,
                    &version,
                    &release.file.sha256,
                    &docs.docs,
                )
                .await?;
                read += 1;
            }
            Err(e) => unreadable.push((what, e.to_string())),
        }
    }
    Ok((read, unreadable))
}
