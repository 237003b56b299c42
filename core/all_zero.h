// AllZero: whether a byte range reads as zero (free records, free blocks, torn images).
#ifndef WALFS_CORE_ALL_ZERO_H_
#define WALFS_CORE_ALL_ZERO_H_

#include <cstddef>
#include <cstring>

namespace walfs::core {

// Compares the range with itself shifted by one byte: one pass, no zero buffer.
inline bool AllZero(const char* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

}  // namespace walfs::core

#endif  // WALFS_CORE_ALL_ZERO_H_
