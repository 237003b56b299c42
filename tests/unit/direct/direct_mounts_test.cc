#include "fs/direct/mounts.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <string>

#include "gtest/gtest.h"

namespace walfs::direct {
namespace {

constexpr char kMountinfo[] =
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "40 22 0:41 / /run/user/1000/doc rw,nosuid,nodev,relatime shared:20 - fuse.portal portal "
    "rw,user_id=1000,group_id=1000\n"
    "51 22 0:52 / /var/lib/postgresql/15/wal rw,nosuid,nodev,relatime shared:30 master:7 - "
    "fuse.walfs /var/lib/walfs/15-main.pool rw,user_id=105,group_id=111,allow_other\n"
    "52 22 0:53 / /mnt/with\\040space rw,relatime - fuse.walfs /pools/a\\040b.pool rw\n"
    "53 22 0:54 / /mnt/other rw,relatime - fuse /dev/fuse rw\n"
    "54 22 0:55 / /mnt/walfsish rw,relatime - fuse.walfs2 x rw\n";

TEST(DirectMountsTest, FindsWalfsByDevice) {
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 52)), true);
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 53)), true);  // escaped paths
}

TEST(DirectMountsTest, OtherFuseAndOtherTypesAreNotWalfs) {
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 41)), false);
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 54)), false);  // plain "fuse"
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 55)), false);  // prefix only
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(259, 2)), false);
}

TEST(DirectMountsTest, UnknownDeviceHasNoVerdict) {
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 99)), std::nullopt);
  EXPECT_EQ(MountinfoSaysWalfs("", makedev(0, 52)), std::nullopt);
  // Device numbers must match exactly, not as prefixes.
  EXPECT_EQ(MountinfoSaysWalfs(kMountinfo, makedev(0, 5)), std::nullopt);
}

TEST(DirectMountsTest, OddLinesAreSkipped) {
  const std::string text =
      "garbage\n"
      "\n"
      "1 2 x:y / /a rw - fuse.walfs p rw\n"
      "1 2 0: / /b rw - fuse.walfs p rw\n"
      "1 2 0:60 / /c rw shared:1\n"  // no separator
      "1 2 0:61 / /d rw -\n"          // no type
      "1 2 0:62 / /e rw - fuse.walfs p rw";  // last line without newline
  EXPECT_EQ(MountinfoSaysWalfs(text, makedev(0, 60)), std::nullopt);
  EXPECT_EQ(MountinfoSaysWalfs(text, makedev(0, 61)), std::nullopt);
  EXPECT_EQ(MountinfoSaysWalfs(text, makedev(0, 62)), true);
}

TEST(DirectMountsTest, LastMountOfADeviceWins) {
  const std::string text =
      "1 2 0:70 / /a rw - fuse.walfs p rw\n"
      "3 1 0:70 / /a rw - fuse.other p rw\n";
  EXPECT_EQ(MountinfoSaysWalfs(text, makedev(0, 70)), false);
}

TEST(DirectMountsTest, CacheAnswersForThisProcessMounts) {
  std::string text;
  ASSERT_TRUE(ReadMountinfo(&text));
  struct stat st;
  ASSERT_EQ(stat("/proc/self", &st), 0);
  MountCache cache;
  // /proc is never walfs; asking twice exercises the cached path.
  EXPECT_FALSE(cache.IsWalfs(st.st_dev));
  EXPECT_FALSE(cache.IsWalfs(st.st_dev));
  EXPECT_FALSE(cache.IsWalfs(makedev(4095, 4095)));
}

TEST(DirectMountsTest, UnescapesOctalEscapes) {
  std::string out;
  ASSERT_TRUE(UnescapeMountinfoPath("/mnt/with\\040space\\011tab\\012nl\\134back", &out));
  EXPECT_EQ(out, "/mnt/with space\ttab\nnl\\back");
  ASSERT_TRUE(UnescapeMountinfoPath("/plain", &out));
  EXPECT_EQ(out, "/plain");
  EXPECT_FALSE(UnescapeMountinfoPath("/bad\\04", &out));     // cut short
  EXPECT_FALSE(UnescapeMountinfoPath("/bad\\0x0", &out));    // not octal
  EXPECT_FALSE(UnescapeMountinfoPath("/bad\\000", &out));    // NUL
  EXPECT_FALSE(UnescapeMountinfoPath("/bad\\400", &out));    // past a byte
  EXPECT_FALSE(UnescapeMountinfoPath("/bad\\", &out));
}

TEST(DirectMountsTest, FindsTheWalfsRootOfADevice) {
  EXPECT_EQ(MountinfoWalfsRoot(kMountinfo, makedev(0, 52)), "/var/lib/postgresql/15/wal");
  EXPECT_EQ(MountinfoWalfsRoot(kMountinfo, makedev(0, 53)), "/mnt/with space");
  EXPECT_EQ(MountinfoWalfsRoot(kMountinfo, makedev(0, 41)), std::nullopt);  // not walfs
  EXPECT_EQ(MountinfoWalfsRoot(kMountinfo, makedev(0, 99)), std::nullopt);
  // A bind mount of a subdirectory alone does not show the root; a later bind of the
  // root does, and the last one counts.
  const std::string text =
      "1 2 0:80 /sub /bound rw - fuse.walfs p rw\n"
      "3 1 0:80 / /first rw - fuse.walfs p rw\n"
      "4 1 0:80 / /second\\040mount rw shared:3 - fuse.walfs p rw\n"
      "5 1 0:81 /sub /only-sub rw - fuse.walfs p rw\n"
      "6 1 0:82 / relative rw - fuse.walfs p rw\n";
  EXPECT_EQ(MountinfoWalfsRoot(text, makedev(0, 80)), "/second mount");
  EXPECT_EQ(MountinfoWalfsRoot(text, makedev(0, 81)), std::nullopt);
  EXPECT_EQ(MountinfoWalfsRoot(text, makedev(0, 82)), std::nullopt);
}

}  // namespace
}  // namespace walfs::direct
