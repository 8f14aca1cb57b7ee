//! The command line of `metaroce-sim`: every flag known, every value parsed and in
//! range. Anything else is an error that names the argument (the caller prints it with
//! [`USAGE`] and exits 2); nothing falls back to a default silently.

/// What `metaroce-sim -h` prints.
pub const USAGE: &str = "\
usage: metaroce-sim [--quick | --full] [--seed N] [--only N] [--check] [--kernel]
       metaroce-sim --scale [--tiers 2|3] [--tors N] [--hosts-per-tor N] [--pods N]
                    [--oversub K] [--planes P] [--ms T] [--pfc] [--base] [--threads N]
                    [--seed N] [--kernel]
  --quick        quick scale (the default; scenarios 1-7, 10, 13)
  --full         full scale: every scenario (Documentation/simulation.rst's tables)
  --seed N       first seed, N >= 1 (default 1)
  --only N       only scenario N, 1..15 (8, 9, 11, 12, 14 and 15 run only with --full or --only)
  --check        exit 1 if a MetaRoCE regression guard fails
  --kernel       only the kernel-configuration MetaRoCE column (--check reports only)
  --scale        the engine speed run: a permutation on a large fat tree (default 1,024
                 hosts, 2 tiers, 32 ToRs x 32 hosts, 10 ms); measured, not checked
    --tiers 2|3          2: leaf-spine; 3: ToR-aggregation-core, --pods pods of --tors
                         ToRs (default 16 pods x 8 ToRs x 8 hosts: 1,024 hosts)
    --tors N             ToRs (per pod with --tiers 3), N >= 2 (2 tiers) or >= 1
    --hosts-per-tor N    hosts per ToR, 1..=512
    --pods N             pods (--tiers 3 only), N >= 2
    --oversub K          K:1 at the ToR, 1 <= K <= hosts per ToR (default 1)
    --planes P           planes, 1..=8 (default 1)
    --ms T               simulated milliseconds, 0.001 <= T <= 1000 (default 10)
    --pfc                lossless fabric (PFC) instead of lossy
    --base               the toy baseline transport instead of MetaRoCE
    --threads N          partitions, one thread each, 1..=8 (default 2; 1: the
                         sequential engine; figures depend on N, not on timing)
  -h, --help     this help";

/// The parsed command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Cli {
    pub help: bool,
    pub quick: bool,
    pub check: bool,
    pub kernel: bool,
    pub seed: u64,
    pub only: Option<u32>,
    pub scale: Option<ScaleArgs>,
}

/// `--scale`'s fabric and run.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleArgs {
    pub tiers: u8,
    pub tors: u16,
    pub hosts_per_tor: u16,
    pub pods: u16,
    pub oversub: u16,
    pub planes: u8,
    pub ms: f64,
    pub pfc: bool,
    pub base: bool,
    /// Partitions of the parallel engine ([`crate::parallel`]); 1: sequential.
    pub threads: u8,
}

/// Scenarios `--only` accepts.
pub const SCENARIOS: u32 = 15;

/// The largest `--seed`: a row adds up to 4 to it (seeds N … N+k−1).
pub const MAX_SEED: u64 = 1 << 62;

/// `flag`'s value: an integer is plain decimal digits (no sign, no leading zero).
fn value<T: std::str::FromStr>(flag: &str, v: Option<&String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    let integer = std::any::type_name::<T>() != "f64";
    let plain = v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'));
    if integer && !plain {
        return Err(format!("{flag} {v}: not a valid value"));
    }
    v.parse()
        .map_err(|_| format!("{flag} {v}: not a valid value"))
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Cli, String> {
    let mut cli = Cli {
        help: false,
        quick: true,
        check: false,
        kernel: false,
        seed: 1,
        only: None,
        scale: None,
    };
    let (mut quick, mut full, mut scale) = (false, false, false);
    let (mut tiers, mut tors, mut hpt, mut pods) = (2u8, None, None, None);
    let (mut oversub, mut planes, mut ms, mut pfc, mut base) = (1u16, 1u8, 10.0f64, false, false);
    let mut threads = 2u8;
    let mut scale_only = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a.starts_with("--") && seen.contains(&a.as_str()) {
            return Err(format!("{a} given twice"));
        }
        seen.push(a);
        match a.as_str() {
            "-h" | "--help" => cli.help = true,
            "--quick" => quick = true,
            "--full" => full = true,
            "--check" => cli.check = true,
            "--kernel" => cli.kernel = true,
            "--scale" => scale = true,
            "--seed" => cli.seed = value(a, it.next())?,
            "--only" => cli.only = Some(value(a, it.next())?),
            "--tiers" => tiers = value(a, it.next())?,
            "--tors" => tors = Some(value(a, it.next())?),
            "--hosts-per-tor" => hpt = Some(value(a, it.next())?),
            "--pods" => pods = Some(value(a, it.next())?),
            "--oversub" => oversub = value(a, it.next())?,
            "--planes" => planes = value(a, it.next())?,
            "--ms" => ms = value(a, it.next())?,
            "--pfc" => pfc = true,
            "--base" => base = true,
            "--threads" => threads = value(a, it.next())?,
            _ => return Err(format!("unknown argument '{a}'")),
        }
        if matches!(
            a.as_str(),
            "--tiers"
                | "--tors"
                | "--hosts-per-tor"
                | "--pods"
                | "--oversub"
                | "--planes"
                | "--ms"
                | "--pfc"
                | "--base"
                | "--threads"
        ) {
            scale_only.push(a.clone());
        }
    }
    if cli.help {
        return Ok(cli);
    }
    check(!(quick && full), || {
        "--quick and --full exclude each other".into()
    })?;
    check((1..=MAX_SEED).contains(&cli.seed), || {
        format!("--seed {}: 1..{MAX_SEED}", cli.seed)
    })?;
    if let Some(n) = cli.only {
        check((1..=SCENARIOS).contains(&n), || {
            format!("--only {n}: scenarios are 1..{SCENARIOS}")
        })?;
    }
    cli.quick = !full;
    if !scale {
        return match scale_only.first() {
            Some(f) => Err(format!("{f} belongs to --scale")),
            None => Ok(cli),
        };
    }
    check(!(quick || full || cli.check || cli.only.is_some()), || {
        "--scale takes no --quick, --full, --check or --only".into()
    })?;
    check(tiers == 2 || tiers == 3, || {
        format!("--tiers {tiers}: 2 or 3")
    })?;
    let (def_tors, def_hpt) = if tiers == 3 { (8, 8) } else { (32, 32) };
    let tors = tors.unwrap_or(def_tors);
    let hosts_per_tor = hpt.unwrap_or(def_hpt);
    let pods = match (tiers, pods) {
        (2, Some(_)) => return Err("--pods needs --tiers 3".into()),
        (_, p) => p.unwrap_or(16),
    };
    check(tors >= if tiers == 3 { 1 } else { 2 }, || {
        format!("--tors {tors}: too few for a permutation across ToRs")
    })?;
    check((1..=512).contains(&hosts_per_tor), || {
        format!("--hosts-per-tor {hosts_per_tor}: 1..=512")
    })?;
    check(tiers == 2 || pods >= 2, || {
        format!("--pods {pods}: at least 2")
    })?;
    check((1..=hosts_per_tor).contains(&oversub), || {
        format!("--oversub {oversub}: 1..=hosts per ToR ({hosts_per_tor})")
    })?;
    check((1..=8).contains(&planes), || {
        format!("--planes {planes}: 1..=8")
    })?;
    check((1..=8).contains(&threads), || {
        format!("--threads {threads}: 1..=8")
    })?;
    // At least 1 µs: the run is reported in ten steps of whole nanoseconds.
    check(ms.is_finite() && (0.001..=1000.0).contains(&ms), || {
        format!("--ms {ms}: 0.001 <= T <= 1000")
    })?;
    let hosts =
        u64::from(tors) * u64::from(hosts_per_tor) * if tiers == 3 { u64::from(pods) } else { 1 };
    check(hosts <= 16_384, || format!("{hosts} hosts: at most 16,384"))?;
    cli.scale = Some(ScaleArgs {
        tiers,
        tors,
        hosts_per_tor,
        pods,
        oversub,
        planes,
        ms,
        pfc,
        base,
        threads,
    });
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Cli, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_and_valid_lines() {
        let c = p("").unwrap();
        assert!(c.quick && !c.check && c.seed == 1 && c.only.is_none() && c.scale.is_none());
        let c = p("--full --only 9 --seed 3 --check").unwrap();
        assert!(!c.quick && c.check && c.seed == 3 && c.only == Some(9));
        let s = p("--scale").unwrap().scale.unwrap();
        assert_eq!(
            (s.tiers, s.tors, s.hosts_per_tor, s.planes, s.threads),
            (2, 32, 32, 1, 2)
        );
        assert_eq!(p("--scale --threads 1").unwrap().scale.unwrap().threads, 1);
        let s = p("--scale --tiers 3 --pods 4 --tors 2 --hosts-per-tor 4 --ms 0.5")
            .unwrap()
            .scale
            .unwrap();
        assert_eq!(
            (s.tiers, s.pods, s.tors, s.hosts_per_tor, s.ms),
            (3, 4, 2, 4, 0.5)
        );
        assert!(
            p("-h --bogus-after-help").is_err(),
            "unknown flags are refused even with -h"
        );
        assert!(p("--help").unwrap().help);
    }

    #[test]
    fn bad_input_is_refused_with_its_name() {
        for (line, needle) in [
            ("--bogus", "--bogus"),
            ("--only 99", "--only 99"),
            ("--only 0", "--only 0"),
            ("--only 14 --only 7", "--only given twice"),
            ("--seed 5 --seed 6", "--seed given twice"),
            ("--only +15", "--only +15"),
            ("--only 015", "--only 015"),
            ("--seed 18446744073709551615", "--seed 18446744073709551615"),
            ("--scale --ms 1 --ms 2", "--ms given twice"),
            ("--only abc", "--only abc"),
            ("--seed abc", "--seed abc"),
            ("--seed -1", "--seed -1"),
            ("--seed 0", "--seed"),
            ("--seed", "needs a value"),
            ("--quick --full", "exclude"),
            ("--tors 4", "belongs to --scale"),
            ("--scale --only 3", "--scale takes"),
            ("--scale --tors 70000", "--tors 70000"),
            ("--scale --tors 1", "--tors 1"),
            ("--scale --hosts-per-tor 0", "--hosts-per-tor 0"),
            ("--scale --tiers 7", "--tiers 7"),
            ("--scale --pods 4", "--pods needs"),
            ("--scale --oversub 0", "--oversub 0"),
            ("--scale --planes 0", "--planes 0"),
            ("--scale --planes 9", "--planes 9"),
            ("--scale --ms 0", "--ms 0"),
            ("--scale --threads 0", "--threads 0"),
            ("--scale --threads 9", "--threads 9"),
            ("--threads 2", "belongs to --scale"),
            ("--scale --ms -1", "--ms -1"),
            ("--scale --ms NaN", "--ms NaN"),
            ("--scale --ms 1e-9", "--ms 0.000000001"),
            ("--scale --tors 512 --hosts-per-tor 512", "hosts: at most"),
        ] {
            let e = p(line).expect_err(line);
            assert!(e.contains(needle), "{line}: {e}");
        }
    }
}
