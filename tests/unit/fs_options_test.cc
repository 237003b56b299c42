// Tests of the daemon's pieces that need no mount: the command line (mount.fuse3 argv
// shape, ignored and refused options), the status document, the errno conversion,
// sd_notify and the pool lock.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "fs/errors.h"
#include "fs/mount_point.h"
#include "fs/options.h"
#include "fs/pool_lock.h"
#include "fs/sd_notify.h"
#include "fs/status_json.h"
#include "gtest/gtest.h"

namespace walfs::fs {
namespace {

absl::StatusOr<Options> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "walfs");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(FsOptionsTest, MountHelperShape) {
  absl::StatusOr<Options> o =
      Parse({"/pools/a", "/mnt/wal", "-o", "rw,nodev,nosuid,allow_other,threads=2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->pool, "/pools/a");
  EXPECT_EQ(o->mountpoint, "/mnt/wal");
  EXPECT_TRUE(o->allow_other);
  EXPECT_FALSE(o->foreground);
  EXPECT_EQ(o->threads, 2u);
  EXPECT_EQ(o->durability, Durability::kAuto);
  EXPECT_EQ(o->ignored, (std::vector<std::string>{"rw", "nodev", "nosuid"}));
}

TEST(FsOptionsTest, FlagsAnywhereAndJoinedO) {
  absl::StatusOr<Options> o =
      Parse({"-f", "pool", "-odurability=strict,ro", "mnt", "-o", "fsname=x,subtype=y"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->foreground);
  EXPECT_TRUE(o->read_only);
  EXPECT_EQ(o->durability, Durability::kStrict);
  EXPECT_EQ(o->fsname, "x");
  EXPECT_EQ(o->subtype, "y");
  EXPECT_EQ(o->pool.front(), '/');  // made absolute
  EXPECT_TRUE(o->pool.ends_with("/pool"));
  EXPECT_TRUE(o->mountpoint.ends_with("/mnt"));
}

TEST(FsOptionsTest, DebugImpliesForeground) {
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-d"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->debug);
  EXPECT_TRUE(o->foreground);
  o = Parse({"/p", "/m", "-s"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->threads, 1u);
}

TEST(FsOptionsTest, SystemdAndFstabOptionsIgnored) {
  absl::StatusOr<Options> o =
      Parse({"/p", "/m", "-o",
             "defaults,_netdev,nofail,x-systemd.requires=a.service,comment=x,noatime,"
             "relatime,auto,noauto,user,users,dev,suid,exec,atime"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->ignored.size(), 15u);
}

TEST(FsOptionsTest, UnknownOptionRefused) {
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", "allow_other,bogus=1"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("unknown mount option 'bogus=1'"), std::string::npos);
  EXPECT_FALSE(Parse({"/p", "/m", "--frobnicate"}).ok());
}

TEST(FsOptionsTest, BadValuesRefused) {
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "threads=0"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "threads=65"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "threads=abc"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "durability=sometimes"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "allow_other=1"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "fsname="}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "-o"}).ok());
}

TEST(FsOptionsTest, TuningDefaults) {
  absl::StatusOr<Options> o = Parse({"/p", "/m"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_write, 1u << 20);
  EXPECT_TRUE(o->clone_fd);
  EXPECT_EQ(o->max_idle_threads, 0u);
  EXPECT_EQ(o->entry_timeout, 86400.0);
  EXPECT_EQ(o->attr_timeout, 86400.0);
}

TEST(FsOptionsTest, TuningOptions) {
  absl::StatusOr<Options> o =
      Parse({"/p", "/m", "-o",
             "threads=8,max_idle_threads=2,noclone_fd,max_write=128K,entry_timeout=0,"
             "attr_timeout=1.5"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->threads, 8u);
  EXPECT_EQ(o->max_idle_threads, 2u);
  EXPECT_FALSE(o->clone_fd);
  EXPECT_EQ(o->max_write, 128u * 1024);
  EXPECT_EQ(o->entry_timeout, 0.0);
  EXPECT_EQ(o->attr_timeout, 1.5);
  EXPECT_TRUE(o->ignored.empty());

  o = Parse({"/p", "/m", "-o", "noclone_fd,clone_fd,max_write=1MiB"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->clone_fd);
  EXPECT_EQ(o->max_write, 1u << 20);
  o = Parse({"/p", "/m", "-o", "max_write=65536"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_write, 65536u);
}

TEST(FsOptionsTest, BadTuningValuesRefused) {
  for (const char* bad :
       {"max_write=2M", "max_write=1023", "max_write=", "max_write=1G", "max_write=12X",
        "max_write", "entry_timeout=-1", "entry_timeout=nan", "attr_timeout=abc",
        "attr_timeout", "entry_timeout=1e9", "max_idle_threads=0", "max_idle_threads=65",
        "clone_fd=1", "noclone_fd=0"}) {
    absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", bad});
    EXPECT_FALSE(o.ok()) << bad;
    if (!o.ok()) {
      // The message names the option.
      std::string key = std::string(bad).substr(0, std::string(bad).find('='));
      EXPECT_NE(std::string(o.status().message()).find(key), std::string::npos)
          << bad << ": " << o.status().message();
    }
  }
  // More idle threads than threads cannot be meant.
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", "threads=2,max_idle_threads=4"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(std::string(o.status().message()).find("max_idle_threads=4"), std::string::npos);
}

TEST(FsOptionsTest, Experiments) {
  absl::StatusOr<Experiments> e = ParseExperiments("");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->any());
  e = ParseExperiments("page_cache,no_zero_elision");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->page_cache);
  EXPECT_TRUE(e->no_zero_elision);
  EXPECT_FALSE(e->ignore_dsync);
  e = ParseExperiments("ignore_dsync");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->ignore_dsync);
  e = ParseExperiments("page_cache,zero_elision");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("'zero_elision'"), std::string::npos);
}

TEST(FsOptionsTest, PositionalCount) {
  EXPECT_FALSE(Parse({"/p"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "/x"}).ok());
  absl::StatusOr<Options> o = Parse({"--help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->show_help);
}

TEST(FsOptionsTest, PowerCutSimulationIsOptInAndNotAKernelOption) {
  if (!kTestFacilitiesBuilt) GTEST_SKIP() << "built without WALFS_TEST_FACILITIES";
  absl::StatusOr<Options> o = Parse({"/p", "/m"});
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->powercut_sim);
  o = Parse({"/p", "/m", "-o", "allow_other,powercut_sim"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->powercut_sim);
  EXPECT_TRUE(o->ignored.empty());
  EXPECT_EQ(FuseSessionArgs(*o)[2], "fsname=/p,subtype=walfs,default_permissions,allow_other");
  EXPECT_NE(Usage("walfs").find("powercut_sim"), std::string::npos);

  o = Parse({"/p", "/m", "-o", "powercut_sim=1"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("'powercut_sim' takes no value"), std::string::npos)
      << o.status();
  // A read-only mount never persists anything, so there would be nothing to cut.
  o = Parse({"/p", "/m", "-o", "ro,powercut_sim"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("cannot be used with ro"), std::string::npos)
      << o.status();
}

// A shipped build has no test facilities: the option is refused by name, and the usage
// does not offer it.
TEST(FsOptionsTest, PowerCutSimulationIsRefusedWithoutTestFacilities) {
  if (kTestFacilitiesBuilt) GTEST_SKIP() << "built with WALFS_TEST_FACILITIES";
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", "powercut_sim"});
  ASSERT_FALSE(o.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(o.status()));
  EXPECT_NE(o.status().message().find("built without test facilities"), std::string::npos)
      << o.status();
  EXPECT_EQ(Usage("walfs").find("powercut_sim"), std::string::npos);
}

// fuse_opt_parse reads -o lists: '\,' is a comma inside a value, '\\' a backslash.
TEST(FsOptionsTest, OptionListsAreSplitAsLibfuseSplitsThem) {
  absl::StatusOr<Options> o =
      Parse({"/p", "/m", "-o", "fsname=pool\\,one,subtype=a\\\\b", "-oro"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->fsname, "pool,one");
  EXPECT_EQ(o->subtype, "a\\b");
  EXPECT_TRUE(o->read_only);
  // Escaped again on the way to fuse_session_new.
  EXPECT_EQ(FuseSessionArgs(*o)[2], "fsname=pool\\,one,subtype=a\\\\b,default_permissions,ro");
  // An empty option between commas is nothing; '--' ends the options.
  o = Parse({"-o", ",allow_other,", "--", "/p", "-m"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->allow_other);
  EXPECT_TRUE(o->mountpoint.ends_with("/-m")) << "after --, -m is the mount point";
  o = Parse({"/p", "/m", "-o", "-x"});
  ASSERT_FALSE(o.ok());
}

// As sshfs: both go to libfuse, which mounts accordingly.
TEST(FsOptionsTest, AllowRootAndAutoUnmount) {
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", "allow_root,auto_unmount"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->allow_root);
  EXPECT_TRUE(o->auto_unmount);
  EXPECT_FALSE(o->allow_other);
  EXPECT_EQ(FuseSessionArgs(*o)[2],
            "fsname=/p,subtype=walfs,default_permissions,allow_root,auto_unmount");
  o = Parse({"/p", "/m", "-o", "allow_root,allow_other"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("allow_other and allow_root"), std::string::npos)
      << o.status();
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "auto_unmount=1"}).ok());
}

// max_write takes the sizes every walfs program takes (util/byte_size.h).
TEST(FsOptionsTest, MaxWriteSizes) {
  for (const char* spec : {"max_write=64K", "max_write=64KB", "max_write=64KiB",
                           "max_write=64k", "max_write=65536"}) {
    absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", spec});
    ASSERT_TRUE(o.ok()) << spec << ": " << o.status();
    EXPECT_EQ(o->max_write, 65536u) << spec;
  }
  absl::StatusOr<Options> o = Parse({"/p", "/m", "-o", "max_write=512k"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_write, 512u * 1024);
  o = Parse({"/p", "/m", "-o", "max_write=1MB"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_write, 1u << 20);
  o = Parse({"/p", "/m", "-o", "max_write=64Q"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("64M, 64MB, 64MiB, 512k"), std::string::npos)
      << o.status();
  o = Parse({"/p", "/m", "-o", "max_write=2M"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("4K to 1M"), std::string::npos) << o.status();
}

TEST(FsOptionsTest, SessionArgsAlwaysDefaultPermissions) {
  absl::StatusOr<Options> o = Parse({"/pools/a,b", "/m", "-o", "allow_other,ro,noexec", "-d"});
  ASSERT_TRUE(o.ok());
  std::vector<std::string> args = FuseSessionArgs(*o);
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[1], "-o");
  EXPECT_EQ(args[2],
            "fsname=/pools/a\\,b,subtype=walfs,default_permissions,allow_other,ro,noexec");
  EXPECT_EQ(args[3], "-d");
  o = Parse({"/p", "/m"});
  ASSERT_TRUE(o.ok());
  args = FuseSessionArgs(*o);
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[2], "fsname=/p,subtype=walfs,default_permissions");
}

TEST(FsOptionsTest, NonemptyIsOursNotLibfuses) {
  absl::StatusOr<Options> o = Parse({"/p", "/m"});
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->nonempty);
  o = Parse({"/p", "/m", "-o", "allow_other,nonempty"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->nonempty);
  EXPECT_TRUE(o->ignored.empty());
  // libfuse 3 refuses "nonempty" as an unknown option: it must not reach the session.
  for (const std::string& a : FuseSessionArgs(*o)) {
    EXPECT_EQ(a.find("nonempty"), std::string::npos) << a;
  }
  EXPECT_FALSE(Parse({"/p", "/m", "-o", "nonempty=1"}).ok());
}

// A private scratch directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = ::testing::TempDir();
    if (!base.empty() && base.back() == '/') base.pop_back();
    std::string pattern = base + "/walfs-mountpoint-test.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(FsMountPointTest, EmptyDirectoryAccepted) {
  ScratchDir d;
  EXPECT_TRUE(CheckMountPoint(d.path(), false).ok());
  // A symlink to an empty directory is followed, as the mount follows it.
  ASSERT_EQ(mkdir((d.path() + "/sub").c_str(), 0700), 0);
  ASSERT_EQ(symlink((d.path() + "/sub").c_str(), (d.path() + "/link").c_str()), 0);
  EXPECT_TRUE(CheckMountPoint(d.path() + "/link", false).ok());
}

TEST(FsMountPointTest, RegularFileRefused) {
  ScratchDir d;
  const std::string f = d.path() + "/file";
  int fd = open(f.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  for (bool nonempty : {false, true}) {
    absl::Status s = CheckMountPoint(f, nonempty);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(s.message(), "mount point " + f +
                               " is a regular file, not a directory: walfs mounts a "
                               "directory (an empty one, made with mkdir)");
  }
}

TEST(FsMountPointTest, MissingRefused) {
  ScratchDir d;
  absl::Status s = CheckMountPoint(d.path() + "/none", false);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("does not exist (create it: mkdir "), std::string::npos) << s;
}

TEST(FsMountPointTest, NonEmptyRefusedUnlessAsked) {
  ScratchDir d;
  ASSERT_EQ(mkdir((d.path() + "/pg_wal").c_str(), 0700), 0);
  absl::Status s = CheckMountPoint(d.path(), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), "mount point " + d.path() +
                             " is not empty (it holds 'pg_wal'): the mount would hide those "
                             "files. Move them away, or mount over them anyway with -o "
                             "nonempty");
  EXPECT_TRUE(CheckMountPoint(d.path(), true).ok());
  // Hidden files count; at most three names are quoted.
  for (const char* n : {".hidden", "b", "c", "d"}) {
    ASSERT_EQ(mkdir((d.path() + "/" + n).c_str(), 0700), 0);
  }
  s = CheckMountPoint(d.path(), false);
  EXPECT_NE(s.message().find(" and more): "), std::string::npos) << s;
}

TEST(FsStatusJsonTest, DocumentFlatButForLatency) {
  DaemonStatus s;
  s.pool = "/p\"q";
  s.mountpoint = "/m";
  s.pid = 42;
  s.mode = core::DurabilityMode::kMsync;
  s.region = "msync";
  s.stats.block_size = 4096;
  s.stats.total_blocks = 100;
  s.counters.writes = 7;
  s.fuse_fsync = 3;
  s.fuse_fsyncdir = 2;
  std::string json = StatusJson(s);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_NE(json.find("\"version\":1,"), std::string::npos);
  EXPECT_NE(json.find("\"pool\":\"/p\\\"q\""), std::string::npos);
  EXPECT_NE(json.find("\"pid\":42,"), std::string::npos);
  EXPECT_NE(json.find("\"mode\":\"msync\""), std::string::npos);
  EXPECT_NE(json.find("\"total_blocks\":100,"), std::string::npos);
  EXPECT_NE(json.find("\"writes\":7,"), std::string::npos);
  EXPECT_NE(json.find("\"fuse_fsync\":3,"), std::string::npos);
  EXPECT_NE(json.find("\"fuse_fsyncdir\":2,"), std::string::npos);
  EXPECT_NE(json.find("\"persist_error\":\"\","), std::string::npos);
  EXPECT_NE(json.find("\"latency\":{}"), std::string::npos);
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), 2);

  util::LatencyHistogram h;
  h.Record(500);        // bucket 0 (<= 1 us)
  h.Record(3'000'000);  // 3 ms: (2048, 4096] us, bucket 12
  s.latency.push_back({"write", h.snapshot()});
  s.persist_error = "DATA_LOSS: msync: Input/output error";
  json = StatusJson(s);
  EXPECT_NE(json.find("\"persist_error\":\"DATA_LOSS: msync: Input/output error\""),
            std::string::npos);
  EXPECT_NE(json.find("\"latency\":{\"write\":{\"count\":2,\"sum_ns\":3000500,"
                      "\"buckets\":[1,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0]}}"),
            std::string::npos)
      << json;
}

TEST(FsErrorsTest, EnospcAndEioAreCounted) {
  const ReplyErrorCounts before = GetReplyErrorCounts();
  SetFreeSpaceDescriber([] { return std::string("0 B free of 16 MiB"); });
  for (int i = 0; i < 5; ++i) StatusToErrno(core::PosixError("x", ENOSPC), "create", 1);
  StatusToErrno(absl::DataLossError("bad crc"), "read", 7);
  StatusToErrno(core::PosixError("x", EIO), "fsync", 7);
  StatusToErrno(core::PosixError("x", ENOENT), "lookup", 1);
  SetFreeSpaceDescriber(nullptr);
  const ReplyErrorCounts after = GetReplyErrorCounts();
  EXPECT_EQ(after.enospc - before.enospc, 5u);
  EXPECT_EQ(after.eio - before.eio, 2u);
}

TEST(FsErrorsTest, StatusToErrno) {
  EXPECT_EQ(StatusToErrno(core::PosixError("x", ENOENT), "lookup", 1), ENOENT);
  EXPECT_EQ(StatusToErrno(core::PosixError("x", ENOSPC), "write", 1), ENOSPC);
  EXPECT_EQ(StatusToErrno(absl::DataLossError("bad crc"), "read", 7), EIO);
  // A DataLoss status carrying another errno is still EIO: corruption is never ENOENT.
  absl::Status tagged = core::PosixError("x", ENOENT);
  absl::Status data_loss(absl::StatusCode::kDataLoss, "inode 7: bad crc");
  tagged.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    data_loss.SetPayload(url, payload);
  });
  ASSERT_EQ(core::ErrnoFromStatus(data_loss), ENOENT);
  EXPECT_EQ(StatusToErrno(data_loss, "read", 7), EIO);
  EXPECT_EQ(StatusToErrno(absl::NotFoundError("x"), "lookup", 1), ENOENT);
  EXPECT_GT(StatusToErrno(absl::UnknownError("x"), "op", 1), 0);
}

// A bound datagram socket, and NOTIFY_SOCKET pointing at it, for one test.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + name.size();
    if (name[0] == '@') addr.sun_path[0] = '\0';
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), length) == 0;
    setenv("NOTIFY_SOCKET", name.c_str(), 1);
  }
  ~NotifyListener() {
    unsetenv("NOTIFY_SOCKET");
    close(fd_);
  }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    return n < 0 ? std::string("<nothing>") : std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_;
  bool bound_;
};

TEST(FsSdNotifyTest, PathSocket) {
  char dir[] = "/tmp/walfs-notify-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/notify";
  {
    NotifyListener listener(path);
    ASSERT_TRUE(listener.bound());
    ASSERT_TRUE(SdNotify("READY=1\nSTATUS=x").ok());
    EXPECT_EQ(listener.Receive(), "READY=1\nSTATUS=x");
  }
  unlink(path.c_str());
  rmdir(dir);
}

TEST(FsSdNotifyTest, AbstractSocket) {
  NotifyListener listener("@walfs-unit-" + std::to_string(getpid()));
  ASSERT_TRUE(listener.bound());
  ASSERT_TRUE(SdNotify("READY=1").ok());
  EXPECT_EQ(listener.Receive(), "READY=1");
}

TEST(FsSdNotifyTest, UnsetIsNoOpAndBadValuesFail) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SdNotify("READY=1").ok());
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(SdNotify("READY=1").ok());
  setenv("NOTIFY_SOCKET", "/nonexistent-dir/walfs/notify", 1);
  EXPECT_FALSE(SdNotify("READY=1").ok());
  unsetenv("NOTIFY_SOCKET");
}

TEST(FsPoolLockTest, SecondHolderRefused) {
  char path[] = "/tmp/walfs-lock-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    absl::StatusOr<std::unique_ptr<PoolLock>> first = PoolLock::Acquire(path);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<std::unique_ptr<PoolLock>> second = PoolLock::Acquire(path);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(second.status().message().find("is in use by another walfs"),
              std::string::npos)
        << second.status();
  }
  // Released with its holder.
  EXPECT_TRUE(PoolLock::Acquire(path).ok());
  unlink(path);
  absl::StatusOr<std::unique_ptr<PoolLock>> missing = PoolLock::Acquire(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(core::ErrnoFromStatus(missing.status()), ENOENT);
}

}  // namespace
}  // namespace walfs::fs
