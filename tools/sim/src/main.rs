//! MetaRoCE simulator: runs the comparison scenarios of issue 13 for MetaRoCE (the
//! simulator's and the kernel module's configuration) and the baselines an operator
//! would recognise (RoCEv2+DCQCN over PFC and lossy, IRN, multi-plane RoCE), over
//! several seeds, and prints one Markdown table per scenario ([`scenarios`]).
//!
//! Usage ([`cli::USAGE`], `-h`): `metaroce-sim [--quick|--full] [--seed N] [--check] [--only N] [--kernel]`
//! (scenario 8, the DCQCN parameter sensitivity, and 9, 11, 12 run with `--full` or
//! `--only N`)
//! or `metaroce-sim --scale ...` (see [`scale`]): a 1,024-host permutation, measured.
//! `--kernel` runs only the kernel-configuration MetaRoCE column (guards report only).
//! `--check` exits non-zero if a MetaRoCE regression guard fails.

mod cli;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod dcqcn;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod driver;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod endpoint;
mod fabric;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod irn;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod multiplane;
mod net;
mod parallel;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod qp;
mod queue;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod roce;
mod scale;
mod scenarios;
mod sim;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod stats;
mod switch;
#[cfg(test)]
mod testpipe;
#[cfg(test)]
mod tests;
mod topo;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod toy;
// Library API of the baselines/workloads/statistics: not every item is used by the
// scenarios (tests use the rest).
#[allow(dead_code)]
mod workload;

use scenarios::{base_rtt, Scale, Section, DELAY, GBPS, K, MIN_RTO};
use std::time::Instant as WallClock;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match cli::parse(&args) {
        Ok(c) if c.help => {
            println!("{}", cli::USAGE);
            return;
        }
        Ok(c) => c,
        Err(e) => {
            eprintln!("metaroce-sim: {e}\n{}", cli::USAGE);
            std::process::exit(2);
        }
    };
    let (quick, check, kernel, seed, only) = (cli.quick, cli.check, cli.kernel, cli.seed, cli.only);
    if let Some(sa) = &cli.scale {
        scale::run(sa, scenarios::params(kernel, 8, seed, 0));
        return;
    }
    let sc = Scale {
        quick,
        seed,
        kernel_only: kernel,
        dcqcn_presets: false,
    };
    let wall = WallClock::now();
    // Scenario 8 (DCQCN sensitivity, baselines only) and 9, 11, 12, 14, 15 (3-tier fabric,
    // background mix, reordering, 1,024 hosts, short flows among long ones) run at full
    // scale or with --only N; 10 and 13
    // (collective sizes, PFC spreading) are cheap enough for --quick.
    let run = |n: u32| {
        only.map(|o| o == n).unwrap_or(match n {
            8 => !quick && !kernel,
            9 | 11 | 12 | 14 | 15 => !quick,
            _ => true,
        })
    };
    let all: [fn(Scale) -> Section; 15] = [
        scenarios::loss::run,
        scenarios::incast::run,
        scenarios::permutation::run,
        scenarios::collectives::run,
        scenarios::failure::run,
        scenarios::planes::run,
        scenarios::state::run,
        scenarios::sensitivity::run,
        scenarios::tier3::run,
        scenarios::sizes::run,
        scenarios::mix::run,
        scenarios::reorder::run,
        scenarios::spread::run,
        scenarios::large::run,
        scenarios::elephants::run,
    ];
    println!(
        "MetaRoCE simulator, {} scale, seeds from {seed}: {GBPS} Gb/s links, {DELAY} ns/hop, \
         MTU 4096, base RTT {:.1} µs across a spine; shared-buffer switches (2.5 MB/Tb/s, \
         dynamic threshold alpha 1); ECN: MetaRoCE step K {} KB, DCQCN RED 400/1600 KB \
         Pmax 0.2; MetaRoCE min RTO {} µs (kernel config: 1 ms)\n",
        if quick { "quick" } else { "full" },
        base_rtt() / 1e3,
        K / 1000,
        MIN_RTO / 1000,
    );
    let mut sections = Vec::new();
    for (n, f) in (1..).zip(all) {
        if run(n) {
            let t = WallClock::now();
            let s = f(sc);
            s.print();
            eprintln!("scenario {n}: {:.1} s wall", t.elapsed().as_secs_f64());
            sections.push(s);
        }
    }
    println!(
        "simulated in {:.1} s wall time",
        wall.elapsed().as_secs_f64()
    );
    if check {
        let rows = sections.iter().flat_map(|s| s.rows.iter());
        let bad: Vec<_> = rows.clone().filter(|r| r.guard == Some(false)).collect();
        for r in &bad {
            eprintln!(
                "simulator check: regression in '{}' ({}): {:?}",
                r.scenario, r.metric, r.cells
            );
        }
        let missed = rows.clone().filter(|r| r.met == Some(false)).count();
        eprintln!(
            "simulator check: {} rows, {missed} targets missed (known), {} regressions",
            rows.count(),
            bad.len()
        );
        // The guards hold the simulator's configuration; --kernel reports only.
        if !bad.is_empty() && !kernel {
            std::process::exit(1);
        }
    }
}
