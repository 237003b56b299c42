// walfsctl inspect: geometry, usage and every file of an unmounted pool, for people or as
// JSON. Read-only: reads the pool through OpenAndList (walfsctl.h) and writes only to
// stdout.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/format.h"
#include "core/fsck.h"
#include "tools/human_bytes.h"
#include "tools/walfsctl/walfsctl.h"

namespace walfs::tools::ctl {
namespace {

namespace f = core::format;

const char* ShortType(f::InodeType type) {
  switch (type) {
    case f::InodeType::kRegular: return "file";
    case f::InodeType::kDirectory: return "dir";
    case f::InodeType::kSymlink: return "symlink";
    case f::InodeType::kFifo: return "fifo";
    case f::InodeType::kSocket: return "socket";
    case f::InodeType::kCharDevice: return "chardev";
    case f::InodeType::kBlockDevice: return "blkdev";
    case f::InodeType::kNone: break;
  }
  return "?";
}

std::string FormatTime(int64_t ns) {
  const time_t seconds = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  if (gmtime_r(&seconds, &tm) == nullptr) return absl::StrCat(ns, " ns");
  char text[64];
  strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

}  // namespace

int Inspect(const std::string& pool, bool json) {
  absl::StatusOr<core::CheckedPool> opened = OpenAndList(pool);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  const core::FsckReport& r = opened->report;
  const std::string kind(opened->region->kind());
  if (json) {
    std::printf("{\"pool\":%s,\"kind\":%s,\"report\":%s}\n", core::JsonQuote(pool).c_str(),
                core::JsonQuote(kind).c_str(), core::FsckReportJson(r).c_str());
    return r.superblock_valid ? 0 : kExitFailure;
  }
  std::printf("pool        %s (%s, %s)\n", pool.c_str(), kind.c_str(),
              HumanBytes(r.region_size).c_str());
  if (!r.superblock_valid) {
    std::printf("superblock  none valid: the pool cannot be read (see fsck.walfs %s)\n",
                pool.c_str());
    return kExitFailure;
  }
  const f::Superblock& sb = r.superblock;
  std::printf("uuid        %s\n", core::FormatUuid(sb.uuid).c_str());
  std::printf("created     %s\n", FormatTime(sb.created_ns).c_str());
  std::printf("capacity    %s (%llu bytes), format version %u\n", HumanBytes(sb.capacity).c_str(),
              static_cast<unsigned long long>(sb.capacity), sb.version);
  std::printf("segment     %s\n", HumanBytes(sb.segment_size).c_str());
  std::printf("layout      journal @%llu (%s), inodes @%llu (%llu x %llu), dirents @%llu "
              "(%llu x %llu), data @%llu (%llu x %llu)\n",
              static_cast<unsigned long long>(sb.journal_offset), HumanBytes(sb.journal_size).c_str(),
              static_cast<unsigned long long>(sb.inode_table_offset),
              static_cast<unsigned long long>(sb.inode_count),
              static_cast<unsigned long long>(sb.inode_size),
              static_cast<unsigned long long>(sb.dirent_table_offset),
              static_cast<unsigned long long>(sb.dirent_count),
              static_cast<unsigned long long>(sb.dirent_size),
              static_cast<unsigned long long>(sb.data_offset),
              static_cast<unsigned long long>(sb.data_blocks),
              static_cast<unsigned long long>(sb.block_size));
  std::printf("inodes      %llu of %llu used: %llu files, %llu directories, %llu symlinks, "
              "%llu orphans\n",
              static_cast<unsigned long long>(r.inodes_total - r.inodes_free),
              static_cast<unsigned long long>(r.inodes_total),
              static_cast<unsigned long long>(r.files), static_cast<unsigned long long>(r.dirs),
              static_cast<unsigned long long>(r.symlinks),
              static_cast<unsigned long long>(r.inodes_orphan));
  std::printf("dirents     %llu of %llu used\n", static_cast<unsigned long long>(r.dirents_used),
              static_cast<unsigned long long>(r.dirents_total));
  std::printf("blocks      %llu of %llu used (%s), %s free\n",
              static_cast<unsigned long long>(r.blocks_used),
              static_cast<unsigned long long>(r.blocks_total),
              HumanBytes(r.blocks_used * sb.block_size).c_str(),
              HumanBytes(r.blocks_free * sb.block_size).c_str());
  std::printf("journal     %s\n", r.journal_sequence
                                      ? absl::StrCat("last transaction ", r.journal_sequence).c_str()
                                      : "empty");
  std::printf("free space  %s\n", r.free_space_trusted
                                      ? "kept zero by walfs: the next mount reads none of it"
                                      : "not known zero: the next mount checks it before use");
  const size_t errors = r.Count(core::FsckProblem::kError, false);
  const size_t warnings = r.Count(core::FsckProblem::kWarning, false);
  std::printf("check       %s\n",
              errors + warnings == 0
                  ? "metadata clean (fsck.walfs also checks the data area)"
                  : absl::StrCat(errors, " error(s), ", warnings,
                                 " warning(s) in metadata; run fsck.walfs for details")
                        .c_str());
  std::printf("\n%-40s %-7s %12s %5s %6s %6s %5s  %s\n", "PATH", "TYPE", "SIZE", "MODE", "UID",
              "GID", "NLINK", "EXTENTS (block+count) / TARGET");
  for (const core::FsckFile& file : r.files_list) {
    const f::InodeRecord& rec = file.record;
    std::string extents;
    if (rec.type == f::InodeType::kSymlink) {
      extents = "-> " + file.target;
    } else {
      const uint32_t n = std::min<uint32_t>(rec.extent_count, f::kMaxExtents);
      for (uint32_t i = 0; i < n; ++i) {
        absl::StrAppend(&extents, i ? "," : "", rec.extents[i].block, "+", rec.extents[i].count);
      }
      if (rec.extent_count > f::kMaxExtents) extents += ",...";
    }
    std::printf("%-40s %-7s %12llu %04o %6u %6u %5u  %s\n", file.path.c_str(),
                ShortType(rec.type), static_cast<unsigned long long>(rec.size), rec.mode & 07777,
                rec.uid, rec.gid, rec.nlink, extents.empty() ? "-" : extents.c_str());
  }
  return 0;
}

}  // namespace walfs::tools::ctl
