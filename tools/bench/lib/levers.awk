# Summarises a lever run (tools/bench/levers.sh): per workload+metric, one row per
# setting with the median of its repetitions, min..max, the count, and the ratio of its
# median to the median of its lever's baseline setting.
#   awk -F'\t' -v fmt=text|md|tsv -v order="id1 id2 ..." -f stats.awk -f levers.awk \
#     levers.def raw.tsv
# levers.def: id|lever|setting|baseline id|... (levers.sh's table); raw.tsv: workload,
# metric, unit, better, setting id, rep, value. `order` orders the rows.

function fmt_ratio(x) { return x == "" ? "-" : sprintf("%.2fx", x) }

FNR == NR {
  split($0, f, "|")
  lever[f[1]] = f[2]; setting[f[1]] = f[3]; baseline[f[1]] = f[4]
  next
}

NF >= 7 {
  key = $1 SUBSEP $2
  if (!(key in key_seen)) {
    key_seen[key] = 1
    keys[++nkeys] = key
    key_workload[key] = $1; key_metric[key] = $2; key_unit[key] = $3; key_better[key] = $4
  }
  kt = key SUBSEP $5
  present[kt] = 1
  if ($7 == "NA" || $7 == "") failed[kt]++
  else { cnt[kt]++; vals[kt, cnt[kt]] = $7 + 0 }
}

END {
  nids = split(order, ids, " ")
  if (fmt == "tsv")
    print "workload\tmetric\tunit\tbetter\tsetting\tlever\tdescription\tn\tfailed\tmedian\tmin\tmax\tbaseline\tratio"
  last_workload = ""
  for (k = 1; k <= nkeys; k++) {
    key = keys[k]
    for (i = 1; i <= nids; i++) {
      id = ids[i]; kt = key SUBSEP id
      med[id] = ""; lo[id] = ""; hi[id] = ""
      m = cnt[kt] + 0
      if (m == 0) continue
      delete s
      for (j = 1; j <= m; j++) s[j] = vals[kt, j]
      sort_numeric(s, m)
      med[id] = median_sorted(s, m)
      lo[id] = s[1]; hi[id] = s[m]
    }
    better = key_better[key] == "info" ? "for information" : key_better[key] " is better"
    if (fmt == "md") {
      if (key_workload[key] != last_workload) printf "\n### %s\n", key_workload[key]
      printf "\n%s [%s, %s]\n\n| lever | setting | median | min..max | n | vs baseline |\n|---|---|---:|---:|---:|---:|\n",
        key_metric[key], key_unit[key], better
    } else if (fmt == "text") {
      if (key_workload[key] != last_workload) printf "\n== %s ==\n", key_workload[key]
      printf "\n-- %s [%s, %s]\n", key_metric[key], key_unit[key], better
      printf "  %-26s %-58s %10s %21s %4s %8s\n", "lever", "setting", "median", "min..max", "n", "ratio"
    }
    last_workload = key_workload[key]
    for (i = 1; i <= nids; i++) {
      id = ids[i]; kt = key SUBSEP id
      if (!(kt in present)) continue
      b = baseline[id]
      r = ""
      if (key_better[key] != "info" && med[id] != "" && med[b] != "" && med[b] != 0)
        r = med[id] / med[b]
      m = cnt[kt] + 0; nf = failed[kt] + 0
      if (fmt == "tsv") {
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", key_workload[key],
          key_metric[key], key_unit[key], key_better[key], id, lever[id], setting[id], m, nf,
          med[id], lo[id], hi[id], b, (r == "" ? "" : sprintf("%.3f", r))
        continue
      }
      mtxt = m ? fmt_num(med[id]) : "FAILED"
      rng = m ? fmt_num(lo[id]) ".." fmt_num(hi[id]) : "-"
      ntxt = m (nf ? "+" nf "F" : "")
      if (fmt == "md")
        printf "| %s | %s | %s | %s | %s | %s |\n", lever[id], setting[id], mtxt, rng, ntxt, fmt_ratio(r)
      else
        printf "  %-26s %-58s %10s %21s %4s %8s\n", lever[id], substr(setting[id], 1, 58), mtxt, rng, ntxt, fmt_ratio(r)
    }
  }
}
