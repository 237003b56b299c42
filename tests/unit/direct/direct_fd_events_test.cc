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
    EXPECT_EQ(table_->live_entries(), 0);  // no reference was left behind
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

// A copy of a tracked descriptor (pending or leased) is pending itself, with the access
// its own flags ask for and the file the source's entry noted: it takes its own lease at
// its first read or write (`dd` reads the copy dup2 made at 0 after closing what it
// opened). Every copying path does it: dup, dup2, dup3, F_DUPFD, F_DUPFD_CLOEXEC, through
// the wrappers' events and through syscall().
TEST_F(DirectFdEventsTest, CopiesOfATrackedDescriptorArePendingWithTheirOwnAccess) {
  g_walfs = true;
  // A free number for dup2 and dup3 to copy onto.
  const int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int target = fcntl(probe, F_DUPFD_CLOEXEC, 200);
  ASSERT_GE(target, 0);
  ASSERT_EQ(close(target), 0);
  ASSERT_EQ(close(probe), 0);
  const struct {
    const char* name;
    int (*copy)(DirectFdEventsTest&, int src, int target);
  } copiers[] = {
      {"dup", [](DirectFdEventsTest& t, int s, int) { return int(t.Sys(SYS_dup, s)); }},
      {"F_DUPFD", [](DirectFdEventsTest& t, int s, int) {
         return int(t.Sys(SYS_fcntl, s, F_DUPFD, 0));
       }},
      {"F_DUPFD_CLOEXEC", [](DirectFdEventsTest& t, int s, int) {
         return int(t.Sys(SYS_fcntl, s, F_DUPFD_CLOEXEC, 0));
       }},
      {"SYS_dup3", [](DirectFdEventsTest& t, int s, int to) {
         return int(t.Sys(SYS_dup3, s, to, O_CLOEXEC));
       }},
      {"dup2 (wrapper)", [](DirectFdEventsTest& t, int s, int to) {
         return t.events_.Dup2(s, to, [&] { return dup2(s, to); });
       }},
      {"fcntl (wrapper)", [](DirectFdEventsTest& t, int s, int) {
         return t.events_.Fcntl(s, F_DUPFD_CLOEXEC, 0,
                                [&] { return fcntl(s, F_DUPFD_CLOEXEC, 0); });
       }},
      {"dup (wrapper)",
       [](DirectFdEventsTest& t, int s, int) { return t.events_.Duplicated(s, dup(s)); }},
  };
  for (const int flags : {O_RDWR, O_WRONLY, O_RDONLY}) {
    const int src = events_.Opened(open(path_.c_str(), flags | O_CLOEXEC), flags);
    ASSERT_GE(src, 0);
    const uint32_t access = flags == O_RDONLY ? lease::kAccessRead : lease::kAccessWrite;
    dev_t dev;
    ino_t ino;
    {
      FdTable::Ref ref = table_->Acquire(src);
      ASSERT_TRUE(ref);
      dev = ref.entry()->dev;
      ino = ref.entry()->ino;
    }
    for (const bool leased : {false, true}) {
      if (leased) {
        // The source holds its lease: the copy still asks for its own.
        const FdTable::Entry* pending = table_->Acquire(src).entry();
        LeaseMapping mapping;
        mapping.access = access;
        ASSERT_TRUE(table_->ReplaceIf(src, pending, mapping));
      }
      for (const auto& c : copiers) {
        errno = 1234;
        const int fd = c.copy(*this, src, target);
        EXPECT_EQ(errno, 1234) << c.name;
        ASSERT_GE(fd, 0) << c.name;
        ASSERT_NE(fd, src) << c.name;
        {
          FdTable::Ref ref = table_->Acquire(fd);
          ASSERT_TRUE(ref) << c.name << " of flags " << flags << (leased ? ", leased" : "");
          EXPECT_TRUE(ref.pending()) << c.name;
          EXPECT_FALSE(ref.pending_empty()) << c.name;
          EXPECT_EQ(ref.pending_access(), access) << c.name;
          EXPECT_EQ(ref.entry()->dev, dev) << c.name;
          EXPECT_EQ(ref.entry()->ino, ino) << c.name;
        }
        EXPECT_EQ(table_->Acquire(src).pending(), !leased) << c.name;  // the source's is kept
        EXPECT_EQ(events_.Close(fd, [&] { return close(fd); }), 0);
        EXPECT_FALSE(table_->IsTracked(fd));
      }
    }
    EXPECT_EQ(events_.Close(src, [&] { return close(src); }), 0);
  }
  EXPECT_EQ(table_->live_entries(), 0);
}

TEST_F(DirectFdEventsTest, CopiesOfAnUntrackedDescriptorOrOntoItselfChangeNothing) {
  // Not a walfs file: neither it nor its copies are tracked.
  const int plain = events_.Opened(open(path_.c_str(), O_RDWR | O_CLOEXEC), O_RDWR);
  ASSERT_GE(plain, 0);
  ASSERT_FALSE(table_->IsTracked(plain));
  const int copy = static_cast<int>(Sys(SYS_dup, plain));
  ASSERT_GE(copy, 0);
  EXPECT_FALSE(table_->IsTracked(copy));
  // dup2 onto itself: the entry stays the same entry.
  g_walfs = true;
  const int src = events_.Opened(open(path_.c_str(), O_RDWR | O_CLOEXEC), O_RDWR);
  const FdTable::Entry* entry = table_->Acquire(src).entry();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(events_.Dup2(src, src, [&] { return dup2(src, src); }), src);
  EXPECT_EQ(table_->Acquire(src).entry(), entry);
  // A failed copy changes nothing and keeps the kernel's errno.
  errno = 0;
  EXPECT_EQ(Sys(SYS_dup3, src, -1, 0), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(table_->Acquire(src).entry(), entry);
  close(src);
  close(copy);
  close(plain);
}

// What the copy is decides, not what the source's entry says: a description whose flags
// changed unseen (a raw F_SETFL O_APPEND) gives copies no entry, and a copy of a number
// that was closed and reused unseen (the entry names another file) is not tracked.
TEST_F(DirectFdEventsTest, ACopyIsTrackedOnlyAsWhatItIs) {
  g_walfs = true;
  const int appending = events_.Opened(open(path_.c_str(), O_RDWR | O_CLOEXEC), O_RDWR);
  ASSERT_TRUE(table_->IsTracked(appending));
  ASSERT_EQ(::syscall(SYS_fcntl, appending, F_SETFL, O_APPEND), 0);  // not seen
  const int copy = static_cast<int>(Sys(SYS_dup, appending));
  ASSERT_GE(copy, 0);
  EXPECT_FALSE(table_->IsTracked(copy));
  close(copy);
  close(appending);
  const int reused = open(path_.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_TRUE(table_->TrackPending(reused, /*dev=*/1, /*ino=*/2));  // another file's entry
  const int copy2 = static_cast<int>(Sys(SYS_dup, reused));
  ASSERT_GE(copy2, 0);
  EXPECT_FALSE(table_->IsTracked(copy2));
  EXPECT_EQ(NoteDuplicate(reused, copy2, TestSources(), *table_), LeaseOutcome::kReused);
  EXPECT_FALSE(table_->IsTracked(copy2));
  close(copy2);
  close(reused);
}

// An empty file: a copy of a writer is pending and empty as the writer is (its writes go
// to the kernel until a seek finds data); a reader of an empty file is not tracked, so
// neither is its copy.
TEST_F(DirectFdEventsTest, CopiesOfAnEmptyFileFollowTheOpenRules) {
  g_walfs = true;
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  const int writer = events_.Opened(open(path_.c_str(), O_RDWR | O_CLOEXEC), O_RDWR);
  ASSERT_TRUE(table_->IsTracked(writer));
  const int copy = static_cast<int>(Sys(SYS_dup, writer));
  {
    FdTable::Ref ref = table_->Acquire(copy);
    ASSERT_TRUE(ref);
    EXPECT_TRUE(ref.pending_empty());
    EXPECT_EQ(ref.pending_access(), lease::kAccessWrite);
  }
  const int reader = events_.Opened(open(path_.c_str(), O_RDONLY | O_CLOEXEC), O_RDONLY);
  EXPECT_FALSE(table_->IsTracked(reader));
  close(reader);
  close(copy);
  close(writer);
}

}  // namespace
}  // namespace walfs::direct
