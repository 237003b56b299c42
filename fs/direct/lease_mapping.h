// LeaseMapping: the runs of one leased file mapped into this process.
//
// Built by MapLease from a reply that ValidateReply and CheckReplyInSession accepted;
// owned by an fd table entry and released by UnmapLease when the last reference to the
// entry goes. Every mapping comes from descriptors of the lease's session (L1): the pool
// descriptor the daemon passed, never a file named in a reply.
#ifndef WALFS_FS_DIRECT_LEASE_MAPPING_H_
#define WALFS_FS_DIRECT_LEASE_MAPPING_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "fs/direct/session.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {

struct MappedRun {
  uint64_t file_offset;
  uint64_t length;       // bytes mapped at pool_addr (a whole run)
  uint64_t pool_offset;  // where pool_addr points in the pool
  char* pool_addr;
  // The same bytes of the power-cut image in a test build (WALFS_TEST_FACILITIES) with
  // an image in the session; always null otherwise, and never read without the define.
  char* image_addr;
};

struct LeaseMapping {
  // The lease's revocation word (mapped read-only from the session's stamps) and the
  // stamp it held at grant: the hot path compares them before every direct store and
  // every fsync it answers (L4).
  const std::atomic<uint64_t>* stamp = nullptr;
  uint64_t stamp_value = 0;
  void* stamp_page = nullptr;  // the page mapped for it, or null (tests point stamp
                               // at their own word)
  uint64_t leased_size = 0;
  uint64_t walfs_ino = 0;  // for messages
  // lease::kAccessWrite: runs mapped read-write, stores and copies out; kAccessRead:
  // runs mapped read-only, copies out only, each checked by the stamp after it too (L9).
  uint32_t access = lease::kAccessWrite;
  uint32_t run_count = 0;
  MappedRun runs[lease::kMaxRuns] = {};
  Sessions* sessions = nullptr;
  int session = -1;  // a reference held on sessions (Sessions::Acquire)
};

// Walks a lease's runs in file order from a file offset: the one walk of the read, write
// and copy paths. Walk(total, piece) calls piece(run, offset_in_run, n) for the next
// `total` bytes, one call per run they touch, and moves on past them, so successive
// Walks (one per iovec) continue where the last ended. Precondition (checked by the
// callers): the walked range ends at or before m.leased_size.
class RunCursor {
 public:
  RunCursor(const LeaseMapping& m, uint64_t offset) : m_(m), offset_(offset) {
    while (r_ + 1 < m_.run_count && m_.runs[r_].file_offset + m_.runs[r_].length <= offset_) {
      ++r_;
    }
  }

  template <typename Piece>
  void Walk(uint64_t total, Piece&& piece) {
    while (total > 0) {
      const MappedRun& run = m_.runs[r_];
      const uint64_t in_run = offset_ - run.file_offset;
      const uint64_t room = run.length - in_run;
      const uint64_t n = total < room ? total : room;
      piece(run, in_run, static_cast<size_t>(n));
      total -= n;
      offset_ += n;
      if (n == room) ++r_;
    }
  }

 private:
  const LeaseMapping& m_;
  uint64_t offset_;
  uint32_t r_ = 0;
};

// Whether the lease still stands for the descriptor that holds it: one acquire load.
inline bool LeaseCurrent(const LeaseMapping& m) {
  return m.stamp->load(std::memory_order_acquire) == m.stamp_value;
}

// nullptr when a reply that passed ValidateReply fits the session it is mapped through
// (L1), else why not (a static string): its uuid and stamps_id are the session's (so its
// stamp word is in the session's stamps), every run lies inside
// the session's data area [data_begin, data_end) (overflow-safe), and its stamp word
// lies inside the stamps (stamp_offset + 8 <= stamp_slots * 8).
const char* CheckReplyInSession(const lease::Reply& reply, const SessionFacts& facts);

// L7: whether a plain MAP_SHARED mapping of the session's pool is durable for
// non-temporal copies when MAP_SYNC is refused: only for a device-DAX pool descriptor
// (a character device) or a session that says kDurabilityForced.
bool PlainMappingDurable(const SessionFacts& facts);

// The mmap the runs are made with, and the seam to refuse MAP_SYNC in tests.
using MmapFn = void* (*)(void* addr, size_t length, int prot, int flags, int fd, off_t offset);

// Maps every run of `reply` from the session's pool descriptor. A write lease: read-write
// with MAP_SHARED_VALIDATE|MAP_SYNC; where MAP_SYNC is refused (EOPNOTSUPP, EINVAL), with
// MAP_SHARED only if PlainMappingDurable, else no lease (ENOTSUP); in a test build with
// an image in the session, the same runs of the image too. A read lease: read-only
// MAP_SHARED (a copy out needs no durability). Maps the page of the stamps
// holding the lease's word read-only and checks it still holds reply.stamp. `reply`
// must have passed ValidateReply and CheckReplyInSession against the session. Takes
// over the reference `session` on `sessions` in every case (on failure it is released).
// Returns 0 with *out filled, or -errno with nothing held and *reason naming the
// failing step (a static string).
int MapLease(const lease::Reply& reply, Sessions& sessions, int session, LeaseMapping* out,
             const char** reason, MmapFn map_fn = nullptr);

// Unmaps every run and the stamp page and drops the session reference. Async-signal-safe
// apart from taking the Sessions lock (with signals blocked).
void UnmapLease(LeaseMapping& mapping);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_LEASE_MAPPING_H_
