#!/bin/bash
# The Debian package: `cpack -G DEB` from the build directory, written to a scratch
# directory (never the source tree), then checked without installing it:
#   - lintian -EIL +pedantic reports no error and no warning (when lintian is installed);
#   - control fields (name, version from project(), section, maintainer, Depends with
#     fuse3 and the shared libraries the binaries link, maintainer scripts);
#   - /usr/share/doc/walfs: the DEP-5 copyright file, the changelog (its newest entry is
#     project()'s version), the README;
#   - the file list: the four executables in /usr/sbin, every packaging/man/*.8 page
#     gzipped in /usr/share/man/man8, the systemd unit and its helper, the PostgreSQL
#     drop-in and mover, the examples;
#   - extracted with dpkg -x: every executable runs (--help) with all its libraries
#     found, the unit names paths that exist in the package, the man pages render;
#   - the maintainer scripts, run over a private /etc, /var/lib and /run with systemctl
#     and deb-systemd-invoke stood in for: prerm stops running walfs@ instances on
#     removal, refuses (saying why) while PostgreSQL or any process uses the mount, and
#     stops nothing on upgrade; postrm disables instances on purge.
source "$(dirname "$0")/lib/common.sh"

command -v cpack >/dev/null || skip "cpack is missing"
command -v dpkg-deb >/dev/null || skip "dpkg-deb is missing"
CONFIG=$WALFS_BUILD_DIR/CPackConfig.cmake
[ -f "$CONFIG" ] || fail "no $CONFIG: packaging/packaging.cmake is not configured"
for exe in "$WALFS" "$MKFS" "$FSCK" "$WALFSCTL"; do
  [ -x "$exe" ] || fail "not built: $exe"
done

WORK=$(make_workdir)
# make_workdir runs in the $(...) subshell, where its own cleanup entry is lost.
on_exit "rm -rf '$WORK'"
# The staging install writes install_manifest.txt into the build directory; leave the
# build directory as it was.
if [ ! -e "$WALFS_BUILD_DIR/install_manifest.txt" ]; then
  on_exit "rm -f '$WALFS_BUILD_DIR/install_manifest.txt'"
fi

version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$CONFIG")
project_version=$(sed -n 's/^project(walfs VERSION \([0-9.]*\).*/\1/p' "$WALFS_SOURCE_DIR/CMakeLists.txt")
[ -n "$project_version" ] || fail "cannot read the version from project() in CMakeLists.txt"
[ "$version" = "$project_version" ] || fail "package version '$version' is not project()'s '$project_version'"

log "cpack -G DEB -B $WORK/out"
(cd "$WORK" && cpack --config "$CONFIG" -G DEB -B "$WORK/out") >"$WORK/cpack.log" 2>&1 || {
  cat "$WORK/cpack.log" >&2
  fail "cpack failed"
}
arch=$(dpkg --print-architecture)
DEB=$WORK/out/walfs_${version}_${arch}.deb
[ -f "$DEB" ] || fail "cpack made no $DEB: $(ls "$WORK/out")"
# Nothing was written into the source tree.
if git -C "$WALFS_SOURCE_DIR" rev-parse --git-dir >/dev/null 2>&1; then
  stray=$(git -C "$WALFS_SOURCE_DIR" status --porcelain --untracked-files=all -- . ':!build' 2>/dev/null |
    grep -E '\.deb$|_CPack_Packages' || true)
  [ -z "$stray" ] || fail "cpack left files in the source tree: $stray"
fi

# --- control
field() { dpkg-deb -f "$DEB" "$1"; }
[ "$(field Package)" = walfs ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version)"
[ "$(field Section)" = admin ] || fail "Section: $(field Section)"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture: $(field Architecture)"
[[ $(field Maintainer) == *"<"*"@"*.*">" ]] || fail "Maintainer: $(field Maintainer)"
[[ $(field Maintainer) != *@localhost* ]] || fail "Maintainer: $(field Maintainer)"
desc=$(field Description)
[[ $(head -1 <<<"$desc") == *"PostgreSQL"* ]] || fail "Description summary: $(head -1 <<<"$desc")"
[ "$(grep -c "FUSE file system for PostgreSQL's pg_wal" <<<"$desc")" = 1 ] ||
  fail "summary repeated in the long description"
depends=$(field Depends)
log "Depends: $depends"
for pkg in fuse3 libfuse3-3 libpmem1 libabsl20220623 libc6 libstdc++6; do
  [[ ", $depends," == *", $pkg"[\ ,]* ]] || fail "Depends lacks $pkg: $depends"
done
# (Lists are read whole before grep: with pipefail, grep -q closing a pipe early would
# fail the writer with SIGPIPE.)
control=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -t)
for script in postinst prerm postrm; do
  grep -qx "./$script" <<<"$control" || fail "no $script"
done

# --- lintian, as a Debian reviewer runs it: no error, no warning (informational and
# pedantic tags are shown, not counted).
if command -v lintian >/dev/null; then
  lintian_out=$(lintian -EIL +pedantic --allow-root "$DEB" 2>&1) || true
  log "lintian: ${lintian_out:-clean}"
  if grep -E '^[EW]: ' <<<"$lintian_out"; then fail "lintian reports errors or warnings"; fi
else
  log "lintian is missing (tools/install-deps.sh installs it): not run"
fi

# --- file list
dpkg-deb -c "$DEB" | awk '{print $1, $NF}' >"$WORK/contents"
has() {
  grep -q " \./${1#/}\$" "$WORK/contents" || fail "package lacks $1"
}
is_exec() {
  grep -q "^-rwxr-xr-x \./${1#/}\$" "$WORK/contents" || fail "$1 is not an executable 0755 file"
}
for exe in walfs mkfs.walfs fsck.walfs walfsctl; do is_exec /usr/sbin/$exe; done
for page in "$WALFS_SOURCE_DIR"/packaging/man/*.[78]; do
  has "/usr/share/man/man${page##*.}/$(basename "$page").gz"
done
has /usr/share/man/man7/libwalfs-direct.7.gz
has /usr/share/man/man8/walfs.8.gz
has "/usr/lib/systemd/system/walfs@.service"
is_exec /usr/libexec/walfs/walfs-prestart
has /usr/share/walfs/postgresql/walfs.conf
is_exec /usr/share/walfs/postgresql/move-pg_wal-to-walfs.sh
has /usr/share/doc/walfs/examples/15-main.conf.example
has /usr/share/doc/walfs/examples/fstab.example
has /usr/share/doc/walfs/copyright
has /usr/share/doc/walfs/changelog.gz
has /usr/share/doc/walfs/README.md.gz
# Nothing outside /usr (the package ships no conffiles; postinst makes /etc/walfs).
if awk '{print $2}' "$WORK/contents" | grep -v '^\./$' | grep -v '^\./usr/'; then
  fail "files outside /usr"
fi
# No test or benchmark binaries.
if grep -Ei 'test|bench' "$WORK/contents"; then fail "test or benchmark files in the package"; fi

# --- extracted
ROOT=$WORK/root
dpkg-deb -x "$DEB" "$ROOT"
DOC=$ROOT/usr/share/doc/walfs
head -1 "$DOC/copyright" | grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "copyright is not DEP-5: $(head -1 "$DOC/copyright")"
changelog_version=$(zcat "$DOC/changelog.gz" | sed -n '1s/^walfs (\([^)]*\)).*/\1/p')
[ "$changelog_version" = "$version" ] ||
  fail "the changelog's newest entry is '$changelog_version', the package is $version (add an entry to packaging/debian/changelog)"
zcat "$DOC/README.md.gz" | cmp -s - "$WALFS_SOURCE_DIR/README.md" || fail "README.md.gz is not the README"
for exe in walfs mkfs.walfs fsck.walfs walfsctl; do
  bin=$ROOT/usr/sbin/$exe
  libs=$(ldd "$bin")
  if grep -q "not found" <<<"$libs"; then fail "$exe: $(grep 'not found' <<<"$libs")"; fi
  if command -v file >/dev/null && grep -q "not stripped" <<<"$(file "$bin")"; then
    fail "$exe is not stripped"
  fi
  "$bin" --help >"$WORK/help" 2>&1 || fail "$exe --help failed: $(cat "$WORK/help")"
  grep -qi "usage" "$WORK/help" || fail "$exe --help prints no usage: $(head -3 "$WORK/help")"
done
[[ $("$ROOT/usr/sbin/walfs" --version) == *"$version"* ]] || fail "walfs --version is not $version"
# The extracted daemon mounts a pool made by the extracted mkfs.
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
  "$ROOT/usr/sbin/mkfs.walfs" --size 48M "$WORK/p.pool" >/dev/null || fail "packaged mkfs.walfs failed"
  WALFS=$ROOT/usr/sbin/walfs mount_walfs "$WORK/p.pool" "$WORK/mnt" -o default_permissions
  echo x >"$WORK/mnt/f"
  [ "$(cat "$WORK/mnt/f")" = x ] || fail "packaged walfs does not serve a file"
  umount_walfs "$WORK/mnt"
  "$ROOT/usr/sbin/fsck.walfs" "$WORK/p.pool" >"$WORK/fsck" 2>&1 || fail "packaged fsck.walfs: $(cat "$WORK/fsck")"
fi

# The unit runs what the package ships.
unit="$ROOT/usr/lib/systemd/system/walfs@.service"
for path in $(grep -Eo '^Exec[A-Za-z]*=[-+!@:]*/[^ ]+' "$unit" | sed 's/^[^=]*=[-+!@:]*//'); do
  [ -x "$ROOT$path" ] || fail "the unit runs $path, which the package does not ship"
done
sh -n "$ROOT/usr/libexec/walfs/walfs-prestart" || fail "walfs-prestart: syntax"
bash -n "$ROOT/usr/share/walfs/postgresql/move-pg_wal-to-walfs.sh" || fail "mover: syntax"
dpkg-deb --ctrl-tarfile "$DEB" | tar -x -C "$WORK" ./postinst ./prerm ./postrm
sh -n "$WORK/postinst" && sh -n "$WORK/prerm" && sh -n "$WORK/postrm" ||
  fail "maintainer scripts: syntax"
# The maintainer scripts, run for real in a private mount namespace over empty /etc and
# /var/lib (tmpfs, visible to nothing else): configure makes /etc/walfs and
# /var/lib/walfs and mentions user_allow_other only when fuse.conf lacks it; purge
# removes the directories only when empty (a pool is never deleted).
if command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null; then
  unshare -m --propagation private bash -euo pipefail -c '
    work=$1
    mount -t tmpfs tmpfs /etc
    mount -t tmpfs tmpfs /var/lib
    out=$(sh "$work/postinst" configure)
    [ -d /etc/walfs ] && [ -d /var/lib/walfs ] || { echo "postinst made no directories"; exit 1; }
    case $out in *user_allow_other*) ;; *) echo "postinst gave no user_allow_other note: $out"; exit 1 ;; esac
    echo user_allow_other >/etc/fuse.conf
    out=$(sh "$work/postinst" configure)
    [ -z "$out" ] || { echo "postinst talks although fuse.conf is set: $out"; exit 1; }
    touch /var/lib/walfs/keep.pool
    sh "$work/postrm" purge
    [ ! -e /etc/walfs ] || { echo "purge kept the empty /etc/walfs"; exit 1; }
    [ -f /var/lib/walfs/keep.pool ] || { echo "purge removed a pool"; exit 1; }
    rm /var/lib/walfs/keep.pool
    sh "$work/postrm" purge
    [ ! -e /var/lib/walfs ] || { echo "purge kept the empty /var/lib/walfs"; exit 1; }

    # prerm and postrm with systemd "running": /run/systemd/system exists, and systemctl
    # and deb-systemd-invoke are stand-ins that report one running instance, 15-main,
    # serving $mnt (a directory here), and record what they are asked to do.
    mount -t tmpfs tmpfs /run
    mkdir -p /run/systemd/system "$work/stub" /etc/systemd/system/multi-user.target.wants
    mnt=$work/wal-mount
    mkdir -p "$mnt"
    cat >"$work/stub/systemctl" <<EOF
#!/bin/sh
echo "systemctl \$*" >>"$work/calls"
case "\$1" in
  list-units) echo "walfs@15-main.service loaded active running walfs WAL file system for 15-main" ;;
  show) echo "serving $mnt" ;;
  is-active) cat "$work/pg-state" 2>/dev/null || echo inactive ;;
esac
exit 0
EOF
    printf "#!/bin/sh\necho \"deb-systemd-invoke \$*\" >>\"$work/calls\"\n" >"$work/stub/deb-systemd-invoke"
    chmod +x "$work/stub/systemctl" "$work/stub/deb-systemd-invoke"
    export PATH=$work/stub:$PATH
    stopped() { grep -q "^deb-systemd-invoke stop walfs@15-main.service" "$work/calls" 2>/dev/null; }

    # The cluster runs: removal refused, the cluster named, nothing stopped.
    echo active >"$work/pg-state"
    if out=$(sh "$work/prerm" remove 2>&1); then echo "prerm removed walfs under a running cluster: $out"; exit 1; fi
    case $out in *postgresql@15-main*stop*) ;; *) echo "prerm refusal does not say what to stop: $out"; exit 1 ;; esac
    ! stopped || { echo "prerm stopped the instance under a running cluster"; exit 1; }
    # A process works in the mount: refused, the process named.
    echo inactive >"$work/pg-state"
    (cd "$mnt" && exec sleep 30) &
    user=$!
    sleep 0.2
    if out=$(sh "$work/prerm" remove 2>&1); then echo "prerm removed walfs under a user of the mount: $out"; exit 1; fi
    case $out in *"sleep (pid $user)"*) ;; *) echo "prerm refusal does not name the process: $out"; exit 1 ;; esac
    ! stopped || { echo "prerm stopped the instance under a user of the mount"; exit 1; }
    kill $user
    wait $user 2>/dev/null || true
    # An upgrade stops nothing.
    sh "$work/prerm" upgrade 0.1.0 >/dev/null
    ! stopped || { echo "prerm stopped the instance on upgrade"; exit 1; }
    # Nobody uses it: stopped, and said so.
    out=$(sh "$work/prerm" remove)
    stopped || { echo "prerm did not stop the idle instance: $(cat "$work/calls")"; exit 1; }
    case $out in *"stopped walfs@15-main.service and unmounted $mnt"*) ;; *) echo "prerm says: $out"; exit 1 ;; esac
    # Purge disables instances (their enablement links) and nothing else.
    ln -s /usr/lib/systemd/system/walfs@.service /etc/systemd/system/multi-user.target.wants/walfs@15-main.service
    ln -s /usr/lib/systemd/system/other.service /etc/systemd/system/multi-user.target.wants/other.service
    sh "$work/postrm" purge
    [ ! -L /etc/systemd/system/multi-user.target.wants/walfs@15-main.service ] ||
      { echo "purge left walfs@15-main enabled"; exit 1; }
    [ -L /etc/systemd/system/multi-user.target.wants/other.service ] ||
      { echo "purge removed another unit link"; exit 1; }
  ' _ "$WORK" >"$WORK/maint.log" 2>&1 || fail "maintainer scripts: $(cat "$WORK/maint.log")"
else
  log "no mount namespace: maintainer scripts only syntax-checked"
fi

# Man pages decompress and render without warnings.
if command -v groff >/dev/null; then
  for gz in "$ROOT"/usr/share/man/man[78]/*.[78].gz; do
    warnings=$(zcat "$gz" | groff -man -ww -z 2>&1) || fail "$(basename "$gz") does not render"
    [ -z "$warnings" ] || fail "$(basename "$gz"): $warnings"
  done
fi

log "PASS ($(basename "$DEB"), $(stat -c %s "$DEB") bytes)"
