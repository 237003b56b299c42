// Tests of the record checks shared by pool open and fsck (core/validate.h): each check
// passes a valid record and names each kind of damage; and Open and fsck agree on a
// set of damaged pools.
#include "core/validate.h"

#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/pool_state.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/support/memory_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

namespace f = format;

using testing::FormattedImage;
using testing::OpenImage;

constexpr Caller kUser{1000, 1000};

template <typename T>
T At(const std::string& image, uint64_t offset) {
  T t;
  std::memcpy(&t, image.data() + offset, sizeof(T));
  return t;
}

void SealSuperblock(f::Superblock& sb) { sb.crc = Crc32c(0, &sb, offsetof(f::Superblock, crc)); }

// ---- Superblock ----------------------------------------------------------------------

class SuperblockErrorTest : public ::testing::Test {
 protected:
  SuperblockErrorTest() : image_(FormattedImage()), sb_(At<f::Superblock>(image_, 0)) {}
  // The error for sb_ changed by `damage` (crc resealed unless `reseal` is false).
  std::string ErrorAfter(const std::function<void(f::Superblock&)>& damage,
                         bool reseal = true) const {
    f::Superblock sb = sb_;
    damage(sb);
    if (reseal) SealSuperblock(sb);
    return SuperblockError(sb, image_.size());
  }
  std::string image_;
  f::Superblock sb_;
};

TEST_F(SuperblockErrorTest, ValidSuperblockPasses) {
  EXPECT_EQ(SuperblockError(sb_, image_.size()), "");
  // A region larger than the capacity (a pool file grown for walfsctl grow) is fine.
  EXPECT_EQ(SuperblockError(sb_, image_.size() + (1 << 20)), "");
}

TEST_F(SuperblockErrorTest, EachDamageIsNamed) {
  struct Case {
    const char* expected;
    std::function<void(f::Superblock&)> damage;
    bool reseal = true;
  };
  const Case cases[] = {
      {"all zero (no walfs superblock)", [](f::Superblock& sb) { sb = {}; }, false},
      {"bad magic", [](f::Superblock& sb) { sb.magic ^= 1; }},
      {"unsupported format version 1 (this walfs reads version 2): the pool was made by an "
       "older mkfs.walfs",
       [](f::Superblock& sb) { sb.version = 1; }},
      {"unsupported format version 3 (this walfs reads version 2): the pool was made by a "
       "newer walfs",
       [](f::Superblock& sb) { sb.version = 3; }},
      {"superblock_size is 128, expected 256", [](f::Superblock& sb) { sb.superblock_size = 128; }},
      {"bad crc (stored", [](f::Superblock& sb) { sb.created_ns ^= 1; }, false},
      {"block_size is 8192", [](f::Superblock& sb) { sb.block_size = 8192; }},
      {"segment_size 3145728 is not a power of two",
       [](f::Superblock& sb) { sb.segment_size = 3 << 20; }},
      {"segment_size 524288 is not a power of two",
       [](f::Superblock& sb) { sb.segment_size = 1 << 19; }},
      {"record sizes 256/320", [](f::Superblock& sb) { sb.inode_size = 256; }},
      {"record sizes 512/64", [](f::Superblock& sb) { sb.dirent_size = 64; }},
      {"journal at 4096", [](f::Superblock& sb) { sb.journal_offset = 4096; }},
      {"journal at 8192 (4096 bytes)", [](f::Superblock& sb) { sb.journal_size = 4096; }},
      {"(truncated pool?)", [](f::Superblock& sb) { sb.capacity *= 2; }},
      {"inode_count 0 is not within 2..2^32", [](f::Superblock& sb) { sb.inode_count = 0; }},
      {"inode_count 1 is not within", [](f::Superblock& sb) { sb.inode_count = 1; }},
      {"inode_count 4294967297 is not within",
       [](f::Superblock& sb) { sb.inode_count = (1ULL << 32) + 1; }},
      {"inconsistent geometry: inode_table_offset is",
       [](f::Superblock& sb) { sb.inode_table_offset += f::kBlockSize; }},
      {"inconsistent geometry: dirent_table_offset is",
       [](f::Superblock& sb) { sb.dirent_table_offset -= f::kBlockSize; }},
      {"inconsistent geometry: dirent_count is", [](f::Superblock& sb) { sb.dirent_count += 1; }},
      {"inconsistent geometry: data_offset is",
       [](f::Superblock& sb) { sb.data_offset += f::kBlockSize; }},
      {"inconsistent geometry: data_blocks is", [](f::Superblock& sb) { sb.data_blocks += 1; }},
      {"inconsistent geometry: capacity is", [](f::Superblock& sb) { sb.capacity -= 1; }},
      // More inodes than the capacity leaves room for: metadata, then no data area.
      {"inconsistent geometry: pool of", [](f::Superblock& sb) { sb.inode_count = 1 << 20; }},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorAfter(c.damage, c.reseal);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected \"" << c.expected << "\", got \"" << error << "\"";
  }
}

// ---- State record ------------------------------------------------------------------

TEST(PoolStateErrorTest, EachDamageIsNamed) {
  const std::string image = FormattedImage();
  const f::Superblock sb = At<f::Superblock>(image, 0);
  const f::PoolState good = At<f::PoolState>(image, f::kStateOffset);
  ASSERT_EQ(PoolStateError(good, sb, image.size()), "");
  struct Case {
    const char* expected;
    std::function<void(f::PoolState&)> damage;
    bool reseal = true;
  };
  const Case cases[] = {
      {"all zero (no state record)", [](f::PoolState& s) { s = {}; }, false},
      {"bad magic", [](f::PoolState& s) { s.magic = 7; }},
      {"bad crc (stored", [](f::PoolState& s) { s.dirent_high = 1; }, false},
      {"reserved bytes are not zero", [](f::PoolState& s) { s.reserved1[9] = 1; }},
      {"inode_high 1 is not within 2..256", [](f::PoolState& s) { s.inode_high = 1; }},
      {"inode_high 257 is not within", [](f::PoolState& s) { s.inode_high = 257; }},
      {"dirent_high 513 exceeds the 512 dirent slots", [](f::PoolState& s) { s.dirent_high = 513; }},
      {"is below the superblock's", [](f::PoolState& s) { s.data_blocks -= 1; }},
      {"does not fit in the region", [](f::PoolState& s) { s.data_blocks += 1; }},
      {"does not fit in the region", [](f::PoolState& s) { s.data_blocks = ~0ULL / 2; }},
      {"uninitialised range [5, 4)", [](f::PoolState& s) {
         s.uninit_begin = 5;
         s.uninit_end = 4;
       }},
      {"is not within the", [](f::PoolState& s) { s.uninit_end = s.data_blocks + 1; }},
  };
  for (const Case& c : cases) {
    f::PoolState s = good;
    c.damage(s);
    if (c.reseal) SealPoolState(&s);
    const std::string error = PoolStateError(s, sb, image.size());
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected \"" << c.expected << "\", got \"" << error << "\"";
  }
}

// ---- Inode slots ---------------------------------------------------------------------

class InodeSlotTest : public ::testing::Test {
 protected:
  InodeSlotTest() : image_(FormattedImage()), sb_(At<f::Superblock>(image_, 0)) {}

  static f::InodeRecord Make(f::InodeType type, uint64_t size = 0,
                             std::vector<f::Extent> extents = {},
                             f::InodeState state = f::InodeState::kLive) {
    f::InodeRecord r{};
    r.state = state;
    r.type = type;
    r.generation = 1;
    r.mode = TypeBits(type) | 0644;
    r.nlink = type == f::InodeType::kDirectory ? 2 : 1;
    r.size = size;
    r.extent_count = static_cast<uint32_t>(extents.size());
    for (size_t i = 0; i < extents.size(); ++i) r.extents[i] = extents[i];
    return r;
  }
  static f::InodeRecord Symlink(std::string_view target) {
    f::InodeRecord r = Make(f::InodeType::kSymlink, target.size());
    std::memcpy(r.extents, target.data(), target.size());
    return r;
  }
  // Checks `r` in slot `ino`, its crc sealed unless `seal` is false.
  InodeCheck Check(f::InodeRecord r, uint64_t ino = 5, bool seal = true) const {
    if (seal) r.crc = RecordCrc(&r, sizeof(r));
    return CheckInodeSlot(ino, reinterpret_cast<const char*>(&r), sb_, image_.data());
  }
  // The one problem `r` has, which must contain `expected`.
  void ExpectProblem(const f::InodeRecord& r, std::string_view expected,
                     bool extents_sound, SlotKind kind = SlotKind::kLive) const {
    const InodeCheck c = Check(r);
    EXPECT_EQ(c.kind, kind) << expected;
    ASSERT_EQ(c.problems.size(), 1u) << expected;
    EXPECT_NE(c.problems[0].find(expected), std::string::npos)
        << "expected \"" << expected << "\", got \"" << c.problems[0] << "\"";
    EXPECT_EQ(c.extents_sound, extents_sound) << expected;
  }
  std::string image_;
  f::Superblock sb_;
};

TEST_F(InodeSlotTest, ValidRecordsPass) {
  const std::vector<f::InodeRecord> valid = {
      Make(f::InodeType::kRegular),
      Make(f::InodeType::kRegular, 5000, {{10, 1}, {20, 2}}),
      Make(f::InodeType::kRegular, 3 * f::kBlockSize, {{10, 1}, {20, 2}}),
      Make(f::InodeType::kRegular, 1, {{10, 1}}, f::InodeState::kOrphan),
      Make(f::InodeType::kDirectory, 12345),  // a directory's size is not judged
      Make(f::InodeType::kFifo),
      Make(f::InodeType::kSocket),
      Symlink("target"),
      Symlink(std::string(f::kMaxSymlinkTarget, 'x')),
  };
  for (const auto& r : valid) {
    const InodeCheck c = Check(r);
    EXPECT_TRUE(c.problems.empty()) << static_cast<int>(r.type) << ": " << c.problems[0];
    EXPECT_EQ(c.kind, r.state == f::InodeState::kLive ? SlotKind::kLive : SlotKind::kOrphan);
    EXPECT_EQ(c.type, r.type);
    EXPECT_TRUE(c.extents_sound);
  }
  f::InodeRecord dev = Make(f::InodeType::kCharDevice);
  dev.rdev = 0x0103;
  EXPECT_TRUE(Check(dev).problems.empty());
  // The root: a live directory.
  EXPECT_TRUE(Check(Make(f::InodeType::kDirectory), f::kRootInode).problems.empty());
}

TEST_F(InodeSlotTest, FreeAndReservedSlots) {
  const char zero[f::kInodeSize] = {};
  InodeCheck c = CheckInodeSlot(5, zero, sb_, image_.data());
  EXPECT_EQ(c.kind, SlotKind::kFree);
  EXPECT_TRUE(c.problems.empty());
  c = CheckInodeSlot(0, zero, sb_, image_.data());
  EXPECT_EQ(c.kind, SlotKind::kFree);
  EXPECT_TRUE(c.problems.empty());
  // Slot 0 is reserved: even a valid record there is damage.
  c = Check(Make(f::InodeType::kRegular), 0);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_EQ(c.problems[0], "reserved inode slot 0 is not zero");
  // The root must be a live directory.
  c = CheckInodeSlot(f::kRootInode, zero, sb_, image_.data());
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_EQ(c.problems[0], "the root is not a live directory: its slot is free");
  for (const f::InodeRecord& r :
       {Make(f::InodeType::kRegular), Make(f::InodeType::kDirectory, 0, {}, f::InodeState::kOrphan)}) {
    c = Check(r, f::kRootInode);
    ASSERT_EQ(c.problems.size(), 1u);
    EXPECT_EQ(c.problems[0], "the root is not a live directory");
  }
  // An unusable root: both its damage and that the root is missing.
  c = Check(Make(f::InodeType::kDirectory), f::kRootInode, /*seal=*/false);
  ASSERT_EQ(c.problems.size(), 2u);
  EXPECT_NE(c.problems[0].find("bad crc"), std::string::npos);
  EXPECT_EQ(c.problems[1], "the root is not a live directory");
}

TEST_F(InodeSlotTest, UnusableRecords) {
  f::InodeRecord r = Make(f::InodeType::kRegular);
  InodeCheck c = Check(r, 5, /*seal=*/false);
  EXPECT_EQ(c.kind, SlotKind::kUnusable);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("bad crc (stored 00000000, computed "), std::string::npos);
  EXPECT_FALSE(c.extents_sound);

  r.state = f::InodeState::kFree;
  ExpectProblem(r, "state is free but the record is not zero", false, SlotKind::kUnusable);
  r.state = static_cast<f::InodeState>(9);
  ExpectProblem(r, "invalid state 9", false, SlotKind::kUnusable);
  r = Make(f::InodeType::kRegular);
  r.type = static_cast<f::InodeType>(8);
  ExpectProblem(r, "invalid type 8", false, SlotKind::kUnusable);
  r.type = f::InodeType::kNone;
  ExpectProblem(r, "invalid type 0", false, SlotKind::kUnusable);
}

TEST_F(InodeSlotTest, FieldDamageIsNamed) {
  f::InodeRecord r = Make(f::InodeType::kRegular);
  r.mode = S_IFDIR | 0755;
  ExpectProblem(r, "mode 040755 has file-type bits that disagree with its type (regular file)",
                true);
  for (f::InodeType t : {f::InodeType::kRegular, f::InodeType::kDirectory,
                         f::InodeType::kSymlink, f::InodeType::kFifo}) {
    r = t == f::InodeType::kSymlink ? Symlink("t") : Make(t);
    r.rdev = 259;
    ExpectProblem(r, absl::StrCat("a ", InodeTypeName(t), " has device number 259"), true);
  }
  // Several problems in one record are all named, most fundamental first.
  r = Make(f::InodeType::kRegular, 1 << 20, {{10, 1}});
  r.mode = S_IFIFO;
  r.rdev = 1;
  const InodeCheck c = Check(r);
  ASSERT_EQ(c.problems.size(), 3u);
  EXPECT_NE(c.problems[0].find("mode"), std::string::npos);
  EXPECT_NE(c.problems[1].find("device number"), std::string::npos);
  EXPECT_NE(c.problems[2].find("size 1048576 exceeds the 4096 bytes its extents hold"),
            std::string::npos);
}

TEST_F(InodeSlotTest, FileExtentDamageIsNamed) {
  const uint64_t blocks = sb_.data_blocks;
  f::InodeRecord r = Make(f::InodeType::kRegular, 0, {{10, 1}});
  r.extent_count = f::kMaxExtents + 1;
  InodeCheck c = Check(r);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_EQ(c.problems[0], "extent_count 27 exceeds the maximum of 26");
  EXPECT_FALSE(c.extents_sound);

  ExpectProblem(Make(f::InodeType::kRegular, 0, {{10, 1}, {12, 0}}), "extent 1 is empty", false);
  ExpectProblem(Make(f::InodeType::kRegular, 0, {{blocks, 1}}),
                absl::StrCat("extent 0 (blocks ", blocks, " +1) lies outside the data area of ",
                             blocks, " blocks"),
                false);
  ExpectProblem(Make(f::InodeType::kRegular, 0, {{blocks - 1, 2}}), "lies outside", false);
  ExpectProblem(Make(f::InodeType::kRegular, 0, {{1, ~0ULL}}), "lies outside", false);
  ExpectProblem(Make(f::InodeType::kRegular, 8193, {{10, 1}, {20, 1}}),
                "size 8193 exceeds the 8192 bytes its extents hold", false);
  // Two extents of the same file on one block: named, but the blocks are still its own.
  ExpectProblem(Make(f::InodeType::kRegular, 0, {{20, 4}, {10, 2}, {23, 1}}),
                "extent 2 (blocks 23 +1) overlaps extent 0 (blocks 20 +4) of the same inode",
                true);
  // Adjacent extents do not overlap.
  EXPECT_TRUE(Check(Make(f::InodeType::kRegular, 0, {{20, 4}, {24, 1}})).problems.empty());
}

TEST_F(InodeSlotTest, InertAndDirectoryDamageIsNamed) {
  ExpectProblem(Make(f::InodeType::kDirectory, 0, {{10, 1}}),
                "directory has extent_count 1; directories own no data blocks", false);
  ExpectProblem(Make(f::InodeType::kFifo, 3),
                "a fifo has extent_count 0 and size 3; it holds no data", true);
  ExpectProblem(Make(f::InodeType::kSocket, 0, {{10, 1}}),
                "a socket has extent_count 1 and size 0", false);
}

TEST_F(InodeSlotTest, SymlinkDamageIsNamed) {
  ExpectProblem(Symlink(""), "symlink target length 0 is not within 1..416 (inline)", true);
  f::InodeRecord r = Symlink("abc");
  r.size = f::kMaxSymlinkTarget + 1;
  ExpectProblem(r, "symlink target length 417 is not within 1..416 (inline)", true);
  ExpectProblem(Symlink(std::string("a\0b", 3)), "symlink target contains a NUL byte", true);
  r = Symlink("abc");
  r.extent_count = 2;
  ExpectProblem(r, "symlink has extent_count 2", false);

  // Out of line: one block of the data area, 417..4095 bytes, read from the pool.
  const uint64_t block = 7;
  const uint64_t at = sb_.data_offset + block * f::kBlockSize;
  std::memset(image_.data() + at, 'x', 500);
  f::InodeRecord ool = Make(f::InodeType::kSymlink, 500, {{block, 1}});
  const InodeCheck ok = Check(ool);
  EXPECT_TRUE(ok.problems.empty()) << ok.problems[0];
  r = ool;
  r.size = 416;
  ExpectProblem(r, "symlink target length 416 is not within 417..4095 (out of line)", false);
  r = ool;
  r.extents[0].count = 2;
  ExpectProblem(r, "symlink target block 7 +2 is not one block of the data area", false);
  r = ool;
  r.extents[0].block = sb_.data_blocks;
  ExpectProblem(r, "is not one block of the data area", false);
  image_[at + 100] = '\0';
  ExpectProblem(ool, "symlink target contains a NUL byte", true);
  // An orphan's out-of-line target may never have been written.
  r = ool;
  r.state = f::InodeState::kOrphan;
  EXPECT_TRUE(Check(r).problems.empty());
}

// ---- Directory entries ---------------------------------------------------------------

f::DirentRecord Dirent(uint64_t parent, uint64_t child, std::string_view name,
                       f::InodeType type = f::InodeType::kRegular) {
  f::DirentRecord d{};
  d.in_use = 1;
  d.type = type;
  d.name_length = static_cast<uint16_t>(name.size());
  d.parent = parent;
  d.child = child;
  std::memcpy(d.name, name.data(), name.size());
  d.crc = RecordCrc(&d, sizeof(d));
  return d;
}

TEST(NameErrorTest, NameRules) {
  EXPECT_EQ(NameError("000000010000000000000001"), "");
  EXPECT_EQ(NameError(std::string(f::kMaxNameLength, 'n')), "");
  EXPECT_EQ(NameError("..."), "");
  EXPECT_EQ(NameError(""), "name length 0 is not within 1..255");
  EXPECT_EQ(NameError(std::string(256, 'n')), "name length 256 is not within 1..255");
  EXPECT_EQ(NameError("."), "the name is \".\" or \"..\"");
  EXPECT_EQ(NameError(".."), "the name is \".\" or \"..\"");
  EXPECT_EQ(NameError("a/b"), "the name contains '/'");
  EXPECT_EQ(NameError(std::string("a\0b", 3)), "the name contains a NUL byte");
}

TEST(DirentRecordErrorTest, EachDamageIsNamed) {
  constexpr uint64_t kCount = 64;
  EXPECT_EQ(DirentRecordError(Dirent(1, 2, "f"), kCount), "");
  EXPECT_EQ(DirentRecordError(Dirent(kCount - 1, kCount - 1, "f"), kCount), "");
  struct Case {
    const char* expected;
    std::function<void(f::DirentRecord&)> damage;
    bool reseal = true;
  };
  const Case cases[] = {
      {"bad crc (stored", [](f::DirentRecord& d) { d.name[0] = 'g'; }, false},
      {"in_use is 2, expected 1", [](f::DirentRecord& d) { d.in_use = 2; }},
      {"name_length 0 is not within 1..255", [](f::DirentRecord& d) { d.name_length = 0; }},
      {"name_length 256 is not within", [](f::DirentRecord& d) { d.name_length = 256; }},
      {"the name is \".\" or \"..\"", [](f::DirentRecord& d) { d.name[0] = '.'; }},
      {"the name contains '/'", [](f::DirentRecord& d) {
         d.name_length = 2;
         d.name[1] = '/';
       }},
      {"the name contains a NUL byte", [](f::DirentRecord& d) { d.name_length = 2; }},
      {"bytes after the name are not zero", [](f::DirentRecord& d) { d.name[200] = 'z'; }},
      {"parent 0 or child 2 is not an inode number of this pool (1..63)",
       [](f::DirentRecord& d) { d.parent = 0; }},
      {"parent 1 or child 64 is not an inode number", [](f::DirentRecord& d) { d.child = 64; }},
      {"parent 1 or child 0 is not", [](f::DirentRecord& d) { d.child = 0; }},
      {"parent 18446744073709551615 or child 2", [](f::DirentRecord& d) { d.parent = ~0ULL; }},
  };
  for (const Case& c : cases) {
    f::DirentRecord d = Dirent(1, 2, "f");
    c.damage(d);
    if (c.reseal) d.crc = RecordCrc(&d, sizeof(d));
    const std::string error = DirentRecordError(d, kCount);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected \"" << c.expected << "\", got \"" << error << "\"";
  }
}

TEST(DirentLinkTest, EachRelationIsNamed) {
  using K = DirentLinkCheck::Kind;
  const auto kLive = SlotKind::kLive, kFree = SlotKind::kFree, kOrphan = SlotKind::kOrphan,
             kBad = SlotKind::kUnusable;
  const auto kDir = f::InodeType::kDirectory, kReg = f::InodeType::kRegular,
             kNone = f::InodeType::kNone;
  const f::DirentRecord d = Dirent(3, 4, "f");
  DirentLinkCheck c = CheckDirentLink(d, kLive, kDir, kLive, kReg);
  EXPECT_EQ(c.kind, K::kOk);
  EXPECT_EQ(c.problem, "");
  struct Case {
    f::DirentRecord d;
    SlotKind pk;
    f::InodeType pt;
    SlotKind ck;
    f::InodeType ct;
    K kind;
    const char* problem;
  };
  const Case cases[] = {
      {Dirent(3, f::kRootInode, "r", kDir), kLive, kDir, kLive, kDir, K::kDroppable,
       "it names the root directory, which has no entry"},
      {d, kFree, kNone, kLive, kReg, K::kDroppable, "its directory, inode 3, is free"},
      {d, kLive, kDir, kFree, kNone, K::kDroppable, "it names inode 4, which is free"},
      {d, kBad, kNone, kLive, kReg, K::kBroken, "its directory inode is corrupt"},
      {d, kLive, kDir, kBad, kNone, K::kBroken, "its child inode is corrupt"},
      {d, kLive, kReg, kLive, kReg, K::kBroken, "its parent, inode 3, is not a live directory"},
      {d, kOrphan, kDir, kLive, kReg, K::kBroken, "its parent, inode 3, is not a live directory"},
      {d, kLive, kDir, kOrphan, kReg, K::kBroken, "it names inode 4, an orphan (unlinked) inode"},
      {d, kLive, kDir, kLive, kDir, K::kWrongType, "records type 1 but inode 4 is a directory"},
  };
  for (const Case& k : cases) {
    c = CheckDirentLink(k.d, k.pk, k.pt, k.ck, k.ct);
    EXPECT_EQ(c.kind, k.kind) << k.problem;
    EXPECT_EQ(c.problem, k.problem);
  }
}

// ---- Open and fsck agree -------------------------------------------------------------

// A closed pool holding a file with data (two names), a directory, an inline and an
// out-of-line symlink and a FIFO; its journal empty.
struct Populated {
  std::string image;
  f::Superblock sb;
  uint64_t file = 0, dir = 0, link = 0, long_link = 0, fifo = 0;

  Populated() {
    std::string* bytes = nullptr;
    auto d = OpenImage(FormattedImage(), true, &bytes);
    auto fa = d->names().Create(kRootInode, "f", 0644, kUser, true);
    EXPECT_TRUE(fa.ok());
    file = fa->ino;
    const std::string data(3 * f::kBlockSize + 10, 'd');
    EXPECT_TRUE(d->data().Write(file, 0, {data.data(), data.size()}, false).ok());
    EXPECT_TRUE(d->data().Release(file).ok());
    auto da = d->names().Mkdir(kRootInode, "d", 0755, kUser);
    EXPECT_TRUE(da.ok());
    dir = da->ino;
    EXPECT_TRUE(d->names().Link(file, dir, "g").ok());
    auto la = d->names().Symlink(kRootInode, "l", "target", kUser);
    EXPECT_TRUE(la.ok());
    link = la->ino;
    auto lla = d->names().Symlink(dir, "ll", std::string(600, 't'), kUser);
    EXPECT_TRUE(lla.ok());
    long_link = lla->ino;
    auto pa = d->names().Mknod(kRootInode, "p", S_IFIFO | 0600, 0, kUser);
    EXPECT_TRUE(pa.ok());
    fifo = pa->ino;
    EXPECT_TRUE(d->Close().ok());
    image = *bytes;
    sb = At<f::Superblock>(image, 0);
    // A clean close left every record at home: the journal is emptied so that no
    // transaction image replays over the damage a case makes to a home record.
    std::memset(image.data() + sb.journal_offset, 0, sb.journal_size);
  }

  f::InodeRecord* Inode(std::string& img, uint64_t ino) const {
    return reinterpret_cast<f::InodeRecord*>(img.data() + sb.inode_table_offset +
                                             ino * f::kInodeSize);
  }
  f::DirentRecord* Dirent(std::string& img, std::string_view name) const {
    for (uint64_t i = 0; i < sb.dirent_count; ++i) {
      auto* d = reinterpret_cast<f::DirentRecord*>(img.data() + sb.dirent_table_offset +
                                                   i * f::kDirentSize);
      if (d->in_use == 1 && std::string_view(d->name, d->name_length) == name) return d;
    }
    ADD_FAILURE() << "no entry " << name;
    return nullptr;
  }
};

void Seal(f::InodeRecord* r) { r->crc = RecordCrc(r, sizeof(*r)); }
void Seal(f::DirentRecord* d) { d->crc = RecordCrc(d, sizeof(*d)); }

// fsck errors that Open's checks do not cover, by design: Open reads no free space
// (core/pool_state.h) and, like recovery, ignores a journal slot older than the newest.
bool OpenLeavesIt(const FsckProblem& p) {
  return p.what.find("owned by no inode are not zero") != std::string::npos ||
         p.what.find("older transaction") != std::string::npos;
}

TEST(OpenFsckAgreementTest, DamagedPools) {
  const Populated pool;
  struct Case {
    const char* name;
    std::function<void(std::string&)> damage;
    // Per-record damage: words both Open's refusal and one of fsck's problems contain.
    // Null for cross-record damage, whose wording each side keeps, and for pools Open
    // accepts.
    const char* words;
  };
  const Populated& p = pool;
  const auto sb_field = [&](std::function<void(f::Superblock&)> change) {
    return [&p, change](std::string& img) {
      for (uint64_t off : f::kSuperblockOffset) {
        f::Superblock sb = p.sb;
        change(sb);
        SealSuperblock(sb);
        std::memcpy(img.data() + off, &sb, sizeof(sb));
      }
    };
  };
  const auto inode = [&](uint64_t Populated::*which,
                         std::function<void(f::InodeRecord&)> change, bool seal = true) {
    return [&p, which, change, seal](std::string& img) {
      f::InodeRecord* r = p.Inode(img, p.*which);
      change(*r);
      if (seal) Seal(r);
    };
  };
  const auto dirent = [&](const char* name, std::function<void(f::DirentRecord&)> change,
                          bool seal = true) {
    return [&p, name, change, seal](std::string& img) {
      f::DirentRecord* d = p.Dirent(img, name);
      if (d == nullptr) return;
      change(*d);
      if (seal) Seal(d);
    };
  };
  const uint64_t data_blocks = At<f::PoolState>(p.image, f::kStateOffset).data_blocks;
  const Case cases[] = {
      {"intact", [](std::string&) {}, nullptr},
      {"superblock A crc", [](std::string& img) { img[40] ^= 1; }, "bad crc (stored"},
      {"superblock geometry", sb_field([](f::Superblock& sb) { sb.dirent_count += 2; }),
       "inconsistent geometry: dirent_count is"},
      {"superblock inode count 0", sb_field([](f::Superblock& sb) { sb.inode_count = 0; }),
       "inode_count 0 is not within"},
      {"superblock version", sb_field([](f::Superblock& sb) { sb.version = 3; }),
       "unsupported format version 3"},
      {"state record crc", [](std::string& img) { img[f::kStateOffset + 20] ^= 1; },
       "bad crc (stored"},
      {"state inode_high",
       [](std::string& img) {
         auto* s = reinterpret_cast<f::PoolState*>(img.data() + f::kStateOffset);
         s->inode_high = 1;
         SealPoolState(s);
       },
       "inode_high 1 is not within"},
      {"slot 0", [&p](std::string& img) { img[p.sb.inode_table_offset + 9] = 1; },
       "reserved inode slot 0 is not zero"},
      {"root freed",
       [&p](std::string& img) { std::memset(p.Inode(img, kRootInode), 0, f::kInodeSize); },
       "the root is not a live directory"},
      {"inode crc", inode(&Populated::file, [](f::InodeRecord& r) { r.uid ^= 1; }, false),
       "bad crc (stored"},
      {"inode state",
       inode(&Populated::file, [](f::InodeRecord& r) { r.state = f::InodeState{9}; }),
       "invalid state 9"},
      {"inode type", inode(&Populated::file, [](f::InodeRecord& r) { r.type = f::InodeType{12}; }),
       "invalid type 12"},
      {"inode mode", inode(&Populated::file, [](f::InodeRecord& r) { r.mode = S_IFLNK | 0644; }),
       "has file-type bits that disagree"},
      {"inode rdev", inode(&Populated::dir, [](f::InodeRecord& r) { r.rdev = 5; }),
       "a directory has device number 5"},
      {"extent outside",
       inode(&Populated::file,
             [data_blocks](f::InodeRecord& r) { r.extents[0].block = data_blocks; }),
       "lies outside the data area"},
      {"extent empty", inode(&Populated::file, [](f::InodeRecord& r) { r.extents[0].count = 0; }),
       "is empty"},
      {"extent count", inode(&Populated::file, [](f::InodeRecord& r) { r.extent_count = 27; }),
       "exceeds the maximum of 26"},
      {"extent self-overlap",
       inode(&Populated::file,
             [](f::InodeRecord& r) {
               r.extents[r.extent_count] = r.extents[0];
               ++r.extent_count;
             }),
       "of the same inode"},
      {"size past extents",
       inode(&Populated::file, [](f::InodeRecord& r) { r.size = 1ULL << 40; }),
       "bytes its extents hold"},
      {"directory extents",
       inode(&Populated::dir,
             [](f::InodeRecord& r) {
               r.extent_count = 1;
               r.extents[0] = {0, 1};
             }),
       "directories own no data blocks"},
      {"fifo size", inode(&Populated::fifo, [](f::InodeRecord& r) { r.size = 1; }),
       "it holds no data"},
      {"symlink empty", inode(&Populated::link, [](f::InodeRecord& r) { r.size = 0; }),
       "symlink target length 0"},
      {"symlink NUL",
       inode(&Populated::link, [](f::InodeRecord& r) { reinterpret_cast<char*>(r.extents)[1] = 0; }),
       "symlink target contains a NUL byte"},
      {"long symlink NUL",
       [&p](std::string& img) {
         const f::InodeRecord* r = p.Inode(img, p.long_link);
         img[p.sb.data_offset + r->extents[0].block * f::kBlockSize + 9] = '\0';
       },
       "symlink target contains a NUL byte"},
      {"long symlink short",
       inode(&Populated::long_link, [](f::InodeRecord& r) { r.size = 400; }),
       "is not within 417..4095 (out of line)"},
      {"dirent crc", dirent("l", [](f::DirentRecord& d) { d.child ^= 1; }, false),
       "bad crc (stored"},
      {"dirent in_use", dirent("l", [](f::DirentRecord& d) { d.in_use = 3; }), "in_use is 3"},
      {"dirent dot", dirent("l", [](f::DirentRecord& d) { d.name[0] = '.'; }),
       "the name is \".\" or \"..\""},
      {"dirent slash",
       dirent("g",
              [](f::DirentRecord& d) {
                d.name_length = 2;
                d.name[1] = '/';
              }),
       "the name contains '/'"},
      {"dirent tail", dirent("l", [](f::DirentRecord& d) { d.name[100] = 'x'; }),
       "bytes after the name are not zero"},
      {"dirent child range", dirent("l", [](f::DirentRecord& d) { d.child = 1 << 20; }),
       "is not an inode number of this pool"},
      {"dirent names root", dirent("l", [](f::DirentRecord& d) { d.child = kRootInode; }),
       "it names the root directory"},
      {"dirent names free", dirent("l", [](f::DirentRecord& d) { d.child = 200; }),
       "it names inode 200, which is free"},
      {"dirent parent file",
       [&p](std::string& img) {
         f::DirentRecord* d = p.Dirent(img, "g");
         d->parent = p.file;
         Seal(d);
       },
       "is not a live directory"},
      {"dirent type", dirent("p", [](f::DirentRecord& d) { d.type = f::InodeType::kSocket; }),
       "records type 5 but inode"},
      // Across records: each side words these its own way.
      {"link count", inode(&Populated::file, [](f::InodeRecord& r) { r.nlink = 1; }), nullptr},
      {"duplicate name", dirent("g", [](f::DirentRecord& d) { d.name[0] = 'l'; d.parent = 1; }),
       nullptr},
      {"shared extent",
       [&p](std::string& img) {
         f::InodeRecord* a = p.Inode(img, p.file);
         f::InodeRecord* b = p.Inode(img, p.long_link);
         b->extents[0] = {a->extents[0].block, 1};
         Seal(b);
       },
       nullptr},
      // What Open does not read: both accept... and fsck reports it.
      {"free block scribbled",
       [&p, data_blocks](std::string& img) {
         img[p.sb.data_offset + (data_blocks - 1) * f::kBlockSize + 7] = 1;
       },
       nullptr},
      {"file tail", [&p](std::string& img) {
         const f::InodeRecord* r = p.Inode(img, p.file);
         uint64_t last = 0;
         for (uint32_t i = 0; i < r->extent_count; ++i) {
           last = r->extents[i].block + r->extents[i].count - 1;
         }
         img[p.sb.data_offset + last * f::kBlockSize + f::kBlockSize - 1] = 1;
       },
       nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string img = pool.image;
    c.damage(img);
    MemoryRegion region(img);
    auto report = CheckPool(region, FsckOptions{});
    ASSERT_TRUE(report.ok()) << report.status();
    std::string problems;
    bool covered = false;
    const FsckProblem* same = nullptr;
    for (const FsckProblem& fp : report->problems) {
      absl::StrAppend(&problems, "\n  ", std::string(SeverityName(fp.severity)), " [",
                      fp.where, "] ", fp.what);
      if (fp.severity == FsckProblem::kError && !OpenLeavesIt(fp)) covered = true;
      if (c.words != nullptr && fp.what.find(c.words) != std::string::npos) same = &fp;
    }
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(img));
    const std::string open_says = dir.ok() ? "accepted" : std::string(dir.status().message());
    EXPECT_EQ(!dir.ok(), covered) << "Open: " << open_says << "\nfsck:" << problems;
    if (c.words != nullptr) {
      EXPECT_NE(open_says.find(c.words), std::string::npos) << "Open: " << open_says;
      EXPECT_NE(same, nullptr) << "fsck:" << problems;
    }
    if (std::string_view(c.name) == "intact") {
      EXPECT_TRUE(dir.ok()) << open_says;
      EXPECT_TRUE(report->problems.empty()) << problems;
    }
    if (dir.ok()) {
      EXPECT_TRUE((*dir)->Close().ok());
    }
  }
}

}  // namespace
}  // namespace walfs::core
