// Journal: which slot recovery applies, and the msync-mode carrying of home images.
#include "core/journal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"
#include "tests/support/recording_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

namespace f = format;

constexpr Caller kUser{1000, 1000};

f::Superblock SuperblockOf(const std::string& image) {
  f::Superblock sb;
  std::memcpy(&sb, image.data(), sizeof(sb));
  return sb;
}

// An inode record image distinct per `tag` (a valid crc, as Transaction computes it).
f::InodeRecord Inode(uint64_t tag) {
  f::InodeRecord r{};
  r.state = f::InodeState::kLive;
  r.type = f::InodeType::kRegular;
  r.mode = 0100600;
  r.nlink = 1;
  r.generation = tag;
  return r;
}

uint64_t InodeOffset(const f::Superblock& sb, uint64_t ino) {
  return sb.inode_table_offset + ino * f::kInodeSize;
}

class JournalReplayTest : public ::testing::Test {
 protected:
  JournalReplayTest() : region_(testing::FormattedImage(4 << 20, 64)) {
    sb_ = SuperblockOf(region_.bytes());
  }
  // Commits one transaction writing inode `ino` with tag `tag`; returns its sequence.
  void CommitInode(Journal& j, uint64_t ino, uint64_t tag) {
    Transaction txn;
    txn.PutInode(sb_, ino, Inode(tag));
    bool committed = false;
    ASSERT_TRUE(j.Commit(txn, &committed).ok());
    ASSERT_TRUE(committed);
  }
  // A transaction with a valid crc, written by hand into `slot`: `copies` entries of
  // `image` at `target`, then `trailing` zero bytes.
  void WriteSlot(uint64_t slot, uint64_t sequence, uint64_t target, const std::string& image,
                 uint32_t copies = 1, size_t trailing = 0) {
    std::string payload;
    for (uint32_t i = 0; i < copies; ++i) {
      f::JournalEntry e{target, static_cast<uint32_t>(image.size()), 0};
      payload.append(reinterpret_cast<const char*>(&e), sizeof(e));
      payload.append(image);
      payload.resize(f::AlignUp(payload.size(), 8), '\0');
    }
    payload.append(trailing, '\0');
    f::JournalHeader h{};
    h.magic = f::kJournalMagic;
    h.sequence = sequence;
    h.entry_count = copies;
    h.payload_bytes = static_cast<uint32_t>(payload.size());
    h.crc = Crc32c(Crc32c(0, &h, sizeof(h)), payload.data(), payload.size());
    const uint64_t at = JournalSlotOffset(sb_, slot);
    region_.bytes().replace(at, sizeof(h), reinterpret_cast<const char*>(&h), sizeof(h));
    region_.bytes().replace(at + sizeof(h), payload.size(), payload);
  }
  uint64_t TagOf(const std::string& image) {
    f::InodeRecord r;
    std::memcpy(&r, image.data(), sizeof(r));
    return r.generation;
  }

  MemoryRegion region_;
  f::Superblock sb_;
};

TEST_F(JournalReplayTest, BothSlotsEmptyReplaysNothing) {
  // mkfs leaves the journal zero (FormatPool zeroes it).
  auto r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->replayed);
  EXPECT_FALSE(r->torn);
  EXPECT_EQ(r->sequence, 0u);
  const JournalContents j = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(j.newest, -1);
  EXPECT_EQ(j.committed(), nullptr);
}

TEST_F(JournalReplayTest, TransactionsAlternateSlotsAndTheNewestWins) {
  Journal j(region_, sb_, 1, /*carry_home_images=*/false);
  CommitInode(j, 5, 100);  // sequence 1: slot 1
  CommitInode(j, 6, 200);  // sequence 2: slot 0
  const JournalContents c = ReadJournal(region_.data(), sb_);
  ASSERT_EQ(c.slots[0].state, JournalSlot::State::kValid);
  ASSERT_EQ(c.slots[1].state, JournalSlot::State::kValid);
  EXPECT_EQ(c.slots[0].sequence, 2u);
  EXPECT_EQ(c.slots[1].sequence, 1u);
  EXPECT_EQ(c.newest, 0);
  auto r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->replayed);
  EXPECT_EQ(r->sequence, 2u);
  ASSERT_EQ(r->images.size(), 1u);
  EXPECT_EQ(r->images[0].first, InodeOffset(sb_, 6));
  EXPECT_EQ(TagOf(r->images[0].second), 200u);

  // The next one goes to slot 1 and becomes the newest.
  CommitInode(j, 7, 300);
  r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 3u);
  EXPECT_EQ(TagOf(r->images[0].second), 300u);
}

// Header flags: what Commit is given is what ParseJournalSlot and Replay read back, per
// transaction; bits this walfs does not know are read as they are (and ignored by
// Pool); a header written before flags existed (reserved bytes, zero) reads as none.
TEST_F(JournalReplayTest, HeaderFlagsAreWrittenPerTransactionAndReadBack) {
  Journal j(region_, sb_, 1, /*carry_home_images=*/false);
  Transaction t;
  t.PutInode(sb_, 5, Inode(100));
  bool done = false;
  ASSERT_TRUE(j.Commit(t, &done, f::kJournalFlagFreeSpaceZero | 0x80000000u).ok());
  ASSERT_TRUE(done);
  JournalContents c = ReadJournal(region_.data(), sb_);
  ASSERT_NE(c.committed(), nullptr);
  EXPECT_EQ(c.committed()->flags, f::kJournalFlagFreeSpaceZero | 0x80000000u);
  auto r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->flags, f::kJournalFlagFreeSpaceZero | 0x80000000u);

  // The next transaction carries its own flags, none here.
  ASSERT_TRUE(j.Commit(t, &done).ok());
  r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 2u);
  EXPECT_EQ(r->flags, 0u);

  // An empty transaction writes nothing: the newest header keeps its flags.
  ASSERT_TRUE(j.Commit(Transaction{}, &done, f::kJournalFlagFreeSpaceZero).ok());
  EXPECT_TRUE(done);
  r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 2u);
  EXPECT_EQ(r->flags, 0u);

  // A slot written field by field as before flags existed.
  f::InodeRecord rec = Inode(300);
  rec.crc = RecordCrc(&rec, sizeof(rec));
  WriteSlot(1, 3, InodeOffset(sb_, 5), std::string(reinterpret_cast<const char*>(&rec), sizeof(rec)));
  r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 3u);
  EXPECT_EQ(r->flags, 0u);
}

TEST_F(JournalReplayTest, TornNewestFallsBackToTheOtherSlot) {
  Journal j(region_, sb_, 1, /*carry_home_images=*/false);
  CommitInode(j, 5, 100);  // slot 1
  CommitInode(j, 6, 200);  // slot 0
  // The write of transaction 2 torn: a payload byte did not reach the media.
  region_.bytes()[JournalSlotOffset(sb_, 0) + sizeof(f::JournalHeader) + 40] ^= 0x5a;
  const JournalContents c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kTorn);
  EXPECT_EQ(c.newest, 1);
  auto r = Journal::Replay(region_, sb_, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->replayed);
  EXPECT_TRUE(r->torn);
  EXPECT_EQ(r->sequence, 1u);
  ASSERT_EQ(r->images.size(), 1u);
  EXPECT_EQ(TagOf(r->images[0].second), 100u);
  // Recovery continues after the transaction it applied: the next one is sequence 2
  // again, written over the torn slot 0, while slot 1 keeps transaction 1.
  Journal next(region_, sb_, r->sequence + 1, false);
  CommitInode(next, 8, 400);
  r = Journal::Replay(region_, sb_, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 2u);
  EXPECT_EQ(TagOf(r->images[0].second), 400u);
}

TEST_F(JournalReplayTest, GarbageWithAValidCrcInTheOlderSlotIsIgnored) {
  Journal j(region_, sb_, 1, /*carry_home_images=*/false);
  CommitInode(j, 5, 100);  // slot 1
  CommitInode(j, 6, 200);  // slot 0
  // Slot 1 now holds a crc-valid "transaction 1" aimed at the data area.
  WriteSlot(1, 1, sb_.data_offset, std::string(f::kInodeSize, '\0'));
  const JournalContents c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[1].state, JournalSlot::State::kInvalid);
  EXPECT_NE(c.slots[1].error.find("outside the inode and dirent tables"), std::string::npos)
      << c.slots[1].error;
  auto r = Journal::Replay(region_, sb_, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 2u);
  EXPECT_EQ(TagOf(r->images[0].second), 200u);
}

TEST_F(JournalReplayTest, GarbageWithAValidCrcAsTheNewestIsRefused) {
  Journal j(region_, sb_, 1, /*carry_home_images=*/false);
  CommitInode(j, 5, 100);  // slot 1
  WriteSlot(0, 2, sb_.data_offset, std::string(f::kInodeSize, '\0'));
  auto r = Journal::Replay(region_, sb_, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("slot 0"), std::string::npos) << r.status();
}

TEST_F(JournalReplayTest, OnlyWhatCommitWritesIsValid) {
  f::InodeRecord rec = Inode(9);
  rec.crc = RecordCrc(&rec, sizeof(rec));
  const std::string good(reinterpret_cast<const char*>(&rec), sizeof(rec));
  WriteSlot(0, 3, InodeOffset(sb_, 4), good);  // odd sequence in slot 0
  JournalContents c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kInvalid);
  EXPECT_NE(c.slots[0].error.find("does not belong in slot 0"), std::string::npos);

  std::string bad = good;
  bad[100] ^= 1;  // the record's own crc no longer matches
  WriteSlot(0, 4, InodeOffset(sb_, 4), bad);
  c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kInvalid);
  EXPECT_NE(c.slots[0].error.find("bad crc"), std::string::npos) << c.slots[0].error;

  WriteSlot(0, 4, InodeOffset(sb_, 4), good, /*copies=*/2);
  c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kInvalid);
  EXPECT_NE(c.slots[0].error.find("an earlier entry names too"), std::string::npos)
      << c.slots[0].error;

  WriteSlot(0, 4, InodeOffset(sb_, 4), good, 1, /*trailing=*/8);
  c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kInvalid);
  EXPECT_NE(c.slots[0].error.find("8 bytes after its last entry"), std::string::npos)
      << c.slots[0].error;

  WriteSlot(0, 4, InodeOffset(sb_, 4), good);
  c = ReadJournal(region_.data(), sb_);
  EXPECT_EQ(c.slots[0].state, JournalSlot::State::kValid) << c.slots[0].error;
  ASSERT_EQ(c.slots[0].images.size(), 1u);
  EXPECT_EQ(c.slots[0].images[0].second, good);
}

// msync mode: one persist (one msync) per commit; the home images ride in later
// transactions until a persist of their span.
class JournalCarryTest : public ::testing::Test {
 protected:
  JournalCarryTest() : region_(testing::FormattedImage(4 << 20, 64), /*pmem_semantics=*/false) {
    sb_ = SuperblockOf(region_.DurableImage());
  }
  void CommitInode(Journal& j, uint64_t ino, uint64_t tag) {
    Transaction txn;
    txn.PutInode(sb_, ino, Inode(tag));
    bool committed = false;
    ASSERT_TRUE(j.Commit(txn, &committed).ok());
    ASSERT_TRUE(committed);
  }
  // What recovery makes of the durable image: inode `ino`'s tag after replay.
  uint64_t RecoveredTag(uint64_t ino) {
    MemoryRegion crashed(region_.DurableImage());
    auto r = Journal::Replay(crashed, sb_, true);
    EXPECT_TRUE(r.ok()) << r.status();
    f::InodeRecord rec;
    std::memcpy(&rec, crashed.data() + InodeOffset(sb_, ino), sizeof(rec));
    return rec.generation;
  }

  RecordingRegion region_;
  f::Superblock sb_;
};

TEST_F(JournalCarryTest, OneMsyncPerCommitAndTheNewestSlotHoldsEveryUnpersistedImage) {
  Journal j(region_, sb_, 1);  // carries: the region is not pmem
  const uint64_t points = region_.durability_points();
  CommitInode(j, 5, 100);
  CommitInode(j, 6, 200);
  CommitInode(j, 5, 300);  // replaces the carried image of inode 5
  EXPECT_EQ(region_.durability_points() - points, 3u);
  EXPECT_EQ(j.carried(), 2u);
  // The home records are not durable, the newest slot names both.
  const JournalContents c = ReadJournal(region_.DurableImage().data(), sb_);
  ASSERT_NE(c.committed(), nullptr);
  EXPECT_EQ(c.committed()->sequence, 3u);
  EXPECT_EQ(c.committed()->images.size(), 2u);
  EXPECT_EQ(RecoveredTag(5), 300u);
  EXPECT_EQ(RecoveredTag(6), 200u);
  // Had the newest slot been torn, the other one holds the state before it.
  std::string torn = region_.DurableImage();
  torn[JournalSlotOffset(sb_, 1) + sizeof(f::JournalHeader) + 20] ^= 1;
  MemoryRegion crashed(torn);
  auto r = Journal::Replay(crashed, sb_, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequence, 2u);
  f::InodeRecord rec;
  std::memcpy(&rec, crashed.data() + InodeOffset(sb_, 5), sizeof(rec));
  EXPECT_EQ(rec.generation, 100u);
  std::memcpy(&rec, crashed.data() + InodeOffset(sb_, 6), sizeof(rec));
  EXPECT_EQ(rec.generation, 200u);
}

TEST_F(JournalCarryTest, SyncPersistsTheCarriedImagesAtHome) {
  Journal j(region_, sb_, 1);
  CommitInode(j, 5, 100);
  CommitInode(j, 6, 200);
  const uint64_t points = region_.durability_points();
  ASSERT_TRUE(j.Sync().ok());
  EXPECT_EQ(region_.durability_points() - points, 1u);  // one msync of their span
  EXPECT_EQ(j.carried(), 0u);
  // Durable at home without the journal's help.
  std::string image = region_.DurableImage();
  f::InodeRecord rec;
  std::memcpy(&rec, image.data() + InodeOffset(sb_, 5), sizeof(rec));
  EXPECT_EQ(rec.generation, 100u);
  std::memcpy(&rec, image.data() + InodeOffset(sb_, 6), sizeof(rec));
  EXPECT_EQ(rec.generation, 200u);
  // Nothing left to do: Sync again persists nothing.
  ASSERT_TRUE(j.Sync().ok());
  EXPECT_EQ(region_.durability_points() - points, 1u);
}

TEST_F(JournalCarryTest, CarriedImagesArePersistedWithTheCommitThatPassesTheLimit) {
  Journal j(region_, sb_, 1);
  // Each inode image adds 528 bytes to the journal image.
  const size_t fit = (Journal::kCarryLimit - sizeof(f::JournalHeader)) /
                     (sizeof(f::JournalEntry) + f::kInodeSize);
  for (uint64_t i = 0; i < fit; ++i) CommitInode(j, 2 + i, 1000 + i);
  EXPECT_EQ(j.carried(), fit);
  const uint64_t points = region_.durability_points();
  CommitInode(j, 2 + fit, 5000);
  // One msync for the journal slot and the carried span together; the new image is
  // carried alone.
  EXPECT_EQ(region_.durability_points() - points, 1u);
  EXPECT_EQ(j.carried(), 1u);
  // The carried images are durable at home, without the journal's help.
  const std::string image = region_.DurableImage();
  for (uint64_t i = 0; i < fit; ++i) {
    f::InodeRecord rec;
    std::memcpy(&rec, image.data() + InodeOffset(sb_, 2 + i), sizeof(rec));
    EXPECT_EQ(rec.generation, 1000u + i) << "inode " << 2 + i;
  }
  EXPECT_EQ(RecoveredTag(2), 1000u);
  EXPECT_EQ(RecoveredTag(2 + fit), 5000u);
  // The slot written by that commit repeats them all, and the one before names them
  // too: had the new slot been torn, recovery would find them in the other.
  const JournalContents c = ReadJournal(image.data(), sb_);
  ASSERT_NE(c.committed(), nullptr);
  EXPECT_EQ(c.committed()->images.size(), fit + 1);
  const JournalSlot& before = c.slots[1 - c.newest];
  ASSERT_EQ(before.state, JournalSlot::State::kValid);
  EXPECT_EQ(before.images.size(), fit);
  // The next commit repeats only what is carried now.
  CommitInode(j, 2, 6000);
  const JournalContents next = ReadJournal(region_.DurableImage().data(), sb_);
  ASSERT_NE(next.committed(), nullptr);
  EXPECT_EQ(next.committed()->images.size(), 2u);
  EXPECT_EQ(RecoveredTag(2), 6000u);
  EXPECT_EQ(RecoveredTag(3), 1001u);
}

TEST_F(JournalCarryTest, PmemPersistsHomeImagesAtEveryCommit) {
  RecordingRegion pmem(testing::FormattedImage(4 << 20, 64), /*pmem_semantics=*/true);
  Journal j(pmem, sb_, 1);
  Transaction txn;
  txn.PutInode(sb_, 5, Inode(100));
  bool committed = false;
  ASSERT_TRUE(j.Commit(txn, &committed).ok());
  EXPECT_EQ(j.carried(), 0u);
  f::InodeRecord rec;
  std::memcpy(&rec, pmem.DurableImage().data() + InodeOffset(sb_, 5), sizeof(rec));
  EXPECT_EQ(rec.generation, 100u);
}

// A clean close leaves the home records complete: a pool whose journal is then lost
// (both slot headers zeroed) still holds every file.
TEST(JournalSyncAtCloseTest, CleanCloseInMsyncModeLeavesHomeRecordsDurable) {
  auto owned = std::make_unique<RecordingRegion>(testing::FormattedImage(8 << 20, 64),
                                                 /*pmem_semantics=*/false);
  RecordingRegion* region = owned.get();
  auto dir = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE((*dir)->names().Create(kRootInode, name, 0600, kUser, true).ok());
  }
  ASSERT_TRUE((*dir)->names().Rename(kRootInode, "b", kRootInode, "d", 0).ok());
  ASSERT_TRUE((*dir)->Close().ok());
  std::string image = region->DurableImage();
  dir->reset();
  const f::Superblock sb = SuperblockOf(image);
  for (uint64_t slot = 0; slot < f::kJournalSlots; ++slot) {
    std::fill_n(image.begin() + JournalSlotOffset(sb, slot), sizeof(f::JournalHeader), '\0');
  }
  auto reopened = WalDirectory::Open(std::make_unique<MemoryRegion>(image, false));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  for (const char* name : {"a", "c", "d"}) {
    EXPECT_TRUE((*reopened)->names().Lookup(kRootInode, name).ok()) << name;
  }
  EXPECT_FALSE((*reopened)->names().Lookup(kRootInode, "b").ok());
  testing::ExpectFsckClean(image);
}

// walfs_latbench meta's pattern, and PostgreSQL's status files: a durable create (create,
// fsync, release), a rename and an unlink (then the kernel's forget) each cost exactly
// one msync, also once the carried images pass the carry limit (files that stay keep
// adding records to carry).
TEST(JournalMsyncCountTest, CreateRenameUnlinkCostOneMsyncEach) {
  auto owned = std::make_unique<RecordingRegion>(testing::FormattedImage(8 << 20, 64),
                                                 /*pmem_semantics=*/false);
  RecordingRegion* region = owned.get();
  auto opened = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status();
  WalDirectory& d = **opened;
  const uint64_t start = region->durability_points();
  uint64_t ops = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string a = absl::StrCat("a.", i);
    const std::string b = absl::StrCat("b.", i);
    auto f = d.names().Create(kRootInode, a, 0600, kUser, true);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(d.data().Fsync(f->ino, false).ok());
    ASSERT_TRUE(d.data().FsyncDir(kRootInode).ok());
    ASSERT_TRUE(d.data().Release(f->ino).ok());
    EXPECT_EQ(region->durability_points() - start, ++ops) << "create " << a;
    ASSERT_TRUE(d.names().Rename(kRootInode, a, kRootInode, b, 0).ok());
    ASSERT_TRUE(d.data().FsyncDir(kRootInode).ok());
    EXPECT_EQ(region->durability_points() - start, ++ops) << "rename " << a;
    if (i % 2 == 0) {
      ASSERT_TRUE(d.names().Unlink(kRootInode, b).ok());
      ASSERT_TRUE(d.data().FsyncDir(kRootInode).ok());
      d.names().Forget(f->ino, 1);  // its record is freed by the next commit
      EXPECT_EQ(region->durability_points() - start, ++ops) << "unlink " << b;
    } else {
      d.names().Forget(f->ino, 1);  // stays
    }
  }
  EXPECT_EQ(region->durability_points() - start, ops);
  ASSERT_TRUE(d.Close().ok());
  testing::ExpectFsckClean(region->DurableImage());
}

}  // namespace
}  // namespace walfs::core
