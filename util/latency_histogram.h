// LatencyHistogram: service times in power-of-two microsecond buckets, always on.
//
// Record is three relaxed atomic increments (bucket, count, sum) and a bit scan: cheap
// enough for every FUSE request (tools/bench/write_profile.sh measures it on the write
// path). Bucket i counts samples in (2^(i-1), 2^i] microseconds, bucket 0 those up to
// 1 us, and the last bucket everything above 2^(kBuckets-2) us (about 1 s): the
// Prometheus "le" bounds are 1 us, 2 us, 4 us ... 1.048576 s, +Inf.
//
// A snapshot is not atomic as a whole (buckets are read one by one while others record),
// so count may differ from the buckets' sum by the requests in flight; readers that need
// a consistent histogram (Prometheus) derive count from the buckets.
//
// Part of walfs_util (util/CMakeLists.txt): the daemon records, walfsctl renders what the
// status document carries; the engine never sees it.
#ifndef WALFS_UTIL_LATENCY_HISTOGRAM_H_
#define WALFS_UTIL_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace walfs::util {

class LatencyHistogram {
 public:
  // (0, 1 us], (1, 2], ..., (2^19, 2^20 us], (2^20 us, inf).
  static constexpr int kBuckets = 22;

  // Upper bound of bucket i in microseconds; 0 for the last (unbounded) bucket.
  static constexpr uint64_t UpperBoundMicros(int i) {
    return i + 1 < kBuckets ? uint64_t{1} << i : 0;
  }

  static constexpr int BucketOf(uint64_t nanos) {
    const uint64_t micros = (nanos + 999) / 1000;  // a 1.5 us request is in (1, 2]
    if (micros <= 1) return 0;
    const int b = std::bit_width(micros - 1);  // ceil(log2(micros))
    return b < kBuckets - 1 ? b : kBuckets - 1;
  }

  void Record(uint64_t nanos) {
    buckets_[BucketOf(nanos)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_nanos_.fetch_add(nanos, std::memory_order_relaxed);
  }

  struct Snapshot {
    uint64_t count = 0;
    uint64_t sum_nanos = 0;
    std::array<uint64_t, kBuckets> buckets = {};

    uint64_t BucketTotal() const {
      uint64_t n = 0;
      for (uint64_t b : buckets) n += b;
      return n;
    }
    // The upper bound (us) of the bucket holding quantile q in [0, 1] of the samples;
    // 0 when empty, UINT64_MAX when it falls in the unbounded bucket.
    uint64_t QuantileUpperMicros(double q) const {
      const uint64_t total = BucketTotal();
      if (total == 0) return 0;
      // The ceil(q * total)-th smallest sample (nearest rank), 0-based.
      const double exact = q * static_cast<double>(total);
      uint64_t rank = static_cast<uint64_t>(exact);
      if (static_cast<double>(rank) < exact) ++rank;
      rank = rank == 0 ? 0 : rank - 1;
      if (rank >= total) rank = total - 1;
      uint64_t seen = 0;
      for (int i = 0; i < kBuckets; ++i) {
        seen += buckets[i];
        if (seen > rank) return i + 1 < kBuckets ? UpperBoundMicros(i) : UINT64_MAX;
      }
      return UINT64_MAX;
    }
  };

  Snapshot snapshot() const {
    Snapshot s;
    s.count = count_.load(std::memory_order_relaxed);
    s.sum_nanos = sum_nanos_.load(std::memory_order_relaxed);
    for (int i = 0; i < kBuckets; ++i) s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_ = {};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_nanos_{0};
};

}  // namespace walfs::util

#endif  // WALFS_UTIL_LATENCY_HISTOGRAM_H_
