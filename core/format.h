// The on-media format of a walfs pool: the one place that defines it.
//
// A pool is a byte range (a file, a DAX file or a device-DAX device) laid out as
//
//   [0, 4K)           superblock A
//   [4K, 8K)          superblock B (an identical copy; either one is enough to open)
//   journal           a redo journal of two slots, holding the last two metadata
//                     transactions (see JournalHeader)
//   state block       the PoolState record (format v2): what mkfs left unwritten
//   inode table       inode_count fixed-size InodeRecords; inode N lives at index N,
//                     index 0 is reserved (always zero), index 1 is the root directory
//   dirent table      dirent_count fixed-size DirentRecords, one per directory entry
//   data area         data_blocks blocks of kBlockSize, addressed by block index
//
// Every region starts on a kBlockSize boundary. All integers are little-endian
// fixed-width fields (walfs only builds on little-endian hosts, asserted below), so a
// record's bytes are the struct's bytes.
//
// Integrity: every record carries a CRC-32C over its bytes (with the crc field taken as
// zero). A free InodeRecord or DirentRecord is all zero bytes, crc included; any other
// record whose crc does not match is corruption and is reported, never used.
//
// Durability invariants the rest of core keeps (and fsck checks):
//  - Metadata (inode, dirent and state records) changes only through the journal: a
//    transaction's record images are written to one journal slot with a header whose
//    CRC covers them, persisted (the commit point), then copied to their home offsets.
//    A home image not yet persisted is repeated in every later transaction until it is
//    (core/journal.h), so the newest committed transaction names every record whose
//    home copy may be stale. Recovery replays the valid slot with the highest sequence;
//    replay is idempotent because that slot holds the newest image of the records it
//    names.
//  - Every data block not owned by an inode is zero, except in PoolState's uninitialised
//    range (never allocated since mkfs, which did not write it: it may hold anything and
//    is zeroed when first allocated). Blocks owned by an inode in state kOrphan are being
//    zeroed and return to free space once that is persisted.
//  - Inode slots at or above PoolState::inode_high and dirent slots at or above
//    PoolState::dirent_high were never used since mkfs and are never read: they may hold
//    anything (an older pool's records after mkfs --force). Every slot below them is a
//    valid record or all zero; a slot is zeroed on media before the mark moves past it.
//  - Bytes of an inode's extents beyond its size are zero (recovery re-zeroes them,
//    since an unacknowledged write may have reached media before its size did).
#ifndef WALFS_CORE_FORMAT_H_
#define WALFS_CORE_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace walfs::core::format {

static_assert(std::endian::native == std::endian::little,
              "walfs pools are little-endian and records are read in place");

inline constexpr uint64_t kBlockSize = 4096;
// Version 2 added the state block (PoolState) and the lazy initialisation it records.
// A version 1 pool is refused with a message saying how to move its files.
inline constexpr uint32_t kVersion = 2;
// "WALFSPL1" read as a little-endian u64.
inline constexpr uint64_t kSuperblockMagic = 0x314c5053464c4157ULL;
// "WALFSJNL" read as a little-endian u64.
inline constexpr uint64_t kJournalMagic = 0x4c4e4a53464c4157ULL;

inline constexpr uint64_t kSuperblockOffset[2] = {0, kBlockSize};
inline constexpr uint64_t kJournalOffset = 2 * kBlockSize;
inline constexpr uint64_t kJournalSize = 64 * 1024;
// The journal is two slots of kJournalSlotSize bytes; transaction n is written to slot
// n % 2, so writing one never touches the other, which holds the previous transaction.
// Each slot is whole pages, so in msync mode a write of one dirties no page of the other.
inline constexpr uint64_t kJournalSlots = 2;
inline constexpr uint64_t kJournalSlotSize = kJournalSize / kJournalSlots;
static_assert(kJournalSlotSize % kBlockSize == 0);
// The state block follows the journal; the inode table follows the state block.
inline constexpr uint64_t kStateOffset = kJournalOffset + kJournalSize;
// "WALFSST2" read as a little-endian u64.
inline constexpr uint64_t kStateMagic = 0x32545353464c4157ULL;

inline constexpr uint64_t kMinSegmentSize = 1ULL << 20;  // initdb --wal-segsize range
inline constexpr uint64_t kMaxSegmentSize = 1ULL << 30;
inline constexpr uint64_t kDefaultSegmentSize = 16ULL << 20;
inline constexpr uint32_t kMaxNameLength = 255;
inline constexpr uint64_t kRootInode = 1;

// The byte range of the pool file that direct-access clients read-lock (OFD lock) while
// they map any part of the pool; see core/pool_clients.h. A lock, not data: the bytes
// are the superblock's as usual.
inline constexpr int64_t kClientLockOffset = 0;
inline constexpr int64_t kClientLockLength = 1;

struct Superblock {
  uint64_t magic;
  uint32_t version;
  uint32_t superblock_size;  // sizeof(Superblock) when written
  uint8_t uuid[16];
  // The geometry mkfs wrote, never rewritten: the two copies must agree at open, and
  // two stores cannot change both atomically. A grown pool (walfsctl grow) has a larger
  // data area than data_blocks says: PoolState::data_blocks is the current size, and the
  // pool's current capacity is data_offset + PoolState::data_blocks * block_size.
  uint64_t capacity;  // bytes covered by the layout at mkfs; <= the region's size
  uint64_t block_size;
  uint64_t segment_size;  // extent size given to WAL-segment files at create
  uint64_t journal_offset;
  uint64_t journal_size;
  uint64_t inode_table_offset;
  uint64_t inode_count;  // records in the table, index 0 included
  uint64_t inode_size;
  uint64_t dirent_table_offset;
  uint64_t dirent_count;
  uint64_t dirent_size;
  uint64_t data_offset;
  uint64_t data_blocks;  // at mkfs (PoolState::data_blocks is the current count)
  int64_t created_ns;  // CLOCK_REALTIME at mkfs
  uint8_t reserved[108];
  uint32_t crc;  // CRC-32C of the bytes before it
};
static_assert(sizeof(Superblock) == 256);
static_assert(offsetof(Superblock, crc) == 252);

enum class InodeState : uint8_t {
  kFree = 0,
  kLive = 1,    // reachable through at least one dirent (or the root)
  kOrphan = 2,  // nlink 0: kept while open, then its extents are zeroed and it is freed
};

enum class InodeType : uint8_t {
  kNone = 0,
  kRegular = 1,
  kDirectory = 2,
  kSymlink = 3,
  // Inert inodes (no data, size 0, no extents): what they do is the kernel's (a FIFO's
  // pipe, a socket's binding) or, for devices, would be a driver's, which a walfs mount
  // (nodev) never opens. Devices keep their number in InodeRecord::rdev.
  kFifo = 4,
  kSocket = 5,
  kCharDevice = 6,
  kBlockDevice = 7,
};
inline constexpr uint8_t kMaxInodeType = 7;

// The pool's mutable global state (format v2), at kStateOffset. Changed only through the
// journal, like inode and dirent records (its length tells the journal which it is).
//
// mkfs writes only the superblocks, the journal, this record and the root inode: the
// tables and the data area are initialised lazily, as mke2fs's lazy_itable_init does,
// so formatting takes the same time whatever the size and whatever the region held.
struct PoolState {
  uint32_t crc;  // CRC-32C of bytes [4, sizeof(PoolState)), as records (RecordCrc)
  uint32_t reserved0;
  uint64_t magic;  // kStateMagic
  // Inode slots [inode_high, inode_count) and dirent slots [dirent_high, dirent_count)
  // were never used since mkfs (format invariants above). 2 <= inode_high <= inode_count
  // (slots 0 and 1 are always initialised); dirent_high <= dirent_count.
  uint64_t inode_high;
  uint64_t dirent_high;
  // Data blocks [uninit_begin, uninit_end) were never allocated since mkfs and were not
  // written by it: they may hold anything, no inode owns them, and they are zeroed when
  // first allocated. Empty (begin == end) when mkfs knew the region was zero (a new file)
  // or wrote it (--zero). uninit_begin <= uninit_end <= data_blocks (this record's).
  // Allocation takes blocks from either end of the range (segments from the bottom,
  // other files from the top), so one range describes it.
  uint64_t uninit_begin;
  uint64_t uninit_end;
  // Blocks in the data area now: Superblock::data_blocks at mkfs, raised by walfsctl
  // grow (GrowPool, wal_directory.h) in one journaled commit of this record, so a grow
  // is atomic. Superblock::data_blocks <= data_blocks, and data_offset + data_blocks *
  // kBlockSize fits in the region. Blocks a grow adds are zero, or in the uninitialised
  // range (the grow extends it when it can).
  uint64_t data_blocks;
  uint8_t reserved1[200];
};
static_assert(sizeof(PoolState) == 256);
static_assert(offsetof(PoolState, inode_high) == 16);
static_assert(offsetof(PoolState, data_blocks) == 48);
static_assert(kStateOffset % kBlockSize == 0);

// A run of data blocks: [block, block + count) in data-area block indices.
struct Extent {
  uint64_t block;
  uint64_t count;
};
static_assert(sizeof(Extent) == 16);

inline constexpr uint32_t kInodeSize = 512;
inline constexpr uint32_t kMaxExtents = 26;

// InodeRecord.flags
inline constexpr uint32_t kInodeFlagSegment = 1u << 0;  // got a segment extent at create
// fallocate(FALLOC_FL_KEEP_SIZE) allocated past EOF on purpose: the blocks stay until a
// truncate, instead of being trimmed to the size when the file is closed. Pools written
// before this flag existed simply never have it set.
inline constexpr uint32_t kInodeFlagPreallocated = 1u << 1;

// A symlink's target (size = its length, no NUL byte) up to kMaxSymlinkTarget bytes is
// stored inline in the bytes of `extents` (extent_count 0), so creating one is a single
// metadata transaction. A longer one, up to kMaxSymlinkTargetOutOfLine (PATH_MAX - 1),
// is stored out of line: extent_count 1, extents[0] one data block holding the target
// with zeros after it, the other extents zero. It is created as an orphan owning the
// block (committed), then the target is written and persisted, then the inode is named
// live: a crash in between leaves an orphan that recovery zeroes and frees. So a live
// symlink's target is always complete; an orphan's need not be.
inline constexpr uint32_t kMaxSymlinkTarget = kMaxExtents * sizeof(Extent);
inline constexpr uint32_t kMaxSymlinkTargetOutOfLine = kBlockSize - 1;
static_assert(kMaxSymlinkTarget == 416 && kMaxSymlinkTargetOutOfLine == 4095);

struct InodeRecord {
  uint32_t crc;  // CRC-32C of bytes [4, kInodeSize); all-zero record = free
  InodeState state;
  InodeType type;
  uint16_t reserved0;
  uint64_t generation;  // bumped each time the slot is reused (FUSE generation)
  uint32_t mode;        // permission bits and S_IFMT type bits, as st_mode
  uint32_t uid;
  uint32_t gid;
  uint32_t nlink;
  uint64_t size;  // bytes; <= the sum of extent lengths (files are never sparse)
  int64_t atime_ns;
  int64_t mtime_ns;
  int64_t ctime_ns;
  uint32_t extent_count;
  uint32_t flags;
  uint64_t rdev;  // kCharDevice/kBlockDevice: the device number (Linux dev_t); else 0
  uint8_t reserved1[16];
  Extent extents[kMaxExtents];  // file order: byte 0 is in extents[0]
};
static_assert(sizeof(InodeRecord) == kInodeSize);
static_assert(offsetof(InodeRecord, rdev) == 72);
static_assert(offsetof(InodeRecord, extents) == 96);

inline constexpr uint32_t kDirentSize = 320;

struct DirentRecord {
  uint32_t crc;  // CRC-32C of bytes [4, kDirentSize); all-zero record = free
  uint8_t in_use;  // 1
  InodeType type;  // the child's type, for readdir's d_type
  uint16_t name_length;
  uint64_t parent;  // directory inode
  uint64_t child;   // inode the name refers to
  uint64_t reserved0;
  char name[256];  // name_length bytes, the rest zero
  uint8_t reserved1[32];
};
static_assert(sizeof(DirentRecord) == kDirentSize);
static_assert(offsetof(DirentRecord, name) == 32);

// Each journal slot holds one transaction: a header then `entry_count` entries, each a
// JournalEntry followed by `length` bytes padded to 8. The header's crc covers the header
// (crc taken as zero) and `payload_bytes` bytes of entries. A slot whose header is all
// zero is empty (never written, or taken back after a failed persist). Every entry is a
// whole inode, dirent or state record image, with a valid crc or all zero (a freed slot).
// Of the slots whose crc matches, the one with the higher sequence is the newest
// committed transaction; the other is the one before it.
//
// JournalHeader::flags are facts about the pool as this transaction leaves it. A writer
// that knows no flag writes these bytes as zero, and a reader that knows no flag does
// not read them, so format version 2 holds pools with and without flags alike: a flag
// may only promise, never demand, and a reader ignores bits it does not know.
struct JournalHeader {
  uint64_t magic;
  uint64_t sequence;  // increases by one per transaction; lives in slot sequence % 2
  uint32_t entry_count;
  uint32_t payload_bytes;
  uint32_t flags;  // kJournalFlag*
  uint8_t reserved[32];
  uint32_t crc;
};
static_assert(sizeof(JournalHeader) == 64);
static_assert(offsetof(JournalHeader, flags) == 24);

// Every free data block outside PoolState's uninitialised range (as this transaction
// leaves PoolState) is zero at this commit point, and the writer keeps it so (it stores
// nothing but zeros into free blocks, and frees blocks only by a later commit, after
// their zeros are durable: core/pool_state.h). So the next open need not read free
// space; an open whose newest transaction lacks the flag checks free space outside the
// uninitialised range before handing it out. A pool with no committed transaction is
// as mkfs left it, which keeps the same invariant (its unwritten blocks are the range).
inline constexpr uint32_t kJournalFlagFreeSpaceZero = 1u << 0;

struct JournalEntry {
  uint64_t target_offset;  // pool offset of a whole InodeRecord, DirentRecord or PoolState
  uint32_t length;         // kInodeSize, kDirentSize or sizeof(PoolState)
  uint32_t reserved;
};
static_assert(sizeof(JournalEntry) == 16);

inline constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace walfs::core::format

#endif  // WALFS_CORE_FORMAT_H_
