// Tests of walfsctl export's tree writer (tools/export_tree.h) against hostile input:
// listings built by hand (names with "..", "/", NUL, empty or "."; collisions; extents
// and sizes outside the image) over a small hand-made image, destinations that already
// hold symlinks, FIFOs, devices or files, and pools written by WalDirectory then damaged
// for salvage versus strict listing. Every test writes only under its own scratch
// directory and checks that nothing appeared outside the destination.
#include "tools/export_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/format.h"
#include "core/fsck.h"
#include "tests/support/memory_region.h"
#include "core/wal_directory.h"
#include "gtest/gtest.h"
#include "tests/unit/test_pool.h"

// When set, the next mknodat the exporter calls is followed at once by replacing what it
// made with a symlink to this path: the window in which another writer of the
// destination could swap the name before the exporter sets its attributes.
static const char* swap_in_symlink_to = nullptr;

// This binary's own mknodat, which the exporter (linked in statically) calls instead of
// the C library's: the real system call, then the swap when a test arms it.
extern "C" int mknodat(int dirfd, const char* path, mode_t mode, dev_t dev) noexcept {
  const int rc = static_cast<int>(syscall(SYS_mknodat, dirfd, path, mode, dev));
  if (rc == 0 && swap_in_symlink_to != nullptr) {
    if (unlinkat(dirfd, path, 0) != 0 || symlinkat(swap_in_symlink_to, dirfd, path) != 0) {
      std::abort();
    }
  }
  return rc;
}

namespace walfs::tools {
namespace {

namespace f = core::format;
namespace fs = std::filesystem;

// The hand-made image: a 4 KiB header, then kDataBlocks blocks, block i filled with
// 'A' + i. Only the data-area geometry of the superblock is set: it is all the exporter
// reads of it.
constexpr uint64_t kDataBlocks = 8;

std::string HandImage() {
  std::string image(f::kBlockSize * (kDataBlocks + 1), '\0');
  for (uint64_t i = 0; i < kDataBlocks; ++i) {
    std::fill_n(image.begin() + f::kBlockSize * (i + 1), f::kBlockSize, static_cast<char>('A' + i));
  }
  return image;
}

f::Superblock HandSuperblock() {
  f::Superblock sb{};
  sb.block_size = f::kBlockSize;
  sb.data_offset = f::kBlockSize;
  sb.data_blocks = kDataBlocks;
  return sb;
}

// A listed entry as CheckPool would give it, owned by the test's user (so setting the
// owner, as root, changes nothing).
core::FsckFile Entry(std::string path, uint64_t ino, f::InodeType type,
                     std::initializer_list<f::Extent> extents = {}, uint64_t size = 0) {
  core::FsckFile file;
  file.path = std::move(path);
  file.ino = ino;
  f::InodeRecord& r = file.record;
  r.state = f::InodeState::kLive;
  r.type = type;
  r.mode = type == f::InodeType::kDirectory ? (S_IFDIR | 0755)
           : type == f::InodeType::kSymlink ? (S_IFLNK | 0777)
           : type == f::InodeType::kFifo    ? (S_IFIFO | 0640)
                                            : (S_IFREG | 0640);
  r.uid = geteuid();
  r.gid = getegid();
  r.nlink = 1;
  r.size = size;
  r.mtime_ns = r.atime_ns = 1700000000LL * 1000000000LL;
  for (const f::Extent& x : extents) r.extents[r.extent_count++] = x;
  return file;
}

// A FIFO, socket or device entry with the permission bits `perm`.
core::FsckFile Special(std::string path, uint64_t ino, f::InodeType type, mode_t perm) {
  core::FsckFile file = Entry(std::move(path), ino, type);
  file.record.mode = (type == f::InodeType::kFifo ? S_IFIFO : S_IFSOCK) | perm;
  return file;
}

core::FsckFile Root() { return Entry("/", f::kRootInode, f::InodeType::kDirectory); }

core::FsckFile Symlink(std::string path, uint64_t ino, std::string target) {
  core::FsckFile file = Entry(std::move(path), ino, f::InodeType::kSymlink);
  file.record.size = target.size();
  file.target = std::move(target);
  return file;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part
                                       << "\"";
}

// Whether this process may make device nodes (root with CAP_MKNOD).
bool CanMknod(const fs::path& dir) {
  const fs::path probe = dir / "mknod-probe";
  if (mknod(probe.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) return false;
  unlink(probe.c_str());
  return true;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every path under `dir`, relative, sorted; symlinks listed, never followed.
std::vector<std::string> Tree(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    out.push_back(it->path().lexically_relative(dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ExportTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = (fs::temp_directory_path() / "walfs-export-tree-XXXXXX").string();
    ASSERT_NE(mkdtemp(base.data()), nullptr);
    base_ = base;
    outside_ = base_ / "outside";
    dest_ = base_ / "dest";
    fs::create_directory(outside_);
    ASSERT_EQ(WriteTo(outside_ / "secret", "untouched"), 0);
  }
  void TearDown() override {
    // Nothing beside the destination, and the outside directory as it was.
    std::vector<std::string> around;
    for (const auto& e : fs::directory_iterator(base_)) around.push_back(e.path().filename());
    std::sort(around.begin(), around.end());
    EXPECT_TRUE(around == std::vector<std::string>({"dest", "outside"}) ||
                around == std::vector<std::string>({"outside"}))
        << ::testing::PrintToString(around);
    EXPECT_EQ(Tree(outside_), std::vector<std::string>{"secret"});
    EXPECT_EQ(ReadFile(outside_ / "secret"), "untouched");
    std::error_code ec;
    fs::remove_all(base_, ec);
  }

  static int WriteTo(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    return out.good() ? 0 : -1;
  }

  // Runs an exporter over `files` and the hand-made image (or `region`/`sb` when given);
  // the problems it reported land in problems_, one "path: message" (or "message") each.
  bool Export(const std::vector<core::FsckFile>& files) {
    return Export(files, hand_region_, hand_sb_);
  }
  bool Export(const std::vector<core::FsckFile>& files, const core::PersistentRegion& region,
              const f::Superblock& sb) {
    exporter_ = std::make_unique<Exporter>(
        region, sb, dest_.string(), [this](const std::string* path, const std::string& message) {
          problems_.push_back(path == nullptr ? message : *path + ": " + message);
        });
    return exporter_->Run(files);
  }

  // The one problem reported about `path`, or "" if none.
  std::string ProblemOf(const std::string& path) const {
    std::string found;
    for (const std::string& p : problems_) {
      if (p.rfind(path + ": ", 0) == 0) {
        EXPECT_TRUE(found.empty()) << "two problems for " << path;
        found = p.substr(path.size() + 2);
      }
    }
    return found;
  }

  std::string Problems() const { return ::testing::PrintToString(problems_); }

  fs::path base_, outside_, dest_;
  core::MemoryRegion hand_region_{HandImage()};
  f::Superblock hand_sb_ = HandSuperblock();
  std::unique_ptr<Exporter> exporter_;
  std::vector<std::string> problems_;
};

TEST_F(ExportTreeTest, CopiesAHandListedTree) {
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/d", 2, f::InodeType::kDirectory),
      Entry("/d/f", 3, f::InodeType::kRegular, {{1, 1}, {4, 1}}, f::kBlockSize + 10),
      Entry("/d/hard", 3, f::InodeType::kRegular, {{1, 1}, {4, 1}}, f::kBlockSize + 10),
      Symlink("/l", 4, "d/f"),
      Entry("/p", 5, f::InodeType::kFifo),
  };
  files[1].record.mode = S_IFDIR | 0750;
  ASSERT_TRUE(Export(files)) << Problems();
  EXPECT_TRUE(problems_.empty()) << Problems();
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"d", "d/f", "d/hard", "l", "p"}));
  EXPECT_EQ(ReadFile(dest_ / "d/f"), std::string(f::kBlockSize, 'B') + std::string(10, 'E'));
  struct stat a, b;
  ASSERT_EQ(stat((dest_ / "d/f").c_str(), &a), 0);
  ASSERT_EQ(stat((dest_ / "d/hard").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_mode & 07777, 0640u);
  EXPECT_EQ(a.st_mtim.tv_sec, 1700000000);
  EXPECT_EQ(fs::read_symlink(dest_ / "l"), "d/f");
  ASSERT_EQ(lstat((dest_ / "p").c_str(), &a), 0);
  EXPECT_TRUE(S_ISFIFO(a.st_mode));
  ASSERT_EQ(stat((dest_ / "d").c_str(), &a), 0);
  EXPECT_EQ(a.st_mode & 07777, 0750u);  // set after its entries were made
  EXPECT_EQ(exporter_->files(), 1u);
  EXPECT_EQ(exporter_->links(), 1u);
  EXPECT_EQ(exporter_->symlinks(), 1u);
  EXPECT_EQ(exporter_->dirs(), 2u);
  EXPECT_EQ(exporter_->specials(), 1u);
  EXPECT_EQ(exporter_->bytes(), f::kBlockSize + 10);
}

TEST_F(ExportTreeTest, RefusesEmptyDotDotDotAndNulNames) {
  const std::vector<std::string> hostile = {
      "/..", "/../outside/x", "/a/../../outside/x", "/.", "/./x", "//x", "/a/", "/a//b",
      std::string("/x\0y", 4), std::string("/\0", 2), "", "x", "outside/x", "/a/./b",
  };
  std::vector<core::FsckFile> files = {Root(), Entry("/a", 2, f::InodeType::kDirectory)};
  uint64_t ino = 10;
  for (const std::string& path : hostile) {
    files.push_back(Entry(path, ino++, f::InodeType::kRegular, {{0, 1}}, 5));
  }
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(Tree(dest_), std::vector<std::string>{"a"});
  for (const std::string& path : hostile) {
    std::string problem;
    for (const std::string& p : problems_) {
      if (p.rfind(path + ": ", 0) == 0) problem = p;
    }
    EXPECT_TRUE(Contains(problem, "invalid ")) << "path \"" << path << "\": " << Problems();
  }
  EXPECT_EQ(exporter_->files(), 0u);
}

TEST_F(ExportTreeTest, NameWithASlashIsAPathInsideTheDestination) {
  // A crafted dirent named "a/b" in the root reaches the exporter as the path "/a/b":
  // it can only name something under the destination, and only through directories
  // the export made.
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/no/such", 2, f::InodeType::kRegular, {{0, 1}}, 1),
      Entry("/a", 3, f::InodeType::kDirectory),
      Entry("/a/b", 4, f::InodeType::kRegular, {{0, 1}}, 1),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"a", "a/b"}));
  EXPECT_TRUE(Contains(ProblemOf("/no/such"), "cannot enter directory"));
}

TEST_F(ExportTreeTest, SymlinkFromThePoolIsNeverEntered) {
  std::vector<core::FsckFile> files = {
      Root(),
      Symlink("/evil", 2, outside_.string()),
      Symlink("/rel", 3, "../outside"),
      Entry("/evil/pwned", 4, f::InodeType::kRegular, {{0, 1}}, 3),
      Entry("/rel/pwned", 5, f::InodeType::kDirectory),
      Symlink("/evil/link", 6, "x"),
      Entry("/rel/fifo", 7, f::InodeType::kFifo),
      // A hard link whose first name lies behind the symlink.
      Entry("/hard", 4, f::InodeType::kRegular, {{0, 1}}, 3),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"evil", "hard", "rel"}));
  EXPECT_EQ(fs::read_symlink(dest_ / "evil"), outside_);
  for (const char* path : {"/evil/pwned", "/rel/pwned", "/evil/link", "/rel/fifo"}) {
    EXPECT_TRUE(Contains(ProblemOf(path), "cannot enter directory")) << path;
  }
  // /evil/pwned was never made, so /hard is a copy of its own.
  EXPECT_TRUE(ProblemOf("/hard").empty()) << Problems();
  EXPECT_EQ(ReadFile(dest_ / "hard"), "AAA");
}

TEST_F(ExportTreeTest, SymlinkAlreadyInTheDestinationIsNeverFollowed) {
  fs::create_directory(dest_);
  fs::create_directory_symlink(outside_, dest_ / "abs");
  fs::create_directory_symlink("../outside", dest_ / "rel");
  fs::create_symlink(outside_ / "secret", dest_ / "file");
  fs::create_symlink(outside_ / "new", dest_ / "dangling");
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/abs", 2, f::InodeType::kDirectory),
      Entry("/abs/x", 3, f::InodeType::kRegular, {{0, 1}}, 1),
      Entry("/rel/x", 4, f::InodeType::kRegular, {{0, 1}}, 1),
      Entry("/rel/d", 5, f::InodeType::kDirectory),
      Entry("/file", 6, f::InodeType::kRegular, {{0, 1}}, 5),
      Entry("/dangling", 7, f::InodeType::kRegular, {{0, 1}}, 5),
      Entry("/dangling", 8, f::InodeType::kFifo),
      Symlink("/rel", 9, "elsewhere"),
      // A hard link named like the symlink: linkat never follows or replaces it.
      Entry("/f", 10, f::InodeType::kRegular, {{0, 1}}, 1),
      Entry("/dangling", 10, f::InodeType::kRegular, {{0, 1}}, 1),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(fs::read_symlink(dest_ / "abs"), outside_);
  EXPECT_EQ(fs::read_symlink(dest_ / "rel"), "../outside");
  EXPECT_EQ(fs::read_symlink(dest_ / "file"), outside_ / "secret");
  EXPECT_EQ(fs::read_symlink(dest_ / "dangling"), outside_ / "new");
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"abs", "dangling", "f", "file", "rel"}));
  EXPECT_TRUE(Contains(ProblemOf("/abs"), "cannot create directory"));
  EXPECT_TRUE(Contains(ProblemOf("/abs/x"), "cannot enter directory"));
  EXPECT_TRUE(Contains(ProblemOf("/rel/x"), "cannot enter directory"));
  EXPECT_TRUE(Contains(ProblemOf("/rel/d"), "cannot enter directory"));
  EXPECT_TRUE(Contains(ProblemOf("/file"), "File exists"));
  EXPECT_TRUE(Contains(ProblemOf("/rel"), "File exists"));
  size_t dangling = 0;
  for (const std::string& p : problems_) dangling += p.rfind("/dangling: ", 0) == 0;
  EXPECT_EQ(dangling, 3u) << Problems();
}

TEST_F(ExportTreeTest, FifoOrDeviceAtATargetNameIsNeitherOpenedNorReplaced) {
  fs::create_directory(dest_);
  ASSERT_EQ(mkfifo((dest_ / "fifo").c_str(), 0600), 0);
  const bool can_mknod = CanMknod(base_);
  if (can_mknod) {
    ASSERT_EQ(mknod((dest_ / "null").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
  }
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/fifo", 2, f::InodeType::kRegular, {{0, 1}}, 10),
      Entry("/fifo/x", 3, f::InodeType::kRegular, {{0, 1}}, 10),
      Entry("/null", 4, f::InodeType::kRegular, {{0, 1}}, 10),
      Entry("/null/x", 5, f::InodeType::kDirectory),
  };
  // Opening the FIFO for writing would block with no reader: fail the test instead.
  alarm(30);
  EXPECT_FALSE(Export(files));
  alarm(0);
  struct stat st;
  ASSERT_EQ(lstat((dest_ / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(Contains(ProblemOf("/fifo"), "File exists"));
  EXPECT_TRUE(Contains(ProblemOf("/fifo/x"), "Not a directory"));
  if (can_mknod) {
    ASSERT_EQ(lstat((dest_ / "null").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, makedev(1, 3));
    EXPECT_TRUE(Contains(ProblemOf("/null"), "File exists"));
    EXPECT_TRUE(Contains(ProblemOf("/null/x"), "Not a directory"));
  }
}

TEST_F(ExportTreeTest, SpecialFilesOfThePoolAreRecreatedNeverOpened) {
  core::FsckFile fifo = Entry("/fifo", 2, f::InodeType::kFifo);
  core::FsckFile sock = Entry("/sock", 3, f::InodeType::kSocket);
  sock.record.mode = S_IFSOCK | 0600;
  core::FsckFile dev = Entry("/null", 4, f::InodeType::kCharDevice);
  dev.record.mode = S_IFCHR | 0600;
  dev.record.rdev = makedev(1, 3);
  // A FIFO with data in its record: nothing is read or written through it.
  fifo.record.size = 4;
  fifo.record.extents[0] = {0, 1};
  fifo.record.extent_count = 1;
  core::FsckFile fifo_link = fifo;
  fifo_link.path = "/fifo2";
  alarm(30);
  const bool ok = Export({Root(), fifo, sock, dev, fifo_link});
  alarm(0);
  struct stat st;
  ASSERT_EQ(lstat((dest_ / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_nlink, 2u);  // fifo2 is a hard link to it
  ASSERT_EQ(lstat((dest_ / "sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  if (CanMknod(base_)) {
    EXPECT_TRUE(ok) << Problems();
    ASSERT_EQ(lstat((dest_ / "null").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, makedev(1, 3));
    EXPECT_EQ(exporter_->specials(), 3u);
  } else {
    // Without CAP_MKNOD the device is reported, not copied.
    EXPECT_FALSE(ok);
    EXPECT_TRUE(Contains(ProblemOf("/null"), "cannot create"));
  }
  EXPECT_EQ(exporter_->links(), 1u);
  EXPECT_EQ(exporter_->files(), 0u);
}

TEST_F(ExportTreeTest, SpecialFilesGetTheirExactModeWhateverTheUmask) {
  const mode_t umask_before = umask(077);
  // Set-ID bits: setting the owner (as root) clears them, so they are set again.
  const bool ok = Export({Root(), Special("/fifo", 2, f::InodeType::kFifo, 0777),
                          Special("/setid", 3, f::InodeType::kFifo, 06751),
                          Special("/sock", 4, f::InodeType::kSocket, 0672)});
  EXPECT_EQ(umask(umask_before), 077u);  // the export put the umask back
  EXPECT_TRUE(ok) << Problems();
  for (const auto& [name, mode] : {std::pair<const char*, mode_t>{"fifo", S_IFIFO | 0777},
                                   {"setid", S_IFIFO | 06751},
                                   {"sock", S_IFSOCK | 0672}}) {
    struct stat st;
    ASSERT_EQ(lstat((dest_ / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode, mode) << name;
  }
}

TEST_F(ExportTreeTest, NoModeIsSetThroughASymlinkSwappedInAfterCreation) {
  const fs::path secret = outside_ / "secret";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  swap_in_symlink_to = secret.c_str();
  Export({Root(), Special("/fifo", 2, f::InodeType::kFifo, 0666),
          Special("/setid", 3, f::InodeType::kFifo, 04666),
          Special("/sock", 4, f::InodeType::kSocket, 0666)});
  swap_in_symlink_to = nullptr;
  struct stat st;
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a mode was set through the swapped-in symlink";
  for (const char* name : {"fifo", "setid", "sock"}) {
    ASSERT_EQ(lstat((dest_ / name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << name << ": the swap did not happen";
  }
  // Restoring set-ID bits opens the name without following it, and says so.
  if (geteuid() == 0) {
    EXPECT_TRUE(Contains(ProblemOf("/setid"), "cannot open")) << Problems();
  }
}

TEST_F(ExportTreeTest, TwoEntriesWithOneNameKeepTheFirst) {
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/x", 2, f::InodeType::kRegular, {{0, 1}}, 3),
      Entry("/x", 3, f::InodeType::kRegular, {{1, 1}}, 3),
      Entry("/x", 4, f::InodeType::kDirectory),
      Symlink("/x", 5, "y"),
      Entry("/x", 2, f::InodeType::kRegular, {{0, 1}}, 3),  // a hard link onto itself
      Entry("/d", 6, f::InodeType::kDirectory),
      Entry("/d", 7, f::InodeType::kDirectory),
      Entry("/d/in", 8, f::InodeType::kRegular, {{2, 1}}, 2),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"d", "d/in", "x"}));
  EXPECT_EQ(ReadFile(dest_ / "x"), "AAA");
  EXPECT_EQ(ReadFile(dest_ / "d/in"), "CC");
  size_t x = 0, d = 0;
  for (const std::string& p : problems_) {
    x += p.rfind("/x: ", 0) == 0 && p.find("File exists") != std::string::npos;
    d += p.rfind("/d: ", 0) == 0 && p.find("File exists") != std::string::npos;
  }
  EXPECT_EQ(x, 4u) << Problems();
  EXPECT_EQ(d, 1u) << Problems();
  EXPECT_EQ(exporter_->files(), 2u);
  EXPECT_EQ(exporter_->dirs(), 2u);  // the root and the first /d
}

TEST_F(ExportTreeTest, NameAlreadyInTheDestinationIsNotOverwritten) {
  fs::create_directory(dest_);
  ASSERT_EQ(WriteTo(dest_ / "mine", "keep me"), 0);
  fs::create_directory(dest_ / "dir");
  ASSERT_EQ(WriteTo(dest_ / "dir" / "mine", "keep me too"), 0);
  // A hard link in the destination to a file outside: never written through.
  ASSERT_EQ(link((outside_ / "secret").c_str(), (dest_ / "linked").c_str()), 0);
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/mine", 2, f::InodeType::kRegular, {{0, 1}}, 3),
      Entry("/dir", 3, f::InodeType::kDirectory),
      Entry("/dir/mine", 4, f::InodeType::kRegular, {{0, 1}}, 3),
      Entry("/dir/new", 5, f::InodeType::kRegular, {{1, 1}}, 3),
      Entry("/linked", 6, f::InodeType::kRegular, {{0, 1}}, 3),
      Entry("/hard", 2, f::InodeType::kRegular, {{0, 1}}, 3),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(ReadFile(dest_ / "mine"), "keep me");
  EXPECT_EQ(ReadFile(dest_ / "dir" / "mine"), "keep me too");
  EXPECT_EQ(ReadFile(dest_ / "linked"), "untouched");
  // A directory that was there is used as it is; its children are added.
  EXPECT_EQ(ReadFile(dest_ / "dir" / "new"), "BBB");
  EXPECT_TRUE(Contains(ProblemOf("/mine"), "File exists"));
  EXPECT_TRUE(Contains(ProblemOf("/dir"), "File exists"));
  EXPECT_TRUE(Contains(ProblemOf("/dir/mine"), "File exists"));
  EXPECT_TRUE(Contains(ProblemOf("/linked"), "File exists"));
  // /mine was not made by the export, so /hard is a copy of its own, not a link to it.
  EXPECT_EQ(ReadFile(dest_ / "hard"), "AAA");
  struct stat st;
  ASSERT_EQ(stat((dest_ / "mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1u);
}

TEST_F(ExportTreeTest, SizesAndExtentsOutsideTheImageAreRefused) {
  core::FsckFile many = Entry("/many", 9, f::InodeType::kRegular, {}, 1);
  many.record.extent_count = 1000;  // more than a record holds: only kMaxExtents read
  for (uint32_t i = 0; i < f::kMaxExtents; ++i) many.record.extents[i] = {i % kDataBlocks, 0};
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/past-end", 2, f::InodeType::kRegular, {{kDataBlocks, 1}}, 1),
      Entry("/far", 3, f::InodeType::kRegular, {{~uint64_t{0}, 1}}, 1),
      Entry("/wraps", 4, f::InodeType::kRegular, {{kDataBlocks - 1, ~uint64_t{0}}}, 1),
      Entry("/straddles", 5, f::InodeType::kRegular, {{kDataBlocks - 2, 3}}, 1),
      Entry("/too-big", 6, f::InodeType::kRegular, {{0, 1}}, f::kBlockSize + 1),
      Entry("/huge", 7, f::InodeType::kRegular, {{0, 2}}, ~uint64_t{0}),
      Entry("/no-extents", 8, f::InodeType::kRegular, {}, 1),
      many,
      Entry("/fine", 10, f::InodeType::kRegular, {{kDataBlocks - 1, 1}}, 2),
  };
  EXPECT_FALSE(Export(files));
  EXPECT_EQ(Tree(dest_), std::vector<std::string>{"fine"});
  EXPECT_EQ(ReadFile(dest_ / "fine"), "HH");
  EXPECT_EQ(ProblemOf("/many"), "size 1 exceeds its extents");
  for (const char* path : {"/past-end", "/far", "/wraps", "/straddles"}) {
    EXPECT_TRUE(Contains(ProblemOf(path), "extent 0 lies outside the data area")) << path;
  }
  EXPECT_EQ(ProblemOf("/too-big"), "size 4097 exceeds its extents");
  EXPECT_EQ(ProblemOf("/huge"), "size 18446744073709551615 exceeds its extents");
  EXPECT_EQ(ProblemOf("/no-extents"), "size 1 exceeds its extents");
}

TEST_F(ExportTreeTest, TruncatedImageIsNotReadPastItsEnd) {
  // A superblock that says the data area is twice what the region holds (a pool file
  // cut short): extents past the region are refused, those inside still copied.
  f::Superblock sb = hand_sb_;
  sb.data_blocks = 2 * kDataBlocks;
  std::vector<core::FsckFile> files = {
      Root(),
      Entry("/inside", 2, f::InodeType::kRegular, {{kDataBlocks - 1, 1}}, f::kBlockSize),
      Entry("/beyond", 3, f::InodeType::kRegular, {{kDataBlocks, 1}}, 1),
      Entry("/across", 4, f::InodeType::kRegular, {{kDataBlocks - 1, 2}}, f::kBlockSize + 1),
  };
  EXPECT_FALSE(Export(files, hand_region_, sb));
  EXPECT_EQ(Tree(dest_), std::vector<std::string>{"inside"});
  EXPECT_EQ(ProblemOf("/beyond"), "extent past the region");
  EXPECT_EQ(ProblemOf("/across"), "extent past the region");
}

TEST_F(ExportTreeTest, EmptyOrNulSymlinkTargetIsRefused) {
  std::vector<core::FsckFile> files = {Root(), Symlink("/empty", 2, ""),
                                       Symlink("/nul", 3, std::string("a\0b", 3))};
  EXPECT_FALSE(Export(files));
  EXPECT_TRUE(Tree(dest_).empty());
  EXPECT_EQ(ProblemOf("/empty"), "symlink target is empty or holds a NUL byte");
  EXPECT_EQ(ProblemOf("/nul"), "symlink target is empty or holds a NUL byte");
}

TEST_F(ExportTreeTest, NothingIsWrittenWithoutADirectoryRoot) {
  core::FsckFile root = Entry("/", f::kRootInode, f::InodeType::kRegular, {{0, 1}}, 1);
  EXPECT_FALSE(Export({root, Entry("/x", 2, f::InodeType::kRegular, {{0, 1}}, 1)}));
  EXPECT_FALSE(fs::exists(dest_));
  EXPECT_EQ(ProblemOf("/"), "the root is not a directory");
  EXPECT_EQ(ProblemOf("/x"), "the export directory is not open");
  // The root not listed first: the same.
  problems_.clear();
  EXPECT_FALSE(Export({Entry("/x", 2, f::InodeType::kRegular, {{0, 1}}, 1), Root()}));
  EXPECT_EQ(ProblemOf("/x"), "the export directory is not open");
  EXPECT_TRUE(Tree(dest_).empty());
}

TEST_F(ExportTreeTest, DestinationThatIsAFileOrFifoIsRefused) {
  ASSERT_EQ(mkfifo(dest_.c_str(), 0600), 0);
  alarm(30);
  EXPECT_FALSE(Export({Root(), Entry("/x", 2, f::InodeType::kRegular, {{0, 1}}, 1)}));
  alarm(0);
  EXPECT_TRUE(Contains(ProblemOf("/"), "cannot open directory"));
  struct stat st;
  ASSERT_EQ(lstat(dest_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(unlink(dest_.c_str()), 0);
}

// ---- pools written by WalDirectory, listed by CheckPool ------------------------------

constexpr core::Caller kOwner{0, 0};

class ExportPoolTest : public ExportTreeTest {
 protected:
  // A pool with /wal (a directory), /wal/seg (data), /wal/small, /link -> wal/seg, and
  // a FIFO; `damage` flips a bit in /wal/seg's inode record once the pool is closed.
  void Build(bool damage) {
    std::string* bytes = nullptr;
    std::unique_ptr<core::WalDirectory> dir =
        core::testing::OpenImage(core::testing::FormattedImage(), true, &bytes);
    ASSERT_NE(dir, nullptr);
    auto wal = dir->names().Mkdir(core::kRootInode, "wal", 0750, kOwner);
    ASSERT_TRUE(wal.ok()) << wal.status();
    auto seg = dir->names().Create(wal->ino, "seg", 0600, kOwner, true);
    ASSERT_TRUE(seg.ok()) << seg.status();
    ASSERT_TRUE(
        dir->data().Write(seg->ino, 0, core::testing::Bytes(std::string(10000, 's')), false).ok());
    auto small = dir->names().Create(wal->ino, "small", 0644, kOwner, true);
    ASSERT_TRUE(small.ok()) << small.status();
    ASSERT_TRUE(dir->data().Write(small->ino, 0, core::testing::Bytes("tiny"), false).ok());
    ASSERT_TRUE(dir->names().Symlink(core::kRootInode, "link", "wal/seg", kOwner).ok());
    ASSERT_TRUE(dir->names().Mknod(core::kRootInode, "fifo", S_IFIFO | 0600, 0, kOwner).ok());
    seg_ino_ = seg->ino;
    ASSERT_TRUE(dir->Close().ok());
    image_ = *bytes;
    dir.reset();
    region_ = std::make_unique<core::MemoryRegion>(image_);
    if (damage) {
      core::FsckOptions options;
      auto clean = core::CheckPool(*region_, options);
      ASSERT_TRUE(clean.ok());
      const f::Superblock& sb = clean->superblock;
      region_->bytes()[sb.inode_table_offset + seg_ino_ * sb.inode_size + 40] ^= 1;
    }
  }

  core::FsckReport List(bool salvage) {
    core::FsckOptions options;
    options.list_files = true;
    options.salvage = salvage;
    options.scan_data = false;
    absl::StatusOr<core::FsckReport> report = core::CheckPool(*region_, options);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *std::move(report) : core::FsckReport{};
  }

  std::string image_;
  std::unique_ptr<core::MemoryRegion> region_;
  uint64_t seg_ino_ = 0;
};

TEST_F(ExportPoolTest, CleanPoolIsCopiedWhole) {
  ASSERT_NO_FATAL_FAILURE(Build(/*damage=*/false));
  core::FsckReport report = List(false);
  ASSERT_TRUE(report.superblock_valid);
  EXPECT_TRUE(Export(report.files_list, *region_, report.superblock)) << Problems();
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"fifo", "link", "wal", "wal/seg",
                                                    "wal/small"}));
  EXPECT_EQ(ReadFile(dest_ / "wal/seg"), std::string(10000, 's'));
  EXPECT_EQ(ReadFile(dest_ / "wal/small"), "tiny");
  EXPECT_EQ(fs::read_symlink(dest_ / "link"), "wal/seg");
  EXPECT_EQ(exporter_->salvaged(), 0u);
}

TEST_F(ExportPoolTest, StrictListingLeavesADamagedRecordOut) {
  ASSERT_NO_FATAL_FAILURE(Build(/*damage=*/true));
  core::FsckReport report = List(false);
  ASSERT_TRUE(report.superblock_valid);
  EXPECT_GT(report.Count(core::FsckProblem::kError, false), 0u);
  EXPECT_TRUE(Export(report.files_list, *region_, report.superblock)) << Problems();
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"fifo", "link", "wal", "wal/small"}));
  EXPECT_EQ(exporter_->salvaged(), 0u);
}

TEST_F(ExportPoolTest, SalvageCopiesADamagedRecordAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(Build(/*damage=*/true));
  core::FsckReport report = List(true);
  ASSERT_TRUE(report.superblock_valid);
  Export(report.files_list, *region_, report.superblock);
  EXPECT_EQ(ProblemOf("/wal/seg").rfind("salvaged from a damaged inode record: check it", 0), 0u)
      << Problems();
  EXPECT_EQ(exporter_->salvaged(), 1u);
  EXPECT_EQ(Tree(dest_), (std::vector<std::string>{"fifo", "link", "wal", "wal/seg",
                                                    "wal/small"}));
  // The bit flipped lies in the record's atime, not its size or extents: the data comes
  // back whole.
  EXPECT_EQ(ReadFile(dest_ / "wal/seg"), std::string(10000, 's'));
}

}  // namespace
}  // namespace walfs::tools
