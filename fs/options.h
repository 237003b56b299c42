// Command line of the walfs daemon.
//
//   walfs POOL MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]...
//
// This is the argv shape mount.fuse3 produces, so `mount -t fuse.walfs POOL DIR -o ...`
// and fstab lines work. Options (see Usage()):
//   allow_other          let other users in (permission bits decide; see below)
//   allow_root           let root in besides the daemon's user (libfuse refuses the
//                        others' requests); excludes allow_other. As sshfs accepts it.
//   auto_unmount         libfuse mounts through fusermount3 --auto-unmount, which
//                        unmounts when the daemon exits, even on kill -9. As sshfs.
//   default_permissions  accepted; always in force (the kernel checks mode bits: walfs
//                        makes no permission checks of its own, so running without it
//                        would let any user who can reach the mount chown/chmod freely,
//                        and allow_other must never come without it)
//   ro                   mount read-only; the pool is opened without recovery writes
//   noexec               passed to the kernel
//   nonempty             mount over a directory that holds files (refused otherwise,
//                        fs/mount_point.h); libfuse 3 dropped the option, walfs keeps it
//   threads=N            FUSE worker threads, 1..64 (default 4); -s is threads=1
//   max_idle_threads=N   idle workers kept instead of exiting, 1..threads (default:
//                        threads, i.e. none exit)
//   clone_fd, noclone_fd each worker reads /dev/fuse through its own clone of the fd
//                        (default) or all workers share one
//   max_write=SIZE       largest WRITE the kernel sends, 4096..1048576 bytes, in the
//                        size syntax of util/byte_size.h (default 1M)
//   entry_timeout=SECS   how long the kernel caches names and negative lookups
//   attr_timeout=SECS    how long the kernel caches attributes (both default 86400;
//                        0 asks walfs every time)
//   durability=auto|strict
//                        auto: on PMEM every write is durable before its reply, so
//                        FSYNC/FSYNCDIR/FLUSH are answered ENOSYS once and the kernel
//                        stops sending them; strict: every FSYNC/FSYNCDIR gets a real
//                        persist (for comparison). The msync fallback always serves
//                        FSYNC and, like pmem, answers FSYNCDIR ENOSYS unless strict.
//   fsname=NAME          source shown by mount/df (default: the pool path)
//   subtype=NAME         type shown as fuse.NAME (default: walfs)
//   debug                same as -d (libfuse request tracing, implies -f)
//   powercut_sim         TEST FACILITY, only in a build configured with
//                        -DWALFS_TEST_FACILITIES=ON (refused otherwise): the pool is
//                        served from a private copy and only flushed-and-drained (pmem)
//                        or msynced bytes reach the pool file, so kill -9 of the daemon
//                        leaves what a power cut would (tests/support/power_cut_region.h).
//                        Refused with ro.
// Options mount(8) adds on its own (rw, dev, nodev, suid, nosuid, exec, atime, noatime,
// relatime, nofail, _netdev, auto, noauto, user, users, defaults, x-*, comment=...) are
// ignored; anything else is refused. The argument vector is split by libfuse's
// fuse_opt_parse, so '\,' in a -o list is a comma inside a value, as for every FUSE
// file system.
//
// Parsing touches no file: paths are made absolute against the current directory only.
//
// Exit status of the daemon, as mount(8) (fs/main.cc): 0 success, 1 usage error,
// 32 mount failure (or an error while serving or closing the pool).
#ifndef WALFS_FS_OPTIONS_H_
#define WALFS_FS_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace walfs::fs {

enum class Durability {
  kAuto,    // follow the pool's mode (ENOSYS shortcut on PMEM)
  kStrict,  // answer every FSYNC/FSYNCDIR with a real persist
};

inline constexpr unsigned kDefaultThreads = 4;
inline constexpr unsigned kMaxThreads = 64;
// libfuse 3.14 sizes its request buffers for 256 pages (1 MiB of 4 KiB pages), so a
// larger max_write could not be received.
inline constexpr unsigned kMaxWriteLimit = 1u << 20;
inline constexpr unsigned kMinWrite = 4096;
// walfs is the only writer of its namespace and the kernel invalidates what its own
// requests change, so names and attributes may be cached for a day
// (fs/operations_namespace.cc).
inline constexpr double kDefaultCacheTimeout = 86400.0;

struct Options {
  std::string pool;        // absolute
  std::string mountpoint;  // absolute
  bool foreground = false;
  bool debug = false;
  bool allow_other = false;
  bool allow_root = false;
  bool auto_unmount = false;
  bool default_permissions_given = false;  // only to say that it was forced
  bool read_only = false;
  bool noexec = false;
  bool nonempty = false;  // mount over a directory that is not empty
  unsigned threads = kDefaultThreads;
  unsigned max_idle_threads = 0;  // 0: as many as threads
  bool clone_fd = true;
  unsigned max_write = kMaxWriteLimit;
  double entry_timeout = kDefaultCacheTimeout;
  double attr_timeout = kDefaultCacheTimeout;
  Durability durability = Durability::kAuto;
  std::string fsname;  // empty: the pool path
  std::string subtype = "walfs";
  bool powercut_sim = false;  // test facility, see above
  bool show_help = false;
  bool show_version = false;
  // Mount options that were accepted but ignored, for one log line.
  std::vector<std::string> ignored;
};

// Parses argv (argv[0] is the program name). InvalidArgument says what is wrong.
// With -h/--help or -V/--version the positional arguments are not required.
absl::StatusOr<Options> ParseCommandLine(int argc, const char* const* argv);

// Switches for measuring the benchmark levers that are not mount options because no
// deployment should use them (tools/bench/levers.sh). They exist only in a build
// configured with -DWALFS_BENCH_EXPERIMENTS=ON, where the daemon reads them from the
// environment variable WALFS_EXPERIMENT (comma-separated names below); other builds
// ignore it.
struct Experiments {
  bool page_cache = false;   // "page_cache": no direct_io (page cache, write-through)
  bool ignore_dsync = false; // "ignore_dsync": O_DSYNC/O_SYNC writes not persisted
                             // before their reply (unsafe in msync mode)
  bool no_zero_elision = false;  // "no_zero_elision": store the zeros of a zero-fill
  bool any() const { return page_cache || ignore_dsync || no_zero_elision; }
};
inline constexpr bool kExperimentsBuilt =
#ifdef WALFS_BENCH_EXPERIMENTS
    true;
#else
    false;
#endif
// Whether this build has the test facilities (-DWALFS_TEST_FACILITIES=ON): the
// powercut_sim mount option and the power-cut image it hands direct-access clients.
// Shipped builds (the Debian package) have none.
inline constexpr bool kTestFacilitiesBuilt =
#ifdef WALFS_TEST_FACILITIES
    true;
#else
    false;
#endif
// Parses a WALFS_EXPERIMENT value; InvalidArgument names an unknown switch.
absl::StatusOr<Experiments> ParseExperiments(const std::string& list);

// The usage text for `program`.
std::string Usage(const std::string& program);

// Exit statuses of the daemon, as mount(8) has them.
inline constexpr int kExitUsage = 1;
inline constexpr int kExitMountFailure = 32;

// The argument vector for fuse_session_new (argv[0] included): the mount options
// (fsname, subtype, default_permissions, allow_other, allow_root, auto_unmount, ro,
// noexec) and -d.
std::vector<std::string> FuseSessionArgs(const Options& options);

}  // namespace walfs::fs

#endif  // WALFS_FS_OPTIONS_H_
