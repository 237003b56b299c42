#include "core/wal_directory.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/status.h"
#include "tests/support/memory_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::ExpectFsckClean;
using testing::FormattedImage;
using testing::kTestSegment;
using testing::OpenImage;

constexpr Caller kUser{1000, 1000};
constexpr char kSeg[] = "000000010000000000000001";

int Errno(const absl::Status& s) { return ErrnoFromStatus(s); }
template <typename T>
int Errno(const absl::StatusOr<T>& s) {
  return ErrnoFromStatus(s.status());
}

std::set<std::string> List(WalDirectory& d, InodeId dir) {
  std::set<std::string> names;
  const absl::Status s = d.names().Readdir(dir, 0, [&](const DirEntry& e) {
    names.insert(std::string(e.name));
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  return names;
}

std::string ReadAll(WalDirectory& d, InodeId ino) {
  auto attr = d.names().GetAttr(ino);
  EXPECT_TRUE(attr.ok());
  std::string out(attr->size, '\0');
  auto n = d.data().Read(ino, 0, absl::MakeSpan(out));
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(*n, out.size());
  return out;
}

class WalDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = OpenImage(FormattedImage(), true, &bytes_); }
  // Simulates a restart: reopen whatever the region holds now.
  void Reopen(bool pmem = true) {
    std::string image = *bytes_;
    dir_.reset();
    dir_ = OpenImage(std::move(image), pmem, &bytes_);
    ASSERT_NE(dir_, nullptr);
  }
  // Every test leaves a pool that closes cleanly and that fsck finds nothing wrong with.
  void TearDown() override {
    if (dir_ == nullptr) return;
    ASSERT_TRUE(dir_->Close().ok());
    ExpectFsckClean(*bytes_);
  }
  std::unique_ptr<WalDirectory> dir_;
  std::string* bytes_ = nullptr;
};

TEST_F(WalDirectoryTest, FreshRootListsOnlyDotEntries) {
  EXPECT_EQ(List(*dir_, kRootInode), (std::set<std::string>{".", ".."}));
  auto root = dir_->names().GetAttr(kRootInode);
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(S_ISDIR(root->mode));
  EXPECT_EQ(root->nlink, 2u);
  FsStats st = dir_->Statfs();
  EXPECT_EQ(st.free_blocks, st.total_blocks);
  EXPECT_EQ(st.block_size, 4096u);
  EXPECT_EQ(st.free_inodes, st.total_inodes - 1);
}

TEST_F(WalDirectoryTest, CreateWriteReadAndOwner) {
  auto f = dir_->names().Create(kRootInode, "a.history", 0600, kUser, true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->uid, 1000u);
  EXPECT_EQ(f->gid, 1000u);
  EXPECT_EQ(f->mode, S_IFREG | 0600u);
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("hello world"), false).ok());
  EXPECT_EQ(ReadAll(*dir_, f->ino), "hello world");
  EXPECT_EQ(Errno(dir_->names().Create(kRootInode, "a.history", 0600, kUser, true)), EEXIST);
  auto again = dir_->names().Create(kRootInode, "a.history", 0600, kUser, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ino, f->ino);
  auto looked = dir_->names().Lookup(kRootInode, "a.history");
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->size, 11u);
  EXPECT_EQ(Errno(dir_->names().Lookup(kRootInode, "missing")), ENOENT);
}

TEST_F(WalDirectoryTest, SegmentGetsWholeExtentSmallFileDoesNot) {
  const uint64_t free0 = dir_->Statfs().free_blocks;
  auto seg = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->size, 0u);
  EXPECT_EQ(seg->blocks, kTestSegment / 512);
  EXPECT_EQ(dir_->Statfs().free_blocks, free0 - kTestSegment / 4096);
  auto tmp = dir_->names().Create(kRootInode, "xlogtemp.1234", 0600, kUser, true);
  ASSERT_TRUE(tmp.ok());
  EXPECT_EQ(tmp->blocks, kTestSegment / 512);
  auto ready = dir_->names().Create(kRootInode, "x.ready", 0600, kUser, true);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->blocks, 0u);
  ASSERT_TRUE(dir_->data().Write(ready->ino, 0, Bytes("x"), false).ok());
  EXPECT_EQ(dir_->names().GetAttr(ready->ino)->blocks, 8u);  // one 4 KiB block
}

TEST_F(WalDirectoryTest, ZeroFillIsElidedButReadsZeroAndOverwriteWithZerosSticks) {
  auto seg = dir_->names().Create(kRootInode, "xlogtemp.1", 0600, kUser, true);
  ASSERT_TRUE(seg.ok());
  std::string zeros(8192, '\0');
  for (uint64_t off = 0; off < kTestSegment; off += zeros.size()) {
    ASSERT_TRUE(dir_->data().Write(seg->ino, off, Bytes(zeros), false).ok());
  }
  EXPECT_EQ(dir_->names().GetAttr(seg->ino)->size, kTestSegment);
  EXPECT_EQ(ReadAll(*dir_, seg->ino), std::string(kTestSegment, '\0'));
  std::string page(8192, 'W');
  ASSERT_TRUE(dir_->data().Write(seg->ino, 8192, Bytes(page), false).ok());
  ASSERT_TRUE(dir_->data().Write(seg->ino, 8192, Bytes(zeros), false).ok());
  EXPECT_EQ(ReadAll(*dir_, seg->ino), std::string(kTestSegment, '\0'));
}

TEST_F(WalDirectoryTest, SparseStyleOneByteWriteReadsZeros) {
  // wal_init_zero=off writes one byte at segsize-1.
  auto seg = dir_->names().Create(kRootInode, "xlogtemp.2", 0600, kUser, true);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(
      dir_->data().Write(seg->ino, kTestSegment - 1, Bytes(std::string(1, '\0')), false).ok());
  EXPECT_EQ(ReadAll(*dir_, seg->ino), std::string(kTestSegment, '\0'));
}

TEST_F(WalDirectoryTest, StateSurvivesReopen) {
  auto d = dir_->names().Mkdir(kRootInode, "archive_status", 0700, kUser);
  ASSERT_TRUE(d.ok());
  auto f = dir_->names().Create(d->ino, "x.done", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("payload"), false).ok());
  auto l = dir_->names().Symlink(kRootInode, "link", "archive_status/x.done", kUser);
  ASSERT_TRUE(l.ok());
  Reopen();
  EXPECT_EQ(List(*dir_, kRootInode), (std::set<std::string>{".", "..", "archive_status", "link"}));
  auto d2 = dir_->names().Lookup(kRootInode, "archive_status");
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->mode, S_IFDIR | 0700u);
  auto f2 = dir_->names().Lookup(d2->ino, "x.done");
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(ReadAll(*dir_, f2->ino), "payload");
  EXPECT_EQ(*dir_->names().Readlink(l->ino), "archive_status/x.done");
  EXPECT_EQ(dir_->names().GetAttr(kRootInode)->nlink, 3u);
}

TEST_F(WalDirectoryTest, OpenUnlinkedFileStaysUsableUntilForget) {
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  const uint64_t used = dir_->Statfs().free_blocks;
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("still here"), false).ok());
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSeg).ok());
  EXPECT_EQ(Errno(dir_->names().Lookup(kRootInode, kSeg)), ENOENT);
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->nlink, 0u);
  EXPECT_EQ(ReadAll(*dir_, f->ino), "still here");
  ASSERT_TRUE(dir_->data().Write(f->ino, 10, Bytes("!"), false).ok());
  EXPECT_EQ(dir_->Statfs().free_blocks, used);
  dir_->names().Forget(f->ino, 1);
  EXPECT_EQ(dir_->Statfs().free_blocks, dir_->Statfs().total_blocks);
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
}

TEST_F(WalDirectoryTest, OrphanLeftByCrashIsReclaimedAndZeroedAtOpen) {
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(5000, 'x')), false).ok());
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSeg).ok());  // still referenced: an orphan
  Reopen();  // crash: no Forget, no Close
  FsStats st = dir_->Statfs();
  EXPECT_EQ(st.free_blocks, st.total_blocks);
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
  const auto& sb = dir_->superblock();
  const std::string& img = *bytes_;
  EXPECT_EQ(img.find_first_not_of('\0', sb.data_offset), std::string::npos)
      << "free space must be zero after reclaim";
}

// Freeing an extent stores zeros only over the blocks that were written: a segment's
// unused tail is already zero, and in msync mode each stored block is a write-back.
TEST_F(WalDirectoryTest, FreeingASegmentZeroesOnlyItsWrittenBlocks) {
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_GT(dir_->names().GetAttr(f->ino)->blocks * 512, 4 * format::kBlockSize);
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(5000, 'x')), false).ok());  // 2
  ASSERT_TRUE(dir_->data().Write(f->ino, 3 * format::kBlockSize + 1, Bytes("y"), false).ok());
  dir_->names().Forget(f->ino, 1);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSeg).ok());
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
  EXPECT_EQ(dir_->counters().zeroed_blocks, 3u);
  EXPECT_EQ(bytes_->find_first_not_of('\0', dir_->superblock().data_offset),
            std::string::npos);
}

// True when inode `ino`'s record in `image` is free (all zero, format.h).
bool InodeSlotIsFree(const std::string& image, const format::Superblock& sb, InodeId ino) {
  const size_t off = sb.inode_table_offset + ino * format::kInodeSize;
  return image.find_first_not_of('\0', off) >= off + format::kInodeSize;
}

// An unlink whose file the kernel has forgotten costs one journal commit: the orphan is
// zeroed and free at once for statfs, and its record is freed by the next commit.
TEST_F(WalDirectoryTest, ReclaimedOrphanIsFreedWithTheNextCommit) {
  const FsStats empty = dir_->Statfs();
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(5000, 'x')), false).ok());
  dir_->names().Forget(f->ino, 1);
  const uint64_t commits = dir_->counters().journal_commits;
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSeg).ok());
  EXPECT_EQ(dir_->counters().journal_commits, commits + 1);
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
  FsStats st = dir_->Statfs();
  EXPECT_EQ(st.free_blocks, empty.free_blocks);
  EXPECT_EQ(st.free_inodes, empty.free_inodes);
  EXPECT_EQ(Errno(dir_->names().GetAttr(f->ino)), ESTALE);
  const auto& sb = dir_->superblock();
  EXPECT_FALSE(InodeSlotIsFree(*bytes_, sb, f->ino)) << "an orphan on media until then";
  EXPECT_EQ(bytes_->find_first_not_of('\0', sb.data_offset), std::string::npos)
      << "its blocks are zero before the commit that frees them";

  auto g = dir_->names().Create(kRootInode, "other", 0600, kUser, true);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(dir_->counters().journal_commits, commits + 2);
  EXPECT_TRUE(InodeSlotIsFree(*bytes_, sb, f->ino));
  EXPECT_EQ(dir_->Statfs().free_blocks, empty.free_blocks);
  Reopen();  // nothing left for the open to reclaim
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 0u);
}

// A crash between the reclaim and the next commit leaves a zeroed orphan, which the next
// open reclaims like any other.
TEST_F(WalDirectoryTest, PendingFreeLeftByCrashIsReclaimedAtOpen) {
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(5000, 'x')), false).ok());
  dir_->names().Forget(f->ino, 1);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSeg).ok());
  Reopen();  // crash: no further commit, no Close
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
  EXPECT_TRUE(InodeSlotIsFree(*bytes_, dir_->superblock(), f->ino));
  const FsStats st = dir_->Statfs();
  EXPECT_EQ(st.free_blocks, st.total_blocks);
}

// Blocks whose record is not freed yet are free for statfs, so an allocation that needs
// them must not fail: it commits the pending frees and retries.
TEST_F(WalDirectoryTest, AllocationCommitsPendingFrees) {
  constexpr char kBig[] = "000000010000000000000042";
  auto big = dir_->names().Create(kRootInode, kBig, 0600, kUser, true);
  ASSERT_TRUE(big.ok());
  // Segment-named, so it may use the reserve: the pool is full after this.
  const uint64_t bytes = (dir_->Statfs().free_blocks + kTestSegment / 4096) * 4096;
  ASSERT_TRUE(dir_->data().Fallocate(big->ino, 0, bytes, 0).ok());
  ASSERT_EQ(dir_->Statfs().free_blocks, 0u);
  dir_->names().Forget(big->ino, 1);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kBig).ok());
  const uint64_t commits = dir_->counters().journal_commits;
  auto again = dir_->names().Create(kRootInode, kBig, 0600, kUser, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(dir_->data().Fallocate(again->ino, 0, bytes, 0).ok());
  EXPECT_GE(dir_->counters().journal_commits, commits + 2);
}

TEST_F(WalDirectoryTest, RenameReplacesAtomicallyAndFreesTarget) {
  auto a = dir_->names().Create(kRootInode, "xlogtemp.9", 0600, kUser, true);
  auto b = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(a.ok() && b.ok());
  dir_->names().Forget(b->ino, 1);
  ASSERT_TRUE(dir_->data().Write(a->ino, 0, Bytes("new"), false).ok());
  const uint64_t free_before = dir_->Statfs().free_blocks;
  ASSERT_TRUE(dir_->names().Rename(kRootInode, "xlogtemp.9", kRootInode, kSeg, 0).ok());
  EXPECT_EQ(List(*dir_, kRootInode), (std::set<std::string>{".", "..", kSeg}));
  auto now = dir_->names().Lookup(kRootInode, kSeg);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->ino, a->ino);
  EXPECT_EQ(dir_->Statfs().free_blocks, free_before + kTestSegment / 4096);
  Reopen();
  EXPECT_EQ(ReadAll(*dir_, dir_->names().Lookup(kRootInode, kSeg)->ino), "new");
}

TEST_F(WalDirectoryTest, RenameFlags) {
  ASSERT_TRUE(dir_->names().Create(kRootInode, "a", 0600, kUser, true).ok());
  ASSERT_TRUE(dir_->names().Create(kRootInode, "b", 0600, kUser, true).ok());
  const InodeId a = dir_->names().Lookup(kRootInode, "a")->ino;
  const InodeId b = dir_->names().Lookup(kRootInode, "b")->ino;
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "a", kRootInode, "b", kRenameNoReplace)),
            EEXIST);
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "a", kRootInode, "c", kRenameExchange)), ENOENT);
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "a", kRootInode, "b",
                                       kRenameExchange | kRenameNoReplace)),
            EINVAL);
  ASSERT_TRUE(dir_->names().Rename(kRootInode, "a", kRootInode, "b", kRenameExchange).ok());
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "a")->ino, b);
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "b")->ino, a);
  ASSERT_TRUE(dir_->names().Rename(kRootInode, "a", kRootInode, "c", kRenameNoReplace).ok());
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "c")->ino, b);
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "nope", kRootInode, "x", 0)), ENOENT);
}

TEST_F(WalDirectoryTest, DirectoryRenameRules) {
  auto p = dir_->names().Mkdir(kRootInode, "p", 0755, kUser);
  auto q = dir_->names().Mkdir(p->ino, "q", 0755, kUser);
  auto r = dir_->names().Mkdir(kRootInode, "r", 0755, kUser);
  ASSERT_TRUE(p.ok() && q.ok() && r.ok());
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "p", q->ino, "p2", 0)), EINVAL);
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "p", p->ino, "self", 0)), EINVAL);
  ASSERT_TRUE(dir_->names().Create(r->ino, "f", 0600, kUser, true).ok());
  EXPECT_EQ(Errno(dir_->names().Rename(p->ino, "q", kRootInode, "r", 0)), ENOTEMPTY);
  ASSERT_TRUE(dir_->names().Create(kRootInode, "file", 0600, kUser, true).ok());
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "file", kRootInode, "p", 0)), EISDIR);
  EXPECT_EQ(Errno(dir_->names().Rename(kRootInode, "p", kRootInode, "file", 0)), ENOTDIR);
  // Move q from p to root: link counts follow.
  ASSERT_TRUE(dir_->names().Rename(p->ino, "q", kRootInode, "q", 0).ok());
  EXPECT_EQ(dir_->names().GetAttr(p->ino)->nlink, 2u);
  EXPECT_EQ(dir_->names().GetAttr(kRootInode)->nlink, 5u);  // p, q, r
  EXPECT_EQ(dir_->names().Lookup(q->ino, "..")->ino, kRootInode);
  Reopen();  // the tree check at open agrees with the link counts
  EXPECT_EQ(dir_->names().GetAttr(kRootInode)->nlink, 5u);
}

TEST_F(WalDirectoryTest, RmdirRules) {
  auto d = dir_->names().Mkdir(kRootInode, "d", 0755, kUser);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(dir_->names().Create(d->ino, "f", 0600, kUser, true).ok());
  EXPECT_EQ(Errno(dir_->names().Rmdir(kRootInode, "d")), ENOTEMPTY);
  EXPECT_EQ(Errno(dir_->names().Unlink(kRootInode, "d")), EISDIR);
  EXPECT_EQ(Errno(dir_->names().Rmdir(d->ino, "f")), ENOTDIR);
  ASSERT_TRUE(dir_->names().Unlink(d->ino, "f").ok());
  ASSERT_TRUE(dir_->names().Rmdir(kRootInode, "d").ok());
  EXPECT_EQ(dir_->names().GetAttr(kRootInode)->nlink, 2u);
  EXPECT_EQ(Errno(dir_->names().Create(d->ino, "g", 0600, kUser, true)), ENOENT);
}

TEST_F(WalDirectoryTest, HardLinksCountAndSurviveUnlink) {
  auto f = dir_->names().Create(kRootInode, "xlogtemp.5", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("linked"), false).ok());
  auto l = dir_->names().Link(f->ino, kRootInode, kSeg);  // PostgreSQL 13/14 install path
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nlink, 2u);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, "xlogtemp.5").ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->nlink, 1u);
  Reopen();
  auto s = dir_->names().Lookup(kRootInode, kSeg);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ReadAll(*dir_, s->ino), "linked");
  auto d = dir_->names().Mkdir(kRootInode, "dir", 0700, kUser);
  EXPECT_EQ(Errno(dir_->names().Link(d->ino, kRootInode, "dirlink")), EPERM);
}

TEST_F(WalDirectoryTest, TruncateGrowReadsZerosShrinkFreesBlocks) {
  auto f = dir_->names().Create(kRootInode, "t", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(100000, 'a')), false).ok());
  const uint64_t free_full = dir_->Statfs().free_blocks;
  SetattrRequest shrink;
  shrink.size = 10;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, shrink).ok());
  EXPECT_GT(dir_->Statfs().free_blocks, free_full);
  SetattrRequest grow;
  grow.size = 50000;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, grow).ok());
  EXPECT_EQ(ReadAll(*dir_, f->ino), std::string(10, 'a') + std::string(49990, '\0'));
  Reopen();
  EXPECT_EQ(ReadAll(*dir_, dir_->names().Lookup(kRootInode, "t")->ino),
            std::string(10, 'a') + std::string(49990, '\0'));
}

TEST_F(WalDirectoryTest, NameValidation) {
  EXPECT_EQ(Errno(dir_->names().Create(kRootInode, std::string(256, 'n'), 0600, kUser, true)),
            ENAMETOOLONG);
  EXPECT_TRUE(dir_->names().Create(kRootInode, std::string(255, 'n'), 0600, kUser, true).ok());
  EXPECT_EQ(Errno(dir_->names().Lookup(kRootInode, std::string(300, 'n'))), ENAMETOOLONG);
  EXPECT_EQ(Errno(dir_->names().Create(kRootInode, "a/b", 0600, kUser, true)), EINVAL);
  EXPECT_EQ(Errno(dir_->names().Create(kRootInode, "", 0600, kUser, true)), EINVAL);
  EXPECT_EQ(Errno(dir_->names().Mkdir(kRootInode, "..", 0700, kUser)), EINVAL);
  auto f = dir_->names().Create(kRootInode, "file", 0600, kUser, true);
  EXPECT_EQ(Errno(dir_->names().Create(f->ino, "x", 0600, kUser, true)), ENOTDIR);
  EXPECT_EQ(Errno(dir_->names().Symlink(
                kRootInode, "s", std::string(format::kMaxSymlinkTargetOutOfLine + 1, 't'), kUser)),
            ENAMETOOLONG);
}

TEST_F(WalDirectoryTest, ReaddirCookiesStableWhileEntriesChange) {
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(dir_->names().Create(kRootInode, absl::StrCat("f", i), 0600, kUser, true).ok());
  }
  std::vector<std::string> seen;
  uint64_t cookie = 0;
  bool mutated = false;
  for (;;) {
    int taken = 0;
    uint64_t next = cookie;
    const absl::Status s = dir_->names().Readdir(kRootInode, cookie, [&](const DirEntry& e) {
      seen.emplace_back(e.name);
      next = e.next_cookie;
      return ++taken < 7;
    });
    ASSERT_TRUE(s.ok()) << s;
    if (taken == 0) break;
    cookie = next;
    if (!mutated) {
      // Mid-scan: rename and unlink entries the scan has not reached and some it has.
      mutated = true;
      for (int i = 0; i < 40; i += 5) {
        const std::string n = absl::StrCat("f", i);
        if (std::find(seen.begin(), seen.end(), n) == seen.end()) continue;
        ASSERT_TRUE(dir_->names().Unlink(kRootInode, n).ok());
      }
      ASSERT_TRUE(dir_->names().Rename(kRootInode, "f39", kRootInode, "renamed", 0).ok());
    }
  }
  std::multiset<std::string> counts(seen.begin(), seen.end());
  for (int i = 0; i < 39; ++i) {
    const std::string n = absl::StrCat("f", i);
    EXPECT_EQ(counts.count(n), 1u) << n << " must appear exactly once";
  }
  EXPECT_EQ(counts.count("f39") + counts.count("renamed"), 1u);
  EXPECT_EQ(counts.count("."), 1u);
  EXPECT_EQ(counts.count(".."), 1u);
}

TEST_F(WalDirectoryTest, EnospcOnlyAtAllocation) {
  std::vector<InodeId> segs;
  for (int i = 0;; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "0000000100000000000000%02X", i);
    auto s = dir_->names().Create(kRootInode, name, 0600, kUser, true);
    if (!s.ok()) {
      EXPECT_EQ(Errno(s), ENOSPC);
      EXPECT_EQ(Errno(dir_->names().Lookup(kRootInode, name)), ENOENT)
          << "failed create leaves no name";
      break;
    }
    segs.push_back(s->ino);
    ASSERT_LT(i, 100);
  }
  ASSERT_GE(segs.size(), 5u);
  // Writes inside allocated segments still succeed on a full pool.
  std::string page(8192, 'p');
  for (InodeId ino : segs) {
    for (uint64_t off = 0; off < kTestSegment; off += page.size()) {
      ASSERT_TRUE(dir_->data().Write(ino, off, Bytes(page), false).ok());
    }
  }
  auto small = dir_->names().Create(kRootInode, "small", 0600, kUser, true);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(Errno(dir_->data().Write(small->ino, 0, Bytes(std::string(kTestSegment, 'x')), false)),
            ENOSPC);
  EXPECT_EQ(dir_->names().GetAttr(small->ino)->size, 0u) << "failed write changes nothing";
}

TEST_F(WalDirectoryTest, FallocateKeepSizeAndDefault) {
  auto f = dir_->names().Create(kRootInode, "fa", 0600, kUser, true);
  ASSERT_TRUE(dir_->data().Fallocate(f->ino, 0, 100000, kFallocateKeepSize).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->size, 0u);
  EXPECT_GE(dir_->names().GetAttr(f->ino)->blocks * 512, 100000u);
  ASSERT_TRUE(dir_->data().Fallocate(f->ino, 0, 5000, 0).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->size, 5000u);
  EXPECT_EQ(ReadAll(*dir_, f->ino), std::string(5000, '\0'));
  EXPECT_EQ(Errno(dir_->data().Fallocate(f->ino, 0, 10, 0x8)), EOPNOTSUPP);
}

TEST_F(WalDirectoryTest, SetattrModeOwnerTimes) {
  auto f = dir_->names().Create(kRootInode, "s", 0644, kUser, true);
  SetattrRequest r;
  r.mode = 0600;
  r.uid = 7;
  r.gid = 8;
  r.mtime_ns = 123456789;
  auto a = dir_->names().Setattr(f->ino, r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->mode, S_IFREG | 0600u);
  EXPECT_EQ(a->uid, 7u);
  EXPECT_EQ(a->gid, 8u);
  EXPECT_EQ(a->mtime_ns, 123456789);
  Reopen();
  auto b = dir_->names().Lookup(kRootInode, "s");
  EXPECT_EQ(b->mode, S_IFREG | 0600u);
  EXPECT_EQ(b->mtime_ns, 123456789);
}

// On FUSE the kernel leaves set-group-ID directories to the file system: without this a
// file made in a setgid directory got the caller's group.
TEST_F(WalDirectoryTest, SetgidDirectoryGivesItsGroupAndBitToNewEntries) {
  auto d = dir_->names().Mkdir(kRootInode, "shared", 02770, Caller{0, 50});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->mode, S_IFDIR | 02770u);
  auto f = dir_->names().Create(d->ino, "f", 0640, kUser, true);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->uid, 1000u);
  EXPECT_EQ(f->gid, 50u);
  EXPECT_EQ(f->mode, S_IFREG | 0640u);
  auto sub = dir_->names().Mkdir(d->ino, "sub", 0750, kUser);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->gid, 50u);
  EXPECT_EQ(sub->mode, S_IFDIR | 02750u);
  auto s = dir_->names().Symlink(sub->ino, "l", "target", kUser);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gid, 50u);
  auto plain = dir_->names().Create(kRootInode, "plain", 0600, kUser, true);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->gid, 1000u);
  Reopen();
  auto again = dir_->names().Lookup(d->ino, "f");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->gid, 50u);
}

TEST_F(WalDirectoryTest, LargeFileSpansExtentsAndReadsBackExactly) {
  auto f = dir_->names().Create(kRootInode, "big", 0600, kUser, true);
  std::string data;
  for (int i = 0; i < 3 << 20; ++i) data.push_back(static_cast<char>('a' + i % 23));
  // Small appends force several extents.
  for (size_t off = 0; off < data.size(); off += 65536) {
    ASSERT_TRUE(dir_->data().Write(f->ino, off, Bytes(data.substr(off, 65536)), false).ok());
  }
  EXPECT_EQ(ReadAll(*dir_, f->ino), data);
  std::string tail(100, '\0');
  auto n = dir_->data().Read(f->ino, data.size() - 40, absl::MakeSpan(tail));
  EXPECT_EQ(*n, 40u) << "short only at EOF";
}

// A file written in 1 MiB appends (dd bs=1M) gets all the free space there is: the
// allocation falls back to the largest free run instead of one small extent per write,
// which ran into the extent limit at about half the pool.
TEST(WalDirectoryAllocation, GrowingFileUsesTheWholePool) {
  auto dir = OpenImage(FormattedImage(64 << 20));
  auto f = dir->names().Create(kRootInode, "big", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  // Not the reserve, which only WAL segments may take (core/layout.h).
  const uint64_t total = (dir->Statfs().total_blocks - dir->Statfs().reserved_blocks) * 4096;
  const std::string chunk(1 << 20, 'b');
  uint64_t written = 0;
  for (;;) {
    auto n = dir->data().Write(f->ino, written, Bytes(chunk), false);
    if (!n.ok()) {
      // EFBIG once the file would be larger than the whole data area.
      EXPECT_TRUE(Errno(n) == ENOSPC || Errno(n) == EFBIG) << n.status();
      break;
    }
    written += *n;
    ASSERT_LE(written, total);
  }
  EXPECT_GT(written + chunk.size(), total) << "ENOSPC with " << dir->Statfs().free_blocks
                                           << " blocks free";
  EXPECT_LT((dir->Statfs().free_blocks - dir->Statfs().reserved_blocks) * 4096, chunk.size());
  EXPECT_TRUE(dir->Close().ok());
}

// Allocation ahead of a growing file is given back when the file is truncated to its
// own size.
TEST_F(WalDirectoryTest, TruncateToTheSameSizeTrimsOverAllocation) {
  auto f = dir_->names().Create(kRootInode, "copy", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  const std::string chunk(65536, 'c');
  for (uint64_t off = 0; off < 300 * 1024; off += chunk.size()) {
    ASSERT_TRUE(dir_->data().Write(f->ino, off, Bytes(chunk), false).ok());
  }
  const uint64_t size = dir_->names().GetAttr(f->ino)->size;
  ASSERT_EQ(size, 320u * 1024);
  SetattrRequest same;
  same.size = size;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, same).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->blocks, size / 512);
  EXPECT_EQ(ReadAll(*dir_, f->ino), std::string(size, 'c'));
}

// What growth allocated ahead of a file's end goes back when it is closed; deliberate
// preallocation (fallocate KEEP_SIZE) and a segment's extent stay. Release also makes
// the last write's times durable.
TEST_F(WalDirectoryTest, ReleaseTrimsGrowthAheadOfTheEndAndCommitsTimes) {
  auto f = dir_->names().Create(kRootInode, "copy", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  const std::string chunk(65536, 'c');
  for (uint64_t off = 0; off < 300 * 1024; off += chunk.size()) {
    ASSERT_TRUE(dir_->data().Write(f->ino, off, Bytes(chunk), false).ok());
  }
  ASSERT_GT(dir_->names().GetAttr(f->ino)->blocks, 320u * 1024 / 512);
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("last"), false).ok());
  const int64_t mtime = dir_->names().GetAttr(f->ino)->mtime_ns;
  ASSERT_TRUE(dir_->data().Release(f->ino).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->blocks, 320u * 1024 / 512);

  auto fa = dir_->names().Create(kRootInode, "fa", 0600, kUser, true);
  ASSERT_TRUE(dir_->data().Fallocate(fa->ino, 0, 1 << 20, kFallocateKeepSize).ok());
  EXPECT_EQ(dir_->names().GetAttr(fa->ino)->blocks, (1u << 20) / 512)
      << "fallocate allocates what it is asked";
  ASSERT_TRUE(dir_->data().Write(fa->ino, 0, Bytes("x"), false).ok());
  ASSERT_TRUE(dir_->data().Release(fa->ino).ok());
  EXPECT_EQ(dir_->names().GetAttr(fa->ino)->blocks, (1u << 20) / 512);

  auto seg = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(dir_->data().Write(seg->ino, 0, Bytes("page"), false).ok());
  ASSERT_TRUE(dir_->data().Release(seg->ino).ok());
  EXPECT_EQ(dir_->names().GetAttr(seg->ino)->blocks, kTestSegment / 512);

  Reopen();
  auto c = dir_->names().Lookup(kRootInode, "copy");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->blocks, 320u * 1024 / 512);
  EXPECT_EQ(c->mtime_ns, mtime);
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "fa")->blocks, (1u << 20) / 512);
  // A truncate gives back preallocation too.
  SetattrRequest same;
  same.size = 1;
  ASSERT_TRUE(dir_->names().Setattr(dir_->names().Lookup(kRootInode, "fa")->ino, same).ok());
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "fa")->blocks, 8u);
}

// A write by a caller without CAP_FSETID clears set-user-ID, and set-group-ID when the
// group may execute, durably (fs/ passes clear_setid for callers other than root).
TEST_F(WalDirectoryTest, WriteThatClearsSetidCommitsTheMode) {
  auto f = dir_->names().Create(kRootInode, "suid", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  SetattrRequest mode;
  mode.mode = 06777;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, mode).ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("root"), false, /*clear_setid=*/false).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->mode & 07777, 06777u);
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("user"), false, /*clear_setid=*/true).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->mode & 07777, 0777u);
  mode.mode = 02767;  // set-group-ID without group execute: kept (mandatory locking)
  ASSERT_TRUE(dir_->names().Setattr(f->ino, mode).ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("user"), false, /*clear_setid=*/true).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->mode & 07777, 02767u);
  mode.mode = 04755;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, mode).ok());
  SetattrRequest trunc;  // open(O_TRUNC) by such a caller
  trunc.size = 0;
  trunc.clear_setid = true;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, trunc).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->mode & 07777, 0755u);
  mode.mode = 06777;
  ASSERT_TRUE(dir_->names().Setattr(f->ino, mode).ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("user"), false, /*clear_setid=*/true).ok());
  Reopen();  // durable without a further commit
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "suid")->mode & 07777, 0777u);
}

// PostgreSQL writes a timeline history file as xlogtemp.<pid> and renames it: the
// segment extent the temporary name got must not stay with the small file.
TEST_F(WalDirectoryTest, HistoryFileWrittenThroughXlogtempKeepsOnlyItsBlocks) {
  const uint64_t free0 = dir_->Statfs().free_blocks;
  auto tmp = dir_->names().Create(kRootInode, "xlogtemp.4242", 0600, kUser, true);
  ASSERT_TRUE(tmp.ok());
  const std::string history = "1\t0/3000060\tno recovery target specified\n";
  ASSERT_TRUE(dir_->data().Write(tmp->ino, 0, Bytes(history), true).ok());
  ASSERT_TRUE(dir_->data().Fsync(tmp->ino, false).ok());
  ASSERT_TRUE(
      dir_->names().Rename(kRootInode, "xlogtemp.4242", kRootInode, "00000002.history", 0).ok());
  EXPECT_EQ(dir_->names().GetAttr(tmp->ino)->blocks, 8u);
  EXPECT_EQ(dir_->Statfs().free_blocks, free0 - 1);
  EXPECT_EQ(ReadAll(*dir_, tmp->ino), history);
  Reopen();
  auto h = dir_->names().Lookup(kRootInode, "00000002.history");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->blocks, 8u);
  EXPECT_EQ(ReadAll(*dir_, h->ino), history);
  // Growing it again is an ordinary file's growth, not a segment's.
  ASSERT_TRUE(dir_->data().Write(h->ino, history.size(), Bytes("more"), false).ok());
  EXPECT_LT(dir_->names().GetAttr(h->ino)->blocks, kTestSegment / 512);
}

// pmem mode: a write inside the file's size commits nothing by itself, but its mtime
// and ctime reach the pool within a second (docs/design/durability.md, Times), without a
// journal commit per write.
TEST_F(WalDirectoryTest, MtimeOfAWriteInsideTheSizeIsDurableWithinASecond) {
  auto f = dir_->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes(std::string(8192, 'a')), false).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t before = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  const uint64_t commits = dir_->counters().journal_commits;
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("rewrite"), false).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(dir_->data().Write(f->ino, 8, Bytes("x"), false).ok());
  EXPECT_LE(dir_->counters().journal_commits, commits + 1) << "a commit per write";
  Reopen();  // a power cut: only what was persisted
  auto a = dir_->names().Lookup(kRootInode, kSeg);
  ASSERT_TRUE(a.ok());
  EXPECT_GE(a->mtime_ns, before - 1000000000);
  EXPECT_GE(a->ctime_ns, before - 1000000000);
}

// relatime: the first read after a change moves atime, later ones do not; Release
// makes it durable.
TEST_F(WalDirectoryTest, ReadMovesAtimeLikeRelatime) {
  auto f = dir_->names().Create(kRootInode, "r", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("data"), false).ok());
  const Attr written = *dir_->names().GetAttr(f->ino);
  ASSERT_LE(written.atime_ns, written.mtime_ns);
  std::string buf(4, '\0');
  ASSERT_TRUE(dir_->data().Read(f->ino, 0, absl::MakeSpan(buf)).ok());
  const int64_t atime = dir_->names().GetAttr(f->ino)->atime_ns;
  EXPECT_GT(atime, written.mtime_ns);
  ASSERT_TRUE(dir_->data().Read(f->ino, 0, absl::MakeSpan(buf)).ok());
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->atime_ns, atime) << "relatime: once per change";
  EXPECT_EQ(dir_->names().GetAttr(f->ino)->mtime_ns, written.mtime_ns) << "a read is not a write";
  ASSERT_TRUE(dir_->data().Release(f->ino).ok());
  Reopen();
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "r")->atime_ns, atime);
}

// Targets up to PATH_MAX - 1 bytes: inline up to kMaxSymlinkTarget, then in a block of
// their own, freed with the symlink.
TEST_F(WalDirectoryTest, LongSymlinkTargetsUpToPathMax) {
  const uint64_t free0 = dir_->Statfs().free_blocks;
  std::string longest(4095, 'x');
  for (size_t i = 0; i < longest.size(); i += 7) longest[i] = '/';
  const std::string just_over(format::kMaxSymlinkTarget + 1, 'o');
  const std::string inline_max(format::kMaxSymlinkTarget, 'i');
  auto l = dir_->names().Symlink(kRootInode, "longest", longest, kUser);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->size, 4095u);
  EXPECT_EQ(l->blocks, 8u);
  auto o = dir_->names().Symlink(kRootInode, "over", just_over, kUser);
  ASSERT_TRUE(o.ok()) << o.status();
  auto i = dir_->names().Symlink(kRootInode, "inline", inline_max, kUser);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->blocks, 0u);
  EXPECT_EQ(*dir_->names().Readlink(l->ino), longest);
  EXPECT_EQ(*dir_->names().Readlink(o->ino), just_over);
  EXPECT_EQ(*dir_->names().Readlink(i->ino), inline_max);
  EXPECT_EQ(Errno(dir_->names().Symlink(kRootInode, "too-long", std::string(4096, 'y'), kUser)),
            ENAMETOOLONG);
  EXPECT_EQ(dir_->Statfs().free_blocks, free0 - 2);
  Reopen();
  const InodeId li = dir_->names().Lookup(kRootInode, "longest")->ino;
  const InodeId oi = dir_->names().Lookup(kRootInode, "over")->ino;
  EXPECT_EQ(*dir_->names().Readlink(li), longest);
  EXPECT_EQ(*dir_->names().Readlink(oi), just_over);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, "longest").ok());
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, "over").ok());
  dir_->names().Forget(li, 1);
  dir_->names().Forget(oi, 1);
  EXPECT_EQ(dir_->Statfs().free_blocks, free0);
}

// FIFOs, sockets and device nodes are inert inodes: created, stat'ed, linked, renamed
// and unlinked like files, holding no data.
TEST_F(WalDirectoryTest, FifosSocketsAndDevicesAreInertInodes) {
  const uint64_t free0 = dir_->Statfs().free_blocks;
  struct Want {
    const char* name;
    uint32_t type;
    uint64_t rdev;
  };
  const Want wants[] = {{"fifo", S_IFIFO, 0},
                        {"sock", S_IFSOCK, 0},
                        {"null", S_IFCHR, makedev(1, 3)},
                        {"loop", S_IFBLK, makedev(7, 0)}};
  for (const Want& w : wants) {
    auto a = dir_->names().Mknod(kRootInode, w.name, w.type | 0640, w.rdev, kUser);
    ASSERT_TRUE(a.ok()) << w.name << ": " << a.status();
    EXPECT_EQ(a->mode, w.type | 0640u);
    EXPECT_EQ(a->rdev, w.rdev);
    EXPECT_EQ(a->size, 0u);
    EXPECT_EQ(a->nlink, 1u);
    EXPECT_EQ(a->uid, kUser.uid);
  }
  EXPECT_EQ(Errno(dir_->names().Mknod(kRootInode, "fifo", S_IFIFO | 0600, 0, kUser)), EEXIST);
  EXPECT_EQ(Errno(dir_->names().Mknod(kRootInode, "reg", S_IFREG | 0600, 0, kUser)), EINVAL);
  auto fifo = dir_->names().Lookup(kRootInode, "fifo");
  ASSERT_TRUE(fifo.ok());
  std::string buf(4, '\0');
  EXPECT_EQ(Errno(dir_->data().Read(fifo->ino, 0, absl::MakeSpan(buf))), EINVAL);
  EXPECT_EQ(Errno(dir_->data().Write(fifo->ino, 0, Bytes("x"), false)), EINVAL);
  SetattrRequest trunc;
  trunc.size = 0;
  EXPECT_EQ(Errno(dir_->names().Setattr(fifo->ino, trunc)), EINVAL);
  ASSERT_TRUE(dir_->names().Link(fifo->ino, kRootInode, "fifo2").ok());
  EXPECT_EQ(dir_->names().GetAttr(fifo->ino)->nlink, 2u);
  ASSERT_TRUE(dir_->names().Rename(kRootInode, "sock", kRootInode, "sock2", 0).ok());
  std::map<std::string, uint32_t> types;
  const absl::Status listed = dir_->names().Readdir(kRootInode, 0, [&](const DirEntry& e) {
    types[std::string(e.name)] = e.type;
    return true;
  });
  ASSERT_TRUE(listed.ok()) << listed;
  EXPECT_EQ(types["fifo2"], static_cast<uint32_t>(S_IFIFO));
  EXPECT_EQ(types["sock2"], static_cast<uint32_t>(S_IFSOCK));
  EXPECT_EQ(types["null"], static_cast<uint32_t>(S_IFCHR));
  EXPECT_EQ(types["loop"], static_cast<uint32_t>(S_IFBLK));
  Reopen();
  auto null = dir_->names().Lookup(kRootInode, "null");
  ASSERT_TRUE(null.ok());
  EXPECT_EQ(null->mode, S_IFCHR | 0640u);
  EXPECT_EQ(null->rdev, makedev(1, 3));
  EXPECT_EQ(dir_->names().Lookup(kRootInode, "fifo2")->nlink, 2u);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, "fifo").ok());
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, "fifo2").ok());
  EXPECT_EQ(dir_->Statfs().free_blocks, free0);
}

// A region whose large fills (the zeroing of freed blocks) take 300 ms, so a test can
// allocate while a reclaim in another thread is still zeroing.
class SlowFillRegion final : public PersistentRegion {
 public:
  explicit SlowFillRegion(std::string image)
      : PersistentRegion(nullptr, 0), bytes_(std::move(image)) {
    Reset(bytes_.data(), bytes_.size());
  }
  bool is_pmem() const override { return true; }
  std::string_view kind() const override { return "slow-fill"; }
  void Store(uint64_t off, const void* src, size_t len) override {
    std::memcpy(bytes_.data() + off, src, len);
  }
  void Fill(uint64_t off, uint8_t byte, size_t len) override {
    if (len >= (1u << 20)) {
      filling.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    std::memset(bytes_.data() + off, byte, len);
  }
  void Flush(uint64_t, size_t) override {}
  void Drain() override {}
  std::atomic<bool> filling{false};

 private:
  std::string bytes_;
};

// ENOSPC only when the space is not there: blocks an unlink in another thread is still
// zeroing are waited for, not refused (a checkpoint removing segments while a backend
// creates the next one, on a full pool).
TEST(WalDirectoryAllocation, AllocationWaitsForBlocksBeingZeroed) {
  auto owned = std::make_unique<SlowFillRegion>(FormattedImage(16 << 20));
  SlowFillRegion* region = owned.get();
  auto opened = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status();
  WalDirectory& dir = **opened;
  // A segment-named file, so it may take the reserve too: the new segment below then
  // finds no space but what the unlink is zeroing.
  constexpr char kBig[] = "000000010000000000000042";
  auto big = dir.names().Create(kRootInode, kBig, 0600, kUser, true);
  ASSERT_TRUE(big.ok());
  const uint64_t total = (dir.Statfs().free_blocks + testing::kTestSegment / 4096) * 4096;
  ASSERT_TRUE(
      dir.data().Write(big->ino, 0, Bytes(std::string(total - (64 << 10), 'b')), false).ok());
  ASSERT_TRUE(dir.data().Release(big->ino).ok());
  dir.names().Forget(big->ino, 1);  // no lookup left: the unlink reclaims at once, in its thread
  std::thread unlinker([&] { ASSERT_TRUE(dir.names().Unlink(kRootInode, kBig).ok()); });
  while (!region->filling.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto seg = dir.names().Create(kRootInode, kSeg, 0600, kUser, true);  // needs a whole segment
  EXPECT_TRUE(seg.ok()) << seg.status();
  auto small = dir.names().Create(kRootInode, "small", 0600, kUser, true);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(dir.data().Write(small->ino, 0, Bytes(std::string(2 << 20, 's')), false).ok());
  unlinker.join();
  EXPECT_TRUE(dir.Close().ok());
}

TEST(WalDirectoryMsync, SizeIsDurableOnlyAfterFsync) {
  std::string* bytes = nullptr;
  auto dir = OpenImage(FormattedImage(), false, &bytes);
  ASSERT_EQ(dir->mode(), DurabilityMode::kMsync);
  auto f = dir->names().Create(kRootInode, kSeg, 0600, kUser, true);
  ASSERT_TRUE(dir->data().Write(f->ino, 0, Bytes("unsynced"), false).ok());
  ASSERT_TRUE(dir->data().Release(f->ino).ok());  // close promises no durability
  auto small = dir->names().Create(kRootInode, "small", 0600, kUser, true);
  ASSERT_TRUE(dir->data().Write(small->ino, 0, Bytes(std::string(40000, 's')), false).ok());
  ASSERT_TRUE(dir->data().Release(small->ino).ok());
  // A restart now sees the committed size (0); recovery zeroes what lies past it.
  auto crashed = OpenImage(*bytes, false);
  auto c = crashed->names().Lookup(kRootInode, kSeg);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size, 0u);
  EXPECT_EQ(crashed->names().Lookup(kRootInode, "small")->size, 0u);
  ASSERT_TRUE(dir->data().Fsync(f->ino, true).ok());
  auto synced = OpenImage(*bytes, false);
  EXPECT_EQ(ReadAll(*synced, synced->names().Lookup(kRootInode, kSeg)->ino), "unsynced");
  // A sync (O_DSYNC) write is durable on return.
  ASSERT_TRUE(dir->data().Write(f->ino, 8, Bytes("+dsync"), true).ok());
  auto after = OpenImage(*bytes, false);
  EXPECT_EQ(ReadAll(*after, after->names().Lookup(kRootInode, kSeg)->ino), "unsynced+dsync");
  EXPECT_EQ(dir->counters().sync_writes, 1u);
}

TEST(WalDirectoryReadOnly, MutationsFailReadsWork) {
  std::string image;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    auto f = dir->names().Create(kRootInode, "f", 0600, kUser, true);
    ASSERT_TRUE(dir->data().Write(f->ino, 0, Bytes("ro"), false).ok());
    image = *bytes;
  }
  OpenOptions ro;
  ro.read_only = true;
  auto dir = OpenImage(image, true, nullptr, ro);
  auto f = dir->names().Lookup(kRootInode, "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ReadAll(*dir, f->ino), "ro");
  EXPECT_EQ(Errno(dir->names().Create(kRootInode, "g", 0600, kUser, true)), EROFS);
  EXPECT_EQ(Errno(dir->data().Write(f->ino, 0, Bytes("x"), false)), EROFS);
  EXPECT_EQ(Errno(dir->names().Unlink(kRootInode, "f")), EROFS);
}

// A directory cycle is reported as one, not as the link counts it throws off.
TEST(WalDirectoryCorruption, DirectoryCycleIsNamedAtOpen) {
  std::string image;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    auto d = dir->names().Mkdir(kRootInode, "d", 0755, kUser);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(dir->names().Mkdir(d->ino, "s", 0755, kUser).ok());
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  bool moved = false;
  for (uint64_t slot = 0; slot < sb.dirent_count && !moved; ++slot) {
    auto* e = reinterpret_cast<format::DirentRecord*>(
        image.data() + sb.dirent_table_offset + slot * format::kDirentSize);
    if (e->in_use != 1 || std::string_view(e->name, e->name_length) != "d") continue;
    e->parent = e->child + 1;  // "s", made right after "d": d now lives inside s
    e->crc = RecordCrc(e, sizeof(*e));
    moved = true;
  }
  ASSERT_TRUE(moved);
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(dir.status().message().find("directory cycle"), std::string::npos)
      << dir.status();
}

// Found by pool_fuzz: Open ignored the reserved inode slot 0, fsck calls it an error.
TEST(WalDirectoryCorruption, ReservedInodeSlotMustBeZero) {
  std::string image = FormattedImage();
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  image[sb.inode_table_offset + 17] = 1;
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(dir.status().message().find("reserved inode slot 0"), std::string::npos)
      << dir.status();
}

// A directory whose parent directory lost its own name: the walk up the tree must not
// reach the unnamed parent before it is refused (it used to throw out_of_range when
// the parent's inode number was the higher one).
TEST(WalDirectoryCorruption, DirectoryUnderAnUnnamedDirectoryIsRefused) {
  std::string image;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    auto a = dir->names().Mkdir(kRootInode, "a", 0755, kUser);
    auto b = dir->names().Mkdir(kRootInode, "b", 0755, kUser);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_LT(a->ino, b->ino);
    ASSERT_TRUE(dir->names().Rename(kRootInode, "a", b->ino, "a", 0).ok());
    ASSERT_TRUE(dir->names().Mkdir(kRootInode, "c", 0755, kUser).ok());  // the journal moves on
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  bool dropped = false;
  for (uint64_t slot = 0; slot < sb.dirent_count && !dropped; ++slot) {
    char* raw = image.data() + sb.dirent_table_offset + slot * format::kDirentSize;
    auto* e = reinterpret_cast<format::DirentRecord*>(raw);
    if (e->in_use != 1 || std::string_view(e->name, e->name_length) != "b") continue;
    std::memset(raw, 0, format::kDirentSize);
    dropped = true;
  }
  ASSERT_TRUE(dropped);
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("has no name"), std::string::npos) << dir.status();
}

// Found by pool_fuzz: Open accepted an entry with bytes after its name, which fsck (and
// format.h) call damage, so the two disagreed on what the tree is.
TEST(WalDirectoryCorruption, BytesAfterANameAreRefused) {
  std::string image;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    ASSERT_TRUE(dir->names().Create(kRootInode, "f", 0600, kUser, true).ok());
    ASSERT_TRUE(dir->names().Mkdir(kRootInode, "d", 0755, kUser).ok());  // the journal moves on
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  bool damaged = false;
  for (uint64_t slot = 0; slot < sb.dirent_count && !damaged; ++slot) {
    auto* e = reinterpret_cast<format::DirentRecord*>(
        image.data() + sb.dirent_table_offset + slot * format::kDirentSize);
    if (e->in_use != 1 || std::string_view(e->name, e->name_length) != "f") continue;
    e->name[200] = 'x';
    e->crc = RecordCrc(e, sizeof(*e));
    damaged = true;
  }
  ASSERT_TRUE(damaged);
  auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(image));
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("bytes after the name"), std::string::npos)
      << dir.status();
}

// Found by pool_fuzz: Open refused a directory whose (unused) size field exceeded the
// pool, a pool fsck calls clean, so a repaired pool could still not be mounted.
TEST(WalDirectoryCorruption, DirectorySizeIsNotJudged) {
  std::string image;
  uint64_t ino = 0;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    auto d = dir->names().Mkdir(kRootInode, "d", 0755, kUser);
    ASSERT_TRUE(d.ok());
    ino = d->ino;
    ASSERT_TRUE(dir->names().Mkdir(kRootInode, "e", 0755, kUser).ok());  // the journal moves on
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  auto* r = reinterpret_cast<format::InodeRecord*>(image.data() + sb.inode_table_offset +
                                                   ino * format::kInodeSize);
  r->size = uint64_t{1} << 40;
  r->crc = RecordCrc(r, sizeof(*r));
  MemoryRegion region(image);
  auto report = CheckPool(region, FsckOptions{});
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
  auto dir = OpenImage(image);
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->names().GetAttr(ino)->size, format::kBlockSize);
}

// Open and fsck agree on symlink targets: 1..416 bytes, no NUL.
TEST(WalDirectoryCorruption, InvalidSymlinkTargetsAreRefused) {
  std::string image;
  uint64_t ino = 0;
  {
    std::string* bytes = nullptr;
    auto dir = OpenImage(FormattedImage(), true, &bytes);
    auto l = dir->names().Symlink(kRootInode, "l", "target", kUser);
    ASSERT_TRUE(l.ok());
    ino = l->ino;
    ASSERT_TRUE(dir->names().Mkdir(kRootInode, "d", 0755, kUser).ok());  // the journal moves on
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  const format::Superblock sb = *reinterpret_cast<const format::Superblock*>(image.data());
  for (int variant = 0; variant < 2; ++variant) {
    std::string bad = image;
    auto* r = reinterpret_cast<format::InodeRecord*>(bad.data() + sb.inode_table_offset +
                                                     ino * format::kInodeSize);
    if (variant == 0) {
      r->size = 0;
    } else {
      reinterpret_cast<char*>(r->extents)[2] = '\0';
    }
    r->crc = RecordCrc(r, sizeof(*r));
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(bad));
    ASSERT_FALSE(dir.ok()) << variant;
    EXPECT_NE(dir.status().message().find(variant == 0 ? "symlink target length 0 is not within"
                                                       : "symlink target contains a NUL byte"),
              std::string::npos)
        << dir.status();
  }
}

TEST(WalDirectoryCorruption, ReportedNeverTrusted) {
  const std::string good = FormattedImage();
  {
    std::string bad = good;
    bad[format::kSuperblockOffset[0] + 40] ^= 1;
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(bad));
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(dir.status().message().find("superblock A"), std::string::npos)
        << dir.status();
  }
  {
    std::string bad(good.size(), '\0');
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(bad));
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.status().message().find("not a walfs pool"), std::string::npos);
  }
  {
    std::string bad = good;
    format::Superblock sb;
    std::memcpy(&sb, good.data(), sizeof(sb));
    bad[sb.inode_table_offset + format::kInodeSize + 30] ^= 0x40;  // root inode
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(bad));
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.status().message().find("inode 1"), std::string::npos) << dir.status();
  }
  {
    std::string truncated = good.substr(0, good.size() / 2);
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(truncated));
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.status().message().find("truncated"), std::string::npos) << dir.status();
  }
}

TEST(WalDirectoryConcurrency, ParallelWritersAndNamespaceChanges) {
  auto dir = OpenImage(FormattedImage(64 << 20, 512));
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string name = absl::StrCat("t", t, "_", i);
        auto f = dir->names().Create(kRootInode, name, 0600, kUser, true);
        ASSERT_TRUE(f.ok()) << f.status();
        const std::string data(3000 + i * 100, static_cast<char>('a' + t));
        ASSERT_TRUE(dir->data().Write(f->ino, 0, Bytes(data), false).ok());
        EXPECT_EQ(ReadAll(*dir, f->ino), data);
        if (i % 3 == 0) {
          ASSERT_TRUE(dir->names().Rename(kRootInode, name, kRootInode, name + ".r", 0).ok());
        }
        if (i % 4 == 0) {
          ASSERT_TRUE(dir->names().Unlink(kRootInode, i % 3 == 0 ? name + ".r" : name).ok());
        }
        dir->names().Forget(f->ino, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(List(*dir, kRootInode).size(), 2u + kThreads * 15);
}

}  // namespace
}  // namespace walfs::core

namespace walfs::core {
namespace {

TEST(FormatPool, RootOwnerAndModeAreConfigurable) {
  MemoryRegion region(32 << 20);
  FormatOptions opts;
  opts.segment_size = testing::kTestSegment;
  opts.root_uid = 105;
  opts.root_gid = 111;
  opts.root_mode = 0700;
  ASSERT_TRUE(FormatPool(region, opts).ok());
  auto dir = testing::OpenImage(region.bytes());
  auto root = dir->names().GetAttr(kRootInode);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->uid, 105u);
  EXPECT_EQ(root->gid, 111u);
  EXPECT_EQ(root->mode, S_IFDIR | 0700u);
}

TEST(FormatPool, RejectsBadGeometry) {
  MemoryRegion region(32 << 20);
  FormatOptions opts;
  opts.segment_size = 3 << 20;
  EXPECT_EQ(FormatPool(region, opts).code(), absl::StatusCode::kInvalidArgument);
  opts.segment_size = 64 << 20;  // larger than the pool
  auto s = FormatPool(region, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("too small"), std::string::npos) << s;
}

}  // namespace
}  // namespace walfs::core

namespace walfs::core {
namespace {

// Random damage anywhere in a populated pool: Open either refuses with DataLoss or gives
// a directory that can be walked and read without crashing. Never anything else.
TEST(WalDirectoryCorruption, RandomDamageNeverCrashes) {
  std::string image;
  {
    std::string* bytes = nullptr;
    auto dir = testing::OpenImage(testing::FormattedImage(8 << 20, 64), true, &bytes);
    auto d = dir->names().Mkdir(kRootInode, "archive_status", 0700, kUser);
    for (int i = 0; i < 6; ++i) {
      auto f =
          dir->names().Create(i % 2 ? d->ino : kRootInode, absl::StrCat("f", i), 0600, kUser, true);
      ASSERT_TRUE(
          dir->data().Write(f->ino, 0, testing::Bytes(std::string(5000 * i + 1, 'x')), false).ok());
    }
    ASSERT_TRUE(dir->names().Create(kRootInode, kSeg, 0600, kUser, true).ok());
    ASSERT_TRUE(dir->names().Symlink(kRootInode, "l", "f1", kUser).ok());
    ASSERT_TRUE(dir->Close().ok());
    image = *bytes;
  }
  format::Superblock sb;
  std::memcpy(&sb, image.data(), sizeof(sb));
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245 + 12345; };
  int refused = 0, opened = 0;
  for (int round = 0; round < 400; ++round) {
    std::string bad = image;
    const int flips = 1 + next() % 4;
    for (int k = 0; k < flips; ++k) {
      // Mostly metadata (where damage matters), sometimes anywhere.
      const uint64_t span = next() % 4 ? sb.data_offset : bad.size();
      bad[next() % span] ^= static_cast<char>(1 + next() % 255);
    }
    auto dir = WalDirectory::Open(std::make_unique<MemoryRegion>(bad));
    if (!dir.ok()) {
      EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss) << dir.status();
      ++refused;
      continue;
    }
    ++opened;
    std::vector<InodeId> stack = {kRootInode};
    while (!stack.empty()) {
      const InodeId cur = stack.back();
      stack.pop_back();
      std::vector<std::string> names;
      const absl::Status listed = (*dir)->names().Readdir(cur, 0, [&](const DirEntry& e) {
        if (e.name != "." && e.name != "..") names.emplace_back(e.name);
        return true;
      });
      ASSERT_TRUE(listed.ok()) << listed;
      for (const auto& n : names) {
        auto a = (*dir)->names().Lookup(cur, n);
        ASSERT_TRUE(a.ok()) << a.status();
        if (S_ISDIR(a->mode)) stack.push_back(a->ino);
        if (S_ISREG(a->mode)) {
          std::string buf(a->size, '\0');
          EXPECT_TRUE((*dir)->data().Read(a->ino, 0, absl::MakeSpan(buf)).ok());
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace walfs::core
