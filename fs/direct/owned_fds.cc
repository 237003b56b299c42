// The registry of library-owned descriptors.
#include "fs/direct/owned_fds.h"

#include <fcntl.h>

#include "fs/direct/real_calls.h"

namespace walfs::direct {

void OwnedFds::SetBit(int fd, bool on) {
  const uint64_t bit = uint64_t{1} << (fd & 63);
  if (on) {
    bits_[fd >> 6].fetch_or(bit, std::memory_order_relaxed);
  } else {
    bits_[fd >> 6].fetch_and(~bit, std::memory_order_relaxed);
  }
}

bool OwnedFds::Adopt(int fd, std::atomic<int>* cell) {
  if (static_cast<unsigned>(fd) >= kFdBound) return false;
  SignalSafeLock::Guard guard(lock_);
  if (cells_[fd] != nullptr) return false;
  cells_[fd] = cell;
  cell->store(fd, std::memory_order_relaxed);
  SetBit(fd, true);
  count_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void OwnedFds::Rebind(std::atomic<int>* from, std::atomic<int>* to) {
  SignalSafeLock::Guard guard(lock_);
  const int fd = from->load(std::memory_order_relaxed);
  if (fd >= 0) cells_[fd] = to;
  to->store(fd, std::memory_order_relaxed);
  from->store(-1, std::memory_order_relaxed);
}

void OwnedFds::Close(std::atomic<int>* cell) {
  SignalSafeLock::Guard guard(lock_);
  const int fd = cell->load(std::memory_order_relaxed);
  if (fd < 0) return;
  cell->store(-1, std::memory_order_relaxed);
  // Closed while still registered: no application close of the number can slip in
  // between, and once the bit clears the number is the kernel's to give out again.
  real::Close(fd);
  cells_[fd] = nullptr;
  SetBit(fd, false);
  count_.fetch_sub(1, std::memory_order_relaxed);
}

bool OwnedFds::MoveAside(int fd) {
  if (!IsOwned(fd)) return true;
  SignalSafeLock::Guard guard(lock_);
  std::atomic<int>* cell = cells_[fd];
  if (cell == nullptr) return true;
  const int moved = real::Fcntl(fd, F_DUPFD_CLOEXEC, nullptr);
  if (moved < 0) return false;
  if (moved >= kFdBound) {
    real::Close(moved);
    return false;
  }
  cells_[moved] = cell;
  SetBit(moved, true);
  cell->store(moved, std::memory_order_relaxed);
  real::Close(fd);
  cells_[fd] = nullptr;
  SetBit(fd, false);
  return true;
}

int OwnedFds::NextOwned(unsigned from, unsigned last) const {
  if (from >= static_cast<unsigned>(kFdBound) || from > last) return -1;
  if (last >= static_cast<unsigned>(kFdBound)) last = kFdBound - 1;
  unsigned word = from >> 6;
  uint64_t bits = bits_[word].load(std::memory_order_relaxed) & (~uint64_t{0} << (from & 63));
  for (;;) {
    if (bits != 0) {
      const unsigned fd = word * 64 + static_cast<unsigned>(__builtin_ctzll(bits));
      return fd <= last ? static_cast<int>(fd) : -1;
    }
    if (++word > (last >> 6)) return -1;
    bits = bits_[word].load(std::memory_order_relaxed);
  }
}

}  // namespace walfs::direct
