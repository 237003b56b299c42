# Summarises raw.tsv (workload, metric, unit, better, target, rep, value) into one table
# per workload+metric: per target the median of the repetitions, min..max, the count,
# and the median's ratio to each baseline target present (tmpfs, ext4, passthrough_ll,
# memory). Ratios are target/baseline for every metric; the heading says whether higher
# or lower is better.
#   awk -F'\t' -v fmt=text|md|tsv -v targets="t1 t2 ..." -f stats.awk -f report.awk raw.tsv
# `targets` orders the rows; targets not in it follow in order of appearance.
#
# Text and markdown add, under a table with tmpfs in it, the paired comparison: per
# target the median over repetitions of (its figure / tmpfs's figure in the same
# repetition), and in how many repetitions it was the better one. Each repetition visits
# every target close together in time, so on a machine whose speed drifts between
# minutes the paired ratio is steadier than the ratio of two medians.

function fmt_ratio(x) {
  if (x == "") return "-"
  if (x >= 10) return sprintf("%.1fx", x)
  if (x >= 0.1) return sprintf("%.2fx", x)
  return sprintf("%.2gx", x)
}

# Right-aligns s to the width of `head` (the column heading), at least 9.
function pad(s, head,    w) {
  if (head == "") head = s
  w = length(head) < 9 ? 9 : length(head)
  return sprintf("%" w "s", s)
}

function add_target(t) {
  if (!(t in target_index)) { target_index[t] = ++ntargets; target_name[ntargets] = t }
}

BEGIN {
  FS = "\t"
  nbase = split("tmpfs ext4 passthrough_ll memory", base, " ")
  n = split(targets, ordered, " ")
  for (i = 1; i <= n; i++) add_target(ordered[i])
}

NF >= 7 {
  key = $1 SUBSEP $2
  if (!(key in key_seen)) {
    key_seen[key] = 1
    keys[++nkeys] = key
    key_workload[key] = $1; key_metric[key] = $2; key_unit[key] = $3; key_better[key] = $4
  }
  add_target($5)
  kt = key SUBSEP $5
  present[kt] = 1
  if ($7 == "NA" || $7 == "") { failed[kt]++ }
  else { cnt[kt]++; vals[kt, cnt[kt]] = $7 + 0; byrep[kt, $6] = $7 + 0; reps_of[kt] = reps_of[kt] " " $6 }
}

# The paired line for the table `key` (text or md), or nothing when tmpfs has no figures.
function paired(key,    bt, ti, t, kt, n, i, r, nr, rs, ratios, wins, line, sep) {
  bt = key SUBSEP "tmpfs"
  if (key_better[key] == "info" || !(bt in present) || cnt[bt] + 0 == 0) return
  line = ""; sep = ""
  for (ti = 1; ti <= ntargets; ti++) {
    t = target_name[ti]; kt = key SUBSEP t
    if (t == "tmpfs" || !(kt in present)) continue
    nr = split(reps_of[kt], rs, " ")
    n = 0; wins = 0
    delete ratios
    for (i = 1; i <= nr; i++) {
      r = rs[i]
      if (!((bt, r) in byrep) || byrep[bt, r] == 0) continue
      ratios[++n] = byrep[kt, r] / byrep[bt, r]
      if (key_better[key] == "lower" ? byrep[kt, r] < byrep[bt, r] : byrep[kt, r] > byrep[bt, r]) wins++
    }
    if (n == 0) continue
    sort_numeric(ratios, n)
    line = line sep t " " fmt_ratio(median_sorted(ratios, n)) " (better in " wins "/" n ")"
    sep = ", "
  }
  if (line == "") return
  if (fmt == "md") printf "\nPaired with tmpfs, same repetition: %s\n", line
  else printf "  paired with tmpfs, same repetition: %s\n", line
}

END {
  if (fmt == "tsv")
    print "workload\tmetric\tunit\tbetter\ttarget\tn\tfailed\tmedian\tmin\tmax\tq1\tq3\tvs_tmpfs\tvs_ext4\tvs_passthrough_ll\tvs_memory"
  last_workload = ""
  for (k = 1; k <= nkeys; k++) {
    key = keys[k]
    # Per-target statistics.
    for (ti = 1; ti <= ntargets; ti++) {
      t = target_name[ti]; kt = key SUBSEP t
      med[t] = ""; lo[t] = ""; hi[t] = ""; q1[t] = ""; q3[t] = ""
      if (!(kt in present)) continue
      m = cnt[kt] + 0
      if (m == 0) continue
      delete s
      for (i = 1; i <= m; i++) s[i] = vals[kt, i]
      sort_numeric(s, m)
      med[t] = median_sorted(s, m)
      lo[t] = s[1]; hi[t] = s[m]
      q1[t] = s[int((m - 1) * 0.25) + 1]; q3[t] = s[m - int((m - 1) * 0.25)]
    }
    # Which baselines this table has (and the ratios are meaningful for).
    nb = 0
    if (key_better[key] != "info")
      for (b = 1; b <= nbase; b++)
        if (med[base[b]] != "" && med[base[b]] != 0) cols[++nb] = base[b]
    better = key_better[key] == "info" ? "for information" : key_better[key] " is better"

    if (fmt == "text" || fmt == "md") {
      if (key_workload[key] != last_workload) {
        if (fmt == "md") printf "\n### %s\n", key_workload[key]
        else printf "\n== %s ==\n", key_workload[key]
        last_workload = key_workload[key]
      }
      if (fmt == "md") {
        printf "\n%s [%s, %s]\n\n| target | median | min..max | n |", key_metric[key], key_unit[key], better
        for (b = 1; b <= nb; b++) printf " vs %s |", cols[b]
        printf "\n|---|---:|---:|---:|"
        for (b = 1; b <= nb; b++) printf "---:|"
        printf "\n"
      } else {
        printf "\n-- %s [%s, %s]\n", key_metric[key], key_unit[key], better
        printf "  %-19s %10s %21s %5s", "target", "median", "min..max", "n"
        for (b = 1; b <= nb; b++) printf " %s", pad("vs " cols[b])
        printf "\n"
      }
    }
    for (ti = 1; ti <= ntargets; ti++) {
      t = target_name[ti]; kt = key SUBSEP t
      if (!(kt in present)) continue
      nf = failed[kt] + 0; m = cnt[kt] + 0
      if (fmt == "tsv") {
        printf "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s", key_workload[key], key_metric[key],
          key_unit[key], key_better[key], t, m, nf, med[t], lo[t], hi[t], q1[t], q3[t]
        for (b = 1; b <= nbase; b++) {
          r = ""
          if (key_better[key] != "info" && med[t] != "" && med[base[b]] != "" && med[base[b]] != 0)
            r = sprintf("%.3f", med[t] / med[base[b]])
          printf "\t%s", r
        }
        printf "\n"
        continue
      }
      if (m == 0) { mtxt = "FAILED"; rng = "-" }
      else { mtxt = fmt_num(med[t]); rng = fmt_num(lo[t]) ".." fmt_num(hi[t]) }
      ntxt = m (nf ? "+" nf "F" : "")
      if (fmt == "md") printf "| %s | %s | %s | %s |", t, mtxt, rng, ntxt
      else printf "  %-19s %10s %21s %5s", t, mtxt, rng, ntxt
      for (b = 1; b <= nb; b++) {
        r = (med[t] != "") ? fmt_ratio(med[t] / med[cols[b]]) : "-"
        if (fmt == "md") printf " %s |", r
        else printf " %s", pad(r, "vs " cols[b])
      }
      printf "\n"
    }
    if (fmt == "text" || fmt == "md") paired(key)
  }
}
