// Reading and checking a pool's superblocks.
#include "fs/direct/pool_area.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>

#include "core/crc32c.h"

namespace walfs::direct {
namespace {

namespace format = core::format;

// a + b * c, or false when it overflows.
bool MulAdd(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  uint64_t product;
  if (__builtin_mul_overflow(b, c, &product)) return false;
  return !__builtin_add_overflow(a, product, out);
}

bool ReadFully(int fd, void* buf, size_t n, uint64_t offset) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

// Device-DAX has no read(2): its first pages are read through a mapping.
bool ReadSuperblocksMapped(int fd, format::Superblock* sbs) {
  const size_t length = format::kSuperblockOffset[1] + format::kBlockSize;
  void* p = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  for (int i = 0; i < 2; ++i) {
    memcpy(&sbs[i], static_cast<const char*>(p) + format::kSuperblockOffset[i], sizeof(sbs[i]));
  }
  munmap(p, length);
  return true;
}

}  // namespace

const char* CheckSuperblock(const format::Superblock& sb) {
  if (sb.magic != format::kSuperblockMagic) return "bad superblock magic";
  if (sb.version != format::kVersion) return "unsupported superblock version";
  if (sb.superblock_size != sizeof(format::Superblock)) return "bad superblock_size";
  if (core::Crc32c(0, &sb, offsetof(format::Superblock, crc)) != sb.crc) {
    return "superblock checksum mismatch";
  }
  if (sb.block_size != format::kBlockSize) return "unsupported block_size";
  uint64_t inodes_end, dirents_end;
  if (!MulAdd(sb.inode_table_offset, sb.inode_count, sb.inode_size, &inodes_end) ||
      !MulAdd(sb.dirent_table_offset, sb.dirent_count, sb.dirent_size, &dirents_end)) {
    return "superblock tables overflow";
  }
  if (sb.data_offset % format::kBlockSize != 0) return "data_offset not block-aligned";
  if (sb.journal_offset > UINT64_MAX - sb.journal_size ||
      sb.data_offset < sb.journal_offset + sb.journal_size ||
      sb.data_offset < format::kStateOffset + format::kBlockSize ||
      sb.data_offset < inodes_end || sb.data_offset < dirents_end) {
    return "data_offset overlaps the metadata areas";
  }
  return nullptr;
}

const char* DataArea(const format::Superblock& sb, bool is_device, uint64_t size,
                     PoolArea* out) {
  const uint64_t end = is_device ? sb.capacity : size;
  if (!is_device && size < sb.capacity) return "pool file shorter than its capacity";
  if (sb.data_offset >= end) return "data_offset lies past the end of the pool";
  memcpy(out->uuid, sb.uuid, sizeof(out->uuid));
  out->data_begin = sb.data_offset;
  out->data_end = end;
  out->is_device = is_device;
  return nullptr;
}

const char* ReadPoolArea(int fd, PoolArea* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return "cannot stat the pool descriptor";
  const bool is_device = S_ISCHR(st.st_mode);
  if (!is_device && !S_ISREG(st.st_mode)) {
    return "pool descriptor is neither a regular file nor a character device";
  }
  format::Superblock sbs[2];
  bool read = true;
  for (int i = 0; i < 2 && read; ++i) {
    read = ReadFully(fd, &sbs[i], sizeof(sbs[i]), format::kSuperblockOffset[i]);
  }
  if (!read && (!is_device || !ReadSuperblocksMapped(fd, sbs))) {
    return "cannot read the pool's superblocks";
  }
  for (const format::Superblock& sb : sbs) {
    if (const char* why = CheckSuperblock(sb); why != nullptr) return why;
  }
  if (memcmp(&sbs[0], &sbs[1], sizeof(sbs[0])) != 0) return "superblocks A and B differ";
  return DataArea(sbs[0], is_device, static_cast<uint64_t>(st.st_size), out);
}

}  // namespace walfs::direct
