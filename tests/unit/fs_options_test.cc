// Tests of the daemon's command line and status document (fs/options.h,
// fs/status_json.h): the mount.fuse3 argv shape, ignored and refused options.
#include <algorithm>
#include <string>
#include <vector>

#include "fs/options.h"
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

TEST(FsOptionsTest, PositionalCount) {
  EXPECT_FALSE(Parse({"/p"}).ok());
  EXPECT_FALSE(Parse({"/p", "/m", "/x"}).ok());
  absl::StatusOr<Options> o = Parse({"--help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->show_help);
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

TEST(FsStatusJsonTest, FlatDocument) {
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
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), 1);
}

}  // namespace
}  // namespace walfs::fs
