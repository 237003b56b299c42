// libwalfs-direct.so's process-wide state: the fd table, the library-owned descriptors,
// the sessions and the descriptor events over them, constant-initialized; the fork
// handlers that keep their locks consistent; the constructor. The exported wrappers are
// in the family files (interpose_open.cc, interpose_io.cc, interpose_fds.cc); nothing
// here is exported.
#include "fs/direct/interpose.h"

#include <pthread.h>

#include "fs/direct/lease.h"
#include "fs/direct/pmem_calls.h"
#include "fs/direct/switches.h"

namespace walfs::direct {

constinit OwnedFds g_owned;
constinit FdTable g_table(&g_owned);
constinit Sessions g_sessions(&g_owned);
constinit FdEvents g_events(&g_table, &g_owned, ProductionLeaseSources);

namespace {

// In the lock order (owned_fds.h), released in reverse.
void ForkPrepare() {
  g_table.ForkPrepare();
  g_sessions.ForkPrepare();
  g_owned.ForkPrepare();
}
void ForkParent() {
  g_owned.ForkParent();
  g_sessions.ForkParent();
  g_table.ForkParent();
}
void ForkChild() {
  g_owned.ForkChild();
  g_sessions.ForkChild();
  g_table.ForkChild();
}

__attribute__((constructor)) void Init() {
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  if (!DirectEnabled()) {
    DebugLog("WALFS_DIRECT=0: inert");
    return;
  }
  // The server's backends are its forks: load libpmem once, here, so that none of them
  // pays for it at its first WAL write (pmem_calls.h).
  if (IsPostgresServer()) {
    const char* reason = "";
    if (LoadPmem(&reason) == nullptr) DebugLog("%s: writes will go to the kernel", reason);
  }
}

}  // namespace
}  // namespace walfs::direct
