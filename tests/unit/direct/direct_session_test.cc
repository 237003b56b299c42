// Sessions: the hello and stamps checks, the pool's own superblocks, receiving a hello
// over a socket, and the whole exchange through a real listening socket in a temporary
// directory with a "daemon" thread that connects and sends crafted hellos and
// descriptors.
#include "fs/direct/session.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fs/direct/pool_area.h"
#include "gtest/gtest.h"
#include "tests/unit/direct/direct_test_pool.h"

namespace walfs::direct {
namespace {

namespace format = core::format;
using testpool::kBlock;
using testpool::kDataOffset;
using testpool::kPoolSize;
using testpool::kStampSeals;
using testpool::kStampSlots;
using testpool::kUuid;

bool IsOpen(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) != -1; }

// ---- ValidateHello --------------------------------------------------------------------

struct HelloMutation {
  const char* name;
  void (*mutate)(lease::SessionHello&);
  int descriptors;
  const char* reason;
};

TEST(DirectSessionHelloTest, AcceptsEachDurability) {
  for (uint32_t d : {lease::kDurabilityMapSync, lease::kDurabilityDevice,
                     lease::kDurabilityForced, lease::kDurabilityReadsOnly}) {
    EXPECT_EQ(ValidateHello(testpool::MakeHello(d), 2), nullptr) << d;
  }
}

TEST(DirectSessionHelloTest, RefusesEachInvalidField) {
  const HelloMutation mutations[] = {
      {"magic", [](lease::SessionHello& h) { h.magic ^= 1; }, 2, "magic"},
      {"version", [](lease::SessionHello& h) { h.version = 2; }, 2, "version"},
      {"durability 0", [](lease::SessionHello& h) { h.durability = 0; }, 2, "durability"},
      {"durability 5", [](lease::SessionHello& h) { h.durability = 5; }, 2, "durability"},
      {"flags", [](lease::SessionHello& h) { h.flags = 2; }, 2, "flags"},
      {"reserved 0", [](lease::SessionHello& h) { h.reserved[0] = 1; }, 2, "reserved"},
      {"reserved 3", [](lease::SessionHello& h) { h.reserved[3] = 1ull << 63; }, 2, "reserved"},
      {"no stamps id", [](lease::SessionHello& h) { h.stamps_id = 0; }, 2, "stamps id"},
      {"no slots", [](lease::SessionHello& h) { h.stamp_slots = 0; }, 2, "stamp_slots"},
      {"huge slots", [](lease::SessionHello& h) { h.stamp_slots = 1ull << 61; }, 2, "stamp_slots"},
      {"one descriptor", [](lease::SessionHello&) {}, 1, "descriptors"},
      {"no descriptor", [](lease::SessionHello&) {}, 0, "descriptors"},
      {"three descriptors", [](lease::SessionHello&) {}, 3, "descriptors"},
#ifdef WALFS_TEST_FACILITIES
      {"image without its descriptor",
       [](lease::SessionHello& h) { h.flags = lease::kHelloFlagImage; }, 2, "descriptors"},
#else
      // Without the test facilities the image flag means no session.
      {"image in a production build",
       [](lease::SessionHello& h) { h.flags = lease::kHelloFlagImage; }, 3, "flags"},
#endif
  };
  for (const HelloMutation& m : mutations) {
    lease::SessionHello h = testpool::MakeHello();
    m.mutate(h);
    const char* reason = ValidateHello(h, m.descriptors);
    ASSERT_NE(reason, nullptr) << m.name;
    EXPECT_NE(strstr(reason, m.reason), nullptr) << m.name << ": " << reason;
  }
#ifdef WALFS_TEST_FACILITIES
  lease::SessionHello image = testpool::MakeHello();
  image.flags = lease::kHelloFlagImage;
  EXPECT_EQ(ValidateHello(image, 3), nullptr);
#endif
}

// ---- CheckStamps ----------------------------------------------------------------------

TEST(DirectSessionStampsTest, RequiresASealedMemfdOfExactlyTheSlots) {
  const int good = testpool::MakeStamps(kStampSlots, kStampSeals);
  EXPECT_EQ(CheckStamps(good, kStampSlots), nullptr);
  EXPECT_NE(CheckStamps(good, kStampSlots + 1), nullptr);  // wrong size
  EXPECT_NE(CheckStamps(good, kStampSlots - 1), nullptr);
  close(good);
  const int sealed_write =
      testpool::MakeStamps(kStampSlots, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_EQ(CheckStamps(sealed_write, kStampSlots), nullptr);
  close(sealed_write);
  const struct {
    const char* name;
    unsigned seals;
  } partial[] = {
      {"unsealed", 0},
      {"no write seal", F_SEAL_SHRINK | F_SEAL_GROW},
      {"no shrink seal", F_SEAL_FUTURE_WRITE | F_SEAL_GROW},
      {"no grow seal", F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK},
      {"only sealing sealed", F_SEAL_SEAL},
  };
  for (const auto& p : partial) {
    const int fd = testpool::MakeStamps(kStampSlots, p.seals);
    const char* reason = CheckStamps(fd, kStampSlots);
    ASSERT_NE(reason, nullptr) << p.name;
    EXPECT_NE(strstr(reason, "sealed"), nullptr) << p.name << ": " << reason;
    close(fd);
  }
  // Sealed, but one word short or long.
  for (uint64_t bytes : {kStampSlots * 8 - 8, kStampSlots * 8 + 8, uint64_t{0}}) {
    const int fd = testpool::MakeStamps(kStampSlots, kStampSeals, nullptr, bytes);
    EXPECT_NE(CheckStamps(fd, kStampSlots), nullptr) << bytes;
    close(fd);
  }
  // Not a memfd at all.
  char path[] = "/dev/shm/walfs-stamps-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(file, kStampSlots * 8), 0);
  EXPECT_NE(CheckStamps(file, kStampSlots), nullptr);
  close(file);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_NE(CheckStamps(p[0], kStampSlots), nullptr);
  close(p[0]);
  close(p[1]);
}

// ---- The pool's superblocks -----------------------------------------------------------

struct SbMutation {
  const char* name;
  void (*mutate)(format::Superblock&);
  bool reseal;
  const char* reason;
};

TEST(DirectPoolAreaTest, CheckSuperblockRefusesEachBadField) {
  EXPECT_EQ(CheckSuperblock(testpool::MakeSuperblock()), nullptr);
  const SbMutation mutations[] = {
      {"magic", [](format::Superblock& sb) { sb.magic ^= 1; }, true, "magic"},
      {"version", [](format::Superblock& sb) { sb.version = 1; }, true, "version"},
      {"size", [](format::Superblock& sb) { sb.superblock_size = 128; }, true, "superblock_size"},
      {"crc", [](format::Superblock& sb) { sb.crc ^= 1; }, false, "checksum"},
      {"a byte", [](format::Superblock& sb) { sb.uuid[0] ^= 1; }, false, "checksum"},
      {"block size", [](format::Superblock& sb) { sb.block_size = 8192; }, true, "block_size"},
      {"data misaligned", [](format::Superblock& sb) { sb.data_offset += 512; }, true, "aligned"},
      {"data in the journal", [](format::Superblock& sb) { sb.data_offset = 4 * kBlock; }, true,
       "metadata"},
      {"data in the state block",
       [](format::Superblock& sb) { sb.data_offset = format::kStateOffset; }, true, "metadata"},
      {"data in the inodes", [](format::Superblock& sb) { sb.inode_count = 64; }, true,
       "metadata"},
      {"data in the dirents", [](format::Superblock& sb) { sb.dirent_count = 1000; }, true,
       "metadata"},
      {"inode overflow", [](format::Superblock& sb) { sb.inode_count = 1ull << 60; }, true,
       "overflow"},
      {"dirent overflow", [](format::Superblock& sb) { sb.dirent_table_offset = UINT64_MAX; },
       true, "overflow"},
      {"journal overflow", [](format::Superblock& sb) { sb.journal_offset = UINT64_MAX; }, true,
       "metadata"},
  };
  for (const SbMutation& m : mutations) {
    format::Superblock sb = testpool::MakeSuperblock();
    m.mutate(sb);
    if (m.reseal) testpool::SealSuperblock(sb);
    const char* reason = CheckSuperblock(sb);
    ASSERT_NE(reason, nullptr) << m.name;
    EXPECT_NE(strstr(reason, m.reason), nullptr) << m.name << ": " << reason;
  }
}

TEST(DirectPoolAreaTest, TheDataAreaEndsAtTheFileOrTheDeviceCapacity) {
  const format::Superblock sb = testpool::MakeSuperblock();
  PoolArea area;
  ASSERT_EQ(DataArea(sb, false, kPoolSize, &area), nullptr);
  EXPECT_EQ(area.data_begin, kDataOffset);
  EXPECT_EQ(area.data_end, kPoolSize);
  EXPECT_EQ(memcmp(area.uuid, kUuid, 16), 0);
  ASSERT_EQ(DataArea(sb, false, 4 * kPoolSize, &area), nullptr);  // grown
  EXPECT_EQ(area.data_end, 4 * kPoolSize);
  ASSERT_EQ(DataArea(sb, true, 0, &area), nullptr);  // a device: its capacity
  EXPECT_EQ(area.data_end, kPoolSize);
  EXPECT_TRUE(area.is_device);
  EXPECT_NE(DataArea(sb, false, kPoolSize - kBlock, &area), nullptr);  // truncated
  format::Superblock tiny = testpool::MakeSuperblock(kDataOffset);
  EXPECT_NE(DataArea(tiny, false, kDataOffset, &area), nullptr);  // no data area
}

class DirectPoolFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/dev/shm/walfs-pool-area-XXXXXX";
    fd_ = mkstemp(path);
    ASSERT_GE(fd_, 0);
    unlink(path);
    ASSERT_EQ(ftruncate(fd_, kPoolSize), 0);
  }
  void TearDown() override { close(fd_); }
  int fd_ = -1;
};

TEST_F(DirectPoolFileTest, ReadsBothCopiesAndRequiresThemIdentical) {
  const format::Superblock sb = testpool::MakeSuperblock();
  testpool::WriteSuperblocks(fd_, sb, sb);
  PoolArea area;
  ASSERT_EQ(ReadPoolArea(fd_, &area), nullptr);
  EXPECT_EQ(area.data_begin, kDataOffset);
  EXPECT_EQ(area.data_end, kPoolSize);
  EXPECT_FALSE(area.is_device);
  // Grown past the superblock's geometry: the file's end counts.
  ASSERT_EQ(ftruncate(fd_, 2 * kPoolSize), 0);
  ASSERT_EQ(ReadPoolArea(fd_, &area), nullptr);
  EXPECT_EQ(area.data_end, 2 * kPoolSize);

  format::Superblock other = sb;
  other.uuid[0] ^= 1;
  testpool::SealSuperblock(other);
  testpool::WriteSuperblocks(fd_, sb, other);
  EXPECT_NE(strstr(ReadPoolArea(fd_, &area), "differ"), nullptr);
  format::Superblock bad = sb;
  bad.crc ^= 1;
  testpool::WriteSuperblocks(fd_, sb, bad);
  EXPECT_NE(strstr(ReadPoolArea(fd_, &area), "checksum"), nullptr);
  testpool::WriteSuperblocks(fd_, bad, sb);
  EXPECT_NE(strstr(ReadPoolArea(fd_, &area), "checksum"), nullptr);
  format::Superblock zero{};
  testpool::WriteSuperblocks(fd_, zero, zero);
  EXPECT_NE(strstr(ReadPoolArea(fd_, &area), "magic"), nullptr);
  testpool::WriteSuperblocks(fd_, sb, sb);
  ASSERT_EQ(ftruncate(fd_, kBlock + 100), 0);  // B cut short
  EXPECT_NE(strstr(ReadPoolArea(fd_, &area), "read"), nullptr);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_NE(strstr(ReadPoolArea(p[0], &area), "neither"), nullptr);
  close(p[0]);
  close(p[1]);
}

// ---- ReceiveHello ---------------------------------------------------------------------

// Sends `bytes` of `data` with `fds` attached over sock.
void SendWithFds(int sock, const void* data, size_t bytes, const std::vector<int>& fds) {
  struct iovec iov = {const_cast<void*>(data), bytes};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ASSERT_EQ(sendmsg(sock, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
}

class DirectReceiveHelloTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair_), 0);
    ASSERT_EQ(pipe2(payload_, O_CLOEXEC), 0);
  }
  void TearDown() override {
    for (int fd : {pair_[0], pair_[1], payload_[0], payload_[1]}) close(fd);
  }
  int pair_[2];
  int payload_[2];  // any descriptors will do as the ones sent
};

TEST_F(DirectReceiveHelloTest, ReceivesOneHelloAndItsDescriptorsCloseOnExec) {
  const lease::SessionHello hello = testpool::MakeHello();
  SendWithFds(pair_[1], &hello, sizeof(hello), {payload_[0], payload_[1]});
  ReceivedHello got;
  const char* reason = "";
  ASSERT_EQ(ReceiveHello(pair_[0], 1000, &got, &reason), 0) << reason;
  EXPECT_EQ(memcmp(&got.hello, &hello, sizeof(hello)), 0);
  ASSERT_EQ(got.count, 2);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(fcntl(got.fds[i], F_GETFD), FD_CLOEXEC);
  const int received[2] = {got.fds[0], got.fds[1]};
  got.CloseAll();
  EXPECT_FALSE(IsOpen(received[0]));
  EXPECT_FALSE(IsOpen(received[1]));
}

TEST_F(DirectReceiveHelloTest, MalformedMessagesCloseEveryDescriptor) {
  const lease::SessionHello hello = testpool::MakeHello();
  char longer[sizeof(hello) + 8] = {};
  memcpy(longer, &hello, sizeof(hello));
  const struct {
    const char* name;
    size_t bytes;
    int fd_count;
  } cases[] = {
      {"short", sizeof(hello) - 1, 2},
      {"long", sizeof(longer), 2},
      {"too many descriptors", sizeof(hello), kMaxHelloFds + 2},
  };
  for (const auto& c : cases) {
    const int before = testpool::OpenDescriptorCount();
    std::vector<int> fds;
    for (int i = 0; i < c.fd_count; ++i) fds.push_back(payload_[i % 2]);
    SendWithFds(pair_[1], longer, c.bytes, fds);
    ReceivedHello got;
    const char* reason = "";
    EXPECT_EQ(ReceiveHello(pair_[0], 1000, &got, &reason), -EPROTO) << c.name;
    EXPECT_EQ(got.count, 0) << c.name;
    EXPECT_EQ(testpool::OpenDescriptorCount(), before) << c.name << ": " << reason;
    // Drain what a refused message left behind.
    char sink[256];
    while (recv(pair_[0], sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
  }
}

TEST_F(DirectReceiveHelloTest, NothingSentTimesOut) {
  ReceivedHello got;
  const char* reason = "";
  EXPECT_EQ(ReceiveHello(pair_[0], 50, &got, &reason), -ETIMEDOUT);
  EXPECT_EQ(got.count, 0);
  close(pair_[1]);  // a peer that hangs up without a hello
  pair_[1] = -1;
  EXPECT_EQ(ReceiveHello(pair_[0], 1000, &got, &reason), -EPROTO);
}

// ---- The exchange through a real socket -----------------------------------------------

// The fake daemon: what the session ioctl saw, and what it sends back.
struct FakeDaemon {
  std::string root;
  std::string name;  // the request's
  int ioctl_calls = 0;
  int ioctl_error = 0;
  bool connect = true;
  lease::SessionHello hello = testpool::MakeHello();
  size_t hello_bytes = sizeof(lease::SessionHello);
  std::vector<int> fds;
  bool allow_peer = true;
  std::atomic<bool> sent{false};
  int send_error = 0;
  std::thread thread;
};
FakeDaemon* g_daemon = nullptr;

std::optional<std::string> FakeMountRoot(dev_t) { return g_daemon->root; }

// Replies 0 and connects from another thread afterwards, as the daemon does.
int FakeSessionIoctl(int, const lease::SessionRequest* request) {
  FakeDaemon& d = *g_daemon;
  ++d.ioctl_calls;
  EXPECT_EQ(request->magic, lease::kMagic);
  EXPECT_EQ(request->version, lease::kVersion);
  EXPECT_NE(memchr(request->name, '\0', sizeof(request->name)), nullptr);
  d.name = request->name;
  if (d.ioctl_error != 0) return -d.ioctl_error;
  if (!d.connect) return 0;
  d.thread = std::thread([&d] {
    const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    const std::string path = d.root + "/" + d.name;
    if (path.size() < sizeof(addr.sun_path)) {
      memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    } else {
      const int dir = open(d.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dir, d.name.c_str());
    }
    if (connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      d.send_error = errno;
    } else {
      struct iovec iov = {&d.hello, d.hello_bytes};
      struct msghdr msg = {};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * d.fds.size());
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * d.fds.size());
      memcpy(CMSG_DATA(c), d.fds.data(), sizeof(int) * d.fds.size());
      if (sendmsg(s, &msg, MSG_NOSIGNAL) < 0) d.send_error = errno;
    }
    d.sent = true;
    close(s);
  });
  return 0;
}

bool FakePeerAllowed(int conn) { return g_daemon->allow_peer && PeerIsOwnerOrRoot(conn); }

constexpr SessionSources kSources = {.mount_root = FakeMountRoot,
                                     .ioctl_session = FakeSessionIoctl,
                                     .peer_allowed = FakePeerAllowed,
                                     .timeout_ms = 2000};

class DirectSessionExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/dev/shm/walfs-session-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    pool_path_ = dir_ + "/pool";
    close(testpool::MakePool(pool_path_.c_str()));
    daemon_.root = dir_;
    daemon_.fds = {open(pool_path_.c_str(), O_RDWR | O_CLOEXEC),
                   testpool::MakeStamps(kStampSlots, kStampSeals)};
    g_daemon = &daemon_;
    struct stat st;
    ASSERT_EQ(stat(dir_.c_str(), &st), 0);
    dev_ = st.st_dev;
    leased_fd_ = open(pool_path_.c_str(), O_RDONLY | O_CLOEXEC);
  }
  void TearDown() override {
    if (daemon_.thread.joinable()) daemon_.thread.join();
    for (int fd : daemon_.fds) close(fd);
    close(leased_fd_);
    EXPECT_EQ(sessions_.open_count(), 0);
    EXPECT_LE(sessions_.idle_count(), 1);  // kept, unlocked
    sessions_.CloseIdle();
    EXPECT_EQ(owned_->count(), 0);
    unlink(pool_path_.c_str());
    // Nothing else may be left in the "mount root": every session name is unlinked.
    EXPECT_EQ(rmdir(dir_.c_str()), 0) << strerror(errno);
    g_daemon = nullptr;
  }
  int Exchange(ReceivedHello* out, const char** reason, int timeout_ms = 2000) {
    SessionSources sources = kSources;
    sources.timeout_ms = timeout_ms;
    const int err = ExchangeSession(leased_fd_, daemon_.root, sources, out, reason);
    if (daemon_.thread.joinable()) daemon_.thread.join();
    return err;
  }
  // Acquire through the fake daemon, which then closes its copy of the pool descriptor
  // (as the daemon does once sent): the description is the client's alone.
  int AcquireSettled(const char** reason) {
    const int handle = sessions_.Acquire(leased_fd_, dev_, kSources, reason);
    if (daemon_.thread.joinable()) daemon_.thread.join();
    close(daemon_.fds[0]);
    daemon_.fds[0] = -1;
    return handle;
  }

  std::string dir_, pool_path_;
  dev_t dev_ = 0;
  int leased_fd_ = -1;
  FakeDaemon daemon_;
  std::unique_ptr<OwnedFds> owned_ = std::make_unique<OwnedFds>();
  Sessions sessions_{owned_.get()};
};

TEST_F(DirectSessionExchangeTest, NamesAreUniqueAndFitTheRequest) {
  const std::string a = NewSessionName();
  const std::string b = NewSessionName();
  EXPECT_NE(a, b);
  for (const std::string& n : {a, b}) {
    EXPECT_EQ(n.rfind(lease::kSessionPrefix, 0), 0u) << n;
    EXPECT_LT(n.size(), lease::kSessionNameBytes);
    const std::string token = n.substr(strlen(lease::kSessionPrefix));
    EXPECT_GE(token.size(), 1u);
    EXPECT_LE(token.size(), 40u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz"
                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ_-."),
              std::string::npos)
        << token;
  }
}

TEST_F(DirectSessionExchangeTest, TheDaemonsHelloArrivesThroughTheSocketInTheRoot) {
  ReceivedHello got;
  const char* reason = "";
  ASSERT_EQ(Exchange(&got, &reason), 0) << reason;
  EXPECT_EQ(daemon_.ioctl_calls, 1);
  EXPECT_EQ(daemon_.send_error, 0);
  EXPECT_EQ(daemon_.name.rfind(lease::kSessionPrefix, 0), 0u);
  struct stat st;
  EXPECT_EQ(stat((dir_ + "/" + daemon_.name).c_str(), &st), -1);  // unlinked
  EXPECT_EQ(memcmp(&got.hello, &daemon_.hello, sizeof(got.hello)), 0);
  ASSERT_EQ(got.count, 2);
  const char* why = "";
  const int handle = sessions_.Install(dev_, got, &why);
  ASSERT_GE(handle, 0) << why;
  const Sessions::Session& s = sessions_.Get(handle);
  EXPECT_EQ(s.facts.area.data_begin, kDataOffset);
  EXPECT_EQ(s.facts.area.data_end, kPoolSize);
  EXPECT_EQ(s.facts.stamp_slots, kStampSlots);
  EXPECT_EQ(s.facts.durability, lease::kDurabilityForced);
  EXPECT_TRUE(owned_->IsOwned(s.pool_fd.load()));
  EXPECT_TRUE(owned_->IsOwned(s.stamps_fd.load()));
  sessions_.Release(handle);
}

TEST_F(DirectSessionExchangeTest, OneSessionPerMountUnlockedAtTheLastReferenceAndKept) {
  const char* reason = "";
  const int a = AcquireSettled(&reason);
  ASSERT_GE(a, 0) << reason;
  const int b = sessions_.Acquire(leased_fd_, dev_, kSources, &reason);
  EXPECT_EQ(a, b);
  EXPECT_EQ(daemon_.ioctl_calls, 1);  // cached
  EXPECT_EQ(sessions_.open_count(), 1);
  // The lock is the session's own (the daemon opened the pool anew for it).
  const int probe = open(pool_path_.c_str(), O_RDWR | O_CLOEXEC);
  auto lock_seen = [probe] {
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_start = lease::kClientLockOffset;
    lock.l_len = lease::kClientLockLength;
    EXPECT_EQ(fcntl(probe, F_OFD_GETLK, &lock), 0);
    return lock.l_type;
  };
  EXPECT_EQ(lock_seen(), F_RDLCK);
  const int pool_fd = sessions_.Get(a).pool_fd.load();
  sessions_.Release(a);
  EXPECT_EQ(lock_seen(), F_RDLCK);
  sessions_.Release(b);
  // Idle: unlocked (nothing keeps the pool from a daemon, mkfs or fsck), but kept.
  EXPECT_EQ(lock_seen(), F_UNLCK);
  EXPECT_TRUE(IsOpen(pool_fd));
  EXPECT_EQ(sessions_.open_count(), 0);
  EXPECT_EQ(sessions_.idle_count(), 1);
  // The next reference locks it again, without asking the daemon.
  const int c = sessions_.Acquire(leased_fd_, dev_, kSources, &reason);
  EXPECT_EQ(c, a);
  EXPECT_EQ(daemon_.ioctl_calls, 1);
  EXPECT_EQ(lock_seen(), F_RDLCK);
  // A discarded session (its daemon is not the mount's any more) is closed, not kept.
  sessions_.Discard(c);
  sessions_.Release(c);
  EXPECT_FALSE(IsOpen(pool_fd));
  EXPECT_EQ(sessions_.idle_count(), 0);
  EXPECT_EQ(lock_seen(), F_UNLCK);
  close(probe);
}

// An idle session whose pool someone is rewriting (mkfs --force and fsck --repair hold a
// write lock while they do) cannot be locked again: it is closed and a new exchange
// decides.
TEST_F(DirectSessionExchangeTest, AnIdleSessionThatCannotBeLockedAgainIsClosed) {
  const char* reason = "";
  const int a = AcquireSettled(&reason);
  ASSERT_GE(a, 0) << reason;
  const int pool_fd = sessions_.Get(a).pool_fd.load();
  sessions_.Release(a);
  ASSERT_TRUE(IsOpen(pool_fd));
  const int writer = open(pool_path_.c_str(), O_RDWR | O_CLOEXEC);
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_start = lease::kClientLockOffset;
  lock.l_len = lease::kClientLockLength;
  ASSERT_EQ(fcntl(writer, F_OFD_SETLK, &lock), 0);
  daemon_.ioctl_error = EPERM;  // the next exchange is refused
  EXPECT_EQ(sessions_.Acquire(leased_fd_, dev_, kSources, &reason), -EPERM);
  EXPECT_EQ(daemon_.ioctl_calls, 2);
  EXPECT_FALSE(IsOpen(pool_fd));
  EXPECT_EQ(sessions_.idle_count(), 0);
  close(writer);
}

// A failed attempt is not repeated for every descriptor: the next ones within the retry
// delay fail at once, without binding or asking the daemon.
TEST_F(DirectSessionExchangeTest, AFailedAttemptIsNotRepeatedAtOnce) {
  daemon_.connect = false;  // accepts the ioctl, never connects
  SessionSources sources = kSources;
  sources.timeout_ms = 100;
  const char* reason = "";
  EXPECT_EQ(sessions_.Acquire(leased_fd_, dev_, sources, &reason), -ETIMEDOUT);
  EXPECT_EQ(daemon_.ioctl_calls, 1);
  EXPECT_EQ(sessions_.Acquire(leased_fd_, dev_, sources, &reason), -ETIMEDOUT);
  EXPECT_NE(strstr(reason, "moments ago"), nullptr) << reason;
  EXPECT_EQ(daemon_.ioctl_calls, 1);
  // Another mount is asked.
  daemon_.ioctl_error = EPERM;
  EXPECT_EQ(sessions_.Acquire(leased_fd_, dev_ + 1, sources, &reason), -EPERM);
  EXPECT_EQ(daemon_.ioctl_calls, 2);
  EXPECT_EQ(sessions_.open_count(), 0);
}

TEST_F(DirectSessionExchangeTest, ALongMountRootIsReachedThroughProcSelfFd) {
  std::string deep = dir_;
  std::vector<std::string> made;
  while (deep.size() < 120) {
    deep += "/a-rather-long-directory-name";
    ASSERT_EQ(mkdir(deep.c_str(), 0700), 0);
    made.push_back(deep);
  }
  daemon_.root = deep;
  ReceivedHello got;
  const char* reason = "";
  ASSERT_EQ(Exchange(&got, &reason), 0) << reason;
  EXPECT_EQ(got.count, 2);
  got.CloseAll();
  struct stat st;
  EXPECT_EQ(stat((deep + "/" + daemon_.name).c_str(), &st), -1);
  for (auto it = made.rbegin(); it != made.rend(); ++it) EXPECT_EQ(rmdir(it->c_str()), 0);
}

TEST_F(DirectSessionExchangeTest, RefusalsAndSilenceMeanNoSessionAndNothingLeft) {
  const int before = testpool::OpenDescriptorCount();
  ReceivedHello got;
  const char* reason = "";
  daemon_.ioctl_error = EPERM;  // not the pool's owner (L5)
  EXPECT_EQ(Exchange(&got, &reason), -EPERM);
  EXPECT_NE(strstr(reason, "ioctl"), nullptr) << reason;
  daemon_.ioctl_error = 0;
  daemon_.connect = false;  // replied 0 but never connects
  EXPECT_EQ(Exchange(&got, &reason, 100), -ETIMEDOUT);
  EXPECT_EQ(got.count, 0);
  EXPECT_EQ(testpool::OpenDescriptorCount(), before);
  // No mount root known: nothing is bound at all.
  daemon_.root = "";
  EXPECT_EQ(Exchange(&got, &reason), -ENOENT);
  EXPECT_EQ(daemon_.ioctl_calls, 2);
}

// A server of another user (the peer-credential seam says no) is refused before anything
// is received: none of its descriptors enters the process.
TEST_F(DirectSessionExchangeTest, AnotherUsersServerIsRefusedBeforeReceiving) {
  const int before = testpool::OpenDescriptorCount();
  daemon_.allow_peer = false;
  ReceivedHello got;
  const char* reason = "";
  EXPECT_EQ(Exchange(&got, &reason), -EPERM);
  EXPECT_NE(strstr(reason, "peer"), nullptr) << reason;
  EXPECT_EQ(got.count, 0);
  EXPECT_EQ(testpool::OpenDescriptorCount(), before);
}

TEST_F(DirectSessionExchangeTest, PeerCredentialsOfThisProcessPass) {
  int p[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
  EXPECT_TRUE(PeerIsOwnerOrRoot(p[0]));
  close(p[0]);
  close(p[1]);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_FALSE(PeerIsOwnerOrRoot(pipe_fds[0]));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// Each way a received hello can fail its checks: no session, every descriptor closed.
TEST_F(DirectSessionExchangeTest, InstallRefusesEachBadHelloAndClosesItsDescriptors) {
  const std::string other_pool = dir_ + "/other";
  {
    const int fd = testpool::MakePool(other_pool.c_str());
    format::Superblock sb = testpool::MakeSuperblock();
    sb.uuid[5] ^= 1;
    testpool::SealSuperblock(sb);
    testpool::WriteSuperblocks(fd, sb, sb);
    close(fd);
  }
  const std::string locked_pool = dir_ + "/locked";
  close(testpool::MakePool(locked_pool.c_str()));
  const int holder = open(locked_pool.c_str(), O_RDWR | O_CLOEXEC);
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_start = lease::kClientLockOffset;
  lock.l_len = lease::kClientLockLength;
  ASSERT_EQ(fcntl(holder, F_OFD_SETLK, &lock), 0);  // mkfs --force / fsck --repair at work

  const struct {
    const char* name;
    std::string pool;  // opened as descriptor [0]; "" for a pipe
    unsigned seals;
    uint64_t stamp_bytes;
    void (*mutate)(lease::SessionHello&);
    const char* reason;
  } cases[] = {
      {"bad hello", pool_path_, kStampSeals, kStampSlots * 8,
       [](lease::SessionHello& h) { h.magic = 0; }, "magic"},
      {"uuid differs", other_pool, kStampSeals, kStampSlots * 8, [](lease::SessionHello&) {},
       "uuid"},
      {"pool is a pipe", "", kStampSeals, kStampSlots * 8, [](lease::SessionHello&) {},
       "neither"},
      {"stamps unsealed", pool_path_, 0, kStampSlots * 8, [](lease::SessionHello&) {}, "sealed"},
      {"stamps short", pool_path_, kStampSeals, 8, [](lease::SessionHello&) {}, "words"},
      {"pool locked", locked_pool, kStampSeals, kStampSlots * 8, [](lease::SessionHello&) {},
       "lock"},
  };
  for (const auto& c : cases) {
    const int before = testpool::OpenDescriptorCount();
    ReceivedHello r;
    r.hello = testpool::MakeHello();
    c.mutate(r.hello);
    int p[2] = {-1, -1};
    if (c.pool.empty()) {
      ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
      r.fds[0] = p[0];
    } else {
      r.fds[0] = open(c.pool.c_str(), O_RDWR | O_CLOEXEC);
    }
    r.fds[1] = testpool::MakeStamps(kStampSlots, c.seals, nullptr, c.stamp_bytes);
    r.count = 2;
    const int sent[2] = {r.fds[0], r.fds[1]};
    const char* reason = "";
    EXPECT_LT(sessions_.Install(dev_, r, &reason), 0) << c.name;
    EXPECT_NE(strstr(reason, c.reason), nullptr) << c.name << ": " << reason;
    EXPECT_FALSE(IsOpen(sent[0])) << c.name;
    EXPECT_FALSE(IsOpen(sent[1])) << c.name;
    if (p[1] >= 0) close(p[1]);
    EXPECT_EQ(testpool::OpenDescriptorCount(), before) << c.name;
  }
  EXPECT_EQ(sessions_.open_count(), 0);
  close(holder);
  unlink(other_pool.c_str());
  unlink(locked_pool.c_str());
}

}  // namespace
}  // namespace walfs::direct
