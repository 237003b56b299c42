// Mapping a validated lease from its session's descriptors.
#include "fs/direct/lease_mapping.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace walfs::direct {
namespace {

// Maps [offset, offset+length) of fd read-write, MAP_SYNC first (L7).
char* MapRun(MmapFn map_fn, int fd, uint64_t offset, uint64_t length, bool plain_ok,
             const char** reason) {
  void* p = map_fn(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd,
                   static_cast<off_t>(offset));
  if (p != MAP_FAILED) return static_cast<char*>(p);
  if (errno != EOPNOTSUPP && errno != EINVAL) {
    *reason = "mmap of a pool run failed";
    return nullptr;
  }
  if (!plain_ok) {
    *reason = "MAP_SYNC refused and the pool is neither device-DAX nor forced durable";
    errno = ENOTSUP;
    return nullptr;
  }
  p = map_fn(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    *reason = "mmap of a pool run failed";
    return nullptr;
  }
  return static_cast<char*>(p);
}

// Maps the page of the stamps holding the lease's word, read-only, and checks it holds
// the reply's stamp now.
int MapStamp(const lease::Reply& reply, int stamps_fd, LeaseMapping* out, const char** reason) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t base = reply.stamp_offset / page * page;
  void* p = mmap(nullptr, page, PROT_READ, MAP_SHARED, stamps_fd, static_cast<off_t>(base));
  if (p == MAP_FAILED) {
    *reason = "mmap of the lease stamps failed";
    return -errno;
  }
  out->stamp_page = p;
  out->stamp = reinterpret_cast<const std::atomic<uint64_t>*>(static_cast<char*>(p) +
                                                               (reply.stamp_offset - base));
  out->stamp_value = reply.stamp;
  if (!LeaseCurrent(*out)) {
    *reason = "the lease was revoked before it was mapped (a concurrent close)";
    return -ESTALE;
  }
  return 0;
}

}  // namespace

const char* CheckReplyInSession(const lease::Reply& reply, const SessionFacts& facts) {
  if (memcmp(reply.uuid, facts.area.uuid, sizeof(reply.uuid)) != 0) {
    return "uuid is not the session pool's";
  }
  if (reply.stamps_id != facts.stamps_id) return "stamps_id is not the session's";
  for (uint32_t i = 0; i < reply.run_count && i < lease::kMaxRuns; ++i) {
    const lease::Run& run = reply.runs[i];
    if (run.pool_offset < facts.area.data_begin || run.pool_offset > facts.area.data_end ||
        run.length > facts.area.data_end - run.pool_offset) {
      return "a run lies outside the pool's data area";
    }
  }
  if (reply.stamp_offset % sizeof(uint64_t) != 0 ||
      reply.stamp_offset / sizeof(uint64_t) >= facts.stamp_slots) {
    return "stamp_offset lies outside the stamps";
  }
  return nullptr;
}

bool PlainMappingDurable(const SessionFacts& facts) {
  return facts.area.is_device || facts.durability == lease::kDurabilityForced;
}

int MapLease(const lease::Reply& reply, Sessions& sessions, int session, LeaseMapping* out,
             const char** reason, MmapFn map_fn) {
  if (map_fn == nullptr) map_fn = mmap;
  *out = LeaseMapping{};
  out->sessions = &sessions;
  out->session = session;
  out->leased_size = reply.leased_size;
  out->walfs_ino = reply.ino;
  out->access = reply.access;
  const bool read_only = reply.access == lease::kAccessRead;
  out->run_count = reply.run_count;
  const Sessions::Session& s = sessions.Get(session);
  if (const int err = MapStamp(reply, s.stamps_fd.load(std::memory_order_relaxed), out, reason);
      err != 0) {
    UnmapLease(*out);
    return err;
  }
  const bool plain_ok = PlainMappingDurable(s.facts);
  const int pool_fd = s.pool_fd.load(std::memory_order_relaxed);
#ifdef WALFS_TEST_FACILITIES
  const int image_fd = s.image_fd.load(std::memory_order_relaxed);
#endif
  for (uint32_t i = 0; i < reply.run_count; ++i) {
    const lease::Run& run = reply.runs[i];
    MappedRun& mapped = out->runs[i];
    mapped.file_offset = run.file_offset;
    mapped.length = run.length;
    mapped.pool_offset = run.pool_offset;
    if (read_only) {
      void* p = map_fn(nullptr, run.length, PROT_READ, MAP_SHARED, pool_fd,
                       static_cast<off_t>(run.pool_offset));
      mapped.pool_addr = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
      if (p == MAP_FAILED) *reason = "mmap of a pool run failed";
    } else {
      mapped.pool_addr = MapRun(map_fn, pool_fd, run.pool_offset, run.length, plain_ok, reason);
    }
    if (mapped.pool_addr == nullptr) {
      const int err = -errno;
      UnmapLease(*out);
      return err;
    }
#ifdef WALFS_TEST_FACILITIES
    if (image_fd >= 0 && !read_only) {
      void* p = mmap(nullptr, run.length, PROT_READ | PROT_WRITE, MAP_SHARED, image_fd,
                     static_cast<off_t>(run.pool_offset));
      if (p == MAP_FAILED) {
        const int err = -errno;
        *reason = "mmap of a power-cut image run failed";
        UnmapLease(*out);
        return err;
      }
      mapped.image_addr = static_cast<char*>(p);
    }
#endif
  }
  return 0;
}

void UnmapLease(LeaseMapping& m) {
  for (uint32_t i = 0; i < m.run_count; ++i) {
    MappedRun& run = m.runs[i];
    if (run.pool_addr != nullptr) munmap(run.pool_addr, run.length);
    run.pool_addr = nullptr;
#ifdef WALFS_TEST_FACILITIES
    if (run.image_addr != nullptr) munmap(run.image_addr, run.length);
    run.image_addr = nullptr;
#endif
  }
  if (m.stamp_page != nullptr) munmap(m.stamp_page, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  m.stamp_page = nullptr;
  m.stamp = nullptr;
  if (m.sessions != nullptr && m.session >= 0) m.sessions->Release(m.session);
  m.sessions = nullptr;
  m.session = -1;
  m.run_count = 0;
}

}  // namespace walfs::direct
