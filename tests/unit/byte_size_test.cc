// ParseByteSize: the size syntax every walfs program shares.
#include "util/byte_size.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace walfs::util {
namespace {

TEST(ByteSizeTest, AcceptsEverySpellingOfAUnit) {
  for (const char* text : {"64M", "64MB", "64MiB", "64m", "64mb", "64mib", "64Mib",
                           "65536K", "65536k", "65536KB", "65536KiB", "67108864",
                           "67108864B", "67108864b"}) {
    absl::StatusOr<uint64_t> v = ParseByteSize(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status();
    EXPECT_EQ(*v, uint64_t{64} << 20) << text;
  }
  EXPECT_EQ(*ParseByteSize("512k"), 512u * 1024);
  EXPECT_EQ(*ParseByteSize("1G"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("2T"), uint64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("0M"), 0u);
  EXPECT_EQ(*ParseByteSize("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(*ParseByteSize("16777215T"), uint64_t{16777215} << 40);
}

TEST(ByteSizeTest, RefusesEverythingElseAndSaysWhatIsAccepted) {
  for (const char* text : {"", "M", "MB", "-5", "+5", "1.5G", " 64M", "64M ", "64 M",
                           "12Q", "64Mi", "64MiBB", "64iB", "64BB", "64P", "0x10",
                           "64MB/s"}) {
    absl::StatusOr<uint64_t> v = ParseByteSize(text);
    ASSERT_FALSE(v.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(v.status().message());
    EXPECT_NE(message.find(std::string("'") + text + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("64M, 64MB, 64MiB, 512k"), std::string::npos) << message;
  }
}

TEST(ByteSizeTest, RefusesOverflow) {
  for (const char* text : {"18446744073709551616", "99999999999999999999",
                           "16777216T", "17179869184G"}) {
    absl::StatusOr<uint64_t> v = ParseByteSize(text);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_NE(std::string(v.status().message()).find("too large"), std::string::npos);
  }
}

}  // namespace
}  // namespace walfs::util
