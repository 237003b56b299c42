// A minimal lease-granting FUSE server standing in for the walfs daemon (whose side of
// fs/lease_protocol.h is not merged yet), so libwalfs-direct.so can be exercised in a
// real process against a real FUSE mount of type fuse.walfs.
//
//   walfs_direct_lease_server POOL MOUNTPOINT
//
// It creates POOL (1 MiB, uuid at kUuidOffset) and serves two files:
//   seg     48 KiB whose bytes live in two pool runs, out of pool order:
//           file [0, 16K) at pool 40K, file [16K, 48K) at pool 8K; reads and writes go to
//           the pool; the lease ioctl grants [0, 44K) on writable handles
//   writes  the number of WRITE requests seg has received, as decimal text
// Foreground, single-threaded; exits when unmounted.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include <fuse_lowlevel.h>

#include "fs/lease_protocol.h"

namespace {

constexpr uint64_t kPoolSize = 1 << 20;
constexpr uint64_t kUuidOffset = 512;
constexpr uint8_t kUuid[16] = {0x57, 0x41, 0x4c, 0x46, 0x53, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kFileSize = 48 * 1024;
constexpr uint64_t kLeasedSize = 44 * 1024;
constexpr fuse_ino_t kSegIno = 2;
constexpr fuse_ino_t kWritesIno = 3;
constexpr walfs::lease::Run kRuns[2] = {
    {.file_offset = 0, .pool_offset = 40 * 1024, .length = 16 * 1024},
    {.file_offset = 16 * 1024, .pool_offset = 8 * 1024, .length = 32 * 1024},
};

char* g_pool = nullptr;
std::string g_pool_path;
struct stat g_pool_st;
long g_writes = 0;

// Pool address of file offset `off` and how many bytes follow it in the same run.
char* At(uint64_t off, uint64_t* room) {
  for (const auto& run : kRuns) {
    if (off >= run.file_offset && off < run.file_offset + run.length) {
      *room = run.file_offset + run.length - off;
      return g_pool + run.pool_offset + (off - run.file_offset);
    }
  }
  *room = 0;
  return nullptr;
}

std::string WritesText() { return std::to_string(g_writes) + "\n"; }

void Attr(fuse_ino_t ino, struct stat* st) {
  memset(st, 0, sizeof(*st));
  st->st_ino = ino;
  st->st_nlink = 1;
  if (ino == FUSE_ROOT_ID) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
  } else if (ino == kSegIno) {
    st->st_mode = S_IFREG | 0600;
    st->st_size = kFileSize;
  } else {
    st->st_mode = S_IFREG | 0444;
    st->st_size = 64;
  }
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e = {};
  if (parent != FUSE_ROOT_ID) return (void)fuse_reply_err(req, ENOENT);
  if (strcmp(name, "seg") == 0) {
    e.ino = kSegIno;
  } else if (strcmp(name, "writes") == 0) {
    e.ino = kWritesIno;
  } else {
    return (void)fuse_reply_err(req, ENOENT);
  }
  Attr(e.ino, &e.attr);
  e.attr_timeout = 86400;
  e.entry_timeout = 86400;
  fuse_reply_entry(req, &e);
}

void Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  Attr(ino, &st);
  fuse_reply_attr(req, &st, 86400);
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kWritesIno && (fi->flags & O_ACCMODE) != O_RDONLY) {
    return (void)fuse_reply_err(req, EACCES);
  }
  // FUSE_IOCTL carries the handle but not the open flags: remember them in fh.
  fi->fh = static_cast<uint64_t>(fi->flags);
  fi->direct_io = 1;
  fi->keep_cache = 0;
  fuse_reply_open(req, fi);
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (ino == kWritesIno) {
    const std::string text = WritesText();
    if (static_cast<size_t>(off) >= text.size()) return (void)fuse_reply_buf(req, nullptr, 0);
    return (void)fuse_reply_buf(req, text.data() + off, std::min(size, text.size() - off));
  }
  std::string out;
  uint64_t pos = static_cast<uint64_t>(off);
  const uint64_t end = std::min<uint64_t>(kFileSize, pos + size);
  while (pos < end) {
    uint64_t room = 0;
    const char* p = At(pos, &room);
    const uint64_t n = std::min(room, end - pos);
    out.append(p, n);
    pos += n;
  }
  fuse_reply_buf(req, out.data(), out.size());
}

void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info*) {
  if (ino != kSegIno) return (void)fuse_reply_err(req, EBADF);
  if (static_cast<uint64_t>(off) + size > kFileSize) return (void)fuse_reply_err(req, EFBIG);
  ++g_writes;
  uint64_t pos = static_cast<uint64_t>(off);
  size_t done = 0;
  while (done < size) {
    uint64_t room = 0;
    char* p = At(pos, &room);
    const size_t n = std::min<uint64_t>(room, size - done);
    memcpy(p, buf + done, n);
    done += n;
    pos += n;
  }
  fuse_reply_write(req, size);
}

void Ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info* fi,
           unsigned flags, const void*, size_t, size_t out_bufsz) {
  if (cmd != static_cast<unsigned>(walfs::lease::kIoctlLease) || (flags & FUSE_IOCTL_COMPAT)) {
    return (void)fuse_reply_err(req, ENOTTY);
  }
  if (ino != kSegIno) return (void)fuse_reply_err(req, ENODATA);
  if ((static_cast<int>(fi->fh) & O_ACCMODE) == O_RDONLY) return (void)fuse_reply_err(req, EBADF);
  if (out_bufsz < sizeof(walfs::lease::Reply)) return (void)fuse_reply_err(req, EINVAL);
  walfs::lease::Reply r;
  memset(&r, 0, sizeof(r));
  r.magic = walfs::lease::kMagic;
  r.version = walfs::lease::kVersion;
  r.mode = walfs::lease::kModePmem;
  r.ino = ino;
  r.leased_size = kLeasedSize;
  r.block_size = kBlock;
  r.pool_dev = g_pool_st.st_dev;
  r.pool_ino = g_pool_st.st_ino;
  r.uuid_offset = kUuidOffset;
  memcpy(r.uuid, kUuid, sizeof(kUuid));
  r.run_count = 2;
  r.runs[0] = kRuns[0];
  r.runs[1] = kRuns[1];
  snprintf(r.pool_path, sizeof(r.pool_path), "%s", g_pool_path.c_str());
  fuse_reply_ioctl(req, 0, &r, sizeof(r));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s POOL MOUNTPOINT\n", argv[0]);
    return 2;
  }
  char resolved[PATH_MAX];
  const int pool_fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (pool_fd < 0 || ftruncate(pool_fd, kPoolSize) != 0 ||
      pwrite(pool_fd, kUuid, sizeof(kUuid), kUuidOffset) != sizeof(kUuid) ||
      fstat(pool_fd, &g_pool_st) != 0 || realpath(argv[1], resolved) == nullptr) {
    perror("pool");
    return 1;
  }
  g_pool_path = resolved;
  void* map = mmap(nullptr, kPoolSize, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd, 0);
  if (map == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  g_pool = static_cast<char*>(map);

  fuse_lowlevel_ops ops = {};
  ops.lookup = Lookup;
  ops.getattr = Getattr;
  ops.open = Open;
  ops.read = Read;
  ops.write = Write;
  ops.ioctl = Ioctl;
  char* fuse_argv[] = {argv[0], const_cast<char*>("-o"),
                       const_cast<char*>("subtype=walfs,fsname=lease-server"), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), nullptr);
  if (se == nullptr || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[2]) != 0) {
    fprintf(stderr, "cannot mount %s\n", argv[2]);
    return 1;
  }
  const int rc = fuse_session_loop(se);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 ? 0 : 1;
}
