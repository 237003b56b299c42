// walfs_close_race: closes a leased descriptor while a direct store through it is stalled
// in the middle, for fs_direct_race_test (never installed; run with libwalfs-direct.so
// preloaded on a walfs mount in pmem mode).
//
//   walfs_close_race MOUNT signal|thread [--keep]
//
// Segment A (MOUNT/000000010000000000000001, 16 MiB) is written through FUSE, opened and
// leased (one small pwrite). A 2 MiB pwrite at 4 MiB of A then copies from a buffer whose
// second half is registered with userfaultfd, so the copy stalls there on a page fault.
// While it stalls, the race step runs, either in a SIGUSR1 handler on the writing thread
// ("signal", async-signal-safe calls only) or in a second thread ("thread"): close the
// descriptor, unlink A, one metadata commit (create and rename an empty file), and create
// segment B (MOUNT/000000010000000000000002) with 16 MiB of a pattern through write(2).
// Only then is the fault resolved and the copy resumes. L2/L3 (docs/design/lease.md): the
// blocks the stalled store goes on into belong to A until it has returned, so B reads
// back exactly its own pattern. The pwrite must return 2 MiB or fail; with --keep another
// descriptor of A is opened first (so A stays an orphan) and a 2 MiB return must have put
// every byte into A.
//
// Output: "race ran during the store" or a NOTE why not, the pwrite result, and "PASS" or
// "FAIL: why"; on stderr, what the fault handler saw. Exit 0 pass, 1 a check failed, 2 usage or setup error, 77 userfaultfd
// is unavailable (a SKIP line says why).
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kSegment = size_t{16} << 20;
constexpr size_t kStore = size_t{2} << 20;
constexpr off_t kStoreOffset = off_t{4} << 20;
constexpr size_t kStalled = kStore / 2;  // the copy stalls after this many bytes

// Source bytes all have the high bit set, B's never do: a byte of the store found in B
// is recognizable as such.
uint8_t SourceByte(size_t i) { return static_cast<uint8_t>(0x80 | (i % 127)); }
uint8_t SegmentBByte(size_t i) { return static_cast<uint8_t>(i % 113); }

// Everything the race step needs, set up before the store starts (the signal handler may
// not allocate).
std::string g_a, g_b, g_tmp, g_tmp2;
int g_fd = -1;
const uint8_t* g_b_data = nullptr;
int g_done_pipe[2] = {-1, -1};
std::atomic<int> g_race_errors{0};
std::atomic<int> g_race_ran{0};

void Fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  std::fflush(stdout);
  std::exit(1);
}

void Setup(const char* what) {
  std::printf("setup failed: %s: %s\n", what, std::strerror(errno));
  std::fflush(stdout);
  std::exit(2);
}

// The race step: async-signal-safe calls only. Failures are counted, not reported here.
void RaceStep() {
  const int saved = errno;
  if (close(g_fd) != 0) g_race_errors.fetch_add(1);
  if (unlink(g_a.c_str()) != 0) g_race_errors.fetch_add(1);
  const int t = open(g_tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (t < 0 || close(t) != 0 || rename(g_tmp.c_str(), g_tmp2.c_str()) != 0) {
    g_race_errors.fetch_add(1);
  }
  const int b = open(g_b.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (b < 0) {
    g_race_errors.fetch_add(1);
  } else {
    size_t done = 0;
    while (done < kSegment) {
      const ssize_t n = write(b, g_b_data + done, kSegment - done);
      if (n <= 0) {
        g_race_errors.fetch_add(1);
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (fsync(b) != 0) g_race_errors.fetch_add(1);
    if (close(b) != 0) g_race_errors.fetch_add(1);
  }
  g_race_ran.store(1);
  const char c = 'x';
  (void)!write(g_done_pipe[1], &c, 1);
  errno = saved;
}

void OnSigusr1(int) { RaceStep(); }

struct Handler {
  int uffd = -1;
  int stop_fd = -1;  // readable when the writer returned
  bool use_signal = false;
  pid_t writer_tid = 0;
  uint8_t* stalled = nullptr;  // the registered range [stalled, +kStalled)
  std::vector<uint8_t> fill;   // what the registered range holds once resolved
  // Results.
  bool faulted = false;
  bool race_in_time = false;  // the race step finished while the store was stalled
  std::string note;
};

// Waits for the store's fault, runs (or signals) the race step, then resolves the fault.
void* HandlerMain(void* arg) {
  auto* h = static_cast<Handler*>(arg);
  pollfd p[2] = {{h->uffd, POLLIN, 0}, {h->stop_fd, POLLIN, 0}};
  const int r = poll(p, 2, 30000);
  if (r <= 0 || (p[0].revents & POLLIN) == 0) {
    h->note = r == 0 ? "the store never touched the stalled half within 30 s"
                     : "the store returned without touching the stalled half";
    return nullptr;
  }
  uffd_msg msg;
  if (read(h->uffd, &msg, sizeof(msg)) != sizeof(msg) || msg.event != UFFD_EVENT_PAGEFAULT) {
    h->note = "unexpected userfaultfd message";
  } else {
    h->faulted = true;
    if (h->use_signal) {
      syscall(SYS_tgkill, getpid(), h->writer_tid, SIGUSR1);
      // A thread stalled in a user-mode fault takes the signal, runs the handler and
      // faults again; one stalled in the kernel (a FUSE WRITE copying from the buffer)
      // cannot, and gets the race step only after the fault is resolved.
      pollfd d = {g_done_pipe[0], POLLIN, 0};
      if (poll(&d, 1, 10000) == 1) {
        h->race_in_time = true;
      } else {
        h->note = "SIGUSR1 not handled within 10 s while the store was stalled";
      }
    } else {
      RaceStep();
      h->race_in_time = true;
    }
  }
  uffdio_copy copy{};
  copy.dst = reinterpret_cast<uintptr_t>(h->stalled);
  copy.src = reinterpret_cast<uintptr_t>(h->fill.data());
  copy.len = kStalled;
  copy.mode = 0;
  if (ioctl(h->uffd, UFFDIO_COPY, &copy) != 0 && errno != EEXIST) {
    h->note += std::string(" (UFFDIO_COPY: ") + strerrorname_np(errno) + ")";
  }
  std::fprintf(stderr, "handler: faulted %d, race in time %d, %s\n", h->faulted,
               h->race_in_time, h->note.c_str());
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: walfs_close_race MOUNT signal|thread [--keep]\n");
    return 2;
  }
  const std::string mount = argv[1];
  const std::string how = argv[2];
  const bool keep = argc > 3 && std::string(argv[3]) == "--keep";
  if (how != "signal" && how != "thread") return 2;
  setvbuf(stdout, nullptr, _IOLBF, 0);

  int uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (uffd < 0) {
    const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
      uffd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
      close(dev);
    }
  }
  if (uffd < 0) {
    std::printf("SKIP: userfaultfd is unavailable: %s\n", std::strerror(errno));
    return 77;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  if (ioctl(uffd, UFFDIO_API, &api) != 0) {
    std::printf("SKIP: UFFDIO_API: %s\n", std::strerror(errno));
    return 77;
  }

  g_a = mount + "/000000010000000000000001";
  g_b = mount + "/000000010000000000000002";
  g_tmp = mount + "/commit.tmp";
  g_tmp2 = mount + "/commit.done";
  if (pipe2(g_done_pipe, O_CLOEXEC) != 0) Setup("pipe");

  // A: 16 MiB written through FUSE (write(2) always goes to the kernel), then leased.
  {
    std::vector<uint8_t> zero(kSegment, 0);
    const int a = open(g_a.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (a < 0) Setup("create A");
    if (write(a, zero.data(), zero.size()) != static_cast<ssize_t>(zero.size())) {
      Setup("write A");
    }
    if (fsync(a) != 0 || close(a) != 0) Setup("fsync A");
  }
  g_fd = open(g_a.c_str(), O_RDWR | O_CLOEXEC);
  if (g_fd < 0) Setup("open A");
  {
    std::vector<uint8_t> first(4096, 0x55);
    if (pwrite(g_fd, first.data(), first.size(), 0) != 4096) Setup("first pwrite into A");
  }
  int keep_fd = -1;
  if (keep) {
    keep_fd = open(g_a.c_str(), O_RDONLY | O_CLOEXEC);
    if (keep_fd < 0) Setup("open A again");
  }

  std::vector<uint8_t> b_data(kSegment);
  for (size_t i = 0; i < kSegment; ++i) b_data[i] = SegmentBByte(i);
  g_b_data = b_data.data();

  // The source: first half present, second half missing and registered.
  void* m = mmap(nullptr, kStore, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) Setup("mmap source");
  auto* src = static_cast<uint8_t*>(m);
  for (size_t i = 0; i < kStalled; ++i) src[i] = SourceByte(i);
  Handler h;
  h.uffd = uffd;
  h.use_signal = how == "signal";
  h.writer_tid = static_cast<pid_t>(syscall(SYS_gettid));
  h.stalled = src + kStalled;
  h.fill.resize(kStalled);
  for (size_t i = 0; i < kStalled; ++i) h.fill[i] = SourceByte(kStalled + i);
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uintptr_t>(h.stalled);
  reg.range.len = kStalled;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
    std::printf("SKIP: UFFDIO_REGISTER: %s\n", std::strerror(errno));
    return 77;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &sa, nullptr) != 0) Setup("sigaction");
  int stop[2];
  if (pipe2(stop, O_CLOEXEC) != 0) Setup("pipe");
  h.stop_fd = stop[0];
  pthread_t handler;
  if (pthread_create(&handler, nullptr, HandlerMain, &h) != 0) Setup("pthread_create");

  errno = 0;
  const ssize_t n = pwrite(g_fd, src, kStore, kStoreOffset);
  const int write_errno = errno;
  (void)!write(stop[1], "x", 1);
  pthread_join(handler, nullptr);
  // A race step the signal could not run during the store runs now, so the rest of the
  // checks see the same files either way.
  if (!g_race_ran.load()) {
    pollfd d = {g_done_pipe[0], POLLIN, 0};
    if (poll(&d, 1, 10000) != 1) {
      if (how == "thread" || !h.faulted) RaceStep();
    }
  }
  if (h.race_in_time) {
    std::printf("race ran during the store\n");
  } else {
    std::printf("NOTE: the race step did not run during the store: %s\n", h.note.c_str());
  }
  if (n < 0) {
    std::printf("pwrite: -1 %s\n", strerrorname_np(write_errno));
  } else {
    std::printf("pwrite: %zd\n", n);
  }
  if (g_race_errors.load() != 0) Fail("a call of the race step failed");

  // B reads back exactly its own pattern through the kernel.
  {
    const int b = open(g_b.c_str(), O_RDONLY | O_CLOEXEC);
    if (b < 0) Fail("cannot open B");
    std::vector<uint8_t> got(kSegment + 1);
    size_t done = 0;
    for (;;) {
      const ssize_t r = pread(b, got.data() + done, got.size() - done, static_cast<off_t>(done));
      if (r < 0) Fail("cannot read B");
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    close(b);
    if (done != kSegment) Fail("B is not 16 MiB long");
    size_t wrong = 0, stored = 0, first = kSegment;
    for (size_t i = 0; i < kSegment; ++i) {
      if (got[i] == SegmentBByte(i)) continue;
      ++wrong;
      if (got[i] & 0x80) ++stored;
      if (first == kSegment) first = i;
    }
    if (wrong != 0) {
      std::printf("B: %zu bytes differ from its pattern (first at %zu), %zu of them look like "
                  "the stalled store's\n", wrong, first, stored);
      Fail("segment B holds bytes it was not written with");
    }
    std::printf("B holds its own pattern\n");
  }

  if (n >= 0 && n != static_cast<ssize_t>(kStore)) Fail("pwrite returned a short count");
  if (keep && n == static_cast<ssize_t>(kStore)) {
    std::vector<uint8_t> got(kStore);
    if (pread(keep_fd, got.data(), kStore, kStoreOffset) != static_cast<ssize_t>(kStore)) {
      Fail("cannot read the unlinked A back");
    }
    for (size_t i = 0; i < kStore; ++i) {
      if (got[i] != SourceByte(i)) {
        std::printf("A: byte %zu of the store is %#x, not %#x\n", i, got[i], SourceByte(i));
        Fail("pwrite returned 2 MiB but A does not hold its bytes");
      }
    }
    std::printf("A holds every byte of the store\n");
  }
  if (keep_fd >= 0) close(keep_fd);
  std::printf("PASS\n");
  return 0;
}
