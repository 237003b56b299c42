// ReadLeases: the daemon's register of read leases by inode (fs/lease_protocol.h, L9).
//
// A read lease pins nothing: its holder copies out of the runs and compares the handle's
// stamp before and after each copy. What the daemon owes it is a new stamp before the
// file's bytes can change owner. For a file that is open, only a size going down frees
// blocks (unlink and rename-over leave an orphan while it is open; blocks past the size
// are never leased), so every size change runs under Shrink, which revokes the file's
// read leases first, and every grant takes its runs under Grant: a grant therefore
// never takes runs between a revocation and the size change it announces.
//
// Lock order: a handle's lease_mu, then this register, then core's locks.
// Thread-safe.
#ifndef WALFS_FS_READ_LEASES_H_
#define WALFS_FS_READ_LEASES_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fs/lease_stamps.h"

namespace walfs::fs {

class ReadLeases {
 public:
  explicit ReadLeases(LeaseStamps* stamps) : stamps_(stamps) {}
  ReadLeases(const ReadLeases&) = delete;
  ReadLeases& operator=(const ReadLeases&) = delete;

  // Runs grant() (which takes the runs and renews the stamp of `slot`) with the register
  // locked; when it returns true, `slot` is registered for `ino` (once: a renewal keeps
  // it). Returns grant()'s result.
  template <typename Fn>
  bool Grant(uint64_t ino, uint32_t slot, Fn grant) {
    std::lock_guard<std::mutex> l(mu_);
    if (!grant()) return false;
    std::vector<uint32_t>& slots = by_ino_[ino];
    for (uint32_t s : slots) {
      if (s == slot) return true;
    }
    slots.push_back(slot);
    granted_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Runs shrink() (a size change of `ino`) after revoking every read lease on `ino`,
  // with the register locked. Returns shrink()'s result.
  template <typename Fn>
  auto Shrink(uint64_t ino, Fn shrink) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = by_ino_.find(ino);
    if (it != by_ino_.end()) {
      for (uint32_t slot : it->second) stamps_->Revoke(slot);
      revoked_.fetch_add(it->second.size(), std::memory_order_relaxed);
    }
    return shrink();
  }

  // The handle holding `slot` is released: its read lease on `ino` ends (the caller
  // frees the slot afterwards). No-op when the slot holds no read lease.
  void Remove(uint64_t ino, uint32_t slot);

  uint64_t granted() const { return granted_.load(std::memory_order_relaxed); }
  uint64_t released() const { return released_.load(std::memory_order_relaxed); }
  // Read leases revoked by a size change (the holders then read through FUSE).
  uint64_t revoked() const { return revoked_.load(std::memory_order_relaxed); }

 private:
  LeaseStamps* const stamps_;
  std::mutex mu_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> by_ino_;  // guarded by mu_
  std::atomic<uint64_t> granted_{0}, released_{0}, revoked_{0};
};

}  // namespace walfs::fs

#endif  // WALFS_FS_READ_LEASES_H_
