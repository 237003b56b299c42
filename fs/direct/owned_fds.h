// OwnedFds: the descriptors the library opened for itself, which the application must
// never close, dup2 onto or close_range over.
//
// Two kinds: each session's pool, stamps (and, in a test build, image) descriptors
// (fs/direct/session.h), whose pool description holds the OFD read lock (L6), and each
// lease entry's private duplicate of its leased descriptor (L3, fs/direct/fd_table.h),
// whose close sends the daemon the FLUSH/RELEASE that must come after the entry's last
// store. The application never opened them, so a close by number (closefrom(3) in a
// daemonizing library, a double close, dup2 onto a number it believes free) must not
// reach them: the interposers ask IsOwned first (one relaxed load of a bitmap word, no
// lock: the close path of every descriptor of the process pays it) and keep away
// (fd_events.h).
//
// An owner keeps its descriptor's number in a std::atomic<int> cell registered here, and
// reads it from there whenever it uses it: MoveAside renumbers a descriptor (the same
// open file description under a new number, F_DUPFD_CLOEXEC) and updates the cell, so
// the application can have the number it asked dup2 for. Renumbering a private
// duplicate closes its old number, which the kernel reports to the daemon as a FLUSH of
// the handle: its lease is revoked (L4) and the entry falls back to the kernel at its
// next store. That is safe and rare (an application dup2'ing onto a number it did not
// open).
//
// Close closes the descriptor with the lock held (signals blocked), so no application
// close of the number can slip in between; for a private duplicate that includes the
// FLUSH round trip to the daemon.
//
// Every registered descriptor is close-on-exec and below kFdBound. fork: the child
// inherits the descriptors and this registry as they are (the owners' cells with them).
// Thread-safe: Adopt/Rebind/Close/MoveAside take a SignalSafeLock (never held while
// taking another lock of the library: lock order is FdTable, Sessions, then OwnedFds).
#ifndef WALFS_FS_DIRECT_OWNED_FDS_H_
#define WALFS_FS_DIRECT_OWNED_FDS_H_

#include <linux/close_range.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "fs/direct/signal_safe_lock.h"

namespace walfs::direct {

class OwnedFds {
 public:
  static constexpr int kFdBound = 65536;

  constexpr OwnedFds() = default;
  OwnedFds(const OwnedFds&) = delete;
  OwnedFds& operator=(const OwnedFds&) = delete;

  // Registers fd, a close-on-exec descriptor the caller opened, as the library's, its
  // number kept in *cell (which must outlive the registration). False, with nothing
  // registered and fd still the caller's, when fd is outside [0, kFdBound) or already
  // registered.
  bool Adopt(int fd, std::atomic<int>* cell);
  // Moves the registration of *from's descriptor to *to (*to takes the number, *from
  // becomes -1). No-op when *from is -1.
  void Rebind(std::atomic<int>* from, std::atomic<int>* to);
  // Unregisters and closes the descriptor in *cell, which becomes -1; no-op when -1.
  void Close(std::atomic<int>* cell);

  // Whether fd is registered: one relaxed load.
  bool IsOwned(int fd) const {
    return static_cast<unsigned>(fd) < kFdBound &&
           (bits_[fd >> 6].load(std::memory_order_relaxed) >> (fd & 63) & 1) != 0;
  }
  // If fd is registered, renumbers it (see the header) so the caller can let the
  // application have fd. True when fd is not (or no longer) registered; false when it
  // stays registered (no free descriptor below kFdBound).
  bool MoveAside(int fd);
  // The lowest registered descriptor in [from, last], or -1.
  int NextOwned(unsigned from, unsigned last) const;
  // Number of registered descriptors.
  int count() const { return count_.load(std::memory_order_relaxed); }

  void ForkPrepare() { lock_.ForkPrepare(); }
  void ForkParent() { lock_.ForkParent(); }
  void ForkChild() { lock_.ForkChild(); }

 private:
  void SetBit(int fd, bool on);

  SignalSafeLock lock_;
  std::atomic<uint64_t> bits_[kFdBound / 64] = {};
  std::atomic<int>* cells_[kFdBound] = {};  // lock_
  std::atomic<int> count_{0};
};

// Calls range_fn(a, b) (a close_range) over [first, last] minus the registered
// descriptors, once per gap between them. With CLOSE_RANGE_CLOEXEC it is one call over
// the whole range: registered descriptors are close-on-exec already. Returns the first
// failure, else 0.
template <typename RangeFn>
int CloseRangeAroundOwned(const OwnedFds& owned, unsigned first, unsigned last, int flags,
                          RangeFn range_fn) {
  if ((flags & CLOSE_RANGE_CLOEXEC) != 0 || first > last || owned.count() == 0) {
    return range_fn(first, last);
  }
  int result = 0;
  unsigned from = first;
  for (;;) {
    const int next = owned.NextOwned(from, last);
    const unsigned to = next < 0 ? last : static_cast<unsigned>(next);
    if (next < 0 || to > from) {
      const int r = range_fn(from, next < 0 ? to : to - 1);
      if (r != 0 && result == 0) result = r;
    }
    if (next < 0 || to == last) break;
    from = to + 1;
  }
  return result;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_OWNED_FDS_H_
