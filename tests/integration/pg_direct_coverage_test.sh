#!/usr/bin/env bash
# What the direct-access library must cover, per PostgreSQL version: every system call
# PostgreSQL makes on files of the walfs mount, and every libc open/write/sync symbol its
# WAL-writing binaries import, is either interposed by libwalfs-direct.so (its exported
# symbols, nm -D --defined-only) or listed as safe to leave to the kernel, with a reason,
# in tests/integration/direct_coverage.txt. The test fails on a call or symbol that is
# neither, and on a list entry claiming an interposition the library does not export.
#
# The calls are collected with strace -f -y (inside the chroot for 17 and 18) from:
#   the primary server (and its WAL summarizer on 17+) under pgbench, WAL switches and
#   checkpoints, and again through a kill -9 and crash recovery; a walsender serving
#   pg_basebackup -X stream (whose WAL directory is on the mount) and then a standby, whose
#   walreceiver writes its WAL onto the mount; pg_receivewal streaming into the mount;
#   pg_waldump reading segments on the mount; pg_test_fsync on the mount (every sync
#   method, O_DIRECT included).
# Runs without the library preloaded (the calls PostgreSQL itself makes are the question;
# with the library, calls it serves would not reach strace), in pmem mode.
source "$(dirname "$0")/lib/common.sh"
WALFS_PG_DIRECT=0
WALFS_PG_MODES=pmem
source "$(dirname "$0")/lib/pg.sh"

pg_require
[ "$WALFS_TEST_NO_MOUNT" != 1 ] || skip "needs a real walfs mount"
LIST=$WALFS_SOURCE_DIR/tests/integration/direct_coverage.txt
LIB=$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so
[ -f "$LIB" ] || fail "direct-access library not built: $LIB"
[ -f "$LIST" ] || fail "coverage list missing: $LIST"
command -v nm >/dev/null || skip "nm is missing (binutils)"
[ -x "$PG_ROOT/usr/bin/strace" ] || skip "strace is missing in ${PG_ROOT:-the host} (tools/install-deps.sh, tools/pg-chroot)"

# The binaries whose libc imports are checked: the server, and the tools that write or
# read WAL files where pg_wal lives.
BINARIES=(postgres pg_receivewal pg_basebackup pg_waldump pg_resetwal pg_rewind)
# Imports that touch files: opening, writing, syncing, sizing, mapping, closing,
# duplicating descriptors, reading (fortified reads included), renaming and removing.
SYMBOL_RE='^(__)?(open|openat|creat|fopen|freopen|fdopen|pwrite|write|fwrite|pwritev|writev|fsync|fdatasync|sync_file_range|syncfs|sync|fallocate|posix_fallocate|ftruncate|truncate|close|close_range|closefrom|dup|dup2|dup3|fcntl|mmap|munmap|msync|madvise|copy_file_range|sendfile|splice|pread|read|preadv|readv|lseek|posix_fadvise|rename|renameat|renameat2|unlink|unlinkat|link|linkat|io_uring_[a-z_]*)(64)?(v2)?(_chk|_2|_unlocked)?$'

TRACE_EXPR='trace=%desc,%file'
TRACES=()

# traced NAME CMD...: runs CMD as postgres under strace -f -y, appending its trace to
# W/run/NAME.strace.
traced() {
  local name=$1
  shift
  TRACES+=("$W/run/$name.strace")
  as_postgres strace -f -y -qq -s 200 -e "$TRACE_EXPR" -o "$W/run/$name.strace" "$@"
}

# start_traced NAME DATA RUN: the server of DATA under strace in the background; waits
# until it accepts connections on RUN.
start_traced() {
  local name=$1 data=$2 run=$3 i pid
  # (Recorded here: the background subshell's TRACES is its own.)
  TRACES+=("$W/run/$name.strace")
  traced "$name" "$PG_BIN/postgres" -D "$data" >"$run/$name.server.log" 2>&1 &
  pid=$!
  on_exit "pg_kill '$(dirname "$data")'"
  for ((i = 0; i < 600; i++)); do
    if as_postgres "$PG_BIN/pg_isready" -q -h "$run" 2>/dev/null; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 30 "$run/$name.server.log" >&2
  fail "the traced server of $data did not start"
}

pg_workdir
w=$W
# WALFS_COVERAGE_KEEP=DIR: the traces are copied there at exit (for writing the list).
if [ -n "${WALFS_COVERAGE_KEEP:-}" ]; then
  on_exit "mkdir -p '$WALFS_COVERAGE_KEEP' && cp '$w'/run/*.strace '$WALFS_COVERAGE_KEEP'/"
fi
mnt=$w/wal
pool=$(pg_pool_path "$w" pmem 1280)
pg_mkpool "$pool" 1280
pg_mount "$pool" "$mnt" pmem
pg_initdb "$w"
pg_conf "$w" "wal_level = replica" "max_wal_senders = 4" "max_wal_size = 128MB" \
  "min_wal_size = 64MB" "logging_collector = off"
((WALFS_PG_VERSION >= 17)) && pg_conf "$w" "summarize_wal = on"

# The primary: load, switches, checkpoints.
start_traced primary "$w/data" "$w/run"
pg_bench "$w" -i -s 1 -q >"$w/run/init.client.log" 2>&1 ||
  { cat "$w/run/init.client.log" >&2; fail "pgbench -i failed"; }
pg_bench_run "$w" load -n -c 2 -j 1 -T 3 >/dev/null
for i in 1 2 3; do pg_sql "$w" "SELECT pg_switch_wal()" >/dev/null; done
pg_sql "$w" CHECKPOINT

# A walsender for pg_basebackup -X stream, its WAL directory on the mount.
s=$w/standby
mkdir -p "$s/run"
chown postgres: "$s" "$s/run"
traced basebackup "$PG_BIN/pg_basebackup" -h "$w/run" -D "$s/data" -X stream -R -c fast \
  --waldir="$mnt/standby_wal" >"$w/run/basebackup.client.log" 2>&1 ||
  { cat "$w/run/basebackup.client.log" >&2; fail "pg_basebackup failed"; }
pg_conf "$s" "unix_socket_directories = '$s/run'"
((WALFS_PG_VERSION >= 17)) && pg_conf "$s" "summarize_wal = off"
_PG_CLUSTERS+=("$s")
# The standby: startup process and walreceiver, WAL written onto the mount.
start_traced standby "$s/data" "$s/run"
as_postgres mkdir "$mnt/recv"
pg_bench_run "$w" replicated -n -c 2 -j 1 -T 3 >/dev/null
pg_sql "$w" "SELECT pg_switch_wal()" >/dev/null
end=$(pg_sql "$w" 'SELECT pg_current_wal_flush_lsn()')
# pg_receivewal streams into the mount up to the current end of WAL.
traced receivewal "$PG_BIN/pg_receivewal" -h "$w/run" -D "$mnt/recv" --synchronous -n \
  -E "$end" >"$w/run/receivewal.client.log" 2>&1 ||
  { cat "$w/run/receivewal.client.log" >&2; fail "pg_receivewal -E $end failed"; }
for ((i = 0; i < 300; i++)); do
  [ "$(pg_sql "$s" "SELECT pg_last_wal_replay_lsn() >= '$end'::pg_lsn")" = t ] && break
  sleep 0.1
done
((i < 300)) || fail "the standby did not replay up to $end"
pg_kill "$s"

# A crash and crash recovery of the primary.
pg_crash "$w"
start_traced recovery "$w/data" "$w/run"
pg_bench_run "$w" after -n -c 2 -j 1 -T 2 >/dev/null
first=$(pg_segments "$w" | sed -n 1p)
endseg=$(pg_sql "$w" 'SELECT pg_walfile_name(pg_current_wal_flush_lsn())')
traced waldump "$PG_BIN/pg_waldump" -p "$mnt/pg_wal" "$first" "$endseg" \
  >"$w/run/waldump.client.log" 2>&1 || {
  # The last segment ends mid-record while the server writes it: only a decoding error
  # before the end of the flushed WAL is a failure.
  grep -q 'invalid record length\|record with incorrect prev-link\|could not find a valid record' \
    "$w/run/waldump.client.log" || { tail -n 20 "$w/run/waldump.client.log" >&2; fail "pg_waldump failed"; }
}
traced test_fsync "$PG_BIN/pg_test_fsync" -s 1 -f "$mnt/test_fsync.out" \
  >"$w/run/test_fsync.client.log" 2>&1 ||
  { cat "$w/run/test_fsync.client.log" >&2; fail "pg_test_fsync failed"; }
pg_kill "$w"
pg_umount "$mnt"

# ---- the check -------------------------------------------------------------------------
exports=$w/run/exports
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TW]$/ { print $3 }' | sed 's/@.*//' | sort -u >"$exports"
(($(wc -l <"$exports") > 10)) || fail "nm -D found only $(wc -l <"$exports") exports in $LIB"

# list_verdict KIND NAME: the verdict line of KIND (syscall|symbol) NAME in the list.
list_verdict() { awk -v k="$1" -v n="$2" '$1 == k && $2 == n { print; exit }' "$LIST"; }

errors=()
# check KIND NAME WHERE: NAME must be listed; an "interposed" entry's symbols must all be
# exported by the library.
check() {
  local kind=$1 name=$2 where=$3 line verdict syms sym
  line=$(list_verdict "$kind" "$name")
  if [ -z "$line" ]; then
    errors+=("$kind $name ($where) is neither interposed nor listed in ${LIST##*/}")
    return
  fi
  read -r _ _ verdict syms _ <<<"$line"
  case $verdict in
    interposed)
      for sym in ${syms//,/ }; do
        grep -qx "$sym" "$exports" ||
          errors+=("$kind $name ($where): listed as interposed by $sym, which ${LIB##*/} does not export")
      done
      ;;
    kernel) ;;
    *) errors+=("${LIST##*/}: $kind $name has verdict '$verdict' (interposed|kernel)") ;;
  esac
}

# Every system call in the traces naming a file on the mount: a descriptor of a file under
# it (-y), or a path argument under it or through a pg_wal symlink (every pg_wal here is
# on the mount; the server's paths are relative to its data directory).
calls=$w/run/calls
for t in "${TRACES[@]}"; do
  [ -s "$t" ] || fail "empty trace $t"
  src=${t##*/}
  awk -v m="$mnt/" -v src="${src%.strace}" '
    {
      line = $0
      sub(/^[0-9]+ +/, "", line)
      if (line !~ /^[a-z_0-9]+\(/) next
      name = line
      sub(/\(.*/, "", name)
      # execve: its argv mentions the mount, it accesses no file there.
      if (name == "execve") next
      # -y decorates descriptors (arguments and results) with their paths.
      if (index(line, "<" m) || index(line, "\"" m) || line ~ /"[^"]*pg_wal[\/"]/)
        print name, src
    }' "$t"
done | sort | uniq -c | awk '
  { n[$2] += $1; s[$2] = s[$2] (s[$2] == "" ? "" : ",") $3 }
  END { for (k in n) printf "%d %s %s\n", n[k], k, s[k] }' | sort -rn >"$calls"
(($(wc -l <"$calls") > 5)) || { cat "$calls" >&2; fail "too few calls on the mount in the traces"; }
grep -qw pwrite64 "$calls" || grep -qw pwritev "$calls" ||
  { cat "$calls" >&2; fail "no WAL write on the mount in the traces: the filter is wrong"; }
log "system calls on walfs files (count, name, traced by):"
sed 's/^/    /' "$calls" >&2
while read -r n name src; do
  check syscall "$name" "$n calls by $src"
done <"$calls"

# The libc imports of the WAL-writing binaries.
for b in "${BINARIES[@]}"; do
  f=$PG_ROOT$PG_BIN/$b
  [ -x "$f" ] || { log "$b not in this version's $PG_BIN"; continue; }
  imports=$(nm -D --undefined-only "$f" | awk '{ print $2 }' | sed 's/@.*//' | grep -E "$SYMBOL_RE" |
    sort -u | tr '\n' ' ')
  log "$b imports: $imports"
  for sym in $imports; do check symbol "$sym" "$b"; done
done

if ((${#errors[@]})); then
  printf '  %s\n' "${errors[@]}" >&2
  fail "${#errors[@]} uncovered calls or symbols for PostgreSQL $WALFS_PG_VERSION"
fi
log "every call and import on walfs files is interposed or listed (PostgreSQL $WALFS_PG_VERSION)"
log "PASS"
