# shellcheck shell=bash
# The frame the benchmark suites tools/bench/run.sh and levers.sh share, sourced by each
# right after it parsed its options: the root check, --build-dir, the libraries, and the
# steps both take (results and scratch directories, bringing up what is compared, the
# report files). It defines no target, setting, workload or table: those stay with the
# scripts and targets.sh, workloads.sh and the awk files.
#
# Needs: BENCH_DIR, SOURCE_DIR, BUILD_DIR_ARG (may be empty), WORKLOADS_ARG; OUT_DIR
# (may be empty) before suite_results_dir.

[ "$(id -u)" -eq 0 ] || { echo "${0##*/}: run as root (mounts, runuser -u postgres)" >&2; exit 2; }
if [ -n "$BUILD_DIR_ARG" ]; then
  WALFS_BUILD_DIR=$(cd "$BUILD_DIR_ARG" && pwd)
  export WALFS_BUILD_DIR
fi
export WALFS_SOURCE_DIR=${WALFS_SOURCE_DIR:-$SOURCE_DIR}
# shellcheck source=../../../tests/integration/lib/common.sh
source "$SOURCE_DIR/tests/integration/lib/common.sh"
# run.sh sets BENCH_PG_ROOT for a PostgreSQL in a chroot (--pg-version); common.sh's PG_BIN
# is then the path inside it.
PG_ROOT=${BENCH_PG_ROOT:-}
source "$BENCH_DIR/lib/targets.sh"
source "$BENCH_DIR/lib/pg.sh"
source "$BENCH_DIR/lib/workloads.sh"
BENCH_BIN=$WALFS_BUILD_DIR/tools/bench

require_postgres

has_workload() { [[ ",$WORKLOADS_ARG," == *",$1,"* ]]; }

# suite_results_dir PREFIX: OUT_DIR (default /var/tmp/PREFIX-YYYYmmdd-HHMMSS) made with
# its logs/ and made absolute, with an empty raw.tsv.
suite_results_dir() {
  OUT_DIR=${OUT_DIR:-/var/tmp/$1-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$OUT_DIR/logs"
  OUT_DIR=$(cd "$OUT_DIR" && pwd)
  : >"$OUT_DIR/raw.tsv"
}

# suite_scratch PREFIX: SHM_ROOT, a fresh directory on /dev/shm removed at exit, and in
# it PostgreSQL's socket directory PG_SOCK_DIR and pgdata/, owned by postgres.
suite_scratch() {
  SHM_ROOT=$(mktemp -d "/dev/shm/$1.XXXXXX")
  chmod 0755 "$SHM_ROOT"
  on_exit "rm -rf '$SHM_ROOT'"
  PG_SOCK_DIR=$SHM_ROOT/sock
  mkdir -p "$PG_SOCK_DIR" "$SHM_ROOT/pgdata"
  chown postgres:postgres "$PG_SOCK_DIR" "$SHM_ROOT/pgdata"
}

# suite_bring_up NOUN UP NONE ID...: `UP ID` for each ID (it sets TARGET_NOTE[ID], or
# TARGET_SKIP[ID] with the reason), a line "NOUN ID: note" or "NOUN ID: SKIPPED: why"
# on stdout and in machine.txt, RUN_TARGETS the IDs that came up (fails with the
# message NONE if none did), and START, the suite's start time for suite_write_results.
suite_bring_up() {
  local noun=$1 up=$2 none=$3 id
  shift 3
  RUN_TARGETS=()
  for id in "$@"; do
    "$up" "$id"
    if [ -n "${TARGET_SKIP[$id]:-}" ]; then
      echo "$noun $id: SKIPPED: ${TARGET_SKIP[$id]}" | tee -a "$OUT_DIR/machine.txt"
    else
      echo "$noun $id: ${TARGET_NOTE[$id]}" | tee -a "$OUT_DIR/machine.txt"
      RUN_TARGETS+=("$id")
    fi
  done
  [ ${#RUN_TARGETS[@]} -gt 0 ] || fail "$none"
  START=$SECONDS
}

# suite_write_results NAME NOTE [EXTRA]: the suite's time and the load at its end in
# machine.txt, then the report files from the caller's `report FMT` (its tables as tsv,
# text or md) followed by `EXTRA FMT` when given (tables that read summary.tsv):
# summary.tsv, NAME.txt (machine.txt, a blank line, NOTE, the tables) and NAME.md
# (machine.txt as a code block, the tables); then NAME.txt on stdout and where the
# files are.
suite_write_results() {
  local name=$1 note=$2 extra=${3:-}
  echo "suite time: $((SECONDS - START)) s, load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT_DIR/machine.txt"
  report tsv >"$OUT_DIR/summary.tsv"
  {
    cat "$OUT_DIR/machine.txt"
    echo
    printf '%s\n' "$note"
    report text
    if [ -n "$extra" ]; then "$extra" text; fi
  } >"$OUT_DIR/$name.txt"
  {
    echo '```'
    cat "$OUT_DIR/machine.txt"
    echo '```'
    report md
    if [ -n "$extra" ]; then "$extra" md; fi
  } >"$OUT_DIR/$name.md"
  echo
  cat "$OUT_DIR/$name.txt"
  echo
  echo "results: $OUT_DIR/$name.txt, $name.md, summary.tsv, raw.tsv, machine.txt, logs/"
}
