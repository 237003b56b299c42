#!/usr/bin/env bash
# The benchmark suite (tools/bench/run.sh) in its --smoke sizes, so it cannot rot: every
# workload runs once with tiny sizes against every target, and each result table must
# have a successful row per target, and crash recovery with the library preloaded (pmem
# mode's walfs-direct, msync mode's walfs-msync-reads) reads its WAL without a FUSE READ.
# Bounded to 7 minutes. Then the lever matrix (tools/bench/levers.sh --smoke: four
# settings, pg_test_fsync and the segment lifecycle), bounded to 2 minutes; then, where
# the PostgreSQL 17 chroot can be had (tools/pg-chroot), the suite with --pg-version 17:
# the WAL summarizer workload, whose reads on walfs-direct make no FUSE READ either,
# bounded to 3 minutes.
source "$(dirname "$0")/lib/common.sh"

require_postgres
require_fuse
[ -x "$WALFS_BUILD_DIR/tools/bench/walfs_segbench" ] || fail "walfs_segbench not built"

work=$(make_workdir)
# bounded SECS LOG WHAT CMD...: CMD with its output in LOG, failing (with LOG's tail) when
# it fails or takes longer than SECS.
bounded() {
  local secs=$1 logf=$2 what=$3 rc=0
  shift 3
  timeout --kill-after=20 "$secs" "$@" >"$logf" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -40 "$logf" >&2
    fail "$what exited with $rc (124: took longer than $secs s)"
  fi
}
out=$work/out
# --huge-pool: the tmpfs-backed pools on the suite's own huge=always tmpfs, which it
# must unmount again.
bounded 420 "$work/run.log" "run.sh --smoke" "$WALFS_SOURCE_DIR/tools/bench/run.sh" --smoke \
  --huge-pool --build-dir "$WALFS_BUILD_DIR" --out "$out"
grep -q '^tmpfs pools: .* huge=always$' "$out/machine.txt" ||
  fail "pools not on a huge=always tmpfs: $(grep '^tmpfs pools' "$out/machine.txt")"
grep -q '^target walfs-pmem: walfs, pool .*/pools/walfs-pmem.pool' "$out/machine.txt" ||
  fail "walfs-pmem's pool is not on the huge tmpfs: $(grep '^target walfs-pmem' "$out/machine.txt")"
if findmnt -n -t tmpfs -S walfs-bench-pools >/dev/null; then
  fail "run.sh left its huge tmpfs mounted: $(findmnt -n -S walfs-bench-pools)"
fi
summary=$out/summary.tsv
[ -s "$summary" ] || fail "no $summary"
cat "$out/results.txt"

targets=(walfs-pmem walfs-msync-tmpfs walfs-msync-disk tmpfs ext4 passthrough_ll)
if grep -q '^target passthrough_ll: SKIPPED: .*not found' "$out/machine.txt"; then
  log "passthrough_ll example source not installed: that target is not expected"
  targets=(walfs-pmem walfs-msync-tmpfs walfs-msync-disk tmpfs ext4)
fi

# expect_rows WORKLOAD_PREFIX METRIC TARGET...: one successful row (n >= 1, median set)
# per target in the table WORKLOAD_PREFIX*/METRIC.
expect_rows() {
  local prefix=$1 metric=$2 t row
  shift 2
  for t in "$@"; do
    row=$(awk -F'\t' -v p="$prefix" -v m="$metric" -v t="$t" \
      'index($1, p) == 1 && $2 == m && $5 == t' "$summary")
    [ -n "$row" ] || fail "no row for $t in '$prefix' / '$metric'"
    awk -F'\t' '{ exit !($6 >= 1 && $8 != "") }' <<<"$row" ||
      fail "'$prefix' / '$metric' failed on $t: $row"
  done
}

expect_rows "pg_test_fsync" "8 KiB write + fdatasync" "${targets[@]}"
expect_rows "pg_test_fsync" "8 KiB write + open_datasync" "${targets[@]}"
for c in 1 4 8; do expect_rows "pgbench TPC-B-like" "clients=$c" "${targets[@]}"; done
# What the whole machine did during each run (perf's migration count is optional).
expect_rows "pgbench TPC-B-like" "clients=4: machine idle, % of both CPUs" "${targets[@]}"
expect_rows "pgbench TPC-B-like" "clients=4: machine context switches per transaction" "${targets[@]}"
expect_rows "1 KiB INSERT per transaction" "machine steal, % of both CPUs" "${targets[@]}"
expect_rows "1 KiB INSERT per transaction" "commits/s" "${targets[@]}"
expect_rows "bulk load" "wal_init_zero=on: elapsed" "${targets[@]}"
expect_rows "bulk load" "wal_init_zero=off: elapsed" "${targets[@]}"
expect_rows "bulk load" "wal_init_zero=on: server CPU (PostgreSQL + walfs daemon)" "${targets[@]}"
grep -q '^  paired with tmpfs, same repetition: .*walfs-pmem [0-9.e+-]*x (better in [01]/1)' \
  "$out/results.txt" || fail "no paired comparison with tmpfs in results.txt"
expect_rows "segment lifecycle" "recycle (durable_rename to a future name)" "${targets[@]}"
expect_rows "walfs daemon memory" "RSS outside the pool mapping" \
  walfs-pmem walfs-msync-tmpfs walfs-msync-disk
if [ -x "$WALFS_BUILD_DIR/tools/bench/walfs_core_bench" ]; then
  expect_rows "core data path" "Write8K" memory file-pmem file-msync
  expect_rows "core data path" "Write8KFsync" memory file-pmem file-msync
fi
if [ -x "$WALFS_BUILD_DIR/tools/bench/walfs_direct_bench" ]; then
  for case in TmpfsWriteFdatasync DurableCopy DirectWriteFdatasync; do
    expect_rows "direct-path floor" "$case" rewrite sequential
  done
fi

expect_rows "crash recovery" "redo (the server log's \"redo done ... elapsed\")" "${targets[@]}"
# expect_zero WORKLOAD_PREFIX METRIC TARGET...: a successful row whose median is 0.
expect_zero() {
  local prefix=$1 metric=$2 t
  shift 2
  expect_rows "$prefix" "$metric" "$@"
  for t in "$@"; do
    awk -F'\t' -v p="$prefix" -v m="$metric" -v t="$t" \
      'index($1, p) == 1 && $2 == m && $5 == t { exit !($8 == 0) }' "$summary" ||
      fail "'$prefix' / '$metric' is not 0 on $t"
  done
}
expect_zero "crash recovery" "FUSE READ requests during the restart" walfs-direct walfs-msync-reads

# Ratios are computed against the baselines.
awk -F'\t' '$2 == "8 KiB write + fdatasync" && $5 == "tmpfs" { exit !($13 == "1.000") }' \
  "$summary" || fail "tmpfs ratio to itself is not 1.000"
[ -s "$out/results.md" ] || fail "no results.md"
log "bench smoke: every table has a row per target (${targets[*]})"

lout=$work/levers
bounded 120 "$work/levers.log" "levers.sh --smoke" "$WALFS_SOURCE_DIR/tools/bench/levers.sh" \
  --smoke --build-dir "$WALFS_BUILD_DIR" --out "$lout"
lsum=$lout/summary.tsv
[ -s "$lsum" ] || fail "no $lsum"
cat "$lout/levers.txt"
settings=(default th1 maxw128k)
# The zero-elision switch is an experiment: only builds made with
# -DWALFS_BENCH_EXPERIMENTS=ON run it; others must say it was skipped.
if grep -q '^setting nozero: SKIPPED: .*WALFS_BENCH_EXPERIMENTS' "$lout/machine.txt"; then
  log "experiment switches not built: the nozero setting was skipped, as it should be"
else
  settings+=(nozero)
fi
for t in "${settings[@]}"; do
  for metric in "8 KiB write + fdatasync" "create, wal_init_zero=on (32 x 8 KiB pwritev zero-fill + fsync + durable_rename)"; do
    row=$(awk -F'\t' -v m="$metric" -v t="$t" '$2 == m && $5 == t' "$lsum")
    [ -n "$row" ] || fail "levers: no row for $t / $metric"
    awk -F'\t' '{ exit !($8 >= 1 && $10 != "" && $14 != "") }' <<<"$row" ||
      fail "levers: $t / $metric has no median or ratio: $row"
  done
done
awk -F'\t' '$5 == "default" && $2 == "8 KiB write + fdatasync" { exit !($14 == "1.000") }' \
  "$lsum" || fail "levers: the default's ratio to itself is not 1.000"
log "levers smoke: rows and ratios for ${settings[*]}"

# The suite on PostgreSQL 17 (its chroot): the WAL summarizer workload.
rc=0
"$WALFS_SOURCE_DIR/tools/pg-chroot" ensure 17 >/dev/null || rc=$?
if [ "$rc" = 3 ]; then
  log "no PostgreSQL 17 chroot (Debian's archive unreachable): the --pg-version 17 run is not made"
else
  [ "$rc" = 0 ] || fail "tools/pg-chroot ensure 17 failed (exit $rc)"
  pout=$work/pg17
  bounded 180 "$work/pg17.log" "run.sh --smoke --pg-version 17" \
    "$WALFS_SOURCE_DIR/tools/bench/run.sh" --smoke --pg-version 17 \
    --targets walfs-direct,tmpfs --workloads summarize \
    --build-dir "$WALFS_BUILD_DIR" --out "$pout"
  grep -q '^postgresql: postgres (PostgreSQL) 17' "$pout/machine.txt" ||
    fail "--pg-version 17 did not run PostgreSQL 17: $(grep '^postgresql' "$pout/machine.txt")"
  summary=$pout/summary.tsv
  expect_rows "WAL summarizer" "TPC-B tps" walfs-direct tmpfs
  expect_zero "WAL summarizer" "FUSE READ requests during the run" walfs-direct
  log "bench smoke on PostgreSQL 17: the summarizer's reads bypassed FUSE"
fi

