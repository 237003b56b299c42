// A fsck report as JSON (FsckReportJson, for the tools' --json) and the small formatters
// the tools share with it. Reads only the report: never the pool.
#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/format.h"
#include "core/fsck.h"
#include "core/validate.h"

namespace walfs::core {

using format::InodeRecord;
using format::InodeType;
using format::Superblock;

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string FormatUuid(const uint8_t (&uuid)[16]) {
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += absl::StrFormat("%02x", uuid[i]);
  }
  return out;
}

std::string FsckReportJson(const FsckReport& report) {
  std::string out = absl::StrCat("{\"clean\":", report.clean() ? "true" : "false",
                                 ",\"superblock_valid\":",
                                 report.superblock_valid ? "true" : "false",
                                 ",\"region_size\":", report.region_size);
  if (report.superblock_valid) {
    const Superblock& sb = report.superblock;
    absl::StrAppend(&out, ",\"superblock\":{\"version\":", sb.version,
                    ",\"uuid\":", JsonQuote(FormatUuid(sb.uuid)),
                    ",\"capacity\":", sb.capacity, ",\"block_size\":", sb.block_size,
                    ",\"segment_size\":", sb.segment_size,
                    ",\"journal_offset\":", sb.journal_offset,
                    ",\"journal_size\":", sb.journal_size,
                    ",\"inode_table_offset\":", sb.inode_table_offset,
                    ",\"inode_count\":", sb.inode_count,
                    ",\"dirent_table_offset\":", sb.dirent_table_offset,
                    ",\"dirent_count\":", sb.dirent_count,
                    ",\"data_offset\":", sb.data_offset,
                    ",\"data_blocks\":", sb.data_blocks,
                    ",\"created_ns\":", sb.created_ns, "}");
    absl::StrAppend(&out, ",\"state\":{\"inode_high\":", report.state.inode_high,
                    ",\"dirent_high\":", report.state.dirent_high,
                    ",\"uninit_begin\":", report.state.uninit_begin,
                    ",\"uninit_end\":", report.state.uninit_end, "}");
    absl::StrAppend(&out, ",\"usage\":{\"inodes_total\":", report.inodes_total,
                    ",\"inodes_live\":", report.inodes_live,
                    ",\"inodes_orphan\":", report.inodes_orphan,
                    ",\"inodes_free\":", report.inodes_free,
                    ",\"dirents_total\":", report.dirents_total,
                    ",\"dirents_used\":", report.dirents_used, ",\"files\":", report.files,
                    ",\"dirs\":", report.dirs, ",\"symlinks\":", report.symlinks,
                    ",\"specials\":", report.specials,
                    ",\"blocks_total\":", report.blocks_total,
                    ",\"blocks_used\":", report.blocks_used,
                    ",\"blocks_free\":", report.blocks_free,
                    ",\"journal_sequence\":", report.journal_sequence,
                    ",\"journal_flags\":", report.journal_flags,
                    ",\"free_space_trusted\":", report.free_space_trusted ? "true" : "false",
                    "}");
  }
  absl::StrAppend(&out, ",\"problems\":[");
  for (size_t i = 0; i < report.problems.size(); ++i) {
    const FsckProblem& p = report.problems[i];
    absl::StrAppend(&out, i ? "," : "", "{\"severity\":",
                    JsonQuote(SeverityName(p.severity)), ",\"where\":", JsonQuote(p.where),
                    ",\"what\":", JsonQuote(p.what),
                    ",\"repairable\":", p.repairable ? "true" : "false",
                    ",\"repaired\":", p.repaired ? "true" : "false", "}");
  }
  out += "]";
  if (!report.files_list.empty()) {
    out += ",\"files\":[";
    for (size_t i = 0; i < report.files_list.size(); ++i) {
      const FsckFile& f = report.files_list[i];
      const InodeRecord& r = f.record;
      absl::StrAppend(&out, i ? "," : "", "{\"path\":", JsonQuote(f.path),
                      ",\"ino\":", f.ino, ",\"type\":", JsonQuote(InodeTypeName(r.type)),
                      ",\"size\":", r.size, ",\"mode\":", JsonQuote(absl::StrFormat("%04o", r.mode & 07777)),
                      ",\"uid\":", r.uid, ",\"gid\":", r.gid, ",\"nlink\":", r.nlink,
                      ",\"mtime_ns\":", r.mtime_ns, ",\"generation\":", r.generation,
                      ",\"damaged\":", f.damaged ? "true" : "false");
      if (r.type == InodeType::kSymlink) {
        absl::StrAppend(&out, ",\"target\":", JsonQuote(f.target));
      }
      out += ",\"extents\":[";
      const uint32_t n = r.type == InodeType::kRegular
                             ? std::min<uint32_t>(r.extent_count, format::kMaxExtents)
                             : 0;
      for (uint32_t e = 0; e < n; ++e) {
        absl::StrAppend(&out, e ? "," : "", "{\"block\":", r.extents[e].block,
                        ",\"count\":", r.extents[e].count, "}");
      }
      out += "]}";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace walfs::core
