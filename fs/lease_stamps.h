// LeaseStamps: the daemon's side of lease revocation (fs/lease_protocol.h).
//
// A client must never store into the pool for a descriptor number that no longer refers
// to the open file description it leased: the number can be closed where the library
// does not see it (a raw system call) and reused for a pipe or another file. The kernel
// does see every close: FUSE sends FLUSH for each close(2) of a descriptor of the file,
// before close returns. So each leased handle owns one 64-bit word (a slot) in a small
// shared file; the daemon writes a new stamp into it when the lease is granted, at every
// FLUSH of the handle and when the handle is released. The client reads the word before
// each direct store and compares it with the stamp its lease reply carried: one load
// instead of the fstat(2) that used to verify the descriptor's identity.
//
// Stamps come from one 64-bit counter and are never reused, so a client comparing an old
// stamp with a slot that has since gone to another lease sees a difference (no ABA).
// The stores are release stores made before the FLUSH/RELEASE/ioctl reply, so a client
// call ordered after the close that caused them (same thread, or after the descriptor
// number was handed out again) reads the new stamp.
//
// The file is created in /dev/shm (shared memory: nothing is persisted), mode 0400 and
// owned like the pool, whose owner is the one user clients may be: it carries counters
// only. It is unlinked when the daemon exits; clients that still map it then read stamps
// that no longer change, which is what a dead daemon's leases are (the pool lock keeps a
// new daemon out until they are gone).
//
// Thread-safe.
#ifndef WALFS_FS_LEASE_STAMPS_H_
#define WALFS_FS_LEASE_STAMPS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace walfs::fs {

class LeaseStamps {
 public:
  // Enough for every writable WAL descriptor of a server with thousands of backends;
  // a lease asked for beyond it is refused and that client writes through FUSE.
  static constexpr uint32_t kDefaultSlots = 16384;

  // Creates `path` (replacing a leftover of a daemon that died, if it is ours to remove),
  // sized for `slots` words, owned by uid/gid when the daemon may give it away.
  static absl::StatusOr<std::unique_ptr<LeaseStamps>> Create(const std::string& path,
                                                             uid_t uid, gid_t gid,
                                                             uint32_t slots = kDefaultSlots);
  ~LeaseStamps();
  LeaseStamps(const LeaseStamps&) = delete;
  LeaseStamps& operator=(const LeaseStamps&) = delete;

  uint32_t slots() const { return slots_; }

  // A free slot, or nullopt when all are taken.
  std::optional<uint32_t> Allocate();
  // Writes a fresh stamp into `slot` and returns it: what a lease reply carries.
  uint64_t Renew(uint32_t slot);
  // A close happened or the handle went: whatever the slot's client compares with is no
  // longer its stamp. Free also returns the slot.
  void Revoke(uint32_t slot) { (void)Renew(slot); }
  void Free(uint32_t slot);

  // Byte offset of `slot`'s word in the file (what the reply's stamp_offset says).
  static uint64_t OffsetOf(uint32_t slot) { return uint64_t{slot} * sizeof(uint64_t); }
  // The word as a client would read it; for tests.
  uint64_t Read(uint32_t slot) const;

 private:
  LeaseStamps(std::string path, uint64_t* words, uint32_t slots)
      : path_(std::move(path)), words_(words), slots_(slots) {}

  const std::string path_;
  uint64_t* const words_;  // the shared mapping, slots_ words
  const uint32_t slots_;
  std::atomic<uint64_t> next_stamp_{1};
  std::mutex mu_;
  std::vector<uint32_t> free_;  // guarded by mu_
  uint32_t never_used_ = 0;     // guarded by mu_: slots [never_used_, slots_) untouched
};

}  // namespace walfs::fs

#endif  // WALFS_FS_LEASE_STAMPS_H_
