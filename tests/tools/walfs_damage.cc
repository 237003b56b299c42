// walfs_damage: applies one named kind of damage to an unmounted pool file, for the
// damaged-pool tests. Test-only: it is never installed.
//
//   walfs_damage POOL KIND [ARG]
//
// It locates records through core/format.h and, where the damage must get past the
// record CRCs to reach the check that should catch it (overlapping extents, wrong link
// counts, a directory cycle, ...), writes a correct CRC over the damaged record. KIND is
// one of the names listed by `walfs_damage --list`. The pool is expected to hold at
// least two regular files with data and, for `dir-cycle`, a directory with a
// subdirectory; the tool says so when it does not find what a kind needs.
//
// Exit status: 0 damage applied, 1 the pool lacks what the kind needs or I/O failed,
// 2 usage.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/crc32c.h"
#include "core/format.h"
#include "core/journal.h"

namespace walfs::testtools {
namespace {

namespace format = core::format;

struct Pool {
  char* base = nullptr;
  uint64_t size = 0;
  format::Superblock sb{};

  char* At(uint64_t off) const { return base + off; }
  uint64_t InodeOffset(uint64_t ino) const {
    return sb.inode_table_offset + ino * format::kInodeSize;
  }
  uint64_t DirentOffset(uint64_t slot) const {
    return sb.dirent_table_offset + slot * format::kDirentSize;
  }
  format::InodeRecord* Inode(uint64_t ino) const {
    return reinterpret_cast<format::InodeRecord*>(At(InodeOffset(ino)));
  }
  format::DirentRecord* Dirent(uint64_t slot) const {
    return reinterpret_cast<format::DirentRecord*>(At(DirentOffset(slot)));
  }
};

bool Fail(const std::string& why) {
  std::fprintf(stderr, "walfs_damage: %s\n", why.c_str());
  return false;
}

// Each journal slot keeps the newest image of the records its transaction named, and
// every open replays the newest: a damaged record a slot names is copied into that slot's
// image too (with the transaction's CRC redone), or the next open would quietly undo the
// damage. A record whose own CRC is now wrong cannot be: the journal's parser refuses a
// slot holding such an image, which would report the journal instead of the record. The
// journal is emptied instead, both slots (emptying only the newest would let the older
// one replay older images): the pools damaged here were closed cleanly, so their home
// records hold everything the journal does.
void SyncJournal(const Pool& p, uint64_t offset, uint32_t length) {
  const char* record = p.At(offset);
  uint32_t record_crc;
  std::memcpy(&record_crc, record, sizeof(record_crc));
  if (!std::all_of(record, record + length, [](char c) { return c == 0; }) &&
      core::RecordCrc(record, length) != record_crc) {
    for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
      std::memset(p.At(core::JournalSlotOffset(p.sb, slot)), 0, sizeof(format::JournalHeader));
    }
    return;
  }
  for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
    char* j = p.At(core::JournalSlotOffset(p.sb, slot));
    format::JournalHeader h;
    std::memcpy(&h, j, sizeof(h));
    if (h.magic != format::kJournalMagic ||
        h.payload_bytes > format::kJournalSlotSize - sizeof(h)) {
      continue;
    }
    const uint32_t stored = h.crc;
    h.crc = 0;
    std::memcpy(j, &h, sizeof(h));
    if (core::Crc32c(0, j, sizeof(h) + h.payload_bytes) != stored) {
      h.crc = stored;
      std::memcpy(j, &h, sizeof(h));
      continue;  // torn: recovery ignores it
    }
    const uint64_t end = sizeof(h) + h.payload_bytes;
    uint64_t pos = sizeof(h);
    for (uint32_t i = 0; i < h.entry_count && pos + sizeof(format::JournalEntry) <= end; ++i) {
      format::JournalEntry e;
      std::memcpy(&e, j + pos, sizeof(e));
      pos += sizeof(e);
      if (e.target_offset == offset && e.length == length) {
        std::memcpy(j + pos, p.At(offset), length);
      }
      pos += format::AlignUp(e.length, 8);
    }
    h.crc = core::Crc32c(0, j, sizeof(h) + h.payload_bytes);
    std::memcpy(j, &h, sizeof(h));
  }
}

void SealInode(const Pool& p, format::InodeRecord* r) {
  r->crc = core::RecordCrc(r, sizeof(*r));
  SyncJournal(p, static_cast<uint64_t>(reinterpret_cast<char*>(r) - p.base), sizeof(*r));
}
void SealDirent(const Pool& p, format::DirentRecord* d) {
  d->crc = core::RecordCrc(d, sizeof(*d));
  SyncJournal(p, static_cast<uint64_t>(reinterpret_cast<char*>(d) - p.base), sizeof(*d));
}

// Live regular files that own data blocks, lowest inode number first.
std::vector<uint64_t> FilesWithData(const Pool& p) {
  std::vector<uint64_t> out;
  for (uint64_t ino = 2; ino < p.sb.inode_count; ++ino) {
    const format::InodeRecord* r = p.Inode(ino);
    if (r->state == format::InodeState::kLive && r->type == format::InodeType::kRegular &&
        r->extent_count > 0 && r->extent_count < format::kMaxExtents) {
      out.push_back(ino);
    }
  }
  return out;
}

// The dirent slot naming `child`, if any.
std::optional<uint64_t> SlotNaming(const Pool& p, uint64_t child) {
  for (uint64_t slot = 0; slot < p.sb.dirent_count; ++slot) {
    const format::DirentRecord* d = p.Dirent(slot);
    if (d->in_use == 1 && d->child == child) return slot;
  }
  return std::nullopt;
}

bool SuperblockChecksum(Pool& p, int copy) {
  // A byte of the reserved area: the fields stay plausible, only the CRC disagrees.
  p.At(format::kSuperblockOffset[copy])[offsetof(format::Superblock, reserved) + 7] ^= 0x5a;
  return true;
}

bool BothSuperblocks(Pool& p) { return SuperblockChecksum(p, 0) && SuperblockChecksum(p, 1); }

// A transaction with a valid CRC and a sequence above any the pool has reached (so
// recovery must believe it is the newest committed one) whose one entry targets
// superblock B instead of a metadata record. In its own slot (1000 % 2).
bool JournalGarbage(Pool& p) {
  char* j = p.At(core::JournalSlotOffset(p.sb, 1000 % format::kJournalSlots));
  format::JournalHeader h{};
  h.magic = format::kJournalMagic;
  h.sequence = 1000;
  h.entry_count = 1;
  h.payload_bytes = sizeof(format::JournalEntry) + format::kInodeSize;
  format::JournalEntry e{format::kSuperblockOffset[1], format::kInodeSize, 0};
  std::memcpy(j + sizeof(h), &e, sizeof(e));
  std::memset(j + sizeof(h) + sizeof(e), 0xa5, format::kInodeSize);
  std::memcpy(j, &h, sizeof(h));
  h.crc = core::Crc32c(0, j, sizeof(h) + h.payload_bytes);
  std::memcpy(j, &h, sizeof(h));
  return true;
}

// Bytes that fail the journal CRC: what a transaction torn before its commit point
// looks like. In the slot the next transaction would be written to (not the newest one).
bool JournalTorn(Pool& p) {
  const core::JournalContents journal = core::ReadJournal(p.base, p.sb);
  const uint64_t next = journal.newest < 0 ? 1 : 1 - static_cast<uint64_t>(journal.newest);
  char* j = p.At(core::JournalSlotOffset(p.sb, next));
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (uint64_t i = 0; i < 4096; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    j[i] = static_cast<char>(x);
  }
  std::memcpy(j, &format::kJournalMagic, sizeof(format::kJournalMagic));
  const uint32_t payload = 1024;  // plausible, so the CRC is what rejects it
  std::memcpy(j + offsetof(format::JournalHeader, payload_bytes), &payload, sizeof(payload));
  return true;
}

format::PoolState* State(Pool& p) {
  return reinterpret_cast<format::PoolState*>(p.At(format::kStateOffset));
}

// The data area's current size: the state record's (a grown pool's is larger than the
// superblock's, core/format.h), or the superblock's when the record is damaged.
uint64_t DataBlocks(Pool& p) {
  const format::PoolState* s = State(p);
  return core::RecordCrc(s, sizeof(*s)) == s->crc && s->data_blocks >= p.sb.data_blocks
             ? s->data_blocks
             : p.sb.data_blocks;
}

bool ExtentOutside(Pool& p) {
  const auto files = FilesWithData(p);
  if (files.empty()) return Fail("no regular file with data in the pool");
  format::InodeRecord* r = p.Inode(files.back());
  r->extents[0].block = DataBlocks(p) + 16;
  SealInode(p, r);
  return true;
}

// A second file also claims the first file's first extent (as an extra extent, so its
// own blocks and size stay consistent and only the overlap is wrong).
bool OverlappingExtents(Pool& p) {
  const auto files = FilesWithData(p);
  if (files.size() < 2) return Fail("need two regular files with data");
  const format::InodeRecord* a = p.Inode(files[0]);
  format::InodeRecord* b = p.Inode(files[1]);
  b->extents[b->extent_count++] = a->extents[0];
  SealInode(p, b);
  return true;
}

bool WrongLinkCount(Pool& p) {
  const auto files = FilesWithData(p);
  if (files.empty()) return Fail("no regular file with data in the pool");
  format::InodeRecord* r = p.Inode(files[0]);
  r->nlink += 4;
  SealInode(p, r);
  return true;
}

// A directory D (child of the root) with a subdirectory S: D's entry is moved into S,
// so D and S are each other's parent and the root reaches neither.
bool DirectoryCycle(Pool& p) {
  for (uint64_t slot = 0; slot < p.sb.dirent_count; ++slot) {
    format::DirentRecord* d = p.Dirent(slot);  // names S inside D
    if (d->in_use != 1 || d->type != format::InodeType::kDirectory ||
        d->parent == format::kRootInode) {
      continue;
    }
    const auto dslot = SlotNaming(p, d->parent);
    if (!dslot) continue;
    format::DirentRecord* dd = p.Dirent(*dslot);  // names D
    if (dd->parent != format::kRootInode) continue;
    dd->parent = d->child;
    SealDirent(p, dd);
    return true;
  }
  return Fail("no directory with a subdirectory below the root");
}

// Non-zero bytes in a data block no inode owns.
bool FreeSpaceNotZero(Pool& p) {
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (uint64_t ino = 1; ino < p.sb.inode_count; ++ino) {
    const format::InodeRecord* r = p.Inode(ino);
    if (r->type != format::InodeType::kRegular) continue;
    for (uint32_t i = 0; i < std::min(r->extent_count, format::kMaxExtents); ++i) {
      used.emplace_back(r->extents[i].block, r->extents[i].block + r->extents[i].count);
    }
  }
  std::sort(used.begin(), used.end());
  uint64_t cursor = 0;
  for (const auto& [begin, end] : used) {
    if (begin > cursor) break;
    cursor = std::max(cursor, end);
  }
  if (cursor >= DataBlocks(p)) return Fail("no free data block");
  const uint64_t off = p.sb.data_offset + cursor * format::kBlockSize + 100;
  std::memcpy(p.At(off), "stray bytes in free space", 25);
  return true;
}

// The newest committed transaction no longer says free space is zero, as a walfs
// before format::kJournalFlagFreeSpaceZero left it (its crc recomputed).
bool ClearFreeSpaceFlag(Pool& p) {
  const core::JournalContents journal = core::ReadJournal(p.base, p.sb);
  if (journal.committed() == nullptr) return Fail("no committed journal transaction");
  char* slot = p.At(core::JournalSlotOffset(p.sb, static_cast<uint64_t>(journal.newest)));
  format::JournalHeader h;
  std::memcpy(&h, slot, sizeof(h));
  h.flags &= ~format::kJournalFlagFreeSpaceZero;
  h.crc = 0;
  h.crc = core::Crc32c(core::Crc32c(0, &h, sizeof(h)), slot + sizeof(h), h.payload_bytes);
  std::memcpy(slot, &h, sizeof(h));
  return true;
}


// The state record fails its checksum (the journal's image too, if it names it).
// Records planted in slots a pool has not used yet (above the state record's marks,
// format.h) would never be read: raise the marks over them, as if the pool had used
// those slots, so the damage is where the file system and fsck look.
uint64_t UsedHigh(const Pool& p, uint64_t offset, uint64_t count, uint64_t size) {
  for (uint64_t i = count; i-- > 0;) {
    const char* r = p.At(offset + i * size);
    if (std::any_of(r, r + size, [](char c) { return c != 0; })) return i + 1;
  }
  return 0;
}
bool CoverPlanted(Pool& p) {
  format::PoolState* s = State(p);
  if (core::RecordCrc(s, sizeof(*s)) != s->crc) return Fail("the state record is damaged");
  s->inode_high = std::max(s->inode_high, UsedHigh(p, p.sb.inode_table_offset,
                                                   p.sb.inode_count, format::kInodeSize));
  s->dirent_high = std::max(s->dirent_high, UsedHigh(p, p.sb.dirent_table_offset,
                                                     p.sb.dirent_count, format::kDirentSize));
  s->crc = core::RecordCrc(s, sizeof(*s));
  SyncJournal(p, format::kStateOffset, sizeof(format::PoolState));
  return true;
}

bool StateChecksum(Pool& p) {
  State(p)->inode_high ^= 1;
  SyncJournal(p, format::kStateOffset, sizeof(format::PoolState));
  return true;
}

// A well-formed state record whose uninitialised range covers the files' blocks: their
// data would be zeroed as never-allocated space.
bool StateUninitOwned(Pool& p) {
  format::PoolState* s = State(p);
  s->uninit_begin = 0;
  s->uninit_end = s->data_blocks;
  s->crc = core::RecordCrc(s, sizeof(*s));
  SyncJournal(p, format::kStateOffset, sizeof(format::PoolState));
  return true;
}

// A well-formed state record whose data area reaches past the end of the file, as a
// grown pool's does when its file is cut back to the old size by hand.
bool StateSize(Pool& p) {
  format::PoolState* s = State(p);
  s->data_blocks = (p.size - p.sb.data_offset) / format::kBlockSize + 1;
  s->crc = core::RecordCrc(s, sizeof(*s));
  SyncJournal(p, format::kStateOffset, sizeof(format::PoolState));
  return true;
}

// A file whose only name is gone: live, nlink 1, reachable from nowhere.
bool LostFile(Pool& p) {
  const auto files = FilesWithData(p);
  for (uint64_t ino : files) {
    if (p.Inode(ino)->nlink != 1) continue;
    const auto slot = SlotNaming(p, ino);
    if (!slot) continue;
    std::memset(p.Dirent(*slot), 0, format::kDirentSize);
    SyncJournal(p, p.DirentOffset(*slot), format::kDirentSize);
    return true;
  }
  return Fail("no regular file with exactly one name");
}

bool InodeChecksum(Pool& p) {
  const auto files = FilesWithData(p);
  if (files.empty()) return Fail("no regular file with data in the pool");
  p.Inode(files[0])->size ^= 1;
  SyncJournal(p, p.InodeOffset(files[0]), format::kInodeSize);
  return true;
}

// A dirent naming an inode slot that is free.
bool DirentToFreeInode(Pool& p) {
  uint64_t free_ino = 0;
  for (uint64_t ino = p.sb.inode_count - 1; ino >= 2 && free_ino == 0; --ino) {
    if (p.Inode(ino)->state == format::InodeState::kFree) free_ino = ino;
  }
  for (uint64_t slot = 0; slot < p.sb.dirent_count && free_ino != 0; ++slot) {
    format::DirentRecord* d = p.Dirent(slot);
    if (d->in_use == 1) continue;
    d->in_use = 1;
    d->type = format::InodeType::kRegular;
    std::memcpy(d->name, "ghost", 5);
    d->name_length = 5;
    d->parent = format::kRootInode;
    d->child = free_ino;
    SealDirent(p, d);
    return CoverPlanted(p);
  }
  return Fail("no free inode or dirent slot");
}

// Where `symlink-parent`'s symlink points (its ARG).
std::string g_arg = "/tmp";

// A crafted pool for walfsctl export --salvage: "/evil" names a symlink (to g_arg) whose
// record fails its checksum, so only a salvage lists it, and an entry whose parent is
// that symlink names a regular file "pwned" holding "escaped\n". A second "/evil" in the
// root names a corrupt directory holding "pwned" too, so the listing itself can be right
// (only directories have children) while the exported "evil" is still the symlink. An
// export that opens "evil/pwned" by path writes the file into g_arg. Works on a fresh
// pool (it takes the last data block, free there).
bool SymlinkParent(Pool& p) {
  std::vector<uint64_t> free_inodes;
  for (uint64_t ino = p.sb.inode_count - 1; ino >= 2 && free_inodes.size() < 3; --ino) {
    if (p.Inode(ino)->state == format::InodeState::kFree) free_inodes.push_back(ino);
  }
  std::vector<uint64_t> free_slots;
  for (uint64_t slot = 0; slot < p.sb.dirent_count && free_slots.size() < 4; ++slot) {
    if (p.Dirent(slot)->in_use == 0) free_slots.push_back(slot);
  }
  if (free_inodes.size() < 3 || free_slots.size() < 4) return Fail("no free inodes or dirents");
  if (g_arg.empty() || g_arg.size() > format::kMaxSymlinkTarget) return Fail("bad target");
  const uint64_t link_ino = free_inodes[0], file_ino = free_inodes[1], dir_ino = free_inodes[2];
  const uint64_t block = DataBlocks(p) - 1;
  static constexpr char kContent[] = "escaped\n";
  std::memcpy(p.At(p.sb.data_offset + block * format::kBlockSize), kContent,
              sizeof(kContent) - 1);

  format::InodeRecord* l = p.Inode(link_ino);
  std::memset(l, 0, sizeof(*l));
  l->state = format::InodeState::kLive;
  l->type = format::InodeType::kSymlink;
  l->generation = 1;
  l->mode = S_IFLNK | 0777;
  l->nlink = 1;
  l->size = g_arg.size();
  std::memcpy(l->extents, g_arg.data(), g_arg.size());
  SealInode(p, l);
  l->crc ^= 1;  // corrupt: listed only by a salvage

  format::InodeRecord* f = p.Inode(file_ino);
  std::memset(f, 0, sizeof(*f));
  f->state = format::InodeState::kLive;
  f->type = format::InodeType::kRegular;
  f->generation = 1;
  f->mode = S_IFREG | 0644;
  f->nlink = 1;
  f->size = sizeof(kContent) - 1;
  f->extent_count = 1;
  f->extents[0] = {block, 1};
  SealInode(p, f);

  format::InodeRecord* d = p.Inode(dir_ino);
  std::memset(d, 0, sizeof(*d));
  d->state = format::InodeState::kLive;
  d->type = format::InodeType::kDirectory;
  d->generation = 1;
  d->mode = S_IFDIR | 0755;
  d->nlink = 2;
  SealInode(p, d);
  d->crc ^= 1;  // corrupt: listed only by a salvage

  auto name = [&](uint64_t slot, uint64_t parent, uint64_t child, format::InodeType type,
                  const char* n) {
    format::DirentRecord* d = p.Dirent(slot);
    std::memset(d, 0, sizeof(*d));
    d->in_use = 1;
    d->type = type;
    d->name_length = static_cast<uint16_t>(std::strlen(n));
    d->parent = parent;
    d->child = child;
    std::memcpy(d->name, n, d->name_length);
    SealDirent(p, d);
  };
  // In this order fsck lists the symlink "/evil" ahead of the directory "/evil".
  name(free_slots[0], format::kRootInode, dir_ino, format::InodeType::kDirectory, "evil");
  name(free_slots[1], dir_ino, file_ino, format::InodeType::kRegular, "pwned");
  name(free_slots[2], format::kRootInode, link_ino, format::InodeType::kSymlink, "evil");
  name(free_slots[3], link_ino, file_ino, format::InodeType::kRegular, "pwned");
  return CoverPlanted(p);
}

struct Kind {
  const char* name;
  const char* what;
  std::function<bool(Pool&)> apply;
};

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind> kinds = {
      {"sb-a-crc", "superblock A's checksum is wrong",
       [](Pool& p) { return SuperblockChecksum(p, 0); }},
      {"sb-b-crc", "superblock B's checksum is wrong",
       [](Pool& p) { return SuperblockChecksum(p, 1); }},
      {"sb-both", "both superblocks' checksums are wrong", BothSuperblocks},
      {"journal-garbage", "a committed journal transaction targets a superblock", JournalGarbage},
      {"journal-torn", "the journal holds bytes that fail its CRC", JournalTorn},
      {"extent-outside", "a file's extent lies past the data area", ExtentOutside},
      {"overlap", "two files claim the same blocks", OverlappingExtents},
      {"nlink", "a file's link count is 4 too high", WrongLinkCount},
      {"dir-cycle", "two directories are each other's parent", DirectoryCycle},
      {"free-space", "a free data block is not zero", FreeSpaceNotZero},
      {"untrusted-free-space",
       "the journal does not say free space is zero, as a walfs before the flag leaves a "
       "pool (not damage: the next mount checks free space before use)",
       ClearFreeSpaceFlag},
      {"free-space-untrusted",
       "a free data block is not zero, and the journal does not say free space is zero "
       "(a pool an older walfs wrote)",
       [](Pool& p) { return FreeSpaceNotZero(p) && ClearFreeSpaceFlag(p); }},
      {"state-crc", "the state record fails its checksum", StateChecksum},
      {"state-uninit", "the state record's uninitialised range covers the files",
       StateUninitOwned},
      {"state-size", "the state record's data area reaches past the end of the file",
       StateSize},
      {"lost-file", "a file's only directory entry is gone", LostFile},
      {"inode-crc", "a file's inode record fails its checksum", InodeChecksum},
      {"dirent-free-inode", "an entry names a free inode", DirentToFreeInode},
      {"truncated", "the pool file is cut to half its size", nullptr},
      {"symlink-parent", "a corrupt symlink (to ARG) is named as a file's directory",
       SymlinkParent},
  };
  return kinds;
}

int Run(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("Usage: walfs_damage POOL KIND\n"
                "Damages an unmounted pool one named way, for tests; --list names the kinds.\n");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Kind& k : Kinds()) std::printf("%-18s %s\n", k.name, k.what);
    return 0;
  }
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: walfs_damage POOL KIND [ARG]   (walfs_damage --list)\n");
    return 2;
  }
  if (argc == 4) g_arg = argv[3];
  const std::string path = argv[1], kind_name = argv[2];
  auto kind = std::find_if(Kinds().begin(), Kinds().end(),
                           [&](const Kind& k) { return kind_name == k.name; });
  if (kind == Kinds().end()) {
    std::fprintf(stderr, "walfs_damage: unknown kind %s (see --list)\n", kind_name.c_str());
    return 2;
  }
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "walfs_damage: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(2 * format::kBlockSize)) {
    std::fprintf(stderr, "walfs_damage: %s is too small to be a pool\n", path.c_str());
    close(fd);
    return 1;
  }
  if (kind->apply == nullptr) {  // truncated
    const int rc = ftruncate(fd, st.st_size / 2 / format::kBlockSize * format::kBlockSize);
    close(fd);
    return rc == 0 ? 0 : 1;
  }
  Pool p;
  p.size = static_cast<uint64_t>(st.st_size);
  void* m = mmap(nullptr, p.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "walfs_damage: mmap %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  p.base = static_cast<char*>(m);
  std::memcpy(&p.sb, p.base, sizeof(p.sb));
  bool ok = p.sb.magic == format::kSuperblockMagic && p.sb.capacity <= p.size
                ? kind->apply(p)
                : Fail(path + " has no usable superblock A");
  ok = msync(m, p.size, MS_SYNC) == 0 && ok;
  munmap(m, p.size);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace walfs::testtools

int main(int argc, char** argv) { return walfs::testtools::Run(argc, argv); }
