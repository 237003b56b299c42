// Acquiring a lease for a file on a walfs mount, at its first write or read: a write
// lease for a descriptor opened for writing, a read lease for one opened read-only.
//
// Two steps. At open, NoteOpen decides from CachedStat whether the descriptor is a walfs
// file a lease could serve and, if so, tracks it as pending (no system call beyond it);
// a copy of a tracked descriptor (dup and the like) is tracked as pending by
// NoteDuplicate.
// At the descriptor's first pwrite- or pread-family call, LeasePending asks the daemon,
// maps the reply and replaces the pending entry with the lease. PostgreSQL opens many WAL files
// only to fsync them (durable_rename, fsync_fname on recycle and at checkpoints): they
// now cost no lease ioctl, no mapping and no lease release (which would also have set
// mtime on a file nobody wrote).
//
// Pinning (L3): LeasePending first duplicates the application's descriptor into a
// private close-on-exec one (library-owned, owned_fds.h), checks it is still the file
// NoteOpen saw, asks for the session and the lease through the private descriptor, and
// then confirms with kcmp(KCMP_FILE) that the application's descriptor still refers to
// the same open file description (where kcmp is unavailable: the same st_dev/st_ino), so
// a lease is never attached to a number that meanwhile became another file. The entry
// keeps the private descriptor until its last reference goes (fd_table.h).
//
// The seam: NoteOpen and LeasePending take the things that touch the outside world (the
// stat, the mount check, the ioctl, the description comparison and the session's
// sources) as LeaseSources, so tests drive every decision without a mount; production
// passes ProductionLeaseSources(). Every failure means "not tracked": the descriptor
// keeps working through FUSE.
#ifndef WALFS_FS_DIRECT_LEASE_H_
#define WALFS_FS_DIRECT_LEASE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include "fs/direct/fd_table.h"
#include "fs/direct/session.h"
#include "fs/lease_protocol.h"

namespace walfs::direct {

// nullptr when `reply` is a well-formed lease, else why not (a static string). The reply
// comes from whatever answered the ioctl, so every field is checked: magic, version,
// access kAccessWrite or kAccessRead, flags and reserved0 zero, run_count in [1, kMaxRuns], block_size a
// power of two that is a multiple of the page size, runs in file order and contiguous
// from 0, each block-aligned and overflow-free, together covering [0, leased_size) with
// no run wholly past it, leased_size > 0, a non-zero stamp at an 8-aligned stamp_offset.
// What the reply must match in the session (uuid, data area, stamps) is
// CheckReplyInSession's (lease_mapping.h).
const char* ValidateReply(const lease::Reply& reply);

// Whether open flags ask for write access a lease can serve: O_WRONLY or O_RDWR, not
// O_APPEND (its writes land at EOF whatever the offset), not O_PATH.
bool WantsLease(int flags);

// The lease a descriptor opened with `flags` would ask for: lease::kAccessWrite when
// WantsLease, lease::kAccessRead for O_RDONLY (not O_PATH) when `reads` (the
// WALFS_DIRECT_READS switch), else 0 (none).
uint32_t LeaseAccess(int flags, bool reads);

// fstat(2) from the kernel's cached attributes (statx with AT_STATX_DONT_SYNC), filling
// st_dev, st_ino, st_mode and st_size only; 0, or -1 with errno. Why: a FUSE write
// invalidates the file's cached attributes, so a plain fstat of a file just written costs
// a GETATTR round trip to the daemon (an order of magnitude more than the statx), and PostgreSQL
// reopens every new segment twice (durable_rename) right after its zero-fill. The type,
// st_dev and st_ino of an open file never change, so the cache cannot make them stale;
// the size is only NoteOpen's hint, and a stale one is safe both ways: an untracked file
// keeps FUSE, a pending empty one is refused by the daemon at its first write. Falls
// back to fstat where statx is missing (ENOSYS) or filtered (EPERM).
int CachedStat(int fd, struct stat* st);

struct LeaseSources {
  int (*stat_fd)(int fd, struct stat* st);  // as CachedStat
  bool (*is_walfs)(dev_t dev);
  // 0 with *reply filled, or -errno.
  int (*ioctl_lease)(int fd, lease::Reply* reply);
  // Whether descriptors a and b of this process refer to one open file description.
  bool (*same_description)(int a, int b);
  const SessionSources* session;
};

// SameDescription: kcmp(getpid(), getpid(), KCMP_FILE, a, b) == 0; where kcmp is missing
// or forbidden (ENOSYS, EPERM), both fstat to the same st_dev and st_ino.
bool SameDescription(int a, int b);

// CachedStat, the process-wide MountCache, ioctl(fd, lease::kIoctlLease),
// SameDescription and ProductionSessionSources().
const LeaseSources& ProductionLeaseSources();

// Outcome of NoteOpen and LeasePending, for the debug log and tests.
enum class LeaseOutcome {
  kGranted,
  kPending,      // NoteOpen: a walfs file, tracked; the lease comes at the first write
  kNotWanted,    // flags (O_APPEND writable, O_PATH, read-only with reads switched off)
                 // or fd out of the table's range
  kNotWalfs,     // the stat failed, not a regular file, or not on a walfs mount
  kReused,       // LeasePending: the descriptor is no longer the file NoteOpen saw (it
                 // was closed where we could not see it), or is not pending at all
  kEmpty,        // a walfs file of size 0: nothing to lease, the daemon is not asked.
                 // Opened for writing it is tracked as pending and empty: its writes go
                 // to the kernel until NoteSeek finds data in it
  kPinFailed,    // LeasePending: no private duplicate below the table's bound
  kNoPmem,       // a write lease, and libpmem cannot be loaded (pmem_calls.h)
  kNotDurable,   // a write lease on a pool that serves reads only (msync mode, L7)
  kNoSession,    // no session with the daemon (refused, timed out, failed its checks)
  kIoctlFailed,  // the daemon refused (EOPNOTSUPP in msync mode, ENODATA when empty...)
  kInvalid,      // the reply failed ValidateReply or CheckReplyInSession
  kMapFailed,    // a mapping failed, MAP_SYNC was refused where it is needed (L7), or
                 // the stamp changed before the lease was mapped
  kTableFull,    // no entry memory
};

// Decides whether the freshly opened fd (opened with `flags`) is a walfs file worth a
// lease (LeaseAccess with DirectReadsEnabled) and, if so, tracks it in `table` as
// pending with the access to ask for: kPending, or why not. Never changes
// errno. Not async-signal-safe (the first call reads mountinfo with malloc).
LeaseOutcome NoteOpen(int fd, int flags, const LeaseSources& sources, FdTable& table);

// After a copy of `source` was made at fd (dup, dup2, dup3, F_DUPFD*; fd != source):
// if `table` tracks source (pending or leased), tracks fd as pending too, with the
// access fd's own flags (F_GETFL) ask for, so it takes its own lease at its first read
// or write like any opened descriptor (`dd` reads the copy dup2 made at 0, having closed
// the number it opened). fd must be the file source's entry noted (st_dev/st_ino):
// otherwise source was closed and reused meanwhile, kReused. The mount is not looked up
// again: source's entry was made for a walfs file. Never changes errno.
//
// Why two descriptors of one open file description may each take a lease: the daemon's
// lease belongs to the handle (the description), not to a number. It has one stamp slot
// per handle; a lease ioctl on a handle that holds one renews it (the runs are not
// counted twice, core's AcquireLease with renew) and writes a new stamp; every close of
// any descriptor of the description (a FLUSH) writes a new stamp; RELEASE, which frees
// the slot and drops the lease, comes only after the last descriptor of the description
// is closed, each entry's private duplicate included (L3). So the second lease revokes
// the first (its entry sees the stamp change at its next store or copy and falls back to
// the kernel, L4), at most one of them stands at a time, and a write lease's runs stay
// the file's until both entries are gone (L2; a read lease's copies are checked by the
// stamp, L9). The cost is the first descriptor's direct path, and a close of either
// number revokes the other's lease: a program that closes the number it opened before
// using the copy (dd) loses nothing. Async-signal-safe as the table is (no mountinfo, no
// allocation beyond the table's entries; libc's fcntl is resolved on the library's first
// use of it, as each wrapper resolves its own).
LeaseOutcome NoteDuplicate(int source, int fd, const LeaseSources& sources, FdTable& table);

// After a successful lseek on fd: if fd is pending and was empty at open, and the file
// now has data (sources.stat_fd, the same file NoteOpen saw), its next write may ask for
// the lease. The case it serves: pg_receivewal opens each new segment empty, pads it with
// zeros and seeks back to 0 before streaming WAL into it (with write(2), direct through
// AtFileOffset). Costs nothing on untracked descriptors (the caller checks first) and
// one stat on a pending empty one. Never changes errno.
void NoteSeek(int fd, const LeaseSources& sources, FdTable& table);

// fd's first write or read: fd must be pending in `table`, whose OwnedFds must be set. Pins fd
// (above), checks the private duplicate is still the file NoteOpen saw (st_dev/st_ino),
// gets the mount's session from `sessions`, asks the daemon for the lease (of the
// pending access) on the duplicate, validates the reply (its access must be the one
// asked for) and checks it against the session, confirms fd is
// still the same description, maps the reply and replaces the pending entry with the
// lease, which takes the duplicate: kGranted. On any other outcome the pending entry is
// dropped and the duplicate closed, so later calls on fd cost one load and go to the
// kernel. Never changes errno. Logs the decision when WALFS_DIRECT_DEBUG=1. Not
// async-signal-safe (it maps memory and may wait for a session): a pwrite of a pending
// descriptor from a signal handler would run it; PostgreSQL's handlers write nothing.
LeaseOutcome LeasePending(int fd, const LeaseSources& sources, FdTable& table,
                          Sessions& sessions);

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_LEASE_H_
