#!/bin/bash
# Monitoring a live mount the way an operator does:
#   1. requests of each class show in the latency histograms (walfsctl status --latency
#      and the JSON), with counts that match what was done;
#   2. walfsctl status --prometheus is valid exposition text: # HELP and # TYPE before
#      every family, counters named *_total, cumulative histogram buckets whose +Inf
#      bucket equals _count, and the mountpoint and pool labels on every series;
#   3. a full pool: ENOSPC answers are counted, and logged once per interval with the
#      free space, not once per request; the 95% usage mark is logged and shown;
#   4. walfs-metrics (the packaged textfile writer) writes DIR/walfs-INSTANCE.prom and
#      removes it once the mount is gone; its units pass systemd-analyze verify.
source "$(dirname "$0")/lib/common.sh"

require_fuse
command -v python3 >/dev/null || skip "python3 is missing"
[ -x "$WALFSCTL" ] || fail "walfsctl not built: $WALFSCTL"

WORK=$(make_workdir)
on_exit "rm -rf '$WORK'"
M=$WORK/mnt
make_pool "$WORK/pool" 64M --segment-size 1M
mount_walfs "$WORK/pool" "$M"

# --- 1. latency by request class
for i in 1 2 3 4 5; do
  dd if=/dev/zero of="$M/f$i" bs=4096 count=4 conv=fsync status=none
done
mv "$M/f1" "$M/g1"
mv "$M/f2" "$M/g2"
rm "$M/f3"
cat "$M/f4" >/dev/null
json=$("$WALFSCTL" status "$M" --json)
python3 - "$json" <<'PY' || fail "latency counts do not match the requests made"
import json, sys
doc = json.loads(sys.argv[1])
lat = doc["latency"]
assert set(lat) == {"write", "read", "fsync", "create", "rename", "unlink", "open", "other"}, lat.keys()
for op, h in lat.items():
    assert len(h["buckets"]) == 22, op
    assert sum(h["buckets"]) == h["count"], (op, h)
# Writes are direct_io: dd's 4 writes per file each reach the daemon.
assert lat["write"]["count"] >= 20, lat["write"]
assert lat["create"]["count"] >= 5, lat["create"]
assert lat["rename"]["count"] == 2, lat["rename"]
assert lat["unlink"]["count"] == 1, lat["unlink"]
assert lat["fsync"]["count"] >= 1, lat["fsync"]
assert lat["write"]["sum_ns"] > 0
print("latency ok:", {op: h["count"] for op, h in lat.items()})
PY
out=$("$WALFSCTL" status "$M" --latency)
grep -Eq '^rename +2 ' <<<"$out" || fail "--latency lacks the 2 renames: $out"
grep -Eq '^write +[0-9]+ +[0-9.]+ (us|ms) ' <<<"$out" || fail "--latency lacks writes: $out"
out=$("$WALFSCTL" status "$M")
grep -q '^  health: *ok$' <<<"$out" || fail "human status: health: $out"
# The reserve only WAL segments may take (2 of this pool's 1 MiB segments).
grep -Eq '^  space: .* used of .* \([0-9.]+%\), .* free \(2.00 MiB of it reserved for WAL segments\)$' <<<"$out" ||
  fail "human status: space: $out"
grep -q '^  p99 latency: *write ' <<<"$out" || fail "human status: p99 latency: $out"

# --- 2. Prometheus exposition
"$WALFSCTL" status "$M" --prometheus >"$WORK/metrics.prom" || fail "--prometheus failed"
python3 - "$WORK/metrics.prom" "$M" "$WORK/pool" <<'PY' || fail "bad Prometheus exposition"
import re, sys
text, mnt, pool = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
types, helps, series = {}, set(), {}
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')
for line in text.splitlines():
    if line.startswith("# HELP "):
        helps.add(line.split()[2]); continue
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split()
        assert name not in types, "typed twice: " + name
        assert kind in ("gauge", "counter", "histogram"), line
        types[name] = kind; continue
    m = sample.match(line)
    assert m, "not a sample line: " + line
    name, labels, value = m.groups()
    float(value)
    family = name
    for sfx in ("_bucket", "_sum", "_count"):
        if family not in types and family.endswith(sfx):
            family = family[: -len(sfx)]
    assert family in types, "no # TYPE before " + line
    assert family in helps, "no # HELP for " + family
    if types[family] == "counter":
        assert family.endswith("_total"), family
    assert f'mountpoint="{mnt}"' in labels and f'pool="{pool}"' in labels, line
    series.setdefault(name, []).append((labels, float(value)))
for must in ("walfs_build_info", "walfs_pool_size_bytes", "walfs_pool_free_bytes",
             "walfs_pool_used_ratio", "walfs_uptime_seconds", "walfs_persist_error",
             "walfs_writes_total", "walfs_enospc_errors_total", "walfs_eio_errors_total",
             "walfs_leases_active", "walfs_request_duration_seconds_bucket"):
    assert must in series, "missing " + must
assert series["walfs_persist_error"][0][1] == 0
# Histograms: per op, buckets cumulative and ending in +Inf == _count.
by_op = {}
for labels, v in series["walfs_request_duration_seconds_bucket"]:
    op = re.search(r'op="([^"]*)"', labels).group(1)
    le = re.search(r'le="([^"]*)"', labels).group(1)
    by_op.setdefault(op, []).append((le, v))
counts = {re.search(r'op="([^"]*)"', l).group(1): v
          for l, v in series["walfs_request_duration_seconds_count"]}
for op, buckets in by_op.items():
    assert buckets[-1][0] == "+Inf", (op, buckets[-1])
    values = [v for _, v in buckets]
    assert values == sorted(values), (op, values)
    assert values[-1] == counts[op], (op, values[-1], counts[op])
    bounds = [float(le) for le, _ in buckets[:-1]]
    assert bounds == sorted(bounds) and bounds[0] == 1e-06, (op, bounds)
print("exposition ok:", len(types), "families")
PY

# --- 3. a full pool
set +e
for i in $(seq 1 100); do
  dd if=/dev/zero of="$M/fill$i" bs=1M count=4 status=none 2>/dev/null || break
done
for i in $(seq 1 30); do : >"$M/more$i" 2>/dev/null; dd if=/dev/zero of="$M/more$i" bs=64k count=1 status=none 2>/dev/null; done
set -e
enospc=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["enospc_errors"])' \
  "$("$WALFSCTL" status "$M" --json)")
((enospc >= 10)) || fail "expected many ENOSPC answers counted, got $enospc"
lines=$(grep -c 'no space left in the pool' "$WALFS_LOG" || true)
[ "$lines" = 1 ] || { cat "$WALFS_LOG" >&2; fail "ENOSPC logged $lines times for $enospc answers (once per 10 s expected)"; }
grep -Eq 'no space left in the pool \([0-9.]+ MiB free of [0-9.]+ MiB\)' "$WALFS_LOG" ||
  { cat "$WALFS_LOG" >&2; fail "the ENOSPC message does not give the free space"; }
log "ENOSPC: $enospc answers, $lines log line"
# The usage watch (every 2 s) has logged the 95% mark, and status shows it.
for ((i = 0; i < 50; i++)); do
  grep -q 'the pool is [0-9]*% full .* past the 95% mark' "$WALFS_LOG" && break
  sleep 0.1
done
grep -q 'the pool is [0-9]*% full .* past the 95% mark' "$WALFS_LOG" ||
  { cat "$WALFS_LOG" >&2; fail "no warning for the 95% mark"; }
"$WALFSCTL" status "$M" | grep -q 'PAST THE 95% MARK' || fail "status does not show the 95% mark"
# (The files stay: freeing 60 MiB would make the unmount zero it first, slowly on a
# loaded disk, and nothing below needs the space.)

# --- 4. the packaged textfile writer and its units
METRICS=$WALFS_SOURCE_DIR/packaging/systemd/walfs-metrics
TEXTDIR=$WORK/textfile
mkdir "$TEXTDIR"
WALFSCTL=$WALFSCTL "$METRICS" 15-main "$M" "$TEXTDIR" || fail "walfs-metrics failed"
grep -q '^walfs_writes_total{' "$TEXTDIR/walfs-15-main.prom" || fail "textfile lacks walfs_writes_total"
[ "$(stat -c %a "$TEXTDIR/walfs-15-main.prom")" = 644 ] || fail "textfile not 0644"
[ -z "$(find "$TEXTDIR" -name '.walfs-*')" ] || fail "temporary file left behind"
if "$METRICS" 15-main "$M" "$WORK/no-such-dir" 2>"$WORK/err"; then fail "missing DIR accepted"; fi
grep -q 'does not exist' "$WORK/err" || fail "missing DIR: $(cat "$WORK/err")"
umount_walfs "$M"
WALFSCTL=$WALFSCTL "$METRICS" 15-main "$M" "$TEXTDIR" 2>"$WORK/err" ||
  fail "walfs-metrics failed on an unmounted directory"
[ ! -e "$TEXTDIR/walfs-15-main.prom" ] || fail "stale textfile kept after unmount"
if command -v systemd-analyze >/dev/null; then
  V=$WORK/units
  mkdir -p "$V"
  sed "s#/usr/libexec/walfs/walfs-metrics#$METRICS#" \
    "$WALFS_SOURCE_DIR/packaging/systemd/walfs-metrics@.service" >"$V/walfs-metrics@.service"
  cp "$WALFS_SOURCE_DIR/packaging/systemd/walfs-metrics@.timer" "$V/"
  out=$(cd "$V" && systemd-analyze verify --man=no ./walfs-metrics@15-main.timer \
    ./walfs-metrics@15-main.service 2>&1) || fail "systemd-analyze verify failed: $out"
  # walfs@15-main.service (After=) is not installed here; nothing else may be reported.
  out=$(grep -v 'walfs@15-main.service' <<<"$out" || true)
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
  log "walfs-metrics units: verify clean"
fi
log "monitoring: ok"
