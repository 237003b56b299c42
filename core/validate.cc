// Record validation shared by pool open and fsck (see validate.h).
#include "core/validate.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/all_zero.h"
#include "core/crc32c.h"
#include "core/layout.h"

namespace walfs::core {
namespace {

using format::InodeState;
using format::InodeType;
using format::kBlockSize;

template <typename T>
bool AllZeroRecord(const T& record) {
  return AllZero(reinterpret_cast<const char*>(&record), sizeof(T));
}

std::string CrcError(uint32_t stored, uint32_t computed) {
  return absl::StrFormat("bad crc (stored %08x, computed %08x)", stored, computed);
}

// A symlink's target lives inline in the bytes of `extents`, or out of line in the one
// block extents[0] names (format.h). Adds its problems to `c`.
void CheckSymlink(const format::InodeRecord& r, const format::Superblock& sb,
                  const char* pool, InodeCheck& c) {
  if (r.extent_count > 1) {
    c.problems.push_back(absl::StrCat("symlink has extent_count ", r.extent_count,
                                      "; its target is inline (0) or in one block (1)"));
    c.extents_sound = false;
    return;
  }
  const bool out_of_line = r.extent_count == 1;
  const uint64_t min = out_of_line ? format::kMaxSymlinkTarget + 1 : 1;
  const uint64_t max =
      out_of_line ? format::kMaxSymlinkTargetOutOfLine : format::kMaxSymlinkTarget;
  if (r.size < min || r.size > max) {
    c.problems.push_back(absl::StrCat("symlink target length ", r.size, " is not within ",
                                      min, "..", max,
                                      out_of_line ? " (out of line)" : " (inline)"));
    // The block of an out-of-line target of a wrong length is not trusted to be its.
    if (out_of_line) c.extents_sound = false;
    return;
  }
  const char* target = reinterpret_cast<const char*>(r.extents);
  if (out_of_line) {
    const format::Extent& x = r.extents[0];
    if (x.count != 1 || x.block >= sb.data_blocks) {
      c.problems.push_back(absl::StrCat("symlink target block ", x.block, " +", x.count,
                                        " is not one block of the data area"));
      c.extents_sound = false;
      return;
    }
    // An orphan's out-of-line target may never have been written (format.h).
    if (r.state != InodeState::kLive) return;
    target = pool + sb.data_offset + x.block * kBlockSize;
  }
  if (std::memchr(target, '\0', r.size) != nullptr) {
    c.problems.push_back("symlink target contains a NUL byte");
  }
}

// A regular file's extents: in the data area, not overlapping each other, holding its
// size. Adds its problems to `c`.
void CheckFileExtents(const format::InodeRecord& r, const format::Superblock& sb,
                      InodeCheck& c) {
  uint32_t n = r.extent_count;
  if (n > format::kMaxExtents) {
    c.problems.push_back(
        absl::StrCat("extent_count ", n, " exceeds the maximum of ", format::kMaxExtents));
    n = format::kMaxExtents;
    c.extents_sound = false;
  }
  unsigned __int128 allocated = 0;
  std::vector<uint32_t> in_area;  // indices of the extents that lie in the data area
  for (uint32_t i = 0; i < n; ++i) {
    const format::Extent& x = r.extents[i];
    if (x.count == 0) {
      c.problems.push_back(absl::StrCat("extent ", i, " is empty"));
      c.extents_sound = false;
    } else if (!ExtentInDataArea(x, sb.data_blocks)) {
      c.problems.push_back(absl::StrCat("extent ", i, " (blocks ", x.block, " +", x.count,
                                        ") lies outside the data area of ", sb.data_blocks,
                                        " blocks"));
      c.extents_sound = false;
    } else {
      in_area.push_back(i);
      allocated += static_cast<unsigned __int128>(x.count) * kBlockSize;
    }
  }
  // Two extents of one file on the same block: a property of the record alone. (Two
  // files on one block is the callers' cross-record check.) The blocks are still the
  // file's, so its extents stay sound: they are claimed, never taken for free space.
  std::sort(in_area.begin(), in_area.end(), [&](uint32_t a, uint32_t b) {
    return r.extents[a].block != r.extents[b].block ? r.extents[a].block < r.extents[b].block
                                                    : a < b;
  });
  for (size_t k = 1; k < in_area.size(); ++k) {
    const format::Extent& prev = r.extents[in_area[k - 1]];
    const format::Extent& x = r.extents[in_area[k]];
    if (x.block < prev.block + prev.count) {
      c.problems.push_back(absl::StrCat("extent ", in_area[k], " (blocks ", x.block, " +",
                                        x.count, ") overlaps extent ", in_area[k - 1],
                                        " (blocks ", prev.block, " +", prev.count,
                                        ") of the same inode"));
      break;
    }
  }
  if (c.extents_sound && r.size > allocated) {
    c.problems.push_back(absl::StrCat("size ", r.size, " exceeds the ",
                                      static_cast<uint64_t>(allocated),
                                      " bytes its extents hold"));
    c.extents_sound = false;
  }
}

}  // namespace

uint32_t TypeBits(InodeType t) {
  switch (t) {
    case InodeType::kRegular: return S_IFREG;
    case InodeType::kDirectory: return S_IFDIR;
    case InodeType::kSymlink: return S_IFLNK;
    case InodeType::kFifo: return S_IFIFO;
    case InodeType::kSocket: return S_IFSOCK;
    case InodeType::kCharDevice: return S_IFCHR;
    case InodeType::kBlockDevice: return S_IFBLK;
    case InodeType::kNone: break;
  }
  return 0;
}

const char* InodeTypeName(InodeType type) {
  switch (type) {
    case InodeType::kRegular: return "regular file";
    case InodeType::kDirectory: return "directory";
    case InodeType::kSymlink: return "symlink";
    case InodeType::kFifo: return "fifo";
    case InodeType::kSocket: return "socket";
    case InodeType::kCharDevice: return "character device";
    case InodeType::kBlockDevice: return "block device";
    case InodeType::kNone: break;
  }
  return "none";
}

std::string SuperblockError(const format::Superblock& sb, uint64_t region_size) {
  if (sb.magic != format::kSuperblockMagic) {
    return AllZeroRecord(sb) ? "all zero (no walfs superblock)"
                             : "bad magic (not a walfs superblock)";
  }
  // Before the crc: another version's superblock may have its crc elsewhere, and what
  // to do about an old pool is worth more than "bad crc".
  if (sb.version != format::kVersion) {
    return absl::StrCat(
        "unsupported format version ", sb.version, " (this walfs reads version ",
        format::kVersion, ")",
        sb.version < format::kVersion
            ? ": the pool was made by an older mkfs.walfs; copy its files out with that "
              "version's walfsctl export, then mkfs.walfs --force it (README: Format "
              "versions)"
            : ": the pool was made by a newer walfs");
  }
  if (sb.superblock_size != sizeof(format::Superblock)) {
    return absl::StrCat("superblock_size is ", sb.superblock_size, ", expected ",
                        sizeof(format::Superblock));
  }
  const uint32_t crc = Crc32c(0, &sb, offsetof(format::Superblock, crc));
  if (crc != sb.crc) return CrcError(sb.crc, crc);
  if (sb.block_size != kBlockSize) {
    return absl::StrCat("block_size is ", sb.block_size, ", expected ", kBlockSize);
  }
  if (sb.segment_size < format::kMinSegmentSize || sb.segment_size > format::kMaxSegmentSize ||
      !std::has_single_bit(sb.segment_size)) {
    return absl::StrCat("segment_size ", sb.segment_size,
                        " is not a power of two between 1 MiB and 1 GiB");
  }
  if (sb.inode_size != format::kInodeSize || sb.dirent_size != format::kDirentSize) {
    return absl::StrCat("record sizes ", sb.inode_size, "/", sb.dirent_size, ", expected ",
                        format::kInodeSize, "/", format::kDirentSize);
  }
  if (sb.journal_offset != format::kJournalOffset || sb.journal_size != format::kJournalSize) {
    return absl::StrCat("journal at ", sb.journal_offset, " (", sb.journal_size,
                        " bytes), but format version 2 puts it at ", format::kJournalOffset,
                        " (", format::kJournalSize, " bytes)");
  }
  if (sb.capacity > region_size) {
    return absl::StrCat("capacity is ", sb.capacity, " bytes but the region has only ",
                        region_size, " (truncated pool?)");
  }
  // ComputeLayout would take 0 for "the default count".
  if (sb.inode_count < 2 || sb.inode_count > (1ULL << 32)) {
    return absl::StrCat("inode_count ", sb.inode_count, " is not within 2..2^32");
  }
  // The rest of the geometry follows from capacity, segment size and inode count: what
  // mkfs wrote is exactly what ComputeLayout gives for them (a grow changes only the
  // state record). Every area then lies, aligned and in order, inside the capacity.
  FormatOptions opts;
  opts.segment_size = sb.segment_size;
  opts.inode_count = sb.inode_count;
  auto expected = ComputeLayout(sb.capacity, opts);
  if (!expected.ok()) {
    return absl::StrCat("inconsistent geometry: ", expected.status().message());
  }
  const struct {
    const char* name;
    uint64_t have, want;
  } fields[] = {
      {"capacity", sb.capacity, expected->capacity},
      {"inode_table_offset", sb.inode_table_offset, expected->inode_table_offset},
      {"dirent_table_offset", sb.dirent_table_offset, expected->dirent_table_offset},
      {"dirent_count", sb.dirent_count, expected->dirent_count},
      {"data_offset", sb.data_offset, expected->data_offset},
      {"data_blocks", sb.data_blocks, expected->data_blocks},
  };
  for (const auto& f : fields) {
    if (f.have != f.want) {
      return absl::StrCat("inconsistent geometry: ", f.name, " is ", f.have, ", but the layout "
                          "of a ", sb.capacity, "-byte pool with ", sb.inode_count,
                          " inodes has ", f.want, " (table offsets or counts do not match)");
    }
  }
  return "";
}

std::string PoolStateError(const format::PoolState& state, const format::Superblock& sb,
                           uint64_t region_size) {
  const uint32_t crc = RecordCrc(&state, sizeof(state));
  if (state.magic != format::kStateMagic) {
    return AllZeroRecord(state) ? "all zero (no state record)" : "bad magic";
  }
  if (crc != state.crc) return CrcError(state.crc, crc);
  if (state.reserved0 != 0 ||
      !AllZero(reinterpret_cast<const char*>(state.reserved1), sizeof(state.reserved1))) {
    return "reserved bytes are not zero";
  }
  if (state.inode_high < 2 || state.inode_high > sb.inode_count) {
    return absl::StrCat("inode_high ", state.inode_high, " is not within 2..",
                        sb.inode_count);
  }
  if (state.dirent_high > sb.dirent_count) {
    return absl::StrCat("dirent_high ", state.dirent_high, " exceeds the ", sb.dirent_count,
                        " dirent slots");
  }
  // The data area: at least what mkfs made, and within the region (a grown pool whose
  // file was cut back by hand is refused here, not read past its end).
  uint64_t data_bytes, data_end;
  if (state.data_blocks < sb.data_blocks) {
    return absl::StrCat("data_blocks ", state.data_blocks,
                        " is below the superblock's ", sb.data_blocks);
  }
  if (__builtin_mul_overflow(state.data_blocks, kBlockSize, &data_bytes) ||
      __builtin_add_overflow(sb.data_offset, data_bytes, &data_end) ||
      data_end > region_size) {
    return absl::StrCat("data area of ", state.data_blocks, " blocks at offset ",
                        sb.data_offset, " does not fit in the region of ", region_size,
                        " bytes (a grown pool's file cut back?)");
  }
  if (state.uninit_begin > state.uninit_end || state.uninit_end > state.data_blocks) {
    return absl::StrCat("uninitialised range [", state.uninit_begin, ", ", state.uninit_end,
                        ") is not within the ", state.data_blocks, " data blocks");
  }
  return "";
}

bool ExtentInDataArea(const format::Extent& x, uint64_t data_blocks) {
  return x.count > 0 && x.block < data_blocks && x.count <= data_blocks - x.block;
}

InodeCheck CheckInodeSlot(uint64_t ino, const char* raw, const format::Superblock& sb,
                          const char* pool) {
  InodeCheck c;
  if (AllZero(raw, format::kInodeSize)) {
    if (ino == format::kRootInode) {
      c.problems.push_back("the root is not a live directory: its slot is free");
    }
    return c;
  }
  c.kind = SlotKind::kUnusable;
  c.extents_sound = false;
  if (ino == 0) {
    c.problems.push_back("reserved inode slot 0 is not zero");
    return c;
  }
  auto finish = [&]() -> InodeCheck& {
    if (ino == format::kRootInode &&
        (c.kind != SlotKind::kLive || c.type != InodeType::kDirectory)) {
      c.problems.push_back("the root is not a live directory");
    }
    return c;
  };
  format::InodeRecord r;
  std::memcpy(&r, raw, sizeof(r));
  const uint32_t crc = RecordCrc(&r, sizeof(r));
  if (crc != r.crc) {
    c.problems.push_back(CrcError(r.crc, crc));
    return finish();
  }
  if (r.state != InodeState::kLive && r.state != InodeState::kOrphan) {
    c.problems.push_back(r.state == InodeState::kFree
                             ? std::string("state is free but the record is not zero")
                             : absl::StrCat("invalid state ", static_cast<int>(r.state)));
    return finish();
  }
  if (TypeBits(r.type) == 0) {
    c.problems.push_back(absl::StrCat("invalid type ", static_cast<int>(r.type)));
    return finish();
  }
  c.kind = r.state == InodeState::kLive ? SlotKind::kLive : SlotKind::kOrphan;
  c.type = r.type;
  c.extents_sound = true;
  if ((r.mode & S_IFMT) != TypeBits(r.type)) {
    c.problems.push_back(
        absl::StrFormat("mode 0%o has file-type bits that disagree with its type (%s)",
                        r.mode, InodeTypeName(r.type)));
  }
  const bool device = r.type == InodeType::kCharDevice || r.type == InodeType::kBlockDevice;
  if (r.rdev != 0 && !device) {
    c.problems.push_back(
        absl::StrCat("a ", InodeTypeName(r.type), " has device number ", r.rdev));
  }
  switch (r.type) {
    case InodeType::kRegular:
      CheckFileExtents(r, sb, c);
      break;
    case InodeType::kSymlink:
      CheckSymlink(r, sb, pool, c);
      break;
    case InodeType::kDirectory:
      // A directory's size is not used (stat shows one block), and is not judged.
      if (r.extent_count != 0) {
        c.problems.push_back(absl::StrCat("directory has extent_count ", r.extent_count,
                                          "; directories own no data blocks"));
        c.extents_sound = false;
      }
      break;
    default:  // FIFOs, sockets, devices: inert (format.h)
      if (r.extent_count != 0 || r.size != 0) {
        c.problems.push_back(absl::StrCat("a ", InodeTypeName(r.type), " has extent_count ",
                                          r.extent_count, " and size ", r.size,
                                          "; it holds no data"));
        if (r.extent_count != 0) c.extents_sound = false;
      }
      break;
  }
  return finish();
}

std::string NameError(std::string_view name) {
  if (name.empty() || name.size() > format::kMaxNameLength) {
    return absl::StrCat("name length ", name.size(), " is not within 1..",
                        format::kMaxNameLength);
  }
  if (name == "." || name == "..") return "the name is \".\" or \"..\"";
  if (name.find('/') != std::string_view::npos) return "the name contains '/'";
  if (name.find('\0') != std::string_view::npos) return "the name contains a NUL byte";
  return "";
}

std::string DirentRecordError(const format::DirentRecord& d, uint64_t inode_count) {
  const uint32_t crc = RecordCrc(&d, sizeof(d));
  if (crc != d.crc) return CrcError(d.crc, crc);
  if (d.in_use != 1) return absl::StrCat("in_use is ", d.in_use, ", expected 1");
  if (d.name_length == 0 || d.name_length > format::kMaxNameLength) {
    return absl::StrCat("name_length ", d.name_length, " is not within 1..",
                        format::kMaxNameLength);
  }
  if (std::string e = NameError(std::string_view(d.name, d.name_length)); !e.empty()) {
    return e;
  }
  if (!AllZero(d.name + d.name_length, sizeof(d.name) - d.name_length)) {
    return "bytes after the name are not zero";
  }
  if (d.parent == 0 || d.parent >= inode_count || d.child == 0 || d.child >= inode_count) {
    return absl::StrCat("parent ", d.parent, " or child ", d.child,
                        " is not an inode number of this pool (1..", inode_count - 1, ")");
  }
  return "";
}

DirentLinkCheck CheckDirentLink(const format::DirentRecord& d, SlotKind parent_kind,
                                InodeType parent_type, SlotKind child_kind,
                                InodeType child_type) {
  using Kind = DirentLinkCheck::Kind;
  if (d.child == format::kRootInode) {
    return {Kind::kDroppable, "it names the root directory, which has no entry"};
  }
  if (parent_kind == SlotKind::kFree) {
    return {Kind::kDroppable, absl::StrCat("its directory, inode ", d.parent, ", is free")};
  }
  if (child_kind == SlotKind::kFree) {
    return {Kind::kDroppable, absl::StrCat("it names inode ", d.child, ", which is free")};
  }
  if (parent_kind == SlotKind::kUnusable || child_kind == SlotKind::kUnusable) {
    return {Kind::kBroken,
            absl::StrCat("its ", parent_kind == SlotKind::kUnusable ? "directory" : "child",
                         " inode is corrupt")};
  }
  if (parent_kind != SlotKind::kLive || parent_type != InodeType::kDirectory) {
    return {Kind::kBroken,
            absl::StrCat("its parent, inode ", d.parent, ", is not a live directory")};
  }
  if (child_kind != SlotKind::kLive) {
    return {Kind::kBroken,
            absl::StrCat("it names inode ", d.child, ", an orphan (unlinked) inode")};
  }
  if (d.type != child_type) {
    return {Kind::kWrongType, absl::StrCat("records type ", static_cast<int>(d.type),
                                           " but inode ", d.child, " is a ",
                                           InodeTypeName(child_type))};
  }
  return {};
}

}  // namespace walfs::core
