// Test fixtures shared by the direct-access tests: a crafted pool file (superblocks as
// mkfs writes them, crc included), a sealed stamps memfd the test can still write (the
// daemon's side), and a session hello describing them.
#ifndef WALFS_TESTS_UNIT_DIRECT_DIRECT_TEST_POOL_H_
#define WALFS_TESTS_UNIT_DIRECT_DIRECT_TEST_POOL_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/crc32c.h"
#include "core/format.h"
#include "fs/lease_protocol.h"
#include "gtest/gtest.h"

namespace walfs::direct::testpool {

namespace format = core::format;

inline constexpr uint64_t kBlock = 4096;
inline constexpr uint64_t kPoolSize = 256 * kBlock;
// After the journal (8K + 64K), the state block (72K), 4 inodes at 76K and 8 dirents at
// 80K: the data area starts at block 24.
inline constexpr uint64_t kDataOffset = 24 * kBlock;
inline constexpr uint8_t kUuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
inline constexpr uint64_t kStampSlots = 64;
inline constexpr uint64_t kStampsId = 0x5eed5eed5eed5eedull;

inline void SealSuperblock(format::Superblock& sb) {
  sb.crc = core::Crc32c(0, &sb, offsetof(format::Superblock, crc));
}

inline format::Superblock MakeSuperblock(uint64_t capacity = kPoolSize) {
  format::Superblock sb{};
  sb.magic = format::kSuperblockMagic;
  sb.version = format::kVersion;
  sb.superblock_size = sizeof(format::Superblock);
  memcpy(sb.uuid, kUuid, sizeof(kUuid));
  sb.capacity = capacity;
  sb.block_size = format::kBlockSize;
  sb.segment_size = format::kDefaultSegmentSize;
  sb.journal_offset = format::kJournalOffset;
  sb.journal_size = format::kJournalSize;
  sb.inode_table_offset = format::kStateOffset + kBlock;
  sb.inode_count = 4;
  sb.inode_size = format::kInodeSize;
  sb.dirent_table_offset = sb.inode_table_offset + kBlock;
  sb.dirent_count = 8;
  sb.dirent_size = format::kDirentSize;
  sb.data_offset = kDataOffset;
  sb.data_blocks = (capacity - kDataOffset) / kBlock;
  SealSuperblock(sb);
  return sb;
}

inline void WriteSuperblocks(int fd, const format::Superblock& a, const format::Superblock& b) {
  ASSERT_EQ(pwrite(fd, &a, sizeof(a), static_cast<off_t>(format::kSuperblockOffset[0])),
            static_cast<ssize_t>(sizeof(a)));
  ASSERT_EQ(pwrite(fd, &b, sizeof(b), static_cast<off_t>(format::kSuperblockOffset[1])),
            static_cast<ssize_t>(sizeof(b)));
}

// A memfd of `slots` words sealed with `seals`; *words (if given) is a shared writable
// mapping of it made before the seals, as the daemon keeps one.
inline int MakeStamps(uint64_t slots, unsigned seals, uint64_t** words = nullptr,
                      uint64_t size_bytes = UINT64_MAX) {
  const int fd = memfd_create("walfs-test-stamps", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  const uint64_t size = size_bytes == UINT64_MAX ? slots * 8 : size_bytes;
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  if (words != nullptr) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    *words = static_cast<uint64_t*>(p);
  }
  if (seals != 0) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  }
  return fd;
}

inline constexpr unsigned kStampSeals = F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;

inline lease::SessionHello MakeHello(uint32_t durability = lease::kDurabilityForced) {
  lease::SessionHello h{};
  h.magic = lease::kMagic;
  h.version = lease::kVersion;
  h.durability = durability;
  memcpy(h.uuid, kUuid, sizeof(kUuid));
  h.stamp_slots = kStampSlots;
  h.stamps_id = kStampsId;
  return h;
}

// The pool file: superblocks written, kPoolSize bytes.
inline int MakePool(const char* path) {
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(kPoolSize)), 0);
  const format::Superblock sb = MakeSuperblock();
  WriteSuperblocks(fd, sb, sb);
  return fd;
}

// Descriptors open in this process (to check nothing leaked).
inline int OpenDescriptorCount() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

}  // namespace walfs::direct::testpool

#endif  // WALFS_TESTS_UNIT_DIRECT_DIRECT_TEST_POOL_H_
