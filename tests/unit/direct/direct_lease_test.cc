// Lease validation, the open-time decision, and a lease end to end on tmpfs files: a
// "pool" file and a stand-in for the walfs file, with the ioctl answered by the test.
#include "fs/direct/lease.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fs/direct/direct_write.h"
#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kPoolSize = 256 * kBlock;
constexpr uint64_t kUuidOffset = 512;
constexpr uint8_t kUuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
// The lease's revocation word: the second of the stamps file.
constexpr uint64_t kStamp = 42;
constexpr uint64_t kStampOffset = 8;

// The file's bytes [0, 9 blocks) live in two runs, out of pool order; the lease ends
// inside the second run.
lease::Reply ValidReply() {
  lease::Reply r;
  memset(&r, 0, sizeof(r));
  r.magic = lease::kMagic;
  r.version = lease::kVersion;
  r.mode = lease::kModePmem;
  r.ino = 42;
  r.block_size = kBlock;
  r.leased_size = 9 * kBlock - 100;
  r.uuid_offset = kUuidOffset;
  memcpy(r.uuid, kUuid, sizeof(kUuid));
  r.run_count = 2;
  r.runs[0] = {.file_offset = 0, .pool_offset = 64 * kBlock, .length = 4 * kBlock};
  r.runs[1] = {.file_offset = 4 * kBlock, .pool_offset = 16 * kBlock, .length = 5 * kBlock};
  strcpy(r.pool_path, "/pool");
  r.stamp = kStamp;
  r.stamp_offset = kStampOffset;
  strcpy(r.stamp_path, "/stamps");
  return r;
}

// ---- ValidateReply ------------------------------------------------------------------

TEST(DirectLeaseValidateTest, AcceptsAValidReply) {
  const lease::Reply r = ValidReply();
  EXPECT_EQ(ValidateReply(r), nullptr);
  lease::Reply image = r;
  image.flags = lease::kFlagImage;
  strcpy(image.image_path, "/image");
  EXPECT_EQ(ValidateReply(image), nullptr);
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
      {"mode", [](lease::Reply& r) { r.mode = 2; }, "unknown mode"},
      {"flags", [](lease::Reply& r) { r.flags = 1u << 5; }, "unknown flags"},
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
      {"uuid offset", [](lease::Reply& r) { r.uuid_offset = UINT64_MAX - 3; }, "uuid_offset"},
      {"relative pool", [](lease::Reply& r) { strcpy(r.pool_path, "pool"); }, "pool_path"},
      {"empty pool", [](lease::Reply& r) { r.pool_path[0] = '\0'; }, "pool_path"},
      {"unterminated pool",
       [](lease::Reply& r) { memset(r.pool_path, '/', sizeof(r.pool_path)); }, "pool_path"},
      {"no stamp", [](lease::Reply& r) { r.stamp = 0; }, "no stamp"},
      {"stamp misaligned", [](lease::Reply& r) { r.stamp_offset = 12; }, "stamp_offset"},
      {"stamp overflow", [](lease::Reply& r) { r.stamp_offset = UINT64_MAX - 7; }, "stamp_offset"},
      {"relative stamps", [](lease::Reply& r) { strcpy(r.stamp_path, "stamps"); }, "stamp_path"},
      {"unterminated stamps",
       [](lease::Reply& r) { memset(r.stamp_path, '/', sizeof(r.stamp_path)); }, "stamp_path"},
      {"image without flag", [](lease::Reply& r) { strcpy(r.image_path, "/i"); }, "image_path"},
      {"flag without image", [](lease::Reply& r) { r.flags = lease::kFlagImage; }, "image_path"},
      {"unterminated image",
       [](lease::Reply& r) {
         r.flags = lease::kFlagImage;
         memset(r.image_path, '/', sizeof(r.image_path));
       },
       "image_path"},
  };
  for (const Mutation& m : mutations) {
    lease::Reply r = ValidReply();
    m.mutate(r);
    const char* reason = ValidateReply(r);
    ASSERT_NE(reason, nullptr) << m.name;
    EXPECT_NE(strstr(reason, m.reason), nullptr) << m.name << ": " << reason;
  }
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
lease::Reply g_reply;

bool FakeIsWalfs(dev_t) { return g_is_walfs; }
int FakeIoctl(int, lease::Reply* reply) {
  ++g_ioctl_calls;
  if (g_ioctl_error != 0) return -g_ioctl_error;
  *reply = g_reply;
  return 0;
}
constexpr LeaseSources kFake = {.stat_fd = CachedStat, .is_walfs = FakeIsWalfs,
                                .ioctl_lease = FakeIoctl};

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

class DirectLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/dev/shm/walfs-direct-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    pool_path_ = dir_ + "/pool";
    file_path_ = dir_ + "/000000010000000000000001";
    image_path_ = dir_ + "/image";
    stamps_path_ = dir_ + "/stamps";
    pool_fd_ = MakeFile(pool_path_, kPoolSize);
    stamps_fd_ = MakeFile(stamps_path_, 4096);
    SetStamp(kStamp);
    ASSERT_EQ(pwrite(pool_fd_, kUuid, sizeof(kUuid), kUuidOffset), 16);
    struct stat st;
    ASSERT_EQ(fstat(pool_fd_, &st), 0);
    g_reply = ValidReply();
    g_reply.pool_dev = st.st_dev;
    g_reply.pool_ino = st.st_ino;
    strcpy(g_reply.pool_path, pool_path_.c_str());
    strcpy(g_reply.stamp_path, stamps_path_.c_str());
    g_is_walfs = true;
    g_ioctl_error = 0;
    g_ioctl_calls = 0;
    close(MakeFile(file_path_, 9 * kBlock));
  }
  void TearDown() override {
    table_->UntrackRange(0, ~0u);
    EXPECT_EQ(pools_.open_count(), 0);
    close(pool_fd_);
    close(stamps_fd_);
    unlink(pool_path_.c_str());
    unlink(stamps_path_.c_str());
    unlink(file_path_.c_str());
    unlink(image_path_.c_str());
    rmdir(dir_.c_str());
  }
  static int MakeFile(const std::string& path, uint64_t size) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    return fd;
  }
  // What the daemon does at a FLUSH or RELEASE of the leased handle.
  void SetStamp(uint64_t value) {
    ASSERT_EQ(pwrite(stamps_fd_, &value, sizeof(value), kStampOffset), 8);
  }
  int OpenFile(int flags = O_RDWR) { return open(file_path_.c_str(), flags | O_CLOEXEC); }
  // The open and the first write, as the library does them.
  LeaseOutcome Lease(int fd, int flags = O_RDWR) {
    const LeaseOutcome noted = NoteOpen(fd, flags, kFake, *table_);
    if (noted != LeaseOutcome::kPending) return noted;
    return LeasePending(fd, kFake, *table_, pools_);
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

  std::string dir_, pool_path_, file_path_, image_path_, stamps_path_;
  int pool_fd_ = -1;
  int stamps_fd_ = -1;
  std::unique_ptr<FdTable> table_ = std::make_unique<FdTable>();
  PoolFiles pools_;
};

TEST_F(DirectLeaseTest, ReadOnlyAndAppendOpensAskNothing) {
  const int fd = OpenFile(O_RDONLY);
  EXPECT_EQ(Lease(fd, O_RDONLY), LeaseOutcome::kNotWanted);
  EXPECT_EQ(Lease(fd, O_WRONLY | O_APPEND), LeaseOutcome::kNotWanted);
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
  EXPECT_FALSE(table_->IsTracked(fd));
  // Once it has data, the same file is asked for.
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(9 * kBlock)), 0);
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  EXPECT_EQ(g_ioctl_calls, 1);
  close(fd);
}

TEST_F(DirectLeaseTest, TheLeaseIsTakenAtTheFirstWriteNotAtOpen) {
  const int fd = OpenFile();
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_TRUE(table_->IsTracked(fd));
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_EQ(pools_.open_count(), 0);
  // An fsync-only descriptor (durable_rename): the kernel answers, no lease is asked.
  EXPECT_FALSE(SyncIsDone(*table_, fd));
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_TRUE(table_->IsTracked(fd));
  // The first write says so; the caller leases and tries again.
  EXPECT_EQ(Write(fd, "first", 0), DirectResult::kPending);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), std::string(5, '\0'));
  errno = 1234;
  ASSERT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kGranted);
  EXPECT_EQ(errno, 1234);
  EXPECT_EQ(g_ioctl_calls, 1);
  ASSERT_EQ(Write(fd, "first", 0), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), "first");
  EXPECT_TRUE(SyncIsDone(*table_, fd));
  // Leased now: asking again is not the first write any more.
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 1);
  EXPECT_TRUE(table_->IsTracked(fd));
  table_->Untrack(fd);
  EXPECT_EQ(pools_.open_count(), 0);
  EXPECT_EQ(table_->live_entries(), 0);
  // Untracked: nothing to lease.
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kReused);
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
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  // Reused for a pipe: fstat says so as well.
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(syscall(SYS_dup2, pipe_fds[1], fd), fd);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kReused);
  EXPECT_EQ(g_ioctl_calls, 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(table_->live_entries(), 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(other);
  close(fd);
  unlink((dir_ + "/other").c_str());
}

TEST_F(DirectLeaseTest, AFailedFirstWriteLeaseLeavesTheDescriptorUntracked) {
  const int fd = OpenFile();
  g_ioctl_error = EOPNOTSUPP;  // msync mode
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kIoctlFailed);
  // Later writes cost one load and go to the kernel; the daemon is asked once.
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  EXPECT_EQ(g_ioctl_calls, 1);
  g_ioctl_error = 0;
  strcpy(g_reply.pool_path, file_path_.c_str());  // the pool cannot be had
  ASSERT_EQ(NoteOpen(fd, O_RDWR, kFake, *table_), LeaseOutcome::kPending);
  EXPECT_EQ(LeasePending(fd, kFake, *table_, pools_), LeaseOutcome::kMapFailed);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(table_->live_entries(), 0);
  EXPECT_EQ(pools_.open_count(), 0);
  close(fd);
}

TEST_F(DirectLeaseTest, IoctlFailureAndBadRepliesFallBackSilently) {
  const int fd = OpenFile();
  for (int err : {EOPNOTSUPP, ENODATA, EBADF, ENOTTY}) {
    g_ioctl_error = err;
    errno = 1234;
    EXPECT_EQ(Lease(fd), LeaseOutcome::kIoctlFailed) << err;
    EXPECT_EQ(errno, 1234);  // never changes errno
  }
  g_ioctl_error = 0;
  g_reply.magic = 0;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kInvalid);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(pools_.open_count(), 0);
  close(fd);
}

TEST_F(DirectLeaseTest, PoolIdentityIsChecked) {
  const int fd = OpenFile();
  lease::Reply good = g_reply;
  g_reply.uuid[3] ^= 0xff;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  g_reply = good;
  g_reply.pool_ino += 1;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  g_reply = good;
  strcpy(g_reply.pool_path, file_path_.c_str());  // another file entirely
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  g_reply = good;
  g_reply.runs[1].pool_offset = kPoolSize - kBlock;  // past the end: would SIGBUS
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(pools_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
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
  EXPECT_EQ(ReadAt(pool_fd_, 16 * kBlock, 4096), page.substr(4096));
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
  EXPECT_EQ(ReadAt(pool_fd_, 16 * kBlock + (leased - 300 - 4 * kBlock), 300), a + b);

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
  EXPECT_EQ(pools_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  EXPECT_EQ(Write(fd, "z", 0), DirectResult::kUntracked);
  close(fd);
}

TEST_F(DirectLeaseTest, OnePoolDescriptionSharedByAllLeases) {
  const int fd1 = OpenFile();
  const int fd2 = OpenFile();
  ASSERT_EQ(Lease(fd1), LeaseOutcome::kGranted);
  ASSERT_EQ(Lease(fd2), LeaseOutcome::kGranted);
  EXPECT_EQ(pools_.open_count(), 1);
  table_->Untrack(fd1);
  EXPECT_EQ(pools_.open_count(), 1);
  EXPECT_EQ(LockSeenBy(pool_path_), F_RDLCK);
  ASSERT_EQ(Write(fd2, "still", 0), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), "still");
  table_->Untrack(fd2);
  EXPECT_EQ(pools_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  close(fd1);
  close(fd2);
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
  EXPECT_EQ(pools_.open_count(), 0);
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
  EXPECT_EQ(pools_.open_count(), 0);
  close(fd);
}

TEST_F(DirectLeaseTest, StampsAreCheckedBeforeAnythingIsTracked) {
  const int fd = OpenFile();
  SetStamp(kStamp + 1);  // revoked between the reply and the mapping
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  SetStamp(kStamp);
  lease::Reply good = g_reply;
  g_reply.stamp_offset = 4096;  // past the end of the file
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  g_reply = good;
  strcpy(g_reply.stamp_path, (dir_ + "/missing").c_str());
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  g_reply = good;
  ASSERT_EQ(mkdir((dir_ + "/dir").c_str(), 0700), 0);
  strcpy(g_reply.stamp_path, (dir_ + "/dir").c_str());  // not a regular file
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  rmdir((dir_ + "/dir").c_str());
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_EQ(pools_.open_count(), 0);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  g_reply = good;
  EXPECT_EQ(Lease(fd), LeaseOutcome::kGranted);
  table_->Untrack(fd);
  close(fd);
}

TEST_F(DirectLeaseTest, PowerCutImageGetsEveryWriteToo) {
  const int image_fd = MakeFile(image_path_, kPoolSize);
  g_reply.flags = lease::kFlagImage;
  strcpy(g_reply.image_path, image_path_.c_str());
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  const std::string bytes(6000, 'q');
  ASSERT_EQ(Write(fd, bytes, 4 * kBlock - 1000), DirectResult::kStored);
  EXPECT_EQ(ReadAt(image_fd, 64 * kBlock + 4 * kBlock - 1000, 1000), bytes.substr(0, 1000));
  EXPECT_EQ(ReadAt(image_fd, 16 * kBlock, 5000), bytes.substr(1000));
  EXPECT_EQ(ReadAt(pool_fd_, 16 * kBlock, 5000), bytes.substr(1000));
  table_->Untrack(fd);
  close(fd);
  close(image_fd);
}

TEST_F(DirectLeaseTest, MissingImageRefusesTheLease) {
  g_reply.flags = lease::kFlagImage;
  strcpy(g_reply.image_path, image_path_.c_str());  // never created
  const int fd = OpenFile();
  EXPECT_EQ(Lease(fd), LeaseOutcome::kMapFailed);
  EXPECT_EQ(pools_.open_count(), 0);
  close(fd);
}

// The application cannot close the pool descriptor by number: ranges go around it, and a
// dup2 target that is a pool descriptor is renumbered first, lock and all.
TEST_F(DirectLeaseTest, PoolDescriptorIsKeptFromTheApplication) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  int pool_fds[PoolFiles::kMaxPools];
  ASSERT_EQ(pools_.PoolFdsIn(0, UINT_MAX, pool_fds), 1);
  const int p = pool_fds[0];
  EXPECT_TRUE(pools_.IsPoolFd(p));
  EXPECT_FALSE(pools_.IsPoolFd(fd));
  EXPECT_EQ(pools_.PoolFdsIn(0, static_cast<unsigned>(p) - 1, pool_fds), 0);

  std::vector<std::pair<unsigned, unsigned>> ranges;
  const auto record = [&](unsigned a, unsigned b) {
    ranges.emplace_back(a, b);
    return 0;
  };
  EXPECT_EQ(CloseRangeAroundPools(pools_, 3, UINT_MAX, 0, record), 0);
  const std::vector<std::pair<unsigned, unsigned>> around = {
      {3u, static_cast<unsigned>(p) - 1}, {static_cast<unsigned>(p) + 1, UINT_MAX}};
  EXPECT_EQ(ranges, around);
  ranges.clear();
  CloseRangeAroundPools(pools_, p, p, 0, record);
  EXPECT_TRUE(ranges.empty());
  CloseRangeAroundPools(pools_, 3, UINT_MAX, CLOSE_RANGE_CLOEXEC, record);
  const std::vector<std::pair<unsigned, unsigned>> whole = {{3u, UINT_MAX}};
  EXPECT_EQ(ranges, whole);
  ranges.clear();
  EXPECT_EQ(CloseRangeAroundPools(pools_, 0, 2, 0, record), 0);
  const std::vector<std::pair<unsigned, unsigned>> below = {{0u, 2u}};
  EXPECT_EQ(ranges, below);

  ASSERT_TRUE(pools_.MoveAside(p));
  EXPECT_FALSE(pools_.IsPoolFd(p));
  EXPECT_EQ(fcntl(p, F_GETFD), -1);  // free for the application
  EXPECT_EQ(LockSeenBy(pool_path_), F_RDLCK);
  ASSERT_EQ(Write(fd, "moved", 0), DirectResult::kStored);
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 5), "moved");
  table_->Untrack(fd);
  EXPECT_EQ(LockSeenBy(pool_path_), F_UNLCK);
  EXPECT_TRUE(pools_.MoveAside(fd));  // not a pool descriptor: nothing to do
  close(fd);
}

// Not a performance assertion (the machine is shared): prints the cost of an 8 KiB write
// through the direct path (stamp check + non-temporal copy + drain) next to a
// tmpfs pwrite, and checks the last direct write landed.
TEST_F(DirectLeaseTest, DirectPathCost) {
  const int fd = OpenFile();
  ASSERT_EQ(Lease(fd), LeaseOutcome::kGranted);
  std::string page(8192, 'd');
  const struct iovec iov = {page.data(), page.size()};
  constexpr int kIters = 20000;
  using Clock = std::chrono::steady_clock;
  size_t written = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    page[0] = static_cast<char>(i);
    ASSERT_EQ(TryDirectWritePmem(*table_, fd, &iov, 1, 0, 0, &written), DirectResult::kStored);
  }
  auto t1 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    ASSERT_EQ(pwrite(pool_fd_, page.data(), page.size(), 128 * kBlock), 8192);
  }
  auto t2 = Clock::now();
  const auto ns = [](auto d) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) /
           kIters;
  };
  std::printf("[ cost  ] 8 KiB write: direct path %.0f ns, tmpfs pwrite %.0f ns\n", ns(t1 - t0),
              ns(t2 - t1));
  EXPECT_EQ(ReadAt(pool_fd_, 64 * kBlock, 8192), std::string(1, static_cast<char>(kIters - 1)) +
                                                      std::string(8191, 'd'));
  table_->Untrack(fd);
  close(fd);
}

}  // namespace
}  // namespace walfs::direct
