// Pool geometry: the reserve and the sizing rules, and computing, validating and writing
// a fresh layout (mkfs).
#include "core/layout.h"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"
#include "core/format.h"
#include "core/inode.h"
#include "core/pool_state.h"

namespace walfs::core {
namespace {

using format::AlignUp;
using format::kBlockSize;

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

uint64_t ReservedBlocks(const format::Superblock& sb) {
  return std::min(kReserveSegments * (sb.segment_size / format::kBlockSize),
                  sb.data_blocks / 4);
}

uint64_t WalDataBytes(uint64_t max_wal_size, uint64_t wal_keep_size, uint64_t segment_size) {
  return max_wal_size + wal_keep_size + (kHeadroomSegments + kReserveSegments) * segment_size;
}

uint64_t MaxWalSizeFor(uint64_t data_bytes, uint64_t wal_keep_size, uint64_t segment_size) {
  const uint64_t fixed = WalDataBytes(0, wal_keep_size, segment_size);
  if (data_bytes <= fixed) return 0;
  return (data_bytes - fixed) / segment_size * segment_size;
}

absl::StatusOr<uint64_t> PoolSizeFor(uint64_t data_bytes, const FormatOptions& options) {
  constexpr uint64_t kMiB = 1 << 20;
  // The metadata grows with the capacity (one inode per 64 KiB by default), so add what
  // is missing until the data area is big enough; a few rounds at most.
  uint64_t capacity = AlignUp(data_bytes + kMiB, kMiB);
  for (int round = 0; round < 64; ++round) {
    auto sb = ComputeLayout(capacity, options);
    const uint64_t have = sb.ok() ? sb->data_blocks * kBlockSize : 0;
    if (sb.ok() && have >= data_bytes) return capacity;
    capacity += AlignUp(data_bytes > have ? data_bytes - have : kMiB, kMiB);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no pool size found for a data area of ", data_bytes, " bytes"));
}

absl::StatusOr<format::Superblock> ComputeLayout(uint64_t capacity,
                                                 const FormatOptions& options) {
  const uint64_t seg = options.segment_size;
  if (!IsPowerOfTwo(seg) || seg < format::kMinSegmentSize || seg > format::kMaxSegmentSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment size ", seg, " must be a power of two between 1 MiB and 1 GiB"));
  }
  capacity = capacity / kBlockSize * kBlockSize;
  uint64_t inodes = options.inode_count;
  if (inodes == 0) inodes = std::max<uint64_t>(64, capacity / (64 * 1024));
  if (inodes < 2) return absl::InvalidArgumentError("a pool needs at least 2 inodes");
  if (inodes > (1ULL << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("too many inodes: ", inodes));
  }
  format::Superblock sb{};
  sb.magic = format::kSuperblockMagic;
  sb.version = format::kVersion;
  sb.superblock_size = sizeof(format::Superblock);
  sb.capacity = capacity;
  sb.block_size = kBlockSize;
  sb.segment_size = seg;
  sb.journal_offset = format::kJournalOffset;
  sb.journal_size = format::kJournalSize;
  sb.inode_table_offset = format::kStateOffset + kBlockSize;
  sb.inode_count = inodes;
  sb.inode_size = format::kInodeSize;
  sb.dirent_table_offset =
      AlignUp(sb.inode_table_offset + inodes * format::kInodeSize, kBlockSize);
  // Two entries per inode leaves room for hard links and link+unlink installs.
  sb.dirent_count = 2 * inodes;
  sb.dirent_size = format::kDirentSize;
  sb.data_offset =
      AlignUp(sb.dirent_table_offset + sb.dirent_count * format::kDirentSize, kBlockSize);
  if (sb.data_offset >= capacity || capacity - sb.data_offset < seg) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool of ", capacity, " bytes is too small: metadata for ", inodes,
        " inodes takes ", sb.data_offset, " bytes and the data area must hold at least one ",
        seg, "-byte segment (need at least ", sb.data_offset + seg, " bytes)"));
  }
  sb.data_blocks = (capacity - sb.data_offset) / kBlockSize;
  return sb;
}

absl::Status FormatPool(PersistentRegion& region, const FormatOptions& options) {
  auto layout = ComputeLayout(region.size(), options);
  if (!layout.ok()) return layout.status();
  format::Superblock sb = *layout;
  if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid)) {
    return absl::InternalError("getrandom failed for the pool UUID");
  }
  sb.uuid[6] = (sb.uuid[6] & 0x0f) | 0x40;  // RFC 4122 version 4
  sb.uuid[8] = (sb.uuid[8] & 0x3f) | 0x80;
  sb.created_ns = NowNs();
  sb.crc = Crc32c(0, &sb, offsetof(format::Superblock, crc));

  // Invalidate old superblocks first: a crash mid-format must not leave an old pool's
  // superblock describing half-zeroed metadata.
  region.Fill(0, 0, 2 * kBlockSize);
  region.Persist(0, 2 * kBlockSize);

  // Lazy initialisation (format.h, PoolState): only what is read before anything is
  // allocated is written here, so formatting costs the same whatever the pool's size.
  // The journal must not hold an old pool's transaction, slot 0 is reserved and zero;
  // the rest of the tables and the data area are never read above PoolState's marks.
  region.Fill(sb.journal_offset, 0, sb.journal_size);
  region.Persist(sb.journal_offset, sb.journal_size);
  region.Fill(format::kStateOffset, 0, kBlockSize);
  region.Persist(format::kStateOffset, kBlockSize);
  region.Fill(sb.inode_table_offset, 0, format::kInodeSize);
  region.Persist(sb.inode_table_offset, format::kInodeSize);
  const bool data_is_zero = options.region_is_zero || options.zero_data;
  if (options.zero_data && !options.region_is_zero) {
    // --zero: everything after the state block, for whoever wants the device written.
    const uint64_t begin = sb.inode_table_offset;
    constexpr uint64_t kChunk = 64ULL << 20;
    for (uint64_t off = begin; off < sb.capacity; off += kChunk) {
      const uint64_t n = std::min(kChunk, sb.capacity - off);
      region.Fill(off, 0, n);
      region.Flush(off, n);
      if (options.progress) options.progress(off + n - begin, sb.capacity - begin);
    }
    region.Drain();
  }
  const format::PoolState state = InitialPoolState(sb, data_is_zero);
  region.Store(format::kStateOffset, &state, sizeof(state));
  region.Persist(format::kStateOffset, sizeof(state));

  format::InodeRecord root{};
  const int64_t now = NowNs();
  root.state = format::InodeState::kLive;
  root.type = format::InodeType::kDirectory;
  root.generation = 1;
  root.mode = 040000 | (options.root_mode & 07777);
  root.uid = options.root_uid;
  root.gid = options.root_gid;
  root.nlink = 2;
  root.atime_ns = root.mtime_ns = root.ctime_ns = now;
  root.crc = RecordCrc(&root, sizeof(root));
  const uint64_t root_off = sb.inode_table_offset + format::kRootInode * format::kInodeSize;
  region.Store(root_off, &root, sizeof(root));
  region.Persist(root_off, sizeof(root));

  // Copy B, then A: A is the one readers try first, so it appears last.
  region.Store(format::kSuperblockOffset[1], &sb, sizeof(sb));
  region.Persist(format::kSuperblockOffset[1], sizeof(sb));
  region.Store(format::kSuperblockOffset[0], &sb, sizeof(sb));
  region.Persist(format::kSuperblockOffset[0], sizeof(sb));
  return region.health();
}

}  // namespace walfs::core
