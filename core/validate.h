// The one definition of a valid on-media record (core/format.h), shared by pool open
// (core/pool_open.cc) and fsck (core/fsck.h), as the journal's slot parser is
// (ParseJournalSlot, core/journal.h).
//
// Each check judges one record, alone or against the geometry it lives in, and says
// what is wrong in a sentence with the numbers that show it; it never decides what to
// do about it. Pool::Open refuses the pool with the first problem (prefixed with where
// the record is); fsck reports every problem as an FsckProblem, and decides what can be
// repaired. So both name the same damage the same way.
//
// Cross-record checks stay with their callers, where each keeps the tables it needs:
// extents shared by two inodes (Open reserves them in its allocator, fsck sorts every
// extent of the pool, trusted or not), extents in PoolState's uninitialised range (fsck
// reports and repairs it as a state record problem, over merged runs), duplicate names,
// directories with two names, reachability from the root and link counts (Open walks
// its in-memory tree and stops at the first problem; fsck lists every problem and
// repairs some). Sharing them would make Open build fsck's tables, or fsck stop early.
//
// Every record is untrusted input: nothing here reads outside the record but what the
// geometry (validated first) bounds.
#ifndef WALFS_CORE_VALIDATE_H_
#define WALFS_CORE_VALIDATE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/format.h"

namespace walfs::core {

// Empty when `sb` is a valid superblock for a region of `region_size` bytes; else why
// not. Checks magic, version, crc, record sizes, the journal's placement, the capacity
// against the region, and that every table offset and count is what mkfs lays out for
// that capacity, segment size and inode count (ComputeLayout), which bounds every area
// inside the capacity.
std::string SuperblockError(const format::Superblock& sb, uint64_t region_size);

// Empty when `state` (crc included) is valid for the pool `sb` (valid) describes in a
// region of `region_size` bytes; else why not. Every field is checked against the
// geometry, and the data area it gives must fit in the region.
std::string PoolStateError(const format::PoolState& state, const format::Superblock& sb,
                           uint64_t region_size);

// What an inode slot holds, as far as anything else may rely on it.
enum class SlotKind : uint8_t {
  kFree,      // all zero
  kUnusable,  // bad crc, state or type: no field of the record can be trusted
  kLive,
  kOrphan,
};

struct InodeCheck {
  SlotKind kind = SlotKind::kFree;
  format::InodeType type = format::InodeType::kNone;  // kLive, kOrphan: the record's
  // What is wrong, most fundamental first; empty iff the slot is valid.
  std::vector<std::string> problems;
  // The record's extents (and an out-of-line symlink's target block) each lie in the
  // data area, are as many as its type allows, and hold its size. False for an unusable
  // record. A file whose extents are not sound may have data in blocks none names.
  bool extents_sound = true;
};

// The extent is non-empty and lies within a data area of `data_blocks` blocks.
bool ExtentInDataArea(const format::Extent& x, uint64_t data_blocks);

// Judges inode slot `ino` (< sb.inode_count, below PoolState::inode_high) whose
// kInodeSize bytes are at `raw` (the home copy, or a journal image over it). `sb` is the
// pool's current geometry (CurrentGeometry) and `pool` its bytes, whose data area the
// caller has checked fits in the region (PoolStateError): a live out-of-line symlink's
// target is read there. Slot 0 is reserved (valid only when zero); slot 1 must be a live
// directory. Everything but how the record relates to other records is checked.
InodeCheck CheckInodeSlot(uint64_t ino, const char* raw, const format::Superblock& sb,
                          const char* pool);

// Empty when `name` is one a directory entry may have (1..kMaxNameLength bytes, no '/',
// no NUL, not "." or ".."); else why not. ValidateName (core/names.h) applies it to
// names the file system is given.
std::string NameError(std::string_view name);

// Empty when dirent record `d` (in use: not all zero) is valid on its own in a pool of
// `inode_count` inodes: crc, in_use, name and the zero bytes after it, parent and child
// inode numbers in range. Else why not; then nothing in the entry can be trusted.
std::string DirentRecordError(const format::DirentRecord& d, uint64_t inode_count);

// How a directory entry (valid on its own) relates to the inodes it joins.
struct DirentLinkCheck {
  enum class Kind : uint8_t {
    kOk,
    // It names nothing real (the root, a free directory, a free child): dropping it
    // loses no file and no file's last name.
    kDroppable,
    // Its parent is not a live directory (or is unusable), or its child is an orphan or
    // unusable: the entry cannot be part of the tree.
    kBroken,
    // Only its recorded type differs from the child's.
    kWrongType,
  };
  Kind kind = Kind::kOk;
  std::string problem;  // empty iff kOk
};

// `parent` and `child` are what the inode table holds for d.parent and d.child (their
// CheckInodeSlot kind and type).
DirentLinkCheck CheckDirentLink(const format::DirentRecord& d, SlotKind parent_kind,
                                format::InodeType parent_type, SlotKind child_kind,
                                format::InodeType child_type);

// The S_IFMT bits of an inode type (0 for kNone or an invalid value).
uint32_t TypeBits(format::InodeType t);

// "regular file", "directory", ... ("none" for kNone or an invalid value).
const char* InodeTypeName(format::InodeType type);

}  // namespace walfs::core

#endif  // WALFS_CORE_VALIDATE_H_
