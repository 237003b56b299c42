// A failed persist (msync EIO) is latched by the region and fails every later durability
// request with EIO, instead of killing the daemon or succeeding silently.
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/unit/failing_region.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::FailingRegion;
using testing::FormattedImage;

constexpr Caller kUser{1000, 1000};
// A WAL segment name: the file gets its whole extent at create, so writes inside it
// commit nothing for allocation.
constexpr char kSegment[] = "000000010000000000000001";

template <typename T>
int Errno(const absl::StatusOr<T>& r) {
  return ErrnoFromStatus(r.status());
}
int Errno(const absl::Status& s) { return ErrnoFromStatus(s); }

TEST(PersistErrorTest, RegionLatchesTheFirstFailure) {
  FailingRegion region(std::string(8192, '\0'), /*pmem=*/false);
  EXPECT_TRUE(region.health().ok());
  region.Persist(0, 10);
  EXPECT_TRUE(region.health().ok());

  region.FailFlushes();
  region.Persist(100, 10);
  region.Persist(200, 10);
  region.Heal();
  region.Persist(300, 10);
  EXPECT_EQ(region.flushes(), 4u);
  // The first failure, whatever succeeded after it.
  EXPECT_EQ(region.health().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(region.health().message(), "flush #2 of [100, +10) failed: Input/output error");
  EXPECT_EQ(ErrnoFromStatus(region.health()), EIO);
}

class PersistErrorPoolTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto region = std::make_unique<FailingRegion>(FormattedImage(), /*pmem=*/GetParam());
    region_ = region.get();
    auto dir = WalDirectory::Open(std::move(region));
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }

  bool pmem() const { return GetParam(); }

  FailingRegion* region_ = nullptr;
  std::unique_ptr<WalDirectory> dir_;
};

TEST_P(PersistErrorPoolTest, EveryLaterDurabilityRequestFailsWithEio) {
  auto f = dir_->names().Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(dir_->data().Write(f->ino, 0, Bytes("before"), /*sync=*/false).ok());
  ASSERT_TRUE(dir_->data().Fsync(f->ino, true).ok());

  region_->FailFlushes();
  // pmem persists every write before it returns, so the write itself reports the
  // failure; msync mode persists at fsync.
  auto w = dir_->data().Write(f->ino, 8192, Bytes("lost?"), /*sync=*/false);
  if (pmem()) {
    EXPECT_EQ(Errno(w), EIO);
  } else {
    ASSERT_TRUE(w.ok()) << w.status();
  }
  EXPECT_EQ(Errno(dir_->data().Fsync(f->ino, true)), EIO);

  // Sticky: the flushes work again, the promises made since they failed do not.
  region_->Heal();
  EXPECT_EQ(Errno(dir_->data().Fsync(f->ino, true)), EIO);
  EXPECT_EQ(Errno(dir_->data().Fsync(f->ino, false)), EIO);
  EXPECT_EQ(Errno(dir_->data().FsyncDir(kRootInode)), EIO);
  EXPECT_EQ(Errno(dir_->data().Write(f->ino, 0, Bytes("sync"), /*sync=*/true)), EIO);
  EXPECT_EQ(Errno(dir_->names().Create(kRootInode, "xlogtemp.1", 0600, kUser, true)), EIO);
  EXPECT_EQ(
      Errno(dir_->names().Rename(kRootInode, kSegment, kRootInode, "000000010000000000000002", 0)),
      EIO);
  EXPECT_EQ(dir_->data().Fsync(f->ino, true).message(),
            dir_->data().FsyncDir(kRootInode).message());  // one error, the first

  // Reading is not a durability request: what was written reads back.
  char buf[6];
  auto r = dir_->data().Read(f->ino, 0, absl::Span<char>(buf, sizeof(buf)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::string(buf, *r), "syncre");
  EXPECT_TRUE(dir_->names().GetAttr(f->ino).ok());

  // A clean unmount cannot claim the pool is consistent on media either.
  EXPECT_EQ(Errno(dir_->Close()), EIO);
}

TEST_P(PersistErrorPoolTest, OnlyDurabilityRequestsFail) {
  auto f = dir_->names().Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(f.ok()) << f.status();
  region_->FailFlushes();
  // Nothing was dirty, so nothing was flushed and nothing failed yet.
  EXPECT_TRUE(dir_->data().Fsync(f->ino, true).ok());
  // In msync mode a plain write promises nothing, so it succeeds; in pmem mode it is
  // persisted before it returns, so it fails.
  auto w = dir_->data().Write(f->ino, 0, Bytes("x"), /*sync=*/false);
  EXPECT_EQ(w.ok(), !pmem()) << w.status();
  EXPECT_EQ(Errno(dir_->data().Fsync(f->ino, true)), EIO);
  EXPECT_TRUE(dir_->names().Lookup(kRootInode, kSegment).ok());
  EXPECT_GT(dir_->Statfs().total_blocks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, PersistErrorPoolTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pmem" : "Msync";
                         });

TEST(PersistErrorTest, OpenRefusesAPoolWhoseRecoveryCannotPersist) {
  // Open replays the journal's last transaction (it is never cleared), which persists.
  std::string image;
  {
    auto dir = testing::OpenImage(FormattedImage(), /*pmem=*/false);
    ASSERT_NE(dir, nullptr);
    ASSERT_TRUE(dir->names().Create(kRootInode, "f", 0600, kUser, true).ok());
    ASSERT_TRUE(dir->Close().ok());
    image.assign(dir->region().data(), dir->region().size());
  }
  auto region = std::make_unique<FailingRegion>(image, /*pmem=*/false);
  region->FailFlushes();
  auto reopened = WalDirectory::Open(std::move(region));
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss) << reopened.status();
  EXPECT_NE(reopened.status().message().find("failed: Input/output error"), std::string::npos)
      << reopened.status();
  // The same image opens fine where persists work.
  EXPECT_NE(testing::OpenImage(image, /*pmem=*/false), nullptr);
}

// Apply after commit: an operation whose commit fails leaves the namespace in memory as
// the media have it. The device dies either at the journal persist (the commit point is
// not reached: nothing changed, in memory or on the media) or at the persist of the
// home records (the transaction is durable in the journal: the change is made in memory
// too, and replay completes it on the media). Either way the operation reports EIO, and
// the namespace read from the running directory equals the one a fresh open of the
// media shows.

// Every name under the root, with what a stat shows of it (and a symlink's target).
std::map<std::string, std::string> Tree(WalDirectory& dir) {
  std::map<std::string, std::string> tree;
  std::function<void(InodeId, const std::string&)> walk = [&](InodeId ino,
                                                             const std::string& path) {
    std::vector<std::pair<std::string, InodeId>> entries;
    absl::Status s = dir.names().Readdir(ino, 0, [&](const DirEntry& e) {
      if (e.name != "." && e.name != "..") entries.emplace_back(std::string(e.name), e.ino);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    for (const auto& [name, child] : entries) {
      auto a = dir.names().GetAttr(child);
      EXPECT_TRUE(a.ok()) << a.status();
      if (!a.ok()) continue;
      std::string desc = absl::StrCat("ino ", child, " mode ", a->mode, " nlink ", a->nlink,
                                      " size ", a->size, " blocks ", a->blocks);
      if ((a->mode & S_IFMT) == S_IFLNK) {
        auto t = dir.names().Readlink(child);
        if (t.ok()) absl::StrAppend(&desc, " -> ", *t);
      }
      tree[path + name] = desc;
      if ((a->mode & S_IFMT) == S_IFDIR) walk(child, path + name + "/");
    }
  };
  walk(kRootInode, "/");
  return tree;
}

// The inodes the scenario made before the failure.
struct Made {
  InodeId file, seg, dir;
};

struct FailedOp {
  const char* name;
  // Run after the device failure is armed; must fail with EIO.
  std::function<absl::Status(WalDirectory&, const Made&)> op;
};

absl::Status StatusOf(const absl::StatusOr<Attr>& r) { return r.status(); }

const FailedOp kFailedOps[] = {
    {"create",
     [](WalDirectory& d, const Made&) {
       return StatusOf(d.names().Create(kRootInode, "new", 0600, kUser, true));
     }},
    {"create_segment",
     [](WalDirectory& d, const Made&) {
       return StatusOf(d.names().Create(kRootInode, "000000010000000000000009", 0600, kUser, true));
     }},
    {"mkdir",
     [](WalDirectory& d, const Made&) {
       return StatusOf(d.names().Mkdir(kRootInode, "newdir", 0700, kUser));
     }},
    {"symlink",
     [](WalDirectory& d, const Made&) {
       return StatusOf(d.names().Symlink(kRootInode, "lnk", "target", kUser));
     }},
    {"link",
     [](WalDirectory& d, const Made& m) {
       return StatusOf(d.names().Link(m.file, kRootInode, "hard"));
     }},
    {"unlink", [](WalDirectory& d, const Made&) { return d.names().Unlink(kRootInode, "file"); }},
    {"rmdir", [](WalDirectory& d, const Made&) { return d.names().Rmdir(kRootInode, "dir"); }},
    {"rename",
     [](WalDirectory& d, const Made&) {
       return d.names().Rename(kRootInode, "file", kRootInode, "renamed", 0);
     }},
    {"rename_over",
     [](WalDirectory& d, const Made&) {
       return d.names().Rename(kRootInode, "file", kRootInode, kSegment, 0);
     }},
    {"rename_into_dir",
     [](WalDirectory& d, const Made& m) {
       return d.names().Rename(kRootInode, "file", m.dir, "moved", 0);
     }},
    {"exchange",
     [](WalDirectory& d, const Made&) {
       return d.names().Rename(kRootInode, "file", kRootInode, kSegment, kRenameExchange);
     }},
    {"rename_segment_away",
     [](WalDirectory& d, const Made&) {
       // Gives the segment's extent back through a trim carrier in the same commit.
       return d.names().Rename(kRootInode, kSegment, kRootInode, "00000002.history", 0);
     }},
    {"truncate_shrink",
     [](WalDirectory& d, const Made& m) {
       SetattrRequest r;
       r.size = 10;
       return StatusOf(d.names().Setattr(m.file, r));
     }},
    {"truncate_grow",
     [](WalDirectory& d, const Made& m) {
       SetattrRequest r;
       r.size = 200000;
       return StatusOf(d.names().Setattr(m.file, r));
     }},
    {"chmod",
     [](WalDirectory& d, const Made& m) {
       SetattrRequest r;
       r.mode = 0640;
       return StatusOf(d.names().Setattr(m.file, r));
     }},
    {"fallocate",
     [](WalDirectory& d, const Made& m) { return d.data().Fallocate(m.file, 0, 100000, 0); }},
    {"append_dsync",
     [](WalDirectory& d, const Made& m) -> absl::Status {
       // A growing write allocates (an edit), then its size commits. O_DSYNC: in msync
       // mode a plain write promises nothing, and its size is in memory (the page cache)
       // before any fsync, as on every file system.
       return d.data().Write(m.file, 5000, Bytes(std::string(3000, 'x')), /*sync=*/true).status();
     }},
    {"segment_write_past_eof",
     [](WalDirectory& d, const Made& m) -> absl::Status {
       // No allocation: only the size commits.
       auto w = d.data().Write(m.seg, 8192, Bytes(std::string(8192, 'w')), /*sync=*/true);
       if (!w.ok()) return w.status();
       return d.data().Fsync(m.seg, true);
     }},
};

enum class FailAt { kJournal, kHome };

class ApplyAfterCommitTest
    : public ::testing::TestWithParam<std::tuple<bool, FailAt, size_t>> {};

TEST_P(ApplyAfterCommitTest, NamespaceMatchesTheMediaAfterAFailedCommit) {
  const auto [pmem, fail_at, index] = GetParam();
  const FailedOp& op = kFailedOps[index];
  auto owned = std::make_unique<FailingRegion>(FormattedImage(), pmem);
  FailingRegion* region = owned.get();
  auto opened = WalDirectory::Open(std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status();
  WalDirectory& dir = **opened;

  auto file = dir.names().Create(kRootInode, "file", 0600, kUser, true);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(dir.data().Write(file->ino, 0, Bytes(std::string(5000, 'f')), false).ok());
  ASSERT_TRUE(dir.data().Fsync(file->ino, false).ok());
  ASSERT_TRUE(dir.data().Release(file->ino).ok());
  auto seg = dir.names().Create(kRootInode, kSegment, 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_TRUE(dir.data().Write(seg->ino, 0, Bytes(std::string(8192, 's')), true).ok());
  auto sub = dir.names().Mkdir(kRootInode, "dir", 0700, kUser);
  ASSERT_TRUE(sub.ok()) << sub.status();
  // Nothing holds a lookup reference: an unlinked inode is reclaimed at once.
  dir.names().Forget(file->ino, 1);
  dir.names().Forget(seg->ino, 1);
  dir.names().Forget(sub->ino, 1);
  const auto before = Tree(dir);
  const FsStats stats_before = dir.Statfs();

  const format::Superblock& sb = dir.superblock();
  if (fail_at == FailAt::kJournal) {
    region->FailFlushesFrom(sb.journal_offset, sb.journal_offset + sb.journal_size);
  } else {
    region->FailFlushesFrom(sb.inode_table_offset, sb.data_offset);
  }
  absl::Status s = op.op(dir, Made{file->ino, seg->ino, sub->ino});
  // In msync mode the home records are not persisted at commit: they ride in the later
  // journal transactions (core/journal.h), and their persist fails at the clean close.
  const bool home_deferred = !pmem && fail_at == FailAt::kHome;
  if (home_deferred) {
    EXPECT_TRUE(s.ok()) << op.name << ": " << s;
  } else {
    EXPECT_EQ(Errno(s), EIO) << op.name << ": " << s;
  }
  const auto after = Tree(dir);
  if (home_deferred) {
    EXPECT_NE(after, before) << op.name << ": the transaction committed";
    EXPECT_EQ(Errno(dir.Close()), EIO) << op.name;
  } else if (fail_at == FailAt::kJournal) {
    EXPECT_EQ(after, before) << op.name << ": the commit point was not reached";
    EXPECT_EQ(dir.Statfs().free_blocks, stats_before.free_blocks) << op.name;
    EXPECT_EQ(dir.Statfs().free_inodes, stats_before.free_inodes) << op.name;
  } else {
    EXPECT_NE(after, before) << op.name << ": the transaction is durable, so it is applied";
  }

  // What a restart would find on these media.
  auto media = testing::OpenImage(region->bytes(), pmem);
  ASSERT_NE(media, nullptr);
  EXPECT_EQ(Tree(*media), after) << op.name;
  if (fail_at == FailAt::kJournal) {
    EXPECT_EQ(media->Statfs().free_blocks, stats_before.free_blocks) << op.name;
    EXPECT_EQ(media->Statfs().free_inodes, stats_before.free_inodes) << op.name;
  }
  ASSERT_TRUE(media->Close().ok());
  testing::ExpectFsckClean(std::string(media->region().data(), media->region().size()));
}

INSTANTIATE_TEST_SUITE_P(
    All, ApplyAfterCommitTest,
    ::testing::Combine(::testing::Values(true, false),
                       ::testing::Values(FailAt::kJournal, FailAt::kHome),
                       ::testing::Range<size_t>(0, std::size(kFailedOps))),
    [](const ::testing::TestParamInfo<std::tuple<bool, FailAt, size_t>>& info) {
      return absl::StrCat(kFailedOps[std::get<2>(info.param)].name, "_",
                          std::get<1>(info.param) == FailAt::kJournal ? "journal" : "home",
                          "_", std::get<0>(info.param) ? "pmem" : "msync");
    });

}  // namespace
}  // namespace walfs::core
