// LeaseStamps: the daemon's side of lease revocation (fs/lease_protocol.h, L4).
//
// A client must never store into the pool for a descriptor number that no longer refers
// to the open file description it leased: the number can be closed where the library
// does not see it (a raw system call) and reused for a pipe or another file. The kernel
// does see every close: FUSE sends FLUSH for each close(2) of a descriptor of the file,
// before close returns. So each leased handle owns one 64-bit word (a slot) in a small
// shared memory object; the daemon writes a new stamp into it when the lease is granted,
// at every FLUSH of the handle and when the handle is released. The client reads the word
// before each direct store and compares it with the stamp its lease reply carried.
//
// Stamps come from one 64-bit counter and are never reused, so a client comparing an old
// stamp with a slot that has since gone to another lease sees a difference (no ABA).
// The stores are release stores made before the FLUSH/RELEASE/ioctl reply, so a client
// call ordered after the close that caused them (same thread, or after the descriptor
// number was handed out again) reads the new stamp.
//
// The words live in a memfd (L8: no name outside the mount that another user could
// pre-create or read). The daemon maps it read-write once, then seals it with
// F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL: the daemon's existing
// mapping keeps writing, while every descriptor handed to a client (the session hello,
// fs/session.h) can be mapped only read-only and neither written, resized nor unsealed.
// Clients that still map it after the daemon exits read stamps that no longer change,
// which is what a dead daemon's leases are (the pool lock keeps a new daemon out until
// they are gone, L6).
//
// Thread-safe.
#ifndef WALFS_FS_LEASE_STAMPS_H_
#define WALFS_FS_LEASE_STAMPS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace walfs::fs {

class LeaseStamps {
 public:
  // Enough for every writable WAL descriptor of a server with thousands of backends;
  // a lease asked for beyond it is refused and that client writes through FUSE.
  static constexpr uint32_t kDefaultSlots = 16384;
  // The seals the memfd carries once Create returns (what clients may check).
  static constexpr int kSeals = 0x0002 /*F_SEAL_SHRINK*/ | 0x0004 /*F_SEAL_GROW*/ |
                                0x0010 /*F_SEAL_FUTURE_WRITE*/ | 0x0001 /*F_SEAL_SEAL*/;

  // An anonymous memory object of `slots` words, mapped and sealed.
  static absl::StatusOr<std::unique_ptr<LeaseStamps>> Create(uint32_t slots = kDefaultSlots);
  ~LeaseStamps();
  LeaseStamps(const LeaseStamps&) = delete;
  LeaseStamps& operator=(const LeaseStamps&) = delete;

  uint32_t slots() const { return slots_; }
  // Non-zero and random per memfd: what the session hello and every lease reply carry
  // as stamps_id, so a client can tell this daemon's stamps from an earlier daemon's.
  uint64_t id() const { return id_; }
  // The sealed memfd (owned; close-on-exec). Sent to session clients with SCM_RIGHTS;
  // the kernel duplicates it into the receiver, so the daemon keeps its own.
  int fd() const { return fd_; }

  // A free slot, or nullopt when all are taken.
  std::optional<uint32_t> Allocate();
  // Writes a fresh stamp into `slot` and returns it: what a lease reply carries.
  uint64_t Renew(uint32_t slot);
  // A close happened or the handle went: whatever the slot's client compares with is no
  // longer its stamp. Free also returns the slot.
  void Revoke(uint32_t slot) { (void)Renew(slot); }
  void Free(uint32_t slot);

  // Byte offset of `slot`'s word in the memfd (what the reply's stamp_offset says).
  static uint64_t OffsetOf(uint32_t slot) { return uint64_t{slot} * sizeof(uint64_t); }
  // The word as the daemon's mapping holds it; for tests.
  uint64_t Read(uint32_t slot) const;

 private:
  LeaseStamps(int fd, uint64_t* words, uint32_t slots, uint64_t id)
      : fd_(fd), words_(words), slots_(slots), id_(id) {}

  const int fd_;
  uint64_t* const words_;  // the daemon's shared read-write mapping, slots_ words
  const uint32_t slots_;
  const uint64_t id_;
  std::atomic<uint64_t> next_stamp_{1};
  std::mutex mu_;
  std::vector<uint32_t> free_;  // guarded by mu_
  uint32_t never_used_ = 0;     // guarded by mu_: slots [never_used_, slots_) untouched
};

}  // namespace walfs::fs

#endif  // WALFS_FS_LEASE_STAMPS_H_
