# Commands taken from the documentation, so that tests run what the docs say (sourced
# after lib/common.sh).
#
# A block is marked where it is written:
#   README.md     a line `<!-- doc-test: NAME ... -->`, then (after blank lines) a code
#                 block indented by four spaces, which ends at the first line that is
#                 not indented (a blank line included);
#   man pages     a line `.\" doc-test: NAME ...` right before `.EX` ... `.EE`; roff
#                 escapes \- \e \(aq become - \ ' and any other escape fails the test.
# Both print the block's lines; an unmarked or empty block fails the test, so a marker
# cannot be dropped from the docs without the test noticing.

# doc_block_readme FILE NAME
doc_block_readme() {
  local file=$1 name=$2 out
  out=$(awk -v name="$name" '
    index($0, "<!-- doc-test: " name " ") == 1 || $0 == "<!-- doc-test: " name " -->" { found = 1; next }
    found && !started && /^$/ { next }
    found && /^    / { started = 1; print substr($0, 5); next }
    found { exit }
  ' "$file")
  [ -n "$out" ] || fail "no code block marked 'doc-test: $name' in $file"
  printf '%s\n' "$out"
}

# doc_block_man FILE NAME
doc_block_man() {
  local file=$1 name=$2 out
  out=$(awk -v name="$name" '
    index($0, ".\\\" doc-test: " name " ") == 1 || $0 == ".\\\" doc-test: " name { found = 1; next }
    found && !started { if ($0 != ".EX") exit; started = 1; next }
    started && $0 == ".EE" { exit }
    started { print }
  ' "$file")
  [ -n "$out" ] || fail "no .EX block marked 'doc-test: $name' in $file"
  out=$(printf '%s\n' "$out" | sed -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\e/\\/g')
  # What is left of a backslash must be a line continuation (from \e at a line's end).
  if printf '%s\n' "$out" | grep -q '\\.'; then
    fail "unhandled roff escape in the block 'doc-test: $name' of $file: $(printf '%s\n' "$out" | grep '\\.')"
  fi
  printf '%s\n' "$out"
}

# check_fstab_line LINE CLUSTER_UNIT WORKDIR: runs systemd-fstab-generator (the real one)
# on a scratch fstab holding LINE and checks what a nofail WAL mount needs: the .mount
# unit is wanted (not required) by local-fs.target, so the boot makes it and goes on
# without it; it is ordered before CLUSTER_UNIT, which requires it. Prints the unit's
# path. Skips (returns 1) when the generator is missing.
check_fstab_line() {
  local line=$1 cluster=$2 work=$3 gen where name dir
  gen=/usr/lib/systemd/system-generators/systemd-fstab-generator
  [ -x "$gen" ] || gen=/lib/systemd/system-generators/systemd-fstab-generator
  if [ ! -x "$gen" ] || ! command -v systemd-escape >/dev/null; then
    log "systemd-fstab-generator missing: fstab line not checked: $line"
    return 1
  fi
  dir=$(mktemp -d "$work/fstab-gen.XXXXXX")
  mkdir -p "$dir/normal" "$dir/early" "$dir/late"
  printf '%s\n' "$line" >"$dir/fstab"
  SYSTEMD_FSTAB=$dir/fstab SYSTEMD_PROC_CMDLINE="" "$gen" "$dir/normal" "$dir/early" "$dir/late" ||
    fail "systemd-fstab-generator failed on: $line"
  where=$(awk '{print $2}' <<<"$line")
  name=$(systemd-escape --path --suffix=mount "$where")
  [ -f "$dir/normal/$name" ] || fail "the generator wrote no $name for: $line"
  [ -L "$dir/normal/local-fs.target.wants/$name" ] ||
    fail "local-fs.target does not want $name (the boot would not mount it; nofail has nothing to act on): $line"
  [ ! -e "$dir/normal/local-fs.target.requires/$name" ] ||
    fail "local-fs.target requires $name although the line has nofail: $line"
  grep -q "^Before=.*$cluster" "$dir/normal/$name" || fail "$name is not ordered before $cluster: $line"
  [ -L "$dir/normal/$cluster.requires/$name" ] || fail "$cluster does not require $name: $line"
  echo "$dir/normal/$name"
}

# reexec_in_debian_sandbox "$@": runs this test script again in private mount and
# network namespaces (once), with the loopback interface up: servers it starts on
# PostgreSQL's default port collide with nothing outside, and every mount dies with it.
reexec_in_debian_sandbox() {
  if [ -z "${WALFS_IN_DEBIAN_NS:-}" ]; then
    unshare -m -n --propagation private true 2>/dev/null || skip "cannot make mount and network namespaces"
    trap - EXIT
    rm -rf "$_WALFS_SCRATCH"
    exec unshare -m -n --propagation private env WALFS_IN_DEBIAN_NS=1 WALFS_IN_MOUNT_NS=1 bash "$0" "$@"
  fi
  ip link set lo up || fail "cannot bring up lo in the test's network namespace"
}

# debian_sandbox WORK: in the test's own mount namespace (reexec_in_debian_sandbox), empty directories from WORK
# bound over Debian's PostgreSQL and walfs paths (owned as the packages make them), a
# copy of /etc/fuse.conf without user_allow_other, and a 0666 /dev/fuse where the
# machine's is not (Debian's udev makes it 0666, containers may not). The machine's
# clusters and settings are neither seen nor touched.
debian_sandbox() {
  local WORK=$1
  bind_empty() {
    local path=$1 owner=$2 mode=$3 dir
    dir=$(mktemp -d "$WORK/bind.XXXXXX")
    chown "$owner" "$dir"
    chmod "$mode" "$dir"
    [ -d "$path" ] || fail "$path does not exist on this machine"
    mount --bind "$dir" "$path"
  }
  bind_empty /etc/postgresql postgres:postgres 0755
  bind_empty /var/lib/postgresql postgres:postgres 0755
  install -d -o postgres -g postgres -m 0755 /var/lib/postgresql/15
  bind_empty /var/log/postgresql root:postgres 1775
  bind_empty /run/postgresql postgres:postgres 2775
  bind_empty /etc/systemd/system root:root 0755
  # What the walfs package's postinst makes. A directory must exist to be bound over: on
  # a machine without the package the test makes it (empty, root's, as the package
  # does) and leaves it, since removing a directory that another namespace has a mount
  # on would detach that mount.
  for d in /var/lib/walfs /etc/walfs; do
    [ -d "$d" ] || install -d -m 0755 "$d"
    bind_empty "$d" root:root 0755
  done
  grep -v '^[[:space:]]*user_allow_other' /etc/fuse.conf >"$WORK/fuse.conf" 2>/dev/null || true
  mount --bind "$WORK/fuse.conf" /etc/fuse.conf
  # Debian's udev makes /dev/fuse 0666; a container may not.
  if ! as_postgres test -r /dev/fuse -a -w /dev/fuse; then
    mknod -m 0666 "$WORK/fuse-dev" c "$((16#$(stat -c %t /dev/fuse)))" "$((16#$(stat -c %T /dev/fuse)))" ||
      skip "cannot make a /dev/fuse node"
    mount --bind "$WORK/fuse-dev" /dev/fuse
  fi
}
