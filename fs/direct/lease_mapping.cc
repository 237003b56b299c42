// Mapping a validated lease: pool identity, lock, runs, power-cut image.
#include "fs/direct/lease_mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/direct/real_calls.h"

namespace walfs::direct {
namespace {

// Maps [offset, offset+length) of fd read-write. MAP_SYNC guarantees that the mapping's
// page tables stay valid for cache-flush durability on a DAX file system; tmpfs and
// device-DAX refuse it (EOPNOTSUPP/EINVAL), and there the plain shared mapping is what
// the daemon uses as well.
char* MapRun(int fd, uint64_t offset, uint64_t length, bool try_sync, bool* sync_refused) {
  if (try_sync) {
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC,
                   fd, static_cast<off_t>(offset));
    if (p != MAP_FAILED) return static_cast<char*>(p);
    if (errno != EOPNOTSUPP && errno != EINVAL) return nullptr;
    *sync_refused = true;
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(offset));
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

void UnmapRuns(LeaseMapping& m) {
  for (uint32_t i = 0; i < m.run_count; ++i) {
    MappedRun& run = m.runs[i];
    if (run.pool_addr != nullptr) munmap(run.pool_addr, run.length);
    if (run.image_addr != nullptr) munmap(run.image_addr, run.length);
    run.pool_addr = nullptr;
    run.image_addr = nullptr;
  }
}

// Maps the page of reply.stamp_path that holds the stamp word, read-only. The word is
// the daemon's: the file must be a regular file of the pool's owner (whom the daemon
// gives it to), big enough, and hold the reply's stamp now.
int MapStamp(const lease::Reply& reply, int pool_fd, LeaseMapping* out, const char** reason) {
  const int fd = real::Open(reply.stamp_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
  if (fd < 0) {
    *reason = "cannot open the lease stamps";
    return -errno;
  }
  struct stat st, pool_st;
  int err = 0;
  if (fstat(fd, &st) != 0 || fstat(pool_fd, &pool_st) != 0) {
    err = -errno;
    *reason = "cannot stat the lease stamps";
  } else if (!S_ISREG(st.st_mode) || st.st_uid != pool_st.st_uid) {
    err = -EPERM;
    *reason = "lease stamps are not a regular file of the pool's owner";
  } else if (static_cast<uint64_t>(st.st_size) < sizeof(uint64_t) ||
             reply.stamp_offset > static_cast<uint64_t>(st.st_size) - sizeof(uint64_t)) {
    err = -ERANGE;
    *reason = "stamp_offset lies past the end of the lease stamps";
  }
  if (err == 0) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t base = reply.stamp_offset / page * page;
    void* p = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(base));
    if (p == MAP_FAILED) {
      err = -errno;
      *reason = "mmap of the lease stamps failed";
    } else {
      out->stamp_page = p;
      out->stamp = reinterpret_cast<const std::atomic<uint64_t>*>(static_cast<char*>(p) +
                                                                   (reply.stamp_offset - base));
      out->stamp_value = reply.stamp;
      if (!LeaseCurrent(*out)) {
        err = -ESTALE;
        *reason = "the lease was revoked before it was mapped (a concurrent close)";
      }
    }
  }
  real::Close(fd);
  return err;
}

// A run past the end of a regular file would map, then SIGBUS on the first store.
bool RunsFit(const lease::Reply& reply, uint64_t file_size) {
  for (uint32_t i = 0; i < reply.run_count; ++i) {
    const lease::Run& run = reply.runs[i];
    if (run.pool_offset > file_size || run.length > file_size - run.pool_offset) return false;
  }
  return true;
}

}  // namespace

int MapLease(const lease::Reply& reply, PoolFiles& pools, LeaseMapping* out,
             const char** reason) {
  *out = LeaseMapping{};
  uint64_t pool_size = 0;
  int pool_fd = -1;
  const int handle = pools.Acquire({.path = reply.pool_path,
                                     .dev = reply.pool_dev,
                                     .ino = reply.pool_ino,
                                     .uuid_offset = reply.uuid_offset,
                                     .uuid = reply.uuid},
                                    &pool_fd, &pool_size);
  if (handle < 0) {
    *reason = handle == -EXDEV    ? "pool path is not the pool the daemon serves (dev/ino)"
              : handle == -EILSEQ ? "pool uuid differs"
                                  : "cannot open and read-lock the pool";
    return handle;
  }
  out->leased_size = reply.leased_size;
  out->walfs_ino = reply.ino;
  out->pools = &pools;
  out->pool_handle = handle;
  out->run_count = reply.run_count;
  if (pool_size != 0 && !RunsFit(reply, pool_size)) {
    *reason = "a run lies past the end of the pool file";
    UnmapLease(*out);
    return -ERANGE;
  }
  if (const int err = MapStamp(reply, pool_fd, out, reason); err != 0) {
    UnmapLease(*out);
    return err;
  }

  int image_fd = -1;
  if ((reply.flags & lease::kFlagImage) != 0) {
    image_fd = real::Open(reply.image_path, O_RDWR | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    int err = 0;
    if (image_fd < 0 || fstat(image_fd, &st) != 0) {
      err = -errno;
    } else if (S_ISREG(st.st_mode) && !RunsFit(reply, static_cast<uint64_t>(st.st_size))) {
      err = -ERANGE;
    }
    if (err != 0) {
      if (image_fd >= 0) real::Close(image_fd);
      *reason = "cannot open the power-cut image";
      UnmapLease(*out);
      return err;
    }
  }

  bool try_sync = !pools.MapSyncRefused(handle);
  int err = 0;
  for (uint32_t i = 0; i < reply.run_count && err == 0; ++i) {
    const lease::Run& run = reply.runs[i];
    MappedRun& mapped = out->runs[i];
    mapped.file_offset = run.file_offset;
    mapped.length = run.length;
    mapped.pool_offset = run.pool_offset;
    bool sync_refused = false;
    mapped.pool_addr = MapRun(pool_fd, run.pool_offset, run.length, try_sync, &sync_refused);
    if (sync_refused) {
      pools.SetMapSyncRefused(handle);
      try_sync = false;
    }
    if (mapped.pool_addr == nullptr) {
      err = -errno;
      *reason = "mmap of a pool run failed";
    } else if (image_fd >= 0) {
      bool ignored = false;
      mapped.image_addr = MapRun(image_fd, run.pool_offset, run.length, false, &ignored);
      if (mapped.image_addr == nullptr) {
        err = -errno;
        *reason = "mmap of a power-cut image run failed";
      }
    }
  }
  // A mapping keeps its file referenced; the image needs no descriptor of its own.
  if (image_fd >= 0) real::Close(image_fd);
  if (err != 0) {
    UnmapLease(*out);
    return err;
  }
  return 0;
}

void UnmapLease(LeaseMapping& mapping) {
  UnmapRuns(mapping);
  if (mapping.stamp_page != nullptr) {
    munmap(mapping.stamp_page, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  }
  mapping.stamp_page = nullptr;
  mapping.stamp = nullptr;
  if (mapping.pools != nullptr && mapping.pool_handle >= 0) {
    mapping.pools->Release(mapping.pool_handle);
  }
  mapping.pools = nullptr;
  mapping.pool_handle = -1;
  mapping.run_count = 0;
}

}  // namespace walfs::direct
