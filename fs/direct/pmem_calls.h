// libpmem, loaded when a process first needs it: at its first write lease, or at start in
// the PostgreSQL server. Owns the dlopen of libpmem.so.1 and the two entry points the
// write path calls; touches nothing else.
//
// Why not linked: loading libpmem and what it pulls in (libndctl, libdaxctl, libkmod,
// libudev, libcrypto...) is most of the library's start-up cost in every program it is
// preloaded into (docs/performance.md), and most of those programs never store into the
// pool: an archive_command's cp, cat, pg_waldump and the walsender read, and reads
// need no libpmem. The server itself (a program named postgres: the
// postmaster, and every backend it forks inherits its copy) loads it in the library's
// constructor, so no backend pays for it at its first WAL write.
#ifndef WALFS_FS_DIRECT_PMEM_CALLS_H_
#define WALFS_FS_DIRECT_PMEM_CALLS_H_

#include <stddef.h>

namespace walfs::direct {

struct PmemCalls {
  void* (*memcpy_nodrain)(void* dest, const void* src, size_t len);
  void (*drain)();
};

// The loaded entry points, or nullptr with *reason set (a static string) when libpmem.so.1
// cannot be loaded or lacks them; a failure is remembered, not retried. Thread-safe; not
// async-signal-safe (dlopen), like every lease decision.
const PmemCalls* LoadPmem(const char** reason);

// The entry points once LoadPmem has succeeded (a write lease exists only after it has),
// else nullptr. One acquire load.
const PmemCalls* LoadedPmem();

// Whether this process runs the executable `postgres` (/proc/self/exe's last component):
// the server, whose forked backends should inherit a loaded libpmem.
bool IsPostgresServer();

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_PMEM_CALLS_H_
