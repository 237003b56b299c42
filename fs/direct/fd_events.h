// FdEvents: what the library does when the application's descriptors change. The
// interposers (interpose_*.cc) report events around the real calls: a descriptor was
// created, opened or duplicated; a number is about to be closed or replaced; a
// description's flags are about to change. The calls made only of such events (close,
// close_range, dup2/dup3, fcntl, syscall) are here too, with the real call passed in.
// Touches nothing but the fd table and the registry of library-owned descriptors; the
// unit tests drive it with their own table, registry and real calls.
//
// The rules (see fd_table.h for the bound they leave):
//  - Closing: a close of a library-owned descriptor (owned_fds.h) fails with EBADF, as
//    it would have without the library, and reaches nothing; a close of a tracked
//    number drops its entry first;
//  - close_range/closefrom skip library-owned descriptors and drop the entries in range;
//  - Replacing: dup2/dup3 onto a tracked number drop its entry, onto a library-owned one
//    renumber it first;
//  - Created, Opened, Duplicated: every call that creates a descriptor drops a stale
//    entry its number still had (the number was closed where the library could not see
//    it); the opens track a walfs file opened for writing, or read-only, as pending
//    (NoteOpen), and a copy of a tracked descriptor is tracked as pending too
//    (NoteDuplicate: why two copies may each take a lease is there);
//  - FlagsChanging: F_SETFL with O_APPEND drops the entry before it takes effect (the
//    kernel would then ignore pwrite's offset).
// syscall(2) gets the same for SYS_close, SYS_close_range, SYS_dup, SYS_dup2, SYS_dup3,
// SYS_fcntl, SYS_open, SYS_creat, SYS_openat and SYS_openat2. Every entry point keeps the
// real call's result and errno. Thread-safe and async-signal-safe as the table is, apart
// from the opens (NoteOpen reads mountinfo once per device); a copy of a tracked
// descriptor looks up no mount.
#ifndef WALFS_FS_DIRECT_FD_EVENTS_H_
#define WALFS_FS_DIRECT_FD_EVENTS_H_

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

class FdEvents {
 public:
  // `sources` gives the lease sources the opens use (ProductionLeaseSources in the
  // library).
  constexpr FdEvents(FdTable* table, OwnedFds* owned, const LeaseSources& (*sources)())
      : table_(table), owned_(owned), sources_(sources) {}

  // ---- events ---------------------------------------------------------------------

  // A call created descriptor `fd` (or failed: fd < 0). Returns fd.
  int Created(int fd) const {
    if (fd >= 0) table_->DropIfTracked(fd);
    return fd;
  }

  // An open with `flags` returned fd. Returns fd.
  int Opened(int fd, int flags) const {
    if (fd < 0) return fd;
    table_->DropIfTracked(fd);
    if (LeaseAccess(flags, /*reads=*/true) != 0 && DirectEnabled()) {
      NoteOpen(fd, flags, sources_(), *table_);
    }
    return fd;
  }

  // A dup of `source` (dup, dup2, dup3, F_DUPFD, F_DUPFD_CLOEXEC) returned fd. Returns fd.
  int Duplicated(int source, int fd) const {
    if (fd < 0 || fd == source) return fd;
    table_->DropIfTracked(fd);
    if (table_->IsTracked(source)) NoteDuplicate(source, fd, sources_(), *table_);
    return fd;
  }

  // fd is about to be closed. False when it is library-owned: the caller fails with
  // EBADF and closes nothing.
  bool Closing(int fd) const {
    if (owned_->IsOwned(fd)) return false;
    if (table_->IsTracked(fd)) table_->Untrack(fd);
    return true;
  }

  // Number fd is about to become a copy of `source` (dup2, dup3).
  void Replacing(int source, int fd) const {
    if (source == fd) return;
    if (table_->IsTracked(fd)) table_->Untrack(fd);
    owned_->MoveAside(fd);
  }

  // F_SETFL is about to give fd's description `flags`.
  void FlagsChanging(int fd, long flags) const {
    if ((flags & O_APPEND) != 0 && table_->IsTracked(fd)) table_->Untrack(fd);
  }

  // ---- calls made of events, with real() the real call -----------------------------

  template <typename Real>
  int Close(int fd, Real real) const {
    if (!Closing(fd)) return errno = EBADF, -1;
    return real();
  }

  // range_fn(a, b) closes [a, b] with `flags`.
  template <typename RangeFn>
  int CloseRange(unsigned first, unsigned last, int flags, RangeFn range_fn) const {
    if ((flags & CLOSE_RANGE_CLOEXEC) == 0) table_->UntrackRange(first, last);
    return CloseRangeAroundOwned(*owned_, first, last, flags, range_fn);
  }

  // dup2 or dup3 of oldfd onto newfd.
  template <typename Real>
  int Dup2(int oldfd, int newfd, Real real) const {
    Replacing(oldfd, newfd);
    return Duplicated(oldfd, real());
  }

  // fcntl(fd, cmd, arg).
  template <typename Real>
  int Fcntl(int fd, int cmd, long arg, Real real) const {
    if (cmd == F_SETFL) FlagsChanging(fd, arg);
    const int result = real();
    return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ? Duplicated(fd, result) : result;
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
        return Dup2(fd0, static_cast<int>(a[1]), [&] {
          return static_cast<int>(real(number, a[0], a[1], a[2], a[3], a[4], a[5]));
        });
      case SYS_dup:
        return Duplicated(fd0, static_cast<int>(real(number, a[0], 0, 0, 0, 0, 0)));
      case SYS_fcntl:
        return Fcntl(fd0, static_cast<int>(a[1]), a[2], [&] {
          return static_cast<int>(real(number, a[0], a[1], a[2], 0, 0, 0));
        });
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

#endif  // WALFS_FS_DIRECT_FD_EVENTS_H_
