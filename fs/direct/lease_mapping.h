// LeaseMapping: the runs of one leased file mapped into this process.
//
// Built by MapLease from a reply that ValidateReply accepted; owned by an fd table entry
// and released by UnmapLease when the last reference to the entry goes.
#ifndef WALFS_FS_DIRECT_LEASE_MAPPING_H_
#define WALFS_FS_DIRECT_LEASE_MAPPING_H_

#include <sys/types.h>

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
  // The leased file (st_dev/st_ino of the walfs descriptor at lease time): the hot path
  // compares them with fstat before every direct store.
  uint64_t file_dev = 0;
  uint64_t file_ino = 0;
  uint64_t leased_size = 0;
  uint64_t walfs_ino = 0;  // for messages
  uint32_t run_count = 0;
  MappedRun runs[lease::kMaxRuns] = {};
  PoolFiles* pools = nullptr;
  int pool_handle = -1;  // a reference held on pools (PoolFiles::Acquire)
};

// Opens (or shares) the pool `reply` names, checks its identity, read-locks it and maps
// every run with MAP_SHARED_VALIDATE|MAP_SYNC, or MAP_SHARED where MAP_SYNC is refused;
// with lease::kFlagImage also maps the same runs of image_path. `reply` must have passed
// ValidateReply. Returns 0 with *out filled, or -errno with nothing held and *reason
// naming the failing step (a static string).
int MapLease(const lease::Reply& reply, uint64_t file_dev, uint64_t file_ino,
             PoolFiles& pools, LeaseMapping* out, const char** reason);

// Unmaps every run and drops the pool reference. Async-signal-safe apart from taking the
// PoolFiles lock (with signals blocked).
void UnmapLease(LeaseMapping& mapping);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_LEASE_MAPPING_H_
