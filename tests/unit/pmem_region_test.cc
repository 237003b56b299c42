#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ios>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/persistent_region.h"
#include "gtest/gtest.h"

namespace walfs::core {
namespace {

// A private directory on tmpfs when there is one (the usual home of a test pool),
// removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : ::testing::TempDir();
    if (!base.empty() && base.back() == '/') base.pop_back();
    std::string tmpl = base + "/walfs_region_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Creates `path` with `size` bytes of `fill` and the given mode (umask bypassed).
void MakeFile(const std::string& path, size_t size, mode_t mode, char fill = '\0') {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  const std::string bytes(size, fill);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(size));
  ASSERT_EQ(::fchmod(fd, mode), 0);
  ::close(fd);
}

std::string ReadFile(const std::string& path, size_t off, size_t len) {
  std::string out(len, '\0');
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::pread(fd, out.data(), len, static_cast<off_t>(off));
  ::close(fd);
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

// Checks for code that runs in a child process, where gtest assertions cannot report:
// the first failure becomes the scenario's result.
#define SCENARIO_CHECK(cond)                                                         \
  do {                                                                               \
    if (!(cond)) return absl::StrCat(__FILE__, ":", __LINE__, ": failed: ", #cond); \
  } while (0)

// Creates, writes, persists and reopens a pool; `expect_pmem` is the kind libpmem must
// have chosen. Returns "" on success, else what went wrong.
std::string CreateWriteReopen(bool expect_pmem) {
  TempDir dir;
  const std::string path = dir.File("pool");
  constexpr uint64_t kSize = 1 << 20;
  const std::string kind = expect_pmem ? "pmem" : "msync";
  const std::string big(64 << 10, 'B');  // above libpmem's non-temporal threshold
  {
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.create_size = kSize});
    if (!r.ok()) return r.status().ToString();
    PersistentRegion& region = **r;
    SCENARIO_CHECK(region.kind() == kind);
    SCENARIO_CHECK(region.is_pmem() == expect_pmem);
    SCENARIO_CHECK(region.size() == kSize);
    struct stat st;
    SCENARIO_CHECK(::stat(path.c_str(), &st) == 0);
    SCENARIO_CHECK((st.st_mode & 07777) == 0600);
    SCENARIO_CHECK(std::string(region.data(), 16) == std::string(16, '\0'));

    region.Store(4096 + 3, "hello pmem", 10);  // unaligned, below the threshold
    region.Fill(8192, 0xab, 300);
    region.Store(100000, big.data(), big.size());
    region.Store(kSize - 1, "!", 1);
    region.Flush(4096 + 3, 10);
    region.Flush(8192, 300);
    region.Flush(100000, big.size());
    region.Flush(kSize - 1, 1);
    region.Drain();
    region.Persist(5000, 0);
    SCENARIO_CHECK(std::string(region.data() + 4099, 10) == "hello pmem");
    SCENARIO_CHECK(std::string(region.data() + 8192, 300) == std::string(300, '\xab'));
    SCENARIO_CHECK(std::string(region.data() + 100000, big.size()) == big);
  }
  // The file holds what was stored.
  SCENARIO_CHECK(ReadFile(path, 4099, 10) == "hello pmem");
  SCENARIO_CHECK(ReadFile(path, 8192, 300) == std::string(300, '\xab'));
  SCENARIO_CHECK(ReadFile(path, 100000, big.size()) == big);
  SCENARIO_CHECK(ReadFile(path, kSize - 1, 1) == "!");

  // Reopening (create_size is ignored for an existing file) sees the data.
  absl::StatusOr<std::unique_ptr<PersistentRegion>> again =
      OpenPmemRegion(path, PmemOpenOptions{.create_size = 2 * kSize});
  if (!again.ok()) return again.status().ToString();
  SCENARIO_CHECK((*again)->kind() == kind);
  SCENARIO_CHECK((*again)->size() == kSize);
  SCENARIO_CHECK(std::string((*again)->data() + 4099, 10) == "hello pmem");
  SCENARIO_CHECK((*again)->data()[kSize - 1] == '!');
  return "";
}

// libpmem reads PMEM_IS_PMEM_FORCE once, on the first pmem_is_pmem() call of the
// process, and keeps the answer; so each kind is tested in a freshly exec'd copy of
// this binary (the "threadsafe" death-test style re-executes it rather than forking),
// with the variable set before anything in that process asks libpmem.
void ExpectInFreshProcess(const char* force, std::string (*scenario)(bool), bool arg) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* old = std::getenv("PMEM_IS_PMEM_FORCE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("PMEM_IS_PMEM_FORCE", force, 1);
  EXPECT_EXIT(
      {
        const std::string error = scenario(arg);
        if (!error.empty()) std::fprintf(stderr, "%s\n", error.c_str());
        std::exit(error.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  if (saved) {
    ::setenv("PMEM_IS_PMEM_FORCE", saved->c_str(), 1);
  } else {
    ::unsetenv("PMEM_IS_PMEM_FORCE");
  }
}

TEST(PmemRegionTest, ForcedPmemUsesNonTemporalStoresAndDrain) {
  ExpectInFreshProcess("1", CreateWriteReopen, /*expect_pmem=*/true);
}

TEST(PmemRegionTest, OrdinaryFileUsesMsync) {
  ExpectInFreshProcess("0", CreateWriteReopen, /*expect_pmem=*/false);
}

TEST(PmemRegionTest, RefusesPoolWritableByOthers) {
  TempDir dir;
  const std::string path = dir.File("pool");
  MakeFile(path, 8192, 0666);
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.read_only = read_only});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.status().message(),
              absl::StrCat("pool ", path, " is writable by others (mode 0666): chmod 600"));
  }
  ASSERT_EQ(::chmod(path.c_str(), 0620), 0);
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = OpenPmemRegion(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(mode 0620)"), std::string::npos) << r.status();
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);  // group-readable is fine
  EXPECT_TRUE(OpenPmemRegion(path).ok());
}

TEST(PmemRegionTest, OwnerOnlyRefusesPoolReadableByOthers) {
  TempDir dir;
  const std::string path = dir.File("pool");
  MakeFile(path, 8192, 0644);
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.read_only = read_only, .owner_only = true});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.status().message(),
              absl::StrCat("pool ", path, " is readable by others (mode 0644), and it holds "
                           "every committed row: chmod 600"));
    // Without owner_only (the tools) the same pool opens.
    EXPECT_TRUE(OpenPmemRegion(path, PmemOpenOptions{.read_only = read_only}).ok());
  }
  for (mode_t mode : {0640, 0604, 0700}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.owner_only = true});
    EXPECT_EQ(r.ok(), mode == 0700) << std::oct << mode << " " << r.status();
  }
  // Writable by others is reported as such, whatever else.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.owner_only = true});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("writable by others (mode 0666)"), std::string::npos);
}

TEST(PmemRegionTest, MissingFile) {
  TempDir dir;
  const std::string path = dir.File("absent");
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = OpenPmemRegion(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
  // Read-only opens never create.
  r = OpenPmemRegion(path, PmemOpenOptions{.create_size = 4096, .read_only = true});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PmemRegionTest, EmptyFile) {
  TempDir dir;
  const std::string path = dir.File("empty");
  MakeFile(path, 0, 0600);
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.read_only = read_only});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.status().message(), absl::StrCat("pool ", path, " is empty (size 0)"));
  }
}

TEST(PmemRegionTest, NotAFileOrDevice) {
  TempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = OpenPmemRegion(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            absl::StrCat("pool ", fifo, " is not a regular file or character device"));
  r = OpenPmemRegion(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir.path()), std::string::npos) << r.status();
}

TEST(PmemRegionTest, CharacterDeviceMustBeDeviceDax) {
  TempDir dir;
  const std::string path = dir.File("null");
  // A private node for /dev/null (1:3), mode 0600 so that the mode check passes.
  if (::mknod(path.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD: " << std::strerror(errno);
  }
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r = OpenPmemRegion(path);
  if (!r.ok() && r.status().code() == absl::StatusCode::kPermissionDenied) {
    GTEST_SKIP() << "device nodes refused here (nodev mount): " << r.status();
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("is a character device but not device-DAX"),
            std::string::npos)
      << r.status();
}

TEST(PmemRegionTest, PermissionDenied) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.File("pool");
  MakeFile(path, 8192, 0600);
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  }
  // Root bypasses file modes: the check runs as an unprivileged user in a child.
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) std::exit(2);
        absl::StatusOr<std::unique_ptr<PersistentRegion>> r = OpenPmemRegion(path);
        if (r.ok()) std::exit(3);
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        const bool good = r.status().code() == absl::StatusCode::kPermissionDenied &&
                          r.status().message().find(path) != std::string::npos;
        std::exit(good ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(PmemRegionTest, CreateRollsBackWhenAllocationFails) {
  TempDir dir;
  const std::string path = dir.File("huge");
  // More than any tmpfs or test disk holds.
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.create_size = uint64_t{1} << 60});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("allocate"), std::string::npos) << r.status();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PmemRegionTest, ExistingFileIsMappedWhole) {
  TempDir dir;
  const std::string path = dir.File("pool");
  MakeFile(path, 12288 + 100, 0600, 'e');
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.create_size = 1 << 20});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->size(), 12288u + 100);
  EXPECT_EQ((*r)->data()[12288 + 99], 'e');
  // Flushing the partial last page works whatever the kind.
  (*r)->Store(12288 + 99, "z", 1);
  (*r)->Persist(12288 + 99, 1);
  r->reset();
  EXPECT_EQ(ReadFile(path, 12288 + 99, 1), "z");
}

// A sparse pool file of `blocks` 4 KiB blocks with `data` bytes written at each of
// `data_blocks` (through the file, as a scribble would be).
void MakeSparseFile(const std::string& path, uint64_t blocks,
                    const std::vector<uint64_t>& data_blocks, char data) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(blocks * 4096)), 0);
  const std::string bytes(4096, data);
  for (uint64_t b : data_blocks) {
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(b * 4096)), 4096);
  }
  ::close(fd);
}

TEST(PmemRegionTest, MaybeDataSkipsHolesOfThePoolFile) {
  TempDir dir;
  const std::string path = dir.File("pool");
  MakeSparseFile(path, 64, {20, 21}, 'd');
  for (const bool read_only : {true, false}) {  // the read-write pass adds data
    SCOPED_TRACE(read_only ? "read-only" : "read-write");
    absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
        OpenPmemRegion(path, PmemOpenOptions{.read_only = read_only});
    ASSERT_TRUE(r.ok()) << r.status();
    PersistentRegion& region = **r;
    const uint64_t size = 64 * 4096;
    // Data extents are reported at the file system's granularity, which may be larger
    // than a block but always covers the written bytes and starts at or before them.
    PersistentRegion::DataRange d = region.MaybeData(0, size);
    EXPECT_LE(d.begin, 20u * 4096);
    EXPECT_GE(d.end, 22u * 4096);
    EXPECT_GT(d.begin, 0u) << "the leading hole was not found";
    d = region.MaybeData(0, 8 * 4096);
    EXPECT_EQ(d.begin, 8u * 4096) << "a range inside a hole reads as zeros";
    EXPECT_EQ(d.end, 8u * 4096);
    d = region.MaybeData(40 * 4096, size);
    EXPECT_EQ(d.begin, size) << "no data past the last written block";
    d = region.MaybeData(21 * 4096, 22 * 4096);
    EXPECT_EQ(d.begin, 21u * 4096);
    EXPECT_EQ(d.end, 22u * 4096) << "clipped to the range asked for";
    if (!read_only) {
      // A store through the mapping is data as soon as it is made.
      region.Store(50 * 4096 + 7, "x", 1);
      d = region.MaybeData(40 * 4096, size);
      EXPECT_LE(d.begin, 50u * 4096 + 7);
      EXPECT_GT(d.end, 50u * 4096 + 7);
      region.Persist(50 * 4096, 4096);
    }
  }
}

bool OnTmpfs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// A new pool on tmpfs is made resident at creation: its fallocated pages, which tmpfs
// reports as holes and clears only at first touch, read as data afterwards (cleared
// now), and not a byte changes.
TEST(PmemRegionTest, NewPoolOnTmpfsIsResidentAtCreation) {
  TempDir dir;
  if (!OnTmpfs(dir.path())) GTEST_SKIP() << dir.path() << " is not on tmpfs";
  const uint64_t size = 8ULL << 20;
  const std::string path = dir.File("pool");
  {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::posix_fallocate(fd, 0, static_cast<off_t>(size)), 0);
    // The kernel behaviour this works around: fallocated pages are holes to SEEK_DATA.
    EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), -1) << "fallocated tmpfs pages read as data";
    ASSERT_EQ(::pwrite(fd, "walfs", 5, 3 * 4096 + 11), 5);
    EXPECT_EQ(PrefaultTmpfsRange(fd, 4096 + 100, size - 4096 - 100), size - 4096)
        << "populated from the page holding the offset to the end";
    // (Not necessarily a hole below: a huge=always mount reports data per 2 MiB.)
    EXPECT_LE(::lseek(fd, 0, SEEK_DATA), 4096);
    EXPECT_GE(::lseek(fd, 4096, SEEK_HOLE), static_cast<off_t>(size));
    ::close(fd);
    EXPECT_EQ(ReadFile(path, 3 * 4096 + 11, 5), "walfs");
    EXPECT_EQ(ReadFile(path, 4096, 4096), std::string(4096, '\0'));
    std::filesystem::remove(path);
  }
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.create_size = size});
  ASSERT_TRUE(r.ok()) << r.status();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), 0);
  EXPECT_GE(::lseek(fd, 0, SEEK_HOLE), static_cast<off_t>(size));
  ::close(fd);
  EXPECT_EQ((*r)->MaybeData(0, size).begin, 0u);
  EXPECT_EQ(ReadFile(path, 0, size), std::string(size, '\0'));
}

TEST(PmemRegionTest, PrefaultLeavesOtherFileSystemsAlone) {
  const std::string base = ::testing::TempDir();
  if (OnTmpfs(base)) GTEST_SKIP() << base << " is on tmpfs";
  const std::string path = base + "/walfs_prefault_" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
  EXPECT_EQ(PrefaultTmpfsRange(fd, 0, 1 << 20), 0u);
  ::close(fd);
  ::unlink(path.c_str());
}

TEST(PmemRegionDeathTest, ReadOnlyMapping) {
  TempDir dir;
  const std::string path = dir.File("pool");
  MakeFile(path, 8192, 0600, 'r');
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.read_only = true});
  ASSERT_TRUE(r.ok()) << r.status();
  PersistentRegion& region = **r;
  EXPECT_EQ(region.size(), 8192u);
  EXPECT_EQ(std::string(region.data(), 4), "rrrr");
  region.Persist(0, 8192);  // nothing to write back: allowed
  // A writer's change shows through the shared mapping.
  absl::StatusOr<std::unique_ptr<PersistentRegion>> writer = OpenPmemRegion(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Store(10, "W", 1);
  (*writer)->Persist(10, 1);
  EXPECT_EQ(region.data()[10], 'W');
  EXPECT_DEATH(region.Store(0, "x", 1), "Store to read-only pool");
  EXPECT_DEATH(region.Fill(0, 0, 1), "Fill of read-only pool");
}

TEST(PmemRegionDeathTest, OutOfRangeStoreAborts) {
  TempDir dir;
  const std::string path = dir.File("pool");
  absl::StatusOr<std::unique_ptr<PersistentRegion>> r =
      OpenPmemRegion(path, PmemOpenOptions{.create_size = 4096});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DEATH((*r)->Store(4090, "12345678", 8), "outside pool");
  EXPECT_DEATH((*r)->Flush(4097, 0), "outside pool");
}

}  // namespace
}  // namespace walfs::core
