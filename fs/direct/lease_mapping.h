// LeaseMapping: the runs of one leased file mapped into this process.
//
// Built by MapLease from a reply that ValidateReply accepted; owned by an fd table entry
// and released by UnmapLease when the last reference to the entry goes.
#ifndef WALFS_FS_DIRECT_LEASE_MAPPING_H_
#define WALFS_FS_DIRECT_LEASE_MAPPING_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "fs/direct/pool_files.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {

struct MappedRun {
  uint64_t file_offset;
  uint64_t length;       // bytes mapped at pool_addr (a whole run)
  uint64_t pool_offset;  // where pool_addr points in the pool file
  char* pool_addr;
  char* image_addr;      // the same bytes of the power-cut image, or null
};

struct LeaseMapping {
  // The lease's revocation word (mapped read-only from the reply's stamp_path) and the
  // stamp it held at grant: the hot path compares them before every direct store and
  // every fsync it answers (fs/lease_protocol.h, "Revocation").
  const std::atomic<uint64_t>* stamp = nullptr;
  uint64_t stamp_value = 0;
  void* stamp_page = nullptr;  // the page mapped for it, or null (tests point stamp
                               // at their own word)
  uint64_t leased_size = 0;
  uint64_t walfs_ino = 0;  // for messages
  uint32_t run_count = 0;
  MappedRun runs[lease::kMaxRuns] = {};
  PoolFiles* pools = nullptr;
  int pool_handle = -1;  // a reference held on pools (PoolFiles::Acquire)
};

// Whether the lease still stands for the descriptor that holds it: one acquire load.
inline bool LeaseCurrent(const LeaseMapping& m) {
  return m.stamp->load(std::memory_order_acquire) == m.stamp_value;
}

// Opens (or shares) the pool `reply` names, checks its identity, read-locks it and maps
// every run with MAP_SHARED_VALIDATE|MAP_SYNC, or MAP_SHARED where MAP_SYNC is refused;
// with lease::kFlagImage also maps the same runs of image_path; maps the page of
// stamp_path holding the lease's stamp read-only (the file must be a regular file owned
// by the pool file's owner) and checks it still holds reply.stamp. `reply` must have
// passed ValidateReply. Returns 0 with *out filled, or -errno with nothing held and
// *reason naming the failing step (a static string).
int MapLease(const lease::Reply& reply, PoolFiles& pools, LeaseMapping* out,
             const char** reason);

// Unmaps every run and the stamp page and drops the pool reference. Async-signal-safe
// apart from taking the PoolFiles lock (with signals blocked).
void UnmapLease(LeaseMapping& mapping);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_LEASE_MAPPING_H_
