// FileHandle: what walfs remembers per open file (fuse_file_info::fh points at one).
#ifndef WALFS_FS_FILE_HANDLE_H_
#define WALFS_FS_FILE_HANDLE_H_

#include <fcntl.h>

#include <cstdint>
#include <mutex>

#include <fuse_lowlevel.h>

namespace walfs::fs {

struct FileHandle {
  int open_flags = 0;

  // Direct access: whether this handle holds a write lease on its inode, or a read lease
  // (fs/lease_protocol.h), released with the handle. lease_mu orders two ioctls racing
  // on one handle.
  std::mutex lease_mu;
  bool leased = false;       // write lease; guarded by lease_mu
  bool read_leased = false;  // read lease (fs/read_leases.h); guarded by lease_mu
  // The handle's revocation word (fs/lease_stamps.h), from its first lease to RELEASE;
  // -1 before. Guarded by lease_mu.
  int64_t stamp_slot = -1;

  bool Writable() const { return (open_flags & O_ACCMODE) != O_RDONLY; }

  // O_SYNC includes the O_DSYNC bit, so this covers both. The flags sent with each
  // WRITE count too: they carry RWF_DSYNC/RWF_SYNC of pwritev2 and, with direct_io,
  // are the only sign of an O_DSYNC write (no FSYNC follows it).
  bool SyncWrite(int write_flags) const { return ((open_flags | write_flags) & O_DSYNC) != 0; }

  static FileHandle* From(const fuse_file_info* fi) {
    return reinterpret_cast<FileHandle*>(static_cast<uintptr_t>(fi->fh));
  }
  void AttachTo(fuse_file_info* fi) {
    fi->fh = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(this));
  }
};

}  // namespace walfs::fs

#endif  // WALFS_FS_FILE_HANDLE_H_
