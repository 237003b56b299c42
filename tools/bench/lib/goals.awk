# The project's performance goals checked against summary.tsv (see report.awk for its
# columns), one column per walfs target: the measured ratio (or MiB) and ok / MISS.
#   awk -F'\t' -v fmt=text|md -f goals.awk summary.tsv
# Goals whose figures are missing (workload not run, baseline skipped) show "-".

function goal(id, text, workload_prefix, metric, column, op, limit) {
  ngoals++
  g_text[ngoals] = text; g_prefix[ngoals] = workload_prefix; g_metric[ngoals] = metric
  g_col[ngoals] = column; g_op[ngoals] = op; g_limit[ngoals] = limit
}

function cell(v, op, limit, unit,    ok) {
  if (v == "") return "-"
  ok = (op == ">=") ? (v >= limit) : (v <= limit)
  return sprintf("%s%s %s", (unit == "MiB") ? sprintf("%.1f ", v) : sprintf(v >= 10 ? "%.1f" : "%.2f", v),
                 unit == "MiB" ? "MiB" : "x", ok ? "ok" : "MISS")
}

BEGIN {
  FS = "\t"
  nw = split("walfs-pmem walfs-direct walfs-msync-tmpfs walfs-msync-disk", walfs, " ")
  # columns of summary.tsv: 10 max, 13 vs_tmpfs, 14 vs_ext4, 15 vs_passthrough_ll
  goal(1, "pg_test_fsync 8 KiB + fdatasync >= 3x passthrough_ll", "pg_test_fsync", "8 KiB write + fdatasync", 15, ">=", 3)
  goal(2, "pg_test_fsync 8 KiB + fdatasync >= 25x ext4", "pg_test_fsync", "8 KiB write + fdatasync", 14, ">=", 25)
  goal(3, "pgbench TPS, 1 client >= 0.97x tmpfs", "pgbench", "clients=1", 13, ">=", 0.97)
  goal(4, "pgbench TPS, 4 clients >= 0.97x tmpfs", "pgbench", "clients=4", 13, ">=", 0.97)
  goal(5, "pgbench TPS, 8 clients >= 0.97x tmpfs", "pgbench", "clients=8", 13, ">=", 0.97)
  goal(6, "pgbench TPS, 1 client >= 1.5x ext4", "pgbench", "clients=1", 14, ">=", 1.5)
  goal(7, "pgbench TPS, 4 clients >= 1.5x ext4", "pgbench", "clients=4", 14, ">=", 1.5)
  goal(8, "pgbench TPS, 8 clients >= 1.5x ext4", "pgbench", "clients=8", 14, ">=", 1.5)
  goal(9, "1 KiB INSERT commits/s >= 0.95x tmpfs", "1 KiB INSERT", "commits/s", 13, ">=", 0.95)
  goal(10, "bulk load, wal_init_zero=on: time <= 1.10x tmpfs", "bulk load", "wal_init_zero=on: elapsed", 13, "<=", 1.10)
  goal(11, "daemon RSS outside the pool <= 32 MiB (max sample)", "walfs daemon memory", "RSS outside the pool mapping", 10, "<=", 32)
  # Direct access (walfs-direct): no system call is left on the commit path.
  goal(12, "pg_test_fsync 8 KiB + fdatasync >= 1.5x tmpfs", "pg_test_fsync", "8 KiB write + fdatasync", 13, ">=", 1.5)
  goal(13, "bulk load, wal_init_zero=on: time <= 1.0x tmpfs", "bulk load", "wal_init_zero=on: elapsed", 13, "<=", 1.0)
  goal(14, "bulk load, wal_init_zero=on: time <= 1.0x ext4", "bulk load", "wal_init_zero=on: elapsed", 14, "<=", 1.0)
}

NR > 1 {
  for (i = 1; i <= ngoals; i++)
    if (index($1, g_prefix[i]) == 1 && $2 == g_metric[i]) value[i, $5] = $(g_col[i])
}

END {
  if (fmt == "md") {
    printf "\n### Goals\n\n| goal |"
    for (w = 1; w <= nw; w++) printf " %s |", walfs[w]
    printf "\n|---|"
    for (w = 1; w <= nw; w++) printf "---:|"
    printf "\n"
  } else {
    printf "\n== goals (ratio of medians, or MiB) ==\n  %-52s", "goal"
    for (w = 1; w <= nw; w++) printf " %18s", walfs[w]
    printf "\n"
  }
  for (i = 1; i <= ngoals; i++) {
    unit = (g_col[i] == 10) ? "MiB" : "x"
    if (fmt == "md") printf "| %s |", g_text[i]
    else printf "  %-52s", g_text[i]
    for (w = 1; w <= nw; w++) {
      c = cell(value[i, walfs[w]], g_op[i], g_limit[i], unit)
      if (fmt == "md") printf " %s |", c
      else printf " %18s", c
    }
    printf "\n"
  }
}
