// FdTable: which descriptors of this process hold a lease, and their mappings.
//
// An entry is either a lease (its mapping) or pending: a walfs file whose lease is taken
// at its first pwrite- or pread-family call (fs/direct/lease.h, LeasePending), so that
// descriptors PostgreSQL opens only to fsync (durable_rename, fsync_fname) never cost a
// lease. A pending entry carries the st_dev/st_ino seen at open and the access its lease
// will ask for (write for a descriptor opened for writing, read for a read-only one); it
// has no mapping. A pending write entry of a file that was empty at open is `empty`: its
// writes go to the kernel (the daemon leases no empty file) until a seek finds that the
// file has data (NoteSeek, lease.h): a writer that padded a new file and seeks back to
// fill it in, as pg_receivewal does with every segment it receives.
//
// The hot path (every pwrite/fsync of the process) asks "is fd leased?" with one atomic
// load of slots_[fd]: descriptors at or above kFdBound are never tracked. Mutations
// (Track/Untrack) take a SignalSafeLock, so a signal handler calling close() or dup2()
// cannot deadlock against the thread it interrupted.
//
// Lifetime: an entry carries a reference count; the slot holds one reference and every
// in-progress direct write holds one (Ref). Untrack clears the slot and drops the slot's
// reference; the mapping is unmapped by whoever drops the last one, so a write racing
// with close on another thread never stores into unmapped memory. Entries come from
// chunks that are never returned to the system (type-stable memory): a reader that
// loaded a pointer just before the entry was retired can still safely try to take a
// reference, which fails once the count reached zero.
//
// Pinning (L3): a lease entry owns a private close-on-exec duplicate of the leased
// descriptor (the same open file description), registered with OwnedFds so the
// application cannot close it by number. Retire, run by whoever drops the last
// reference, unmaps first and closes the duplicate after: the kernel then sends the
// daemon the description's FLUSH (and its RELEASE when it was the last descriptor),
// which therefore comes after the entry's last store has returned. So the blocks a store
// through an entry reaches belong to the leased file for as long as the store runs (L2).
//
// Stale numbers: the bound. The interposers see every close, dup2/dup3, close_range and
// every descriptor-creating call made through libc, openat2 and syscall(SYS_open,
// SYS_openat, SYS_openat2, SYS_close, SYS_close_range, SYS_dup, SYS_dup2, SYS_dup3,
// SYS_fcntl with F_DUPFD/F_DUPFD_CLOEXEC), and drop the number's entry before the number
// can mean another file (a copy of a tracked descriptor then gets its own pending entry,
// NoteDuplicate in lease.h). What they cannot see is a close made by an inline system call
// (or io_uring) racing, on another thread, an open that reuses the number by a path not
// interposed (io_uring's IORING_OP_OPENAT, an inline syscall). The kernel removes the
// number from the table before it sends the FLUSH, and the daemon writes a new stamp
// before it answers the FLUSH (L4): once that close(2) has returned, every later direct
// store compares the stamp and goes to the kernel. A direct store can therefore only
// miss the change while the unseen close is still in progress on another thread, and
// then it lands in the leased file's own runs: the entry's private duplicate keeps the
// handle open, so the daemon has not released the runs (L3, L2). It never reaches another
// file's blocks, nor anything outside the pool's data area (L1).
#ifndef WALFS_FS_DIRECT_FD_TABLE_H_
#define WALFS_FS_DIRECT_FD_TABLE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "fs/direct/lease_mapping.h"
#include "fs/direct/owned_fds.h"
#include "fs/direct/signal_safe_lock.h"

namespace walfs::direct {

class FdTable {
 public:
  static constexpr int kFdBound = OwnedFds::kFdBound;

  struct Entry {
    std::atomic<uint32_t> refs{0};
    bool pending = false;  // no lease yet: mapping is empty
    // The file noted at open (st_dev/st_ino); a lease keeps its pending entry's, so that
    // a copy of the descriptor can be checked to be this file (NoteDuplicate, lease.h).
    dev_t dev = 0;
    ino_t ino = 0;
    uint32_t access = 0;  // pending: the lease::kAccess* to ask for
    // pending: the file was empty at open and no seek has found data in it since.
    std::atomic<bool> empty{false};
    LeaseMapping mapping;
    // A lease's private duplicate of its descriptor (an OwnedFds cell), or -1.
    std::atomic<int> private_fd{-1};
    Entry* next_free = nullptr;
  };

  // A counted reference to an entry; empty when the fd is not tracked.
  class Ref {
   public:
    Ref() = default;
    Ref(FdTable* table, Entry* entry) : table_(table), entry_(entry) {}
    Ref(Ref&& other) noexcept : table_(other.table_), entry_(other.entry_) {
      other.entry_ = nullptr;
    }
    Ref& operator=(Ref&&) = delete;
    ~Ref() { Reset(); }
    explicit operator bool() const { return entry_ != nullptr; }
    bool pending() const { return entry_->pending; }
    // A pending entry's lease::kAccess* to ask for.
    uint32_t pending_access() const { return entry_->access; }
    // A pending entry whose file was empty at open (no lease can be asked for yet).
    bool pending_empty() const { return entry_->empty.load(std::memory_order_acquire); }
    // A seek found data in it: the next write may ask for the lease.
    void MarkFilled() { entry_->empty.store(false, std::memory_order_release); }
    const LeaseMapping& operator*() const { return entry_->mapping; }
    const LeaseMapping* operator->() const { return &entry_->mapping; }
    Entry* entry() const { return entry_; }
    // The entry's private descriptor now (MoveAside may renumber it), or -1.
    int private_fd() const { return entry_->private_fd.load(std::memory_order_relaxed); }
    void Reset() {
      if (entry_ != nullptr) table_->Unref(entry_);
      entry_ = nullptr;
    }

   private:
    FdTable* table_ = nullptr;
    Entry* entry_ = nullptr;
  };

  // Private descriptors are registered with, and closed through, `owned`; a table
  // without one (fd-table tests) holds only entries without them.
  constexpr explicit FdTable(OwnedFds* owned = nullptr) : owned_(owned) {}
  FdTable(const FdTable&) = delete;
  FdTable& operator=(const FdTable&) = delete;

  // Publishes `mapping` for fd, first untracking whatever entry fd had. Returns false
  // (and the caller still owns the mapping) when fd is outside [0, kFdBound) or no entry
  // memory can be had.
  bool Track(int fd, const LeaseMapping& mapping);

  // Tracks fd as pending (a walfs file identified by dev/ino, no lease yet; `access` is
  // the lease::kAccess* to ask for; `empty`: the file was empty at open), first
  // untracking whatever entry fd had. False when fd is out of range or no entry memory.
  bool TrackPending(int fd, dev_t dev, ino_t ino, uint32_t access = lease::kAccessWrite,
                    bool empty = false);

  // Publishes `mapping` for fd only if its slot still holds `expected` (the pending
  // entry the caller leased for), with expected's dev/ino. With `private_cell` (an OwnedFds cell holding the
  // lease's private descriptor) the new entry takes the descriptor over (the cell is
  // left -1). False (the caller still owns the mapping and the descriptor) when the slot
  // changed meanwhile (a close, a newer open) or no entry memory can be had.
  bool ReplaceIf(int fd, const Entry* expected, const LeaseMapping& mapping,
                 std::atomic<int>* private_cell = nullptr);

  // One atomic load.
  bool IsTracked(int fd) const {
    return static_cast<unsigned>(fd) < kFdBound &&
           slots_[fd].load(std::memory_order_acquire) != nullptr;
  }

  // A reference to fd's entry, or an empty Ref. One load when untracked.
  Ref Acquire(int fd) {
    if (static_cast<unsigned>(fd) >= kFdBound) return {};
    Entry* entry = slots_[fd].load(std::memory_order_acquire);
    if (entry == nullptr) return {};
    return AcquireSlow(fd, entry);
  }

  // Stops tracking fd (no-op when untracked).
  void Untrack(int fd);
  // Stops tracking fd only if its slot still holds `entry` (a stale entry detected by a
  // reader must not take down a newer one).
  void UntrackIf(int fd, const Entry* entry);
  // Stops tracking every fd in [first, last] (close_range/closefrom semantics).
  void UntrackRange(unsigned first, unsigned last);
  // A descriptor number a creating call just returned is still tracked: the fd it used
  // to be was closed where we could not see it. Drop the stale entry.
  void DropIfTracked(int fd) {
    if (IsTracked(fd)) Untrack(fd);
  }

  OwnedFds* owned() const { return owned_; }

  // Number of tracked fds, and of entries not yet returned; for tests.
  int tracked_count();
  int live_entries();

  void ForkPrepare() { lock_.ForkPrepare(); }
  void ForkParent() { lock_.ForkParent(); }
  void ForkChild() { lock_.ForkChild(); }

 private:
  Ref AcquireSlow(int fd, Entry* entry);
  // Drops one reference; the last one retires the entry.
  void Unref(Entry* entry);
  // Unmaps a leased entry's mapping, then closes its private descriptor (L3), then
  // returns the entry to the free list. lock_ not held: unmapping takes the Sessions
  // lock and closing the OwnedFds lock.
  void Retire(Entry* entry);
  // lock_ held. The slot's reference to `entry` (may be null), dropped while the slot
  // change is still under the lock: a pending entry (nothing mapped, the common case of a
  // descriptor opened only to fsync) goes straight back to the free list, so a close
  // blocks signals once rather than twice. Returns the entry when it was the last
  // reference and still needs Retire (it holds a mapping), else null.
  Entry* DropSlotReferenceLocked(Entry* entry);
  void FreeLocked(Entry* entry);  // lock_ held
  Entry* Allocate();              // lock_ held
  // Installs a fresh entry from `fill` in fd's slot: unconditionally when `expected` is
  // kAny, else only while the slot holds `expected`. Returns whether it was installed.
  template <typename Fill>
  bool Install(int fd, const Entry* expected, Fill fill);
  static inline const Entry* const kAny = reinterpret_cast<const Entry*>(1);

  OwnedFds* const owned_;
  std::atomic<Entry*> slots_[kFdBound] = {};
  // One past the highest fd ever tracked: bounds UntrackRange's scan.
  std::atomic<int> high_water_{0};
  SignalSafeLock lock_;
  Entry* free_list_ = nullptr;  // lock_
  int live_entries_ = 0;        // lock_
};

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_FD_TABLE_H_
