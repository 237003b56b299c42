// Byte sizes as people write them on command lines and in mount options, one syntax for
// every walfs program (mkfs.walfs --size and --segment-size, the daemon's max_write=).
//
//   SIZE = DIGITS [ K | M | G | T ] [ B | iB ]      letters in any case
//
// Every suffix is a power of 1024, as mke2fs and PostgreSQL's own settings read them:
// 64M = 64MB = 64MiB = 67108864 bytes, 512k = 524288 bytes; a bare number (or "B") is
// bytes. Anything else — a sign, a fraction, spaces, an unknown unit, a value past
// 2^64 - 1 — is refused.
// Part of walfs_util (util/CMakeLists.txt): for command lines only, never the engine.
#ifndef WALFS_UTIL_BYTE_SIZE_H_
#define WALFS_UTIL_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace walfs::util {

// What a size may look like, for usage texts and error messages.
inline constexpr char kByteSizeSyntax[] =
    "a number of bytes, optionally followed by K, M, G or T (also written KB or KiB, ...; "
    "all powers of 1024), e.g. 64M, 64MB, 64MiB, 512k";

// The number of bytes `text` names. InvalidArgument quotes `text` and says what is
// accepted (kByteSizeSyntax).
absl::StatusOr<uint64_t> ParseByteSize(const std::string& text);

}  // namespace walfs::util

#endif  // WALFS_UTIL_BYTE_SIZE_H_
