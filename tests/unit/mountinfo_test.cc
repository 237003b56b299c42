// The daemon's mountinfo line parser (fs/mountinfo.cc), used by the dead-mount check and
// the pool page-size warning.
#include "fs/mountinfo.h"

#include <gtest/gtest.h>

namespace walfs::fs {
namespace {

TEST(MountInfoTest, FieldsAfterTheOptionalOnes) {
  const auto m = ParseMountInfoLine(
      "97 22 0:41 / /var/lib/walfs rw,relatime shared:60 master:3 - tmpfs walfs-pools "
      "rw,size=4194304k,huge=always");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->devno, "0:41");
  EXPECT_EQ(m->mount_point, "/var/lib/walfs");
  EXPECT_EQ(m->fstype, "tmpfs");
  EXPECT_EQ(m->source, "walfs-pools");
  EXPECT_EQ(m->super_options, "rw,size=4194304k,huge=always");
}

TEST(MountInfoTest, NoOptionalFields) {
  const auto m = ParseMountInfoLine("98 22 0:42 / /mnt/w rw - fuse.walfs /pools/a.pool rw");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fstype, "fuse.walfs");
  EXPECT_EQ(m->source, "/pools/a.pool");
}

TEST(MountInfoTest, MountPointAndSourceAreUnescaped) {
  const auto m = ParseMountInfoLine(
      "99 22 0:43 / /mnt/my\\040wal\\134dir rw - fuse.walfs /p/a\\011b.pool rw");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mount_point, "/mnt/my wal\\dir");
  EXPECT_EQ(m->source, "/p/a\tb.pool");
}

TEST(MountInfoTest, IncompleteLinesAreRefused) {
  EXPECT_FALSE(ParseMountInfoLine("").has_value());
  EXPECT_FALSE(ParseMountInfoLine("22 1 254:0 / / rw").has_value());  // no separator
  EXPECT_FALSE(ParseMountInfoLine("22 1 254:0 / / rw shared:1 ext4 /dev/vda rw").has_value());
  EXPECT_FALSE(ParseMountInfoLine("22 1 254:0 / / rw - ext4 /dev/vda").has_value());
}

TEST(MountInfoTest, UnescapeLeavesOtherBackslashesAlone) {
  EXPECT_EQ(UnescapeMountInfo("a\\040b"), "a b");
  EXPECT_EQ(UnescapeMountInfo("a\\x40b"), "a\\x40b");  // not octal
  EXPECT_EQ(UnescapeMountInfo("end\\04"), "end\\04");  // too short
  EXPECT_EQ(UnescapeMountInfo("\\134"), "\\");
}

}  // namespace
}  // namespace walfs::fs
