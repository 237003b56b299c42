// CRC-32C (Castagnoli), the checksum of every on-media record.
#ifndef WALFS_CORE_CRC32C_H_
#define WALFS_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace walfs::core {

// Extends `crc` (0 to start) over [data, data + n). Uses SSE4.2 when the CPU has it.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// CRC of a record whose first 4 bytes are its own crc field: those bytes count as zero.
uint32_t RecordCrc(const void* record, size_t size);

}  // namespace walfs::core

#endif  // WALFS_CORE_CRC32C_H_
