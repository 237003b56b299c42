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

// True when [off, off+len) is exactly one record of one of the metadata tables, or the
// state record.
bool IsRecordTarget(const format::Superblock& sb, uint64_t off, uint64_t len) {
  if (off == format::kStateOffset) return len == sizeof(format::PoolState);
  if (len == format::kInodeSize && off >= sb.inode_table_offset &&
      off < sb.inode_table_offset + sb.inode_count * format::kInodeSize) {
    return (off - sb.inode_table_offset) % format::kInodeSize == 0 &&
           off != sb.inode_table_offset;  // slot 0 is reserved
  }
  if (len == format::kDirentSize && off >= sb.dirent_table_offset &&
      off < sb.dirent_table_offset + sb.dirent_count * format::kDirentSize) {
    return (off - sb.dirent_table_offset) % format::kDirentSize == 0;
  }
  return false;
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

absl::Status Journal::Commit(const Transaction& txn, bool* committed) {
  *committed = false;
  if (absl::Status h = region_.health(); !h.ok()) return h;
  if (txn.empty()) {
    *committed = true;
    return absl::OkStatus();
  }
  buffer_.assign(sizeof(format::JournalHeader), '\0');
  for (const auto& e : txn.entries_) {
    format::JournalEntry je{};
    je.target_offset = e.offset;
    je.length = static_cast<uint32_t>(e.bytes.size());
    buffer_.append(reinterpret_cast<const char*>(&je), sizeof(je));
    buffer_.append(e.bytes);
    buffer_.append(format::AlignUp(e.bytes.size(), 8) - e.bytes.size(), '\0');
  }
  const uint64_t payload = buffer_.size() - sizeof(format::JournalHeader);
  // A transaction touches a handful of records; the journal holds well over a hundred.
  if (buffer_.size() > sb_.journal_size) {
    return absl::InternalError(
        absl::StrCat("journal transaction of ", buffer_.size(), " bytes exceeds the journal"));
  }
  format::JournalHeader h{};
  h.magic = format::kJournalMagic;
  h.sequence = sequence_;
  h.entry_count = static_cast<uint32_t>(txn.entries_.size());
  h.payload_bytes = static_cast<uint32_t>(payload);
  std::memcpy(buffer_.data(), &h, sizeof(h));
  h.crc = Crc32c(0, buffer_.data(), buffer_.size());
  std::memcpy(buffer_.data(), &h, sizeof(h));

  region_.Store(sb_.journal_offset, buffer_.data(), buffer_.size());
  region_.Persist(sb_.journal_offset, buffer_.size());
  if (absl::Status h = region_.health(); !h.ok()) {
    // Not known durable: take it back, so that what the media say does not depend on
    // whether the failed persist wrote it (an empty journal replays nothing).
    region_.Fill(sb_.journal_offset, 0, sizeof(format::JournalHeader));
    region_.Persist(sb_.journal_offset, sizeof(format::JournalHeader));
    return h;
  }
  *committed = true;

  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& e : txn.entries_) {
    region_.Store(e.offset, e.bytes.data(), e.bytes.size());
    lo = std::min(lo, e.offset);
    hi = std::max(hi, e.offset + e.bytes.size());
  }
  // One flush for all the records: only the record tables lie between them, and every
  // earlier commit persisted its records before returning, so the span holds no other
  // unpersisted store.
  region_.Flush(lo, hi - lo);
  region_.Drain();
  ++sequence_;
  ++commits_;
  return region_.health();
}

absl::StatusOr<Journal::ReplayResult> Journal::Replay(PersistentRegion& region,
                                                      const format::Superblock& sb,
                                                      bool apply) {
  ReplayResult result;
  const char* base = region.data() + sb.journal_offset;
  format::JournalHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (h.magic != format::kJournalMagic) return result;  // empty journal (fresh pool)
  const uint32_t stored_crc = h.crc;
  if (h.payload_bytes > sb.journal_size - sizeof(h)) {
    result.torn = true;
    return result;
  }
  h.crc = 0;
  uint32_t crc = Crc32c(0, &h, sizeof(h));
  crc = Crc32c(crc, base + sizeof(h), h.payload_bytes);
  if (crc != stored_crc) {
    result.torn = true;
    return result;
  }
  // The CRC matches, so this is a transaction we wrote: every entry must be sane.
  std::vector<std::pair<uint64_t, std::string>>& applies = result.images;
  uint64_t pos = sizeof(h);
  const uint64_t end = sizeof(h) + h.payload_bytes;
  for (uint32_t i = 0; i < h.entry_count; ++i) {
    if (end - pos < sizeof(format::JournalEntry)) {
      return absl::DataLossError(absl::StrCat("journal transaction ", h.sequence, " entry ",
                                              i, " runs past the payload"));
    }
    format::JournalEntry je;
    std::memcpy(&je, base + pos, sizeof(je));
    pos += sizeof(je);
    if (format::AlignUp(je.length, 8) > end - pos ||
        !IsRecordTarget(sb, je.target_offset, je.length)) {
      return absl::DataLossError(absl::StrCat(
          "journal transaction ", h.sequence, " entry ", i, " targets offset ",
          je.target_offset, " length ", je.length, ", not a metadata record"));
    }
    applies.emplace_back(je.target_offset, std::string(base + pos, je.length));
    pos += format::AlignUp(je.length, 8);
  }
  if (apply) {
    for (const auto& [offset, bytes] : applies) {
      region.Store(offset, bytes.data(), bytes.size());
      region.Flush(offset, bytes.size());
    }
    region.Drain();
  }
  result.replayed = true;
  result.sequence = h.sequence;
  result.records = h.entry_count;
  return result;
}

}  // namespace walfs::core
