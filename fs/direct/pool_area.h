// The data area of a pool, from the superblock the client reads itself (L1).
//
// A session's pool descriptor comes from the daemon, but what may be stored into is
// decided from the pool's own superblock: magic, version, size and CRC-32C of both copies
// (core/format.h; the daemon mounts a pool only when both are valid and identical), the
// uuid the hello names, and the data area [data_offset, end), where end is the pool
// file's size (a grown pool is larger than the superblock's data_blocks says) or, for a
// device, the superblock's capacity. Everything read is untrusted input.
#ifndef WALFS_FS_DIRECT_POOL_AREA_H_
#define WALFS_FS_DIRECT_POOL_AREA_H_

#include <sys/types.h>

#include <cstdint>

#include "core/format.h"

namespace walfs::direct {

struct PoolArea {
  uint8_t uuid[16] = {};
  uint64_t data_begin = 0;  // data_offset
  uint64_t data_end = 0;    // exclusive
  bool is_device = false;   // a character device (device-DAX)
};

// nullptr when `sb` is a superblock of this format, else why not (a static string):
// magic, version, superblock_size, CRC-32C over the bytes before crc, block_size, and a
// data_offset that is block-aligned and lies after the journal, the state block and both
// record tables (overflow-safe).
const char* CheckSuperblock(const core::format::Superblock& sb);

// nullptr when `sb` describes a pool whose descriptor has `size` bytes (st_size of a
// regular file; 0 for a device, whose end is the capacity) with a non-empty data area,
// filling *out; else why not.
const char* DataArea(const core::format::Superblock& sb, bool is_device, uint64_t size,
                     PoolArea* out);

// Reads both superblock copies of the pool open at fd (pread; a device that refuses
// pread is read through a read-only mapping of its first pages), checks each with
// CheckSuperblock, requires them identical, and fills *out with DataArea's answer.
// nullptr on success, else why not. fd must be a regular file or a character device.
const char* ReadPoolArea(int fd, PoolArea* out);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_POOL_AREA_H_
