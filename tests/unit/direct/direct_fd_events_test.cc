// The descriptor events (FdEvents), driven with a real table, a real registry of
// library-owned descriptors and libc's own calls as the "real" ones: the application's
// close, dup2, close_range and syscall() paths never reach a library-owned descriptor,
// and every descriptor-creating path drops a stale entry.
#include "fs/direct/fd_events.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

bool IsOpen(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) != -1; }

bool g_walfs = false;
bool AlwaysWalfs(dev_t) { return g_walfs; }
int NoIoctl(int, lease::Reply*) { return -ENOTTY; }
const LeaseSources& TestSources() {
  static const LeaseSources sources = {.stat_fd = CachedStat,
                                       .is_walfs = AlwaysWalfs,
                                       .ioctl_lease = NoIoctl,
                                       .same_description = SameDescription,
                                       .session = &ProductionSessionSources()};
  return sources;
}

// libc's syscall, as the library's WALFS_REAL(syscall) would be.
long RealSyscall(long number, long a0, long a1, long a2, long a3, long a4, long a5) {
  return ::syscall(number, a0, a1, a2, a3, a4, a5);
}

class DirectFdEventsTest : public ::testing::Test {
 public:
  void SetUp() override {
    char dir[] = "/dev/shm/walfs-fdcalls-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/file";
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
    g_walfs = false;
  }
  void TearDown() override {
    table_->UntrackRange(0, ~0u);
    owned_->Close(&cell_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  // A library-owned descriptor (as a session's or a lease's private one would be).
  int Own() {
    const int fd = memfd_create("walfs-owned", MFD_CLOEXEC);
    EXPECT_TRUE(owned_->Adopt(fd, &cell_));
    return fd;
  }
  long Sys(long number, long a0 = 0, long a1 = 0, long a2 = 0, long a3 = 0) {
    const long a[6] = {a0, a1, a2, a3, 0, 0};
    return events_.Syscall(number, a, RealSyscall);
  }
  // A number the table still tracks although it was closed where nobody saw it.
  int StaleNumber() {
    const int fd = open(path_.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_TRUE(table_->TrackPending(fd, 1, 2));
    EXPECT_EQ(::syscall(SYS_close, fd), 0);
    return fd;
  }

  std::string dir_, path_;
  std::atomic<int> cell_{-1};
  std::unique_ptr<OwnedFds> owned_ = std::make_unique<OwnedFds>();
  std::unique_ptr<FdTable> table_ = std::make_unique<FdTable>(owned_.get());
  FdEvents events_{table_.get(), owned_.get(), TestSources};
};

TEST_F(DirectFdEventsTest, CloseOfAnOwnedDescriptorFailsAsIfItWereNotOpen) {
  const int owned = Own();
  int real_calls = 0;
  errno = 0;
  EXPECT_EQ(events_.Close(owned, [&] { return ++real_calls, 0; }), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(real_calls, 0);
  errno = 0;
  EXPECT_EQ(Sys(SYS_close, owned), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_TRUE(IsOpen(owned));
  // A tracked descriptor: its entry goes, then the real close.
  const int fd = open(path_.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_TRUE(table_->TrackPending(fd, 1, 2));
  EXPECT_EQ(Sys(SYS_close, fd), 0);
  EXPECT_FALSE(table_->IsTracked(fd));
  EXPECT_FALSE(IsOpen(fd));
  errno = 0;
  EXPECT_EQ(Sys(SYS_close, fd), -1);  // the kernel's own EBADF
  EXPECT_EQ(errno, EBADF);
}

TEST_F(DirectFdEventsTest, CloseRangeSkipsOwnedDescriptors) {
  const int owned = Own();
  const int low = fcntl(owned, F_DUPFD_CLOEXEC, 0);  // any other descriptors around it
  const int high = fcntl(owned, F_DUPFD_CLOEXEC, owned + 1);
  ASSERT_TRUE(table_->TrackPending(high, 1, 2));
  EXPECT_EQ(Sys(SYS_close_range, low < owned ? low : owned, high, 0), 0);
  EXPECT_TRUE(IsOpen(owned));
  EXPECT_FALSE(IsOpen(low));
  EXPECT_FALSE(IsOpen(high));
  EXPECT_FALSE(table_->IsTracked(high));
  // CLOSE_RANGE_CLOEXEC closes nothing and keeps entries.
  const int again = fcntl(owned, F_DUPFD, owned + 1);
  ASSERT_TRUE(table_->TrackPending(again, 1, 2));
  EXPECT_EQ(events_.CloseRange(static_cast<unsigned>(owned), ~0u, CLOSE_RANGE_CLOEXEC,
                              [](unsigned a, unsigned b) {
                                return static_cast<int>(::syscall(SYS_close_range, a, b,
                                                                  CLOSE_RANGE_CLOEXEC));
                              }),
            0);
  EXPECT_TRUE(table_->IsTracked(again));
  EXPECT_EQ(fcntl(again, F_GETFD), FD_CLOEXEC);
  close(again);
}

TEST_F(DirectFdEventsTest, Dup2OntoAnOwnedNumberMovesItAsideFirst) {
  const int owned = Own();
  const int app = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(Sys(SYS_dup3, app, owned, 0), owned);
  EXPECT_NE(cell_.load(), owned);  // renumbered, still open and owned
  EXPECT_TRUE(IsOpen(cell_.load()));
  EXPECT_TRUE(owned_->IsOwned(cell_.load()));
  EXPECT_FALSE(owned_->IsOwned(owned));
  struct stat a, b;
  ASSERT_EQ(fstat(owned, &a), 0);  // the application's file now
  ASSERT_EQ(fstat(app, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  // Onto a tracked number: the entry goes.
  ASSERT_TRUE(table_->TrackPending(owned, 1, 2));
  events_.Replacing(app, owned);
  EXPECT_FALSE(table_->IsTracked(owned));
  close(owned);
  close(app);
}

TEST_F(DirectFdEventsTest, EveryCreatingSyscallDropsAStaleEntry) {
  const int src = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  struct open_how how = {};
  how.flags = O_RDONLY | O_CLOEXEC;
  const struct {
    const char* name;
    long (*call)(DirectFdEventsTest&, int src, const char* path, struct open_how* how);
  } creators[] = {
      {"dup", [](DirectFdEventsTest& t, int s, const char*, struct open_how*) {
         return t.Sys(SYS_dup, s);
       }},
      {"F_DUPFD", [](DirectFdEventsTest& t, int s, const char*, struct open_how*) {
         return t.Sys(SYS_fcntl, s, F_DUPFD, 0);
       }},
      {"F_DUPFD_CLOEXEC", [](DirectFdEventsTest& t, int s, const char*, struct open_how*) {
         return t.Sys(SYS_fcntl, s, F_DUPFD_CLOEXEC, 0);
       }},
      {"openat", [](DirectFdEventsTest& t, int, const char* p, struct open_how*) {
         return t.Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(p), O_RDONLY, 0);
       }},
#ifdef SYS_open
      {"open", [](DirectFdEventsTest& t, int, const char* p, struct open_how*) {
         return t.Sys(SYS_open, reinterpret_cast<long>(p), O_RDONLY, 0);
       }},
#endif
      {"openat2", [](DirectFdEventsTest& t, int, const char* p, struct open_how* h) {
         return t.Sys(SYS_openat2, AT_FDCWD, reinterpret_cast<long>(p),
                      reinterpret_cast<long>(h), sizeof(*h));
       }},
  };
  for (const auto& c : creators) {
    const int stale = StaleNumber();
    const long fd = c.call(*this, src, path_.c_str(), &how);
    if (fd < 0 && errno == ENOSYS) continue;  // a kernel without openat2
    ASSERT_EQ(fd, stale) << c.name;  // the lowest free number: the stale one
    EXPECT_FALSE(table_->IsTracked(stale)) << c.name;
    EXPECT_EQ(table_->live_entries(), 0) << c.name;
    close(stale);
  }
  close(src);
}

// The opens also note a walfs file opened for writing, with the flags the call carried.
TEST_F(DirectFdEventsTest, SyscallOpensNoteWalfsFilesWithTheirFlags) {
  g_walfs = true;
  const long ro = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path_.c_str()), O_RDONLY, 0);
  ASSERT_GE(ro, 0);
  {
    // Read-only: pending, to ask for a read lease at its first pread.
    FdTable::Ref ref = table_->Acquire(static_cast<int>(ro));
    ASSERT_TRUE(ref);
    EXPECT_TRUE(ref.pending());
    EXPECT_EQ(ref.pending_access(), lease::kAccessRead);
  }
  const long path_only =
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path_.c_str()), O_PATH, 0);
  ASSERT_GE(path_only, 0);
  EXPECT_FALSE(table_->IsTracked(static_cast<int>(path_only)));
  close(static_cast<int>(path_only));
  const long rw = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path_.c_str()), O_RDWR, 0);
  ASSERT_GE(rw, 0);
  {
    FdTable::Ref ref = table_->Acquire(static_cast<int>(rw));
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref.pending_access(), lease::kAccessWrite);
  }
  struct open_how how = {};
  how.flags = O_RDWR | O_CLOEXEC;
  const long o2 = Sys(SYS_openat2, AT_FDCWD, reinterpret_cast<long>(path_.c_str()),
                      reinterpret_cast<long>(&how), sizeof(how));
  if (o2 >= 0) {
    EXPECT_TRUE(table_->IsTracked(static_cast<int>(o2)));
    how.flags = O_WRONLY | O_APPEND;
    const long app = Sys(SYS_openat2, AT_FDCWD, reinterpret_cast<long>(path_.c_str()),
                         reinterpret_cast<long>(&how), sizeof(how));
    ASSERT_GE(app, 0);
    EXPECT_FALSE(table_->IsTracked(static_cast<int>(app)));
    close(static_cast<int>(app));
    close(static_cast<int>(o2));
  }
  // A failed open changes nothing and keeps the kernel's errno.
  errno = 0;
  EXPECT_EQ(Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/nonexistent/x"), O_RDWR, 0), -1);
  EXPECT_EQ(errno, ENOENT);
  // O_APPEND set later drops the entry before it takes effect.
  EXPECT_EQ(Sys(SYS_fcntl, rw, F_SETFL, O_APPEND), 0);
  EXPECT_FALSE(table_->IsTracked(static_cast<int>(rw)));
  close(static_cast<int>(ro));
  close(static_cast<int>(rw));
}

}  // namespace
}  // namespace walfs::direct
