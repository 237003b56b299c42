// The lease decision at open, and validation of the daemon's reply.
#include "fs/direct/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs/direct/mounts.h"
#include "fs/direct/switches.h"

namespace walfs::direct {
namespace {

bool IsAbsolutePath(const char* path) {
  return memchr(path, '\0', lease::kPathBytes) != nullptr && path[0] == '/';
}

MountCache& ProcessMounts() {
  static constinit MountCache cache;
  return cache;
}

bool IsWalfsMount(dev_t dev) { return ProcessMounts().IsWalfs(dev); }

int IoctlLease(int fd, lease::Reply* reply) {
  return ioctl(fd, lease::kIoctlLease, reply) == 0 ? 0 : -errno;
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
  if (r.mode != lease::kModePmem) return "unknown mode";
  if ((r.flags & ~lease::kFlagImage) != 0) return "unknown flags";
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
  if (r.uuid_offset > static_cast<uint64_t>(INT64_MAX) - 16) return "uuid_offset overflows";
  if (r.stamp == 0) return "no stamp";
  if (r.stamp_offset % sizeof(uint64_t) != 0 ||
      r.stamp_offset > static_cast<uint64_t>(INT64_MAX) - sizeof(uint64_t)) {
    return "stamp_offset not 8-aligned or overflows";
  }
  if (!IsAbsolutePath(r.stamp_path)) return "stamp_path not absolute and NUL-terminated";
  if (!IsAbsolutePath(r.pool_path)) return "pool_path not absolute and NUL-terminated";
  if ((r.flags & lease::kFlagImage) != 0) {
    if (!IsAbsolutePath(r.image_path)) return "image_path not absolute and NUL-terminated";
  } else if (r.image_path[0] != '\0') {
    return "image_path set without kFlagImage";
  }
  return nullptr;
}

bool WantsLease(int flags) {
  const int access = flags & O_ACCMODE;
  return (access == O_WRONLY || access == O_RDWR) && (flags & (O_APPEND | O_PATH)) == 0;
}

const LeaseSources& ProductionLeaseSources() {
  static constexpr LeaseSources kSources = {
      .stat_fd = CachedStat,
      .is_walfs = IsWalfsMount,
      .ioctl_lease = IoctlLease,
  };
  return kSources;
}

LeaseOutcome NoteOpen(int fd, int flags, const LeaseSources& sources, FdTable& table) {
  if (!WantsLease(flags) || fd < 0 || fd >= FdTable::kFdBound) return LeaseOutcome::kNotWanted;
  const int saved_errno = errno;
  struct stat st;
  LeaseOutcome outcome;
  if (sources.stat_fd(fd, &st) != 0 || !S_ISREG(st.st_mode) || !sources.is_walfs(st.st_dev)) {
    outcome = LeaseOutcome::kNotWalfs;
  } else if (st.st_size == 0) {
    // Nothing is allocated, so the daemon would refuse (ENODATA): PostgreSQL's new
    // segments (xlogtemp.N, zero-filled through FUSE, then renamed and reopened) and
    // the empty files it opens for writing are not tracked at all.
    outcome = LeaseOutcome::kEmpty;
  } else if (!table.TrackPending(fd, st.st_dev, st.st_ino)) {
    outcome = LeaseOutcome::kTableFull;
    DebugLog("fd %d: no lease: fd table entry unavailable", fd);
  } else {
    outcome = LeaseOutcome::kPending;
  }
  errno = saved_errno;
  return outcome;
}

LeaseOutcome LeasePending(int fd, const LeaseSources& sources, FdTable& table,
                          PoolFiles& pools) {
  FdTable::Ref pending = table.Acquire(fd);
  if (!pending || !pending.pending()) return LeaseOutcome::kReused;
  const FdTable::Entry* entry = pending.entry();
  const int saved_errno = errno;
  struct stat st;
  LeaseOutcome outcome;
  // 12.9 KB: on the stack rather than the heap, as a write may run anywhere.
  lease::Reply reply;
  memset(&reply, 0, sizeof(reply));
  if (sources.stat_fd(fd, &st) != 0 || st.st_dev != entry->dev || st.st_ino != entry->ino) {
    // Not the file opened: the ioctl must not go to whatever fd is now.
    outcome = LeaseOutcome::kReused;
    DebugLog("fd %d: no lease: no longer the file opened", fd);
  } else if (const int err = sources.ioctl_lease(fd, &reply); err != 0) {
    outcome = LeaseOutcome::kIoctlFailed;
    DebugLog("fd %d: no lease: ioctl: %s", fd, strerror(-err));
  } else if (const char* invalid = ValidateReply(reply); invalid != nullptr) {
    outcome = LeaseOutcome::kInvalid;
    DebugLog("fd %d: no lease: invalid reply: %s", fd, invalid);
  } else {
    LeaseMapping mapping;
    const char* reason = "";
    const int map_err = MapLease(reply, pools, &mapping, &reason);
    if (map_err != 0) {
      outcome = LeaseOutcome::kMapFailed;
      DebugLog("fd %d: no lease: %s (%s): %s", fd, reason, reply.pool_path, strerror(-map_err));
    } else if (!table.ReplaceIf(fd, entry, mapping)) {
      // Closed, reopened or already leased by another thread meanwhile: the slot is not
      // ours to fill. Its new owner decides for itself.
      UnmapLease(mapping);
      outcome = LeaseOutcome::kReused;
      DebugLog("fd %d: no lease: the descriptor changed while leasing", fd);
    } else {
      outcome = LeaseOutcome::kGranted;
      DebugLog("fd %d: lease granted: walfs inode %llu, %llu bytes in %u run(s) of %s%s", fd,
               static_cast<unsigned long long>(reply.ino),
               static_cast<unsigned long long>(reply.leased_size), reply.run_count,
               reply.pool_path, (reply.flags & lease::kFlagImage) ? " (+ power-cut image)" : "");
    }
  }
  // While `pending` holds its reference the entry cannot be retired and reused, so the
  // slot comparison cannot mistake a newer entry for it.
  if (outcome != LeaseOutcome::kGranted) table.UntrackIf(fd, entry);
  pending.Reset();
  errno = saved_errno;
  return outcome;
}

}  // namespace walfs::direct
