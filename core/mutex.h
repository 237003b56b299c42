// Mutex, MutexLock, ReaderMutexLock: the locks of core (see pool.h for the lock order).
//
// These are absl::Mutex and its guards, except in ThreadSanitizer builds (WALFS_TSAN).
// Debian's Abseil is not built with TSan, so absl::Mutex orders threads through atomics
// inside an uninstrumented library: TSan sees none of its happens-before edges and
// reports every access the mutex guards as a race. TSan builds therefore use
// std::shared_mutex (pthread rwlocks, which TSan intercepts) behind the same names and
// thread-safety annotations, so that what TSan reports is about walfs's own accesses.
#ifndef WALFS_CORE_MUTEX_H_
#define WALFS_CORE_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(__SANITIZE_THREAD__)
#define WALFS_CORE_TSAN_MUTEX 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WALFS_CORE_TSAN_MUTEX 1
#endif
#endif

#ifdef WALFS_CORE_TSAN_MUTEX
#include <shared_mutex>
#endif

namespace walfs::core {

#ifndef WALFS_CORE_TSAN_MUTEX

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using ReaderMutexLock = absl::ReaderMutexLock;

#else

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

#endif

}  // namespace walfs::core

#endif  // WALFS_CORE_MUTEX_H_
