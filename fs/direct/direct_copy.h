// copy_file_range(2) out of a lease: the bytes of a leased walfs file are written into a
// file on another file system straight from the mapped pool runs, one copy.
//
// Why: the kernel refuses copy_file_range between file systems (EXDEV), after which cp,
// and anything else that tries it first, falls back to read(2) into a buffer and write(2)
// out of it: two copies of every byte. Here the write reads the mapping itself.
//
// Why it never leaves another file's bytes in the destination (L9): the copy is checked
// as a read is (CheckedCopyOut: the stamp before, the stamp after). When the stamp changed
// during the copy, the bytes already written may be the runs' next owner's; they are
// written again from the kernel's read of the source before the call returns, and the
// call reports only what it copied correctly.
//
// What stays the kernel's: flags, a destination the table tracks or on the source's
// file system (a walfs-to-walfs copy), one that is not a regular file, is read-only or
// O_APPEND (the kernel's EBADF/EINVAL), a source range outside the lease.
//
// The other direction, DirectCopyIntoEmpty: a restore_command's `cp` of an archived
// segment into pg_wal opens the destination empty, and the daemon leases no empty file.
// The copy allocates the destination's size first (fallocate through FUSE), after which
// the destination takes a write lease like any filled file and the bytes are stored into
// the pool by the direct write path, read from the source by the kernel.
#ifndef WALFS_FS_DIRECT_DIRECT_COPY_H_
#define WALFS_FS_DIRECT_DIRECT_COPY_H_

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>

#include "fs/direct/direct_read.h"

namespace walfs::direct {

// At most this much per call (callers loop until copy_file_range returns 0): it bounds
// what a revocation during the copy has to write again.
inline constexpr uint64_t kCopyChunk = 64ull << 20;

// Kernel is the set of real calls: Pread, Pwrite, Lseek, Fstat, Ftruncate, Fallocate,
// GetFl (F_GETFL), each with the libc signature and errno convention (Fstat need fill
// only st_dev, st_mode and st_size). Ask is called for a pending source
// (it takes the lease: LeasePending). Returns the byte count copied (> 0), -1 with errno
// set when the copy failed before any byte, or kCopyNotTaken (errno untouched): the
// caller makes the real call.
inline constexpr ssize_t kCopyNotTaken = -2;

// The size fd's lease covers, asking for the lease first when fd is pending (ask(fd)).
// False when fd holds no lease (or it was refused).
template <typename Ask>
bool LeasedSize(FdTable& table, int fd, Ask& ask, uint64_t* size) {
  {
    FdTable::Ref lease = table.Acquire(fd);
    if (!lease) return false;
    if (!lease.pending()) {
      *size = lease->leased_size;
      return true;
    }
    if (lease.pending_empty()) return false;
  }
  ask(fd);
  FdTable::Ref lease = table.Acquire(fd);
  if (!lease || lease.pending()) return false;
  *size = lease->leased_size;
  return true;
}

// Writes the n bytes at p to file offset pos with write(p, n, pos), a pwrite, retrying
// EINTR and short writes. Returns the byte count written: short only after a failed
// write, whose errno (EIO for a write of nothing) goes to *error.
template <typename Write>
size_t WriteAll(Write&& write, const char* p, size_t n, off_t pos, int* error) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = write(p + done, n - done, pos + static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *error = w < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  return done;
}

// After a copy found revoked: bytes [out_pos, out_pos + written) of out_fd are written
// again from the kernel's read of in_fd at `begin`. What the kernel no longer has (the
// source shrank meanwhile) is overwritten with zeros, and a destination the copy made
// longer than out_size is cut back, so no byte of another file stays behind. Returns how
// many bytes from out_pos on are now the source's.
template <typename Kernel>
uint64_t Rewrite(Kernel& kernel, int in_fd, off_t begin, int out_fd, off_t out_pos,
                 uint64_t written, off_t out_size) {
  auto pwrite_out = [&](const char* p, size_t n, off_t pos) {
    return kernel.Pwrite(out_fd, p, n, pos);
  };
  int error = 0;
  char buf[16384];
  uint64_t redone = 0;
  while (redone < written) {
    const size_t want = written - redone < sizeof buf ? written - redone : sizeof buf;
    const ssize_t r = kernel.Pread(in_fd, buf, want, begin + static_cast<off_t>(redone));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    const size_t n = static_cast<size_t>(r);
    if (WriteAll(pwrite_out, buf, n, out_pos + static_cast<off_t>(redone), &error) != n) break;
    redone += n;
  }
  if (redone == written) return redone;
  memset(buf, 0, sizeof buf);
  for (uint64_t z = redone; z < written;) {
    const size_t n = written - z < sizeof buf ? written - z : sizeof buf;
    if (WriteAll(pwrite_out, buf, n, out_pos + static_cast<off_t>(z), &error) != n) break;
    z += n;
  }
  const off_t end = out_pos + static_cast<off_t>(written);
  if (end > out_size) {
    const off_t keep = out_pos + static_cast<off_t>(redone);
    (void)kernel.Ftruncate(out_fd, keep > out_size ? keep : out_size);
  }
  return redone;
}

template <typename Kernel, typename Ask>
ssize_t DirectCopyFileRange(FdTable& table, int in_fd, loff_t* in_off, int out_fd,
                            loff_t* out_off, size_t len, unsigned flags, Kernel& kernel,
                            Ask&& ask) {
  if (flags != 0 || len == 0 || !table.IsTracked(in_fd) || table.IsTracked(out_fd)) {
    return kCopyNotTaken;
  }
  const int saved_errno = errno;
  struct stat out_st, in_st;
  const int out_fl = kernel.GetFl(out_fd);
  if (out_fl < 0 || (out_fl & O_ACCMODE) == O_RDONLY || (out_fl & O_APPEND) != 0 ||
      kernel.Fstat(out_fd, &out_st) != 0 || !S_ISREG(out_st.st_mode) ||
      kernel.Fstat(in_fd, &in_st) != 0 || in_st.st_dev == out_st.st_dev) {
    errno = saved_errno;
    return kCopyNotTaken;
  }
  // The source range: at *in_off, or reserved at in_fd's offset as read(2) would take it.
  uint64_t total = len < kCopyChunk ? len : kCopyChunk;
  off_t begin;
  if (in_off != nullptr) {
    if (*in_off < 0) return kCopyNotTaken;
    begin = *in_off;
  } else {
    const off_t here = kernel.Lseek(in_fd, 0, SEEK_CUR);
    if (here < 0) return errno = saved_errno, kCopyNotTaken;
    begin = here;
  }
  // Clip to the lease (bytes past it are the kernel's); nothing left: not taken.
  uint64_t leased_size = 0;
  if (!LeasedSize(table, in_fd, ask, &leased_size) ||
      static_cast<uint64_t>(begin) >= leased_size) {
    return errno = saved_errno, kCopyNotTaken;
  }
  if (total > leased_size - static_cast<uint64_t>(begin)) {
    total = leased_size - static_cast<uint64_t>(begin);
  }
  if (in_off == nullptr) {
    // Reserve [begin, begin + total) atomically, as AtFileOffset does for read(2).
    const off_t end = kernel.Lseek(in_fd, static_cast<off_t>(total), SEEK_CUR);
    if (end < 0) return errno = saved_errno, kCopyNotTaken;
    begin = end - static_cast<off_t>(total);
  }
  off_t out_pos;
  if (out_off != nullptr) {
    out_pos = *out_off;
  } else {
    const off_t end = kernel.Lseek(out_fd, static_cast<off_t>(total), SEEK_CUR);
    out_pos = end < 0 ? -1 : end - static_cast<off_t>(total);
  }

  // Writes the mapped bytes at out_pos onwards; stops at the first error or short write.
  uint64_t written = 0;
  int error = 0;
  auto pwrite_out = [&](const char* p, size_t n, off_t pos) {
    return kernel.Pwrite(out_fd, p, n, pos);
  };
  auto write_pieces = [&](const LeaseMapping& m) {
    RunCursor(m, static_cast<uint64_t>(begin))
        .Walk(total, [&](const MappedRun& run, uint64_t in_run, size_t n) {
          if (error != 0) return;
          written += WriteAll(pwrite_out, run.pool_addr + in_run, n,
                              out_pos + static_cast<off_t>(written), &error);
        });
  };
  DirectResult result = DirectResult::kNotInLease;
  if (out_pos >= 0) {
    result = CheckedCopyOut(table, in_fd, static_cast<uint64_t>(begin), total, write_pieces);
  }
  if (result == DirectResult::kStale && written > 0) {
    written = Rewrite(kernel, in_fd, begin, out_fd, out_pos, written, out_st.st_size);
    error = written == 0 ? EIO : 0;
  } else if (result != DirectResult::kStored) {
    written = 0;
  }
  // Offsets as the kernel's copy would leave them: moved by what was copied.
  if (in_off != nullptr) {
    *in_off += static_cast<loff_t>(written);
  } else if (written != total) {
    (void)kernel.Lseek(in_fd, begin + static_cast<off_t>(written), SEEK_SET);
  }
  if (out_off != nullptr) {
    *out_off += static_cast<loff_t>(written);
  } else if (out_pos >= 0 && written != total) {
    (void)kernel.Lseek(out_fd, out_pos + static_cast<off_t>(written), SEEK_SET);
  }
  if (written > 0) return errno = saved_errno, static_cast<ssize_t>(written);
  if (error != 0) return errno = error, -1;
  // Nothing copied and no error of the destination's (revoked first, or out of the
  // lease after the reservation): the kernel answers.
  errno = saved_errno;
  return kCopyNotTaken;
}

// The bounce buffer DirectCopyIntoEmpty reads the source into.
inline constexpr size_t kCopyInBuffer = 1u << 20;

// copy_file_range(in_fd -> out_fd) where out_fd is a walfs file the table tracks as
// pending for a write lease and empty (NoteOpen's kEmpty), at offset 0, and in_fd a
// regular file elsewhere that the table does not track: out_fd is first given the
// source's remaining size (Kernel::Fallocate, mode 0), then note_filled(out_fd) lets it
// take its lease (NoteSeek), and the bytes go through write_at(fd, buf, n, offset) (the
// library's pwrite: stored into the pool under the lease, or the kernel's pwrite where
// no lease is granted). Returns what kCopyNotTaken/DirectCopyFileRange return. A copy
// that ends short of the allocated size (a read error, the source shrank) cuts the
// destination back to what was copied (its lease ended first: a leased file cannot
// shrink).
template <typename Kernel, typename NoteFilled, typename WriteAt>
ssize_t DirectCopyIntoEmpty(FdTable& table, int in_fd, loff_t* in_off, int out_fd,
                            loff_t* out_off, size_t len, unsigned flags, Kernel& kernel,
                            NoteFilled&& note_filled, WriteAt&& write_at) {
  if (flags != 0 || len == 0 || table.IsTracked(in_fd) || !table.IsTracked(out_fd)) {
    return kCopyNotTaken;
  }
  {
    FdTable::Ref out = table.Acquire(out_fd);
    if (!out || !out.pending() || out.pending_access() != lease::kAccessWrite ||
        !out.pending_empty()) {
      return kCopyNotTaken;
    }
  }
  const int saved_errno = errno;
  auto not_taken = [&] {
    errno = saved_errno;
    return kCopyNotTaken;
  };
  struct stat in_st, out_st;
  const int out_fl = kernel.GetFl(out_fd);
  if (out_fl < 0 || (out_fl & O_APPEND) != 0 || kernel.Fstat(out_fd, &out_st) != 0 ||
      out_st.st_size != 0 || kernel.Fstat(in_fd, &in_st) != 0 || !S_ISREG(in_st.st_mode) ||
      in_st.st_dev == out_st.st_dev) {
    return not_taken();
  }
  const off_t out_pos = out_off != nullptr ? *out_off : kernel.Lseek(out_fd, 0, SEEK_CUR);
  const off_t in_pos = in_off != nullptr ? *in_off : kernel.Lseek(in_fd, 0, SEEK_CUR);
  if (out_pos != 0 || in_pos < 0 || in_pos >= in_st.st_size) return not_taken();
  const uint64_t left = static_cast<uint64_t>(in_st.st_size - in_pos);
  const uint64_t total = len < left ? len : left;
  char* const buf = static_cast<char*>(malloc(kCopyInBuffer));
  if (buf == nullptr) return not_taken();
  if (kernel.Fallocate(out_fd, 0, 0, static_cast<off_t>(total)) != 0) {
    free(buf);
    return not_taken();
  }
  note_filled(out_fd);
  auto write_out = [&](const char* p, size_t n, off_t pos) { return write_at(out_fd, p, n, pos); };
  uint64_t done = 0;
  int error = 0;
  while (done < total && error == 0) {
    const size_t want = total - done < kCopyInBuffer ? total - done : kCopyInBuffer;
    const ssize_t r = kernel.Pread(in_fd, buf, want, in_pos + static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      error = r < 0 ? errno : 0;
      break;
    }
    done += WriteAll(write_out, buf, static_cast<size_t>(r), static_cast<off_t>(done), &error);
  }
  free(buf);
  if (done < total) {
    // The allocated size was more than was copied: end the lease, then cut back.
    if (table.IsTracked(out_fd)) table.Untrack(out_fd);
    (void)kernel.Ftruncate(out_fd, static_cast<off_t>(done));
  }
  if (in_off != nullptr) {
    *in_off += static_cast<loff_t>(done);
  } else {
    (void)kernel.Lseek(in_fd, in_pos + static_cast<off_t>(done), SEEK_SET);
  }
  if (out_off != nullptr) {
    *out_off += static_cast<loff_t>(done);
  } else {
    (void)kernel.Lseek(out_fd, static_cast<off_t>(done), SEEK_SET);
  }
  if (done > 0) return errno = saved_errno, static_cast<ssize_t>(done);
  errno = error != 0 ? error : saved_errno;
  return error != 0 ? -1 : 0;
}

}  // namespace walfs::direct

#endif  // WALFS_FS_DIRECT_DIRECT_COPY_H_
