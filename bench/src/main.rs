//! `tfreg-bench`: the benchmarks of tfreg, each one beside a baseline measured
//! in the same run (this machine is shared and noisy: figures are ratios and
//! medians, never a time limit). Each benchmark is a module with a `run` that
//! returns a [`report::Section`]; `all` runs every one and writes
//! `BENCHMARKS.md` (see `scripts/bench`).

mod cache;
mod cost;
mod e2e;
mod handlers;
mod lambda;
mod report;
mod scale;
mod serve;
mod tools;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "tfreg's benchmarks, each beside a baseline in the same run")]
struct Cli {
    /// Where figures (JSON, one file per benchmark) and charts are written.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every benchmark, then BENCHMARKS.md from their sections.
    All {
        /// The report written.
        #[arg(long, default_value = "BENCHMARKS.md")]
        report: PathBuf,
    },
    /// Versions lists as providers and modules grow: before and with the versions index.
    Scale,
    /// `terraform init` of 10 providers and 10 modules, tfreg beside nginx, and its cost on AWS.
    E2e {
        /// Inits of each, alternating.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// `terraform init` through the pull-through cache beside the origin, and the cost of a hit and a miss.
    Cache {
        /// Rounds, each with a fresh cache (its first init all misses).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Each read endpoint in-process (criterion), embedded and on the emulators, with its storage requests counted.
    Handlers,
    /// `tfreg serve` beside nginx serving the same bytes (needs a release `tfreg`).
    Serve(serve::Opts),
    /// Lambda functions: size and cold start beside a hello-world.
    Lambda(lambda::Args),
    /// BENCHMARKS.md from the figures already in `--out`.
    Report {
        #[arg(long, default_value = "BENCHMARKS.md")]
        report: PathBuf,
    },
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    std::fs::create_dir_all(&cli.out)?;
    match cli.command {
        Command::All { report } => {
            // Each saved as soon as it is done: a later failure keeps it.
            handlers::run(&cli.out)?.save(&cli.out)?;
            scale::run(&cli.out)?.save(&cli.out)?;
            serve::run(&serve::Opts::default())?.save(&cli.out)?;
            e2e::run(5)?.save(&cli.out)?;
            cache::run(5)?.save(&cli.out)?;
            lambda::run(&lambda::Args::default())?.save(&cli.out)?;
            report::write(&report, &cli.out)?;
        }
        Command::Handlers => handlers::run(&cli.out)?.save(&cli.out)?,
        Command::Scale => scale::run(&cli.out)?.save(&cli.out)?,
        Command::E2e { rounds } => e2e::run(rounds)?.save(&cli.out)?,
        Command::Cache { rounds } => cache::run(rounds)?.save(&cli.out)?,
        Command::Serve(opts) => {
            let section = serve::run(&opts)?;
            if opts.only.is_empty() {
                section.save(&cli.out)?;
            }
        }
        Command::Lambda(args) => lambda::run(&args)?.save(&cli.out)?,
        Command::Report { report } => report::write(&report, &cli.out)?,
    }
    Ok(())
}
