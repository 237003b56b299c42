# shellcheck shell=bash
# Benchmark targets: the WAL locations compared (sourced by tools/bench/run.sh).
#
# A target is a directory that PostgreSQL's pg_wal (or a benchmark's files) can live in.
# target_up NAME brings it up (mount, pool, build) and sets TARGET_BASE[NAME];
# target_dir NAME SUB makes a fresh, empty subdirectory owned by postgres inside it.
# Everything made is registered with on_exit (common.sh): mounts are unmounted and
# files removed on any exit.
#
#   walfs-pmem         walfs daemon, pool on tmpfs, PMEM_IS_PMEM_FORCE=1 (true-PMEM path)
#   walfs-direct       as walfs-pmem, and the programs writing WAL (the server,
#                      pg_test_fsync, walfs_segbench) preload libwalfs-direct.so
#   walfs-direct-b     as walfs-direct with DIRECT_LIB_B preloaded instead (its own
#                      daemon and pool): two builds of the library side by side in one
#                      run; skipped unless DIRECT_LIB_B names a file
#   walfs-msync-tmpfs  walfs daemon, pool on tmpfs (msync path)
#   walfs-msync-disk   walfs daemon, pool file on the local disk (msync path)
#   walfs-msync-reads  as walfs-msync-disk, and the WAL programs preload the library:
#                      writes go through FUSE (msync mode), reads through read leases
#   tmpfs              a plain tmpfs directory: the ceiling, no durability
#   ext4               a directory on the local disk (what users have today)
#   passthrough_ll     libfuse's example passthrough_ll over tmpfs, built here
#
# Needs: SHM_ROOT (a dir on tmpfs), DISK_ROOT (a dir on the local disk), POOL_SIZE;
# POOL_ROOT, where the tmpfs-backed pools go, defaults to SHM_ROOT.

ALL_TARGETS=(walfs-pmem walfs-direct walfs-direct-b walfs-msync-tmpfs walfs-msync-disk walfs-msync-reads tmpfs ext4 passthrough_ll)
DIRECT_LIB=${DIRECT_LIB:-$WALFS_BUILD_DIR/fs/direct/libwalfs-direct.so}
DIRECT_LIB_B=${DIRECT_LIB_B:-}
PASSTHROUGH_SRC=${PASSTHROUGH_SRC:-/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c}

declare -A TARGET_BASE=()   # target -> directory to make WAL dirs in
declare -A TARGET_NOTE=()   # target -> one line describing what it is
declare -A TARGET_SKIP=()   # target -> why it is not run
declare -A WALFS_PIDS=()    # walfs target -> daemon pid
declare -A WALFS_POOLS=()   # walfs target -> pool file
declare -A TARGET_PRELOAD=()  # target -> library the WAL writers preload (walfs-direct)

# with_target_env TARGET CMD...: runs CMD with TARGET's preload, if it has one.
with_target_env() {
  local target=$1
  shift
  if [ -n "${TARGET_PRELOAD[$target]:-}" ]; then
    LD_PRELOAD=${TARGET_PRELOAD[$target]} "$@"
  else
    "$@"
  fi
}

# fs_desc PATH: "fstype (source)" of the file system holding PATH.
fs_desc() { findmnt -n -f -o FSTYPE,SOURCE -T "$1" | awk '{print $1 " (" $2 ")"}'; }

# _walfs_up NAME POOL FORCE [EXTRA_MOUNT_OPTIONS [EXPERIMENTS]]: FORCE=1 runs the daemon
# with PMEM_IS_PMEM_FORCE=1; EXPERIMENTS goes to WALFS_EXPERIMENT (fs/options.h).
_walfs_up() {
  local name=$1 pool=$2 force=$3 extra=${4:-} experiments=${5:-}
  local mnt=$SHM_ROOT/mnt/$name opts=allow_other,default_permissions
  if [ -n "$extra" ]; then opts+=",$extra"; fi
  if [ ! -x "$WALFS" ] || [ ! -x "$MKFS" ]; then
    TARGET_SKIP[$name]="walfs not built ($WALFS, $MKFS)"
    return 0
  fi
  rm -f "$pool"
  on_exit "rm -f '$pool'"
  # The pool belongs to postgres, as in the packaged setup: a direct-access server opens
  # it itself.
  if ! make_pool "$pool" "$POOL_SIZE" --owner postgres:postgres; then
    TARGET_SKIP[$name]="mkfs.walfs --size $POOL_SIZE $pool failed"
    return 0
  fi
  if [ "$force" = 1 ]; then
    PMEM_IS_PMEM_FORCE=1 WALFS_EXPERIMENT=$experiments mount_walfs "$pool" "$mnt" -o "$opts"
  else
    WALFS_EXPERIMENT=$experiments mount_walfs "$pool" "$mnt" -o "$opts"
  fi
  if [ -n "$experiments" ] && ! grep -q 'benchmark experiments in force' "$WALFS_LOG"; then
    TARGET_SKIP[$name]="WALFS_EXPERIMENT=$experiments not honoured: build with -DWALFS_BENCH_EXPERIMENTS=ON"
    fusermount3 -u -z "$mnt"
    return 0
  fi
  WALFS_PIDS[$name]=$WALFS_PID
  WALFS_POOLS[$name]=$pool
  TARGET_BASE[$name]=$mnt
  local env_note="PMEM_IS_PMEM_FORCE unset" mode want=msync
  [ "$force" = 1 ] && env_note="PMEM_IS_PMEM_FORCE=1" && want=pmem
  # What the daemon itself says it does, so a mislabelled target cannot go unnoticed.
  mode=$("$WALFSCTL" status "$mnt" 2>/dev/null | awk '$1 == "mode:" {print $2}') || mode=
  TARGET_NOTE[$name]="walfs, pool $pool on $(fs_desc "$pool"), $env_note, daemon mode ${mode:-unknown}"
  if [ -n "$extra" ]; then TARGET_NOTE[$name]+=", -o $extra"; fi
  if [ -n "$experiments" ]; then TARGET_NOTE[$name]+=", WALFS_EXPERIMENT=$experiments"; fi
  [ "$mode" = "$want" ] || TARGET_NOTE[$name]+=" -- WARNING: expected mode $want"
}

# _walfs_preloaded_up NAME POOL FORCE LIB WHAT: _walfs_up, and the target's programs
# preload LIB (WHAT says for the note which of them and to what end).
_walfs_preloaded_up() {
  local name=$1 pool=$2 force=$3 lib=$4 what=$5
  if [ ! -f "$lib" ]; then
    TARGET_SKIP[$name]="direct-access library not built ($lib)"
    return 0
  fi
  _walfs_up "$name" "$pool" "$force"
  if [ -n "${TARGET_BASE[$name]:-}" ]; then
    TARGET_PRELOAD[$name]=$lib
    TARGET_NOTE[$name]+=", $what preload $lib"
  fi
}

_passthrough_up() {
  local name=passthrough_ll
  if [ ! -f "$PASSTHROUGH_SRC" ]; then
    TARGET_SKIP[$name]="$PASSTHROUGH_SRC not found (Debian's libfuse3-dev ships it under /usr/share/doc/libfuse3-dev/examples)"
    return 0
  fi
  local bin=$SHM_ROOT/bin/passthrough_ll src=$SHM_ROOT/passthrough-src
  local mnt=$SHM_ROOT/mnt/$name log=$SHM_ROOT/passthrough_ll.log
  mkdir -p "$SHM_ROOT/bin" "$src" "$mnt"
  # Built here, never kept: the example is libfuse's, compiled as its Makefile would.
  # shellcheck disable=SC2046
  if ! gcc -O2 -o "$bin" "$PASSTHROUGH_SRC" $(pkg-config --cflags --libs fuse3) 2>"$log"; then
    TARGET_SKIP[$name]="building $PASSTHROUGH_SRC failed: $(head -3 "$log" | tr '\n' ' ')"
    return 0
  fi
  # Runs as root without default_permissions (it does no permission checks itself and
  # creates files as its own uid), so the postgres user can use what it creates.
  "$bin" -f -o "source=$src,allow_other" "$mnt" >"$log" 2>&1 &
  local pid=$!
  on_exit "fusermount3 -u -z '$mnt'; kill -9 $pid"
  local i
  for ((i = 0; i < 200; i++)); do
    mountpoint -q "$mnt" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ! mountpoint -q "$mnt"; then
    TARGET_SKIP[$name]="passthrough_ll did not mount: $(head -3 "$log" | tr '\n' ' ')"
    return 0
  fi
  TARGET_BASE[$name]=$mnt
  TARGET_NOTE[$name]="libfuse $(pkg-config --modversion fuse3) example passthrough_ll (default options: cache=auto, multithreaded) over $(fs_desc "$src")"
}

target_up() {
  local name=$1 d
  case $name in
    walfs-pmem) _walfs_up "$name" "${POOL_ROOT:-$SHM_ROOT}/walfs-pmem.pool" 1 ;;
    walfs-direct | walfs-direct-b)
      local lib=$DIRECT_LIB
      [ "$name" = walfs-direct ] || lib=$DIRECT_LIB_B
      if [ -z "$lib" ]; then
        TARGET_SKIP[$name]="DIRECT_LIB_B is not set (the library build to compare)"
        return 0
      fi
      _walfs_preloaded_up "$name" "${POOL_ROOT:-$SHM_ROOT}/$name.pool" 1 "$lib" "WAL writers"
      ;;
    walfs-msync-tmpfs) _walfs_up "$name" "${POOL_ROOT:-$SHM_ROOT}/walfs-msync.pool" 0 ;;
    walfs-msync-disk) _walfs_up "$name" "$DISK_ROOT/walfs-msync.pool" 0 ;;
    walfs-msync-reads)
      _walfs_preloaded_up "$name" "$DISK_ROOT/walfs-msync-reads.pool" 0 "$DIRECT_LIB" \
        "WAL programs (read leases only)"
      ;;
    tmpfs)
      d=$SHM_ROOT/tmpfs-wal
      mkdir -p "$d"
      TARGET_BASE[$name]=$d
      TARGET_NOTE[$name]="plain directory on $(fs_desc "$d") (no durability)"
      ;;
    ext4)
      d=$DISK_ROOT/disk-wal
      mkdir -p "$d"
      TARGET_BASE[$name]=$d
      local fstype
      fstype=$(findmnt -n -o FSTYPE -T "$d")
      TARGET_NOTE[$name]="plain directory on $(fs_desc "$d")"
      [ "$fstype" = ext4 ] || TARGET_NOTE[$name]+=" -- NOTE: this is $fstype, not ext4"
      ;;
    passthrough_ll) _passthrough_up ;;
    *) fail "unknown target '$name' (known: ${ALL_TARGETS[*]})" ;;
  esac
}

# target_dir TARGET SUB: a fresh empty directory TARGET_BASE/SUB owned by postgres.
target_dir() {
  local d=${TARGET_BASE[$1]}/$2
  rm -rf "$d"
  mkdir -p "$d"
  chown postgres:postgres "$d"
  chmod 0700 "$d"
  echo "$d"
}

# walfs_status TARGET FILE: the daemon's status and counters (walfsctl status).
walfs_status() {
  "$WALFSCTL" status "${TARGET_BASE[$1]}" >"$2" 2>&1 || true
}

# walfs_rss TARGET: prints "VMRSS_KIB NONPOOL_KIB" for the target's daemon: VmRSS from
# /proc/PID/status, and the Rss of every mapping in /proc/PID/smaps except the pool's.
walfs_rss() {
  local pid=${WALFS_PIDS[$1]} pool=${WALFS_POOLS[$1]}
  local vmrss nonpool
  vmrss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status") || return 1
  nonpool=$(awk -v pool="$pool" '
    /^[0-9a-f]+-[0-9a-f]+ / { path = (NF >= 6) ? $6 : ""; for (i = 7; i <= NF; i++) path = path " " $i; next }
    /^Rss:/ { if (path != pool && path != pool " (deleted)") sum += $2 }
    END { print sum + 0 }' "/proc/$pid/smaps") || return 1
  echo "$vmrss $nonpool"
}

# walfs_reads TARGET: the FUSE READ requests the target's daemon has served so far.
walfs_reads() {
  python3 -c 'import json, os, sys
print(json.loads(os.getxattr(sys.argv[1], "user.walfs.status"))["reads"])' "${TARGET_BASE[$1]}"
}

# target_twin TARGET: brings up, once, a second WAL location of the same kind as TARGET
# (for a walfs target its own pool and mount, the same mode and preload; for a plain
# directory target another directory beside it) and sets TARGET_BASE and TARGET_PRELOAD
# of "TARGET-twin". For the standby of the synchronous replication workload.
target_twin() {
  local name=$1 twin=$1-twin
  [ -n "${TARGET_BASE[$twin]:-}" ] && return 0
  case $name in
    walfs-pmem | walfs-direct | walfs-direct-b)
      _walfs_up "$twin" "${POOL_ROOT:-$SHM_ROOT}/$twin.pool" 1
      [ -n "${TARGET_BASE[$twin]:-}" ] || return 1
      TARGET_PRELOAD[$twin]=${TARGET_PRELOAD[$name]:-}
      ;;
    walfs-msync-tmpfs) _walfs_up "$twin" "${POOL_ROOT:-$SHM_ROOT}/$twin.pool" 0 ;;
    walfs-msync-disk | walfs-msync-reads)
      _walfs_up "$twin" "$DISK_ROOT/$twin.pool" 0
      [ -n "${TARGET_BASE[$twin]:-}" ] || return 1
      TARGET_PRELOAD[$twin]=${TARGET_PRELOAD[$name]:-}
      ;;
    *)
      TARGET_BASE[$twin]=${TARGET_BASE[$name]}/twin
      mkdir -p "${TARGET_BASE[$twin]}"
      chmod 0755 "${TARGET_BASE[$twin]}"
      ;;
  esac
  [ -n "${TARGET_BASE[$twin]:-}" ]
}
