// Lazy initialisation (format v2, PoolState): formatting over old bytes, the table
// marks, the uninitialised data range, and free space checked at allocation instead
// of at open.
#include "core/pool_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"
#include "core/fsck.h"
#include "core/journal.h"
#include "core/persistent_region.h"
#include "core/status.h"
#include "core/validate.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::ExpectFsckClean;
using testing::kTestSegment;

constexpr InodeId kRoot = format::kRootInode;
const Caller kUser{1000, 1000};
constexpr char kSegment1[] = "000000010000000000000001";
constexpr char kSegment2[] = "000000010000000000000002";

// A pool formatted lazily over a region full of 0xA5: what mkfs --force over an old
// pool, or mkfs of a device-DAX device, leaves.
std::string LazyImageOverGarbage(uint64_t size = 32 << 20, uint64_t inodes = 256) {
  MemoryRegion region(std::string(size, '\xa5'));
  FormatOptions opts;
  opts.segment_size = kTestSegment;
  opts.inode_count = inodes;
  EXPECT_TRUE(FormatPool(region, opts).ok());
  return region.bytes();
}

format::Superblock SuperblockOf(const std::string& image) {
  format::Superblock sb;
  std::memcpy(&sb, image.data(), sizeof(sb));
  return sb;
}

format::PoolState StateOf(const std::string& image) {
  format::PoolState s;
  std::memcpy(&s, image.data() + format::kStateOffset, sizeof(s));
  return s;
}

// Commits the pool's state record once more as a walfs that knows no journal flags
// writes it (format::kJournalFlagFreeSpaceZero clear), so that the next open checks
// free space as it must for such a pool. `image` is a closed pool's.
void AsAnOlderWalfsLeftIt(std::string& image) {
  MemoryRegion region(image);
  const format::Superblock sb = SuperblockOf(image);
  const JournalContents j = ReadJournal(region.data(), sb);
  Journal journal(region, sb, j.newest < 0 ? 1 : j.slots[j.newest].sequence + 1,
                  /*carry_home_images=*/false);
  Transaction txn;
  txn.PutState(StateOf(image));
  bool done = false;
  ASSERT_TRUE(journal.Commit(txn, &done, /*flags=*/0).ok());
  ASSERT_TRUE(done);
  image = region.bytes();
}

// The newest committed transaction's header flags.
uint32_t NewestFlags(const std::string& image) {
  const JournalContents j = ReadJournal(image.data(), SuperblockOf(image));
  return j.committed() != nullptr ? j.committed()->flags : 0;
}

std::string ReadAll(WalDirectory& d, InodeId ino, uint64_t size) {
  std::string out(size, '\0');
  auto n = d.data().Read(ino, 0, absl::Span<char>(out.data(), out.size()));
  EXPECT_TRUE(n.ok()) << n.status();
  out.resize(n.ok() ? *n : 0);
  return out;
}

std::unique_ptr<WalDirectory> Open(std::string image, std::string** bytes) {
  auto region = std::make_unique<MemoryRegion>(std::move(image), true);
  *bytes = &region->bytes();
  auto dir = WalDirectory::Open(std::move(region));
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? std::move(*dir) : nullptr;
}

TEST(PoolStateTest, FormatWritesOnlyMetadataAndRecordsWhatIsUninitialised) {
  const std::string image = LazyImageOverGarbage();
  const format::Superblock sb = SuperblockOf(image);
  const format::PoolState st = StateOf(image);
  EXPECT_EQ(PoolStateError(st, sb, image.size()), "");
  EXPECT_EQ(st.data_blocks, sb.data_blocks);
  EXPECT_EQ(st.inode_high, 2u);
  EXPECT_EQ(st.dirent_high, 0u);
  EXPECT_EQ(st.uninit_begin, 0u);
  EXPECT_EQ(st.uninit_end, sb.data_blocks);
  // The tables past the root and the whole data area still hold the old bytes.
  EXPECT_EQ(image[sb.inode_table_offset + 2 * format::kInodeSize], '\xa5');
  EXPECT_EQ(image[sb.dirent_table_offset], '\xa5');
  EXPECT_EQ(image[sb.data_offset + 12345], '\xa5');
  EXPECT_EQ(image[sb.capacity - 1], '\xa5');
  ExpectFsckClean(image);
}

TEST(PoolStateTest, ZeroOptionWritesEverythingAndLeavesNothingUninitialised) {
  MemoryRegion region(std::string(32 << 20, '\xa5'));
  FormatOptions opts;
  opts.segment_size = kTestSegment;
  opts.zero_data = true;
  ASSERT_TRUE(FormatPool(region, opts).ok());
  const std::string& image = region.bytes();
  const format::PoolState st = StateOf(image);
  EXPECT_EQ(st.uninit_begin, st.uninit_end);
  const format::Superblock sb = SuperblockOf(image);
  EXPECT_EQ(image.find_first_not_of('\0', sb.inode_table_offset + 2 * format::kInodeSize),
            std::string::npos);
  ExpectFsckClean(image);
}

// Everything a WAL directory does works over an old pool's bytes: fresh table slots and
// uninitialised blocks are zeroed before use, so new files read as zeros, a segment's
// elided zero-fill reads as zeros, and nothing old shows through.
TEST(PoolStateTest, ALazyPoolOverGarbageBehavesAsAZeroedOne) {
  std::string* bytes = nullptr;
  auto dir = Open(LazyImageOverGarbage(), &bytes);
  ASSERT_NE(dir, nullptr);
  auto seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_TRUE(dir->data().Write(seg->ino, 0, Bytes("wal"), false).ok());
  // Zeros past EOF are elided (not stored): they must read as zeros.
  const std::string zeros(kTestSegment - 3, '\0');
  ASSERT_TRUE(dir->data().Write(seg->ino, 3, Bytes(zeros), false).ok());
  EXPECT_EQ(ReadAll(*dir, seg->ino, kTestSegment), "wal" + zeros);
  auto sub = dir->names().Mkdir(kRoot, "archive_status", 0700, kUser);
  ASSERT_TRUE(sub.ok()) << sub.status();
  for (int i = 0; i < 20; ++i) {
    auto f = dir->names().Create(sub->ino, absl::StrCat("f", i, ".ready"), 0600, kUser, true);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(dir->data().Write(f->ino, 0, Bytes(absl::StrCat("x", i)), false).ok());
  }
  auto small = dir->names().Create(kRoot, "history", 0600, kUser, true);
  ASSERT_TRUE(small.ok());
  SetattrRequest grow;
  grow.size = 10000;
  ASSERT_TRUE(dir->names().Setattr(small->ino, grow).ok());
  EXPECT_EQ(ReadAll(*dir, small->ino, 10000), std::string(10000, '\0'));
  ASSERT_TRUE(dir->names().Unlink(sub->ino, "f3.ready").ok());
  ASSERT_TRUE(dir->Close().ok());
  const format::PoolState st = StateOf(*bytes);
  EXPECT_EQ(st.inode_high, 2u + 1 + 1 + 20 + 1);  // reserved+root, segment, dir, 20, history
  EXPECT_GE(st.dirent_high, 23u);
  EXPECT_GT(st.uninit_begin, 0u);  // the segment came from the bottom
  EXPECT_LT(st.uninit_end, SuperblockOf(*bytes).data_blocks);  // small files from the top
  ExpectFsckClean(*bytes);

  // Reopened: the same tree, and a second segment still gets zeros.
  std::string* again = nullptr;
  dir = Open(*bytes, &again);
  ASSERT_NE(dir, nullptr);
  auto f7 = dir->names().Lookup(sub->ino, "f7.ready");
  ASSERT_TRUE(f7.ok());
  EXPECT_EQ(ReadAll(*dir, f7->ino, 2), "x7");
  auto seg2 = dir->names().Create(kRoot, kSegment2, 0600, kUser, true);
  ASSERT_TRUE(seg2.ok());
  ASSERT_TRUE(dir->data().Write(seg2->ino, 0, Bytes(std::string(kTestSegment, '\0')), false).ok());
  EXPECT_EQ(ReadAll(*dir, seg2->ino, kTestSegment), std::string(kTestSegment, '\0'));
  ASSERT_TRUE(dir->Close().ok());
  ExpectFsckClean(*again);
}

// Open no longer reads free space. In a pool whose newest transaction does not say free
// space is zero (an older walfs's), a scribbled free block is found when it is first
// allocated, before it reaches a file (DataLoss naming it, so EIO at the mount), and
// fsck still reports it and --repair zeroes it.
TEST(PoolStateTest, NonZeroFreeSpaceIsRefusedBeforeItIsHandedOut) {
  std::string image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  const format::Superblock sb = SuperblockOf(image);
  // The lowest free block: where the next segment goes.
  const uint64_t off = sb.data_offset + 5 * format::kBlockSize + 100;
  std::memcpy(image.data() + off, "stale", 5);
  std::string* bytes = nullptr;
  auto dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr) << "open must not read free space";
  auto seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_FALSE(seg.ok());
  EXPECT_EQ(seg.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(seg.status().message().find(absl::StrCat(
                "data block 5 (offset ", sb.data_offset + 5 * format::kBlockSize,
                ") is free space but not zero")),
            std::string::npos)
      << seg.status();
  EXPECT_EQ(ErrnoFromStatus(seg.status()), EIO);
  EXPECT_FALSE(dir->names().Lookup(kRoot, kSegment1).ok()) << "nothing was created";
  // Small files come from the top, which is zero: they still work.
  auto f = dir->names().Create(kRoot, "f", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir->data().Write(f->ino, 0, Bytes("ok"), false).ok());
  // Refused again: the block stays unverified.
  EXPECT_EQ(dir->names().Create(kRoot, kSegment1, 0600, kUser, true).status().code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(dir->Close().ok());

  MemoryRegion region(*bytes);
  auto report = CheckPool(region, FsckOptions{});
  ASSERT_TRUE(report.ok());
  bool found = false;
  for (const auto& p : report->problems) found |= p.where == "data blocks 5-5";
  EXPECT_TRUE(found);
  auto repaired = CheckPool(region, FsckOptions{.repair = true});
  ASSERT_TRUE(repaired.ok());
  EXPECT_TRUE(repaired->clean());
  std::string* fixed = nullptr;
  dir = Open(region.bytes(), &fixed);
  ASSERT_NE(dir, nullptr);
  EXPECT_TRUE(dir->names().Create(kRoot, kSegment1, 0600, kUser, true).ok());
  ASSERT_TRUE(dir->Close().ok());
  ExpectFsckClean(*fixed);
}

// Every field of the state record is untrusted: each bad value is refused at open with
// the field named, and fsck --repair rebuilds the record.
TEST(PoolStateTest, BadStateRecordsAreRefusedAndRepaired) {
  struct Case {
    const char* name;
    void (*damage)(format::PoolState&, const format::Superblock&);
    const char* message;
  };
  const Case cases[] = {
      {"magic", [](format::PoolState& s, const format::Superblock&) { s.magic ^= 1; },
       "bad magic"},
      {"inode_high 1", [](format::PoolState& s, const format::Superblock&) { s.inode_high = 1; },
       "inode_high 1 is not within"},
      {"inode_high past the table",
       [](format::PoolState& s, const format::Superblock& sb) {
         s.inode_high = sb.inode_count + 1;
       },
       "is not within 2.."},
      {"dirent_high past the table",
       [](format::PoolState& s, const format::Superblock& sb) {
         s.dirent_high = sb.dirent_count + 1;
       },
       "dirent_high"},
      {"range reversed",
       [](format::PoolState& s, const format::Superblock&) {
         s.uninit_begin = 10;
         s.uninit_end = 5;
       },
       "uninitialised range [10, 5)"},
      {"range past the data area",
       [](format::PoolState& s, const format::Superblock& sb) {
         s.uninit_end = sb.data_blocks + 1;
       },
       "is not within the"},
      {"reserved bytes",
       [](format::PoolState& s, const format::Superblock&) { s.reserved1[7] = 1; },
       "reserved bytes"},
      {"data area below mkfs's",
       [](format::PoolState& s, const format::Superblock& sb) {
         s.data_blocks = sb.data_blocks - 1;
       },
       "is below the superblock's"},
      {"data area past the region (a grown pool's file cut back)",
       [](format::PoolState& s, const format::Superblock& sb) {
         s.data_blocks = sb.data_blocks + 1;
       },
       "does not fit in the region"},
      {"data area size overflows",
       [](format::PoolState& s, const format::Superblock&) { s.data_blocks = ~0ULL / 2; },
       "does not fit in the region"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // Over zeros: a rebuilt record must read every slot that holds anything, so an old
    // pool's leftovers would be reported too (fsck.h).
    std::string image = testing::FormattedImage();
    const format::Superblock sb = SuperblockOf(image);
    format::PoolState st = StateOf(image);
    c.damage(st, sb);
    SealPoolState(&st);
    std::memcpy(image.data() + format::kStateOffset, &st, sizeof(st));
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(dir.status().message().find("state record"), std::string::npos) << dir.status();
    EXPECT_NE(dir.status().message().find(c.message), std::string::npos) << dir.status();

    MemoryRegion region(image);
    auto report = CheckPool(region, FsckOptions{.repair = true});
    ASSERT_TRUE(report.ok());
    bool reported = false;
    for (const auto& p : report->problems) reported |= p.where == "state record" && p.repaired;
    EXPECT_TRUE(reported);
    EXPECT_TRUE(report->clean());
    EXPECT_TRUE(WalDirectory::Open(std::make_unique<MemoryRegion>(region.bytes())).ok());
  }
}

// A state record (with a valid crc) whose uninitialised range covers a file's blocks
// would let an allocation zero the file: refused at open; fsck empties the range.
TEST(PoolStateTest, UninitialisedRangeOverAFileIsRefused) {
  std::string* bytes = nullptr;
  auto dir = Open(testing::FormattedImage(), &bytes);
  auto seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(dir->data().Write(seg->ino, 0, Bytes("data"), false).ok());
  ASSERT_TRUE(dir->Close().ok());
  std::string image = *bytes;
  format::PoolState st = StateOf(image);
  st.uninit_begin = 0;
  st.uninit_end = 3;
  SealPoolState(&st);
  std::memcpy(image.data() + format::kStateOffset, &st, sizeof(st));
  // The journal's last transactions may name the state record: keep them out of the way.
  for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
    std::memset(image.data() + format::kJournalOffset + slot * format::kJournalSlotSize, 0,
                sizeof(format::JournalHeader));
  }
  auto bad = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no file has used since mkfs"), std::string::npos)
      << bad.status();
  MemoryRegion region(image);
  auto report = CheckPool(region, FsckOptions{.repair = true});
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
  std::string* fixed = nullptr;
  dir = Open(region.bytes(), &fixed);
  ASSERT_NE(dir, nullptr);
  auto again = dir->names().Lookup(kRoot, kSegment1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ReadAll(*dir, again->ino, 4), "data");
}

// A version 1 pool (no state block) is refused by open and fsck, saying what to do.
TEST(PoolStateTest, VersionOnePoolsAreRefusedWithAClearMessage) {
  std::string image = testing::FormattedImage();
  format::Superblock sb = SuperblockOf(image);
  sb.version = 1;
  sb.crc = Crc32c(0, &sb, offsetof(format::Superblock, crc));
  for (uint64_t off : format::kSuperblockOffset) {
    std::memcpy(image.data() + off, &sb, sizeof(sb));
  }
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find(
                "unsupported format version 1 (this walfs reads version 2): the pool was "
                "made by an older mkfs.walfs; copy its files out"),
            std::string::npos)
      << dir.status();
  MemoryRegion region(image);
  auto report = CheckPool(region, FsckOptions{});
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->clean());
  bool named = false;
  for (const auto& p : report->problems) {
    named |= p.what.find("unsupported format version 1 (this walfs reads version 2)") !=
             std::string::npos;
  }
  EXPECT_TRUE(named);
}

// The guard itself: verified ranges are read once, uninitialised ones zeroed and cut
// from whichever end the extent touches.
TEST(FreeSpaceGuardTest, VerifiesOnceAndShrinksTheUninitialisedRange) {
  MemoryRegion region(std::string(64 * format::kBlockSize, '\0'));
  std::string& bytes = region.bytes();
  std::memset(bytes.data() + 40 * format::kBlockSize, 0x5a, 24 * format::kBlockSize);
  FreeSpaceGuard g;
  g.Init(40, 64, {{0, 64}});
  EXPECT_EQ(g.unverified_blocks(), 40u);
  ASSERT_TRUE(g.Prepare(region, 0, {0, 8}).ok());
  EXPECT_EQ(g.unverified_blocks(), 32u);
  bytes[5 * format::kBlockSize] = 1;   // a verified-once block is not read again...
  bytes[20 * format::kBlockSize] = 1;  // ...but an unverified one is
  EXPECT_TRUE(g.Prepare(region, 0, {5, 1}).ok());
  auto s = g.Prepare(region, 0, {16, 8});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("data block 20 "), std::string::npos) << s;
  EXPECT_EQ(g.unverified_blocks(), 32u) << "a refused extent changes nothing";
  // From the top of the uninitialised range, then from its bottom.
  ASSERT_TRUE(g.Prepare(region, 0, {60, 4}).ok());
  EXPECT_EQ(g.uninit_end(), 60u);
  ASSERT_TRUE(g.Prepare(region, 0, {38, 4}).ok());
  EXPECT_EQ(g.uninit_begin(), 42u);
  EXPECT_EQ(bytes.find_first_not_of('\0', 38 * format::kBlockSize),
            42 * format::kBlockSize);
  EXPECT_EQ(bytes.find_first_not_of('\0', 60 * format::kBlockSize), std::string::npos);
}

// VerifyAhead walks the unverified free space from the bottom in bounded steps, marks
// what is zero verified (a later Prepare reads nothing there), skips a block that is not
// zero (Prepare still refuses it) and leaves the uninitialised range to Prepare.
TEST(FreeSpaceGuardTest, VerifyAheadMarksZeroSpaceAndLeavesScribblesToPrepare) {
  MemoryRegion region(std::string(64 * format::kBlockSize, '\0'));
  std::string& bytes = region.bytes();
  bytes[13 * format::kBlockSize + 7] = 1;
  FreeSpaceGuard g;
  // Free: [0, 4) and [8, 40), uninitialised [40, 64) (never read by VerifyAhead).
  std::memset(bytes.data() + 40 * format::kBlockSize, 0x5a, 24 * format::kBlockSize);
  g.Init(40, 64, {{0, 4}, {8, 56}});
  EXPECT_EQ(g.unverified_blocks(), 36u);
  EXPECT_EQ(g.VerifyAhead(region, 0, 0), 0u);
  EXPECT_EQ(g.VerifyAhead(region, 0, 3), 3u);  // [0, 3)
  EXPECT_EQ(g.unverified_blocks(), 33u);
  EXPECT_EQ(g.VerifyAhead(region, 0, 3), 1u) << "one run per step";  // [3, 4)
  EXPECT_EQ(g.VerifyAhead(region, 0, 4), 4u);                          // [8, 12)
  EXPECT_EQ(g.VerifyAhead(region, 0, 4), 2u) << "stops past the scribble";  // 12, 13
  EXPECT_EQ(g.unverified_blocks(), 33u - 1 - 4 - 1);
  uint64_t steps = 0, looked = 0;
  while (const uint64_t n = g.VerifyAhead(region, 0, 5)) {
    looked += n;
    ++steps;
  }
  EXPECT_EQ(looked, 40u - 14);
  EXPECT_EQ(steps, 6u);
  EXPECT_EQ(g.unverified_blocks(), 1u) << "only the scribbled block is left";
  EXPECT_EQ(g.VerifyAhead(region, 0, 64), 0u) << "nothing is looked at twice";
  // Verified space is not read again: a later scribble there is not Prepare's to find
  // (as for space verified by an allocation); the skipped block is still refused.
  bytes[20 * format::kBlockSize] = 1;
  EXPECT_TRUE(g.Prepare(region, 0, {16, 8}).ok());
  auto s = g.Prepare(region, 0, {12, 2});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("data block 13 "), std::string::npos) << s;
  EXPECT_EQ(g.uninit_begin(), 40u);
  EXPECT_EQ(g.uninit_end(), 64u);
}

// Through the directory: space verified ahead is handed out without a read, and a
// scribble found ahead is still refused when allocated.
TEST(PoolStateTest, FreeSpaceVerifiedAheadIsHandedOutAndScribblesStillRefused) {
  std::string image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  const format::Superblock sb = SuperblockOf(image);
  std::string* bytes = nullptr;
  auto dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  uint64_t looked = 0;
  while (const uint64_t n = dir->VerifyFreeSpaceAhead(64)) looked += n;
  EXPECT_GT(looked, kTestSegment / format::kBlockSize);
  // What would have been refused, had it been read at allocation: the guard trusts the
  // blocks it verified ahead, as it trusts blocks it verified at an allocation.
  std::memcpy(bytes->data() + sb.data_offset + 5 * format::kBlockSize, "late", 4);
  auto seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_TRUE(dir->Close().ok());

  image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  std::memcpy(image.data() + sb.data_offset + 5 * format::kBlockSize + 100, "stale", 5);
  dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  while (dir->VerifyFreeSpaceAhead(64) != 0) {
  }
  seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_FALSE(seg.ok());
  EXPECT_EQ(seg.status().code(), absl::StatusCode::kDataLoss) << seg.status();
  ASSERT_TRUE(dir->Close().ok());
}

// Over a pool file, FreeSpaceGuard reads only what may hold data (holes read as zeros)
// and still refuses a scribble in it.
TEST(FreeSpaceGuardTest, OverAFileSkipsHolesAndStillRefusesDataThatIsNotZero) {
  char dir[] = "/tmp/walfs_guard_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/pool";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 64 * format::kBlockSize), 0);
  const std::string zeros(format::kBlockSize, '\0'), scribble(format::kBlockSize, 's');
  // Block 10 was written with zeros (data, but zero); block 20 was scribbled on.
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 10 * format::kBlockSize),
            static_cast<ssize_t>(zeros.size()));
  ASSERT_EQ(::pwrite(fd, scribble.data(), scribble.size(), 20 * format::kBlockSize),
            static_cast<ssize_t>(scribble.size()));
  ::close(fd);
  {
    absl::StatusOr<std::unique_ptr<PersistentRegion>> region = OpenPmemRegion(path, {});
    ASSERT_TRUE(region.ok()) << region.status();
    FreeSpaceGuard g;
    g.Init(0, 0, {{0, 64}});
    EXPECT_TRUE(g.Prepare(**region, 0, {0, 16}).ok());
    EXPECT_TRUE(g.Prepare(**region, 0, {30, 34}).ok());
    const absl::Status s = g.Prepare(**region, 0, {16, 8});
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("data block 20 "), std::string::npos) << s;
    EXPECT_EQ(g.unverified_blocks(), 14u);
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
}

// A pool only this walfs wrote (or mkfs's, nothing committed yet) is trusted at open:
// nothing to verify, every commit says free space is zero, and so does the newest
// transaction after a clean close. fsck still reads free space, and says that a block
// it finds not zero there was not written by walfs.
TEST(PoolStateTest, FreeSpaceIsTrustedWhenTheNewestTransactionSaysItIsZero) {
  std::string image = testing::FormattedImage();
  EXPECT_EQ(ReadJournal(image.data(), SuperblockOf(image)).newest, -1);
  std::string* bytes = nullptr;
  auto dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_TRUE(dir->FreeSpaceKnownZero()) << "nothing committed since mkfs";
  EXPECT_EQ(dir->VerifyFreeSpaceAhead(64), 0u);
  auto seg = dir->names().Create(kRoot, kSegment1, 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ(NewestFlags(*bytes), format::kJournalFlagFreeSpaceZero);
  ASSERT_TRUE(dir->data().Write(seg->ino, 0, Bytes("wal"), false).ok());
  ASSERT_TRUE(dir->names().Unlink(kRoot, kSegment1).ok());
  dir->names().Forget(seg->ino, 1);  // reclaimed: zeroed, then freed by a commit
  auto f = dir->names().Create(kRoot, "f", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir->Close().ok());
  image = *bytes;
  EXPECT_EQ(NewestFlags(image), format::kJournalFlagFreeSpaceZero);
  ExpectFsckClean(image);

  dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_TRUE(dir->FreeSpaceKnownZero());
  EXPECT_EQ(dir->VerifyFreeSpaceAhead(64), 0u);
  ASSERT_TRUE(dir->Close().ok());

  // Something other than walfs writes into free space: fsck reports it and why it
  // matters.
  const format::Superblock sb = SuperblockOf(image);
  std::memcpy(image.data() + sb.data_offset + 7 * format::kBlockSize, "stray", 5);
  MemoryRegion region(image);
  auto report = CheckPool(region, FsckOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->free_space_trusted);
  EXPECT_EQ(report->journal_flags, format::kJournalFlagFreeSpaceZero);
  bool found = false;
  for (const auto& p : report->problems) {
    found |= p.where == "data blocks 7-7" &&
             p.what.find("although the journal says walfs kept free space zero") !=
                 std::string::npos;
  }
  EXPECT_TRUE(found);
}

// A pool an older walfs left is verified (here ahead of allocation, as the daemon does),
// then trusted: the next commit says so, and a clean close commits once more to say so
// when nothing else did. Until all of it is verified, commits do not say so.
TEST(PoolStateTest, FreeSpaceOfAnOlderWalfsPoolIsVerifiedOnceThenTrusted) {
  std::string image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  {
    MemoryRegion region(image);
    auto report = CheckPool(region, FsckOptions{});
    ASSERT_TRUE(report.ok());
    EXPECT_FALSE(report->free_space_trusted);
  }
  std::string* bytes = nullptr;
  auto dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_FALSE(dir->FreeSpaceKnownZero());
  auto f = dir->names().Create(kRoot, "f", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(NewestFlags(*bytes), 0u) << "not verified yet";
  uint64_t looked = 0;
  while (const uint64_t n = dir->VerifyFreeSpaceAhead(100)) looked += n;
  EXPECT_GT(looked, 0u);
  EXPECT_TRUE(dir->FreeSpaceKnownZero());
  EXPECT_EQ(NewestFlags(*bytes), 0u) << "verification alone commits nothing";
  ASSERT_TRUE(dir->Close().ok());
  image = *bytes;
  EXPECT_EQ(NewestFlags(image), format::kJournalFlagFreeSpaceZero) << "the close says so";
  ExpectFsckClean(image);
  dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_TRUE(dir->FreeSpaceKnownZero());
  EXPECT_EQ(dir->VerifyFreeSpaceAhead(64), 0u);
  ASSERT_TRUE(dir->Close().ok());

  // Not all verified (a short mount): the close does not say so, the next open checks.
  image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_GT(dir->VerifyFreeSpaceAhead(16), 0u);
  EXPECT_FALSE(dir->FreeSpaceKnownZero());
  ASSERT_TRUE(dir->Close().ok());
  EXPECT_EQ(NewestFlags(*bytes), 0u);
  dir = Open(*bytes, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_FALSE(dir->FreeSpaceKnownZero());
  ASSERT_TRUE(dir->Close().ok());
}

// A block found not zero keeps free space untrusted, across closes, until fsck repairs
// it: no commit says free space is zero while it is there.
TEST(PoolStateTest, AScribbleKeepsFreeSpaceUntrustedUntilRepaired) {
  std::string image = testing::FormattedImage();
  AsAnOlderWalfsLeftIt(image);
  const format::Superblock sb = SuperblockOf(image);
  std::memcpy(image.data() + sb.data_offset + 9 * format::kBlockSize + 1, "x", 1);
  std::string* bytes = nullptr;
  auto dir = Open(image, &bytes);
  ASSERT_NE(dir, nullptr);
  while (dir->VerifyFreeSpaceAhead(64) != 0) {
  }
  EXPECT_FALSE(dir->FreeSpaceKnownZero());
  auto f = dir->names().Create(kRoot, "f", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir->Close().ok());
  EXPECT_EQ(NewestFlags(*bytes), 0u);
  dir = Open(*bytes, &bytes);
  ASSERT_NE(dir, nullptr);
  EXPECT_FALSE(dir->FreeSpaceKnownZero());
  EXPECT_EQ(dir->names().Create(kRoot, kSegment1, 0600, kUser, true).status().code(),
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(dir->Close().ok());

  MemoryRegion region(*bytes);
  auto repaired = CheckPool(region, FsckOptions{.repair = true});
  ASSERT_TRUE(repaired.ok());
  EXPECT_TRUE(repaired->clean());
  dir = Open(region.bytes(), &bytes);
  ASSERT_NE(dir, nullptr);
  while (dir->VerifyFreeSpaceAhead(64) != 0) {
  }
  EXPECT_TRUE(dir->FreeSpaceKnownZero());
  EXPECT_TRUE(dir->names().Create(kRoot, kSegment1, 0600, kUser, true).ok());
  ASSERT_TRUE(dir->Close().ok());
  EXPECT_EQ(NewestFlags(*bytes), format::kJournalFlagFreeSpaceZero);
}

// The verification ahead reads without the lock: blocks an allocation took (and
// verified) between NextAhead and AheadDone are not its to mark, and a bad block that
// was taken meanwhile does not hide the rest of the step from the next one.
TEST(FreeSpaceGuardTest, AheadStepsLeaveBlocksTakenWhileTheyWereRead) {
  MemoryRegion region(64 * format::kBlockSize);
  FreeSpaceGuard g;
  g.Init(0, 0, {{0, 64}});
  FreeSpaceGuard::Span span = g.NextAhead(32);
  EXPECT_EQ(span.begin, 0u);
  EXPECT_EQ(span.end, 32u);
  EXPECT_TRUE(g.NextAhead(0).empty());
  // An allocation of [4, 12) verifies it under the lock meanwhile.
  ASSERT_TRUE(g.Prepare(region, 0, {4, 8}).ok());
  EXPECT_EQ(g.unverified_blocks(), 56u);
  // The read saw block 6 written (by the allocation's owner) and stopped there.
  g.AheadDone(span, 6);
  EXPECT_EQ(g.unverified_blocks(), 52u) << "[0, 4) marked; [12, 32) not read yet";
  span = g.NextAhead(64);
  EXPECT_EQ(span.begin, 12u) << "resumes past the taken block, not at the next run";
  EXPECT_EQ(span.end, 64u);
  g.AheadDone(span, FreeSpaceGuard::FirstNonZero(region, 0, span.begin, span.end));
  EXPECT_EQ(g.unverified_blocks(), 0u);
  EXPECT_TRUE(g.NextAhead(64).empty());
}

}  // namespace
}  // namespace walfs::core
