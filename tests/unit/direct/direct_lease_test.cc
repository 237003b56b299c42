// Lease validation, the checks against the session, the open-time decision, pinning,
// and a lease end to end on tmpfs files: a crafted pool file and a sealed stamps memfd
// installed as the mount's session, a stand-in for the walfs file, and the ioctl
// answered by the test.
#include "fs/direct/lease.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fs/direct/direct_copy.h"
#include "fs/direct/direct_read.h"
#include "fs/direct/direct_write.h"
#include "fs/direct/lease_mapping.h"
#include "gtest/gtest.h"
#include "tests/unit/direct/direct_test_pool.h"

namespace walfs::direct {
namespace {

using testpool::kBlock;
using testpool::kDataOffset;
using testpool::kPoolSize;
using testpool::kStampSlots;
using testpool::kStampsId;
using testpool::kUuid;
// The lease's revocation word: the second of the stamps.
constexpr uint64_t kStamp = 42;
constexpr uint64_t kStampOffset = 8;

// The file's bytes [0, 9 blocks) live in two runs of the data area, out of pool order;
// the lease ends inside the second run.
lease::Reply ValidReply() {
  lease::Reply r;
  memset(&r, 0, sizeof(r));
  r.magic = lease::kMagic;
  r.version = lease::kVersion;
  r.access = lease::kAccessWrite;
  r.ino = 42;
  r.block_size = kBlock;
  r.leased_size = 9 * kBlock - 100;
  memcpy(r.uuid, kUuid, sizeof(kUuid));
  r.run_count = 2;
  r.runs[0] = {.file_offset = 0, .pool_offset = 64 * kBlock, .length = 4 * kBlock};
  r.runs[1] = {.file_offset = 4 * kBlock, .pool_offset = 32 * kBlock, .length = 5 * kBlock};
  r.stamp = kStamp;
  r.stamp_offset = kStampOffset;
  r.stamps_id = kStampsId;
  return r;
}

// ---- ValidateReply ------------------------------------------------------------------

TEST(DirectLeaseValidateTest, AcceptsAValidReply) {
  EXPECT_EQ(ValidateReply(ValidReply()), nullptr);
  lease::Reply read = ValidReply();
  read.access = lease::kAccessRead;
  EXPECT_EQ(ValidateReply(read), nullptr);
}

struct Mutation {
  const char* name;
  void (*mutate)(lease::Reply&);
  const char* reason;
};

TEST(DirectLeaseValidateTest, RefusesEachInvalidField) {
  const Mutation mutations[] = {
      {"magic", [](lease::Reply& r) { r.magic ^= 1; }, "bad magic"},
      {"version", [](lease::Reply& r) { r.version = lease::kVersion + 1; }, "unknown version"},
      {"old version", [](lease::Reply& r) { r.version = 2; }, "unknown version"},
      {"access 0", [](lease::Reply& r) { r.access = 0; }, "access"},
      {"access 3", [](lease::Reply& r) { r.access = 3; }, "access"},
      {"access high", [](lease::Reply& r) { r.access = 0x80000001u; }, "access"},
      {"flags", [](lease::Reply& r) { r.flags = 1; }, "unknown flags"},
      {"high flags", [](lease::Reply& r) { r.flags = 1u << 31; }, "unknown flags"},
      {"reserved0", [](lease::Reply& r) { r.reserved0 = 1; }, "reserved0"},
      {"no runs", [](lease::Reply& r) { r.run_count = 0; }, "run_count"},
      {"too many runs", [](lease::Reply& r) { r.run_count = lease::kMaxRuns + 1; }, "run_count"},
      {"huge run_count", [](lease::Reply& r) { r.run_count = 0xffffffffu; }, "run_count"},
      {"empty lease", [](lease::Reply& r) { r.leased_size = 0; }, "empty lease"},
      {"block size 0", [](lease::Reply& r) { r.block_size = 0; }, "block_size"},
      {"block size odd", [](lease::Reply& r) { r.block_size = 4097; }, "block_size"},
      {"block size small", [](lease::Reply& r) { r.block_size = 512; }, "block_size"},
      {"gap", [](lease::Reply& r) { r.runs[1].file_offset += kBlock; }, "contiguous"},
      {"not from 0", [](lease::Reply& r) { r.runs[0].file_offset = kBlock; }, "contiguous"},
      {"order", [](lease::Reply& r) { std::swap(r.runs[0], r.runs[1]); }, "contiguous"},
      {"empty run", [](lease::Reply& r) { r.runs[1].length = 0; }, "empty run"},
      {"pool misaligned", [](lease::Reply& r) { r.runs[0].pool_offset += 8; }, "block-aligned"},
      {"length misaligned",
       [](lease::Reply& r) {
         r.runs[0].length -= 8;
         r.runs[1].file_offset -= 8;
       },
       "block-aligned"},
      {"overflow",
       [](lease::Reply& r) { r.runs[1].pool_offset = UINT64_MAX - kBlock + 1; }, "overflows"},
      {"past int64", [](lease::Reply& r) { r.runs[1].pool_offset = 1ull << 63; }, "overflows"},
      {"short", [](lease::Reply& r) { r.leased_size = 9 * kBlock + 1; }, "do not cover"},
      {"surplus run", [](lease::Reply& r) { r.leased_size = 4 * kBlock; }, "past leased_size"},
      {"no stamp", [](lease::Reply& r) { r.stamp = 0; }, "no stamp"},
      {"stamp misaligned", [](lease::Reply& r) { r.stamp_offset = 12; }, "stamp_offset"},
      {"stamp overflow", [](lease::Reply& r) { r.stamp_offset = UINT64_MAX - 7; }, "stamp_offset"},
  };
  for (const Mutation& m : mutations) {
    lease::Reply r = ValidReply();
    m.mutate(r);
    const char* reason = ValidateReply(r);
    ASSERT_NE(reason, nullptr) << m.name;
    EXPECT_NE(strstr(reason, m.reason), nullptr) << m.name << ": " << reason;
  }
}

// ---- CheckReplyInSession and the durability rule ------------------------------------

SessionFacts Facts(uint64_t data_end = kPoolSize) {
  SessionFacts f;
  memcpy(f.area.uuid, kUuid, sizeof(kUuid));
  f.area.data_begin = kDataOffset;
  f.area.data_end = data_end;
  f.durability = lease::kDurabilityMapSync;
  f.stamp_slots = kStampSlots;
  f.stamps_id = kStampsId;
  return f;
}

TEST(DirectLeaseSessionCheckTest, AcceptsAReplyInsideTheDataArea) {
  EXPECT_EQ(CheckReplyInSession(ValidReply(), Facts()), nullptr);
  lease::Reply edges = ValidReply();
  edges.runs[0].pool_offset = kDataOffset;                  // first data block
  edges.runs[1].pool_offset = kPoolSize - 5 * kBlock;       // ends at the end
  edges.stamp_offset = (kStampSlots - 1) * 8;               // the last word
  EXPECT_EQ(CheckReplyInSession(edges, Facts()), nullptr);
}

TEST(DirectLeaseSessionCheckTest, RefusesWhatLiesOutsideTheSession) {
  const Mutation mutations[] = {
      {"uuid", [](lease::Reply& r) { r.uuid[15] ^= 1; }, "uuid"},
      {"other stamps", [](lease::Reply& r) { r.stamps_id ^= 1; }, "stamps_id"},
      {"superblock", [](lease::Reply& r) { r.runs[0].pool_offset = 0; }, "data area"},
      {"journal", [](lease::Reply& r) { r.runs[0].pool_offset = 2 * kBlock; }, "data area"},
      {"just before", [](lease::Reply& r) { r.runs[0].pool_offset = kDataOffset - kBlock; },
       "data area"},
      {"straddles the end",
       [](lease::Reply& r) { r.runs[1].pool_offset = kPoolSize - 4 * kBlock; }, "data area"},
      {"past the end", [](lease::Reply& r) { r.runs[1].pool_offset = kPoolSize; }, "data area"},
      {"wraps",
       [](lease::Reply& r) {
         r.runs[1].pool_offset = UINT64_MAX - kBlock + 1;
         r.runs[1].length = 2 * kBlock;
       },
       "data area"},
      {"huge length", [](lease::Reply& r) { r.runs[1].length = UINT64_MAX; }, "data area"},
      {"stamp past the end", [](lease::Reply& r) { r.stamp_offset = kStampSlots * 8; }, "stamp"},
      {"stamp far", [](lease::Reply& r) { r.stamp_offset = 1ull << 40; }, "stamp"},
      {"stamp misaligned", [](lease::Reply& r) { r.stamp_offset = 4; }, "stamp"},
  };
  for (const Mutation& m : mutations) {
    lease::Reply r = ValidReply();
    m.mutate(r);
    const char* reason = CheckReplyInSession(r, Facts());
    ASSERT_NE(reason, nullptr) << m.name;
    EXPECT_NE(strstr(reason, m.reason), nullptr) << m.name << ": " << reason;
  }
  // A grown pool: the data area ends where the pool file does, not at mkfs's capacity.
  lease::Reply grown = ValidReply();
  grown.runs[1].pool_offset = kPoolSize;
  EXPECT_EQ(CheckReplyInSession(grown, Facts(2 * kPoolSize)), nullptr);
}

TEST(DirectLeaseSessionCheckTest, PlainMappingOnlyForDevicesAndForcedDurability) {
  SessionFacts f = Facts();
  EXPECT_FALSE(PlainMappingDurable(f));  // fsdax: MAP_SYNC or nothing
  f.durability = lease::kDurabilityForced;
  EXPECT_TRUE(PlainMappingDurable(f));
  f.durability = lease::kDurabilityDevice;
  EXPECT_FALSE(PlainMappingDurable(f));  // says device, but the descriptor is not one
  f.area.is_device = true;
  EXPECT_TRUE(PlainMappingDurable(f));
}

TEST(DirectLeaseValidateTest, WantsLeaseOnlyForPlainWriteAccess) {
  EXPECT_TRUE(WantsLease(O_RDWR));
  EXPECT_TRUE(WantsLease(O_WRONLY | O_CLOEXEC | O_DSYNC));
  EXPECT_TRUE(WantsLease(O_RDWR | O_DIRECT));
  EXPECT_FALSE(WantsLease(O_RDONLY));
  EXPECT_FALSE(WantsLease(O_RDONLY | O_CREAT));
  EXPECT_FALSE(WantsLease(O_WRONLY | O_APPEND));
  EXPECT_FALSE(WantsLease(O_RDWR | O_PATH));
  EXPECT_FALSE(WantsLease(O_ACCMODE));
  EXPECT_EQ(LeaseAccess(O_RDWR, true), lease::kAccessWrite);
  EXPECT_EQ(LeaseAccess(O_WRONLY, false), lease::kAccessWrite);
  EXPECT_EQ(LeaseAccess(O_RDONLY, true), lease::kAccessRead);
  EXPECT_EQ(LeaseAccess(O_RDONLY | O_CLOEXEC | O_NOFOLLOW, true), lease::kAccessRead);
  EXPECT_EQ(LeaseAccess(O_RDONLY, false), 0u);  // WALFS_DIRECT_READS=0
  EXPECT_EQ(LeaseAccess(O_RDONLY | O_PATH, true), 0u);
  EXPECT_EQ(LeaseAccess(O_WRONLY | O_APPEND, true), 0u);
  EXPECT_EQ(LeaseAccess(O_ACCMODE, true), 0u);
}

// CachedStat is what every decision below is made from: it must agree with fstat on the
// fields NoteOpen and LeasePending read, for a file, after a write, and for a pipe.
TEST(DirectLeaseValidateTest, CachedStatAgreesWithFstat) {
  char path[] = "/tmp/walfs-cachedstat.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  auto expect_same = [](int f) {
    struct stat want, got;
    ASSERT_EQ(fstat(f, &want), 0);
    memset(&got, 0x5a, sizeof(got));
    ASSERT_EQ(CachedStat(f, &got), 0);
    EXPECT_EQ(got.st_dev, want.st_dev);
    EXPECT_EQ(got.st_ino, want.st_ino);
    EXPECT_EQ(got.st_mode, want.st_mode);
    EXPECT_EQ(got.st_size, want.st_size);
  };
  expect_same(fd);
  ASSERT_EQ(pwrite(fd, "walfs", 5, 8190), 5);
  expect_same(fd);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  expect_same(p[0]);
  struct stat st;
  ASSERT_EQ(CachedStat(p[0], &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  close(p[0]);
  close(p[1]);
  close(fd);
  errno = 0;
  EXPECT_EQ(CachedStat(fd, &st), -1);
  EXPECT_EQ(errno, EBADF);
}

// ---- The open-time decision and a lease end to end ------------------------------------

// What the fake sources answer; plain globals because LeaseSources are function pointers.
bool g_is_walfs = true;
int g_ioctl_error = 0;
int g_ioctl_calls = 0;
int g_ioctl_fd = -1;
uint32_t g_expected_access = lease::kAccessWrite;
bool g_same_description = true;
int g_mount_root_calls = 0;
lease::Reply g_reply;

bool FakeIsWalfs(dev_t) { return g_is_walfs; }
int FakeIoctl(int fd, lease::Reply* reply) {
  ++g_ioctl_calls;
  g_ioctl_fd = fd;
  // What the client asks for.
  EXPECT_EQ(reply->magic, lease::kMagic);
  EXPECT_EQ(reply->version, lease::kVersion);
  EXPECT_EQ(reply->access, g_expected_access);
  if (g_ioctl_error != 0) return -g_ioctl_error;
  *reply = g_reply;
  return 0;
}
bool FakeSameDescription(int a, int b) { return g_same_description && SameDescription(a, b); }
// No mount here: a session exists only where the test installed one.
std::optional<std::string> NoMountRoot(dev_t) {
  ++g_mount_root_calls;
  return std::nullopt;
}
int NoSessionIoctl(int, const lease::SessionRequest*) { return -ENOTTY; }
bool AnyPeer(int) { return true; }
constexpr SessionSources kFakeSession = {.mount_root = NoMountRoot,
                                         .ioctl_session = NoSessionIoctl,
                                         .peer_allowed = AnyPeer,
                                         .timeout_ms = 100};
constexpr LeaseSources kFake = {.stat_fd = CachedStat,
                                .is_walfs = FakeIsWalfs,
                                .ioctl_lease = FakeIoctl,
                                .same_description = FakeSameDescription,
                                .session = &kFakeSession};

std::string ReadAt(int fd, uint64_t off, size_t len) {
  std::string s(len, '\0');
  EXPECT_EQ(pread(fd, s.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
  return s;
}

// The lock a client holds, as another open file description sees it.
short LockSeenBy(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = lease::kClientLockOffset;
  lock.l_len = lease::kClientLockLength;
  EXPECT_EQ(fcntl(fd, F_OFD_GETLK, &lock), 0);
  close(fd);
  return lock.l_type;
}

bool IsOpen(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) != -1; }

class DirectLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/dev/shm/walfs-direct-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    pool_path_ = dir_ + "/pool";
    file_path_ = dir_ + "/000000010000000000000001";
    pool_fd_ = testpool::MakePool(pool_path_.c_str());
    stamps_fd_ = testpool::MakeStamps(kStampSlots, testpool::kStampSeals, &stamps_);
    SetStamp(kStamp);
    g_reply = ValidReply();
    g_is_walfs = true;
    g_ioctl_error = 0;
    g_ioctl_calls = 0;
    g_ioctl_fd = -1;
    g_expected_access = lease::kAccessWrite;
    g_same_description = true;
    g_mount_root_calls = 0;
    close(MakeFile(file_path_, 9 * kBlock));
    struct stat st;
    ASSERT_EQ(stat(file_path_.c_str(), &st), 0);
    dev_ = st.st_dev;
    InstallSession(lease::kDurabilityForced);
  }
  void TearDown() override {
    table_->UntrackRange(0, ~0u);
    if (session_ >= 0) sessions_.Release(session_);
    EXPECT_EQ(sessions_.open_count(), 0);
    EXPECT_LE(sessions_.idle_count(), 1);  // kept, unlocked
    EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
    sessions_.CloseIdle();
    EXPECT_EQ(owned_->count(), 0);
    munmap(stamps_, kStampSlots * 8);
    close(pool_fd_);
    close(stamps_fd_);
    unlink(pool_path_.c_str());
    unlink(file_path_.c_str());
    rmdir(dir_.c_str());
  }
  // The mount's session, as the daemon's hello would make it; the test keeps one
  // reference so every lease finds it cached.
  void InstallSession(uint32_t durability) {
    if (session_ >= 0) sessions_.Release(session_);
    ReceivedHello received;
    received.hello = testpool::MakeHello(durability);
    // Opened anew, as the daemon does: the session's own description and lock.
    received.fds[0] = open(pool_path_.c_str(), O_RDWR | O_CLOEXEC);
    received.fds[1] = fcntl(stamps_fd_, F_DUPFD_CLOEXEC, 0);
    received.count = 2;
    const char* reason = "";
    session_ = sessions_.Install(dev_, received, &reason);
    ASSERT_GE(session_, 0) << reason;
  }
  static int MakeFile(const std::string& path, uint64_t size) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    return fd;
  }
  // What the daemon does at a FLUSH or RELEASE of the leased handle.
  void SetStamp(uint64_t value) {
    __atomic_store_n(&stamps_[kStampOffset / 8], value, __ATOMIC_RELEASE);
  }
  int OpenFile(int flags = O_RDWR) { return open(file_path_.c_str(), flags | O_CLOEXEC); }
  // The open and the first write, as the library does them.
  LeaseOutcome Lease(int fd, int flags = O_RDWR) {
    const LeaseOutcome noted = NoteOpen(fd, flags, kFake, *table_);
    if (noted != LeaseOutcome::kPending) return noted;
    return LeasePending(fd, kFake, *table_, sessions_);
  }
  DirectResult Write(int fd, const std::string& bytes, off_t off, int flags = 0) {
    const struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    size_t written = 0;
    const DirectResult r = TryDirectWritePmem(*table_, fd, &iov, 1, off, flags, &written);
    if (r == DirectResult::kStored) {
      EXPECT_EQ(written, bytes.size());
    }
    return r;
  }

  std::string dir_, pool_path_, file_path_;
  int pool_fd_ = -1;
  int stamps_fd_ = -1;
  uint64_t* stamps_ = nullptr;
  dev_t dev_ = 0;
  int session_ = -1;
  std::unique_ptr<OwnedFds> owned_ = std::make_unique<OwnedFds>();
  std::unique_ptr<FdTable> table_ = std::make_unique<FdTable>(owned_.get());
  Sessions sessions_{owned_.get()};
};

TEST_F(DirectLeaseTest, AppendAndPathOpensAskNothing) {
  const int fd = OpenFile(O_RDONLY);
  EXPECT_EQ(Lease(fd, O_WRONLY | O_APPEND), LeaseOutcome::kNotWanted);
  EXPECT_EQ(Lease(fd, O_RDONLY | O_PATH), LeaseOutcome::kNotWanted);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  close(fd);
}

TEST_F(DirectLeaseTest, NonWalfsDeviceAndNonRegularFilesAskNothing) {
  const int fd = OpenFile();
  g_is_walfs = false;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kNotWalfs);
  g_is_walfs = true;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(Lease(pipe_fds[1], O_WRONLY), LeaseOutcome::kNotWalfs);
  EXPECT_EQ(Lease(-1), LeaseOutcome::kNotWanted);
  EXPECT_EQ(g_ioctl_calls, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(fd);
}

TEST_F(DirectLeaseTest, EmptyFilesAskNothing) {
  ASSERT_EQ(truncate(file_path_.c_str(), 0), 0);
  const int fd = OpenFile();
  EXPECT_EQ(Lease(fd), LeaseOutcome::kEmpty);
  EXPECT_EQ(g_ioctl_calls, 0);
  // Tracked, as pending and empty: its writes go to the kernel without asking.
  EXPECT_TRUE(table_->IsTracked(fd));
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kNotInLease);
  EXPECT_FALSE(WantsPositionedWrite(*table_, fd));
  // A seek while it is still empty changes nothing.
  NoteSeek(fd, kFake, *table_);
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kNotInLease);
  EXPECT_EQ(g_ioctl_calls, 0);
  // Once it has data, the same file is asked for.
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(9 * kBlock)), 0);
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  EXPECT_EQ(g_ioctl_calls, 1);
  table_->Untrack(fd);  // what the close interposer does
  close(fd);
  // Read-only and empty: nothing to read, not tracked.
  ASSERT_EQ(truncate(file_path_.c_str(), 0), 0);
  const int ro = OpenFile(O_RDONLY);
  EXPECT_EQ(Lease(ro, O_RDONLY), LeaseOutcome::kEmpty);
  EXPECT_FALSE(table_->IsTracked(ro));
  close(ro);
}

// pg_receivewal's segments: opened empty, padded with write(2), then a seek back to 0 and
// the WAL streamed in with write(2). The seek lets the next write ask for the lease, and
// write(2) lands at the file offset, which it moves as the kernel would.
TEST_F(DirectLeaseTest, AFilledFileLeasedAfterASeekTakesWritesAtTheOffset) {
  ASSERT_EQ(truncate(file_path_.c_str(), 0), 0);
  const int fd = OpenFile(O_WRONLY);
  ASSERT_EQ(NoteOpen(fd, O_WRONLY, kFake, *table_), LeaseOutcome::kEmpty);
  const std::string zeros(kBlock, '\0');
  for (int i = 0; i < 9; ++i) ASSERT_EQ(write(fd, zeros.data(), zeros.size()), kBlock);
  ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
  NoteSeek(fd, kFake, *table_);
  ASSERT_TRUE(WantsPositionedWrite(*table_, fd));
  EXPECT_EQ(g_ioctl_calls, 0);  // not until the first write

  // write(2) as the interposer does it: reserve at the offset, then the direct path.
  auto positioned = [&](const std::string& bytes) {
    const struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    return AtFileOffset(
        fd, bytes.size(), lseek,
        [&](off_t offset) -> ssize_t {
          size_t written = 0;
          DirectResult r = TryDirectWritePmem(*table_, fd, &iov, 1, offset, 0, &written);
          if (r == DirectResult::kPending) {
            LeasePending(fd, kFake, *table_, sessions_);
            r = TryDirectWritePmem(*table_, fd, &iov, 1, offset, 0, &written);
          }
          if (r == DirectResult::kStored) return static_cast<ssize_t>(written);
          return pwrite(fd, bytes.data(), bytes.size(), offset);
        },
        []() -> ssize_t {
          ADD_FAILURE() << "the range was not reserved";
          return -1;
        });
  };
  const std::string a(100, 'a'), b(5000, 'b');
  ASSERT_EQ(positioned(a), 100);
  EXPECT_EQ(g_ioctl_calls, 1);
  ASSERT_EQ(positioned(b), 5000);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 5100);
  // In the pool (file offset 0 is pool run 0), not in the stand-in file.
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5100), a + b);
  const int check = OpenFile(O_RDONLY);
  EXPECT_EQ(ReadAt(check, 0, 100), std::string(100, '\0'));
  // Past the lease: the kernel's pwrite at the offset, and the offset still moves.
  const off_t leased = static_cast<off_t>(g_reply.leased_size);
  ASSERT_EQ(lseek(fd, leased - 10, SEEK_SET), leased - 10);
  const std::string c(20, 'c');
  ASSERT_EQ(positioned(c), 20);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), leased + 10);
  EXPECT_EQ(ReadAt(check, static_cast<uint64_t>(leased - 10), 20), c);
  close(check);
  // A failed write leaves the offset where it was.
  const int rd = OpenFile(O_RDONLY);
  ASSERT_TRUE(table_->TrackPending(rd, dev_, 0));
  ASSERT_EQ(lseek(rd, 77, SEEK_SET), 77);
  const ssize_t failed = AtFileOffset(
      rd, 5, lseek, [&](off_t offset) { return pwrite(rd, "xxxxx", 5, offset); },
      []() -> ssize_t {
        ADD_FAILURE() << "the range was not reserved";
        return -1;
      });
  EXPECT_EQ(failed, -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(lseek(rd, 0, SEEK_CUR), 77);
  table_->Untrack(rd);
  close(rd);
  close(fd);
}

TEST_F(DirectLeaseTest, TheLeaseIsTakenAtTheFirstWriteNotAtOpen) {
  const int fd = OpenFile();
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_TRUE(table_->IsTracked(fd));
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_EQ(owned_->count(), 2);  // the session's pool and stamps only
  // An fsync-only descriptor (durable_rename): the kernel answers, no lease is asked.
  EXPECT_FALSE(SyncIsDone(*table_, fd));
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_TRUE(table_->IsTracked(fd));
  // The first write says so; the caller leases and tries again.
  EXPECT_EQ(Write(fd, "first", 0), DirectResult::kPending);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), std::string(5, '\0'));
  errno = 1234;
  ASSERT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kGranted);
  EXPECT_EQ(errno, 1234);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_EQ(g_mount_root_calls, 0);  // the cached session served it
  ASSERT_EQ(Write(fd, "first", 0), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), "first");
  EXPECT_TRUE(SyncIsDone(*table_, fd));
  // Leased now: asking again is not the first write any more.
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_TRUE(table_->IsTracked(fd));
  table_->Untrack(fd);
  EXPECT_EQ(table_->live_entries(), 0);
  EXPECT_EQ(owned_->count(), 2);
  // Untracked: nothing to lease.
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 1);
  close(fd);
}

TEST_F(DirectLeaseTest, APendingDescriptorReusedForAnotherFileIsNeverAsked) {
  const int fd = OpenFile();
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  // Closed behind the table's back and the number reused for another regular file on
  // the same (fake walfs) device: the ioctl would go to the wrong file.
  const int other = MakeFile(dir_ + "/other", 9 * kBlock);
  ASSERT_EQ(syscall(SYS_dup2, other, fd), fd);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  // Reused for a pipe: fstat says so as well.
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(syscall(SYS_dup2, pipe_fds[1], fd), fd);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kReused);
  // Closed outright behind the table's back: nothing to pin.
  struct stat st;
  ASSERT_EQ(stat(file_path_.c_str(), &st), 0);
  ASSERT_TRUE(table_->TrackPending(fd, st.st_dev, st.st_ino));
  ASSERT_EQ(syscall(SYS_close, fd), 0);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(table_->live_entries(), 0);
  EXPECT_EQ(owned_->count(), 2);  // every private duplicate was closed
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(other);
  unlink((dir_ + "/other").c_str());
}

TEST_F(DirectLeaseTest, AFailedFirstWriteLeaseLeavesTheDescriptorUntracked) {
  const int fd = OpenFile();
  g_ioctl_error = EOPNOTSUPP;  // msync mode
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kIoctlFailed);
  // Later writes cost one load and go to the kernel; the daemon is asked once.
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_EQ(table_->live_entries(), 0);
  EXPECT_EQ(owned_->count(), 2);
  close(fd);
}

TEST_F(DirectLeaseTest, IoctlFailureAndBadRepliesFallBackSilently) {
  const int fd = OpenFile();
  for (int err : {EOPNOTSUPP, ENODATA, EBADF, ENOTTY, EPERM}) {
    g_ioctl_error = err;
    errno = 1234;
    EXPECT_EQ(Lease(fd), LeaseOutcome::kIoctlFailed) << err;
    EXPECT_EQ(errno, 1234);  // never changes errno
  }
  g_ioctl_error = 0;
  g_reply.magic = 0;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(owned_->count(), 2);
  close(fd);
}

TEST_F(DirectLeaseTest, RepliesOutsideTheSessionAreRefused) {
  const int fd = OpenFile();
  const lease::Reply good = g_reply;
  g_reply.uuid[3] ^= 0xff;  // another pool's lease
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  g_reply = good;
  g_reply.runs[1].pool_offset = 8 * kBlock;  // the inode table
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  g_reply = good;
  g_reply.runs[1].pool_offset = kPoolSize - kBlock;  // past the end: would SIGBUS
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  g_reply = good;
  g_reply.stamp_offset = kStampSlots * 8;  // past the stamps
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(ReadAt(pool_fd_, 8 * kBlock, 8), std::string(8, '\0'));
  g_reply = good;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  close(fd);
}

TEST_F(DirectLeaseTest, WithoutASessionNothingIsAsked) {
  sessions_.Release(session_);
  session_ = -1;
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  sessions_.CloseIdle();
  const int fd = OpenFile();
  EXPECT_EQ(Lease(fd), LeaseOutcome::kNoSession);
  EXPECT_EQ(g_mount_root_calls, 1);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(owned_->count(), 0);
  close(fd);
}

TEST_F(DirectLeaseTest, WritesInsideTheLeaseLandInThePoolRuns) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  EXPECT_TRUE(table_->IsTracked(fd));
  EXPECT_EQ(LockSeenBy(pool_path_), F_RDLCK);

  // 8 KiB across the run boundary (file 4 blocks = end of run 0).
  std::string page(8192, '\0');
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<char>('a' + i % 23);
  const uint64_t off = 4 * kBlock - 4096;
  ASSERT_EQ(Write(fd, page, static_cast<off_t>(off)), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock + off, 4096), page.substr(0, 4096));
  EXPECT_EQ(ReadAt(pool_fd_, 32 * kBlock, 4096), page.substr(4096));
  // The stand-in file was not written: the bytes went to the pool only.
  EXPECT_EQ(ReadAt(fd, off, 8192), std::string(8192, '\0'));

  // pwritev of two pieces up to the last leased byte.
  const uint64_t leased = g_reply.leased_size;
  const std::string a(100, 'x');
  const std::string b(200, 'y');
  const struct iovec iov[2] = {{const_cast<char*>(a.data()), a.size()},
                               {const_cast<char*>(b.data()), b.size()}};
  size_t written = 0;
  ASSERT_EQ(TryDirectWritePmem(*table_, fd, iov, 2, static_cast<off_t>(leased - 300), 0, &written),
            DirectResult::kStored);
  EXPECT_EQ(written, 300u);
  EXPECT_EQ(ReadAt(pool_fd_, 32 * kBlock + (leased - 300 - 4 * kBlock), 300), a + b);

  // Everything else is the kernel's.
  EXPECT_EQ(Write(fd, "z", static_cast<off_t>(leased)), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "zz", static_cast<off_t>(leased - 1)), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "z", -1), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "", 0), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "z", 0, RWF_APPEND), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "z", 0, RWF_DSYNC), DirectResult::kStored);
  const struct iovec huge[2] = {{const_cast<char*>(a.data()), SSIZE_MAX},
                                {const_cast<char*>(a.data()), 2}};
  EXPECT_EQ(TryDirectWritePmem(*table_, fd, huge, 2, 0, 0, &written), DirectResult::kNotInLease);
  EXPECT_EQ(TryDirectWritePmem(*table_, fd, iov, 0, 0, 0, &written), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd + 1000, "z", 0), DirectResult::kUntracked);

  table_->Untrack(fd);
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  // The test's own reference keeps the session active; without it the lock goes.
  sessions_.Release(session_);
  session_ = -1;
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  close(fd);
}

// A read-only descriptor takes a read lease at its first pread and copies out of the
// pool runs; it never stores, and fsync stays the kernel's.
// A pool in msync mode serves reads only (L7): a writable descriptor asks for nothing and
// writes through the kernel; a read-only one takes its read lease and copies out.
TEST_F(DirectLeaseTest, AReadsOnlySessionGrantsReadLeasesAndAsksNoWriteLease) {
  InstallSession(lease::kDurabilityReadsOnly);
  const int rw = OpenFile();
  EXPECT_EQ(Lease(rw), LeaseOutcome::kNotDurable);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(rw));
  EXPECT_EQ(Write(rw, "x", 0), DirectResult::kUntracked);
  close(rw);

  ASSERT_EQ(pwrite(pool_fd_, "pool bytes", 10, 64 * kBlock), 10);
  g_reply.access = lease::kAccessRead;
  g_expected_access = lease::kAccessRead;
  const int ro = OpenFile(O_RDONLY);
  ASSERT_EQ(NoteOpen(ro, O_RDONLY, kFake, *table_), LeaseOutcome::kPending);
  ASSERT_EQ(LeasePending(ro, kFake, *table_, sessions_), LeaseOutcome::kGranted);
  EXPECT_EQ(g_ioctl_calls, 1);
  std::string page(10, '\0');
  struct iovec one = {page.data(), page.size()};
  size_t copied = 0;
  ASSERT_EQ(TryDirectReadMemcpy(*table_, ro, &one, 1, 0, 0, &copied), DirectResult::kStored);
  EXPECT_EQ(page, "pool bytes");
  table_->Untrack(ro);
  close(ro);
}

TEST_F(DirectLeaseTest, ReadLeaseCopiesOutOfThePoolRuns) {
  std::string bytes(9 * kBlock, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('A' + i % 53);
  ASSERT_EQ(pwrite(pool_fd_, bytes.data(), 4 * kBlock, 64 * kBlock), 4 * kBlock);
  ASSERT_EQ(pwrite(pool_fd_, bytes.data() + 4 * kBlock, 5 * kBlock, 32 * kBlock), 5 * kBlock);
  g_reply.access = lease::kAccessRead;
  g_expected_access = lease::kAccessRead;
  const int fd = OpenFile(O_RDONLY);
  ASSERT_EQ(NoteOpen(fd, O_RDONLY, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_EQ(g_ioctl_calls, 0);  // not at open
  std::string page(8192, '\0');
  struct iovec one = {page.data(), page.size()};
  size_t copied = 0;
  ASSERT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 1, 0, 0, &copied), DirectResult::kPending);
  ASSERT_EQ(LeasePending(fd, kFake, *table_, sessions_), LeaseOutcome::kGranted);
  EXPECT_EQ(g_ioctl_calls, 1);

  // 8 KiB across the run boundary, then two iovecs up to the last leased byte.
  const uint64_t off = 4 * kBlock - 4096;
  ASSERT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 1, static_cast<off_t>(off), 0, &copied),
            DirectResult::kStored);
  EXPECT_EQ(copied, 8192u);
  EXPECT_EQ(page, bytes.substr(off, 8192));
  const uint64_t leased = g_reply.leased_size;
  std::string a(100, '\0'), b(200, '\0');
  const struct iovec two[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  ASSERT_EQ(TryDirectReadMemcpy(*table_, fd, two, 2, static_cast<off_t>(leased - 300),
                                RWF_NOWAIT, &copied),
            DirectResult::kStored);
  EXPECT_EQ(copied, 300u);
  EXPECT_EQ(a + b, bytes.substr(leased - 300, 300));
  // A store into the pool shows at the next read: the runs are the pool's memory.
  ASSERT_EQ(pwrite(pool_fd_, "walfs", 5, 64 * kBlock + 10), 5);
  std::string five(5, '\0');
  struct iovec five_iov = {five.data(), 5};
  ASSERT_EQ(TryDirectReadMemcpy(*table_, fd, &five_iov, 1, 10, 0, &copied),
            DirectResult::kStored);
  EXPECT_EQ(five, "walfs");

  // Everything else is the kernel's: past the lease, flags, writes, fsync.
  struct iovec past = {page.data(), 2};
  EXPECT_EQ(TryDirectReadMemcpy(*table_, fd, &past, 1, static_cast<off_t>(leased - 1), 0,
                                &copied),
            DirectResult::kNotInLease);
  EXPECT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 1, -1, 0, &copied),
            DirectResult::kNotInLease);
  EXPECT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 1, 0, RWF_DSYNC, &copied),
            DirectResult::kNotInLease);
  EXPECT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 0, 0, 0, &copied), DirectResult::kNotInLease);
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kNotInLease);
  EXPECT_FALSE(SyncIsDone(*table_, fd));
  EXPECT_TRUE(table_->IsTracked(fd));

  // Revoked (a truncate in another process): dropped, the kernel answers from then on.
  SetStamp(kStamp + 1);
  EXPECT_EQ(TryDirectReadMemcpy(*table_, fd, &one, 1, 0, 0, &copied), DirectResult::kStale);
  EXPECT_FALSE(table_->IsTracked(fd));
  close(fd);
}

// read(2) as the interposer does it: the range at the file offset is reserved, copied
// out of the pool, and the offset moves as the kernel's read would move it; at EOF the
// kernel answers and the offset is put back.
TEST_F(DirectLeaseTest, ReadsAtTheFileOffsetCopyOutAndMoveIt) {
  std::string bytes(4 * kBlock, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(pwrite(pool_fd_, bytes.data(), bytes.size(), 64 * kBlock),
            static_cast<ssize_t>(bytes.size()));
  g_reply.access = lease::kAccessRead;
  g_expected_access = lease::kAccessRead;
  g_reply.leased_size = 9 * kBlock;  // the stand-in file's size
  const int fd = OpenFile(O_RDONLY);
  ASSERT_EQ(NoteOpen(fd, O_RDONLY, kFake, *table_), LeaseOutcome::kPending);
  ASSERT_TRUE(WantsPositionedRead(*table_, fd));
  auto positioned = [&](char* buf, size_t n) {
    const struct iovec iov = {buf, n};
    return AtFileOffset(
        fd, n, lseek,
        [&](off_t offset) -> ssize_t {
          size_t copied = 0;
          DirectResult r = TryDirectReadMemcpy(*table_, fd, &iov, 1, offset, 0, &copied);
          if (r == DirectResult::kPending) {
            LeasePending(fd, kFake, *table_, sessions_);
            r = TryDirectReadMemcpy(*table_, fd, &iov, 1, offset, 0, &copied);
          }
          if (r == DirectResult::kStored) return static_cast<ssize_t>(copied);
          return pread(fd, buf, n, offset);
        },
        []() -> ssize_t {
          ADD_FAILURE() << "the range was not reserved";
          return -1;
        });
  };
  ASSERT_EQ(lseek(fd, 1000, SEEK_SET), 1000);
  std::string got(3000, '\0');
  ASSERT_EQ(positioned(got.data(), got.size()), 3000);
  EXPECT_EQ(got, bytes.substr(1000, 3000));
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 4000);
  ASSERT_EQ(positioned(got.data(), got.size()), 3000);
  EXPECT_EQ(got, bytes.substr(4000, 3000));
  EXPECT_EQ(g_ioctl_calls, 1);
  // The last bytes and EOF: the kernel's answer (past the lease), the offset where the
  // file ends.
  const off_t size = static_cast<off_t>(9 * kBlock);
  ASSERT_EQ(lseek(fd, size - 100, SEEK_SET), size - 100);
  EXPECT_EQ(positioned(got.data(), 3000), 100);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), size);
  EXPECT_EQ(positioned(got.data(), 3000), 0);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), size);
  close(fd);
}

// The second stamp comparison (L9): a revocation that lands while a copy runs discards
// the copy.
TEST_F(DirectLeaseTest, AReadRevokedDuringItsCopyIsDiscarded) {
  g_reply.access = lease::kAccessRead;
  g_expected_access = lease::kAccessRead;
  const int fd = OpenFile(O_RDONLY);
  ASSERT_EQ(Lease(fd, O_RDONLY), LeaseOutcome::kGranted);
  // What the daemon does before a truncate, while the first piece is being copied.
  struct RevokingCopier {
    uint64_t* word;
    int copies = 0;
    void Copy(void* dst, const char* src, size_t n) {
      if (copies++ == 0) __atomic_store_n(word, kStamp + 7, __ATOMIC_RELEASE);
      memcpy(dst, src, n);
    }
  } copier{&stamps_[kStampOffset / 8]};
  std::string page(8192, '\0');
  struct iovec one = {page.data(), page.size()};
  size_t copied = 12345;
  EXPECT_EQ(TryDirectRead(*table_, fd, &one, 1, 4 * kBlock - 4096, 0, copier, &copied),
            DirectResult::kStale);
  EXPECT_EQ(copier.copies, 2);  // the copy ran (across both runs), then was thrown away
  EXPECT_EQ(copied, 12345u);
  EXPECT_FALSE(table_->IsTracked(fd));
  close(fd);
}

// A reply must grant what was asked: a read-only descriptor never gets a write lease,
// nor a writable one a read lease.
TEST_F(DirectLeaseTest, AReplyOfTheOtherAccessIsRefused) {
  g_expected_access = lease::kAccessRead;
  const int ro = OpenFile(O_RDONLY);
  EXPECT_EQ(Lease(ro, O_RDONLY), LeaseOutcome::kInvalid);  // g_reply says write
  EXPECT_FALSE(table_->IsTracked(ro));
  close(ro);
  g_expected_access = lease::kAccessWrite;
  g_reply.access = lease::kAccessRead;
  const int rw = OpenFile();
  EXPECT_EQ(Lease(rw), LeaseOutcome::kInvalid);
  EXPECT_FALSE(table_->IsTracked(rw));
  close(rw);
}

TEST_F(DirectLeaseTest, OneSessionSharedByAllLeasesAndClosedWithTheLast) {
  const int fd1 = OpenFile();
  const int fd2 = OpenFile();
  ASSERT_EQ(Lease(fd1), LeaseOutcome::kGranted);
  ASSERT_EQ(Lease(fd2), LeaseOutcome::kGranted);
  sessions_.Release(session_);  // only the leases hold it now
  session_ = -1;
  EXPECT_EQ(sessions_.open_count(), 1);
  table_->Untrack(fd1);
  EXPECT_EQ(sessions_.open_count(), 1);
  EXPECT_EQ(LockSeenBy(pool_path_), F_RDLCK);
  ASSERT_EQ(Write(fd2, "still", 0), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), "still");
  table_->Untrack(fd2);
  EXPECT_EQ(sessions_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  // Kept, unlocked: its two descriptors and nothing else.
  EXPECT_EQ(sessions_.idle_count(), 1);
  EXPECT_EQ(owned_->count(), 2);
  close(fd1);
  close(fd2);
}

// A reader going from segment to segment: each lease after the first finds the kept
// session, locks the pool again while it maps, and makes no new exchange.
TEST_F(DirectLeaseTest, TheNextLeaseTakesTheKeptSessionAndItsLockAgain) {
  sessions_.Release(session_);
  session_ = -1;
  for (int i = 0; i < 3; ++i) {
    const int fd = OpenFile();
    ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted) << i;
    EXPECT_EQ(LockSeenBy(pool_path_), F_RDLCK) << i;
    EXPECT_EQ(sessions_.open_count(), 1) << i;
    ASSERT_EQ(Write(fd, "again", 0), DirectResult::kStored) << i;
    table_->Untrack(fd);
    close(fd);
    EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK) << i;
    EXPECT_EQ(sessions_.idle_count(), 1) << i;
  }
  EXPECT_EQ(g_mount_root_calls, 0);  // never an exchange
}

// A kept session whose daemon is gone (a remount reused the mount's st_dev): the new
// daemon's reply names other stamps. The kept session is never mapped through: it is
// closed and a new exchange is asked for (none is possible here, so no lease).
TEST_F(DirectLeaseTest, AReplyNamingOtherStampsEndsTheKeptSession) {
  sessions_.Release(session_);
  session_ = -1;
  ASSERT_EQ(sessions_.idle_count(), 1);
  g_reply.stamps_id = kStampsId + 1;
  const int fd = OpenFile();
  EXPECT_EQ(Lease(fd), LeaseOutcome::kNoSession);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_EQ(g_mount_root_calls, 1);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(sessions_.idle_count(), 0);
  EXPECT_EQ(sessions_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  EXPECT_EQ(owned_->count(), 0);
  EXPECT_EQ(Write(fd, "x", 0), DirectResult::kUntracked);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 1), std::string(1, '\0'));
  close(fd);
}

// fork: a child closes the idle sessions it inherits (the parent's pool description stays
// the parent's alone, so the parent may unlock it); an active session is shared from then
// on and closed, not unlocked, at its last release in either process.
TEST_F(DirectLeaseTest, ForkClosesIdleSessionsInTheChildAndSharedOnesAreClosed) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  sessions_.ForkPrepare();
  sessions_.ForkParent();  // as in the parent after fork()
  table_->Untrack(fd);
  sessions_.Release(session_);
  session_ = -1;
  EXPECT_EQ(sessions_.idle_count(), 0);  // shared: closed at its last release
  EXPECT_EQ(owned_->count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);

  InstallSession(lease::kDurabilityForced);
  sessions_.Release(session_);
  session_ = -1;
  ASSERT_EQ(sessions_.idle_count(), 1);
  sessions_.ForkPrepare();
  sessions_.ForkChild();  // as in the child after fork()
  EXPECT_EQ(sessions_.idle_count(), 0);
  EXPECT_EQ(owned_->count(), 0);
  close(fd);
}

TEST_F(DirectLeaseTest, ReusedDescriptorNumberIsDetectedAndDropped) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  ASSERT_EQ(Write(fd, "before", 0), DirectResult::kStored);
  EXPECT_TRUE(SyncIsDone(*table_, fd));
  // Closed behind the table's back and the number reused for another file: the kernel
  // sent the daemon a FLUSH for the close, and the daemon revoked the stamp.
  const int other = MakeFile(dir_ + "/other", 9 * kBlock);
  ASSERT_EQ(syscall(SYS_dup2, other, fd), fd);
  SetStamp(kStamp + 1);
  EXPECT_EQ(Write(fd, "must not reach the pool", 0), DirectResult::kStale);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 6), "before");
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock + 6, 4), std::string(4, '\0'));
  EXPECT_EQ(owned_->count(), 2);
  close(other);
  close(fd);
  unlink((dir_ + "/other").c_str());
}

TEST_F(DirectLeaseTest, RevokedStampSendsFsyncToTheKernel) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  EXPECT_TRUE(SyncIsDone(*table_, fd));
  SetStamp(kStamp + 7);
  errno = 1234;
  EXPECT_FALSE(SyncIsDone(*table_, fd));
  EXPECT_EQ(errno, 1234);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_FALSE(SyncIsDone(*table_, fd));  // untracked now
  close(fd);
}

TEST_F(DirectLeaseTest, AStampRevokedBeforeTheMappingRefusesTheLease) {
  const int fd = OpenFile();
  SetStamp(kStamp + 1);  // revoked between the reply and the mapping
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(owned_->count(), 2);
  SetStamp(kStamp);
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  close(fd);
}

// L7: on tmpfs MAP_SYNC is refused; a session that does not say the plain mapping is
// durable gets no lease.
TEST_F(DirectLeaseTest, RefusedMapSyncMeansNoLeaseUnlessForced) {
  InstallSession(lease::kDurabilityMapSync);
  const int fd = OpenFile();
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  EXPECT_FALSE(table_->IsTracked(fd));
  InstallSession(lease::kDurabilityDevice);  // says device, but the pool is a file
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  InstallSession(lease::kDurabilityForced);
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  close(fd);
}

// The mmap seam: what MapLease asks for, and what it does with each answer.
int g_sync_maps = 0;
int g_plain_maps = 0;
bool g_refuse_sync = true;
void* SeamMmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if ((flags & MAP_SYNC) != 0) {
    ++g_sync_maps;
    EXPECT_EQ(flags & MAP_TYPE, MAP_SHARED_VALIDATE);
    if (g_refuse_sync) {
      errno = EOPNOTSUPP;
      return MAP_FAILED;
    }
    // An fsdax file system: the same shared mapping, with the page-table guarantee.
    return mmap(addr, length, prot, MAP_SHARED, fd, offset);
  }
  ++g_plain_maps;
  return mmap(addr, length, prot, flags, fd, offset);
}

TEST_F(DirectLeaseTest, MapSyncIsAskedForFirstAndPlainMappingOnlyWhereDurable) {
  const char* reason = "";
  LeaseMapping m;
  for (uint32_t durability : {lease::kDurabilityMapSync, lease::kDurabilityForced}) {
    InstallSession(durability);
    for (bool refuse : {true, false}) {
      g_refuse_sync = refuse;
      g_sync_maps = g_plain_maps = 0;
      const char* why = "";
      const int handle = sessions_.Acquire(-1, dev_, kFakeSession, &why);
      ASSERT_GE(handle, 0) << why;
      const int err = MapLease(g_reply, sessions_, handle, &m, &reason, SeamMmap);
      const bool granted = !refuse || durability == lease::kDurabilityForced;
      EXPECT_EQ(err == 0, granted) << durability << " " << refuse << " " << reason;
      EXPECT_GE(g_sync_maps, 1);
      EXPECT_EQ(g_plain_maps, refuse && granted ? 2 : 0);
      if (err == 0) {
        EXPECT_EQ(m.run_count, 2u);
        UnmapLease(m);
      } else {
        EXPECT_EQ(err, -ENOTSUP);
        EXPECT_NE(strstr(reason, "MAP_SYNC"), nullptr) << reason;
      }
    }
  }
}

// L3: the entry holds a private duplicate of the leased descriptor, the lease ioctl goes
// to it, and it is closed only when the last reference to the entry goes.
TEST_F(DirectLeaseTest, TheLeaseIsPinnedByAPrivateDuplicate) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  int priv;
  {
    FdTable::Ref ref = table_->Acquire(fd);
    ASSERT_TRUE(ref);
    priv = ref.private_fd();
  }
  ASSERT_GE(priv, 0);
  EXPECT_NE(priv, fd);
  EXPECT_EQ(g_ioctl_fd, priv);
  EXPECT_TRUE(owned_->IsOwned(priv));
  EXPECT_FALSE(owned_->IsOwned(fd));
  EXPECT_EQ(fcntl(priv, F_GETFD), FD_CLOEXEC);
  EXPECT_TRUE(SameDescription(fd, priv));

  // A store in progress (a Ref) while the application closes its descriptor.
  FdTable::Ref inflight = table_->Acquire(fd);
  ASSERT_TRUE(inflight);
  table_->Untrack(fd);  // what the close interposer does
  ASSERT_EQ(close(fd), 0);
  EXPECT_TRUE(IsOpen(priv));  // the handle stays open: no RELEASE yet
  EXPECT_EQ(owned_->count(), 3);
  inflight.Reset();  // the store returned
  EXPECT_FALSE(IsOpen(priv));
  EXPECT_FALSE(owned_->IsOwned(priv));
  EXPECT_EQ(owned_->count(), 2);
}

// The application's dup2 onto a private number renumbers the duplicate first.
TEST_F(DirectLeaseTest, APrivateDuplicateMovesAsideForTheApplication) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  FdTable::Ref ref = table_->Acquire(fd);
  const int priv = ref.private_fd();
  ASSERT_TRUE(owned_->MoveAside(priv));
  EXPECT_FALSE(owned_->IsOwned(priv));
  EXPECT_FALSE(IsOpen(priv));  // free for the application
  const int moved = ref.private_fd();
  EXPECT_NE(moved, priv);
  EXPECT_TRUE(owned_->IsOwned(moved));
  EXPECT_TRUE(SameDescription(fd, moved));
  ref.Reset();
  table_->Untrack(fd);
  EXPECT_FALSE(IsOpen(moved));
  EXPECT_EQ(owned_->count(), 2);
  close(fd);
}

// kcmp: the application's descriptor must still be the description the lease was asked
// on when the reply comes back.
TEST_F(DirectLeaseTest, ALeaseForAnotherDescriptionIsNeverAttached) {
  const int fd = OpenFile();
  const int other = OpenFile();  // the same file, another open file description
  EXPECT_FALSE(SameDescription(fd, other));
  const int dup_fd = dup(fd);
  EXPECT_TRUE(SameDescription(fd, dup_fd));
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_FALSE(SameDescription(fd, p[0]));
  EXPECT_FALSE(SameDescription(fd, 9999));
  g_same_description = false;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(owned_->count(), 2);
  close(p[0]);
  close(p[1]);
  close(dup_fd);
  close(other);
  close(fd);
}

// ---- copy_file_range out of a lease ----------------------------------------------------

// The real calls, except that the destination looks like another file system (the test's
// files share one) and a hook runs before each pwrite.
struct CopyKernel {
  int out_fd = -1;
  bool other_device = true;
  std::function<void()> before_pwrite;
  int pwrites = 0;
  int pread_error = 0;  // nonzero: every Pread fails with it
  ssize_t Pread(int fd, void* b, size_t n, off_t o) {
    if (pread_error != 0) return errno = pread_error, -1;
    return pread(fd, b, n, o);
  }
  ssize_t Pwrite(int fd, const void* b, size_t n, off_t o) {
    ++pwrites;
    if (before_pwrite) before_pwrite();
    return pwrite(fd, b, n, o);
  }
  off_t Lseek(int fd, off_t o, int w) { return lseek(fd, o, w); }
  int Fstat(int fd, struct stat* st) {
    const int r = fstat(fd, st);
    if (r == 0 && fd == out_fd && other_device) st->st_dev += 1;
    return r;
  }
  int Ftruncate(int fd, off_t size) { return ftruncate(fd, size); }
  int Fallocate(int fd, int mode, off_t o, off_t n) { return fallocate(fd, mode, o, n); }
  int GetFl(int fd) { return fcntl(fd, F_GETFL); }
};

class DirectCopyTest : public DirectLeaseTest {
 protected:
  void SetUp() override {
    DirectLeaseTest::SetUp();
    // The pool holds the file's bytes 'a'..'z'; the stand-in file (what the kernel
    // would read) holds 'K': a copy from the pool and one from the kernel differ.
    pool_bytes_.resize(9 * kBlock);
    for (size_t i = 0; i < pool_bytes_.size(); ++i) pool_bytes_[i] = static_cast<char>('a' + i % 26);
    ASSERT_EQ(pwrite(pool_fd_, pool_bytes_.data(), 4 * kBlock, 64 * kBlock), 4 * kBlock);
    ASSERT_EQ(pwrite(pool_fd_, pool_bytes_.data() + 4 * kBlock, 5 * kBlock, 32 * kBlock),
              5 * kBlock);
    const std::string k(9 * kBlock, 'K');
    const int f = OpenFile(O_RDWR);
    ASSERT_EQ(pwrite(f, k.data(), k.size(), 0), static_cast<ssize_t>(k.size()));
    close(f);
    g_reply.access = lease::kAccessRead;
    g_expected_access = lease::kAccessRead;
    in_ = OpenFile(O_RDONLY);
    ASSERT_EQ(NoteOpen(in_, O_RDONLY, kFake, *table_), LeaseOutcome::kPending);
    out_path_ = dir_ + "/copy";
    out_ = open(out_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(out_, 0);
    kernel_.out_fd = out_;
  }
  void TearDown() override {
    table_->UntrackRange(0, ~0u);
    close(in_);
    close(out_);
    unlink(out_path_.c_str());
    DirectLeaseTest::TearDown();
  }
  ssize_t Copy(loff_t* in_off, loff_t* out_off, size_t len, unsigned flags = 0) {
    return DirectCopyFileRange(*table_, in_, in_off, out_, out_off, len, flags, kernel_,
                               [&](int fd) { LeasePending(fd, kFake, *table_, sessions_); });
  }
  std::string Out() {
    struct stat st;
    EXPECT_EQ(fstat(out_, &st), 0);
    return ReadAt(out_, 0, static_cast<size_t>(st.st_size));
  }

  std::string pool_bytes_, out_path_;
  int in_ = -1;
  int out_ = -1;
  CopyKernel kernel_;
};

TEST_F(DirectCopyTest, CopiesTheLeaseFromThePoolAtTheFileOffsets) {
  const uint64_t leased = g_reply.leased_size;
  // As cp asks: everything from the file offset, NULL offsets; one write per run.
  ASSERT_EQ(Copy(nullptr, nullptr, SIZE_MAX), static_cast<ssize_t>(leased));
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_EQ(kernel_.pwrites, 2);
  EXPECT_EQ(Out(), pool_bytes_.substr(0, leased));
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), static_cast<off_t>(leased));
  EXPECT_EQ(lseek(out_, 0, SEEK_CUR), static_cast<off_t>(leased));
  // At the lease's end: the kernel's (which then reads what lies past it).
  EXPECT_EQ(Copy(nullptr, nullptr, 100), kCopyNotTaken);
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), static_cast<off_t>(leased));
}

TEST_F(DirectCopyTest, ExplicitOffsetsMoveThePointersNotTheFileOffsets) {
  loff_t in_off = 4 * kBlock - 10, out_off = 5;
  ASSERT_EQ(Copy(&in_off, &out_off, 30), 30);
  EXPECT_EQ(in_off, static_cast<loff_t>(4 * kBlock + 20));
  EXPECT_EQ(out_off, 35);
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), 0);
  EXPECT_EQ(lseek(out_, 0, SEEK_CUR), 0);
  EXPECT_EQ(Out(), std::string(5, '\0') + pool_bytes_.substr(4 * kBlock - 10, 30));
}

TEST_F(DirectCopyTest, WhatTheKernelMustDecideIsNotTaken) {
  loff_t off = 0;
  EXPECT_EQ(Copy(&off, nullptr, 10, /*flags=*/1), kCopyNotTaken);
  EXPECT_EQ(Copy(&off, nullptr, 0), kCopyNotTaken);
  kernel_.other_device = false;  // walfs to walfs
  EXPECT_EQ(Copy(&off, nullptr, 10), kCopyNotTaken);
  kernel_.other_device = true;
  loff_t past = static_cast<loff_t>(g_reply.leased_size);
  EXPECT_EQ(Copy(&past, nullptr, 10), kCopyNotTaken);
  const int append = open(out_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  const int read_only = open(out_path_.c_str(), O_RDONLY | O_CLOEXEC);
  for (int fd : {append, read_only}) {
    kernel_.out_fd = fd;
    EXPECT_EQ(DirectCopyFileRange(*table_, in_, &off, fd, nullptr, 10, 0, kernel_,
                                  [](int) { ADD_FAILURE(); }),
              kCopyNotTaken);
  }
  close(append);
  close(read_only);
  // A tracked destination (another walfs file) is the kernel's too.
  kernel_.out_fd = out_;
  const int other = OpenFile(O_RDWR);
  EXPECT_EQ(DirectCopyFileRange(*table_, in_, &off, other, nullptr, 10, 0, kernel_,
                                [](int) { ADD_FAILURE(); }),
            kCopyNotTaken);
  close(other);
  EXPECT_EQ(kernel_.pwrites, 0);
  EXPECT_EQ(off, 0);
}

// L9 for a copy into a file: bytes written while the lease was being revoked are
// written again from the kernel's read before the call returns.
TEST_F(DirectCopyTest, ARevokedCopyIsRewrittenFromTheKernel) {
  ASSERT_EQ(LeasePending(in_, kFake, *table_, sessions_), LeaseOutcome::kGranted);
  kernel_.before_pwrite = [&] { SetStamp(kStamp + 1); };
  ASSERT_EQ(Copy(nullptr, nullptr, 6 * kBlock), static_cast<ssize_t>(6 * kBlock));
  EXPECT_EQ(Out(), std::string(6 * kBlock, 'K'));
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), static_cast<off_t>(6 * kBlock));
  EXPECT_EQ(lseek(out_, 0, SEEK_CUR), static_cast<off_t>(6 * kBlock));
  EXPECT_FALSE(table_->IsTracked(in_));
}

// ... and where the source shrank meanwhile, no byte of the pool stays behind: what the
// kernel no longer has is zeroed and the destination cut back to what was copied.
TEST_F(DirectCopyTest, ARevokedCopyOfAShrunkSourceLeavesNoPoolBytes) {
  ASSERT_EQ(LeasePending(in_, kFake, *table_, sessions_), LeaseOutcome::kGranted);
  ASSERT_EQ(pwrite(out_, "0123456789", 10, 0), 10);
  kernel_.before_pwrite = [&] {
    SetStamp(kStamp + 1);
    const int f = OpenFile(O_RDWR);
    EXPECT_EQ(ftruncate(f, 1000), 0);
    close(f);
  };
  loff_t in_off = 0, out_off = 0;
  ASSERT_EQ(Copy(&in_off, &out_off, 3 * kBlock), 1000);
  EXPECT_EQ(in_off, 1000);
  EXPECT_EQ(Out(), std::string(1000, 'K'));
}

// A restore_command's cp into pg_wal: the destination opened empty is given the source's
// size, takes a write lease, and the bytes are stored into the pool.
class DirectCopyInTest : public DirectLeaseTest {
 protected:
  void SetUp() override {
    DirectLeaseTest::SetUp();
    source_.resize(g_reply.leased_size);
    for (size_t i = 0; i < source_.size(); ++i) source_[i] = static_cast<char>('A' + i % 23);
    src_path_ = dir_ + "/archived";
    in_ = open(src_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_EQ(pwrite(in_, source_.data(), source_.size(), 0),
              static_cast<ssize_t>(source_.size()));
    ASSERT_EQ(truncate(file_path_.c_str(), 0), 0);
    out_ = OpenFile(O_WRONLY | O_TRUNC);
    ASSERT_EQ(NoteOpen(out_, O_WRONLY | O_TRUNC, kFake, *table_), LeaseOutcome::kEmpty);
    kernel_.out_fd = out_;
  }
  void TearDown() override {
    table_->UntrackRange(0, ~0u);
    close(in_);
    close(out_);
    unlink(src_path_.c_str());
    DirectLeaseTest::TearDown();
  }
  ssize_t CopyIn(loff_t* in_off, loff_t* out_off, size_t len) {
    return DirectCopyIntoEmpty(
        *table_, in_, in_off, out_, out_off, len, 0, kernel_,
        [&](int fd) { NoteSeek(fd, kFake, *table_); },
        [&](int fd, const void* buf, size_t n, off_t off) -> ssize_t {
          const struct iovec iov = {const_cast<void*>(buf), n};
          size_t written = 0;
          DirectResult r = TryDirectWritePmem(*table_, fd, &iov, 1, off, 0, &written);
          if (r == DirectResult::kPending) {
            ++leases_asked_;
            LeasePending(fd, kFake, *table_, sessions_);
            r = TryDirectWritePmem(*table_, fd, &iov, 1, off, 0, &written);
          }
          if (r == DirectResult::kStored) return static_cast<ssize_t>(written);
          ++kernel_writes_;
          return pwrite(fd, buf, n, off);
        });
  }
  off_t OutSize() {
    struct stat st;
    EXPECT_EQ(fstat(out_, &st), 0);
    return st.st_size;
  }

  std::string source_, src_path_;
  int in_ = -1;
  int out_ = -1;
  int leases_asked_ = 0;
  int kernel_writes_ = 0;
  CopyKernel kernel_;
};

TEST_F(DirectCopyInTest, AnEmptyDestinationIsSizedLeasedAndFilledThroughThePool) {
  ASSERT_EQ(CopyIn(nullptr, nullptr, SIZE_MAX), static_cast<ssize_t>(source_.size()));
  EXPECT_EQ(leases_asked_, 1);
  EXPECT_EQ(kernel_writes_, 0);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_TRUE(table_->IsTracked(out_));
  EXPECT_EQ(OutSize(), static_cast<off_t>(source_.size()));
  // Stored in the file's runs of the pool, not through the kernel's file.
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 4 * kBlock), source_.substr(0, 4 * kBlock));
  EXPECT_EQ(ReadAt(pool_fd_, 32 * kBlock, source_.size() - 4 * kBlock),
            source_.substr(4 * kBlock));
  const int plain = open(file_path_.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(ReadAt(plain, 0, 10), std::string(10, '\0'));
  close(plain);
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), static_cast<off_t>(source_.size()));
  EXPECT_EQ(lseek(out_, 0, SEEK_CUR), static_cast<off_t>(source_.size()));
}

TEST_F(DirectCopyInTest, OnlyAnEmptyPendingDestinationAtOffsetZeroIsTaken) {
  loff_t at_one = 1, zero = 0;
  EXPECT_EQ(CopyIn(nullptr, &at_one, SIZE_MAX), kCopyNotTaken);
  kernel_.other_device = false;  // walfs to walfs
  EXPECT_EQ(CopyIn(&zero, nullptr, SIZE_MAX), kCopyNotTaken);
  kernel_.other_device = true;
  loff_t at_end = static_cast<loff_t>(source_.size());
  EXPECT_EQ(CopyIn(&at_end, nullptr, SIZE_MAX), kCopyNotTaken);
  EXPECT_EQ(OutSize(), 0);
  // Once it has data, it is no longer the empty file this path is for.
  ASSERT_EQ(CopyIn(nullptr, nullptr, 100), 100);
  EXPECT_EQ(CopyIn(nullptr, nullptr, 100), kCopyNotTaken);
  EXPECT_EQ(kernel_.pwrites, 0);
}

TEST_F(DirectCopyInTest, AFailedSourceReadLeavesTheDestinationEmpty) {
  kernel_.pread_error = EIO;
  errno = 0;
  EXPECT_EQ(CopyIn(nullptr, nullptr, SIZE_MAX), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(OutSize(), 0);
  EXPECT_FALSE(table_->IsTracked(out_));
  EXPECT_EQ(lseek(in_, 0, SEEK_CUR), 0);
  EXPECT_EQ(lseek(out_, 0, SEEK_CUR), 0);
}

#ifdef WALFS_TEST_FACILITIES
TEST_F(DirectLeaseTest, PowerCutImageGetsEveryWriteToo) {
  const std::string image_path = dir_ + "/image";
  const int image_fd = MakeFile(image_path, kPoolSize);
  sessions_.Release(session_);
  ReceivedHello received;
  received.hello = testpool::MakeHello();
  received.hello.flags = lease::kHelloFlagImage;
  received.fds[0] = open(pool_path_.c_str(), O_RDWR | O_CLOEXEC);
  received.fds[1] = fcntl(stamps_fd_, F_DUPFD_CLOEXEC, 0);
  received.fds[2] = fcntl(image_fd, F_DUPFD_CLOEXEC, 0);
  received.count = 3;
  const char* reason = "";
  session_ = sessions_.Install(dev_, received, &reason);
  ASSERT_GE(session_, 0) << reason;
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  const std::string bytes(6000, 'q');
  ASSERT_EQ(Write(fd, bytes, 4 * kBlock - 1000), DirectResult::kStored);
  EXPECT_EQ(ReadAt(image_fd, 64 * kBlock + 4 * kBlock - 1000, 1000), bytes.substr(0, 1000));
  EXPECT_EQ(ReadAt(image_fd, 32 * kBlock, 5000), bytes.substr(1000));
  EXPECT_EQ(ReadAt(pool_fd_, 32 * kBlock, 5000), bytes.substr(1000));
  table_->Untrack(fd);
  close(fd);
  close(image_fd);
  unlink(image_path.c_str());
}
#endif

}  // namespace
}  // namespace walfs::direct
