// The fd -> lease table: lock-free lookup, signal-safe mutation, counted entries.
#include "fs/direct/fd_table.h"

#include <sys/mman.h>

#include <algorithm>

namespace walfs::direct {
namespace {

// Entries are carved from anonymous mappings that are never unmapped, so a reader may
// always touch an entry it once saw (see the header); mmap rather than malloc because
// Track can run in any context open() can.
constexpr size_t kChunkEntries = 32;

}  // namespace

FdTable::Entry* FdTable::Allocate() {
  if (free_list_ == nullptr) {
    void* chunk = mmap(nullptr, sizeof(Entry) * kChunkEntries, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED) return nullptr;
    Entry* entries = static_cast<Entry*>(chunk);
    for (size_t i = 0; i < kChunkEntries; ++i) {
      Entry* e = new (&entries[i]) Entry();
      e->next_free = free_list_;
      free_list_ = e;
    }
  }
  Entry* e = free_list_;
  free_list_ = e->next_free;
  e->next_free = nullptr;
  ++live_entries_;
  return e;
}

template <typename Fill>
bool FdTable::Install(int fd, const Entry* expected, Fill fill) {
  if (static_cast<unsigned>(fd) >= kFdBound) return false;
  Entry* old = nullptr;
  {
    SignalSafeLock::Guard guard(lock_);
    // Checked before allocating: a lost race must not cost an entry.
    if (expected != kAny && slots_[fd].load(std::memory_order_acquire) != expected) {
      return false;
    }
    Entry* entry = Allocate();
    if (entry == nullptr) return false;
    fill(*entry);
    entry->refs.store(1, std::memory_order_relaxed);
    // Under lock_ no other mutation can change the slot between the check and here.
    old = slots_[fd].exchange(entry, std::memory_order_acq_rel);
    if (high_water_.load(std::memory_order_relaxed) <= fd) {
      high_water_.store(fd + 1, std::memory_order_relaxed);
    }
    old = DropSlotReferenceLocked(old);
  }
  if (old != nullptr) Retire(old);
  return true;
}

bool FdTable::Track(int fd, const LeaseMapping& mapping) { return ReplaceIf(fd, kAny, mapping); }

bool FdTable::TrackPending(int fd, dev_t dev, ino_t ino, uint32_t access, bool empty) {
  return Install(fd, kAny, [&](Entry& e) {
    e.pending = true;
    e.dev = dev;
    e.ino = ino;
    e.access = access;
    e.empty.store(empty, std::memory_order_relaxed);
    e.mapping = LeaseMapping();
  });
}

bool FdTable::ReplaceIf(int fd, const Entry* expected, const LeaseMapping& mapping,
                        std::atomic<int>* private_cell) {
  return Install(fd, expected, [&](Entry& e) {
    e.pending = false;
    // Under lock_, with the slot still holding expected (and its reference).
    e.dev = expected != kAny ? expected->dev : 0;
    e.ino = expected != kAny ? expected->ino : 0;
    e.empty.store(false, std::memory_order_relaxed);
    e.mapping = mapping;
    if (private_cell != nullptr && owned_ != nullptr) owned_->Rebind(private_cell, &e.private_fd);
  });
}

FdTable::Ref FdTable::AcquireSlow(int fd, Entry* entry) {
  uint32_t refs = entry->refs.load(std::memory_order_relaxed);
  do {
    // Zero: retired (maybe reused since); the fd is being untracked.
    if (refs == 0) return {};
  } while (!entry->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed));
  // The entry may have been retired and reused for another fd between the load and the
  // increment: only a reference to what the slot still holds is fd's lease.
  if (slots_[fd].load(std::memory_order_acquire) != entry) {
    Unref(entry);
    return {};
  }
  return Ref(this, entry);
}

void FdTable::Unref(Entry* entry) {
  if (entry->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Retire(entry);
}

void FdTable::Retire(Entry* entry) {
  if (!entry->pending) UnmapLease(entry->mapping);
  // After the unmap: the daemon's FLUSH/RELEASE of the handle follows every store (L3).
  if (owned_ != nullptr) owned_->Close(&entry->private_fd);
  SignalSafeLock::Guard guard(lock_);
  FreeLocked(entry);
}

void FdTable::FreeLocked(Entry* entry) {
  entry->next_free = free_list_;
  free_list_ = entry;
  --live_entries_;
}

FdTable::Entry* FdTable::DropSlotReferenceLocked(Entry* entry) {
  if (entry == nullptr || entry->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return nullptr;
  }
  if (!entry->pending) return entry;
  FreeLocked(entry);
  return nullptr;
}

void FdTable::Untrack(int fd) {
  if (static_cast<unsigned>(fd) >= kFdBound) return;
  Entry* retire = nullptr;
  {
    SignalSafeLock::Guard guard(lock_);
    retire = DropSlotReferenceLocked(slots_[fd].exchange(nullptr, std::memory_order_acq_rel));
  }
  if (retire != nullptr) Retire(retire);
}

void FdTable::UntrackIf(int fd, const Entry* entry) {
  if (static_cast<unsigned>(fd) >= kFdBound) return;
  Entry* expected = const_cast<Entry*>(entry);
  Entry* retire = nullptr;
  {
    SignalSafeLock::Guard guard(lock_);
    if (slots_[fd].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) {
      retire = DropSlotReferenceLocked(expected);
    }
  }
  if (retire != nullptr) Retire(retire);
}

void FdTable::UntrackRange(unsigned first, unsigned last) {
  const unsigned end = static_cast<unsigned>(high_water_.load(std::memory_order_relaxed));
  if (end == 0 || first >= end) return;
  last = std::min(last, end - 1);
  for (unsigned fd = first; fd <= last; ++fd) {
    if (slots_[fd].load(std::memory_order_acquire) != nullptr) Untrack(static_cast<int>(fd));
  }
}

int FdTable::tracked_count() {
  const int end = high_water_.load(std::memory_order_relaxed);
  int n = 0;
  for (int fd = 0; fd < end; ++fd) n += IsTracked(fd);
  return n;
}

int FdTable::live_entries() {
  SignalSafeLock::Guard guard(lock_);
  return live_entries_;
}

}  // namespace walfs::direct
