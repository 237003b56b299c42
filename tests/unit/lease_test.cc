// Direct-access leases in core (lease.cc), their ioctl request and reply
// (fs/lease_reply.cc) and the revocation stamps (fs/lease_stamps.cc).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/format.h"
#include "core/fsck.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "fs/lease_protocol.h"
#include "fs/lease_reply.h"
#include "fs/lease_stamps.h"
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
constexpr char kSegment[] = "000000010000000000000001";

int Errno(const absl::Status& s) { return ErrnoFromStatus(s); }

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = OpenImage(FormattedImage(), true, &bytes_); }
  void Reopen() {
    std::string image = *bytes_;
    dir_.reset();
    dir_ = OpenImage(std::move(image), true, &bytes_);
    ASSERT_NE(dir_, nullptr);
  }
  void TearDown() override {
    if (dir_ == nullptr) return;
    ASSERT_TRUE(dir_->Close().ok());
    ExpectFsckClean(*bytes_);
  }
  // A zero-filled segment, as PostgreSQL leaves it before reopening it to write WAL.
  InodeId Segment(const char* name = kSegment) {
    auto attr = dir_->names().Create(kRootInode, name, 0600, kUser, true);
    EXPECT_TRUE(attr.ok()) << attr.status();
    std::string zeros(kTestSegment, '\0');
    EXPECT_TRUE(dir_->data().Write(attr->ino, 0, Bytes(zeros), false).ok());
    return attr->ino;
  }
  // Stores `data` at file offset `off` the way a client does: through the lease's runs.
  void StoreThroughLease(const Lease& lease, uint64_t off, const std::string& data) {
    ASSERT_LE(off + data.size(), lease.size);
    uint64_t done = 0;
    for (const LeaseRun& r : lease.runs) {
      while (done < data.size() && off + done >= r.file_offset &&
             off + done < r.file_offset + r.length) {
        const uint64_t in_run = off + done - r.file_offset;
        const uint64_t n = std::min<uint64_t>(r.length - in_run, data.size() - done);
        std::memcpy(bytes_->data() + r.pool_offset + in_run, data.data() + done, n);
        done += n;
      }
    }
    ASSERT_EQ(done, data.size());
  }
  uint64_t FreeBlocks() { return dir_->Statfs().free_blocks; }

  std::unique_ptr<WalDirectory> dir_;
  std::string* bytes_ = nullptr;
};

TEST_F(LeaseTest, RunsCoverTheFileAndStoresThroughThemReadBack) {
  InodeId ino = Segment();
  auto lease = dir_->leases().AcquireLease(ino);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->size, kTestSegment);
  uint64_t next = 0;
  for (const LeaseRun& r : lease->runs) {
    EXPECT_EQ(r.file_offset, next);
    EXPECT_EQ(r.pool_offset % format::kBlockSize, 0u);
    EXPECT_EQ(r.length % format::kBlockSize, 0u);
    EXPECT_GE(r.pool_offset, dir_->superblock().data_offset);
    next += r.length;
  }
  EXPECT_EQ(next, kTestSegment);
  std::string page(8192, 'w');
  StoreThroughLease(*lease, 3 * 8192, page);
  std::string out(8192, '\0');
  ASSERT_TRUE(dir_->data().Read(ino, 3 * 8192, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, page);
  EXPECT_EQ(dir_->counters().leases_active, 1u);
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_EQ(dir_->counters().leases_active, 0u);
  EXPECT_EQ(dir_->counters().leases_granted, 1u);
  EXPECT_EQ(dir_->counters().leases_released, 1u);
}

// Segments of 2 MiB or more start on 2 MiB boundaries of the pool (so a client's mapping
// can use 2 MiB pages) although the data area itself does not, and segments still pack
// one after the other; a file too small to align stays first-fit.
TEST(LeaseAlignmentTest, SegmentRunsStartOn2MiBPoolBoundaries) {
  constexpr uint64_t kSeg = 4 << 20, k2M = 2 << 20;
  MemoryRegion region(64 << 20);
  FormatOptions opts;
  opts.segment_size = kSeg;
  opts.inode_count = 256;
  opts.region_is_zero = true;
  ASSERT_TRUE(FormatPool(region, opts).ok());
  std::string* bytes = nullptr;
  auto dir = OpenImage(region.bytes(), true, &bytes);
  ASSERT_NE(dir, nullptr);
  ASSERT_NE(dir->superblock().data_offset % k2M, 0u) << "the test needs an unaligned data area";
  uint64_t last_end = 0;
  for (const char* name : {"000000010000000000000001", "000000010000000000000002"}) {
    auto attr = dir->names().Create(kRootInode, name, 0600, kUser, true);
    ASSERT_TRUE(attr.ok()) << attr.status();
    std::string zeros(kSeg, '\0');
    ASSERT_TRUE(dir->data().Write(attr->ino, 0, Bytes(zeros), false).ok());
    auto lease = dir->leases().AcquireLease(attr->ino);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(lease->runs.size(), 1u);
    EXPECT_EQ(lease->runs[0].pool_offset % k2M, 0u) << name;
    EXPECT_EQ(lease->runs[0].length, kSeg);
    if (last_end != 0) {
      EXPECT_EQ(lease->runs[0].pool_offset, last_end);
    }
    last_end = lease->runs[0].pool_offset + kSeg;
    ASSERT_TRUE(dir->leases().ReleaseLease(attr->ino).ok());
  }
  ASSERT_TRUE(dir->Close().ok());
  ExpectFsckClean(*bytes);
}

TEST_F(LeaseTest, SmallFileLeaseStopsAtItsSize) {
  auto attr = dir_->names().Create(kRootInode, "00000002.history", 0600, kUser, true);
  ASSERT_TRUE(attr.ok());
  ASSERT_TRUE(dir_->data().Write(attr->ino, 0, Bytes(std::string(5000, 'h')), false).ok());
  auto lease = dir_->leases().AcquireLease(attr->ino);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->size, 5000u);
  uint64_t mapped = 0;
  for (const LeaseRun& r : lease->runs) mapped += r.length;
  EXPECT_EQ(mapped, 2 * format::kBlockSize);  // whole blocks, no more
  ASSERT_TRUE(dir_->leases().ReleaseLease(attr->ino).ok());
}

TEST_F(LeaseTest, RefusedInMsyncModeForEmptyFilesAndDirectories) {
  auto empty = dir_->names().Create(kRootInode, "empty", 0600, kUser, true);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(Errno(dir_->leases().AcquireLease(empty->ino).status()), ENODATA);
  EXPECT_EQ(Errno(dir_->leases().AcquireLease(kRootInode).status()), EINVAL);
  EXPECT_EQ(Errno(dir_->leases().AcquireLease(9999).status()), ESTALE);
  InodeId ino = Segment();
  ASSERT_TRUE(dir_->Close().ok());
  std::string image = *bytes_;
  dir_.reset();
  dir_ = OpenImage(std::move(image), /*pmem=*/false, &bytes_);
  ASSERT_NE(dir_, nullptr);
  EXPECT_EQ(Errno(dir_->leases().AcquireLease(ino).status()), EOPNOTSUPP);
  EXPECT_EQ(dir_->counters().leases_active, 0u);
  // A release without a lease is a caller bug, reported, not counted.
  EXPECT_EQ(Errno(dir_->leases().ReleaseLease(ino)), EINVAL);
}

TEST_F(LeaseTest, TruncateBelowTheLeaseIsRefusedUntilReleased) {
  InodeId ino = Segment();
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());
  SetattrRequest shrink;
  shrink.size = kTestSegment / 2;
  EXPECT_EQ(Errno(dir_->names().Setattr(ino, shrink).status()), ETXTBSY);
  SetattrRequest zero;
  zero.size = 0;
  EXPECT_EQ(Errno(dir_->names().Setattr(ino, zero).status()), ETXTBSY);
  EXPECT_EQ(dir_->names().GetAttr(ino)->size, kTestSegment);
  // Growing (and truncating to the same size) moves no leased block.
  SetattrRequest grow;
  grow.size = kTestSegment + 4096;
  EXPECT_TRUE(dir_->names().Setattr(ino, grow).ok());
  SetattrRequest same;
  same.size = kTestSegment;
  EXPECT_TRUE(dir_->names().Setattr(ino, same).ok());
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_TRUE(dir_->names().Setattr(ino, shrink).ok());
}

TEST_F(LeaseTest, RenewDoesNotCountASecondLease) {
  InodeId ino = Segment();
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());
  ASSERT_TRUE(dir_->leases().AcquireLease(ino, /*renew=*/true).ok());
  EXPECT_EQ(dir_->counters().leases_active, 1u);
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  SetattrRequest zero;
  zero.size = 0;
  EXPECT_TRUE(dir_->names().Setattr(ino, zero).ok());
}

TEST_F(LeaseTest, UnlinkedLeasedFileKeepsItsBlocksUntilTheLastRelease) {
  InodeId ino = Segment();
  const uint64_t free_with_file = FreeBlocks();
  auto lease = dir_->leases().AcquireLease(ino);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());  // a second handle
  // The kernel's references go (FORGET), then the name: only the leases remain.
  dir_->names().Forget(ino, 1);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSegment).ok());
  EXPECT_EQ(FreeBlocks(), free_with_file);
  // A new segment must not get the leased blocks, and stores through the lease stay
  // in the unlinked file.
  Segment("000000010000000000000002");
  StoreThroughLease(*lease, 0, std::string(8192, 'L'));
  std::string out(8192, '\0');
  ASSERT_TRUE(dir_->data().Read(ino, 0, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, std::string(8192, 'L'));
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_TRUE(dir_->names().GetAttr(ino).ok());  // still an orphan: one lease left
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_EQ(Errno(dir_->names().GetAttr(ino).status()), ESTALE);  // reclaimed
  // Its blocks came back zeroed (fsck in TearDown checks free space is zero).
  EXPECT_EQ(dir_->counters().orphans_reclaimed, 1u);
}

TEST_F(LeaseTest, RenamedOverLeasedFileIsReclaimedOnlyAfterRelease) {
  InodeId ino = Segment();
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());
  dir_->names().Forget(ino, 1);
  auto other = dir_->names().Create(kRootInode, "xlogtemp.42", 0600, kUser, true);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(dir_->names().Rename(kRootInode, "xlogtemp.42", kRootInode, kSegment, 0).ok());
  EXPECT_TRUE(dir_->names().GetAttr(ino).ok());
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_EQ(Errno(dir_->names().GetAttr(ino).status()), ESTALE);
}

TEST_F(LeaseTest, CloseLeavesALeasedOrphanForTheNextOpen) {
  InodeId ino = Segment();
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());
  dir_->names().Forget(ino, 1);
  ASSERT_TRUE(dir_->names().Unlink(kRootInode, kSegment).ok());
  const uint64_t free_before = FreeBlocks();
  // The daemon stops while a client still maps the file: nothing may be reclaimed.
  ASSERT_TRUE(dir_->Close().ok());
  EXPECT_EQ(FreeBlocks(), free_before);
  Reopen();  // no client any more: the orphan goes
  EXPECT_EQ(FreeBlocks(), free_before + kTestSegment / format::kBlockSize);
  EXPECT_EQ(Errno(dir_->names().GetAttr(ino).status()), ESTALE);
}

TEST_F(LeaseTest, ReleaseCommitsMtime) {
  InodeId ino = Segment();
  const int64_t before = dir_->names().GetAttr(ino)->mtime_ns;
  ASSERT_TRUE(dir_->leases().AcquireLease(ino).ok());
  const uint64_t commits = dir_->counters().journal_commits;
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
  EXPECT_EQ(dir_->counters().journal_commits, commits + 1);
  const int64_t after = dir_->names().GetAttr(ino)->mtime_ns;
  EXPECT_GT(after, before);
  EXPECT_EQ(dir_->names().GetAttr(ino)->ctime_ns, after);
  Reopen();  // durable: a restart sees it
  EXPECT_EQ(dir_->names().GetAttr(ino)->mtime_ns, after);
}

TEST_F(LeaseTest, ReplyCarriesRunsUuidAndStampButNoPath) {
  InodeId ino = Segment();
  auto lease = dir_->leases().AcquireLease(ino);
  ASSERT_TRUE(lease.ok());
  const fs::LeaseStamp stamp{.offset = 24, .value = 1234, .stamps_id = 77};
  auto reply = std::make_unique<lease::Reply>();
  std::memset(reply.get(), 0xa5, sizeof(*reply));  // every byte is the daemon's
  ASSERT_TRUE(
      fs::FillLeaseReply(*lease, dir_->superblock(), stamp, lease::kAccessWrite, reply.get())
          .ok());
  EXPECT_EQ(reply->magic, lease::kMagic);
  EXPECT_EQ(reply->version, lease::kVersion);
  EXPECT_EQ(reply->access, lease::kAccessWrite);
  EXPECT_EQ(reply->flags, 0u);
  EXPECT_EQ(reply->reserved0, 0u);
  EXPECT_EQ(reply->ino, ino);
  EXPECT_EQ(reply->leased_size, kTestSegment);
  EXPECT_EQ(reply->block_size, dir_->superblock().block_size);
  EXPECT_EQ(reply->run_count, lease->runs.size());
  for (uint32_t i = 0; i < reply->run_count; ++i) {
    EXPECT_EQ(reply->runs[i].file_offset, lease->runs[i].file_offset);
    EXPECT_EQ(reply->runs[i].pool_offset, lease->runs[i].pool_offset);
    EXPECT_EQ(reply->runs[i].length, lease->runs[i].length);
    // L1: inside the data area of the superblock a client reads itself.
    EXPECT_GE(reply->runs[i].pool_offset, dir_->superblock().data_offset);
    EXPECT_LE(reply->runs[i].pool_offset + reply->runs[i].length, bytes_->size());
  }
  for (uint32_t i = reply->run_count; i < lease::kMaxRuns; ++i) {
    EXPECT_EQ(reply->runs[i].length, 0u);
  }
  EXPECT_EQ(reply->stamp_offset, 24u);
  EXPECT_EQ(reply->stamp, 1234u);
  EXPECT_EQ(reply->stamps_id, 77u);
  // The uuid the client compares with the superblock it read from its pool descriptor.
  EXPECT_EQ(std::memcmp(reply->uuid, dir_->superblock().uuid, 16), 0);
  EXPECT_EQ(std::memcmp(bytes_->data() + format::kSuperblockOffset[0] +
                            offsetof(format::Superblock, uuid),
                        reply->uuid, 16),
            0);

  Lease too_many = *lease;
  too_many.runs.resize(lease::kMaxRuns + 1);
  EXPECT_FALSE(
      fs::FillLeaseReply(too_many, dir_->superblock(), stamp, lease::kAccessWrite, reply.get())
          .ok());
  Lease none = *lease;
  none.runs.clear();
  EXPECT_FALSE(
      fs::FillLeaseReply(none, dir_->superblock(), stamp, lease::kAccessWrite, reply.get()).ok());
  // A lease that could not be revoked is never sent.
  EXPECT_FALSE(fs::FillLeaseReply(*lease, dir_->superblock(), fs::LeaseStamp{},
                                  lease::kAccessWrite, reply.get())
                   .ok());
  EXPECT_FALSE(fs::FillLeaseReply(*lease, dir_->superblock(),
                                  fs::LeaseStamp{.offset = 3, .value = 9, .stamps_id = 77},
                                  lease::kAccessWrite, reply.get())
                   .ok());
  EXPECT_FALSE(fs::FillLeaseReply(*lease, dir_->superblock(),
                                  fs::LeaseStamp{.offset = 24, .value = 9}, lease::kAccessWrite,
                                  reply.get())
                   .ok());
  ASSERT_TRUE(dir_->leases().ReleaseLease(ino).ok());
}

TEST(LeaseRequestTest, OnlyAV3WriteOrReadRequestIsTaken) {
  lease::Reply r{};
  EXPECT_EQ(fs::CheckLeaseRequest(r), EINVAL);  // an old client's zeroed buffer
  r.magic = lease::kMagic;
  r.version = lease::kVersion;
  r.access = lease::kAccessWrite;
  EXPECT_EQ(fs::CheckLeaseRequest(r), 0);
  r.access = lease::kAccessRead;
  EXPECT_EQ(fs::CheckLeaseRequest(r), 0);
  for (uint32_t access : {0u, 3u, 4u, 0x80000001u}) {
    r.access = access;
    EXPECT_EQ(fs::CheckLeaseRequest(r), EINVAL) << access;
  }
  r.access = lease::kAccessWrite;
  r.version = 2;
  EXPECT_EQ(fs::CheckLeaseRequest(r), EINVAL);
  r.version = lease::kVersion;
  r.magic = ~lease::kMagic;
  EXPECT_EQ(fs::CheckLeaseRequest(r), EINVAL);
}

// ---- Revocation stamps (fs/lease_stamps.h) -------------------------------------------

// What a client gets: a duplicate of the memfd (the hello's SCM_RIGHTS makes one).
int ClientDescriptor(const fs::LeaseStamps& stamps) {
  return fcntl(stamps.fd(), F_DUPFD_CLOEXEC, 0);
}

TEST(LeaseStampsTest, EveryRenewalIsANewStampAndClientsSeeIt) {
  auto stamps = fs::LeaseStamps::Create(4);
  ASSERT_TRUE(stamps.ok()) << stamps.status();
  const int fd = ClientDescriptor(**stamps);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 4 * 8);
  // What a client maps: the memfd, read-only.
  void* map = mmap(nullptr, 4 * 8, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  close(fd);
  const auto* words = static_cast<const std::atomic<uint64_t>*>(map);

  std::set<uint64_t> seen;
  std::optional<uint32_t> a = (*stamps)->Allocate();
  std::optional<uint32_t> b = (*stamps)->Allocate();
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  const uint64_t sa = (*stamps)->Renew(*a);
  const uint64_t sb = (*stamps)->Renew(*b);
  EXPECT_NE(sa, 0u);
  EXPECT_EQ(words[fs::LeaseStamps::OffsetOf(*a) / 8].load(), sa);
  EXPECT_EQ(words[fs::LeaseStamps::OffsetOf(*b) / 8].load(), sb);
  seen.insert({sa, sb});
  // A close (FLUSH) of a's handle: a's client sees a change, b's does not.
  (*stamps)->Revoke(*a);
  EXPECT_NE(words[*a].load(), sa);
  EXPECT_EQ(words[*b].load(), sb);
  EXPECT_TRUE(seen.insert(words[*a].load()).second);
  // Freed and handed to another lease: never the old stamp again (no ABA).
  (*stamps)->Free(*a);
  EXPECT_TRUE(seen.insert(words[*a].load()).second);
  std::optional<uint32_t> c = (*stamps)->Allocate();
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, *a);
  EXPECT_TRUE(seen.insert((*stamps)->Renew(*c)).second);
  EXPECT_EQ((*stamps)->Read(*c), words[*c].load());
  munmap(map, 4 * 8);
}

TEST(LeaseStampsTest, SealsKeepEveryoneButTheDaemonFromWriting) {
  auto stamps = fs::LeaseStamps::Create(512);
  ASSERT_TRUE(stamps.ok()) << stamps.status();
  const int fd = ClientDescriptor(**stamps);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GET_SEALS),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);
  EXPECT_EQ(fs::LeaseStamps::kSeals, fcntl(fd, F_GET_SEALS));
  const size_t bytes = 512 * 8;
  errno = 0;
  EXPECT_EQ(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  const uint64_t forged = 77;
  errno = 0;
  EXPECT_EQ(pwrite(fd, &forged, sizeof(forged), 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_NE(ftruncate(fd, 1 << 20), 0);
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);  // F_SEAL_SEAL
  // A private writable mapping is allowed but changes nothing anyone else reads.
  void* priv = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ASSERT_NE(priv, MAP_FAILED);
  static_cast<uint64_t*>(priv)[0] = forged;
  // The daemon's own writes go through and are seen through a read-only mapping.
  void* ro = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(ro, MAP_FAILED);
  std::optional<uint32_t> slot = (*stamps)->Allocate();
  ASSERT_TRUE(slot);
  EXPECT_EQ(*slot, 0u);
  const uint64_t stamp = (*stamps)->Renew(*slot);
  EXPECT_EQ(static_cast<const volatile uint64_t*>(ro)[0], stamp);
  EXPECT_NE(stamp, forged);
  uint64_t read_back = 0;
  EXPECT_EQ(pread(fd, &read_back, sizeof(read_back), 0), 8);
  EXPECT_EQ(read_back, stamp);
  munmap(ro, bytes);
  munmap(priv, bytes);
  close(fd);
  // Close-on-exec, so no child of the daemon inherits it.
  EXPECT_NE(fcntl((*stamps)->fd(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST(LeaseStampsTest, RunsOutOfSlots) {
  EXPECT_FALSE(fs::LeaseStamps::Create(0).ok());
  auto stamps = fs::LeaseStamps::Create(2);
  ASSERT_TRUE(stamps.ok());
  EXPECT_TRUE((*stamps)->Allocate());
  std::optional<uint32_t> last = (*stamps)->Allocate();
  EXPECT_TRUE(last);
  EXPECT_FALSE((*stamps)->Allocate());
  (*stamps)->Free(*last);
  EXPECT_EQ((*stamps)->Allocate(), last);
}

// A kept client session tells an earlier daemon's stamps from the current one's by this
// id alone (fs/lease_protocol.h): non-zero, and drawn anew for each memfd.
TEST(LeaseStampsTest, EachMemfdHasItsOwnId) {
  auto a = fs::LeaseStamps::Create(2);
  auto b = fs::LeaseStamps::Create(2);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*a)->id(), 0u);
  EXPECT_NE((*b)->id(), 0u);
  EXPECT_NE((*a)->id(), (*b)->id());
}

}  // namespace
}  // namespace walfs::core
