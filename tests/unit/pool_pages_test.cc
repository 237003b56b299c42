// The tmpfs page-size check of the daemon (fs/pool_pages.cc).
#include "fs/pool_pages.h"

#include <sys/sysmacros.h>

#include <sstream>

#include <gtest/gtest.h>

namespace walfs::fs {
namespace {

// Lines as /proc/self/mountinfo has them: one mount with optional fields, escapes in
// the mount point, a huge=always tmpfs, a plain one and an ext4.
constexpr char kMountinfo[] =
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n"
    "31 22 0:26 / /dev/shm rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,size=24683548k\n"
    "97 22 0:41 / /var/lib/walfs/my\\040pools rw,relatime shared:60 master:3 - tmpfs "
    "walfs-pools rw,size=4194304k,mode=700,huge=always\n"
    "98 22 0:42 / /mnt/w rw - tmpfs t rw,huge=within_size,inode64\n";

std::optional<std::string> Policy(unsigned maj, unsigned min) {
  std::istringstream in(kMountinfo);
  return TmpfsHugePolicy(in, makedev(maj, min));
}

TEST(PoolPagesTest, TmpfsHugePolicyIsFoundByDevice) {
  EXPECT_EQ(Policy(0, 26), "never");  // no huge= option
  EXPECT_EQ(Policy(0, 41), "always");
  EXPECT_EQ(Policy(0, 42), "within_size");
  EXPECT_EQ(Policy(254, 0), std::nullopt);  // not tmpfs
  EXPECT_EQ(Policy(0, 99), std::nullopt);   // no such mount
}

TEST(PoolPagesTest, MalformedLinesAreSkipped) {
  std::istringstream in(
      "garbage\n"
      "40 1 0:50 / /x rw shared:1\n"  // no separator, no fstype
      "41 1 0:51 / /y rw - tmpfs\n"  // no source or super options
      "42 1 0:51 / /y rw - tmpfs t rw,huge=always\n");
  EXPECT_EQ(TmpfsHugePolicy(in, makedev(0, 50)), std::nullopt);
  std::istringstream again(in.str());
  EXPECT_EQ(TmpfsHugePolicy(again, makedev(0, 51)), "always");
}

TEST(PoolPagesTest, NoWarningOffTmpfsOrForMissingFiles) {
  EXPECT_EQ(PoolPageSizeWarning("/nonexistent/pool"), "");
  EXPECT_EQ(PoolPageSizeWarning("/proc/self/status"), "");  // procfs, not tmpfs
}

}  // namespace
}  // namespace walfs::fs
