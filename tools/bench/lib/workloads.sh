# shellcheck shell=bash
# The benchmark workloads (sourced by tools/bench/run.sh and levers.sh). Each wl_*
# function runs one repetition on one target and records its figures with `record`; a
# failed run records NA so the table shows it instead of the suite stopping.
#
# Settings (run.sh sets them): FSYNC_SECS, PGBENCH_SCALE, PGBENCH_SECS, PGBENCH_CLIENTS,
# INSERT_CLIENTS, BULK_SEGMENTS, RECOVERY_SEGMENTS, SYNCREP_CLIENTS, SEG_COUNT, CORE_MIN_TIME, OUT_DIR, SHM_ROOT, BENCH_BIN;
# BULK_ZERO_MODES (default "on off": the wal_init_zero settings of the bulk load);
# BULK_PROFILE=1 records each bulk load under a system-wide `perf record` into logs/.

# record WORKLOAD METRIC UNIT BETTER(higher|lower|info) TARGET REP VALUE
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT_DIR/raw.tsv"
}

# run_interleaved NAME FN [ARGS...]: REPS repetitions of `FN TARGET REP ARGS...` over
# RUN_TARGETS, each repetition starting at a different target (REP mod their number), so
# a shared machine's slow drifts spread over every target instead of favouring one.
run_interleaved() {
  local name=$1 fn=$2 rep i t n=${#RUN_TARGETS[@]}
  shift 2
  for ((rep = 1; rep <= REPS; rep++)); do
    for ((i = 0; i < n; i++)); do
      t=${RUN_TARGETS[(rep + i) % n]}
      log "$name rep $rep/$REPS on $t"
      "$fn" "$t" "$rep" "$@"
    done
  done
}

# run_pgbench_workloads: pgbench -i on every target, then the TPC-B, insert and/or
# profile runs the workload list asks for (has_workload), interleaved, then the
# clusters' teardown.
run_pgbench_workloads() {
  local t do_tpcb=0 do_ins=0
  has_workload pgbench && do_tpcb=1
  has_workload inserts && do_ins=1
  for t in "${RUN_TARGETS[@]}"; do
    log "pgbench -i -s $PGBENCH_SCALE on $t"
    pgb_setup "$t" || log "pgbench setup on $t failed: its runs are recorded as failed"
  done
  if [ $do_tpcb = 1 ] || [ $do_ins = 1 ]; then
    run_interleaved pgbench wl_pgbench "$do_tpcb" "$do_ins"
  fi
  if has_workload profile; then
    run_interleaved "pgbench profile" wl_profile
  fi
  for t in "${RUN_TARGETS[@]}"; do pgb_teardown "$t"; done
}

# ---------------------------------------------------------------- 1. pg_test_fsync
FSYNC_METHODS=(open_datasync fdatasync fsync open_sync)

# Runs pg_test_fsync until its "one 8kB write" section is complete (the only one
# reported), then stops it: that section is what a commit costs.
wl_fsync() {
  local target=$1 rep=$2 dir out pid i m v wl="pg_test_fsync (one 8 KiB write, ${FSYNC_SECS}s per method)"
  dir=$(target_dir "$target" fsync)
  out=$OUT_DIR/logs/pg_test_fsync.$target.$rep.log
  with_target_env "$target" stdbuf -oL "$PG_BIN/pg_test_fsync" -s "$FSYNC_SECS" \
    -f "$dir/pg_test_fsync.out" >"$out" 2>&1 &
  pid=$!
  for ((i = 0; i < 600; i++)); do
    grep -q 'two 8kB writes' "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -INT "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true  # it exits 1 when interrupted
  rm -rf "$dir"
  for m in "${FSYNC_METHODS[@]}"; do
    v=$(awk -v m="$m" '/one 8kB write/ {in_s = 1} /two 8kB writes/ {in_s = 0}
                       in_s && $1 == m && $3 == "ops/sec" {print $2}' "$out")
    record "$wl" "8 KiB write + $m" ops/s higher "$target" "$rep" "${v:-NA}"
  done
}

# ---------------------------------------------------------------- 2+3. pgbench
declare -A PGB_DATA=()  # target -> data directory of its pgbench cluster

pgb_setup() {
  local target=$1 wal data=$SHM_ROOT/pgdata/pgbench-$1
  wal=$(target_dir "$target" pgbench-wal)
  mkdir -p "$SHM_ROOT/pgdata"
  pg_init "$data" "$wal" || return 1
  PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data" || return 1
  pgbench_init "pgbench-init.$target.log" || {
    log "pgbench -i on $target failed"
    return 1
  }
  psql_q -c "CREATE TABLE ins (payload text)" || return 1
  printf 'INSERT INTO ins VALUES (repeat(%s, 1024));\n' "'x'" >"$SHM_ROOT/insert.sql"
  chmod 0644 "$SHM_ROOT/insert.sql"
  pg_stop "$data" || return 1
  PGB_DATA[$target]=$data
}

pgb_teardown() {
  local target=$1
  [ -n "${PGB_DATA[$target]:-}" ] || return 0
  rm -rf "${PGB_DATA[$target]}" "${TARGET_BASE[$target]}/pgbench-wal"
  unset "PGB_DATA[$target]"
}

# sample_rss TARGET REP: the walfs daemon's memory right after a load.
RSS_WORKLOAD="walfs daemon memory (sampled after each pgbench, insert and bulk run)"
sample_rss() {
  local target=$1 rep=$2 r
  [ -n "${WALFS_PIDS[$target]:-}" ] || return 0
  r=$(walfs_rss "$target") || r="NA NA"
  set -- $r
  record "$RSS_WORKLOAD" "VmRSS" MiB lower \
    "$target" "$rep" "$(awk -v k="$1" 'BEGIN { if (k == "NA") print "NA"; else printf "%.1f", k / 1024 }')"
  record "$RSS_WORKLOAD" "RSS outside the pool mapping" MiB lower "$target" "$rep" \
    "$(awk -v k="$2" 'BEGIN { if (k == "NA") print "NA"; else printf "%.1f", k / 1024 }')"
}

# machine_counts: whole-machine counters from /proc/stat: "BUSY IDLE STEAL CTXT" (clock
# ticks over all CPUs, and context switches since boot). Busy is user + nice + system +
# irq + softirq; idle includes iowait.
machine_counts() {
  awk '$1 == "cpu" {busy = $2 + $3 + $4 + $7 + $8; idle = $5 + $6; steal = $9}
    $1 == "ctxt" {ctxt = $2}
    END {print busy, idle, steal, ctxt}' /proc/stat
}

# measured_pgbench TARGET DATA ARGS...: pgbench_run with the server side's CPU time
# around it, and what the whole machine's scheduler did meanwhile; prints "TPS
# CPU_US_PER_TRANSACTION IDLE_PCT STEAL_PCT CTXT_PER_TRANSACTION MIGRATIONS_PER_TRANSACTION"
# (NA for what could not be measured). The machine figures say whether a slow round was
# slow because the CPUs sat idle (wake-up latency), were taken by the host (steal) or
# moved the processes around (migrations, counted by `perf stat -a` where perf exists).
measured_pgbench() {
  local target=$1 data=$2 before after out m0 m1 perf_out="" perf_pid=""
  shift 2
  local daemon=${WALFS_PIDS[$target]:-}
  before=$(cpu_ticks "$data" $daemon) || before=
  if command -v perf >/dev/null 2>&1; then
    perf_out=$(mktemp)
    perf stat -a -x, -e cpu-migrations -o "$perf_out" -- sleep 100000 >/dev/null 2>&1 &
    perf_pid=$!
  fi
  m0=$(machine_counts)
  out=$(pgbench_run "$@") || out=
  m1=$(machine_counts)
  if [ -n "$perf_pid" ]; then
    # perf stat prints its counts when the command it runs ends.
    pkill -P "$perf_pid" sleep 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  local migrations
  migrations=$(awk -F, '$3 == "cpu-migrations" {print $1}' "${perf_out:-/dev/null}" 2>/dev/null)
  [ -n "$perf_out" ] && rm -f "$perf_out"
  [ -n "$out" ] || { echo "NA NA NA NA NA NA"; return 0; }
  sleep 1  # the backends exit and are reaped (their CPU moves to the server's cutime)
  after=$(cpu_ticks "$data" $daemon) || after=
  set -- $out
  awk -v tps="$1" -v n="$2" -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" \
    -v m0="$m0" -v m1="$m1" -v mig="${migrations:-NA}" 'BEGIN {
    cpu = "NA"
    if (b != "" && a != "" && n > 0) cpu = sprintf("%.1f", (a - b) / hz * 1e6 / n)
    split(m0, x, " "); split(m1, y, " ")
    total = (y[1] - x[1]) + (y[2] - x[2]) + (y[3] - x[3])
    idle = total > 0 ? sprintf("%.1f", 100 * (y[2] - x[2]) / total) : "NA"
    steal = total > 0 ? sprintf("%.2f", 100 * (y[3] - x[3]) / total) : "NA"
    ctxt = n > 0 ? sprintf("%.2f", (y[4] - x[4]) / n) : "NA"
    migr = (n > 0 && mig ~ /^[0-9]+$/) ? sprintf("%.3f", mig / n) : "NA"
    print tps, cpu, idle, steal, ctxt, migr }'
}

# record_machine WORKLOAD PREFIX TARGET REP IDLE STEAL CTXT MIGRATIONS: the machine-wide
# figures of one measured_pgbench run.
record_machine() {
  local wl=$1 prefix=${2:+$2: } target=$3 rep=$4
  record "$wl" "${prefix}machine idle, % of both CPUs" pct lower "$target" "$rep" "$5"
  record "$wl" "${prefix}machine steal, % of both CPUs" pct lower "$target" "$rep" "$6"
  record "$wl" "${prefix}machine context switches per transaction" n lower "$target" "$rep" "$7"
  record "$wl" "${prefix}machine CPU migrations per transaction" n lower "$target" "$rep" "$8"
}

# wl_pgbench TARGET REP DO_TPCB DO_INSERTS
wl_pgbench() {
  local target=$1 rep=$2 do_tpcb=$3 do_inserts=$4 data=${PGB_DATA[$1]:-} c j r
  local wl_tpcb="pgbench TPC-B-like (scale $PGBENCH_SCALE, synchronous_commit=on, ${PGBENCH_SECS}s)"
  local wl_ins="1 KiB INSERT per transaction ($INSERT_CLIENTS clients, ${PGBENCH_SECS}s)"
  local cpu_note="server CPU per transaction (PostgreSQL + walfs daemon)"
  local ok=1
  if [ -z "$data" ] || ! PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data"; then ok=0; fi
  if [ "$do_tpcb" = 1 ]; then
    for c in $PGBENCH_CLIENTS; do
      r="NA NA NA NA NA NA"
      j=$((c < 2 ? c : 2))
      if [ $ok = 1 ]; then
        r=$(measured_pgbench "$target" "$data" -c "$c" -j "$j" -T "$PGBENCH_SECS")
      fi
      set -- $r
      record "$wl_tpcb" "clients=$c" tps higher "$target" "$rep" "$1"
      record "$wl_tpcb" "clients=$c: $cpu_note" us lower "$target" "$rep" "$2"
      record_machine "$wl_tpcb" "clients=$c" "$target" "$rep" "${@:3}"
    done
    sample_rss "$target" "$rep"
  fi
  if [ "$do_inserts" = 1 ]; then
    r="NA NA NA NA NA NA"
    if [ $ok = 1 ] && psql_q -c "TRUNCATE ins" && psql_q -c "CHECKPOINT"; then
      r=$(measured_pgbench "$target" "$data" -n -f "$SHM_ROOT/insert.sql" \
        -c "$INSERT_CLIENTS" -j 2 -T "$PGBENCH_SECS")
    fi
    set -- $r
    record "$wl_ins" "commits/s" tps higher "$target" "$rep" "$1"
    record "$wl_ins" "$cpu_note" us lower "$target" "$rep" "$2"
    record_machine "$wl_ins" "" "$target" "$rep" "${@:3}"
    sample_rss "$target" "$rep"
  fi
  [ $ok = 1 ] && pg_stop "$data"
  return 0
}

# wl_profile TARGET REP: TPC-B at each of PROFILE_CLIENTS, then the 1 KiB insert
# workload, each under a system-wide `perf record` (DWARF call graphs), to see what a
# commit's WAL write costs the server on each target: the share of the server's CPU samples (this cluster's processes and
# this target's walfs daemon, chosen by pid: other sessions on a shared machine run
# their own postgres and walfs) spent writing and flushing WAL. Inclusive samples under
# XLogFlush and XLogBackgroundFlush (the exported callers of PostgreSQL's static
# XLogWrite, which also creates new segments) count in PostgreSQL; every sample of the
# daemon counts, since with direct access it serves the WAL files' metadata (opens,
# leases, stats, segment creation). On tmpfs the share is the kernel's pwrite and
# fdatasync; with walfs-direct it is the client library's durable copy, its checks and
# the daemon: if it is smaller, a lower throughput is not walfs's doing.
wl_profile() {
  local target=$1 rep=$2 data=${PGB_DATA[$1]:-} perf_data ok=1 pm pids perf_pid bench_pid
  local wl="PostgreSQL's WAL writes in a profile (perf, ${PGBENCH_SECS}s runs)"
  local daemon=${WALFS_PIDS[$target]:-}
  if ! command -v perf >/dev/null; then
    log "perf not installed: profile skipped"
    return 0
  fi
  if [ -z "$data" ] || ! PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data"; then ok=0; fi
  local run label args
  # TPC-B at each client count, then the 1 KiB insert workload.
  for run in $PROFILE_CLIENTS inserts; do
    local shares="NA NA"
    if [ "$run" = inserts ]; then
      label="1 KiB inserts, $INSERT_CLIENTS clients"
      args=(-n -f "$SHM_ROOT/insert.sql" -c "$INSERT_CLIENTS" -j 2)
    else
      label="TPC-B, clients=$run"
      args=(-c "$run" -j $((run < 2 ? run : 2)))
    fi
    perf_data=$SHM_ROOT/perf.$target.$run.data
    if [ $ok = 1 ]; then
      perf record -q -a -F "$PROFILE_FREQ" --call-graph dwarf,16384 -o "$perf_data" \
        -- sleep "$PGBENCH_SECS" >/dev/null 2>&1 &
      perf_pid=$!
      pm=$(head -1 "$data/postmaster.pid")
      local base want tries=0
      base=$(pgrep -c -P "$pm" || true)
      if [ "$run" = inserts ]; then want=$((base + INSERT_CLIENTS)); else want=$((base + run)); fi
      pgbench_run "${args[@]}" -T "$PGBENCH_SECS" >"$OUT_DIR/logs/pgbench.profile.$target.$run.$rep.log" 2>&1 &
      bench_pid=$!
      # pgbench's backends live as long as its connections: take the cluster's pids
      # once they are all up (a loaded machine may take seconds to fork them).
      until [ "$(pgrep -c -P "$pm" || true)" -ge "$want" ] || [ $tries -ge 100 ]; do
        sleep 0.1
        tries=$((tries + 1))
      done
      [ $tries -ge 100 ] && log "profile: not all of pgbench's backends came up on $target"
      pids=$(echo "$pm" $(pgrep -P "$pm") | tr ' ' ,)
      local stat_pid=
      if [ "${PROFILE_COUNTS:-0}" = 1 ]; then
        # Counts beside the samples: system calls, faults and switches of the cluster's
        # processes, for a per-transaction comparison of where the kernel time goes.
        perf stat -x, -o "$OUT_DIR/logs/perf.stat.$target.$run.$rep.txt" \
          -e task-clock,context-switches,page-faults,raw_syscalls:sys_enter \
          --per-thread -p "$pids" -- sleep $((PGBENCH_SECS > 2 ? PGBENCH_SECS - 2 : 1)) \
          >/dev/null 2>&1 &
        stat_pid=$!
      fi
      wait "$bench_pid" || log "profiled pgbench failed on $target"
      [ -n "$stat_pid" ] && { wait "$stat_pid" || log "perf stat failed on $target"; }
      wait "$perf_pid" || log "perf record failed on $target"
      shares=$(profile_shares "$perf_data" "$pids" "$daemon")
      if [ "${PROFILE_KEEP:-0}" = 1 ]; then
        cp "$perf_data" "$OUT_DIR/logs/" && chmod 0644 "$OUT_DIR/logs/${perf_data##*/}"
        echo "$pids${daemon:+ daemon $daemon}" >"$OUT_DIR/logs/${perf_data##*/}.pids"
      fi
      rm -f "$perf_data"
    fi
    set -- $shares
    record "$wl" "$label: WAL write and flush, % of server CPU" "%" lower "$target" "$rep" "$1"
    [ -n "$daemon" ] &&
      record "$wl" "$label: walfs daemon, % of server CPU" "%" info "$target" "$rep" "$2"
  done
  [ $ok = 1 ] && pg_stop "$data"
  return 0
}

# profile_shares PERF_DATA PG_PIDS [DAEMON_PID]: prints "WAL% DAEMON%", percentages of
# the samples of PG_PIDS (comma-separated) and the daemon together.
profile_shares() {
  local f=$1 pg_pids=$2 daemon=${3:-} pg w=0 wal
  # Shares of all samples (absolute percentages; callchains off for speed).
  share_of() {
    perf report -i "$f" --pid "$1" --no-children -g none --sort pid --stdio -q 2>/dev/null |
      awk '{v = $1; sub(/%/, "", v); s += v} END {printf "%.3f\n", s}'
  }
  pg=$(share_of "$pg_pids")
  [ -n "$daemon" ] && w=$(share_of "$daemon")
  # Inclusive share of the WAL write callers within PostgreSQL's samples.
  wal=$(perf report -i "$f" --pid "$pg_pids" --percentage relative --children -g none \
    --sort sym --stdio -q 2>/dev/null | awk '$NF == "XLogFlush" || $NF == "XLogBackgroundFlush" {
      v = $1; sub(/%/, "", v); s += v } END {printf "%.3f\n", s}')
  awk -v pg="$pg" -v w="$w" -v wal="$wal" 'BEGIN {
    if (pg + w <= 0) { print "NA NA"; exit }
    printf "%.2f %.2f\n", (wal / 100 * pg + w) / (pg + w) * 100, w / (pg + w) * 100 }'
}

# ---------------------------------------------------------------- 4. bulk load
# Rows of ~1.8 KiB (stored inline, uncompressed: below the TOAST threshold), enough for
# BULK_SEGMENTS new 16 MiB segments; a fresh cluster each time so every segment is new.
wl_bulk() {
  local target=$1 rep=$2 zero wal data t0 t1 ms segs cpu before after
  local daemon=${WALFS_PIDS[$target]:-}
  local rows=$((BULK_SEGMENTS * 16 * 1024 * 1024 / 1800 + 1000))
  local wl="bulk load: INSERT ... SELECT generate_series, $rows rows x 1.8 KiB, fresh cluster"
  for zero in ${BULK_ZERO_MODES:-on off}; do
    wal=$(target_dir "$target" bulk-wal)
    data=$SHM_ROOT/pgdata/bulk-$target
    mkdir -p "$SHM_ROOT/pgdata"
    ms=NA
    segs=NA
    cpu=NA
    if pg_init "$data" "$wal" &&
      PG_MAX_WAL_SIZE=4GB PG_PRELOAD=${TARGET_PRELOAD[$target]:-} \
        pg_start "$data" -c "wal_init_zero=$zero" &&
      psql_q -c "CREATE TABLE bulk (id int, pad text)" &&
      t0=$(psql_q -c "SELECT pg_current_wal_lsn()"); then
      local perf_pid= perf_data=$OUT_DIR/logs/perf.bulk.$target.zero-$zero.$rep.data
      if [ "${BULK_PROFILE:-0}" = 1 ] && command -v perf >/dev/null; then
        # The load's whole system under perf, to see where a segment's time goes (the
        # zero-fill through FUSE, the client's first touches, the daemon); the pids say
        # which samples are this cluster's and this target's daemon.
        perf record -q -a -F "$PROFILE_FREQ" --call-graph dwarf,16384 -o "$perf_data" \
          >/dev/null 2>&1 &
        perf_pid=$!
        sleep 1
      fi
      # The CPU the load cost (the cluster's processes, its backend once reaped, and the
      # daemon): beside the elapsed time, which on a shared machine also measures what
      # the host gave the guest.
      before=$(cpu_ticks "$data" $daemon) || before=
      ms=$(psql_q -c '\timing on' -c "INSERT INTO bulk SELECT g, repeat('x', 1800) FROM generate_series(1, $rows) g" |
        awk '/^Time:/ {print $2}') || ms=NA
      sleep 0.5  # the load's backend exits and is reaped
      after=$(cpu_ticks "$data" $daemon) || after=
      cpu=$(awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { if (b == "" || a == "") print "NA"; else printf "%.2f", (a - b) / hz }')
      if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid" && wait "$perf_pid" || log "perf record failed on $target"
        chmod 0644 "$perf_data" 2>/dev/null || true
        # As wl_profile writes it: the cluster's pids comma-separated (perf report --pid),
        # then the daemon's.
        local pm
        pm=$(head -1 "$data/postmaster.pid")
        echo "$(echo "$pm" $(pgrep -P "$pm") | tr ' ' ,)${WALFS_PIDS[$target]:+ daemon ${WALFS_PIDS[$target]}}" \
          >"$perf_data.pids"
      fi
      t1=$(psql_q -c "SELECT pg_current_wal_lsn()") || t1=
      if [ -n "$t1" ]; then
        segs=$(psql_q -c "SELECT floor(pg_wal_lsn_diff('$t1', '$t0') / (16 * 1024 * 1024))") || segs=NA
      fi
      sample_rss "$target" "$rep"
      pg_stop "$data"
    fi
    rm -rf "$data" "$wal"
    record "$wl" "wal_init_zero=$zero: elapsed" s lower "$target" "$rep" \
      "$(awk -v ms="${ms:-NA}" 'BEGIN { if (ms == "NA") print "NA"; else printf "%.3f", ms / 1000 }')"
    record "$wl" "wal_init_zero=$zero: server CPU (PostgreSQL + walfs daemon)" s lower \
      "$target" "$rep" "$cpu"
    record "$wl" "wal_init_zero=$zero: WAL segments written" segments info "$target" "$rep" "$segs"
  done
}

# ---------------------------------------------------------------- 5. segment lifecycle
wl_segments() {
  local target=$1 rep=$2 dir out key v
  local wl="segment lifecycle (walfs_segbench, $SEG_COUNT x 16 MiB segments, per segment)"
  dir=$(target_dir "$target" segbench)
  out=$OUT_DIR/logs/segbench.$target.$rep.log
  with_target_env "$target" "$BENCH_BIN/walfs_segbench" "$dir" --segments "$SEG_COUNT" \
    >"$out" 2>&1 || true
  rm -rf "$dir"
  for key in "create_zero:create, wal_init_zero=on (32 x 8 KiB pwritev zero-fill + fsync + durable_rename)" \
    "create_sparse:create, wal_init_zero=off (1-byte pwrite at the end + fsync + durable_rename)" \
    "recycle:recycle (durable_rename to a future name)" \
    "remove:remove (unlink + fsync of the directory)"; do
    v=$(awk -v k="${key%%:*}_us_median" '$1 == k {print $2}' "$out")
    record "$wl" "${key#*:}" us lower "$target" "$rep" "${v:-NA}"
  done
}

# ---------------------------------------------------------------- 6. core microbenchmarks
# Runs walfs_core_bench with and without PMEM_IS_PMEM_FORCE (libpmem reads it at load
# time); the memory-region cases are taken from the first run only.
wl_core() {
  local rep=$1 force csv filter
  local wl="core data path without FUSE (walfs_core_bench, DataPath::Write 8 KiB into a preallocated segment)"
  for force in 1 0; do
    csv=$OUT_DIR/logs/core_bench.force$force.$rep.csv
    filter=.
    [ "$force" = 0 ] && filter=/file-
    if [ "$force" = 1 ]; then
      PMEM_IS_PMEM_FORCE=1 "$BENCH_BIN/walfs_core_bench" --pool_dir "$SHM_ROOT" \
        --benchmark_format=csv --benchmark_min_time="$CORE_MIN_TIME" \
        --benchmark_filter="$filter" >"$csv" 2>"$csv.err" || true
    else
      "$BENCH_BIN/walfs_core_bench" --pool_dir "$SHM_ROOT" --benchmark_format=csv \
        --benchmark_min_time="$CORE_MIN_TIME" --benchmark_filter="$filter" \
        >"$csv" 2>"$csv.err" || true
    fi
    # name,iterations,real_time,cpu_time,time_unit,...,error_occurred,error_message
    awk -F, -v wl="$wl" -v rep="$rep" '
      $1 ~ /^"/ && $1 !~ /^"name"/ {
        name = $1; gsub(/"/, "", name)
        n = split(name, p, "/")
        t = $3; u = $5
        if (u == "us") t *= 1000; else if (u == "ms") t *= 1000000
        if ($0 ~ /,true,/) t = "NA"
        printf "%s\t%s\tns/op\tlower\t%s\t%s\t%s\n", wl, p[1], p[2], rep, t
      }' "$csv" >>"$OUT_DIR/raw.tsv"
  done
}

# ---------------------------------------------------------------- 7. direct-path floor
# walfs_direct_bench in pmem mode (PMEM_IS_PMEM_FORCE=1, scratch file on SHM_ROOT): one
# 8 KiB write + fdatasync on tmpfs next to the parts of the direct-access client's hot
# path (durable copy, identity fstat, the whole TryDirectWrite with and without its
# fdatasync). "rewrite" is pg_test_fsync's pattern (offset 0 every time), "sequential"
# XLogWrite's under load, "page fill" a page rewritten 1 KiB fuller per commit (and a
# lever not taken: storing only the lines that differ from the pool's).
wl_floor() {
  local rep=$1 csv=$OUT_DIR/logs/direct_bench.$rep.csv
  local wl="direct-path floor (walfs_direct_bench, one 8 KiB write + fdatasync and its parts)"
  PMEM_IS_PMEM_FORCE=1 "$BENCH_BIN/walfs_direct_bench" --dir "$SHM_ROOT" \
    --benchmark_format=csv --benchmark_min_time="$CORE_MIN_TIME" >"$csv" 2>"$csv.err" || true
  awk -F, -v wl="$wl" -v rep="$rep" '
    $1 ~ /^"/ && $1 !~ /^"name"/ {
      name = $1; gsub(/"/, "", name)
      split(name, p, "/")
      pattern = (p[2] == "seq:1") ? "sequential" : "rewrite"
      # PageFill: partial-page commits, by the copy and by compare-then-store.
      if (p[2] ~ /^compare:/) { pattern = "page fill"; p[1] = p[1] (p[2] == "compare:1" ? " compare" : " copy") }
      if (p[1] == "RewriteCompare") pattern = "rewrite"
      t = $4; u = $5  # CPU time: wall time on a shared machine counts other tenants
      if (u == "us") t *= 1000; else if (u == "ms") t *= 1000000
      if ($0 ~ /,true,/) t = "NA"
      printf "%s\t%s\tns/op\tlower\t%s\t%s\t%s\n", wl, p[1], pattern, rep, t
    }' "$csv" >>"$OUT_DIR/raw.tsv"
}

# ---------------------------------------------------------------- 8. crash recovery and WAL reads
# A fresh cluster, a checkpoint, RECOVERY_SEGMENTS segments of WAL from one bulk INSERT,
# then every process of the cluster killed with SIGKILL at once (a crash). Before the
# restart, the WAL readers a DBA runs on that WAL: pg_waldump --stats over the range
# and `cat` of the range's segments (read(2)), then `cp` of single segments to tmpfs (a
# new process each, as an archive_command runs) and of a segment from tmpfs into the WAL
# directory (as a restore_command runs), all with the target's preload (an archive or
# restore command runs with the server's environment). Then the restart: the redo time
# the server logs ("redo done ... elapsed") and the whole `pg_ctl start -w`. On walfs
# targets the daemon's FUSE READ count over the restart is recorded as well (info).
wl_recovery() {
  local target=$1 rep=$2 wal data t0 t1 first last pm kids i
  local redo=NA start=NA dump=NA catr=NA cpms=NA cpin=NA reads=NA before after segs=NA
  local daemon=${WALFS_PIDS[$target]:-}
  local rows=$((RECOVERY_SEGMENTS * 16 * 1024 * 1024 / 1800 + 1000))
  local wl="crash recovery: $RECOVERY_SEGMENTS segments of bulk-insert WAL, kill -9, restart"
  wal=$(target_dir "$target" recovery-wal)
  data=$SHM_ROOT/pgdata/recovery-$target
  mkdir -p "$SHM_ROOT/pgdata"
  if pg_init "$data" "$wal" &&
    PG_MAX_WAL_SIZE=16GB PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data" &&
    psql_q -c "CREATE TABLE r (id int, pad text)" -c "CHECKPOINT" &&
    t0=$(psql_q -c "SELECT pg_current_wal_lsn()") &&
    first=$(psql_q -c "SELECT pg_walfile_name('$t0')") &&
    psql_q -c "INSERT INTO r SELECT g, repeat('x', 1800) FROM generate_series(1, $rows) g" &&
    t1=$(psql_q -c "SELECT pg_current_wal_lsn()") &&
    last=$(psql_q -c "SELECT pg_walfile_name('$t1')"); then
    segs=$(psql_q -c "SELECT floor(pg_wal_lsn_diff('$t1', '$t0') / (16 * 1024 * 1024))") || segs=NA
    pm=$(head -1 "$data/postmaster.pid")
    kids=$(pgrep -P "$pm" | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -KILL "$pm" $kids
    for ((i = 0; i < 200; i++)); do
      # shellcheck disable=SC2086
      kill -0 "$pm" $kids 2>/dev/null || break
      sleep 0.05
    done
    local t_a t_b
    t_a=$(date +%s%N)
    if as_postgres env ${TARGET_PRELOAD[$target]:+LD_PRELOAD="${TARGET_PRELOAD[$target]}"} \
      "$PG_BIN/pg_waldump" --stats -p "$wal" -s "$t0" -e "$t1" >"$OUT_DIR/logs/waldump.$target.$rep.log" 2>&1; then
      t_b=$(date +%s%N)
      dump=$(awk -v a="$t_a" -v b="$t_b" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    else
      log "pg_waldump on $target failed: $(tail -2 "$OUT_DIR/logs/waldump.$target.$rep.log")"
    fi
    local files=()
    for f in "$wal"/0*; do
      [[ ${f##*/} < $first || ${f##*/} > $last ]] || files+=("$f")
    done
    local bytes
    bytes=$(stat -c %s "${files[@]}" | awk '{ s += $1 } END { print s + 0 }')
    t_a=$(date +%s%N)
    with_target_env "$target" cat "${files[@]}" >/dev/null
    t_b=$(date +%s%N)
    catr=$(awk -v a="$t_a" -v b="$t_b" -v n="$bytes" 'BEGIN { printf "%.0f", n / ((b - a) / 1e9) / 1e6 }')
    # cp of single segments, a new process each, as an archive_command runs it: its
    # start (the preload included), the open and the copy into a tmpfs file.
    local ncp=0 f
    t_a=$(date +%s%N)
    for f in "${files[@]:0:8}"; do
      with_target_env "$target" cp "$f" "$SHM_ROOT/cp-out.$target" && ncp=$((ncp + 1))
    done
    t_b=$(date +%s%N)
    rm -f "$SHM_ROOT/cp-out.$target"
    ((ncp > 0)) && cpms=$(awk -v a="$t_a" -v b="$t_b" -v n="$ncp" 'BEGIN { printf "%.2f", (b - a) / 1e6 / n }')
    # cp of a segment from tmpfs into the WAL directory, a new file each time, as a
    # restore_command runs it (the server removes RECOVERYXLOG before each restore).
    local nin=0
    if cp "${files[0]}" "$SHM_ROOT/cp-in.$target"; then
      t_a=$(date +%s%N)
      for ((i = 0; i < 8; i++)); do
        rm -f "$wal/RECOVERYXLOG"
        with_target_env "$target" cp "$SHM_ROOT/cp-in.$target" "$wal/RECOVERYXLOG" && nin=$((nin + 1))
      done
      t_b=$(date +%s%N)
      rm -f "$wal/RECOVERYXLOG" "$SHM_ROOT/cp-in.$target"
      ((nin > 0)) && cpin=$(awk -v a="$t_a" -v b="$t_b" -v n="$nin" 'BEGIN { printf "%.2f", (b - a) / 1e6 / n }')
    fi
    [ -n "$daemon" ] && before=$(walfs_reads "$target")
    t_a=$(date +%s%N)
    if PG_MAX_WAL_SIZE=16GB PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data"; then
      t_b=$(date +%s%N)
      start=$(awk -v a="$t_a" -v b="$t_b" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
      redo=$(grep "redo done at" "$data.server.log" | tail -1 |
        sed -n 's/.*elapsed: \([0-9.]*\) s.*/\1/p')
      [ -n "$daemon" ] && after=$(walfs_reads "$target") &&
        reads=$((after - before))
      pg_stop "$data"
    fi
  fi
  rm -rf "$data" "$wal"
  record "$wl" "redo (the server log's \"redo done ... elapsed\")" s lower "$target" "$rep" "${redo:-NA}"
  record "$wl" "restart (pg_ctl start -w, redo included)" s lower "$target" "$rep" "$start"
  record "$wl" "pg_waldump --stats over the range (8 KiB preads)" s lower "$target" "$rep" "$dump"
  record "$wl" "cat of the range's segments (128 KiB read(2)s)" MB/s higher "$target" "$rep" "$catr"
  record "$wl" "cp of one segment to tmpfs (a new process each, start included)" ms lower "$target" "$rep" "$cpms"
  record "$wl" "cp of one segment from tmpfs into the WAL directory (restore_command)" ms lower "$target" "$rep" "$cpin"
  if [ -n "$daemon" ]; then
    record "$wl" "FUSE READ requests during the restart" count info "$target" "$rep" "$reads"
  fi
  record "$wl" "WAL segments written" segments info "$target" "$rep" "$segs"
}

# ---------------------------------------------------------------- 9. synchronous replication
# A primary whose WAL is on the target and a standby made from it with pg_basebackup
# (data on tmpfs, WAL on a second instance of the target: target_twin), streaming with
# synchronous_standby_names = '*' and synchronous_commit = on: every commit waits until
# the standby's walreceiver has written and flushed it, after the primary's walsender
# read it. Then pgbench TPC-B with SYNCREP_CLIENTS clients for PGBENCH_SECS against the
# primary. A fresh pair each repetition.
wl_syncrep() {
  local target=$1 rep=$2 wal swal data sdata tps=NA state i
  local wl="synchronous replication: TPC-B, $SYNCREP_CLIENTS clients, primary and standby WAL each on their own instance of the target"
  if ! target_twin "$target"; then
    record "$wl" "TPC-B tps" tps higher "$target" "$rep" NA
    return 0
  fi
  wal=$(target_dir "$target" syncrep-wal)
  swal=$(target_dir "$target-twin" syncrep-standby-wal)
  data=$SHM_ROOT/pgdata/syncrep-$target
  sdata=$SHM_ROOT/pgdata/syncrep-standby-$target
  rm -rf "$sdata"
  on_exit "rm -rf '$sdata'"
  local sport=$((PG_PORT + 1))
  if pg_init "$data" "$wal" &&
    PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data" &&
    pgbench_init "syncrep-init.$target.$rep.log" &&
    as_postgres "$PG_BIN/pg_basebackup" -h "$PG_SOCK_DIR" -p "$PG_PORT" -U postgres \
      -D "$sdata" --waldir="$swal" -X stream -R -c fast \
      >"$OUT_DIR/logs/syncrep-basebackup.$target.$rep.log" 2>&1 &&
    PG_PORT=$sport PG_PRELOAD=${TARGET_PRELOAD[$target-twin]:-} pg_start "$sdata" &&
    psql_q -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" \
      >/dev/null; then
    for ((i = 0; i < 100; i++)); do
      state=$(psql_q -c "SELECT sync_state FROM pg_stat_replication" 2>/dev/null) || state=
      [ "$state" = sync ] && break
      sleep 0.1
    done
    if [ "$state" = sync ]; then
      local out
      if out=$(pgbench_run -c "$SYNCREP_CLIENTS" -j "$SYNCREP_CLIENTS" -T "$PGBENCH_SECS" -n); then
        tps=$(awk '{printf "%.1f", $1}' <<<"$out")
      fi
    else
      log "syncrep on $target: the standby never became synchronous ($state)"
    fi
  else
    log "syncrep on $target: setting up the pair failed (logs in $OUT_DIR/logs)"
  fi
  PG_PORT=$sport pg_stop "$sdata" 2>/dev/null || true
  pg_stop "$data" 2>/dev/null || true
  rm -rf "$data" "$sdata" "$wal" "$swal"
  record "$wl" "TPC-B tps" tps higher "$target" "$rep" "$tps"
}

# ---------------------------------------------------------------- 10. the WAL summarizer
# PostgreSQL 17's summarize_wal = on: a background process reads every WAL page soon after
# it is written, so on walfs without the library each page costs a FUSE READ on top of
# the backends' writes. A fresh cluster each repetition, pgbench TPC-B with
# SUMMARIZE_CLIENTS clients for PGBENCH_SECS; on walfs targets the daemon's FUSE READs
# over the run (info), and how much WAL the summarizer had not yet summarized when the
# run ended (info: it trails the flush position by design).
wl_summarize() {
  local target=$1 rep=$2 wal data tps=NA reads=NA lag=NA before after out
  local daemon=${WALFS_PIDS[$target]:-}
  local wl="WAL summarizer: TPC-B, $SUMMARIZE_CLIENTS clients, summarize_wal = on"
  wal=$(target_dir "$target" summarize-wal)
  data=$SHM_ROOT/pgdata/summarize-$target
  if pg_init "$data" "$wal" &&
    PG_PRELOAD=${TARGET_PRELOAD[$target]:-} pg_start "$data" -c summarize_wal=on &&
    pgbench_init "summarize-init.$target.$rep.log" &&
    psql_q -c "CHECKPOINT" >/dev/null; then
    [ -n "$daemon" ] && before=$(walfs_reads "$target")
    if out=$(pgbench_run -c "$SUMMARIZE_CLIENTS" -j "$SUMMARIZE_CLIENTS" -T "$PGBENCH_SECS" -n); then
      tps=$(awk '{printf "%.1f", $1}' <<<"$out")
    fi
    [ -n "$daemon" ] && after=$(walfs_reads "$target") && reads=$((after - before))
    lag=$(psql_q -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), summarized_lsn)::bigint
                     FROM pg_get_wal_summarizer_state()") || lag=NA
    pg_stop "$data"
  else
    log "summarize on $target: setting up the cluster failed (logs in $OUT_DIR/logs)"
  fi
  rm -rf "$data" "$wal"
  record "$wl" "TPC-B tps" tps higher "$target" "$rep" "$tps"
  record "$wl" "WAL not yet summarized at the end" bytes info "$target" "$rep" "${lag:-NA}"
  if [ -n "$daemon" ]; then
    record "$wl" "FUSE READ requests during the run" count info "$target" "$rep" "$reads"
  fi
}
