// Loading libpmem on demand (pmem_calls.h).
#include "fs/direct/pmem_calls.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "fs/direct/switches.h"

namespace walfs::direct {
namespace {

PmemCalls g_calls = {nullptr, nullptr};
std::atomic<const PmemCalls*> g_loaded{nullptr};
const char* g_failure = nullptr;  // set once, under the pthread_once
pthread_once_t g_once = PTHREAD_ONCE_INIT;

void Load() {
  // RTLD_NODELETE: the entry points must outlive any dlclose a program might do; LOCAL:
  // libpmem's symbols do not join the program's namespace.
  void* handle = dlopen("libpmem.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    g_failure = "cannot load libpmem.so.1";
    DebugLog("libpmem: %s", dlerror());
    return;
  }
  g_calls.memcpy_nodrain = reinterpret_cast<void* (*)(void*, const void*, size_t)>(
      dlsym(handle, "pmem_memcpy_nodrain"));
  g_calls.drain = reinterpret_cast<void (*)()>(dlsym(handle, "pmem_drain"));
  if (g_calls.memcpy_nodrain == nullptr || g_calls.drain == nullptr) {
    g_failure = "libpmem.so.1 lacks pmem_memcpy_nodrain or pmem_drain";
    return;
  }
  g_loaded.store(&g_calls, std::memory_order_release);
}

}  // namespace

const PmemCalls* LoadPmem(const char** reason) {
  pthread_once(&g_once, Load);
  const PmemCalls* calls = g_loaded.load(std::memory_order_acquire);
  if (calls == nullptr) *reason = g_failure;
  return calls;
}

const PmemCalls* LoadedPmem() { return g_loaded.load(std::memory_order_acquire); }

bool IsPostgresServer() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  const char* base = strrchr(path, '/');
  return strcmp(base != nullptr ? base + 1 : path, "postgres") == 0;
}

}  // namespace walfs::direct
