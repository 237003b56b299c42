// SignalSafeLock: a mutex taken with every signal blocked.
//
// The library's tables are mutated from close/dup2/... which a signal handler may call
// while the interrupted thread is inside the same table. Blocking signals for as long as
// the lock is held means a handler can never run in a thread that holds it, so it cannot
// deadlock on it. Constant-initialized: usable before any constructor has run.
// fork: the owner registers ForkPrepare/ForkParent/ForkChild with pthread_atfork so the
// child never inherits it locked by a thread that does not exist there.
#ifndef WALFS_FS_DIRECT_SIGNAL_SAFE_LOCK_H_
#define WALFS_FS_DIRECT_SIGNAL_SAFE_LOCK_H_

#include <pthread.h>
#include <signal.h>

namespace walfs::direct {

class SignalSafeLock {
 public:
  constexpr SignalSafeLock() = default;
  SignalSafeLock(const SignalSafeLock&) = delete;
  SignalSafeLock& operator=(const SignalSafeLock&) = delete;

  // Blocks all signals (the previous mask goes to *saved), then locks.
  void Lock(sigset_t* saved) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, saved);
    pthread_mutex_lock(&mu_);
  }
  void Unlock(const sigset_t& saved) {
    pthread_mutex_unlock(&mu_);
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }

  // The mask is saved to a local first: fork_mask_ belongs to the lock holder.
  void ForkPrepare() {
    sigset_t saved;
    Lock(&saved);
    fork_mask_ = saved;
  }
  void ForkParent() { Unlock(fork_mask_); }
  // The child is a copy of the forking thread, which holds the lock: it may unlock it.
  void ForkChild() { Unlock(fork_mask_); }

  class Guard {
   public:
    explicit Guard(SignalSafeLock& lock) : lock_(lock) { lock_.Lock(&saved_); }
    ~Guard() { lock_.Unlock(saved_); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    SignalSafeLock& lock_;
    sigset_t saved_;
  };

 private:
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
  sigset_t fork_mask_{};  // written only with mu_ held
};

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_SIGNAL_SAFE_LOCK_H_
