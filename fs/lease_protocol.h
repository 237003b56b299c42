// The direct-access lease: the one interface between the walfs daemon and the client
// library (libwalfs-direct.so) that PostgreSQL preloads.
//
// A client holding a writable descriptor of a file on a walfs mount asks for a lease
// with ioctl(fd, kWalfsIoctlLease, &reply). FUSE delivers this restricted ioctl to the
// daemon's ioctl callback tied to the open handle (the size is encoded in the command,
// so the reply is a fixed-size struct). The reply says where the file's bytes
// [0, leased_size) live in the pool; the client maps exactly those runs of the pool file
// (never the superblock, journal, inode or dirent tables, never other files) and stores
// writes that fall entirely inside [0, leased_size) itself, persisting them before the
// write call returns. Everything else goes through FUSE.
//
// What the daemon guarantees while a handle holds a lease (until its RELEASE):
//  - the runs named in the reply stay owned by that inode: never freed, moved, zeroed or
//    reused. Truncate below leased_size fails with ETXTBSY; unlink and rename-over keep
//    the inode as an orphan until the last leased handle is released.
//  - the file's size is at least leased_size and is durable (pmem mode commits sizes
//    before replying), so a direct store inside the lease needs no metadata change.
//  - leases are granted only in pmem mode (real PMEM or PMEM_IS_PMEM_FORCE), where a
//    store made durable with cache flushes and a fence is durable in the pool. In msync
//    mode the ioctl fails with EOPNOTSUPP and the client falls back to FUSE.
// On RELEASE of a leased handle the daemon sets mtime/ctime (the client's stores did not
// go through FUSE) and commits them.
//
// Revocation (fs/lease_stamps.h): the reply names one 64-bit word of a shared file
// (stamp_path, stamp_offset) and the stamp it holds now. The daemon writes a new stamp
// there at every FLUSH of the handle (the kernel sends one for each close(2) of any
// descriptor of it, before close returns) and at its RELEASE, so in pmem mode FLUSH is
// always answered, never ENOSYS. A client that reads anything but its stamp stops using
// the lease for that descriptor and sends the call to the kernel: a descriptor number
// closed where the library did not see it and reused for another file never gets a
// direct store, and no store is made for a handle the daemon has released.
//
// What the client guarantees:
//  - it checks that the file it opened by pool_path is the pool the daemon serves
//    (st_dev/st_ino of the opened file equal pool_dev/pool_ino, and the 16 bytes at
//    uuid_offset equal uuid) before mapping anything, else it does not use the lease;
//  - while it has any mapping of the pool it holds an open file description of the pool
//    file with an OFD read lock on [kClientLockOffset, +kClientLockLength). The daemon
//    refuses to mount a pool while such a lock is held (it would otherwise reclaim
//    orphans whose blocks a surviving client still maps);
//  - before each direct store and each fsync it answers itself it compares the stamp
//    word with the reply's stamp, and falls back to the kernel when they differ;
//  - a write it stores itself is durable when the call returns (non-temporal copy or
//    flush, then a fence, in the writing thread), so fsync/fdatasync on the descriptor
//    have nothing left to do.
//
// Power-cut simulation (-o powercut_sim, tests only): the daemon serves reads from a
// written image that only persisted bytes leave. The reply then sets kLeaseFlagImage and
// names that image file in image_path: the client stores each write into the image at
// the same offsets (so the daemon's reads see it) and makes it durable in pool_path as
// usual. Killing the daemon and the clients then leaves only what was persisted.
//
// Layout: fixed-width little-endian fields, no pointers; the struct is the ioctl's
// payload, so its size is part of the command number and any change to it is a new
// command (old clients then get ENOTTY and fall back).
#ifndef WALFS_FS_LEASE_PROTOCOL_H_
#define WALFS_FS_LEASE_PROTOCOL_H_

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

#include "core/format.h"

namespace walfs::lease {

inline constexpr uint32_t kMagic = 0x4c534657;  // "WFSL" little-endian
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kMaxRuns = 26;        // an inode's extent limit (format.h)
inline constexpr uint32_t kPathBytes = 4096;    // PATH_MAX, NUL included

// Reply.mode
inline constexpr uint32_t kModePmem = 1;

// Reply.flags
inline constexpr uint32_t kFlagImage = 1u << 0;  // power-cut simulation, see above

// The byte range of the pool file a client read-locks (F_OFD_SETLK, F_RDLCK) for as long
// as it maps any part of the pool; the daemon, mkfs.walfs --force and fsck.walfs --repair
// test it with F_OFD_GETLK/F_WRLCK (core/pool_clients.h) and refuse the pool while held.
inline constexpr int64_t kClientLockOffset = core::format::kClientLockOffset;
inline constexpr int64_t kClientLockLength = core::format::kClientLockLength;

// Pool bytes [pool_offset, pool_offset + length) hold file bytes
// [file_offset, file_offset + length). pool_offset and length are multiples of the pool
// block size (4096), so each run can be mapped on its own; the client must not store
// past leased_size even where the last run extends beyond it.
struct Run {
  uint64_t file_offset;
  uint64_t pool_offset;
  uint64_t length;
};
static_assert(sizeof(Run) == 24);

struct Reply {
  uint32_t magic;    // kMagic: proves a walfs daemon answered
  uint32_t version;  // kVersion
  uint32_t mode;     // kModePmem
  uint32_t flags;    // kFlag*
  uint64_t ino;      // the walfs inode (for messages only; never compared with st_ino)
  uint64_t leased_size;  // file bytes [0, leased_size) are covered by the runs
  uint64_t block_size;   // pool block size; runs are multiples of it
  uint64_t pool_dev;     // st_dev of the pool file as the daemon opened it
  uint64_t pool_ino;     // st_ino of the pool file
  uint64_t uuid_offset;  // pool file offset of the pool's 16-byte uuid
  uint8_t uuid[16];
  uint32_t run_count;  // <= kMaxRuns
  uint32_t reserved0;
  uint64_t stamp;         // non-zero; the word at stamp_offset holds it while the lease stands
  uint64_t stamp_offset;  // byte offset of the handle's 8-byte word in stamp_path (8-aligned)
  Run runs[kMaxRuns];
  char pool_path[kPathBytes];   // absolute, NUL-terminated
  char image_path[kPathBytes];  // with kFlagImage: absolute, NUL-terminated; else empty
  char stamp_path[kPathBytes];  // absolute, NUL-terminated: the revocation stamps
};
static_assert(sizeof(Reply) == 104 + 24 * kMaxRuns + 3 * kPathBytes);
static_assert(offsetof(Reply, runs) == 104);
// _IOC_SIZE has 14 bits: the whole reply must fit in one restricted ioctl.
static_assert(sizeof(Reply) < (1u << 14));

// 'W' 0x01, read (daemon -> client), sizeof(Reply) bytes.
inline constexpr unsigned long kIoctlLease = _IOR('W', 0x01, Reply);

}  // namespace walfs::lease

#endif  // WALFS_FS_LEASE_PROTOCOL_H_
