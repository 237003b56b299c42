// RecordingRegion: an in-memory PersistentRegion that models what a power failure would
// leave on the media: the crash-test engine. Test support: core and shipped programs
// never include it.
//
// Like LevelDB's fault_injection_test (state as of the last sync, everything else
// droppable) refined to persistent memory the way Yat and Chipmunk do it: the region
// keeps the bytes reads see (current) and the bytes certainly on media (durable), plus
// the stores in flight between the two. A test installs a durability hook and, at each
// durability point, enumerates the images a crash at that instant could leave, then
// recovers each one.
//
// Two models, chosen at construction:
//  - pmem semantics (is_pmem() true): each Store/Fill is one store unit, in flight until
//    a Flush covering it (rounded to 64-byte cache lines) is followed by a Drain. An
//    unflushed unit may reach the media at any later time (cache eviction), so it stays
//    in flight across Drains until some Flush after it covers it. A Flush covering only
//    part of a unit splits it at the Drain: the covered part becomes durable, the rest
//    stays in flight as a unit of its own. Aligned 8-byte words are failure-atomic,
//    nothing larger: a unit may persist partially, word by word. Drain is per thread,
//    as SFENCE is: it makes durable only what the Flushes issued by the calling thread
//    since its last Drain cover, whoever stored the bytes. Another thread's Flushes stay
//    pending until that thread drains (the units they cover stay in flight meanwhile),
//    so code that relies on a drain in a thread other than the one that flushed loses
//    data in this model, as it could on hardware.
//  - msync semantics (is_pmem() false): stores dirty 4 KiB pages. Flush(off, len) writes
//    every page overlapping [off, off+len) to the media at once, as it is now (msync is
//    synchronous); Drain does nothing. A dirty page may be written back by the kernel
//    at any time; each dirty page, with its current content, is one in-flight unit.
//
// Durability points: Drain() calls (pmem) or Flush() calls (msync).
//
// Thread-safety: every method may be called from any thread (a mutex guards the
// state); program order is the order in which calls take the mutex. While the hook runs
// (in the thread that reached the durability point), Store, Fill, Flush, Drain and
// SetDurabilityHook from other threads wait until it returns, so the hook sees one
// frozen state even with several writers; from the hook's own thread they abort.
#ifndef WALFS_TESTS_SUPPORT_RECORDING_REGION_H_
#define WALFS_TESTS_SUPPORT_RECORDING_REGION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/persistent_region.h"

namespace walfs::core {

class RecordingRegion final : public PersistentRegion {
 public:
  static constexpr uint64_t kWordSize = 8;         // failure-atomic unit
  static constexpr uint64_t kCacheLineSize = 64;  // pmem Flush granularity
  static constexpr uint64_t kPageSize = 4096;     // msync granularity

  // A zero-filled region of `size` bytes, all durable.
  RecordingRegion(uint64_t size, bool pmem_semantics);
  // A region holding `image`, all durable (e.g. a crash image to recover from).
  RecordingRegion(std::string image, bool pmem_semantics);
  ~RecordingRegion() override = default;

  bool is_pmem() const override { return pmem_; }
  std::string_view kind() const override { return "recording"; }

  // Out-of-range arguments, and calls made from inside the durability hook, abort.
  void Store(uint64_t off, const void* src, size_t len) override;
  void Fill(uint64_t off, uint8_t byte, size_t len) override;
  void Flush(uint64_t off, size_t len) override;
  void Drain() override;

  // The bytes a power failure now would leave if no in-flight store reached the media.
  std::string DurableImage() const;
  // Number of durability points so far: Drain() calls (pmem) or Flush() calls (msync),
  // counting the one whose hook is running.
  uint64_t durability_points() const;
  // Number of in-flight units: store units (pmem) or dirty pages (msync).
  size_t in_flight() const;

  // `hook` runs at the start of every durability point, before it takes effect, without
  // the region's lock held, in the thread that reached it; one hook call at a time.
  // It may call the const methods (DurableImage, ForEachCrashImage, ...) to see the
  // crash states at that instant; calling Store, Fill, Flush, Drain or
  // SetDurabilityHook from inside it aborts, and other threads calling them wait until
  // it returns. An empty function removes the hook.
  void SetDurabilityHook(std::function<void()> hook);

  struct CrashEnumOptions {
    // Subsets of the in-flight units of at most this many units landed, and (with
    // `complements`) of all but at most this many.
    int max_subset = 2;
    bool complements = true;
    // The images a crash between two stores in program order leaves: the first k
    // units landed, for every k.
    bool prefixes = true;
    // Torn units: only some of a unit's changed words landed.
    bool tear = true;
    // Stop after passing this many images to fn.
    size_t max_images = size_t{1} << 20;
  };

  // Calls fn once per distinct image a crash at this instant could leave, and returns
  // how many it passed. Each image is the durable image plus some in-flight units,
  // applied in program order (n = in_flight()):
  //   1. no unit (the durable image itself);
  //   2. with `prefixes`: units 1..k, for k = 1..n;
  //   3. every subset of at most max_subset units and, with `complements`, every subset
  //      of at least n - max_subset units (by size: n, 1, n-1, 2, n-2, ...);
  //   4. with `tear`, for each unit u with C >= 2 changed words (aligned 8-byte words
  //      where u differs from the durable image): u's bytes up to the end of its p-th
  //      changed word, and from the start of its p-th last changed word, for p in
  //      {1, C/2, C-1}; each laid over three bases: the durable image, the units before
  //      u, and all units but u.
  // Images equal to one already passed (compared by content) are skipped. `image` is
  // valid only during the call; fn runs on a snapshot taken at the start, without the
  // lock, so it may call the const methods.
  // Cost: step 3 yields about n^2 images for max_subset 2; an image costs about the
  // bytes its units cover (plus two copies of the pool per call), not the pool size.
  // With hundreds of units in flight, lower max_subset or max_images.
  size_t ForEachCrashImage(const CrashEnumOptions& options,
                           const std::function<void(const std::string& image)>& fn) const;
  // The same with default options.
  size_t ForEachCrashImage(const std::function<void(const std::string& image)>& fn) const;

  // The current bytes, for tests that inspect or corrupt them. Writes through this
  // bypass the model (they are neither in flight nor durable).
  std::string& current() { return current_; }

 private:
  // A store in flight (pmem) or a dirty page (msync) at `off`; `seq` orders units.
  struct Unit {
    uint64_t seq;
    uint64_t off;
    std::string bytes;
  };
  struct FlushRecord {
    uint64_t seq;
    uint64_t begin;
    uint64_t end;
    std::thread::id thread;  // only this thread's Drain makes it take effect
  };

  void CheckRange(const char* op, uint64_t off, size_t len) const;
  // Aborts when called from the running hook; waits while another thread's hook runs.
  void WaitNotInHook(const char* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the hook for a durability point; returns with mu_ held again.
  void RunHook() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordStore(uint64_t off, size_t len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainPmem(std::thread::id thread) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushPages(uint64_t off, size_t len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Unit> InFlightUnits() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool pmem_;
  mutable absl::Mutex mu_;
  // Never resized, so data() stays valid; written only under mu_.
  std::string current_;
  std::string durable_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t durability_points_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
  bool in_hook_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id hook_thread_ ABSL_GUARDED_BY(mu_);
  // pmem: in-flight store units in seq order, and the Flushes no Drain of their thread
  // has followed yet.
  std::vector<Unit> units_ ABSL_GUARDED_BY(mu_);
  std::vector<FlushRecord> flushes_ ABSL_GUARDED_BY(mu_);
  // ForEachCrashImage's image buffer, reused across calls; scratch_busy_ while a call
  // uses it.
  mutable std::string scratch_;
  mutable bool scratch_busy_ ABSL_GUARDED_BY(mu_) = false;
  // msync: dirty page index -> seq of the store that first dirtied it.
  std::map<uint64_t, uint64_t> dirty_pages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace walfs::core

#endif  // WALFS_TESTS_SUPPORT_RECORDING_REGION_H_
