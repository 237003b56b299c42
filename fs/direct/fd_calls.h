// FdCalls: what the interposers do around the descriptor calls they wrap, with the real
// call passed in. interpose.cc wraps libc with it; the unit tests drive it with their own
// table, registry and real calls.
//
// The rules (see fd_table.h for the bound they leave):
//  - a close of a library-owned descriptor (owned_fds.h) fails with EBADF, as it would
//    have without the library, and reaches nothing; a close of a tracked number drops
//    its entry first;
//  - close_range/closefrom skip library-owned descriptors and drop the entries in range;
//  - dup2/dup3 onto a tracked number drop its entry, onto a library-owned one renumber
//    it first;
//  - every call that creates a descriptor drops a stale entry its number still had (the
//    number was closed where the library could not see it), and the opens track a walfs
//    file opened for writing, or read-only, as pending (NoteOpen);
//  - F_SETFL with O_APPEND drops the entry before it takes effect (the kernel would then
//    ignore pwrite's offset).
// syscall(2) gets the same for SYS_close, SYS_close_range, SYS_dup, SYS_dup2, SYS_dup3,
// SYS_fcntl, SYS_open, SYS_creat, SYS_openat and SYS_openat2. Every entry point keeps the
// real call's result and errno. Thread-safe and async-signal-safe as the table is, apart
// from the opens (NoteOpen reads mountinfo once per device).
#ifndef WALFS_FS_DIRECT_FD_CALLS_H_
#define WALFS_FS_DIRECT_FD_CALLS_H_

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "fs/direct/fd_table.h"
#include "fs/direct/lease.h"
#include "fs/direct/owned_fds.h"
#include "fs/direct/switches.h"

namespace walfs::direct {

class FdCalls {
 public:
  // `sources` gives the lease sources the opens use (ProductionLeaseSources in the
  // library).
  constexpr FdCalls(FdTable* table, OwnedFds* owned, const LeaseSources& (*sources)())
      : table_(table), owned_(owned), sources_(sources) {}

  // After any call that created descriptor `fd` (or failed: fd < 0).
  int Created(int fd) const {
    if (fd >= 0) table_->DropIfTracked(fd);
    return fd;
  }

  // After an open with `flags` returned fd.
  int Opened(int fd, int flags) const {
    if (fd < 0) return fd;
    table_->DropIfTracked(fd);
    if (LeaseAccess(flags, /*reads=*/true) != 0 && DirectEnabled()) {
      NoteOpen(fd, flags, sources_(), *table_);
    }
    return fd;
  }

  template <typename Real>
  int Close(int fd, Real real) const {
    if (owned_->IsOwned(fd)) return errno = EBADF, -1;
    if (table_->IsTracked(fd)) table_->Untrack(fd);
    return real();
  }

  // range_fn(a, b) closes [a, b] with `flags`.
  template <typename RangeFn>
  int CloseRange(unsigned first, unsigned last, int flags, RangeFn range_fn) const {
    if ((flags & CLOSE_RANGE_CLOEXEC) == 0) table_->UntrackRange(first, last);
    return CloseRangeAroundOwned(*owned_, first, last, flags, range_fn);
  }

  void BeforeDup2(int oldfd, int newfd) const {
    if (oldfd == newfd) return;
    if (table_->IsTracked(newfd)) table_->Untrack(newfd);
    owned_->MoveAside(newfd);
  }

  void BeforeFcntl(int fd, int cmd, long arg) const {
    if (cmd == F_SETFL && (arg & O_APPEND) != 0 && table_->IsTracked(fd)) table_->Untrack(fd);
  }
  int AfterFcntl(int cmd, int result) const {
    return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ? Created(result) : result;
  }

  // syscall(number, a[0..5]) with real(number, a0, ..., a5) as libc's syscall.
  template <typename Real>
  long Syscall(long number, const long (&a)[6], Real real) const {
    const int fd0 = static_cast<int>(a[0]);
    switch (number) {
      case SYS_close:
        return Close(fd0, [&] { return static_cast<int>(real(number, a[0], 0, 0, 0, 0, 0)); });
      case SYS_close_range:
        return CloseRange(static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]),
                          static_cast<int>(a[2]), [&](unsigned b, unsigned e) {
                            return static_cast<int>(real(number, b, e, a[2], 0, 0, 0));
                          });
#ifdef SYS_dup2
      case SYS_dup2:
#endif
      case SYS_dup3:
        BeforeDup2(fd0, static_cast<int>(a[1]));
        break;
      case SYS_dup:
        return Created(static_cast<int>(real(number, a[0], 0, 0, 0, 0, 0)));
      case SYS_fcntl: {
        const int cmd = static_cast<int>(a[1]);
        BeforeFcntl(fd0, cmd, a[2]);
        return AfterFcntl(cmd, static_cast<int>(real(number, a[0], a[1], a[2], 0, 0, 0)));
      }
#ifdef SYS_open
      case SYS_open:
        return Opened(static_cast<int>(real(number, a[0], a[1], a[2], 0, 0, 0)),
                      static_cast<int>(a[1]));
#endif
#ifdef SYS_creat
      case SYS_creat:
        return Opened(static_cast<int>(real(number, a[0], a[1], 0, 0, 0, 0)),
                      O_CREAT | O_WRONLY | O_TRUNC);
#endif
      case SYS_openat:
        return Opened(static_cast<int>(real(number, a[0], a[1], a[2], a[3], 0, 0)),
                      static_cast<int>(a[2]));
      case SYS_openat2: {
        const int fd = static_cast<int>(real(number, a[0], a[1], a[2], a[3], 0, 0));
        // Read only after the kernel accepted the pointer.
        const int flags =
            fd >= 0 ? static_cast<int>(reinterpret_cast<const struct open_how*>(a[2])->flags) : 0;
        return Opened(fd, flags);
      }
      default:
        break;
    }
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  }

 private:
  FdTable* const table_;
  OwnedFds* const owned_;
  const LeaseSources& (*const sources_)();
};

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_FD_CALLS_H_
