#!/bin/bash
# walfs@.service and the postgresql@.service drop-in.
#
# systemd is not PID 1 on a build machine, so no unit can be started here. Checked
# instead:
#   1. systemd-analyze verify accepts walfs@15-main.service and postgresql@15-main.service
#      with the drop-in, without a single warning (and does report a broken copy, so the
#      check can fail);
#   2. the unit is run the way systemd would run it: the Environment= default, then the
#      instance's EnvironmentFile, ${VAR} words expanded, ExecStartPre then ExecStart,
#      as the unit's User=/Group= (setpriv, which execs like systemd does), with
#      NOTIFY_SOCKET on a datagram socket we listen on. READY=1 must arrive from the
#      main pid with the file system mounted; SIGTERM (systemd's stop) must unmount and
#      exit 0;
#   3. walfs-prestart refuses each misconfiguration with a sentence (missing pool, pool
#      not readable by the user, mount point not writable, allow_other without
#      user_allow_other, a live mount, a /dev/fuse the user cannot open (with which
#      the daemon itself fails), no /dev/fuse) and releases the dead mount of a daemon killed
#      with SIGKILL, after which the unit starts again (and, as root for a unit
#      overridden to User=root, with umount);
#   4. an fstab line for fuse.walfs goes through the real systemd-fstab-generator: the
#      .mount unit it writes has the pool, the mount point, the type, the ordering
#      before postgresql@15-main.service and the requirement from it, passes
#      systemd-analyze verify, and its command (mount WHAT WHERE -t TYPE -o OPTIONS)
#      mounts walfs.
# Parts 2-4 run in a private mount namespace over a bind-mounted /etc/fuse.conf
# (and a 0666 /dev/fuse node where the machine's is 0600, as Debian's udev makes it).
source "$(dirname "$0")/lib/common.sh"
source "$(dirname "$0")/lib/docs.sh"

require_fuse
[ -x "$MKFS" ] || fail "mkfs.walfs not built: $MKFS"
id postgres >/dev/null 2>&1 || skip "no postgres user"
for tool in unshare setpriv python3 fusermount3; do
  command -v $tool >/dev/null || skip "$tool is missing"
done
reexec_in_mount_namespace "$@"

PKG=$WALFS_SOURCE_DIR/packaging
UNIT=$PKG/systemd/walfs@.service
PRESTART=$PKG/systemd/walfs-prestart
DROPIN=$PKG/postgresql/walfs.conf
WORK=$(make_workdir)
# make_workdir runs in the $(...) subshell, where its own cleanup entry is lost.
on_exit "rm -rf '$WORK'"

# --- 1. systemd-analyze verify
if command -v systemd-analyze >/dev/null; then
  V=$WORK/units
  mkdir -p "$V/postgresql@15-main.service.d"
  # The packaged paths, pointed at the build (verify checks that executables exist).
  sed -e "s#/usr/sbin/walfs #$WALFS #" -e "s#/usr/libexec/walfs/walfs-prestart#$PRESTART#" \
    "$UNIT" >"$V/walfs@.service"
  grep -q "^ExecStart=$WALFS " "$V/walfs@.service" || fail "ExecStart is not /usr/sbin/walfs"
  if [ -f /lib/systemd/system/postgresql@.service ]; then
    cp /lib/systemd/system/postgresql@.service "$V/"
  else
    printf '[Unit]\nDescription=PostgreSQL Cluster %%i\n[Service]\nExecStart=/bin/true\n' \
      >"$V/postgresql@.service"
  fi
  cp "$DROPIN" "$V/postgresql@15-main.service.d/walfs.conf"
  out=$(cd "$V" && systemd-analyze verify --man=no ./walfs@15-main.service ./postgresql@15-main.service 2>&1) ||
    fail "systemd-analyze verify failed: $out"
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
  # The drop-in is read: a bad key in it is reported.
  echo "NoSuchKey=1" >>"$V/postgresql@15-main.service.d/walfs.conf"
  out=$(cd "$V" && systemd-analyze verify --man=no ./postgresql@15-main.service 2>&1 || true)
  [[ $out == *NoSuchKey* ]] || fail "systemd-analyze verify ignores the drop-in: $out"
  cp "$DROPIN" "$V/postgresql@15-main.service.d/walfs.conf"
  log "systemd-analyze verify: clean"
else
  log "systemd-analyze missing: unit syntax not verified"
fi
grep -q '^Type=notify$' "$UNIT" || fail "walfs@.service is not Type=notify"
grep -q '^Before=postgresql@%i.service$' "$UNIT" || fail "walfs@.service is not ordered before postgresql@%i"
grep -q '^BindsTo=walfs@%i.service$' "$DROPIN" || fail "drop-in lacks BindsTo=walfs@%i.service"
grep -q '^After=walfs@%i.service$' "$DROPIN" || fail "drop-in lacks After=walfs@%i.service"

# --- 2. run the unit as systemd would
if ! as_postgres test -r /dev/fuse -a -w /dev/fuse; then
  log "/dev/fuse is $(stat -c %a /dev/fuse) here: binding a 0666 node over it in this namespace"
  mknod -m 0666 "$WORK/fuse-dev" c "$((16#$(stat -c %t /dev/fuse)))" "$((16#$(stat -c %T /dev/fuse)))" ||
    skip "cannot make a /dev/fuse node"
  mount --bind "$WORK/fuse-dev" /dev/fuse
  on_exit "umount /dev/fuse"
fi
printf '%s\n' "# test" "user_allow_other" >"$WORK/fuse.conf.with"
printf '%s\n' "# test" "#user_allow_other" >"$WORK/fuse.conf.without"
mount --bind "$WORK/fuse.conf.with" /etc/fuse.conf
on_exit "umount -l /etc/fuse.conf"

POOL=$WORK/15-main.pool
MNT=$WORK/wal
make_pool "$POOL" 64M --owner postgres:postgres
install -d -o postgres -g postgres -m 0700 "$MNT"
on_exit "umount -l '$MNT'"
CONF=$WORK/15-main.conf
cat >"$CONF" <<EOF
# instance settings, as in /etc/walfs/15-main.conf
POOL=$POOL
MOUNTPOINT=$MNT
EOF

unit_value() { sed -n "s/^$1=//p" "$UNIT"; }
user=$(unit_value User)
group=$(unit_value Group)
[ "$user" = postgres ] && [ "$group" = postgres ] || fail "unit runs as $user:$group, expected postgres"

# The service's environment: Environment= lines, then the EnvironmentFile.
declare -A ENV=()
load_env() {
  local line
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    ENV[${line%%=*}]=${line#*=}
  done
}
load_env < <(unit_value Environment)
load_env <"$CONF"
[ "${ENV[OPTIONS]}" = allow_other,default_permissions ] || fail "default OPTIONS: ${ENV[OPTIONS]}"

# Exec line -> argv, as systemd does it for these lines: words split on blanks,
# ${VAR} replaced by the variable's value as one word, packaged paths -> build paths.
ARGV=()
exec_argv() {
  local word
  ARGV=()
  for word in $(unit_value "$1"); do
    if [[ $word =~ ^\$\{([A-Za-z_]+)\}$ ]]; then
      word=${ENV[${BASH_REMATCH[1]}]-}
    fi
    case $word in
      /usr/sbin/walfs) word=$WALFS ;;
      /usr/libexec/walfs/walfs-prestart) word=$PRESTART ;;
    esac
    ARGV+=("$word")
  done
}
as_unit_user() { setpriv --reuid="$user" --regid="$group" --init-groups -- "$@"; }

# NOTIFY_SOCKET: every datagram appended to a file, one message per line.
NOTIFY=$WORK/notify.sock
python3 - "$NOTIFY" "$WORK/notify.log" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = 0
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = int.from_bytes(data[0:4], "little")
        log.write("pid=%d %s\n" % (pid, msg.decode().replace("\n", " ")))
PY
NOTIFY_PID=$!
on_exit "kill $NOTIFY_PID"
for ((i = 0; i < 100; i++)); do [ -S "$NOTIFY" ] && break; sleep 0.05; done
[ -S "$NOTIFY" ] || fail "notify listener did not start"
touch "$WORK/notify.log"

SERVICE_PID=
# start_unit: ExecStartPre, then ExecStart in the background; returns once READY=1
# arrived from the main pid.
start_unit() {
  exec_argv ExecStartPre
  as_unit_user "${ARGV[@]}" || fail "ExecStartPre failed: ${ARGV[*]}"
  exec_argv ExecStart
  : >"$WORK/notify.log"
  # setpriv itself (not a function, which would fork a subshell) execs the daemon.
  NOTIFY_SOCKET=$NOTIFY setpriv --reuid="$user" --regid="$group" --init-groups -- \
    "${ARGV[@]}" >"$WORK/service.log" 2>&1 &
  SERVICE_PID=$!
  on_exit "kill -9 $SERVICE_PID"
  local i
  for ((i = 0; i < 200; i++)); do
    grep -q "READY=1" "$WORK/notify.log" && break
    kill -0 "$SERVICE_PID" 2>/dev/null || fail "ExecStart exited: $(cat "$WORK/service.log")"
    sleep 0.05
  done
  grep -q "READY=1" "$WORK/notify.log" || fail "no READY=1 within 10s: $(cat "$WORK/service.log")"
  grep -q "^pid=$SERVICE_PID .*READY=1.*MAINPID=$SERVICE_PID" "$WORK/notify.log" ||
    fail "READY=1 not from the main pid $SERVICE_PID (NotifyAccess=main): $(cat "$WORK/notify.log")"
  mountpoint -q "$MNT" || fail "READY=1 sent but $MNT is not mounted"
}
# stop_unit: systemd's stop, SIGTERM to the main process; the daemon must unmount and
# exit 0 in TimeoutStopSec.
stop_unit() {
  kill -TERM "$SERVICE_PID"
  local rc=0
  wait "$SERVICE_PID" || rc=$?
  [ "$rc" = 0 ] || fail "walfs exited $rc on SIGTERM: $(cat "$WORK/service.log")"
  ! mountpoint -q "$MNT" || fail "still mounted after SIGTERM"
  grep -q "STOPPING=1" "$WORK/notify.log" || fail "no STOPPING=1"
}

log "start walfs@15-main as $user"
start_unit
daemon_user=$(stat -c %U "/proc/$SERVICE_PID")
[ "$daemon_user" = postgres ] || fail "daemon runs as $daemon_user"
opts=$(findmnt -n -o OPTIONS --mountpoint "$MNT")
[[ ,$opts, == *,allow_other,* && ,$opts, == *,user_id=$(id -u postgres),* ]] ||
  fail "mount options: $opts"
# mkfs.walfs --owner gave the pool's root to postgres (see 15-main.conf.example).
[ "$(stat -c %U "$MNT")" = postgres ] || fail "the root of a pool made with --owner postgres belongs to $(stat -c %U "$MNT")"
as_postgres bash -c "mkdir -m 0700 '$MNT/pg_wal' && head -c 8192 /dev/zero > '$MNT/pg_wal/f' && sync -- '$MNT/pg_wal/f'" ||
  fail "postgres cannot write its mount"
[ "$(stat -c %s "$MNT/pg_wal/f")" = 8192 ] || fail "root cannot see postgres's file"

# --- 3. walfs-prestart refusals (run as the unit's user, like ExecStartPre)
prestart_refuses() {
  local what=$1 expect=$2
  shift 2
  local out rc=0
  out=$(as_unit_user "$PRESTART" "$@" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "walfs-prestart accepted $what (rc $rc): $out"
  [[ $out == *"$expect"* ]] || fail "walfs-prestart on $what says '$out', expected '$expect'"
  log "refused $what: $out"
}
prestart_refuses "a live mount" "already a mount point" "$POOL" "$MNT" "${ENV[OPTIONS]}"
log "stop"
stop_unit

prestart_refuses "a missing pool" "does not exist" "$WORK/none.pool" "$MNT" "${ENV[OPTIONS]}"
prestart_refuses "no POOL" "POOL= is empty" "" "$MNT" "${ENV[OPTIONS]}"
make_pool "$WORK/root.pool" 48M
prestart_refuses "a root-only pool" "not readable by postgres" "$WORK/root.pool" "$MNT" "${ENV[OPTIONS]}"
mkdir -p "$WORK/rootdir"
prestart_refuses "a root-owned mount point" "not writable by postgres" "$POOL" "$WORK/rootdir" "${ENV[OPTIONS]}"
prestart_refuses "a missing mount point" "does not exist" "$POOL" "$WORK/nodir" "${ENV[OPTIONS]}"
mount --bind "$WORK/fuse.conf.without" /etc/fuse.conf
prestart_refuses "allow_other without user_allow_other" "user_allow_other" "$POOL" "$MNT" "${ENV[OPTIONS]}"
as_unit_user "$PRESTART" "$POOL" "$MNT" default_permissions ||
  fail "walfs-prestart refused a mount without allow_other"
umount /etc/fuse.conf

# /dev/fuse the unit's user cannot open (root's 0600 node, bound over the one in use in
# this namespace): the daemon itself would fail, and walfs-prestart says why and how to
# fix it. Then no device at all (a regular file bound over it).
FUSE_MAJOR=$((16#$(stat -c %t /dev/fuse)))
FUSE_MINOR=$((16#$(stat -c %T /dev/fuse)))
mknod -m 0600 "$WORK/fuse-0600" c "$FUSE_MAJOR" "$FUSE_MINOR" || fail "cannot make a 0600 /dev/fuse node"
mount --bind "$WORK/fuse-0600" /dev/fuse
rc=0
as_unit_user timeout 20 "$WALFS" "$POOL" "$MNT" -f -o default_permissions >"$WORK/nofuse.log" 2>&1 || rc=$?
[ "$rc" = 32 ] || fail "the daemon as $user with a 0600 /dev/fuse exited $rc: $(cat "$WORK/nofuse.log")"
grep -q "/dev/fuse" "$WORK/nofuse.log" || fail "the daemon's failure does not name /dev/fuse: $(cat "$WORK/nofuse.log")"
! mountpoint -q "$MNT" || fail "mounted without access to /dev/fuse"
prestart_refuses "a /dev/fuse only root may open" \
  "/dev/fuse (mode 0600, owner root:root) cannot be opened by postgres: Permission denied. Fix: chmod 0666 /dev/fuse" \
  "$POOL" "$MNT" "${ENV[OPTIONS]}"
umount /dev/fuse
touch "$WORK/fuse-file"
mount --bind "$WORK/fuse-file" /dev/fuse
prestart_refuses "a missing /dev/fuse" "/dev/fuse is missing (or not a character device): load the module (modprobe fuse)" \
  "$POOL" "$MNT" "${ENV[OPTIONS]}"
umount /dev/fuse
as_unit_user "$PRESTART" "$POOL" "$MNT" "${ENV[OPTIONS]}" ||
  fail "walfs-prestart refused the usable /dev/fuse again"

# A daemon killed outright leaves a dead mount; the next start releases it.
log "kill -9 the daemon, start again"
start_unit
{
  kill -9 "$SERVICE_PID"
  wait "$SERVICE_PID" || true
} 2>/dev/null
err=$(LC_ALL=C stat "$MNT" 2>&1 >/dev/null || true)
[[ $err == *"not connected"* ]] || fail "expected a dead mount after kill -9, stat says: $err"
start_unit
grep -q "wal" <(ls "$MNT") || fail "pg_wal missing after the restart"
[ "$(stat -c %s "$MNT/pg_wal/f")" = 8192 ] || fail "data lost across kill -9 and restart"
stop_unit

# The same with the unit overridden to User=root: the dead mount is released with umount.
log "User=root: kill -9, walfs-prestart as root"
"$WALFS" "$POOL" "$MNT" -f -o allow_other,default_permissions >"$WORK/root.log" 2>&1 &
ROOT_PID=$!
on_exit "kill -9 $ROOT_PID"
for ((i = 0; i < 200; i++)); do mountpoint -q "$MNT" && break; sleep 0.05; done
mountpoint -q "$MNT" || fail "root daemon did not mount: $(cat "$WORK/root.log")"
{
  kill -9 "$ROOT_PID"
  wait "$ROOT_PID" || true
} 2>/dev/null
"$PRESTART" "$POOL" "$MNT" allow_other,default_permissions 2>"$WORK/prestart.log" ||
  fail "walfs-prestart as root did not release the dead mount: $(cat "$WORK/prestart.log")"
grep -q "releasing the dead mount" "$WORK/prestart.log" || fail "no release by root: $(cat "$WORK/prestart.log")"
! mountpoint -q "$MNT" || fail "dead mount still there after walfs-prestart as root"

# --- 4. fstab -> systemd-fstab-generator -> .mount unit
GEN=/lib/systemd/system-generators/systemd-fstab-generator
if [ -x "$GEN" ] && command -v systemd-analyze >/dev/null && command -v systemd-escape >/dev/null; then
  G=$WORK/generator
  mkdir -p "$G/normal" "$G/early" "$G/late"
  make_pool "$WORK/fstab.pool" 48M
  FMNT=$WORK/fstab-wal
  mkdir -p "$FMNT"
  on_exit "umount -l '$FMNT'"
  printf '%s %s fuse.walfs %s 0 0\n' "$WORK/fstab.pool" "$FMNT" \
    "allow_other,default_permissions,nofail,x-systemd.requires-mounts-for=$WORK,x-systemd.before=postgresql@15-main.service,x-systemd.wanted-by=local-fs.target,x-systemd.required-by=postgresql@15-main.service" \
    >"$G/fstab"
  SYSTEMD_FSTAB=$G/fstab SYSTEMD_PROC_CMDLINE="" "$GEN" "$G/normal" "$G/early" "$G/late" ||
    fail "systemd-fstab-generator failed"
  name=$(systemd-escape --path --suffix=mount "$FMNT")
  munit=$G/normal/$name
  [ -f "$munit" ] || fail "the generator wrote no $name: $(find "$G" | tr '\n' ' ')"
  mvalue() { sed -n "s/^$1=//p" "$munit"; }
  [ "$(mvalue What)" = "$WORK/fstab.pool" ] || fail "What=$(mvalue What)"
  [ "$(mvalue Where)" = "$FMNT" ] || fail "Where=$(mvalue Where)"
  [ "$(mvalue Type)" = fuse.walfs ] || fail "Type=$(mvalue Type)"
  [[ $(mvalue Before) == *postgresql@15-main.service* ]] || fail "Before=$(mvalue Before)"
  [[ $(mvalue RequiresMountsFor) == *"$WORK"* ]] || fail "RequiresMountsFor=$(mvalue RequiresMountsFor)"
  [ -L "$G/normal/postgresql@15-main.service.requires/$name" ] ||
    fail "postgresql@15-main.service does not require $name"
  [ -L "$G/normal/local-fs.target.wants/$name" ] || fail "local-fs.target does not want $name"
  # Every fstab line the docs and the package give: mounted at boot without waiting
  # (nofail: wanted, not required, by local-fs.target), required by the cluster. The
  # line this check replaced (x-systemd.required-by= without wanted-by=) fails it.
  check_fstab_line "$(doc_block_readme "$WALFS_SOURCE_DIR/docs/install.md" fstab)" \
    postgresql@15-pmem.service "$WORK" >/dev/null
  check_fstab_line "$(doc_block_man "$PKG/man/walfs.8" fstab | tr '\n' ' ' | sed 's/, */,/g; s/  */ /g; s/ $//')" \
    postgresql@15-pmem.service "$WORK" >/dev/null
  while IFS= read -r line; do
    check_fstab_line "${line#\#}" postgresql@15-pmem.service "$WORK" >/dev/null
  done < <(grep -E '^#?/' "$PKG/systemd/fstab.example")
  [ "$(grep -cE '^#?/' "$PKG/systemd/fstab.example")" = 2 ] || fail "fstab.example: expected 2 lines"
  if (check_fstab_line "/var/lib/walfs/15-pmem.pool /var/lib/postgresql/15/pmem-wal fuse.walfs allow_other,nofail,x-systemd.required-by=postgresql@15-pmem.service 0 0" \
    postgresql@15-pmem.service "$WORK") >/dev/null 2>&1; then
    fail "check_fstab_line accepted a line that local-fs.target does not want"
  fi
  log "fstab lines of docs/install.md, walfs(8) and fstab.example: wanted by local-fs.target, required by the cluster"
  cp "$munit" "$V/$name"
  out=$(cd "$V" && systemd-analyze verify --man=no "./$name" 2>&1) || fail "verify $name: $out"
  [ -z "$out" ] || fail "systemd-analyze verify warns about $name: $out"
  # What the mount unit runs; mount.fuse3 then finds walfs on the shell's default PATH
  # (here /usr/local/sbin, bound over, in this namespace only, with a link to the
  # built daemon).
  mkdir -p "$WORK/sbin"
  ln -s "$WALFS" "$WORK/sbin/walfs"
  mount --bind "$WORK/sbin" /usr/local/sbin
  on_exit "umount -l /usr/local/sbin"
  mount "$(mvalue What)" "$(mvalue Where)" -t "$(mvalue Type)" -o "$(mvalue Options)" ||
    fail "the generated mount unit's command failed"
  mountpoint -q "$FMNT" || fail "the generated mount unit's command mounted nothing"
  [ "$(findmnt -n -o FSTYPE --mountpoint "$FMNT")" = fuse.walfs ] || fail "not fuse.walfs"
  echo ok >"$FMNT/f"
  [ "$(cat "$FMNT/f")" = ok ] || fail "the fstab mount does not work"
  umount "$FMNT" || fail "umount of the fstab mount failed"
  log "fstab line -> $name: generated, verified, mounted"
else
  log "systemd-fstab-generator or systemd-analyze missing: fstab -> .mount not checked"
fi

log "PASS"
