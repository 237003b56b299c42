// Crash states of a grow (walfsctl grow, GrowPool in core/wal_directory.h).
//
// A populated pool is placed at the start of a bigger region whose new bytes hold
// garbage (GrowPool's contract: the caller extended the region; a real grow extends the
// file with zeros, garbage is the harder case). GrowPool runs on a RecordingRegion, and
// at each of its durability points (pmem drains, msyncs) every crash image the region
// model enumerates is checked:
//  - it opens, with the old capacity or the new one and nothing else;
//  - every file is there with its content (a grow changes no file);
//  - fsck finds nothing wrong once it has been opened;
//  - when it has the new size, a file taking every free block reads as zeros: blocks the
//    grow added were zeroed or recorded as uninitialised before the size was committed,
//    and the garbage never reaches a file.
// The durable image once GrowPool returns must have the new size. Three pools cover the
// three ways the grow deals with the new blocks (core/space.cc, Space::GrowDataArea):
// nothing uninitialised (the new blocks become the range), an uninitialised range
// reaching the old end (extended), and one ending below files allocated from the top
// (the new blocks are zeroed first).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/status.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"
#include "tests/support/recording_region.h"

namespace walfs::core {
namespace {

constexpr uint64_t kSegment = 1 << 20;
constexpr uint64_t kOldSize = 4 << 20;
constexpr uint64_t kNewSize = 7 << 20;
constexpr Caller kPg{105, 111};
// A segment name: only segments may take the reserve (core/layout.h), and the fill
// must take every free block.
constexpr char kFillName[] = "0000000100000000000000FF";

// path -> content ("/" for directories: their content is not compared).
using Files = std::map<std::string, std::string>;

absl::Status Walk(WalDirectory& d, InodeId dir, const std::string& prefix, Files& out) {
  std::vector<std::string> names;
  absl::Status s = d.names().Readdir(dir, 0, [&](const DirEntry& e) {
    if (e.name != "." && e.name != "..") names.emplace_back(e.name);
    return true;
  });
  if (!s.ok()) return s;
  for (const auto& n : names) {
    auto a = d.names().Lookup(dir, n);
    if (!a.ok()) return a.status();
    const std::string path = prefix + "/" + n;
    if (S_ISDIR(a->mode)) {
      out[path] = "/";
      s = Walk(d, a->ino, path, out);
      if (!s.ok()) return s;
      continue;
    }
    std::string content(a->size, '\0');
    auto r = d.data().Read(a->ino, 0, absl::MakeSpan(content));
    if (!r.ok()) return r.status();
    if (*r != a->size) return absl::DataLossError(absl::StrCat(path, ": short read"));
    out[path] = std::move(content);
  }
  return absl::OkStatus();
}

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i % 23);
  return s;
}

enum class Kind { kNothingUninit, kUninitAtTheEnd, kFilesAtTheTop };

// The pool to grow, kOldSize bytes, closed cleanly.
std::string MakePool(Kind kind) {
  auto region = std::make_unique<MemoryRegion>(kOldSize);
  MemoryRegion* raw = region.get();
  FormatOptions opts;
  opts.segment_size = kSegment;
  opts.inode_count = 32;
  if (kind == Kind::kNothingUninit) {
    opts.region_is_zero = true;
  } else {
    raw->Fill(0, 0xa5, kOldSize);  // a lazy format over old bytes: all uninitialised
  }
  EXPECT_TRUE(FormatPool(*raw, opts).ok());
  auto opened = WalDirectory::Open(std::move(region));
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return "";
  WalDirectory& d = **opened;
  auto write = [&](const std::string& name, const std::string& bytes) {
    auto f = d.names().Create(kRootInode, name, 0600, kPg, true);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(
        d.data().Write(f->ino, 0, absl::MakeConstSpan(bytes.data(), bytes.size()), true).ok());
    ASSERT_TRUE(d.data().Release(f->ino).ok());
    d.names().Forget(f->ino, 1);
  };
  write("000000010000000000000001", Pattern(kSegment, 's'));  // from the bottom
  if (kind != Kind::kUninitAtTheEnd) {
    auto dir = d.names().Mkdir(kRootInode, "archive_status", 0700, kPg);
    EXPECT_TRUE(dir.ok()) << dir.status();
    write("00000002.history", Pattern(5000, 'h'));  // from the top
  }
  EXPECT_TRUE(d.Close().ok());
  return raw->bytes();
}

struct Opened {
  uint64_t capacity = 0;
  Files files;
  std::string error;  // empty when it opened, walked, closed and fsck was clean
};

// Opens `image`, reads every file and closes it; fsck then checks what that left. With
// `fill` and the new size, a file is given every free block and must read as zeros.
Opened OpenAndCheck(const std::string& image, bool pmem, bool fill) {
  Opened o;
  auto region = std::make_unique<MemoryRegion>(image, pmem);
  MemoryRegion* raw = region.get();
  auto opened = WalDirectory::Open(std::move(region));
  if (!opened.ok()) {
    o.error = absl::StrCat("open: ", opened.status().message());
    return o;
  }
  WalDirectory& d = **opened;
  o.capacity = d.superblock().capacity;
  if (absl::Status s = Walk(d, kRootInode, "", o.files); !s.ok()) {
    o.error = absl::StrCat("walk: ", s.message());
    return o;
  }
  if (fill && o.capacity == kNewSize) {
    const FsStats st = d.Statfs();
    const uint64_t bytes = st.free_blocks * st.block_size;
    auto f = d.names().Create(kRootInode, kFillName, 0600, kPg, true);
    if (!f.ok()) {
      o.error = absl::StrCat("create fill: ", f.status().message());
      return o;
    }
    if (absl::Status s = d.data().Fallocate(f->ino, 0, bytes, 0); !s.ok()) {
      o.error = absl::StrCat("fallocate ", bytes, " bytes (all free space): ", s.message());
      return o;
    }
    std::string got(bytes, '\1');
    auto r = d.data().Read(f->ino, 0, absl::MakeSpan(got));
    if (!r.ok() || *r != bytes || got.find_first_not_of('\0') != std::string::npos) {
      o.error = "the free space after the grow does not read as zeros";
      return o;
    }
    if (bytes < (kNewSize - kOldSize)) {
      o.error = absl::StrCat("only ", bytes, " bytes free after growing by ",
                             kNewSize - kOldSize);
      return o;
    }
    d.names().Forget(f->ino, 1);
  }
  if (absl::Status s = d.Close(); !s.ok()) {
    o.error = absl::StrCat("close: ", s.message());
    return o;
  }
  MemoryRegion after(raw->bytes(), true);
  auto report = CheckPool(after, FsckOptions{});
  if (!report.ok()) {
    o.error = absl::StrCat("fsck: ", report.status().message());
    return o;
  }
  for (const auto& p : report->problems) {
    if (p.severity != FsckProblem::kInfo) absl::StrAppend(&o.error, "fsck: ", p.where, ": ", p.what, "; ");
  }
  return o;
}

class GrowCrashTest : public ::testing::TestWithParam<std::tuple<Kind, bool>> {};

TEST_P(GrowCrashTest, EveryCrashStateHasTheOldOrTheNewSizeAndEveryFile) {
  const auto& [kind, pmem] = GetParam();
  const std::string pool = MakePool(kind);
  ASSERT_FALSE(pool.empty());
  const Opened before = OpenAndCheck(pool, pmem, false);
  ASSERT_EQ(before.error, "");
  ASSERT_EQ(before.capacity, kOldSize);
  ASSERT_GE(before.files.size(), 1u);

  std::string image = pool;
  image.resize(kNewSize, '\x5a');
  auto region = std::make_unique<RecordingRegion>(image, pmem);
  RecordingRegion* rec = region.get();
  RecordingRegion::CrashEnumOptions opts;
  opts.max_images = 400;
  size_t states = 0, old_size = 0, new_size = 0;
  std::string first_failure;
  rec->SetDurabilityHook([&] {
    rec->ForEachCrashImage(opts, [&](const std::string& crash) {
      // Filling every state with the new size costs a pool's worth of reads and
      // writes: every 4th is enough to catch uncovered garbage, the rest is checked.
      const Opened o = OpenAndCheck(crash, pmem, states % 4 == 0);
      ++states;
      std::string why = o.error;
      if (why.empty() && o.capacity != kOldSize && o.capacity != kNewSize) {
        why = absl::StrCat("capacity ", o.capacity, " is neither the old nor the new one");
      }
      if (why.empty() && o.files != before.files) why = "the files differ from the pool's";
      if (!why.empty() && first_failure.empty()) {
        first_failure = absl::StrCat("crash state ", states, " at durability point ",
                                     rec->durability_points(), ": ", why);
      }
      (o.capacity == kNewSize ? new_size : old_size) += 1;
    });
  });
  // GrowPool's steps, with the region kept to read what they left.
  auto dir = WalDirectory::Open(std::move(region));
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto grown = (*dir)->Grow(kNewSize);
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->old_capacity, kOldSize);
  EXPECT_EQ(grown->new_capacity, kNewSize);
  // The open pool refuses changes until it is reopened (its allocator has the old size).
  EXPECT_EQ(ErrnoFromStatus((*dir)->names().Mkdir(kRootInode, "late", 0700, kPg).status()), EROFS);
  ASSERT_TRUE((*dir)->Close().ok());
  rec->SetDurabilityHook({});
  const std::string durable = rec->DurableImage();
  dir->reset();
  const Opened after = OpenAndCheck(durable, pmem, true);
  EXPECT_EQ(after.error, "");
  EXPECT_EQ(after.capacity, kNewSize);
  EXPECT_EQ(after.files, before.files);
  EXPECT_EQ(first_failure, "");
  EXPECT_GT(old_size, 0u);
  EXPECT_GT(new_size, 0u);
  ::testing::Test::RecordProperty("crash_states", static_cast<int>(states));
  std::printf("%zu crash states checked: %zu with the old size, %zu with the new one\n",
              states, old_size, new_size);
}

std::string KindName(Kind k) {
  switch (k) {
    case Kind::kNothingUninit: return "nothing_uninit";
    case Kind::kUninitAtTheEnd: return "uninit_at_the_end";
    case Kind::kFilesAtTheTop: return "files_at_the_top";
  }
  return "?";
}

INSTANTIATE_TEST_SUITE_P(
    All, GrowCrashTest,
    ::testing::Combine(::testing::Values(Kind::kNothingUninit, Kind::kUninitAtTheEnd,
                                         Kind::kFilesAtTheTop),
                       ::testing::Bool()),
    [](const auto& info) {
      return KindName(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_pmem" : "_msync");
    });

}  // namespace
}  // namespace walfs::core
