// The reserve (core/layout.h, ReservedBlocks): the last free blocks of a pool
// only WAL segments may take, so a checkpoint or crash recovery after a space shortage
// can still create segments.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "core/format.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "tests/unit/test_pool.h"

namespace walfs::core {
namespace {

using testing::Bytes;
using testing::ExpectFsckClean;
using testing::kTestSegment;

constexpr InodeId kRoot = format::kRootInode;
const Caller kUser{1000, 1000};
constexpr uint64_t kSegBlocks = kTestSegment / format::kBlockSize;

// Fills `d` with one ordinary file until only the reserve is left; returns its inode.
InodeId FillOutsideTheReserve(WalDirectory& d) {
  auto f = d.names().Create(kRoot, "filler", 0600, kUser, true);
  EXPECT_TRUE(f.ok()) << f.status();
  const FsStats st = d.Statfs();
  const uint64_t bytes = (st.free_blocks - st.reserved_blocks) * format::kBlockSize;
  absl::Status s = d.data().Fallocate(f->ino, 0, bytes, 0);
  EXPECT_TRUE(s.ok()) << s;
  return f->ino;
}

TEST(ReserveTest, SizeIsTwoSegmentsAtMostAQuarterOfThePool) {
  auto big = testing::OpenImage(testing::FormattedImage(64 << 20));
  EXPECT_EQ(ReservedBlocks(big->superblock()), kReserveSegments * kSegBlocks);
  EXPECT_EQ(big->Statfs().reserved_blocks, kReserveSegments * kSegBlocks);
  auto tiny = testing::OpenImage(testing::FormattedImage(4 << 20, 32));
  EXPECT_EQ(ReservedBlocks(tiny->superblock()), tiny->superblock().data_blocks / 4);
  EXPECT_LT(ReservedBlocks(tiny->superblock()), kReserveSegments * kSegBlocks);
}

TEST(ReserveTest, OnlySegmentsMayTakeTheReserve) {
  std::string* bytes = nullptr;
  auto d = testing::OpenImage(testing::FormattedImage(32 << 20), true, &bytes);
  ASSERT_NE(d, nullptr);
  const InodeId filler = FillOutsideTheReserve(*d);
  FsStats st = d->Statfs();
  ASSERT_EQ(st.free_blocks, st.reserved_blocks);
  ASSERT_EQ(st.reserved_blocks, kReserveSegments * kSegBlocks);

  // Ordinary files: a write that needs a block, a truncate, a fallocate, a long
  // symlink target all get ENOSPC naming the reserve.
  auto hist = d->names().Create(kRoot, "00000002.history", 0600, kUser, true);
  ASSERT_TRUE(hist.ok());  // an empty file needs no block
  auto w = d->data().Write(hist->ino, 0, Bytes(std::string(100, 'h')), true, false, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(ErrnoFromStatus(w.status()), ENOSPC);
  EXPECT_NE(w.status().message().find("reserved for WAL segments"), std::string::npos)
      << w.status();
  SetattrRequest grow;
  grow.size = 5000;
  EXPECT_EQ(ErrnoFromStatus(d->names().Setattr(hist->ino, grow).status()), ENOSPC);
  EXPECT_EQ(ErrnoFromStatus(d->data().Fallocate(hist->ino, 0, 4096, 0)), ENOSPC);
  EXPECT_EQ(
      ErrnoFromStatus(d->names().Symlink(kRoot, "long", std::string(1000, 'x'), kUser).status()),
      ENOSPC);
  EXPECT_TRUE(d->names().Symlink(kRoot, "short", "inline", kUser).ok());  // needs no block
  EXPECT_TRUE(d->names().Mkdir(kRoot, "archive_status", 0700, kUser).ok());

  // Segments (a segment name, or PostgreSQL's xlogtemp.* being installed) may.
  auto tmp = d->names().Create(kRoot, "xlogtemp.4242", 0600, kUser, true);
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  ASSERT_TRUE(d->names().Rename(kRoot, "xlogtemp.4242", kRoot, "000000010000000000000001", 0).ok());
  auto seg = d->names().Create(kRoot, "000000010000000000000002", 0600, kUser, true);
  ASSERT_TRUE(seg.ok()) << seg.status();
  const std::string wal(kTestSegment, 'w');
  auto n = d->data().Write(seg->ino, 0, Bytes(wal), true, false, nullptr);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(d->Statfs().free_blocks, 0u);
  // Past the reserve, segments get ENOSPC too.
  EXPECT_EQ(ErrnoFromStatus(
                d->names().Create(kRoot, "000000010000000000000003", 0600, kUser, true).status()),
            ENOSPC);

  // Space freed by an ordinary file is usable by ordinary files again.
  d->names().Forget(filler, 1);
  ASSERT_TRUE(d->names().Unlink(kRoot, "filler").ok());
  w = d->data().Write(hist->ino, 0, Bytes(std::string(100, 'h')), true, false, nullptr);
  EXPECT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(d->Close().ok());
  ExpectFsckClean(*bytes);
}

TEST(ReserveTest, AGrowingFileDoesNotTakeTheReserveAhead) {
  auto d = testing::OpenImage(testing::FormattedImage(32 << 20));
  ASSERT_NE(d, nullptr);
  auto f = d->names().Create(kRoot, "grows", 0600, kUser, true);
  ASSERT_TRUE(f.ok());
  const FsStats st = d->Statfs();
  const uint64_t outside = (st.free_blocks - st.reserved_blocks) * format::kBlockSize;
  // Half of what is outside the reserve, then appends: doubling would want as much
  // again as the file holds, more than is left outside the reserve.
  ASSERT_TRUE(d->data().Write(f->ino, 0, Bytes(std::string(outside / 2, 'a')), false).ok());
  ASSERT_TRUE(
      d->data().Write(f->ino, outside / 2, Bytes(std::string(outside / 4, 'b')), false).ok());
  EXPECT_GE(d->Statfs().free_blocks, st.reserved_blocks);
  // And the last block outside the reserve can be written, the next one cannot.
  auto last = d->data().Write(f->ino, outside / 2 + outside / 4,
                              Bytes(std::string(outside - outside / 2 - outside / 4, 'c')), false,
                              false, nullptr);
  EXPECT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(d->Statfs().free_blocks, st.reserved_blocks);
  auto more = d->data().Write(f->ino, outside, Bytes(std::string(1, 'd')), false, false, nullptr);
  EXPECT_EQ(ErrnoFromStatus(more.status()), ENOSPC);
}

}  // namespace
}  // namespace walfs::core
