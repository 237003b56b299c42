# Commands taken from the documentation, so that tests run what the docs say (sourced
# after lib/common.sh).
#
# A block is marked where it is written:
#   README.md and docs/**/*.md (Markdown)
#                 a line `<!-- doc-test: NAME ... -->`, then (after blank lines) a code
#                 block indented by four spaces more than the marker, which ends at the
#                 first line that is not indented so (a blank line included); a marker
#                 inside a list item is indented as the item's text. A block no test
#                 runs is marked `<!-- doc-illustrative: WHY ... -->` the same way.
#                 Fenced blocks are not used (check_doc_blocks refuses them);
#   man pages     a line `.\" doc-test: NAME ...` right before `.EX` ... `.EE`; roff
#                 escapes \- \e \(aq become - \ ' and any other escape fails the test.
# Both readers print the block's lines; an unmarked or empty block fails the test, so a
# marker cannot be dropped from the docs without the test noticing. check_doc_blocks
# fails on a Markdown code block that is neither run by a test nor marked illustrative.

# doc_block_readme FILE NAME: the block marked 'doc-test: NAME' in the Markdown FILE
# (README.md or a page under docs/).
doc_block_readme() {
  local file=$1 name=$2 out
  out=$(awk -v name="$name" '
    !found {
      text = $0
      sub(/^ */, "", text)
      if (index(text, "<!-- doc-test: " name " ") == 1 || text == "<!-- doc-test: " name " -->") {
        found = 1
        indent = length($0) - length(text) + 4
        prefix = ""
        for (i = 0; i < indent; i++) prefix = prefix " "
      }
      next
    }
    !started && /^$/ { next }
    substr($0, 1, indent) == prefix { started = 1; print substr($0, indent + 1); next }
    { exit }
  ' "$file")
  [ -n "$out" ] || fail "no code block marked 'doc-test: $name' in $file"
  printf '%s\n' "$out"
}

# doc_code_blocks FILE: every code block of the Markdown FILE, one line each:
#   LINE<TAB>test<TAB>NAME          marked `<!-- doc-test: NAME ... -->`
#   LINE<TAB>illustrative<TAB>-     marked `<!-- doc-illustrative: ... -->`
#   LINE<TAB>bad<TAB>WHAT           neither, or a marker without its block, or a fence
# A code block is a run of lines indented by four or more spaces beyond the text they
# belong to (the page's margin, or a list item's text), after a blank line, up to the
# next blank line (where doc_block_readme stops: a block is never split). Its marker
# is the last non-blank line before it, indented four spaces less (as doc_block_readme
# reads it).
doc_code_blocks() {
  awk '
    function indent_of(s) { match(s, /^ */); return RLENGTH }
    function is_test(s) { return s ~ /^ *<!-- doc-test: [A-Za-z0-9_-]+( .*)? ?-->$/ }
    function is_illustrative(s) { return s ~ /^ *<!-- doc-illustrative: .+-->$/ }
    BEGIN { blank = 1; base = 0; code = 0; fence = 0; pending = 0 }
    fence { if ($0 ~ /^ *(```|~~~)/) fence = 0; next }
    /^ *(```|~~~)/ { printf "%d\tbad\tfenced block (write an indented block with a marker)\n", NR; fence = 1; next }
    # A blank line ends a code block, as doc_block_readme reads it.
    /^[ \t]*$/ { blank = 1; code = 0; next }
    {
      ind = indent_of($0)
      if (code && ind >= code_indent) { blank = 0; next }
      code = 0
      if (blank && ind >= base + 4) {
        code = 1; code_indent = ind
        if (pending && marker_indent + 4 == ind) {
          if (is_test(marker)) {
            name = marker; sub(/^ *<!-- doc-test: /, "", name); sub(/( |-->).*$/, "", name)
            printf "%d\ttest\t%s\n", NR, name
          } else {
            printf "%d\tillustrative\t-\n", NR
          }
        } else if (pending) {
          printf "%d\tbad\tmarker on line %d is indented %d, the block %d (want 4 more)\n", NR, pending, marker_indent, ind
        } else {
          printf "%d\tbad\tcode block with no doc-test or doc-illustrative marker before it\n", NR
        }
        pending = 0; blank = 0; next
      }
      if (pending) printf "%d\tbad\tmarker not followed by a code block\n", pending
      pending = 0
      if (is_test($0) || is_illustrative($0)) { pending = NR; marker = $0; marker_indent = ind }
      else if ($0 ~ /^ *<!-- doc-/) printf "%d\tbad\tunknown doc marker: %s\n", NR, $0
      if (match($0, /^ *([-*+]|[0-9]+[.)]) +/)) base = RLENGTH
      else if (blank && ind < base) base = ind
      blank = 0
    }
    END { if (pending) printf "%d\tbad\tmarker not followed by a code block\n", pending }
  ' "$1"
}

# check_doc_blocks SRC: every code block of SRC/README.md and SRC/docs/**/*.md is either
# marked doc-test with a NAME that a test reads from that file (doc_block_readme
# "$VAR/FILE" NAME in tests/**/*.sh) or marked doc-illustrative. Fails naming each block
# that is neither.
check_doc_blocks() {
  local src=$1 f rel line kind what uses bad=0 n=0
  uses=$(grep -rhoE 'doc_block_readme +"\$\{?[A-Za-z_]+\}?/[^"]+" +[A-Za-z0-9_-]+' "$src/tests" |
    sed -E 's/^doc_block_readme +"\$\{?[A-Za-z_]+\}?\/([^"]+)" +/\1 /' | sort -u)
  [ -n "$uses" ] || fail "no test reads a block of the docs (doc_block_readme)"
  while IFS= read -r f; do
    rel=${f#"$src"/}
    while IFS=$'\t' read -r line kind what; do
      n=$((n + 1))
      case $kind in
        test)
          grep -qxF "$rel $what" <<<"$uses" ||
            { log "$rel:$line: block marked doc-test: $what, but no test reads it (doc_block_readme ... $rel $what)"; bad=1; }
          ;;
        illustrative) ;;
        *) log "$rel:$line: $what"; bad=1 ;;
      esac
    done < <(doc_code_blocks "$f")
  done < <({ echo "$src/README.md"; find "$src/docs" -name '*.md' 2>/dev/null; } | sort)
  # Every block a test reads is still in its file.
  while read -r rel what; do
    [ -f "$src/$rel" ] || { log "a test reads 'doc-test: $what' from $rel, which does not exist"; bad=1; continue; }
    doc_code_blocks "$src/$rel" | grep -qP "^[0-9]+\ttest\t\Q$what\E$" ||
      { log "a test reads 'doc-test: $what' from $rel, which has no such block"; bad=1; }
  done <<<"$uses"
  ((bad == 0)) || fail "documentation code blocks that are neither run by a test nor marked illustrative (tests/integration/lib/docs.sh)"
  log "docs: $n code blocks in README.md and docs/, each run by a test or marked illustrative"
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

# debian_programs WORK: in a debian_sandbox, the package's programs: the built walfs,
# mkfs.walfs, fsck.walfs and walfsctl, and a systemctl stand-in, in WORK/sbin bound over
# /usr/local/sbin (first on PATH, which is set). systemd is not PID 1 here: the stand-in
# does what systemd would do with the packaged units, for the verbs the docs use
# (daemon-reload; enable --now, start and stop of walfs@INSTANCE, run from
# walfs@.service's own lines as its User=; start and stop of postgresql@VERSION-NAME,
# where start with the drop-in needs walfs@ up and stop of a cluster that is down
# succeeds, as stopping an inactive unit does). Sets STATE (WORK/systemd): the
# stand-in's calls, one a line, in STATE/calls, and the daemons it runs in
# STATE/walfs@INSTANCE.{pid,log}; a test that runs a daemon itself leaves its pid in
# STATE/*.pid too. Registers at exit the stop of every cluster, then of every daemon
# with a pid there.
debian_programs() {
  local work=$1 pkg=$WALFS_SOURCE_DIR/packaging bin p
  bin=$work/sbin
  STATE=$work/systemd
  mkdir -p "$bin" "$STATE"
  for p in "$WALFS" "$MKFS" "$FSCK" "$WALFSCTL"; do ln -s "$p" "$bin/$(basename "$p")"; done
  cat >"$bin/systemctl" <<EOF
#!/bin/bash
# systemctl stand-in for the Debian sandbox tests (tests/integration/lib/docs.sh).
set -euo pipefail
UNIT=$pkg/systemd/walfs@.service
PRESTART=$pkg/systemd/walfs-prestart
WALFS=$WALFS
STATE=$STATE
EOF
  cat >>"$bin/systemctl" <<'EOF'
say() { echo "systemctl (test stand-in): $*" >&2; }
echo "$*" >>"$STATE/calls"
unit_value() { sed -n "s/^$1=//p" "$UNIT"; }
instance_of() { local u=${1#*@}; echo "${u%.service}"; }

# walfs@INSTANCE as systemd runs it: Environment=, then EnvironmentFile= (%i
# expanded), ${VAR} words, ExecStartPre and ExecStart as User=/Group=; Type=notify is
# read as "started once mounted".
start_walfs() {
  local inst=$1 line word user group envfile mnt pid i
  declare -A env=()
  [ -f "/etc/walfs/$inst.conf" ] || { say "walfs@$inst: /etc/walfs/$inst.conf missing (AssertPathExists)"; exit 1; }
  while IFS= read -r line; do env[${line%%=*}]=${line#*=}; done < <(unit_value Environment)
  envfile=$(unit_value EnvironmentFile)
  envfile=${envfile//%i/$inst}
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    env[${line%%=*}]=${line#*=}
  done <"$envfile"
  user=$(unit_value User)
  group=$(unit_value Group)
  argv() {
    local -a out=()
    for word in $(unit_value "$1"); do
      [[ $word =~ ^\$\{([A-Za-z_]+)\}$ ]] && word=${env[${BASH_REMATCH[1]}]-}
      case $word in
        /usr/sbin/walfs) word=$WALFS ;;
        /usr/libexec/walfs/walfs-prestart) word=$PRESTART ;;
      esac
      out+=("$word")
    done
    printf '%s\n' "${out[@]}"
  }
  mapfile -t pre < <(argv ExecStartPre)
  mapfile -t main < <(argv ExecStart)
  setpriv --reuid="$user" --regid="$group" --init-groups -- "${pre[@]}" ||
    { say "walfs@$inst: ExecStartPre failed"; exit 1; }
  setsid setpriv --reuid="$user" --regid="$group" --init-groups -- "${main[@]}" \
    </dev/null >"$STATE/walfs@$inst.log" 2>&1 &
  pid=$!
  echo "$pid" >"$STATE/walfs@$inst.pid"
  mnt=${env[MOUNTPOINT]}
  for ((i = 0; i < 400; i++)); do
    mountpoint -q "$mnt" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  say "walfs@$inst did not start: $(cat "$STATE/walfs@$inst.log")"
  exit 1
}
walfs_active() { [ -f "$STATE/walfs@$1.pid" ] && kill -0 "$(cat "$STATE/walfs@$1.pid")" 2>/dev/null; }
# SIGTERM, as KillMode=mixed sends it to the main process; the daemon unmounts and exits.
stop_walfs() {
  local pid i
  walfs_active "$1" || return 0
  pid=$(cat "$STATE/walfs@$1.pid")
  kill -TERM "$pid"
  for ((i = 0; i < 400; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$STATE/walfs@$1.pid"
}
postgresql() {
  local verb=$1 inst=$2 dropin
  dropin=/etc/systemd/system/postgresql@$inst.service.d/walfs.conf
  if [ "$verb" = start ] && [ -f "$dropin" ] && grep -qx 'BindsTo=walfs@%i.service' "$dropin" &&
    ! walfs_active "$inst"; then
    say "postgresql@$inst: dependency walfs@$inst.service is not active"
    exit 1
  fi
  # Stopping an inactive unit succeeds (pg_ctlcluster stop exits 2 on a cluster that is
  # down); pg_ctlcluster status exits 0 only for a running cluster.
  if [ "$verb" = stop ] && ! pg_ctlcluster "${inst%%-*}" "${inst#*-}" status >/dev/null 2>&1; then
    return 0
  fi
  pg_ctlcluster "${inst%%-*}" "${inst#*-}" "$verb"
}

case "${1:-}" in
  daemon-reload) exit 0 ;;
  enable) [ "${2:-}" = --now ] || { say "only 'enable --now' is emulated"; exit 1; }; shift 2; verb=start ;;
  start | stop) verb=$1; shift ;;
  *) say "'$*' is not emulated"; exit 1 ;;
esac
[ $# = 1 ] || { say "one unit at a time"; exit 1; }
case "$verb:$1" in
  start:walfs@*) start_walfs "$(instance_of "$1")" ;;
  stop:walfs@*) stop_walfs "$(instance_of "$1")" ;;
  start:postgresql@* | stop:postgresql@*) postgresql "$verb" "$(instance_of "$1")" ;;
  *) say "'$verb $1' is not emulated"; exit 1 ;;
esac
EOF
  chmod 0755 "$bin/systemctl"
  mount --bind "$bin" /usr/local/sbin
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  [ "$(command -v walfs)" = /usr/local/sbin/walfs ] || fail "walfs is not found on PATH"
  # Run in reverse order: the clusters stop, their daemons are killed, and the dead
  # mounts those leave under /var/lib/postgresql are detached, so that WORK (which holds
  # their mount points) can be removed.
  on_exit "findmnt -n -l -t fuse.walfs -o TARGET | grep '^/var/lib/postgresql/' | xargs -r -n 1 umount -l"
  on_exit "for f in '$STATE'/*.pid; do [ -f \"\$f\" ] && kill_if_walfs \$(cat \"\$f\"); done"
  on_exit "for c in \$(pg_lsclusters -h 2>/dev/null | awk '{print \$1\"/\"\$2}'); do pg_ctlcluster -m immediate \${c%/*} \${c#*/} stop; done"
}

# run_block WHAT TEXT WORK: the docs' lines TEXT, one bash run with -e, as root from /,
# the package's files (/usr/share/walfs/) taken from the source tree's packaging/. The
# script and its trace are WORK/WHAT.{sh,log}; the trace is printed if it fails.
run_block() {
  local what=$1 text=$2 work=$3 f
  f=$work/$what.sh
  {
    echo "set -euo pipefail"
    printf '%s\n' "$text" | sed "s#/usr/share/walfs/#$WALFS_SOURCE_DIR/packaging/#g"
  } >"$f"
  log "$what, as written:"
  printf '%s\n' "$text" | sed 's/^/    /' >&2
  (cd / && bash -x "$f") >"$work/$what.log" 2>&1 || {
    cat "$work/$what.log" >&2
    fail "$what: the documented commands failed"
  }
}
