// The input format of the pool fuzzer (pool_fuzz.cc) and the base images it patches,
// shared with the seed generator (pool_fuzz_seeds.cc).
//
// An input is not a whole pool image but a patch over one of a few small base pools of
// 2.25 MiB built in process (a fresh mkfs, and one holding a segment, a small file, a
// hard link, a symlink and a subdirectory tree). A whole image as input would leave
// the fuzzer mutating bytes of an all-zero data area almost every time, and nearly
// every mutation of a superblock ends the run at its CRC; a few patches over a
// consistent pool instead reach the journal, record and tree checks from the first
// execution, and the patch format keeps crash states (a handful of changed records) a
// few KiB long.
//
// Most bytes of a pool are covered by a CRC, so a raw patch almost always ends at a
// checksum mismatch. An input can therefore ask for its damage to be sealed: the CRCs
// of every record, superblock and journal transaction it touched are recomputed, the
// way walfs_damage makes the mount-level corpus, so the checks behind the CRCs (extents,
// link counts, the tree, journal entries) see hostile values too.
//
// Layout (little-endian):
//   byte 0        bits 0-6: base image (value % kBaseCount); bit 7: seal the patches
//   byte 1        region size: 0 = the whole image, n > 0 = image cut to n/256 of its
//                 size rounded down to 512 bytes (truncated pools)
//   then patches  u32 offset (taken modulo the image size), u16 length, `length` bytes
//                 (cut at the end of the input and of the image)
#ifndef WALFS_TESTS_FUZZ_POOL_FUZZ_INPUT_H_
#define WALFS_TESTS_FUZZ_POOL_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/crc32c.h"
#include "core/format.h"
#include "core/wal_directory.h"
#include "tests/support/memory_region.h"

namespace walfs::fuzz {

inline constexpr uint64_t kImageSize = 2304 * 1024;  // room for two 1 MiB segments
inline constexpr uint64_t kSegmentSize = 1 << 20;
inline constexpr uint64_t kInodes = 16;
inline constexpr int kBaseCount = 2;
inline constexpr core::Caller kUser{1000, 1000};
inline constexpr char kSegmentName[] = "000000010000000000000001";

[[noreturn]] inline void Die(std::string_view what, const absl::Status& s) {
  std::fprintf(stderr, "pool_fuzz setup: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               s.ToString().c_str());
  std::abort();
}

template <typename T>
T Must(absl::StatusOr<T> v, std::string_view what) {
  if (!v.ok()) Die(what, v.status());
  return *std::move(v);
}
inline void Must(const absl::Status& s, std::string_view what) {
  if (!s.ok()) Die(what, s);
}

inline std::string FreshImage() {
  core::MemoryRegion region(kImageSize);
  core::FormatOptions opts;
  opts.segment_size = kSegmentSize;
  opts.inode_count = kInodes;
  opts.region_is_zero = true;
  Must(core::FormatPool(region, opts), "format");
  return region.bytes();
}

// Puts the populated tree on `dir` (a fresh pool): /000000010000000000000001 (a
// segment, partly written), /archive_status/000000010000000000000001.ready, /small (two
// blocks) with a hard link /small.link, /latest -> 000000010000000000000001, and
// /a/b (nested directories).
inline void Populate(core::WalDirectory& dir) {
  const core::InodeId root = core::kRootInode;
  auto seg = Must(dir.names().Create(root, kSegmentName, 0600, kUser, true), "create segment");
  std::string page(8192, '\0');
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<char>(i * 7 + 1);
  Must(dir.data().Write(seg.ino, 0, {page.data(), page.size()}, true), "write segment");
  auto status = Must(dir.names().Mkdir(root, "archive_status", 0700, kUser), "mkdir");
  Must(dir.names().Create(status.ino, "000000010000000000000001.ready", 0600, kUser, true),
       "create .ready");
  auto small = Must(dir.names().Create(root, "small", 0644, kUser, true), "create small");
  Must(dir.data().Write(small.ino, 0, {page.data(), 5000}, false), "write small");
  Must(dir.data().Fsync(small.ino, false), "fsync small");
  Must(dir.names().Link(small.ino, root, "small.link"), "link");
  Must(dir.names().Symlink(root, "latest", kSegmentName, kUser), "symlink");
  auto a = Must(dir.names().Mkdir(root, "a", 0755, kUser), "mkdir a");
  Must(dir.names().Mkdir(a.ino, "b", 0755, kUser), "mkdir b");
}

inline std::string PopulatedImage() {
  auto region = std::make_unique<core::MemoryRegion>(FreshImage());
  core::MemoryRegion* raw = region.get();
  auto dir = Must(core::WalDirectory::Open(std::move(region)), "open");
  Populate(*dir);
  Must(dir->Close(), "close");
  std::string image = raw->bytes();
  return image;
}

// The base images, built once.
inline const std::vector<std::string>& BaseImages() {
  static const std::vector<std::string>* bases =
      new std::vector<std::string>{FreshImage(), PopulatedImage()};
  return *bases;
}

inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Recomputes the CRC of every superblock, record and journal transaction overlapping
// [off, off + len), located with the base image's geometry `sb`.
inline void Seal(std::string& image, const core::format::Superblock& sb, uint64_t off,
                 uint64_t len) {
  namespace format = core::format;
  char* p = image.data();
  const uint64_t end = off + len;
  for (uint64_t sbo : format::kSuperblockOffset) {
    if (off < sbo + sizeof(format::Superblock) && end > sbo &&
        sbo + sizeof(format::Superblock) <= image.size()) {
      const uint32_t crc = core::Crc32c(0, p + sbo, offsetof(format::Superblock, crc));
      std::memcpy(p + sbo + offsetof(format::Superblock, crc), &crc, sizeof(crc));
    }
  }
  auto seal_table = [&](uint64_t table, uint64_t count, uint64_t size) {
    if (end <= table || off >= table + count * size) return;
    const uint64_t first = off > table ? (off - table) / size : 0;
    const uint64_t last = std::min(count - 1, (end - 1 - table) / size);
    for (uint64_t i = first; i <= last; ++i) {
      char* rec = p + table + i * size;
      if (table + (i + 1) * size > image.size()) return;
      const bool zero = rec[0] == 0 && std::memcmp(rec, rec + 1, size - 1) == 0;
      if (zero) continue;
      const uint32_t crc = core::RecordCrc(rec, size);
      std::memcpy(rec, &crc, sizeof(crc));
    }
  };
  seal_table(sb.inode_table_offset, sb.inode_count, format::kInodeSize);
  seal_table(sb.dirent_table_offset, sb.dirent_count, format::kDirentSize);
  // Each journal slot the mutation touched gets its crc recomputed (format.h).
  const uint64_t slot_size = sb.journal_size / format::kJournalSlots;
  for (uint64_t s = 0; s < format::kJournalSlots; ++s) {
    const uint64_t slot = sb.journal_offset + s * slot_size;
    if (!(off < slot + slot_size && end > slot && slot + slot_size <= image.size())) continue;
    char* j = p + slot;
    format::JournalHeader h;
    std::memcpy(&h, j, sizeof(h));
    if (h.magic == format::kJournalMagic && h.payload_bytes <= slot_size - sizeof(h)) {
      h.crc = 0;
      std::memcpy(j, &h, sizeof(h));
      h.crc = core::Crc32c(0, j, sizeof(h) + h.payload_bytes);
      std::memcpy(j, &h, sizeof(h));
    }
  }
}

// Puts the pool image an input describes into `image` (reusing its buffer); false for
// an input shorter than its header.
inline bool DecodeInput(const uint8_t* data, size_t size, std::string& image) {
  if (size < 2) return false;
  const std::string& base = BaseImages()[(data[0] & 0x7f) % kBaseCount];
  const bool seal = (data[0] & 0x80) != 0;
  core::format::Superblock sb;
  std::memcpy(&sb, base.data(), sizeof(sb));
  image.assign(base);
  size_t pos = 2;
  while (size - pos >= 6) {
    const uint64_t off = Load32(data + pos) % image.size();
    const size_t want = Load16(data + pos + 4);
    pos += 6;
    const size_t n = std::min({want, size - pos, image.size() - off});
    std::memcpy(image.data() + off, data + pos, n);
    if (seal && n > 0) Seal(image, sb, off, n);
    pos += n;
  }
  if (data[1] != 0) image.resize(image.size() * data[1] / 256 / 512 * 512);
  return true;
}

// An input turning base `base_index` into `image` (same size): runs of differing bytes,
// joined across gaps shorter than a patch header.
// With `seal`, decoding recomputes the CRCs of what the patches touch (see above).
inline std::string EncodeInput(int base_index, const std::string& image, bool seal = false) {
  const std::string& base = BaseImages()[base_index];
  std::string out;
  out.push_back(static_cast<char>(base_index | (seal ? 0x80 : 0)));
  out.push_back(0);
  size_t i = 0;
  while (i < image.size()) {
    if (image[i] == base[i]) {
      ++i;
      continue;
    }
    size_t end = i + 1, last_diff = i;
    while (end < image.size() && end - last_diff <= 8 && end - i < 0xffff) {
      if (image[end] != base[end]) last_diff = end;
      ++end;
    }
    const uint32_t off = static_cast<uint32_t>(i);
    const uint16_t len = static_cast<uint16_t>(last_diff + 1 - i);
    out.append(reinterpret_cast<const char*>(&off), sizeof(off));
    out.append(reinterpret_cast<const char*>(&len), sizeof(len));
    out.append(image, i, len);
    i = last_diff + 1;
  }
  return out;
}

}  // namespace walfs::fuzz

#endif  // WALFS_TESTS_FUZZ_POOL_FUZZ_INPUT_H_
