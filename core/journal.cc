// Journal: redo log of whole metadata records.
#include "core/journal.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/crc32c.h"

namespace walfs::core {
namespace {

uint64_t InodeOffset(const format::Superblock& sb, uint64_t ino) {
  return sb.inode_table_offset + ino * format::kInodeSize;
}
uint64_t DirentOffset(const format::Superblock& sb, uint64_t slot) {
  return sb.dirent_table_offset + slot * format::kDirentSize;
}

// Empty when [off, off + len) is exactly one record of one of the metadata tables (slot 0
// of the inode table excepted: it is reserved), or the state record; else why not.
std::string TargetError(const format::Superblock& sb, uint64_t off, uint64_t len) {
  if (off == format::kStateOffset) {
    if (len != sizeof(format::PoolState)) {
      return absl::StrCat("length ", len, " at the state record is not its size");
    }
    return "";
  }
  const uint64_t inode_end = sb.inode_table_offset + sb.inode_count * format::kInodeSize;
  const uint64_t dirent_end = sb.dirent_table_offset + sb.dirent_count * format::kDirentSize;
  if (off >= sb.inode_table_offset && off < inode_end) {
    if ((off - sb.inode_table_offset) % format::kInodeSize != 0 || len != format::kInodeSize) {
      return absl::StrCat("offset ", off, " length ", len, " is not one whole inode record");
    }
    if (off == sb.inode_table_offset) return "it targets the reserved inode slot 0";
    return "";
  }
  if (off >= sb.dirent_table_offset && off < dirent_end) {
    if ((off - sb.dirent_table_offset) % format::kDirentSize != 0 || len != format::kDirentSize) {
      return absl::StrCat("offset ", off, " length ", len, " is not one whole dirent record");
    }
    return "";
  }
  return absl::StrCat("offset ", off, " lies outside the inode and dirent tables");
}

bool IsAllZero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::all_of(b, b + n, [](unsigned char c) { return c == 0; });
}

}  // namespace

void Transaction::Put(uint64_t offset, const void* record, size_t size) {
  for (auto& e : entries_) {
    if (e.offset == offset) {
      e.bytes.assign(static_cast<const char*>(record), size);
      return;
    }
  }
  entries_.push_back({offset, std::string(static_cast<const char*>(record), size)});
}

void Transaction::PutInode(const format::Superblock& sb, uint64_t ino,
                           format::InodeRecord rec) {
  rec.crc = RecordCrc(&rec, sizeof(rec));
  Put(InodeOffset(sb, ino), &rec, sizeof(rec));
}

void Transaction::PutDirent(const format::Superblock& sb, uint64_t slot,
                            format::DirentRecord rec) {
  rec.crc = RecordCrc(&rec, sizeof(rec));
  Put(DirentOffset(sb, slot), &rec, sizeof(rec));
}

void Transaction::PutState(format::PoolState state) {
  state.crc = RecordCrc(&state, sizeof(state));
  Put(format::kStateOffset, &state, sizeof(state));
}

void Transaction::FreeInode(const format::Superblock& sb, uint64_t ino) {
  const format::InodeRecord zero{};
  Put(InodeOffset(sb, ino), &zero, sizeof(zero));
}

void Transaction::FreeDirent(const format::Superblock& sb, uint64_t slot) {
  const format::DirentRecord zero{};
  Put(DirentOffset(sb, slot), &zero, sizeof(zero));
}

uint64_t JournalSlotOffset(const format::Superblock& sb, uint64_t slot) {
  return sb.journal_offset + slot * (sb.journal_size / format::kJournalSlots);
}

JournalSlot ParseJournalSlot(const char* pool, const format::Superblock& sb, uint64_t slot) {
  using State = JournalSlot::State;
  JournalSlot result;
  const uint64_t slot_size = sb.journal_size / format::kJournalSlots;
  const char* base = pool + JournalSlotOffset(sb, slot);
  format::JournalHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (IsAllZero(&h, sizeof(h))) return result;
  result.sequence = h.sequence;
  result.flags = h.flags;
  if (h.magic != format::kJournalMagic) {
    result.state = State::kTorn;
    result.error = "the header has no journal magic";
    return result;
  }
  if (h.payload_bytes > slot_size - sizeof(h)) {
    result.state = State::kTorn;
    result.error = absl::StrCat("the header claims ", h.payload_bytes,
                                " payload bytes, more than the slot holds");
    return result;
  }
  const uint32_t stored_crc = h.crc;
  h.crc = 0;
  if (Crc32c(Crc32c(0, &h, sizeof(h)), base + sizeof(h), h.payload_bytes) != stored_crc) {
    result.state = State::kTorn;
    result.error = absl::StrCat("transaction ", h.sequence, " has a bad crc");
    return result;
  }
  // The CRC matches, so this claims to be a transaction we wrote: all of it must be.
  result.state = State::kInvalid;
  if (h.sequence % format::kJournalSlots != slot) {
    result.error = absl::StrCat("transaction ", h.sequence, " does not belong in slot ", slot);
    return result;
  }
  const char* payload = base + sizeof(h);
  uint64_t pos = 0;
  for (uint32_t i = 0; i < h.entry_count; ++i) {
    if (h.payload_bytes - pos < sizeof(format::JournalEntry)) {
      result.error = absl::StrCat("entry ", i, " of ", h.entry_count,
                                  " starts past the payload's ", h.payload_bytes, " bytes");
      result.images.clear();
      return result;
    }
    format::JournalEntry je;
    std::memcpy(&je, payload + pos, sizeof(je));
    pos += sizeof(je);
    if (std::string t = TargetError(sb, je.target_offset, je.length); !t.empty()) {
      result.error = absl::StrCat("entry ", i, ": ", t);
    } else if (format::AlignUp(je.length, 8) > h.payload_bytes - pos) {
      result.error = absl::StrCat("entry ", i, " runs past the payload's ", h.payload_bytes,
                                  " bytes");
    } else if (std::any_of(result.images.begin(), result.images.end(),
                           [&](const auto& e) { return e.first == je.target_offset; })) {
      // Commit writes each record once per transaction; a second image would make
      // "the newest image" of that record ambiguous.
      result.error = absl::StrCat("entry ", i, " names offset ", je.target_offset,
                                  ", which an earlier entry names too");
    } else {
      const char* image = payload + pos;
      uint32_t stored;
      std::memcpy(&stored, image, sizeof(stored));
      const bool zero_ok = je.target_offset != format::kStateOffset;
      if (!(zero_ok && IsAllZero(image, je.length)) && RecordCrc(image, je.length) != stored) {
        result.error = absl::StrCat("entry ", i, " (offset ", je.target_offset,
                                    ") holds a record image with a bad crc");
      }
    }
    if (!result.error.empty()) {
      result.images.clear();
      return result;
    }
    result.images.emplace_back(je.target_offset, std::string(payload + pos, je.length));
    pos += format::AlignUp(je.length, 8);
  }
  if (pos != h.payload_bytes) {
    result.error = absl::StrCat("the payload has ", h.payload_bytes - pos,
                                " bytes after its last entry");
    result.images.clear();
    return result;
  }
  result.state = State::kValid;
  return result;
}

JournalContents ReadJournal(const char* pool, const format::Superblock& sb) {
  JournalContents j;
  for (uint64_t slot = 0; slot < format::kJournalSlots; ++slot) {
    j.slots[slot] = ParseJournalSlot(pool, sb, slot);
    const JournalSlot& s = j.slots[slot];
    if (s.state != JournalSlot::State::kValid && s.state != JournalSlot::State::kInvalid) {
      continue;
    }
    // Sequences of the two slots differ in parity once both are checked, and an
    // unchecked (kInvalid) slot is refused if it is the newest, so ties do not matter.
    if (j.newest < 0 || s.sequence > j.slots[j.newest].sequence) j.newest = static_cast<int>(slot);
  }
  return j;
}

void Journal::Build(const Transaction& txn, bool with_carried, uint32_t flags) {
  buffer_.assign(sizeof(format::JournalHeader), '\0');
  uint32_t count = 0;
  auto add = [&](uint64_t offset, const std::string& bytes) {
    format::JournalEntry je{};
    je.target_offset = offset;
    je.length = static_cast<uint32_t>(bytes.size());
    buffer_.append(reinterpret_cast<const char*>(&je), sizeof(je));
    buffer_.append(bytes);
    buffer_.append(format::AlignUp(bytes.size(), 8) - bytes.size(), '\0');
    ++count;
  };
  for (const auto& e : txn.entries_) add(e.offset, e.bytes);
  if (with_carried) {
    for (const auto& [offset, bytes] : carried_) {
      bool replaced = false;
      for (const auto& e : txn.entries_) replaced = replaced || e.offset == offset;
      if (!replaced) add(offset, bytes);
    }
  }
  format::JournalHeader h{};
  h.magic = format::kJournalMagic;
  h.sequence = sequence_;
  h.entry_count = count;
  h.flags = flags;
  h.payload_bytes = static_cast<uint32_t>(buffer_.size() - sizeof(format::JournalHeader));
  std::memcpy(buffer_.data(), &h, sizeof(h));
  h.crc = Crc32c(0, buffer_.data(), buffer_.size());
  std::memcpy(buffer_.data(), &h, sizeof(h));
}

void Journal::PersistCarried() {
  if (carried_.empty()) return;
  // One flush of their span: only the record tables lie between them, and every other
  // home image stored there was persisted already or is carried too.
  const uint64_t lo = carried_.begin()->first;
  const uint64_t hi = carried_.rbegin()->first + carried_.rbegin()->second.size();
  region_.Flush(lo, hi - lo);
  region_.Drain();
  // Forgotten even if the persist failed: health() then fails every later commit, and
  // the newest committed slot still holds them for recovery.
  carried_.clear();
}

absl::Status Journal::Sync() {
  if (absl::Status h = region_.health(); !h.ok()) return h;
  PersistCarried();
  return region_.health();
}

absl::Status Journal::Commit(const Transaction& txn, bool* committed, uint32_t flags) {
  *committed = false;
  if (absl::Status h = region_.health(); !h.ok()) return h;
  if (txn.empty()) {
    *committed = true;
    return absl::OkStatus();
  }
  Build(txn, /*with_carried=*/true, flags);
  const uint64_t slot_size = sb_.journal_size / format::kJournalSlots;
  // The carried images are persisted at home by this commit's own msync when they make
  // its journal image large (see the protocol above: one msync either way).
  bool with_carried_home = false;
  if (buffer_.size() > kCarryLimit && !carried_.empty()) {
    if (buffer_.size() <= slot_size) {
      with_carried_home = true;
    } else {
      // Too big to repeat in one slot (not reached with kCarryLimit a quarter of a slot
      // and transactions of a handful of records): make them durable at home first.
      // Until this slot is written, the other slot still holds them.
      PersistCarried();
      if (absl::Status h = region_.health(); !h.ok()) return h;
      Build(txn, /*with_carried=*/false, flags);
    }
  }
  // A transaction touches a handful of records; a slot holds well over fifty.
  if (buffer_.size() > slot_size) {
    return absl::InternalError(absl::StrCat("journal transaction of ", buffer_.size(),
                                            " bytes exceeds the journal slot"));
  }
  const uint64_t slot = JournalSlotOffset(sb_, sequence_ % format::kJournalSlots);
  region_.Store(slot, buffer_.data(), buffer_.size());
  if (with_carried_home) {
    // One flush of the slot and the carried images' span together. Whatever part of it
    // a crash lets reach the media, recovery finds every carried image in a committed
    // slot: in this one if it is whole, else in the other (the previous transaction,
    // which holds every image carried before this one). None of this transaction's own
    // home images is stored yet, so none reaches the media ahead of its commit point.
    // The span between holds only journal and record pages, which the kernel may write
    // back at any time anyway (the other slot is durable, every other home image in it
    // is carried or persisted).
    const uint64_t lo = std::min(slot, carried_.begin()->first);
    const uint64_t hi = std::max(slot + buffer_.size(),
                                 carried_.rbegin()->first + carried_.rbegin()->second.size());
    region_.Flush(lo, hi - lo);
    region_.Drain();
  } else {
    region_.Persist(slot, buffer_.size());
  }
  if (absl::Status h = region_.health(); !h.ok()) {
    // Not known durable: take it back, so that what the media say does not depend on
    // whether the failed persist wrote it (an empty slot replays nothing; the other slot
    // holds the previous transaction).
    region_.Fill(slot, 0, sizeof(format::JournalHeader));
    region_.Persist(slot, sizeof(format::JournalHeader));
    return h;
  }
  *committed = true;
  // Durable at home now, and this slot repeats them should the next one be torn.
  if (with_carried_home) carried_.clear();

  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& e : txn.entries_) {
    region_.Store(e.offset, e.bytes.data(), e.bytes.size());
    lo = std::min(lo, e.offset);
    hi = std::max(hi, e.offset + e.bytes.size());
    if (carry_) carried_[e.offset] = e.bytes;
  }
  if (!carry_) {
    // One flush for all the records: only the record tables lie between them, and every
    // earlier commit persisted its records before returning, so the span holds no other
    // unpersisted store.
    region_.Flush(lo, hi - lo);
    region_.Drain();
  }
  ++sequence_;
  ++commits_;
  return region_.health();
}

absl::StatusOr<Journal::ReplayResult> Journal::Replay(PersistentRegion& region,
                                                      const format::Superblock& sb,
                                                      bool apply) {
  ReplayResult result;
  JournalContents j = ReadJournal(region.data(), sb);
  for (const JournalSlot& s : j.slots) result.torn = result.torn || s.state == JournalSlot::State::kTorn;
  if (j.newest < 0) return result;  // nothing committed (a fresh pool)
  JournalSlot& newest = j.slots[j.newest];
  if (newest.state != JournalSlot::State::kValid) {
    return absl::DataLossError(absl::StrCat("journal slot ", j.newest, ": committed transaction ",
                                            newest.sequence, " is invalid: ", newest.error,
                                            "; run fsck.walfs --repair"));
  }
  if (apply) {
    for (const auto& [offset, bytes] : newest.images) {
      region.Store(offset, bytes.data(), bytes.size());
      region.Flush(offset, bytes.size());
    }
    region.Drain();
  }
  result.replayed = true;
  result.sequence = newest.sequence;
  result.records = static_cast<uint32_t>(newest.images.size());
  result.flags = newest.flags;
  result.images = std::move(newest.images);
  return result;
}

}  // namespace walfs::core
