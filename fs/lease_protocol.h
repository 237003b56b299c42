// The direct-access protocol: the one interface between the walfs daemon and the client
// library (libwalfs-direct.so) that PostgreSQL preloads. The lease rules themselves (the
// state table and the numbered invariants L1-L9 that code and tests cite) are in
// docs/design/lease.md; this header is the wire format and who checks what.
//
// Two steps, both started by the client, both answered only to the pool's owner or root
// (the caller's uid as FUSE reports it, and SO_PEERCRED on the socket): anyone else gets
// EPERM and writes through FUSE.
//
// 1. Session (once per process and mount). The client cannot be told where the pool is
//    by a path: any user can mount a FUSE file system of type fuse.walfs and answer with
//    the name of a file the client may write (L1). So the pool comes as a descriptor
//    from the daemon itself:
//    a. the client binds a listening unix socket at <mount root>/<kSessionPrefix><token>
//       (the kernel asks the daemon, which MKNOD is a virtual socket node: never in the
//       pool, hidden from readdir, mode 0600, owned by the caller; only in the mount's
//       root, only S_IFSOCK, only so many at once);
//    b. the client calls ioctl(fd, kIoctlSession, &request) on any walfs file it has open,
//       naming that socket. The daemon checks the caller, that the name is a virtual node
//       the same pid created, and that a copy + drain is durable on this pool (L7), then
//       replies 0 and afterwards (not from the request's thread: resolving the name may
//       need the daemon's own workers) connects to the socket through its own mount,
//       checks SO_PEERCRED (the uid of the ioctl's caller), and sends one SessionHello
//       with SCM_RIGHTS descriptors: [0] the pool, opened anew O_RDWR for this client (its
//       own open file description, so the client's OFD read lock is its own), [1] the
//       revocation stamps, a memfd sealed against writes by anyone but the daemon's own
//       mapping (F_SEAL_FUTURE_WRITE, F_SEAL_SHRINK, F_SEAL_GROW), and, with
//       kHelloFlagImage in a test build only, [2] the power-cut image.
//    c. the client accepts the connection (a short bounded wait), checks SO_PEERCRED (uid
//       its own or root), receives the hello, then closes both sockets and unlinks the
//       name. It reads the superblock from descriptor [0] itself (magic, version,
//       checksum) and requires the hello's uuid to equal it; it requires [1] to be sealed
//       and stamp_slots words long. Anything else: no session, every call to the kernel.
//    A session is a socket bound in the mount, not a path outside it, so it works in a
//    container or chroot that sees only the mount (L8). A listening socket pins its
//    mount (umount says EBUSY), which is why the client binds it, for the milliseconds
//    of step 1, and the daemon never does.
//    The client keeps a session's descriptors after its last lease is gone (unlocked,
//    L6), so a process that reads segment after segment pays for step 1 once. Whether a
//    kept session is still its daemon's is what stamps_id answers: random per daemon,
//    in the hello and in every lease reply; a reply naming other stamps ends the kept
//    session and the client makes a new one.
//
// 2. Lease (once per open file description, at its first direct write or read). The
//    client calls ioctl(fd, kIoctlLease, &reply) with reply.access set: kAccessWrite on a
//    handle opened for writing (not O_APPEND), kAccessRead on one opened read-only. The
//    daemon answers with the pool runs holding file bytes [0, leased_size), the pool's
//    uuid and the handle's stamp word. The client accepts a reply only if its uuid and
//    stamps_id are the session's and every run lies inside the data area of the
//    superblock it read itself, [data_offset, end of the pool descriptor), whatever else
//    the reply says (L1).
//
// A read lease (kAccessRead) pins nothing, so a reader can never make another process's
// truncate, unlink or rename fail. Instead (L9): the daemon revokes every read lease on
// a file (a new stamp) before it changes the file's size downwards, and grants none
// while it does; the client maps the runs read-only and compares the stamp before and
// after each copy, discarding the copy and asking the kernel when it changed. A copy
// whose second comparison passed read only bytes the file held: had the runs changed
// owner during it, their new owner's stores would come after the revocation.
//
// What the daemon guarantees while a handle holds a write lease (until its RELEASE):
//  - the runs stay owned by that inode: never freed, moved, zeroed or reused. Truncate
//    below leased_size fails with ETXTBSY; unlink and rename-over keep the inode as an
//    orphan until the last leased handle is released (L2).
//  - the file's size is at least leased_size and is durable (pmem mode commits sizes
//    before replying), so a store inside the lease needs no metadata change.
//  - a new stamp in the handle's word before it replies to every FLUSH of the handle (the
//    kernel sends one for each close(2) of any descriptor of it) and at its RELEASE (L4).
// On RELEASE of a leased handle the daemon sets mtime/ctime and commits them.
//
// What the client guarantees:
//  - each lease entry holds a private close-on-exec duplicate of the leased descriptor,
//    closed only after the last store through the entry has returned. The daemon's
//    RELEASE, and so any reclaim of the runs, therefore comes after every store (L3):
//    blocks a client may store into belong to the leased file until the client's last
//    store through the lease has returned.
//  - before each direct store and each fsync it answers itself it compares the stamp
//    word with the reply's stamp, and falls back to the kernel when they differ (L4).
//  - while it maps any part of a pool it holds the session's pool description with an
//    OFD read lock on [kClientLockOffset, +kClientLockLength): the daemon refuses to mount
//    a pool while such a lock is held (L6).
//  - a store it makes itself is durable when the call returns (non-temporal copy or flush,
//    then a fence, in the writing thread), and only on a mapping where that is true:
//    MAP_SYNC accepted, a device-DAX descriptor, or kDurabilityForced (L7).
//
// Layout: fixed-width little-endian fields, no pointers. The ioctl structs are their
// commands' payloads, so their sizes are part of the command numbers and any change to
// them is a new command (old clients then get ENOTTY and fall back).
#ifndef WALFS_FS_LEASE_PROTOCOL_H_
#define WALFS_FS_LEASE_PROTOCOL_H_

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

#include "core/format.h"

namespace walfs::lease {

inline constexpr uint32_t kMagic = 0x4c534657;  // "WFSL" little-endian
inline constexpr uint32_t kVersion = 4;
inline constexpr uint32_t kMaxRuns = 26;  // an inode's extent limit (format.h)

// The byte range of the pool file a client read-locks (F_OFD_SETLK, F_RDLCK) for as long
// as it maps any part of the pool; the daemon, mkfs.walfs --force and fsck.walfs --repair
// test it with F_OFD_GETLK/F_WRLCK (core/pool_clients.h) and refuse the pool while held.
inline constexpr int64_t kClientLockOffset = core::format::kClientLockOffset;
inline constexpr int64_t kClientLockLength = core::format::kClientLockLength;

// ---- session ---------------------------------------------------------------------------

// Names <kSessionPrefix><token> in the mount's root are the daemon's virtual socket nodes;
// token is 1-40 characters of [0-9A-Za-z_-.]. Nothing else may be created under the prefix.
inline constexpr char kSessionPrefix[] = ".walfs-direct.";
inline constexpr size_t kSessionNameBytes = 64;  // NUL included

struct SessionRequest {
  uint32_t magic;    // kMagic
  uint32_t version;  // kVersion
  char name[kSessionNameBytes];  // <kSessionPrefix><token>, NUL-terminated
};
static_assert(sizeof(SessionRequest) == 72);

// SessionHello.durability: why a non-temporal copy + drain into this pool is durable.
inline constexpr uint32_t kDurabilityMapSync = 1;  // fsdax: the client must get MAP_SYNC
inline constexpr uint32_t kDurabilityDevice = 2;   // device-DAX: a character device
inline constexpr uint32_t kDurabilityForced = 3;   // PMEM_IS_PMEM_FORCE=1 (tests,
                                                   // benchmarks): taken as durable
inline constexpr uint32_t kDurabilityReadsOnly = 4;  // msync mode: a store is durable only
                                                     // after the daemon's msync, so read
                                                     // leases only (L7, L9)

// SessionHello.flags
inline constexpr uint32_t kHelloFlagImage = 1u << 0;  // power-cut simulation (test
                                                      // builds): descriptor [2] follows

struct SessionHello {
  uint32_t magic;       // kMagic
  uint32_t version;     // kVersion
  uint32_t durability;  // kDurability*
  uint32_t flags;       // kHelloFlag*
  uint8_t uuid[16];     // the pool's uuid, as in its superblock
  uint64_t stamp_slots;  // descriptor [1] holds this many 8-byte words
  uint64_t stamps_id;    // non-zero, random per daemon: names descriptor [1]; every lease
                         // reply of this daemon carries it (Reply.stamps_id)
  uint64_t reserved[4];  // zero
};
static_assert(sizeof(SessionHello) == 80);

// 'W' 0x02, write (client -> daemon): SessionRequest. 0 means the hello is on its way.
inline constexpr unsigned long kIoctlSession = _IOW('W', 0x02, SessionRequest);

// ---- lease -----------------------------------------------------------------------------

// Reply.access (set by the client, echoed by the daemon)
inline constexpr uint32_t kAccessWrite = 1;  // store and copy out; pins the runs (L2)
inline constexpr uint32_t kAccessRead = 2;   // copy out only; pins nothing (L9)

// Pool bytes [pool_offset, pool_offset + length) hold file bytes
// [file_offset, file_offset + length). pool_offset and length are multiples of the pool
// block size, so each run can be mapped on its own; the client must not store past
// leased_size even where the last run extends beyond it.
struct Run {
  uint64_t file_offset;
  uint64_t pool_offset;
  uint64_t length;
};
static_assert(sizeof(Run) == 24);

struct Reply {
  uint32_t magic;    // kMagic: proves a walfs daemon answered
  uint32_t version;  // kVersion
  uint32_t access;   // kAccess*: in, what the client asks for; out, what is granted
  uint32_t flags;    // none defined: zero
  uint64_t ino;      // the walfs inode (for messages only; never compared with st_ino)
  uint64_t leased_size;  // file bytes [0, leased_size) are covered by the runs
  uint64_t block_size;   // pool block size; runs are multiples of it
  uint8_t uuid[16];      // must equal the session's pool uuid
  uint64_t stamp;         // non-zero; the handle's word holds it while the lease stands
  uint64_t stamp_offset;  // byte offset of the handle's 8-byte word in the stamps memfd
  uint32_t run_count;     // 1..kMaxRuns
  uint32_t reserved0;
  uint64_t stamps_id;     // the daemon's SessionHello.stamps_id: the stamps the word is in
  Run runs[kMaxRuns];
};
static_assert(sizeof(Reply) == 88 + 24 * kMaxRuns);
static_assert(offsetof(Reply, runs) == 88);

// 'W' 0x03, read and write: the client fills magic, version and access.
inline constexpr unsigned long kIoctlLease = _IOWR('W', 0x03, Reply);

}  // namespace walfs::lease

#endif  // WALFS_FS_LEASE_PROTOCOL_H_
