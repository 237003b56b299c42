// The lease decision at open, and validation of the daemon's reply.
#include "fs/direct/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>

#include "fs/direct/lease_mapping.h"
#include "fs/direct/mounts.h"
#include "fs/direct/pmem_calls.h"
#include "fs/direct/real_calls.h"
#include "fs/direct/switches.h"

namespace walfs::direct {
namespace {

MountCache& ProcessMounts() {
  static constinit MountCache cache;
  return cache;
}

bool IsWalfsMount(dev_t dev) { return ProcessMounts().IsWalfs(dev); }

int IoctlLease(int fd, lease::Reply* reply) {
  return ioctl(fd, lease::kIoctlLease, reply) == 0 ? 0 : -errno;
}

bool SameFile(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// The reply in hand names other stamps than the session *session: the session is an
// idle one kept from an earlier daemon of a mount whose st_dev the current one reuses.
// Ends it and makes a new one through priv (the exchange asks the daemon that granted
// the reply): kGranted with *session the new one, whose stamps CheckReplyInSession then
// compares with the reply's like any session's; or kNoSession.
LeaseOutcome RenewSession(int fd, int priv, dev_t dev, Sessions& sessions,
                          const SessionSources& sources, int* session) {
  sessions.Discard(*session);
  sessions.Release(*session);
  const char* reason = "";
  *session = sessions.Acquire(priv, dev, sources, &reason);
  if (*session < 0) {
    DebugLog("fd %d: no lease: no session: %s: %s", fd, reason, strerror(-*session));
    return LeaseOutcome::kNoSession;
  }
  DebugLog("fd %d: a kept session was an earlier daemon's: made a new one", fd);
  return LeaseOutcome::kGranted;
}

// Tracks fd, a walfs file with attributes `st` whose lease would have `access`, as
// pending: kPending, or why not.
LeaseOutcome TrackPendingFile(int fd, uint32_t access, const struct stat& st, FdTable& table) {
  if (st.st_size == 0) {
    // Nothing is allocated, so the daemon would refuse (ENODATA). PostgreSQL's new
    // segments (xlogtemp.N) are zero-filled through FUSE, then renamed and reopened, and
    // the reopened descriptor is leased; an empty file opened for writing is tracked as
    // pending and empty, so that a writer who fills it and seeks back (NoteSeek) can
    // lease it. An empty file opened for reading has nothing to read.
    if (access == lease::kAccessWrite &&
        !table.TrackPending(fd, st.st_dev, st.st_ino, access, /*empty=*/true)) {
      return LeaseOutcome::kTableFull;
    }
    return LeaseOutcome::kEmpty;
  }
  if (!table.TrackPending(fd, st.st_dev, st.st_ino, access)) {
    DebugLog("fd %d: no lease: fd table entry unavailable", fd);
    return LeaseOutcome::kTableFull;
  }
  return LeaseOutcome::kPending;
}

}  // namespace

int CachedStat(int fd, struct stat* st) {
  constexpr unsigned kWanted = STATX_TYPE | STATX_INO | STATX_SIZE;
  struct statx sx;
  if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, kWanted, &sx) != 0) {
    // ENOSYS or EPERM: a kernel or seccomp filter without statx. EBADF and the rest are
    // fstat's answer too.
    if (errno != ENOSYS && errno != EPERM) return -1;
    return fstat(fd, st);
  }
  if ((sx.stx_mask & kWanted) != kWanted) return fstat(fd, st);
  memset(st, 0, sizeof(*st));
  st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  st->st_ino = static_cast<ino_t>(sx.stx_ino);
  st->st_mode = sx.stx_mode;
  st->st_size = static_cast<off_t>(sx.stx_size);
  return 0;
}

const char* ValidateReply(const lease::Reply& r) {
  if (r.magic != lease::kMagic) return "bad magic";
  if (r.version != lease::kVersion) return "unknown version";
  if (r.access != lease::kAccessWrite && r.access != lease::kAccessRead) {
    return "access is neither write nor read";
  }
  if (r.flags != 0) return "unknown flags";
  if (r.reserved0 != 0) return "reserved0 not zero";
  if (r.run_count == 0 || r.run_count > lease::kMaxRuns) return "run_count out of range";
  if (r.leased_size == 0) return "empty lease";
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (r.block_size == 0 || (r.block_size & (r.block_size - 1)) != 0 ||
      r.block_size % page != 0) {
    return "block_size is not a power-of-two multiple of the page size";
  }
  uint64_t covered = 0;
  for (uint32_t i = 0; i < r.run_count; ++i) {
    const lease::Run& run = r.runs[i];
    if (run.file_offset != covered) return "runs are not contiguous from file offset 0";
    if (run.length == 0) return "empty run";
    if (run.pool_offset % r.block_size != 0 || run.length % r.block_size != 0) {
      return "run not block-aligned";
    }
    if (run.pool_offset > UINT64_MAX - run.length || run.file_offset > UINT64_MAX - run.length ||
        run.pool_offset + run.length > static_cast<uint64_t>(INT64_MAX)) {
      return "run overflows";
    }
    if (run.file_offset >= r.leased_size) return "run past leased_size";
    covered += run.length;
  }
  if (covered < r.leased_size) return "runs do not cover leased_size";
  if (r.stamp == 0) return "no stamp";
  if (r.stamp_offset % sizeof(uint64_t) != 0 ||
      r.stamp_offset > static_cast<uint64_t>(INT64_MAX) - sizeof(uint64_t)) {
    return "stamp_offset not 8-aligned or overflows";
  }
  return nullptr;
}

bool SameDescription(int a, int b) {
  const long pid = static_cast<long>(getpid());
  const long r = syscall(SYS_kcmp, pid, pid, static_cast<long>(KCMP_FILE), static_cast<long>(a),
                         static_cast<long>(b));
  if (r >= 0) return r == 0;
  if (errno == ENOSYS || errno == EPERM) return SameFile(a, b);
  return false;
}

bool WantsLease(int flags) {
  const int access = flags & O_ACCMODE;
  return (access == O_WRONLY || access == O_RDWR) && (flags & (O_APPEND | O_PATH)) == 0;
}

uint32_t LeaseAccess(int flags, bool reads) {
  if (WantsLease(flags)) return lease::kAccessWrite;
  if (reads && (flags & O_ACCMODE) == O_RDONLY && (flags & O_PATH) == 0) {
    return lease::kAccessRead;
  }
  return 0;
}

const LeaseSources& ProductionLeaseSources() {
  static const LeaseSources kSources = {
      .stat_fd = CachedStat,
      .is_walfs = IsWalfsMount,
      .ioctl_lease = IoctlLease,
      .same_description = SameDescription,
      .session = &ProductionSessionSources(),
  };
  return kSources;
}

LeaseOutcome NoteOpen(int fd, int flags, const LeaseSources& sources, FdTable& table) {
  const uint32_t access = LeaseAccess(flags, DirectReadsEnabled());
  if (access == 0 || fd < 0 || fd >= FdTable::kFdBound) return LeaseOutcome::kNotWanted;
  const int saved_errno = errno;
  struct stat st;
  LeaseOutcome outcome;
  if (sources.stat_fd(fd, &st) != 0 || !S_ISREG(st.st_mode) || !sources.is_walfs(st.st_dev)) {
    outcome = LeaseOutcome::kNotWalfs;
  } else {
    outcome = TrackPendingFile(fd, access, st, table);
  }
  errno = saved_errno;
  return outcome;
}

LeaseOutcome NoteDuplicate(int source, int fd, const LeaseSources& sources, FdTable& table) {
  if (fd < 0 || fd >= FdTable::kFdBound) return LeaseOutcome::kNotWanted;
  dev_t dev;
  ino_t ino;
  {
    FdTable::Ref from = table.Acquire(source);
    if (!from) return LeaseOutcome::kNotWalfs;
    dev = from.entry()->dev;
    ino = from.entry()->ino;
  }
  const int saved_errno = errno;
  // The description's own flags: a copy shares them (and F_SETFL's O_APPEND has already
  // untracked the source).
  const int flags = real::Fcntl(fd, F_GETFL, nullptr);
  const uint32_t access = flags < 0 ? 0 : LeaseAccess(flags, DirectReadsEnabled());
  struct stat st;
  LeaseOutcome outcome;
  if (access == 0) {
    outcome = LeaseOutcome::kNotWanted;
  } else if (sources.stat_fd(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != dev ||
             st.st_ino != ino) {
    // source was closed and its number reused (on another thread) between the copy and
    // the look at its entry: fd copies a file the entry does not describe.
    outcome = LeaseOutcome::kReused;
  } else {
    outcome = TrackPendingFile(fd, access, st, table);
  }
  if (outcome == LeaseOutcome::kPending) {
    DebugLog("fd %d: a copy of fd %d: takes its own lease at its first read or write", fd,
             source);
  }
  errno = saved_errno;
  return outcome;
}

void NoteSeek(int fd, const LeaseSources& sources, FdTable& table) {
  FdTable::Ref pending = table.Acquire(fd);
  if (!pending || !pending.pending() || !pending.pending_empty()) return;
  const int saved_errno = errno;
  struct stat st;
  if (sources.stat_fd(fd, &st) == 0 && st.st_dev == pending.entry()->dev &&
      st.st_ino == pending.entry()->ino && st.st_size > 0) {
    pending.MarkFilled();
    DebugLog("fd %d: the file has data now: its next write asks for a lease", fd);
  }
  errno = saved_errno;
}

LeaseOutcome LeasePending(int fd, const LeaseSources& sources, FdTable& table,
                          Sessions& sessions) {
  FdTable::Ref pending = table.Acquire(fd);
  if (!pending || !pending.pending()) return LeaseOutcome::kReused;
  const FdTable::Entry* entry = pending.entry();
  const uint32_t access = pending.pending_access();
  OwnedFds& owned = *table.owned();
  const int saved_errno = errno;
  LeaseOutcome outcome = LeaseOutcome::kGranted;
  // The private duplicate (L3): the library's from here on, closed on every failure
  // below, handed to the lease entry on success.
  std::atomic<int> private_cell{-1};
  const int dup_fd = real::Fcntl(fd, F_DUPFD_CLOEXEC, nullptr);
  if (dup_fd >= 0) table.DropIfTracked(dup_fd);  // a stale entry of a number closed unseen
  if (dup_fd < 0 || !owned.Adopt(dup_fd, &private_cell)) {
    if (dup_fd >= 0) real::Close(dup_fd);
    // EBADF: fd was closed where we could not see it.
    outcome = dup_fd < 0 && errno == EBADF ? LeaseOutcome::kReused : LeaseOutcome::kPinFailed;
    DebugLog("fd %d: no lease: cannot pin the descriptor", fd);
  }
  const int priv = private_cell.load(std::memory_order_relaxed);
  struct stat st;
  if (outcome == LeaseOutcome::kGranted &&
      (sources.stat_fd(priv, &st) != 0 || st.st_dev != entry->dev || st.st_ino != entry->ino)) {
    // Not the file opened: neither ioctl may go to whatever fd is now.
    outcome = LeaseOutcome::kReused;
    DebugLog("fd %d: no lease: no longer the file opened", fd);
  }
  int session = -1;
  if (outcome == LeaseOutcome::kGranted) {
    const char* reason = "";
    session = sessions.Acquire(priv, st.st_dev, *sources.session, &reason);
    if (session < 0) {
      outcome = LeaseOutcome::kNoSession;
      DebugLog("fd %d: no lease: no session: %s: %s", fd, reason, strerror(-session));
    } else if (access == lease::kAccessWrite &&
               sessions.Get(session).facts.durability == lease::kDurabilityReadsOnly) {
      // msync mode: only the daemon can make a store durable (L7). Not asked.
      outcome = LeaseOutcome::kNotDurable;
      DebugLog("fd %d: no write lease: the pool serves reads only (msync mode)", fd);
    }
  }
  if (outcome == LeaseOutcome::kGranted && access == lease::kAccessWrite) {
    const char* reason = "";
    if (LoadPmem(&reason) == nullptr) {
      outcome = LeaseOutcome::kNoPmem;
      DebugLog("fd %d: no lease: %s", fd, reason);
    }
  }
  // 712 bytes: on the stack, as a write may run anywhere.
  lease::Reply reply;
  memset(&reply, 0, sizeof(reply));
  reply.magic = lease::kMagic;
  reply.version = lease::kVersion;
  reply.access = access;
  if (outcome == LeaseOutcome::kGranted) {
    if (const int err = sources.ioctl_lease(priv, &reply); err != 0) {
      outcome = LeaseOutcome::kIoctlFailed;
      DebugLog("fd %d: no lease: ioctl: %s", fd, strerror(-err));
    } else if (const char* invalid = ValidateReply(reply); invalid != nullptr) {
      outcome = LeaseOutcome::kInvalid;
      DebugLog("fd %d: no lease: invalid reply: %s", fd, invalid);
    } else if (reply.access != access) {
      outcome = LeaseOutcome::kInvalid;
      DebugLog("fd %d: no lease: invalid reply: not the access asked for", fd);
    } else if (reply.stamps_id != sessions.Get(session).facts.stamps_id &&
               (outcome = RenewSession(fd, priv, st.st_dev, sessions, *sources.session,
                                       &session)) != LeaseOutcome::kGranted) {
      // RenewSession said why.
    } else if (const char* foreign =
                   CheckReplyInSession(reply, sessions.Get(session).facts);
               foreign != nullptr) {
      outcome = LeaseOutcome::kInvalid;
      DebugLog("fd %d: no lease: reply does not fit the session: %s", fd, foreign);
    } else if (!sources.same_description(fd, priv)) {
      // fd was closed and reused while we asked: the lease is the old description's.
      outcome = LeaseOutcome::kReused;
      DebugLog("fd %d: no lease: the descriptor changed while leasing", fd);
    }
  }
  if (outcome == LeaseOutcome::kGranted) {
    LeaseMapping mapping;
    const char* reason = "";
    const int map_err = MapLease(reply, sessions, session, &mapping, &reason);
    session = -1;  // MapLease took the reference
    if (map_err != 0) {
      outcome = LeaseOutcome::kMapFailed;
      DebugLog("fd %d: no lease: %s: %s", fd, reason, strerror(-map_err));
    } else if (!table.ReplaceIf(fd, entry, mapping, &private_cell)) {
      // Closed, reopened or already leased by another thread meanwhile: the slot is not
      // ours to fill. Its new owner decides for itself.
      UnmapLease(mapping);
      outcome = LeaseOutcome::kReused;
      DebugLog("fd %d: no lease: the descriptor changed while leasing", fd);
    } else {
      DebugLog("fd %d: %s lease granted: walfs inode %llu, %llu bytes in %u run(s)", fd,
               access == lease::kAccessRead ? "read" : "write",
               static_cast<unsigned long long>(reply.ino),
               static_cast<unsigned long long>(reply.leased_size), reply.run_count);
    }
  }
  if (session >= 0) sessions.Release(session);
  // Still ours unless the entry took it: closing it sends the daemon a FLUSH, which
  // revokes whatever the ioctl granted.
  owned.Close(&private_cell);
  // While `pending` holds its reference the entry cannot be retired and reused, so the
  // slot comparison cannot mistake a newer entry for it.
  if (outcome != LeaseOutcome::kGranted) table.UntrackIf(fd, entry);
  pending.Reset();
  errno = saved_errno;
  return outcome;
}

}  // namespace walfs::direct
