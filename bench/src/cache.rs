//! The pull-through cache (issue 22): `terraform init` of the e2e
//! configuration (10 providers, 10 modules) straight from an origin registry
//! and through a `tfreg serve` caching it (a `host` block pointing the
//! origin's registry protocols at the cache), warm (every request a hit) and
//! cold (a fresh cache each round: every request a miss), alternating, in
//! the same run; then what a hit and a miss ask of the registry, counted
//! in-process ([`count`]), and what they would cost on AWS ([`bill`]).

use std::collections::BTreeMap;

mod bill;
mod count;
mod rig;
mod stores;

use rig::Caching;

use crate::e2e::{Counted, Fixture, count_requests};
use crate::report::Section;
use crate::tools::{Error, median, require_env, sibling_binary};

const DIRECT: &str = "direct";
const WARM: &str = "warm";
const COLD: &str = "cold";

pub fn run(rounds: usize) -> Result<Section, Error> {
    let terraform = require_env("TFREG_TERRAFORM_NEW")?;
    let terraform_version = require_env("TFREG_TERRAFORM_NEW_VERSION")?
        .display()
        .to_string();
    let null_provider = require_env("TFREG_NULL_PROVIDER")?;
    let tfreg = sibling_binary("tfreg")?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();

    let fixture = Fixture::write(&dir.join("fixture"), &std::fs::read(null_provider)?)?;
    let origin = rig::start_origin(&tfreg, dir, &fixture)?;
    let direct = rig::direct_workspace(&dir.join("direct"))?;
    // A first init from the origin, untimed: it warms the disk cache.
    direct.init(&terraform, &origin.ca)?;

    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut lines: BTreeMap<&str, Counted> = BTreeMap::new();
    let mut origin_during: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    let mut fill_log_bytes = 0;
    for round in 0..rounds {
        // A fresh cache each round: its first init is every request a miss.
        let cache = Caching::start(&tfreg, &dir.join(format!("cache-{round}")), &origin)?;
        let through = cache.workspace(&dir.join(format!("through-{round}")))?;
        let ca = &cache.registry.ca;
        let (before, origin_before) = (cache.registry.log_len()?, origin.log_len()?);
        times
            .entry(COLD)
            .or_default()
            .push(through.init(&terraform, ca)?);
        let cold_log = cache.registry.log_since(before)?;
        if round == 0 {
            // What the fills log (lines that are not a request's).
            fill_log_bytes = cold_log
                .iter()
                .filter(|l| l.contains("fill"))
                .filter(|l| crate::e2e::field(l, "endpoint").is_none())
                .map(|l| l.len() as u64 + 1)
                .sum::<u64>();
            lines.insert(COLD, count_requests(&cold_log));
            origin_during.insert(COLD, count_requests(&origin.log_since(origin_before)?).0);
        }
        // Then warm, and from the origin, alternating which goes first.
        let order = if round % 2 == 0 {
            [WARM, DIRECT]
        } else {
            [DIRECT, WARM]
        };
        for name in order {
            let (before, origin_before) = (cache.registry.log_len()?, origin.log_len()?);
            let seconds = match name {
                WARM => through.init(&terraform, ca)?,
                _ => direct.init(&terraform, &origin.ca)?,
            };
            times.entry(name).or_default().push(seconds);
            if round == 0 {
                let served = match name {
                    WARM => cache.registry.log_since(before)?,
                    _ => origin.log_since(origin_before)?,
                };
                lines.insert(name, count_requests(&served));
                origin_during.insert(name, count_requests(&origin.log_since(origin_before)?).0);
            }
        }
    }
    eprintln!("cache: counting a cold and a warm pass in-process");
    let counted = count::count(&origin)?;
    let medians: BTreeMap<&str, f64> = times.iter().map(|(k, v)| (*k, median(v))).collect();
    let inputs = bill::Inputs::new(&counted, &lines[WARM], fill_log_bytes);
    let costs = bill::Costs::of(&counted, &inputs);

    let markdown = bill::markdown(&bill::Report {
        terraform_version: &terraform_version,
        rounds,
        times: &times,
        medians: &medians,
        lines: &lines,
        origin_during: &origin_during,
        counted: &counted,
        inputs: &inputs,
        costs: &costs,
        fixture: &fixture,
    });
    let figures = serde_json::json!({
        "rounds": rounds,
        "init_seconds": times,
        "median_seconds": medians,
        "ratio_warm_to_direct": medians[WARM] / medians[DIRECT],
        "ratio_cold_to_direct": medians[COLD] / medians[DIRECT],
        "requests_per_init": lines.iter().map(|(k, v)| (*k, &v.0)).collect::<BTreeMap<_, _>>(),
        "origin_requests_during": origin_during,
        "counted": counted,
        "inputs": inputs,
        "usd": costs,
    });
    drop(origin);
    Ok(Section {
        name: "cache".into(),
        title: "Pull-through cache: terraform init through the cache beside the origin, and the cost of a hit and a miss".into(),
        markdown,
        figures,
    })
}
