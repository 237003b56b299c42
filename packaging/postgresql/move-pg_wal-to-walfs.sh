#!/bin/bash
# move-pg_wal-to-walfs.sh PGDATA POOL MOUNTPOINT SIZE
#
# Moves the WAL of an existing, cleanly stopped PostgreSQL cluster onto walfs:
#
#   1. checks: run as root; PGDATA is a cluster whose pg_wal is a plain directory; the
#      cluster is not running and was shut down cleanly (pg_controldata says
#      "shut down"); POOL does not exist; MOUNTPOINT is an empty directory or absent,
#      and not a mount point;
#   2. mkfs.walfs --size SIZE --segment-size <the cluster's WAL segment size> POOL,
#      owned by the cluster's owner, mode 0600;
#   3. mounts it: walfs POOL MOUNTPOINT -o allow_other,default_permissions (the daemon
#      runs as root and detaches once mounted);
#   4. copies PGDATA/pg_wal into MOUNTPOINT/pg_wal as the cluster's owner (cp -a),
#      fsyncs every copied file and directory, and compares every file with its
#      original;
#   5. renames PGDATA/pg_wal to PGDATA/pg_wal.pre-walfs (kept: delete it yourself once
#      the cluster runs well) and makes PGDATA/pg_wal a symlink to MOUNTPOINT/pg_wal.
#
# pg_wal goes into a directory inside the mount, not the mount's root: if the file
# system is ever not mounted, PostgreSQL finds no pg_wal at all and stops, instead of
# writing WAL into the bare directory underneath.
#
# Any failure before step 5 unmounts and leaves PGDATA as it was (the new pool stays,
# for inspection; remove it by hand). The mount is left in place on success; the
# script prints how to make it permanent (fstab or walfs@.service) and then start
# the cluster.
#
# SIZE (e.g. 4G) must hold everything pg_wal can grow to: max_wal_size, plus
# wal_keep_size, plus 5 segments (3 in flight, 2 reserved for segments: docs/operations.md,
# "Sizing a pool"), plus segments held by replication slots or a failing archive_command.
# SIZE "auto" sizes the pool by that rule from the cluster's own max_wal_size and
# wal_keep_size (read with postgres -C); an explicit SIZE smaller than the rule asks
# for is used, with mkfs.walfs's warning giving the size needed and the max_wal_size
# the pool fits.
#
# Environment: PG_BIN (default /usr/lib/postgresql/VERSION/bin) for pg_ctl and
# pg_controldata; walfs and mkfs.walfs are taken from PATH (/usr/sbin when installed).
set -euo pipefail
export LC_ALL=C

me=$(basename "$0")
say() { printf '%s: %s\n' "$me" "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

usage() {
  cat <<EOF
usage: $me PGDATA POOL MOUNTPOINT SIZE

Moves the WAL of the stopped PostgreSQL cluster in PGDATA onto a new walfs pool
POOL of SIZE (as mkfs.walfs --size reads it: 4G = 4GB = 4GiB; or auto: sized from
the cluster's max_wal_size and wal_keep_size), mounted at MOUNTPOINT. PGDATA/pg_wal
becomes a symlink to MOUNTPOINT/pg_wal; the old directory is kept as
PGDATA/pg_wal.pre-walfs.
EOF
}

case "${1:-}" in
  -h | --help)
    usage
    exit 0
    ;;
esac
[ $# -eq 4 ] || {
  usage >&2
  exit 2
}
pgdata=${1%/}
pool=$2
mnt=${3%/}
size=$4

# --- 1. checks; nothing is changed until all pass.
[ "$(id -u)" -eq 0 ] || die "run as root (the mount, and copies as the cluster's owner)"
for tool in walfs mkfs.walfs; do
  command -v "$tool" >/dev/null || die "$tool not found on PATH"
done
[ -f "$pgdata/PG_VERSION" ] || die "$pgdata is not a PostgreSQL data directory (no PG_VERSION)"
pgdata=$(cd "$pgdata" && pwd -P)
version=$(cat "$pgdata/PG_VERSION")
pg_bin=${PG_BIN:-/usr/lib/postgresql/$version/bin}
[ -x "$pg_bin/pg_ctl" ] || die "no pg_ctl in $pg_bin (set PG_BIN)"
wal=$pgdata/pg_wal
[ ! -L "$wal" ] || die "$wal is already a symlink (to $(readlink "$wal")): nothing to move"
[ -d "$wal" ] || die "$wal is not a directory"
[ ! -e "$wal.pre-walfs" ] || die "$wal.pre-walfs exists: a previous move was not finished"
# The Debian cluster (postgresql-common) whose data directory this is, for the
# instance names printed at the end (postgresql@VERSION-NAME, walfs@VERSION-NAME).
cluster=
if command -v pg_lsclusters >/dev/null; then
  while read -r c_version c_name _ _ _ c_datadir _; do
    if [ "$c_version" = "$version" ] && [ "$(realpath -m -- "$c_datadir")" = "$pgdata" ]; then
      cluster=$c_name
    fi
  done < <(pg_lsclusters -h 2>/dev/null || true)
fi
owner=$(stat -c %U "$pgdata")
group=$(stat -c %G "$pgdata")
[ "$owner" != root ] || die "$pgdata belongs to root; a cluster belongs to its server's user"

as_owner() { runuser -u "$owner" -- "$@"; }

if as_owner "$pg_bin/pg_ctl" status -D "$pgdata" >/dev/null 2>&1; then
  die "the cluster in $pgdata is running: stop it first (pg_ctlcluster $version NAME stop, or pg_ctl stop -D $pgdata)"
fi
state=$("$pg_bin/pg_controldata" "$pgdata" | sed -n 's/^Database cluster state: *//p')
case $state in
  "shut down" | "shut down in recovery") ;;
  *) die "the cluster was not shut down cleanly (state: '$state'): start it and stop it cleanly first, so its WAL needs no recovery while it moves" ;;
esac
segsize=$("$pg_bin/pg_controldata" "$pgdata" | sed -n 's/^Bytes per WAL segment: *//p')
[[ $segsize =~ ^[0-9]+$ ]] || die "could not read the WAL segment size from pg_controldata"
# The cluster's WAL settings, for the pool's size (postgres -C reads the configuration
# as the server would, defaults included, and prints MB for these two). A Debian
# cluster's configuration is in /etc/postgresql/VERSION/NAME.
confdir=$pgdata
if [ -n "$cluster" ] && [ -f "/etc/postgresql/$version/$cluster/postgresql.conf" ]; then
  confdir=/etc/postgresql/$version/$cluster
fi
guc() { as_owner "$pg_bin/postgres" -D "$confdir" -C "$1" 2>/dev/null || true; }
max_wal_mb=$(guc max_wal_size)
keep_mb=$(guc wal_keep_size)
[[ $max_wal_mb =~ ^[0-9]+$ && $keep_mb =~ ^[0-9]+$ ]] ||
  die "could not read max_wal_size and wal_keep_size (postgres -C -D $confdir gave '$max_wal_mb', '$keep_mb')"

[ ! -e "$pool" ] || die "$pool exists: refusing to overwrite it (choose another path, or remove it yourself)"
pool_dir=$(dirname "$pool")
[ -d "$pool_dir" ] || die "directory $pool_dir does not exist"
pool=$(cd "$pool_dir" && pwd -P)/$(basename "$pool")
if [ -e "$mnt" ]; then
  [ -d "$mnt" ] || die "$mnt is not a directory"
  ! mountpoint -q "$mnt" || die "$mnt is already a mount point"
  [ -z "$(ls -A "$mnt")" ] || die "$mnt is not empty"
fi
case "$(realpath -m "$mnt")/" in
  "$pgdata"/*) die "$mnt is inside PGDATA: base backups would copy the WAL twice; choose a directory outside $pgdata" ;;
esac

# --- 2. pool
sizing=(--max-wal-size "${max_wal_mb}M" --wal-keep-size "${keep_mb}M" --segment-size "$segsize")
if [ "$size" = auto ]; then
  say "creating pool $pool sized for max_wal_size ${max_wal_mb}MB, wal_keep_size ${keep_mb}MB, WAL segment size $segsize"
  mkfs.walfs "${sizing[@]}" "$pool" >&2
else
  say "creating pool $pool ($size, WAL segment size $segsize)"
  mkfs.walfs --size "$size" "${sizing[@]}" "$pool" >&2
fi
chown "$owner:$group" "$pool"
chmod 0600 "$pool"

# --- 3. mount. From here until the swap, a failure unmounts again.
mounted=0
rollback() {
  local rc=$?
  if [ "$mounted" = 1 ]; then
    say "failed: unmounting $mnt; $pgdata is unchanged; the pool $pool is left for inspection"
    umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
  exit "$rc"
}
trap rollback EXIT
trap 'exit 130' INT TERM

if [ ! -e "$mnt" ]; then
  install -d -m 0700 -o "$owner" -g "$group" "$mnt"
fi
say "mounting $pool at $mnt"
walfs "$pool" "$mnt" -o allow_other,default_permissions
mounted=1
mountpoint -q "$mnt" || die "walfs returned but $mnt is not mounted"

# --- 4. copy and verify
chown "$owner:$group" "$mnt"
chmod 0700 "$mnt"
as_owner mkdir -m 0700 "$mnt/pg_wal"
say "copying $wal ($(du -sh "$wal" | cut -f1)) to $mnt/pg_wal"
as_owner cp -a "$wal/." "$mnt/pg_wal/"
# cp does not fsync, and syncfs(2) does not reach FUSE file systems: fsync every file
# and directory one by one.
as_owner find "$mnt/pg_wal" -exec sync -- {} +
as_owner sync -- "$mnt"
# Same names, same types, same bytes.
list_orig=$(cd "$wal" && find . -printf '%y %p\n' | sort)
list_copy=$(cd "$mnt/pg_wal" && find . -printf '%y %p\n' | sort)
[ "$list_copy" = "$list_orig" ] || die "the copy in $mnt/pg_wal does not list the same entries as $wal"
while IFS= read -r -d '' f; do
  cmp -s -- "$wal/$f" "$mnt/pg_wal/$f" || die "$mnt/pg_wal/$f differs from $wal/$f"
done < <(cd "$wal" && find . -type f -print0)

# --- 5. swap
mv -- "$wal" "$wal.pre-walfs"
if ! ln -s -- "$mnt/pg_wal" "$wal"; then
  mv -- "$wal.pre-walfs" "$wal"
  die "could not create the symlink $wal"
fi
chown -h "$owner:$group" "$wal"
sync -- "$pgdata"
mounted=0
trap - EXIT

say "done. $wal -> $mnt/pg_wal; the old WAL is kept in $wal.pre-walfs."
say "$mnt is mounted now by a walfs run by hand."
if [ -n "$cluster" ]; then
  instance=$version-$cluster
  cat >&2 <<EOF
$me: this is the Debian cluster $version/$cluster. To mount its WAL at every boot, either
  - /etc/fstab (the daemon as root; the boot mounts it without waiting for it, and
    postgresql@$instance.service starts only with it):
      $pool $mnt fuse.walfs allow_other,default_permissions,nofail,x-systemd.requires-mounts-for=${pool%/*},x-systemd.before=postgresql@$instance.service,x-systemd.wanted-by=local-fs.target,x-systemd.required-by=postgresql@$instance.service 0 0
  - or walfs@.service (the daemon as $owner; /etc/fuse.conf needs user_allow_other):
      printf 'POOL=$pool\\nMOUNTPOINT=$mnt\\n' >/etc/walfs/$instance.conf
      mkdir -p /etc/systemd/system/postgresql@$instance.service.d
      cp /usr/share/walfs/postgresql/walfs.conf /etc/systemd/system/postgresql@$instance.service.d/
      systemctl daemon-reload
      umount $mnt && systemctl enable --now walfs@$instance
$me: then start the cluster (pg_ctlcluster $version $cluster start), check it, and remove $wal.pre-walfs.
EOF
else
  cat >&2 <<EOF
$me: $pgdata is not a Debian cluster (pg_lsclusters does not list it), so no
  postgresql@ unit starts it. To mount its WAL at every boot, an /etc/fstab line (the
  daemon as root), and order whatever starts this server after the mount unit:
      $pool $mnt fuse.walfs allow_other,default_permissions,nofail,x-systemd.requires-mounts-for=${pool%/*} 0 0
$me: then start the cluster, check it, and remove $wal.pre-walfs.
EOF
fi

# Direct access: only in pmem mode, and only when the library is installed.
mode=
if command -v walfsctl >/dev/null; then
  mode=$(walfsctl status "$mnt" --json 2>/dev/null | sed -n 's/.*"mode":"\([a-z]*\)".*/\1/p') || mode=
fi
direct_lib=${WALFS_DIRECT_LIB:-}
for f in /usr/lib/walfs/libwalfs-direct.so /usr/local/lib/walfs/libwalfs-direct.so; do
  if [ -z "$direct_lib" ] && [ -f "$f" ]; then direct_lib=$f; fi
done
if [ "$mode" = pmem ] && [ -n "$direct_lib" ]; then
  cat >&2 <<EOF
$me: the pool runs in pmem mode, so the server can write its WAL straight into the pool
  (direct access: no FUSE round trip per write; fsync becomes a no-op). For a Debian
  cluster, add this line to /etc/postgresql/$version/NAME/environment (pg_ctlcluster and
  postgresql@$version-NAME.service read it), then restart the cluster:
      LD_PRELOAD = '$direct_lib'
  Remove the line (and restart) to turn it off; the server then runs exactly as before.
EOF
elif [ "$mode" = msync ]; then
  say "the pool runs in msync mode (not on PMEM): direct access (libwalfs-direct.so) does not apply"
fi
