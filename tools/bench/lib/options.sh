# shellcheck shell=bash
# The options tools/bench/run.sh and levers.sh both take, sourced by each before it
# parses its command line (so it only defines a function): their meaning is the same in
# both, only the defaults differ, and those stay with the scripts.

# bench_shared_option OPTION VALUE: sets the variable OPTION names to VALUE and returns
# 0 when OPTION is one of the shared ones (the caller then shifts both); returns 1
# otherwise, setting nothing.
# shellcheck disable=SC2034  # the variables are the calling script's
bench_shared_option() {
  case $1 in
    --workloads) WORKLOADS_ARG=$2 ;;
    --reps) REPS=$2 ;;
    --duration) PGBENCH_SECS=$2 ;;
    --fsync-secs) FSYNC_SECS=$2 ;;
    --scale) PGBENCH_SCALE=$2 ;;
    --clients) PGBENCH_CLIENTS=$2 ;;
    --insert-clients) INSERT_CLIENTS=$2 ;;
    --bulk-segments) BULK_SEGMENTS=$2 ;;
    --seg-count) SEG_COUNT=$2 ;;
    --pool-size) POOL_SIZE=$2 ;;
    --out) OUT_DIR=$2 ;;
    --build-dir) BUILD_DIR_ARG=$2 ;;
    *) return 1 ;;
  esac
}
