// Daemon lifecycle around a fuse_session.
#include "fs/daemon.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fuse_lowlevel.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/format.h"
#include "core/persistent_region.h"
#include "core/pool_clients.h"
#include "core/wal_directory.h"
#include "fs/daemonize.h"
#include "fs/errors.h"
#include "fs/lease_stamps.h"
#include "fs/logging.h"
#include "fs/mount_point.h"
#include "fs/operations.h"
#include "fs/pool_lock.h"
#include "fs/pool_pages.h"
#include "fs/sd_notify.h"
#include "fs/session.h"
#include "fs/stale_mount.h"
#include "fs/usage_watch.h"
#include "fs/server.h"
#ifdef WALFS_TEST_FACILITIES
// The powercut_sim mount option: test builds link the test support library for it.
#include "tests/support/power_cut_region.h"
#endif

namespace walfs::fs {
namespace {

struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};
using SessionPtr = std::unique_ptr<fuse_session, SessionDeleter>;

struct LoopConfigDeleter {
  void operator()(fuse_loop_config* config) const { fuse_loop_cfg_destroy(config); }
};

// Blocks the termination signals for as long as it lives, so that threads started
// meanwhile (by core, while the pool opens) inherit a mask without them: the signal
// that stops the daemon must reach a thread of libfuse's loop, or it would sit unseen.
class TerminationSignalsBlocked {
 public:
  TerminationSignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &saved_);
  }
  ~TerminationSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  TerminationSignalsBlocked(const TerminationSignalsBlocked&) = delete;
  TerminationSignalsBlocked& operator=(const TerminationSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

// A descriptor closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  OwnedFd() = default;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) close(fd);
  }
};

// Runs server.usage_watch() every UsageWatch::kCheckSeconds until destroyed. Started with
// the termination signals blocked, like every thread that is not libfuse's.
class UsageWatchThread {
 public:
  UsageWatchThread(Server& server) {
    TerminationSignalsBlocked blocked;
    thread_ = std::thread([this, &server] {
      std::unique_lock<std::mutex> l(mu_);
      while (!stop_) {
        l.unlock();
        server.usage_watch().Check(server.dir().Statfs());
        l.lock();
        cv_.wait_for(l, std::chrono::seconds(UsageWatch::kCheckSeconds), [this] { return stop_; });
      }
    });
  }
  ~UsageWatchThread() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  UsageWatchThread(const UsageWatchThread&) = delete;
  UsageWatchThread& operator=(const UsageWatchThread&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Verifies the pool's free space ahead of its allocations (WalDirectory::
// VerifyFreeSpaceAhead) from mount until done or destroyed, in pmem mode only, and only
// when the pool does not already know its free space is zero (core/pool_state.h: a pool
// last written by a walfs that did not say so, or with a block found not zero). In pmem
// mode the reads are memory reads, and a segment allocated from space not yet verified
// reads its 16 MiB while PostgreSQL waits. In msync mode the free space is a disk
// file's: reading all of it would cost more I/O than the allocations it spares, so it is
// left to them. The pool's locks are held only to pick and mark each step's blocks, not
// while they are read, and the thread runs as SCHED_IDLE: it takes only CPU time that
// nothing else wants, so it never delays the requests it works ahead of.
class FreeSpaceVerifyThread {
 public:
  static constexpr uint64_t kStepBlocks = 512;  // 2 MiB: one lock round trip per step

  explicit FreeSpaceVerifyThread(core::WalDirectory& dir) {
    if (dir.mode() != core::DurabilityMode::kPmem || dir.FreeSpaceKnownZero()) return;
    TerminationSignalsBlocked blocked;
    thread_ = std::thread([this, &dir] {
      const sched_param idle{};
      if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0) {
        Log(LOG_INFO, "free space check ahead of allocation runs at normal priority");
      }
      const auto start = std::chrono::steady_clock::now();
      uint64_t blocks = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        const uint64_t n = dir.VerifyFreeSpaceAhead(kStepBlocks);
        if (n == 0) break;
        blocks += n;
        sched_yield();
      }
      if (blocks == 0) return;
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Log(LOG_INFO, "free space checked ahead of allocation: %.1f MiB in %.2f s%s",
          static_cast<double>(blocks) * core::format::kBlockSize / (1 << 20), secs,
          stop_.load(std::memory_order_relaxed) ? " (stopped at unmount)" : "");
    });
  }
  ~FreeSpaceVerifyThread() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  FreeSpaceVerifyThread(const FreeSpaceVerifyThread&) = delete;
  FreeSpaceVerifyThread& operator=(const FreeSpaceVerifyThread&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string DurabilityText(const core::WalDirectory& dir, const Options& options,
                           const Server& server) {
  if (server.fsync_shortcut()) {
    return "mode pmem: writes and metadata are durable before each reply; "
           "fsync/fdatasync answered ENOSYS (no round trip)";
  }
  if (dir.mode() == core::DurabilityMode::kPmem) {
    return "mode pmem, durability=strict: writes durable before each reply, "
           "and every fsync is served with a real drain";
  }
  return absl::StrCat("mode msync: writes become durable on fsync/fdatasync or with "
                      "O_DSYNC/O_SYNC (msync of the pool), metadata changes before "
                      "their reply",
                      options.durability == Durability::kStrict
                          ? ", durability=strict"
                          : "; directory fsync answered ENOSYS");
}

int Serve(fuse_session* se, const Options& options) {
  if (options.threads <= 1) return fuse_session_loop(se);
  std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
  // clone_fd (default): each worker reads requests from its own clone of /dev/fuse,
  // instead of all of them waking on one fd.
  fuse_loop_cfg_set_clone_fd(config.get(), options.clone_fd ? 1 : 0);
  fuse_loop_cfg_set_max_threads(config.get(), options.threads);
  // Idle workers are kept by default: PostgreSQL's traffic comes in bursts (commits),
  // and creating a thread per burst costs more than a few idle stacks.
  fuse_loop_cfg_set_idle_threads(
      config.get(), options.max_idle_threads > 0 ? options.max_idle_threads : options.threads);
  return fuse_session_loop_mt(se, config.get());
}

// The benchmark experiments in force (none unless built with WALFS_BENCH_EXPERIMENTS
// and WALFS_EXPERIMENT is set).
absl::StatusOr<Experiments> ExperimentsFromEnvironment() {
  const char* value = getenv("WALFS_EXPERIMENT");
  if (value == nullptr || *value == '\0') return Experiments{};
  if (!kExperimentsBuilt) {
    Log(LOG_WARNING, "WALFS_EXPERIMENT is ignored: this walfs was built without "
                     "WALFS_BENCH_EXPERIMENTS");
    return Experiments{};
  }
  return ParseExperiments(value);
}

}  // namespace

int RunDaemon(const Options& options) {
  // Abseil's Mutex records every acquisition in a lock graph to detect lock-order
  // cycles unless told not to (Debian's libabsl does so by default), a large share of
  // the daemon's user-space instructions per write (two locks per write; measured with
  // tools/bench/write_profile.sh, docs/performance.md); the lock order is exercised by
  // the unit and crash tests, which keep the detection on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  SetDebugLogging(options.debug);
  RouteFuseLogging();

  if (!options.foreground) {
    if (absl::Status s = DetachStart(); !s.ok()) {
      Log(LOG_ERR, "cannot detach: %s", s.ToString().c_str());
      return 1;
    }
  }

  // A second daemon on one pool would replay and rewrite metadata under the first.
  absl::StatusOr<std::unique_ptr<PoolLock>> lock = PoolLock::Acquire(options.pool);
  if (!lock.ok()) {
    Log(LOG_ERR, "%s", std::string(lock.status().message()).c_str());
    return 1;
  }

  // Clients that a previous daemon leased files to may still store into the pool; they
  // must be gone before orphans are reclaimed (fs/lease_protocol.h).
  if (absl::Status s = core::CheckNoDirectClients(options.pool); !s.ok()) {
    Log(LOG_ERR, "%s", std::string(s.message()).c_str());
    return 1;
  }
  uid_t pool_owner_uid = 0;
  bool pool_is_device = false;
  {
    struct stat st;
    if (fstat((*lock)->fd(), &st) != 0) {
      Log(LOG_ERR, "cannot stat pool %s: %s", options.pool.c_str(), strerror(errno));
      return 1;
    }
    pool_owner_uid = st.st_uid;
    pool_is_device = S_ISCHR(st.st_mode);
  }

  absl::StatusOr<Experiments> experiments = ExperimentsFromEnvironment();
  if (!experiments.ok()) {
    Log(LOG_ERR, "%s", std::string(experiments.status().message()).c_str());
    return 1;
  }
  if (experiments->any()) {
    Log(LOG_WARNING,
        "benchmark experiments in force (WALFS_EXPERIMENT=%s): not for real data",
        getenv("WALFS_EXPERIMENT"));
  }

  std::unique_ptr<core::WalDirectory> dir;
  // The power-cut simulation's written image (test builds), kept for session hellos
  // until after the session sender is gone.
  OwnedFd powercut_image;
  {
    TerminationSignalsBlocked blocked;
    absl::StatusOr<std::unique_ptr<core::PersistentRegion>> region =
        core::OpenPmemRegion(options.pool, {.read_only = options.read_only,
                                            .owner_only = true});
    if (!region.ok()) {
      Log(LOG_ERR, "cannot map pool %s: %s", options.pool.c_str(),
          std::string(region.status().message()).c_str());
      return 1;
    }
#ifdef WALFS_TEST_FACILITIES
    if (options.powercut_sim) {
      // The written image is a memfd so that direct-access clients can be handed it
      // (kHelloFlagImage) and store where the daemon reads (L8: no file outside the
      // mount).
      powercut_image.fd = memfd_create("walfs-powercut-image", MFD_CLOEXEC);
      if (powercut_image.fd < 0) {
        Log(LOG_ERR, "cannot set up power-cut simulation for %s: memfd: %s",
            options.pool.c_str(), strerror(errno));
        return 1;
      }
      region = core::NewPowerCutRegion(std::move(*region), powercut_image.fd);
      if (!region.ok()) {
        Log(LOG_ERR, "cannot set up power-cut simulation for %s: %s", options.pool.c_str(),
            std::string(region.status().message()).c_str());
        return 1;
      }
    }
#endif
    absl::StatusOr<std::unique_ptr<core::WalDirectory>> opened =
        core::WalDirectory::Open(std::move(*region),
                                 {.read_only = options.read_only,
                                  .zero_elision = !experiments->no_zero_elision});
    if (!opened.ok()) {
      Log(LOG_ERR, "cannot open pool %s: %s", options.pool.c_str(),
          std::string(opened.status().message()).c_str());
      return 1;
    }
    dir = std::move(*opened);
  }

  // Direct access (fs/lease_protocol.h) exists only where a client's copy + drain is
  // durable (L7) and every lease can be revoked at a close (L4, the stamps memfd).
  DirectAccessInputs access_inputs{
      .read_only = options.read_only,
      .pmem_mode = dir->mode() == core::DurabilityMode::kPmem,
      .durability = SessionDurability(pool_is_device, dir->region().is_pmem(),
                                      getenv("PMEM_IS_PMEM_FORCE")),
      .page_cache = experiments->page_cache};
  std::unique_ptr<LeaseStamps> lease_stamps;
  const DirectAccess offered = DecideDirectAccess(access_inputs);
  if (offered.reads_available()) {
    absl::StatusOr<std::unique_ptr<LeaseStamps>> made = LeaseStamps::Create();
    if (made.ok()) {
      lease_stamps = std::move(*made);
      const std::string pages = PoolPageSizeWarning(options.pool);
      if (!pages.empty() && offered.available()) Log(LOG_WARNING, "%s", pages.c_str());
    } else {
      access_inputs.stamps_error = std::string(made.status().message());
    }
  }
  const DirectAccess direct_access = DecideDirectAccess(access_inputs);
  if (direct_access.available()) {
    Log(LOG_INFO, "direct access available (durability %s)",
        DurabilityName(direct_access.durability));
  } else {
    Log(dir->mode() == core::DurabilityMode::kPmem && !options.read_only ? LOG_WARNING
                                                                           : LOG_INFO,
        "direct access off (clients write through FUSE): %s%s",
        direct_access.off_reason.c_str(),
        direct_access.reads_only ? "; clients read the pool directly" : "");
  }

  Server server(*dir, ServerConfig{.pool = options.pool,
                                   .mountpoint = options.mountpoint,
                                   .strict = options.durability == Durability::kStrict,
                                   .read_only = options.read_only,
                                   .threads = options.threads,
                                   .max_write = options.max_write,
                                   .entry_timeout = options.entry_timeout,
                                   .attr_timeout = options.attr_timeout,
                                   .page_cache = experiments->page_cache,
                                   .ignore_dsync = experiments->ignore_dsync,
                                   .direct_access = direct_access,
                                   .pool_owner = pool_owner_uid,
                                   .lease_stamps = lease_stamps.get()});
  std::unique_ptr<SessionSender> session_sender;
  if (lease_stamps != nullptr) {
    uint32_t hello_flags = 0;
    if (powercut_image.fd >= 0) hello_flags |= lease::kHelloFlagImage;
    session_sender = std::make_unique<SessionSender>(SessionSender::Config{
        .mountpoint = options.mountpoint,
        .pool_fd = (*lock)->fd(),
        .stamps_fd = lease_stamps->fd(),
        .image_fd = powercut_image.fd,
        .hello = MakeHello(direct_access.durability, hello_flags, dir->superblock().uuid,
                           lease_stamps->slots(), lease_stamps->id()),
        .granted = &server.sessions_granted,
        .refused = &server.sessions_refused});
    server.set_session_sender(session_sender.get());
  }

  // The ENOSPC log line says how full the pool is (statfs's figures, so df agrees).
  core::WalDirectory* stats_dir = dir.get();
  SetFreeSpaceDescriber([stats_dir] { return FreeSpaceText(stats_dir->Statfs()); });

  std::vector<std::string> arg_strings = FuseSessionArgs(options);
  std::vector<char*> argv;
  for (std::string& a : arg_strings) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  SessionPtr se(fuse_session_new(&args, &Operations(), sizeof(fuse_lowlevel_ops), &server));
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    Log(LOG_ERR, "cannot create the FUSE session");
    (void)dir->Close();
    return 1;
  }
  server.set_session(se.get());
  if (fuse_set_signal_handlers(se.get()) != 0) {
    Log(LOG_ERR, "cannot install signal handlers");
    (void)dir->Close();
    return 1;
  }
  // The pool lock is ours, so a dead mount of this pool is a killed walfs's leftover.
  const std::string fsname = options.fsname.empty() ? options.pool : options.fsname;
  absl::StatusOr<bool> detached =
      DetachStaleMount(options.mountpoint, fsname, "fuse." + options.subtype);
  if (!detached.ok()) {
    Log(LOG_ERR, "%s is a dead mount of %s: %s", options.mountpoint.c_str(), fsname.c_str(),
        std::string(detached.status().message()).c_str());
  } else if (*detached) {
    Log(LOG_NOTICE, "detached the dead mount of %s at %s left by a walfs that died",
        fsname.c_str(), options.mountpoint.c_str());
  }
  // Checked only now, after a dead mount of this pool is gone: until then the mount point
  // cannot even be stat'ed (ENOTCONN).
  if (absl::Status s = CheckMountPoint(options.mountpoint, options.nonempty); !s.ok()) {
    Log(LOG_ERR, "%s", std::string(s.message()).c_str());
    fuse_remove_signal_handlers(se.get());
    (void)dir->Close();
    return 1;
  }
  if (fuse_session_mount(se.get(), options.mountpoint.c_str()) != 0) {
    Log(LOG_ERR, "cannot mount %s at %s", options.pool.c_str(), options.mountpoint.c_str());
    fuse_remove_signal_handlers(se.get());
    (void)dir->Close();
    return 1;
  }

  if (!options.foreground) {
    UseSyslog();
    DetachDone();
  }
  std::string durability = DurabilityText(*dir, options, server);
  Log(LOG_NOTICE, "mounted %s at %s (region %.*s, %u thread%s); %s", options.pool.c_str(),
      options.mountpoint.c_str(), static_cast<int>(dir->region().kind().size()),
      dir->region().kind().data(), options.threads, options.threads == 1 ? "" : "s",
      durability.c_str());
  if (options.powercut_sim) {
    Log(LOG_WARNING,
        "POWER-CUT SIMULATION is on (-o powercut_sim, a test facility): writes not yet "
        "persisted live only in this process, so kill -9 of pid %d loses them as a power "
        "cut would",
        static_cast<int>(getpid()));
  }
  if (options.allow_other && !options.default_permissions_given) {
    Log(LOG_NOTICE,
        "allow_other without default_permissions: default_permissions is enforced anyway "
        "(walfs makes no permission checks of its own, the kernel checks mode bits)");
  }
  if (!options.ignored.empty()) {
    std::string list;
    for (const std::string& o : options.ignored) absl::StrAppend(&list, list.empty() ? "" : ",", o);
    Log(LOG_INFO, "ignored mount options: %s", list.c_str());
  }
  if (absl::Status s = SdNotify(absl::StrCat("READY=1\nMAINPID=", getpid(),
                                             "\nSTATUS=serving ", options.mountpoint));
      !s.ok()) {
    Log(LOG_WARNING, "%s", s.ToString().c_str());
  }

  int loop;
  {
    UsageWatchThread usage_watch(server);
    FreeSpaceVerifyThread verify_ahead(server.dir());
    loop = Serve(se.get(), options);
  }

  (void)SdNotify("STOPPING=1");
  fuse_session_unmount(se.get());
  // Only now: a hello still resolving its socket's path waited for this daemon's answer,
  // and the unmount has failed it.
  session_sender.reset();
  fuse_remove_signal_handlers(se.get());
  se.reset();
  SetFreeSpaceDescriber(nullptr);  // no request is served any more

  int exit_status = 0;
  if (loop < 0) {
    Log(LOG_ERR, "FUSE loop failed: %s", strerror(-loop));
    exit_status = 1;
  }
  if (absl::Status s = dir->Close(); !s.ok()) {
    Log(LOG_ERR, "closing pool %s: %s", options.pool.c_str(), s.ToString().c_str());
    exit_status = 1;
  }
  Log(LOG_NOTICE, "unmounted %s%s", options.mountpoint.c_str(),
      loop > 0 ? absl::StrCat(" (signal ", loop, ")").c_str() : "");
  return exit_status;
}

}  // namespace walfs::fs
