# The table of tools/bench.sh --fabric, from guest 1's lines
#   BENCH side=client dev=mr0 row=gray5 rep=2 size=65536 value=4.31 unit=MiB/s
#   SPINES dev=mr0 row=gray5 rep=2 1:a2b/b2a 2:a2b/b2a … [spineI_marked=N …] (S s)
# Variables: when, secs, reps, rate, commit.
function kv(s,   a, i, n, p) {
  split("", f); n = split(s, a, " ")
  for (i = 2; i <= n; i++) { p = index(a[i], "="); if (p) f[substr(a[i], 1, p - 1)] = substr(a[i], p + 1) }
  return n
}
function num(x) { return x ~ /^[0-9]+(\.[0-9]*)?$/ }
function div(a, b) { return (num(a) && num(b) && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
# med(DEV, ROW): the median of the row's runs, a run that timed out or failed
# counting as 0 (it moved less than 16 MiB in 60 s); printed as that label
# when the median run is one.
function med(dev, row,   i, n, k, j, t, v, w) {
  n = 0
  for (i = 1; i <= maxrep; i++) if ((dev SUBSEP row SUBSEP i) in val) v[++n] = val[dev, row, i]
  if (n == 0) return "-"
  for (i = 2; i <= n; i++) {    # insertion sort on the numeric value
    t = v[i]; w = num(t) ? t + 0 : -1
    for (j = i - 1; j >= 1 && (num(v[j]) ? v[j] + 0 : -1) > w; j--) v[j + 1] = v[j]
    v[j + 1] = t
  }
  k = int((n + 1) / 2)
  return v[k]
}
# spread "I:a/b … spineI_dropped=N …": the spines that carried at least 10 %
# of the run's packets, and 50 or more (perftest's TCP side channel, pinned to
# the last spine, moves a few dozen), each way: "data/acks" (e.g. "3/1" or
# "1234/1234"; "-": none), then the drops and CE marks of spine queues.
function spread(s,   a, n, i, p, q, ta, tb, da, db, sa, sb, x) {
  n = split(s, a, " "); ta = tb = 0
  for (i = 1; i <= n; i++) if (a[i] ~ /^[0-9]+:[0-9-]+\/[0-9-]+$/) {
    split(a[i], p, ":"); split(p[2], q, "/"); da[p[1]] = q[1]; db[p[1]] = q[2]; ta += q[1]; tb += q[2]
  }
  sa = sb = ""
  for (i = 1; i <= 16; i++) if (i in da) {
    if (da[i] >= 50 && da[i] >= 0.1 * ta) sa = sa i
    if (db[i] >= 50 && db[i] >= 0.1 * tb) sb = sb i
  }
  x = ""
  for (i = 1; i <= n; i++) if (a[i] ~ /^spine[0-9]+_(dropped|marked)=[1-9]/) {
    split(a[i], p, "="); sub(/^spine/, "sp", p[1]); sub(/_dropped/, " drop ", p[1]); sub(/_marked/, " CE ", p[1])
    x = x ", " p[1] p[2]
  }
  return (sa == "" ? "-" : sa) "/" (sb == "" ? "-" : sb) x
}
function br(s) { return s == "" ? "" : " [" s "]" }
$1 == "BENCH" {
  kv($0)
  if (f["dev"] == "tcp") { tcp = f["value"]; next }
  val[f["dev"], f["row"], f["rep"]] = f["value"]; if (f["rep"] > maxrep) maxrep = f["rep"]
  if (f["value"] == "fail" || f["value"] == "timeout") nfail[f["dev"]]++
  nruns++
}
# via1(SPREAD): 1 when spine 1 carried the run's data or acks
function via1(s,   p) { split(s, p, ","); return p[1] ~ /1/ }
$1 == "SPINES" {
  kv($0); sp[f["dev"], f["row"], f["rep"]] = spread($0)
  if (via1(sp[f["dev"], f["row"], f["rep"]])) hit[f["dev"], f["row"]]++
  seen[f["dev"], f["row"]]++
}
END {
  nrows = split("lossless down gray100 gray5 congest qp8", rows, " ")
  ev["lossless"] = "none"; ev["down"] = "spine 1 hard down"; ev["gray100"] = "spine 1 gray, 100 % loss"
  ev["gray5"] = "spine 1 gray, 5 % loss"; ev["congest"] = "spine 1 A->B at " rate; ev["qp8"] = "none, 8 QPs"
  printf "\nmetaroce fabric bench, %s, commit %s (two QEMU guests, %d s)\n", when, commit, secs
  printf "ib_write_bw 64 KiB, guest 1 -> guest 2 across 4 spines (ECMP, L4 hash), median of %d run(s), MiB/s;\n", maxrep
  print "frac = fraction of the same device's lossless fabric median; timeout/fail counts as 0 in a median\n"
  fmt = "%-9s %-26s %9s %5s %9s %5s %7s  %s\n"
  printf fmt, "row", "event", "rxe", "frac", "metaroce", "frac", "mr/rxe", "rxe via sp1"
  printf fmt, "---", "-----", "---", "----", "--------", "----", "------", "-----------"
  r0 = med("rxe0", "lossless"); m0 = med("mr0", "lossless")
  for (i = 1; i <= nrows; i++) {
    r = med("rxe0", rows[i]); m = med("mr0", rows[i])
    h = rows[i] == "down" || !(("rxe0" SUBSEP rows[i]) in seen) ? "-" : (hit["rxe0", rows[i]] + 0) "/" seen["rxe0", rows[i]]
    printf fmt, rows[i], ev[rows[i]], r, div(r, r0), m, div(m, m0), div(m, r), h
  }
  print "(rxe via sp1: rxe runs in which spine 1 carried >= 10 % of the data or the acks)"
  print "\nruns: MiB/s [spines that carried >= 10 % of the run's packets: data A->B / acks B->A;"
  print "spine queue drops and CE marks during the run]"
  fmt2 = "%-9s %3s  %-30s %-30s\n"
  printf fmt2, "row", "rep", "rxe", "metaroce"
  for (i = 1; i <= nrows; i++)
    for (k = 1; k <= maxrep; k++) {
      r = ("rxe0" SUBSEP rows[i] SUBSEP k) in val ? val["rxe0", rows[i], k] : "-"
      m = ("mr0" SUBSEP rows[i] SUBSEP k) in val ? val["mr0", rows[i], k] : "-"
      printf fmt2, rows[i], k, r br(sp["rxe0", rows[i], k]), m br(sp["mr0", rows[i], k])
    }
  if (tcp != "") printf "\none spine's TCP ceiling: iperf3 guest 1 -> guest 2 over spine 4, 10 s: %s MiB/s\n", tcp
  print "guests run under TCG emulation: only ratios within one run mean anything."
  if (nruns == 0) print "\nno BENCH lines from guest 1: the run broke early, see the log"
  else if (nfail["rxe0"] + nfail["mr0"])
    printf "fail/timeout runs: rxe %d, metaroce %d; details in the log (# lines after each)\n", nfail["rxe0"], nfail["mr0"]
}
