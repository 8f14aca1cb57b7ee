# The table of tools/bench.sh (see there and Documentation/bench.rst), from
# the BENCH lines of both guests, one per input line without the "# BENCH "
# prefix: "side=server dev=mr0 test=write_bw size=65536 loss=0 value=4.31
# unit=MiB/s pkmsg=64.25 cpu=21.0 rep=2". Guest 1 (side=server) gives the
# figures (guest 2 those of ib_read_lat, which reports on the client only);
# both sides give kernel CPU time per MiB. Lossless, loss and reordering rows ran in rounds
# (rep=1..N): each device's figure is its median over the rounds, and each
# ratio the median of the rounds' ratios, with their range. Variables: when,
# secs, commit.
function kv(s,   a, i, n, p) {
  split("", f); n = split(s, a, " ")
  for (i = 1; i <= n; i++) { p = index(a[i], "="); f[substr(a[i], 1, p - 1)] = substr(a[i], p + 1) }
}
function hsize(s) {
  if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MiB"
  if (s >= 1024 && s % 1024 == 0) return s / 1024 " KiB"
  return s " B"
}
function num(x) { return x ~ /^[0-9.]+$/ }
function div(a, b) { return (num(a) && num(b) && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
# median of the n numbers in m[1..n] (sorted in place); "-" if none
function median(m, n,   i, j, t) {
  if (n == 0) return "-"
  for (i = 2; i <= n; i++) for (j = i; j > 1 && m[j - 1] > m[j]; j--) { t = m[j]; m[j] = m[j - 1]; m[j - 1] = t }
  return n % 2 ? m[(n + 1) / 2] : (m[n / 2] + m[n / 2 + 1]) / 2
}
# collect KEY's figure (array A: val or cpu) over the rounds into m[]; count of numbers
function gather(A, key,   r, n) {
  split("", m); n = 0
  for (r = 1; r <= nrep; r++) if ((key SUBSEP r) in A && num(A[key, r])) m[++n] = A[key, r] + 0
  return n
}
# a figure: the median over rounds, or the single run's; "-" if none,
# "fail"/"timeout" if no round gave a number
function get(test, size, loss, dev, side,   k, n, r) {
  k = test SUBSEP size SUBSEP loss SUBSEP dev SUBSEP side
  if ((k SUBSEP 0) in val) return val[k, 0]
  n = gather(val, k)
  if (n) return sprintf("%.2f", median(m, n))
  return nonnum(k)
}
# no round of KEY (array val) gave a number: the most frequent of its values
# (ties: timeout, then fail, then zero), whatever the rounds' order; "-" if none
function nonnum(k,   r, c, v, best) {
  split("", c)
  for (r = 1; r <= nrep; r++) if ((k SUBSEP r) in val) c[val[k, r]]++
  best = "-"
  for (v in c) if (best == "-" || c[v] > c[best] || (c[v] == c[best] && rank(v) < rank(best))) best = v
  return best
}
function rank(v) { return v == "timeout" ? 1 : v == "fail" ? 2 : v == "zero" ? 3 : 4 }
# get()'s figure as shown: with "(K/N)" when only K of the N rounds that ran it
# gave a number (the multiple-QP rows, which have no per-round ratio to say so)
function getn(test, size, loss, dev, side,   k, v, r, n, ran) {
  v = get(test, size, loss, dev, side); k = test SUBSEP size SUBSEP loss SUBSEP dev SUBSEP side
  n = ran = 0
  if ((k SUBSEP 0) in val) return v
  for (r = 1; r <= nrep; r++) if ((k SUBSEP r) in val) { ran++; if (num(val[k, r])) n++ }
  return (num(v) && n < ran) ? v "(" n "/" ran ")" : v
}
# ratio A[ka]/A[kb] over the rounds (the same round's two figures): "median
# [min-max]", or the single round's; "-" if no round has both. Sets lastratio.
# With miss0, a round whose A[ka] failed or timed out counts as 0.
function rounds(A, ka, kb, miss0,   r, n, med) {
  split("", m); n = 0; lastran = 0
  for (r = 0; r <= nrep; r++) {
    # (the rounds that ran the row at all: a --lossless bench pooled with full
    # ones has no loss rows in its rounds)
    if ((ka SUBSEP r) in A || (kb SUBSEP r) in A) lastran++
    if ((ka SUBSEP r) in A && (kb SUBSEP r) in A && num(A[kb, r]) && A[kb, r] > 0) {
      if (num(A[ka, r])) m[++n] = A[ka, r] / A[kb, r]
      else if (miss0 && (A[ka, r] == "fail" || A[ka, r] == "timeout")) m[++n] = 0
    }
  }
  lastn = n
  if (n == 0) { lastratio = "-"; return "-" }
  med = median(m, n); lastratio = med
  return n == 1 ? sprintf("%.2f", med) : sprintf("%.2f [%.2f-%.2f]", med, m[1], m[n])
}
# a ratio from rounds() as shown: with "(K/N)" when only K of the N rounds that
# ran the row gave one (a run that failed or timed out, on either device, left
# its round out)
function shown(q) { return (lastran > 1 && lastn < lastran && q != "-") ? q " (" lastn "/" lastran ")" : q }
# whether a round of KEY (array val) failed or timed out
function failed(key,   r) {
  for (r = 0; r <= nrep; r++) if ((key SUBSEP r) in val && (val[key, r] == "fail" || val[key, r] == "timeout")) return 1
  return 0
}
# whether the log has the event-mode row (a log from before stop 58 has none)
function has_ev() {
  return get("send_bw_ev", 65536, 0, "rxe0", "server") != "-" || get("send_bw_ev", 65536, 0, "mr0", "server") != "-"
}
# ratio mr0/rxe0 of array A over the rounds: "median [min-max]"
function ratio(A, test, size, side) {
  return rounds(A, test SUBSEP size SUBSEP 0 SUBSEP "mr0" SUBSEP side, test SUBSEP size SUBSEP 0 SUBSEP "rxe0" SUBSEP side)
}
# whether V meets the target (KIND "ge" or "le") X
function meets(kind, x, v) { return kind == "ge" ? v + 0 >= x : v + 0 <= x }
# the target column: "yes", "NO", "-" (no figure); a miss that the two decimals
# shown would round to a hit also shows its third; with BROKE (a metaroce run
# failed or timed out), a miss whatever V
function tgt(kind, x, v, broke,   verdict) {
  if (kind == "") return ""
  if (broke) verdict = "NO (a run failed)"
  else if (!num(v)) verdict = "-"
  else if (meets(kind, x, v)) verdict = "yes"
  else verdict = meets(kind, x, sprintf("%.2f", v)) ? sprintf("NO (%.3f)", v) : "NO"
  return sprintf("%s %-4s %s", kind == "ge" ? ">=" : "<=", x, verdict)
}
# each fail/timeout/zero figure counts once, as it is read
function bad(v) { if (v == "fail" || v == "timeout" || v == "zero") nfail++ }
function cmed(A, test, size, dev, side,   n) {
  n = gather(A, test SUBSEP size SUBSEP 0 SUBSEP dev SUBSEP side)
  return n ? sprintf("%.1f", median(m, n)) : "-"
}
function row(test, size, unit, kind, x,   r, mr, q, side, v) {
  side = test == "read_lat" ? "client" : "server"
  r = get(test, size, 0, "rxe0", side); mr = get(test, size, 0, "mr0", side)
  q = ratio(val, test, size, side); v = lastratio; q = shown(q)
  # (a metaroce run that failed or timed out in any round is a miss, whatever the
  # other rounds' ratio)
  printf "%-10s %-7s %-6s %9s %9s %-18s %s\n", test, hsize(size), unit, r, mr, q, \
    tgt(kind, x, v, failed(test SUBSEP size SUBSEP 0 SUBSEP "mr0" SUBSEP side))
}
# a CPU row of array A (cpu: the measured kernel time; tick: the sampled ticks)
# (informational, no target: the event-mode row)
function crow(A, test, size, informational,   qs, qc, ls, lc) {
  qs = ratio(A, test, size, "server"); ls = lastratio
  qc = ratio(A, test, size, "client"); lc = lastratio
  printf "%-10s %-7s %6s %6s %-18s %6s %6s %-18s %s\n", test, hsize(size), \
    cmed(A, test, size, "rxe0", "server"), cmed(A, test, size, "mr0", "server"), qs, \
    cmed(A, test, size, "rxe0", "client"), cmed(A, test, size, "mr0", "client"), qc, \
    informational ? "" : tgt("le", 0.6, ls) " | " tgt("le", 0.6, lc)
}
function ctable(A, title,   i) {
  print title
  print "(receives the data), cli = guest 2 (sends it); mr/rxe = median of the rounds\047 ratios [range]"
  printf "%-10s %-7s %6s %6s %-18s %6s %6s %-18s %s\n", "test", "size", "rxe", "mr", "srv mr/rxe", "rxe", "mr", "cli mr/rxe", "target srv | cli"
  printf "%-10s %-7s %6s %6s %-18s %6s %6s %-18s %s\n", "----", "----", "---", "--", "----------", "---", "--", "----------", "----------------"
  for (i = 1; i <= n; i++) { crow(A, tests[i], 4096); crow(A, tests[i], 65536); crow(A, tests[i], 1048576) }
  if (has_ev()) crow(A, "send_bw_ev", 65536, 1)
}
# packets the server received per message under LOSS over the same round's
# lossless figure: the median over the rounds; a log from before the loss rows
# ran in rounds (no rep= on them): the medians' quotient; "-" if neither
function pk(test, size, loss, dev) {
  rounds(pkm, test SUBSEP size SUBSEP loss SUBSEP dev, test SUBSEP size SUBSEP 0 SUBSEP dev)
  if (num(lastratio)) return sprintf("%.2f", lastratio)
  return div(pkmed(test SUBSEP size SUBSEP loss SUBSEP dev), pkmed(test SUBSEP size SUBSEP 0 SUBSEP dev))
}
# the median of pkm[KEY] over the rounds, or its one run without a round; "-"
function pkmed(key,   n) {
  n = gather(pkm, key)
  if (n) return median(m, n)
  return (key SUBSEP 0) in pkm ? pkm[key, 0] : "-"
}
# loss "r25": netem reorder 25 % (delay 1ms), no loss
function lab(l) { return l ~ /^r/ ? "ro" substr(l, 2) "%" : l "%" }
# a loss row: each device's median, its fraction of its own lossless figure
# (the median of the rounds' own fractions, each over the same round's
# lossless run, with their range; a log from before the loss rows ran in
# rounds: the medians' quotient) and mr/rxe likewise
# (a round whose loss run failed or timed out counts as a fraction of 0: a
# miss, not a round left out)
function lfrac(test, size, loss, dev,   v) {
  v = rounds(val, test SUBSEP size SUBSEP loss SUBSEP dev SUBSEP "server", test SUBSEP size SUBSEP 0 SUBSEP dev SUBSEP "server", 1)
  if (v == "-") { v = div(get(test, size, loss, dev, "server"), get(test, size, 0, dev, "server")); lastratio = v }
  return v
}
function lrow(test, size, loss, kind, x,   r, mr, rf, mf, mv, q) {
  r = get(test, size, loss, "rxe0", "server"); mr = get(test, size, loss, "mr0", "server")
  rf = lfrac(test, size, loss, "rxe0"); mf = lfrac(test, size, loss, "mr0"); mv = lastratio
  # (a metaroce run that failed or timed out counts as 0, as in its frac)
  q = shown(rounds(val, test SUBSEP size SUBSEP loss SUBSEP "mr0" SUBSEP "server", test SUBSEP size SUBSEP loss SUBSEP "rxe0" SUBSEP "server", 1))
  printf "%-10s %-7s %6s %9s %-17s %9s %-17s %-17s %6s %6s   %s\n", test, hsize(size), lab(loss), r, rf, mr, mf, q, \
    pk(test, size, loss, "rxe0"), pk(test, size, loss, "mr0"), \
    tgt(kind, x, (mr == "fail" || mr == "timeout") ? 0 : mv)
}
# (R, MR, S: the figures; the shown ones, getn()'s, in dr[], dm[], ds[] by label)
function mqrow(label, r, mr, s, kind, x) {
  printf "%-10s %-5s %11s %11s %11s %7s %7s %7s   %s\n", label == "1" ? test_ : "", label, \
    label in dr ? dr[label] : r, label in dm ? dm[label] : mr, label in ds ? ds[label] : s, \
    label == "16/1" ? "" : div(mr, r), label == "16/1" ? "" : div(s, r), label == "16/1" ? "" : div(s, mr), tgt(kind, x, s)
}
function mqrows(test,   r1, m1, s1, r16, m16, s16) {
  test_ = test
  r1 = get(test "_q1", 65536, 0, "rxe0", "server"); m1 = get(test "_q1", 65536, 0, "mr0", "server")
  s1 = get(test "_q1", 65536, 0, "mr0s", "server")
  r16 = get(test "_q16", 65536, 0, "rxe0", "server"); m16 = get(test "_q16", 65536, 0, "mr0", "server")
  s16 = get(test "_q16", 65536, 0, "mr0s", "server")
  split("", dr); split("", dm); split("", ds)
  dr["1"] = getn(test "_q1", 65536, 0, "rxe0", "server"); dm["1"] = getn(test "_q1", 65536, 0, "mr0", "server")
  ds["1"] = getn(test "_q1", 65536, 0, "mr0s", "server")
  dr["16"] = getn(test "_q16", 65536, 0, "rxe0", "server"); dm["16"] = getn(test "_q16", 65536, 0, "mr0", "server")
  ds["16"] = getn(test "_q16", 65536, 0, "mr0s", "server")
  mqrow("1", r1, m1, s1); mqrow("16", r16, m16, s16)
  mqrow("16/1", div(r16, r1), div(m16, m1), div(s16, s1), "ge", 1)
}
{
  kv($0); l = ("loss" in f) ? f["loss"] : 0; r = ("rep" in f) ? f["rep"] + 0 : 0
  if (r > nrep) nrep = r
  k = f["test"] SUBSEP f["size"] SUBSEP l SUBSEP f["dev"] SUBSEP f["side"]
  # perftest now and then reports a bandwidth of 0.00 for a run that moved its
  # data (its own clock): no figure, not a zero
  # (nor is a latency of 0.00 usec)
  if ((f["unit"] == "MiB/s" || f["unit"] == "usec") && num(f["value"]) && f["value"] + 0 == 0) f["value"] = "zero"
  if (f["side"] == "server" || f["test"] == "read_lat") { val[k, r] = f["value"]; bad(f["value"]) }
  if ("cpu" in f) cpu[k, r] = f["cpu"]
  if ("tick" in f) tick[k, r] = f["tick"]
  # (packets per message only from a run that gave a figure)
  if ("pkmsg" in f && f["side"] == "server" && num(f["value"])) pkm[f["test"], f["size"], l, f["dev"], r] = f["pkmsg"]
  if (l != 0 && !(l in seen)) { seen[l] = 1; losses[++nl] = l }
  if (f["test"] ~ /_q[0-9]+$/) nmq++
}
END {
  printf "\nmetaroce bench, %s, commit %s (two QEMU guests, %d s, %d round(s))\n\n", when, commit, secs, nrep
  print "lossless: each device's median over the rounds; mr/rxe = median of the rounds' ratios [range]"
  printf "%-10s %-7s %-6s %9s %9s %-18s %s\n", "test", "size", "unit", "rxe", "metaroce", "mr/rxe", "target mr/rxe"
  printf "%-10s %-7s %-6s %9s %9s %-18s %s\n", "----", "----", "----", "---", "--------", "------", "-------------"
  n = split("write_bw send_bw", tests, " ")
  for (i = 1; i <= n; i++) {
    row(tests[i], 4096, "MiB/s", "ge", 1.5); row(tests[i], 65536, "MiB/s", "ge", 1.5); row(tests[i], 1048576, "MiB/s", "ge", 1.5)
  }
  if (has_ev()) row("send_bw_ev", 65536, "MiB/s", "", 0)
  row("write_lat", 64, "usec", "le", 1); row("send_lat", 64, "usec", "le", 1); row("read_lat", 64, "usec", "le", 1)
  t = get("iperf3", 0, 0, "tcp", "server")
  if (t == "na") print "\niperf3: not installed"
  else {
    printf "\nceiling: iperf3 TCP guest 2 -> guest 1, same link: %s MiB/s; write_bw 64 KiB / iperf3: rxe %s, metaroce %s   %s\n", \
      t, div(get("write_bw", 65536, 0, "rxe0", "server"), t), div(get("write_bw", 65536, 0, "mr0", "server"), t), \
      tgt("ge", 0.8, div(get("write_bw", 65536, 0, "mr0", "server"), t))
  }
  ctable(cpu, "\nkernel CPU per MiB moved, ms (non-idle time split by the sampled kernel share; median over the rounds); srv = guest 1")
  if (length(tick)) ctable(tick, "\nthe same from the sampled system, irq and softirq ticks alone (misses softirq work on an idle CPU); srv = guest 1")
  print "\nunder loss (netem loss on both guests\047 egress) and reordering (ro25%: netem delay 1ms reorder 25%), MiB/s;"
  print "each device\047s median over the rounds; \"frac\" = the median [range] of the rounds\047 fractions of the same device\047s"
  print "lossless 64 KiB figure in the same round; mr/rxe likewise; \"rxe pk\", \"mr pk\" = packets the server received per"
  print "message against the same device\047s lossless 64 KiB run of the same round, median over the rounds (above 1:"
  print "spurious retransmissions)"
  printf "%-10s %-7s %6s %9s %-17s %9s %-17s %-17s %6s %6s   %s\n", "test", "size", "loss", "rxe", "frac", "metaroce", "frac", "mr/rxe", "rxe pk", "mr pk", "target mr frac"
  printf "%-10s %-7s %6s %9s %-17s %9s %-17s %-17s %6s %6s   %s\n", "----", "----", "----", "---", "----", "--------", "----", "------", "------", "-----", "--------------"
  if (nl == 0) print "(no loss rows)"
  for (i = 1; i <= n; i++)
    for (k = 1; k <= nl; k++)
      lrow(tests[i], 65536, losses[k], losses[k] == 1 ? "ge" : losses[k] == 10 ? "ge" : "", losses[k] == 1 ? 0.95 : 0.6)
  if (!nmq) { print "\n(no multiple-QP rows)" } else {
  print "\nmultiple QPs, lossless, 64 KiB, 16 MiB per run (1 QP: 256 messages; 16 QPs: -q 16, 16 each), MiB/s;"
  print "\"mr/QP\" = metaroce with a connection per QP (shared=0), \"mr/shared\" = metaroce with one connection"
  print "per peer for all QPs (shared=1); the \"16/1\" rows: each device\047s 16-QP figure over its 1-QP one"
  printf "%-10s %-5s %11s %11s %11s %7s %7s %7s   %s\n", "test", "QPs", "rxe", "mr/QP", "mr/shared", "QP/rxe", "sh/rxe", "sh/QP", "target 16/1 (shared)"
  printf "%-10s %-5s %11s %11s %11s %7s %7s %7s   %s\n", "----", "---", "---", "-----", "---------", "------", "------", "-----", "--------------------"
  for (i = 1; i <= n; i++) mqrows(tests[i])
  }
  print "\ntargets: metaroce >= 1.5x rxe lossless bandwidth; 64 B latencies (t_avg, usec) <= rxe;"
  print "write_bw 64 KiB >= 0.8 of iperf3 TCP; kernel CPU per MiB <= 0.6x rxe on each side;"
  print "metaroce under loss >= 0.95 of its lossless bandwidth at 1 % loss and >= 0.6 at 10 %;"
  print "16 QPs sharing one connection carry at least what one QP does (16/1 >= 1)."
  print "bandwidth in MiB/s (perftest\047s MB/sec), higher is better; latency lower is better."
  print "send_bw_ev: ib_send_bw -e (both sides sleep on a completion channel instead of busy-polling), no target."
  print "loss and reordering rows run 128 x 64 KiB, capped at 60 s (one that timed out is not run again in later rounds);"
  print "lossless 64 KiB rows run 256 x 64 KiB."
  print "guests run under TCG emulation: only the ratio within one run means anything."
  if (NR == 0) print "\nno BENCH lines from guest 1: the run broke early, see the log"
  else if (nfail) printf "%d figure(s) fail/timeout/zero (zero: perftest reported 0.00 MiB/s); details in the log\n", nfail
}
