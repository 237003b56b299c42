#!/usr/bin/env bash
# Direct access where only the mount is visible (L8 in docs/design/lease.md): the kill
# loop of pg_killloop_test.sh (lib/pg.sh's committed-id load; kill -9 of PostgreSQL, the
# daemon or both; recovery; every acknowledged commit present; pg_waldump decodes) with
# PostgreSQL preloading libwalfs-direct.so in a private mount namespace where fresh tmpfs
# cover /dev/shm and the pool's directory (WALFS_PG_PRIVATE=1, lib/pg.sh). Each start
# checks the server sees neither the pool nor the host's /dev/shm; the end requires that
# the daemon granted leases (pg_direct_check) and a clean fsck. Three cycles by default
# (WALFS_KILL_CYCLES).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export WALFS_PG_DIRECT=1 WALFS_PG_PRIVATE=1 WALFS_PG_MODES=pmem
export WALFS_KILL_CYCLES=${WALFS_KILL_CYCLES:-3} WALFS_KILL_MAX_MS=${WALFS_KILL_MAX_MS:-2000}
command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) is missing" >&2; exit 77; }
exec bash "$here/pg_killloop_test.sh" "$@"
