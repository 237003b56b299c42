#!/usr/bin/env bash
# The command-line conventions every walfs program and script keeps (tools/cli.h):
#   - --help (and -h) prints a usage text on stdout and exits 0, doing nothing else;
#     for tools/run-tests.sh that means no apt-get, build or test run;
#   - --version (and -V for walfs, mkfs.walfs and fsck.walfs) prints "PROGRAM VERSION",
#     the version of project() in CMakeLists.txt, and exits 0;
#   - a usage error says "PROGRAM: what" and "Try 'PROGRAM --help' for more
#     information." on stderr and exits with the family's status: fsck.walfs 16
#     (fsck(8)), the others 1 (mke2fs, mount(8));
#   - the daemon's log lines carry an sd-daemon "<N>" prefix only when stderr is the
#     journal (JOURNAL_STREAM names it).
source "$(dirname "$0")/../integration/lib/common.sh"

for exe in "$WALFS" "$MKFS" "$FSCK" "$WALFSCTL"; do
  [ -x "$exe" ] || fail "not built: $exe"
done
W=$(make_workdir)
OUT=$W/out
ERR=$W/err

version=$(sed -n 's/^project(walfs VERSION \([0-9.]*\).*/\1/p' "$WALFS_SOURCE_DIR/CMakeLists.txt")
[ -n "$version" ] || fail "cannot read the version from project() in CMakeLists.txt"

# run RC CMD...: CMD's stdout -> $OUT, stderr -> $ERR; fails unless it exits RC within 20 s.
run() {
  local want=$1 got=0
  shift
  timeout 20 "$@" >"$OUT" 2>"$ERR" </dev/null || got=$?
  if [ "$got" != "$want" ]; then
    cat "$OUT" "$ERR" >&2
    fail "expected exit $want, got $got: $*"
  fi
}

log "programs: --help, --version, -V"
for exe in "$WALFS" "$MKFS" "$FSCK" "$WALFSCTL"; do
  name=$(basename "$exe")
  for flag in --help -h; do
    run 0 "$exe" $flag
    grep -qi '^usage:' "$OUT" || fail "$name $flag prints no usage on stdout"
    [ ! -s "$ERR" ] || fail "$name $flag wrote to stderr: $(cat "$ERR")"
  done
  flags=(--version)
  [ "$name" = walfsctl ] || flags+=(-V)
  for flag in "${flags[@]}"; do
    run 0 "$exe" $flag
    [ "$(cat "$OUT")" = "$name $version" ] || fail "$name $flag printed '$(cat "$OUT")'"
  done
done
run 0 "$WALFSCTL" help
grep -q '^Usage:' "$OUT" || fail "walfsctl help prints no usage"
# Global options anywhere, --help included.
run 0 "$WALFSCTL" status --help
grep -q '^Usage:' "$OUT" || fail "walfsctl status --help prints no usage"

log "programs: usage errors"
# usage_error RC PROGRAM-NAME CMD...
usage_error() {
  local rc=$1 name=$2
  shift 2
  run "$rc" "$@"
  [ "$(sed -n 1p "$ERR")" != "" ] || fail "$*: nothing on stderr"
  grep -q "^$name: " "$ERR" || fail "$*: stderr does not start with '$name: ': $(cat "$ERR")"
  grep -qx "Try '$name --help' for more information." "$ERR" ||
    fail "$*: no pointer to --help: $(cat "$ERR")"
  [ ! -s "$OUT" ] || fail "$*: wrote to stdout: $(cat "$OUT")"
}
usage_error 1 walfs "$WALFS" --bogus
usage_error 1 walfs "$WALFS" /p
usage_error 1 walfs "$WALFS" /p /m -o bogus
usage_error 1 walfs "$WALFS" /p /m -o max_write=12Q
grep -q "64M, 64MB, 64MiB, 512k" "$ERR" || fail "walfs: size error does not say what is accepted"
usage_error 1 walfs "$WALFS" /p /m -o allow_other,allow_root
usage_error 1 walfs "$WALFS" /p /m -o
usage_error 1 mkfs.walfs "$MKFS" --bogus "$W/x.pool"
usage_error 1 mkfs.walfs "$MKFS" --size 12Q "$W/x.pool"
grep -q "64M, 64MB, 64MiB, 512k" "$ERR" || fail "mkfs.walfs: size error does not say what is accepted"
usage_error 1 mkfs.walfs "$MKFS"
usage_error 16 fsck.walfs "$FSCK" --bogus "$W/x.pool"
usage_error 16 fsck.walfs "$FSCK"
usage_error 1 walfsctl "$WALFSCTL"
usage_error 1 walfsctl "$WALFSCTL" frobnicate
usage_error 1 walfsctl "$WALFSCTL" --bogus inspect "$W/x.pool"
[ ! -e "$W/x.pool" ] || fail "a refused command created a pool"
# The conformance scripts refuse a missing or unbuilt tool before mounting anything.
usage_error 1 run-fsx.sh bash "$WALFS_SOURCE_DIR/tools/conformance/run-fsx.sh"
usage_error 1 run-fsx.sh bash "$WALFS_SOURCE_DIR/tools/conformance/run-fsx.sh" --ops 0 /bin/true
usage_error 1 run-fsx.sh bash "$WALFS_SOURCE_DIR/tools/conformance/run-fsx.sh" "$W"
usage_error 1 run-pjdfstest.sh bash "$WALFS_SOURCE_DIR/tools/conformance/run-pjdfstest.sh" "$W"
usage_error 1 run-pjdfstest.sh bash "$WALFS_SOURCE_DIR/tools/conformance/run-pjdfstest.sh" --mode pm "$W"

log "scripts: --help does nothing but print"
scripts=(
  tools/run-tests.sh tools/install-deps.sh tools/quickstart.sh
  tools/bench/run.sh tools/bench/levers.sh tools/bench/write_profile.sh
  tests/fuzz/fuzz_smoke.sh tools/conformance/run-fsx.sh tools/conformance/run-pjdfstest.sh
  packaging/systemd/walfs-prestart packaging/systemd/walfs-metrics
  packaging/postgresql/move-pg_wal-to-walfs.sh
)
for script in "${scripts[@]}"; do
  path=$WALFS_SOURCE_DIR/$script
  [ -f "$path" ] || fail "missing $script"
  # Run as an unprivileged user where possible, so a script that ignored --help and went
  # on would fail rather than install or mount anything.
  runner=()
  if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    runner=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  fi
  run 0 "${runner[@]}" bash "$path" --help
  [ "$(wc -l <"$OUT")" -ge 2 ] || fail "$script --help prints no help: $(cat "$OUT" "$ERR")"
  [ ! -s "$ERR" ] || fail "$script --help wrote to stderr: $(cat "$ERR")"
done
# run-tests.sh --help documents the stages and how to skip them.
run 0 bash "$WALFS_SOURCE_DIR/tools/run-tests.sh" --help
for word in --quick WALFS_SANITIZE_RUN=0 WALFS_FUZZ_RUN=0 WALFS_BUILDFLAGS_RUN=0 minutes; do
  grep -q -- "$word" "$OUT" || fail "run-tests.sh --help does not mention $word"
done

log "development tools: --help"
for exe in "$WALFS_BUILD_DIR/tests/tools/walfs_damage" "$WALFS_BUILD_DIR/tools/bench/walfs_segbench"; do
  [ -x "$exe" ] || continue
  run 0 "$exe" --help
  grep -qi '^usage:' "$OUT" || fail "$(basename "$exe") --help prints no usage"
done

log "daemon log lines: a priority prefix only for the journal"
# A pool that does not exist fails before anything is mounted, with one error line.
run 32 "$WALFS" "$W/missing.pool" "$W" -f
grep -q '^walfs: .*missing.pool' "$ERR" || fail "no plain error line: $(cat "$ERR")"
exec {fd}>"$W/journal"
JOURNAL_STREAM=$(stat -c '%d:%i' "$W/journal") \
  timeout 20 "$WALFS" "$W/missing.pool" "$W" -f 2>&"$fd" && fail "walfs mounted a missing pool"
exec {fd}>&-
grep -q '^<3>walfs: .*missing.pool' "$W/journal" ||
  fail "no <3> prefix with JOURNAL_STREAM naming stderr: $(cat "$W/journal")"
# JOURNAL_STREAM inherited from a unit while stderr is somewhere else: no prefix.
JOURNAL_STREAM=$(stat -c '%d:%i' "$W/journal") run 32 "$WALFS" "$W/missing.pool" "$W" -f
grep -q '^walfs: .*missing.pool' "$ERR" || fail "prefix although stderr is not the journal: $(cat "$ERR")"

log "PASS"
