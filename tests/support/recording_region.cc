// RecordingRegion: the crash-test engine (see recording_region.h for the model).
#include "tests/support/recording_region.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace walfs::core {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "walfs: RecordingRegion: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

using Interval = std::pair<uint64_t, uint64_t>;  // [first, second)

// Adds [begin, end) to a set of disjoint intervals keyed by begin, merging neighbours.
void AddInterval(std::map<uint64_t, uint64_t>* set, uint64_t begin, uint64_t end) {
  auto it = set->upper_bound(begin);
  if (it != set->begin() && std::prev(it)->second >= begin) {
    --it;
    begin = it->first;
    end = std::max(end, it->second);
    it = set->erase(it);
  }
  while (it != set->end() && it->first <= end) {
    end = std::max(end, it->second);
    it = set->erase(it);
  }
  set->emplace(begin, end);
}

// The parts of [begin, end) inside the set.
std::vector<Interval> Intersect(const std::map<uint64_t, uint64_t>& set, uint64_t begin,
                                uint64_t end) {
  std::vector<Interval> parts;
  auto it = set.upper_bound(begin);
  if (it != set.begin()) --it;
  for (; it != set.end() && it->first < end; ++it) {
    const uint64_t b = std::max(begin, it->first);
    const uint64_t e = std::min(end, it->second);
    if (b < e) parts.emplace_back(b, e);
  }
  return parts;
}

// Bytes of a unit to lay over the durable image.
struct Piece {
  uint64_t off;
  std::string_view bytes;
};

// Builds crash images in one scratch copy of the durable image, skipping duplicates.
// An image is identified by its difference from the durable image: the runs of aligned
// kBlock-byte blocks that differ, with their offsets and contents. Building,
// identifying and undoing an image thus costs what its pieces cover, not the pool size.
class ImageEmitter {
 public:
  // `*scratch` becomes the copy of `durable` that images are built in; it is the
  // caller's so that its allocation can be reused from one durability point to the next.
  ImageEmitter(const std::string& durable, std::string* scratch, size_t max_images,
               const std::function<void(const std::string&)>& fn)
      : durable_(durable), scratch_(*scratch), max_images_(max_images), fn_(fn) {
    scratch_.assign(durable_);
  }

  // False once max_images images have been passed on.
  bool Emit(const std::vector<Piece>& pieces) {
    if (emitted_ >= max_images_) return false;
    // The touched blocks, merged: each block is compared (and restored) once.
    std::vector<Interval> blocks;
    blocks.reserve(pieces.size());
    for (const Piece& p : pieces) {
      if (p.bytes.empty()) continue;
      std::memcpy(scratch_.data() + p.off, p.bytes.data(), p.bytes.size());
      const uint64_t end = p.off + p.bytes.size();
      blocks.emplace_back(p.off / kBlock * kBlock,
                          std::min<uint64_t>((end + kBlock - 1) / kBlock * kBlock,
                                             scratch_.size()));
    }
    std::sort(blocks.begin(), blocks.end());
    std::vector<Interval> merged;
    for (const Interval& b : blocks) {
      if (!merged.empty() && b.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, b.second);
      } else {
        merged.push_back(b);
      }
    }
    Key key{0, 0};
    for (const Interval& m : merged) AddChangedRuns(m.first, m.second, &key);
    if (seen_.insert(key).second) {
      fn_(scratch_);
      ++emitted_;
    }
    for (const Interval& m : merged) {
      std::memcpy(scratch_.data() + m.first, durable_.data() + m.first, m.second - m.first);
    }
    return emitted_ < max_images_;
  }

  size_t emitted() const { return emitted_; }

 private:
  static constexpr uint64_t kBlock = 64;
  // A hash of the changed runs (offset and bytes, in address order) and their total
  // length. 64 bits of hash make a false "duplicate" among a million images about a
  // 1e-7 chance.
  using Key = std::pair<uint64_t, uint64_t>;

  // Adds to `key` each maximal run of blocks in [begin, end) (block-aligned, or ending
  // at the end of the image) where the scratch image differs from the durable one.
  void AddChangedRuns(uint64_t begin, uint64_t end, Key* key) const {
    uint64_t b = begin;
    while (b < end) {
      if (std::memcmp(durable_.data() + b, scratch_.data() + b,
                      std::min(kBlock, end - b)) == 0) {
        b += kBlock;
        continue;
      }
      const uint64_t run = b;
      do {
        b += kBlock;
      } while (b < end && std::memcmp(durable_.data() + b, scratch_.data() + b,
                                      std::min(kBlock, end - b)) != 0);
      b = std::min(b, end);
      const absl::string_view bytes(scratch_.data() + run, b - run);
      key->first = absl::Hash<std::tuple<uint64_t, uint64_t, absl::string_view>>{}(
          std::make_tuple(key->first, run, bytes));
      key->second += b - run;
    }
  }

  const std::string& durable_;
  std::string& scratch_;
  const size_t max_images_;
  const std::function<void(const std::string&)>& fn_;
  absl::flat_hash_set<Key> seen_;
  size_t emitted_ = 0;
};

// Calls visit(chosen) for every k-subset of {0..n-1} (indices ascending) until it
// returns false; returns false if stopped.
template <typename Visit>
bool ForEachCombination(size_t n, size_t k, Visit visit) {
  if (k > n) return true;
  std::vector<size_t> idx(k);
  for (size_t i = 0; i < k; ++i) idx[i] = i;
  while (true) {
    if (!visit(idx)) return false;
    // Advance the rightmost index that can still move.
    size_t i = k;
    while (i > 0 && idx[i - 1] == n - k + (i - 1)) --i;
    if (i == 0) return true;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
}

}  // namespace

RecordingRegion::RecordingRegion(uint64_t size, bool pmem_semantics)
    : RecordingRegion(std::string(size, '\0'), pmem_semantics) {}

RecordingRegion::RecordingRegion(std::string image, bool pmem_semantics)
    : PersistentRegion(nullptr, 0),
      pmem_(pmem_semantics),
      current_(std::move(image)),
      durable_(current_) {
  Reset(current_.data(), current_.size());
}

void RecordingRegion::CheckRange(const char* op, uint64_t off, size_t len) const {
  if (off > current_.size() || len > current_.size() - off) {
    Die(absl::StrFormat("%s [%d, +%d) outside region of %d bytes", op, off, len,
                        current_.size()));
  }
}

void RecordingRegion::WaitNotInHook(const char* op) {
  if (!in_hook_) return;
  if (hook_thread_ == std::this_thread::get_id()) {
    Die(absl::StrCat(op, " called from the durability hook"));
  }
  mu_.Await(absl::Condition(
      +[](bool* in_hook) { return !*in_hook; }, &in_hook_));
}

void RecordingRegion::RunHook() {
  if (!hook_) return;
  std::function<void()> hook = hook_;
  in_hook_ = true;
  hook_thread_ = std::this_thread::get_id();
  mu_.Unlock();
  hook();
  mu_.Lock();
  in_hook_ = false;
}

void RecordingRegion::RecordStore(uint64_t off, size_t len) {
  const uint64_t seq = next_seq_++;
  if (pmem_) {
    units_.push_back(Unit{seq, off, current_.substr(off, len)});
    return;
  }
  for (uint64_t page = off / kPageSize; page <= (off + len - 1) / kPageSize; ++page) {
    dirty_pages_.try_emplace(page, seq);  // keeps the seq of the first dirtying store
  }
}

void RecordingRegion::Store(uint64_t off, const void* src, size_t len) {
  absl::MutexLock lock(&mu_);
  WaitNotInHook("Store");
  CheckRange("Store", off, len);
  if (len == 0) return;
  std::memcpy(current_.data() + off, src, len);
  RecordStore(off, len);
}

void RecordingRegion::Fill(uint64_t off, uint8_t byte, size_t len) {
  absl::MutexLock lock(&mu_);
  WaitNotInHook("Fill");
  CheckRange("Fill", off, len);
  if (len == 0) return;
  std::memset(current_.data() + off, byte, len);
  RecordStore(off, len);
}

void RecordingRegion::Flush(uint64_t off, size_t len) {
  absl::MutexLock lock(&mu_);
  WaitNotInHook("Flush");
  CheckRange("Flush", off, len);
  if (pmem_) {
    if (len == 0) return;
    const uint64_t begin = off / kCacheLineSize * kCacheLineSize;
    const uint64_t end = std::min<uint64_t>(
        (off + len + kCacheLineSize - 1) / kCacheLineSize * kCacheLineSize, current_.size());
    flushes_.push_back(FlushRecord{next_seq_++, begin, end, std::this_thread::get_id()});
    return;
  }
  ++durability_points_;
  RunHook();
  FlushPages(off, len);
}

void RecordingRegion::FlushPages(uint64_t off, size_t len) {
  if (len == 0) return;
  auto it = dirty_pages_.lower_bound(off / kPageSize);
  const uint64_t last = (off + len - 1) / kPageSize;
  while (it != dirty_pages_.end() && it->first <= last) {
    const uint64_t begin = it->first * kPageSize;
    const uint64_t n = std::min<uint64_t>(kPageSize, current_.size() - begin);
    std::memcpy(durable_.data() + begin, current_.data() + begin, n);
    it = dirty_pages_.erase(it);
  }
}

void RecordingRegion::Drain() {
  absl::MutexLock lock(&mu_);
  WaitNotInHook("Drain");
  if (!pmem_) return;  // msync is synchronous: there is nothing left to wait for.
  ++durability_points_;
  RunHook();
  DrainPmem(std::this_thread::get_id());
}

// A unit's bytes become durable where some Flush of the draining thread issued after it
// covers them (the line then held the unit's bytes or newer ones, and newer ones are
// covered by the same Flush). Walking the units newest first while adding the Flushes
// newer than each keeps this O((units + flushes) log flushes). The other threads'
// Flushes stay pending for their own Drains.
void RecordingRegion::DrainPmem(std::thread::id thread) {
  std::vector<FlushRecord> mine;
  std::vector<FlushRecord> others;
  for (const FlushRecord& f : flushes_) (f.thread == thread ? mine : others).push_back(f);
  flushes_ = std::move(others);
  if (mine.empty()) return;
  std::vector<std::vector<Interval>> covered(units_.size());
  std::map<uint64_t, uint64_t> newer_flushes;
  size_t f = mine.size();
  for (size_t i = units_.size(); i-- > 0;) {
    const Unit& u = units_[i];
    for (; f > 0 && mine[f - 1].seq > u.seq; --f) {
      AddInterval(&newer_flushes, mine[f - 1].begin, mine[f - 1].end);
    }
    covered[i] = Intersect(newer_flushes, u.off, u.off + u.bytes.size());
  }
  std::vector<Unit> still_in_flight;
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = units_[i];
    if (covered[i].empty()) {
      still_in_flight.push_back(std::move(u));
      continue;
    }
    uint64_t pos = u.off;
    const uint64_t end = u.off + u.bytes.size();
    for (const Interval& c : covered[i]) {
      if (pos < c.first) {
        still_in_flight.push_back(Unit{u.seq, pos, u.bytes.substr(pos - u.off, c.first - pos)});
      }
      std::memcpy(durable_.data() + c.first, u.bytes.data() + (c.first - u.off),
                  c.second - c.first);
      pos = c.second;
    }
    if (pos < end) {
      still_in_flight.push_back(Unit{u.seq, pos, u.bytes.substr(pos - u.off)});
    }
  }
  units_ = std::move(still_in_flight);
}

std::string RecordingRegion::DurableImage() const {
  absl::MutexLock lock(&mu_);
  return durable_;
}

uint64_t RecordingRegion::durability_points() const {
  absl::MutexLock lock(&mu_);
  return durability_points_;
}

size_t RecordingRegion::in_flight() const {
  absl::MutexLock lock(&mu_);
  return pmem_ ? units_.size() : dirty_pages_.size();
}

void RecordingRegion::SetDurabilityHook(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  WaitNotInHook("SetDurabilityHook");
  hook_ = std::move(hook);
}

std::vector<RecordingRegion::Unit> RecordingRegion::InFlightUnits() const {
  if (pmem_) return units_;
  std::vector<Unit> units;
  units.reserve(dirty_pages_.size());
  for (const auto& [page, seq] : dirty_pages_) {
    const uint64_t begin = page * kPageSize;
    units.push_back(Unit{seq, begin, current_.substr(begin, kPageSize)});
  }
  std::stable_sort(units.begin(), units.end(),
                   [](const Unit& a, const Unit& b) { return a.seq < b.seq; });
  return units;
}

size_t RecordingRegion::ForEachCrashImage(
    const std::function<void(const std::string& image)>& fn) const {
  return ForEachCrashImage(CrashEnumOptions(), fn);
}

size_t RecordingRegion::ForEachCrashImage(
    const CrashEnumOptions& options,
    const std::function<void(const std::string& image)>& fn) const {
  // Work on a snapshot so that fn may call back into the region. From the hook's own
  // thread the durable image is used in place: it cannot change before we return, since
  // mutators abort while the hook runs and the hook is waiting for us.
  std::string snapshot;
  const std::string* durable = &snapshot;
  std::vector<Unit> units;
  {
    absl::MutexLock lock(&mu_);
    if (in_hook_ && hook_thread_ == std::this_thread::get_id()) {
      durable = &durable_;
    } else {
      snapshot = durable_;
    }
    units = InFlightUnits();
  }
  // The region's scratch buffer, unless a call further up this stack (fn calling back
  // in) has it: a fresh pool-sized buffer per durability point costs page faults.
  std::string local_scratch;
  std::string* scratch = &local_scratch;
  {
    absl::MutexLock lock(&mu_);
    if (!scratch_busy_) {
      scratch_busy_ = true;
      scratch = &scratch_;
    }
  }
  absl::Cleanup release = [&] {
    if (scratch != &scratch_) return;
    absl::MutexLock lock(&mu_);
    scratch_busy_ = false;
  };
  const size_t n = units.size();
  ImageEmitter emitter(*durable, scratch, options.max_images, fn);
  auto piece = [&](size_t i) { return Piece{units[i].off, units[i].bytes}; };

  // 1. Nothing in flight landed.
  if (!emitter.Emit({})) return emitter.emitted();

  // 2. Program-order prefixes.
  if (options.prefixes) {
    std::vector<Piece> pieces;
    for (size_t k = 0; k < n; ++k) {
      pieces.push_back(piece(k));
      if (!emitter.Emit(pieces)) return emitter.emitted();
    }
  }

  // 3. Small subsets and the complements of small subsets, by subset size.
  const size_t m = static_cast<size_t>(std::max(options.max_subset, 0));
  std::set<size_t> sizes_done = {0};
  for (size_t k = 0; k <= std::min(m, n); ++k) {
    if (sizes_done.insert(k).second) {
      const bool more = ForEachCombination(n, k, [&](const std::vector<size_t>& chosen) {
        std::vector<Piece> pieces;
        for (size_t i : chosen) pieces.push_back(piece(i));
        return emitter.Emit(pieces);
      });
      if (!more) return emitter.emitted();
    }
    if (options.complements && sizes_done.insert(n - k).second) {
      const bool more = ForEachCombination(n, k, [&](const std::vector<size_t>& left_out) {
        std::vector<Piece> pieces;
        size_t next = 0;
        for (size_t i = 0; i < n; ++i) {
          if (next < left_out.size() && left_out[next] == i) {
            ++next;
          } else {
            pieces.push_back(piece(i));
          }
        }
        return emitter.Emit(pieces);
      });
      if (!more) return emitter.emitted();
    }
  }

  // 4. Torn units.
  if (!options.tear) return emitter.emitted();
  for (size_t i = 0; i < n; ++i) {
    const Unit& u = units[i];
    const uint64_t end = u.off + u.bytes.size();
    // The changed words, as byte ranges of u clamped to u.
    std::vector<Interval> changed;
    for (uint64_t w = u.off / kWordSize * kWordSize; w < end; w += kWordSize) {
      const uint64_t b = std::max(w, u.off);
      const uint64_t e = std::min(w + kWordSize, end);
      if (std::memcmp(u.bytes.data() + (b - u.off), durable->data() + b, e - b) != 0) {
        changed.emplace_back(b, e);
      }
    }
    const size_t c = changed.size();
    if (c < 2) continue;
    std::set<size_t> counts = {1, c / 2, c - 1};
    std::vector<Piece> torn;
    for (size_t p : counts) {
      if (p == 0 || p >= c) continue;
      const uint64_t prefix_end = changed[p - 1].second;
      torn.push_back(Piece{u.off, std::string_view(u.bytes).substr(0, prefix_end - u.off)});
      const uint64_t suffix_begin = changed[c - p].first;
      torn.push_back(Piece{suffix_begin, std::string_view(u.bytes).substr(suffix_begin - u.off)});
    }
    for (const Piece& t : torn) {
      std::vector<Piece> pieces = {t};
      if (!emitter.Emit(pieces)) return emitter.emitted();
      pieces.clear();
      for (size_t j = 0; j < i; ++j) pieces.push_back(piece(j));
      pieces.push_back(t);
      if (!emitter.Emit(pieces)) return emitter.emitted();
      for (size_t j = i + 1; j < n; ++j) pieces.push_back(piece(j));
      if (!emitter.Emit(pieces)) return emitter.emitted();
    }
  }
  return emitter.emitted();
}

}  // namespace walfs::core
