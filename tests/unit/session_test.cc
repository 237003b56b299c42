// Direct-access sessions without a mount (fs/session.h): who may have one, whether the
// pool offers them, the request check, and the hello's delivery over a real socket.
#include "fs/session.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "fs/lease_protocol.h"
#include "fs/lease_stamps.h"

namespace walfs::fs {
namespace {

TEST(SessionTest, OnlyThePoolOwnerOrRoot) {  // L5
  EXPECT_TRUE(MayUseDirectAccess(0, 106));
  EXPECT_TRUE(MayUseDirectAccess(106, 106));
  EXPECT_FALSE(MayUseDirectAccess(65534, 106));
  EXPECT_FALSE(MayUseDirectAccess(107, 106));
  EXPECT_TRUE(MayUseDirectAccess(0, 0));
  EXPECT_FALSE(MayUseDirectAccess(106, 0));
}

TEST(SessionTest, DurabilityComesFromHowThePoolIsMapped) {  // L7
  EXPECT_EQ(SessionDurability(false, false, nullptr), 0u);
  EXPECT_EQ(SessionDurability(false, false, "1"), 0u);   // msync mode: never
  EXPECT_EQ(SessionDurability(true, true, nullptr), lease::kDurabilityDevice);
  EXPECT_EQ(SessionDurability(true, true, "1"), lease::kDurabilityDevice);
  EXPECT_EQ(SessionDurability(false, true, "1"), lease::kDurabilityForced);
  EXPECT_EQ(SessionDurability(false, true, nullptr), lease::kDurabilityMapSync);
  EXPECT_EQ(SessionDurability(false, true, "0"), lease::kDurabilityMapSync);
  EXPECT_STREQ(DurabilityName(lease::kDurabilityForced), "forced");
  EXPECT_STREQ(DurabilityName(lease::kDurabilityMapSync), "map_sync");
  EXPECT_STREQ(DurabilityName(lease::kDurabilityDevice), "device");
  EXPECT_STREQ(DurabilityName(lease::kDurabilityReadsOnly), "reads_only");
  EXPECT_STREQ(DurabilityName(0), "none");
}

TEST(SessionTest, DirectAccessIsOffForEveryReasonAndSaysWhich) {
  DirectAccessInputs in{.pmem_mode = true, .durability = lease::kDurabilityForced};
  DirectAccess d = DecideDirectAccess(in);
  EXPECT_TRUE(d.available());
  EXPECT_EQ(d.durability, lease::kDurabilityForced);

  DirectAccessInputs ro = in;
  ro.read_only = true;
  EXPECT_EQ(DecideDirectAccess(ro).off_reason, "read-only mount");
  EXPECT_EQ(DecideDirectAccess(ro).durability, 0u);
  DirectAccessInputs msync = in;
  msync.pmem_mode = false;
  msync.durability = 0;
  EXPECT_NE(DecideDirectAccess(msync).off_reason.find("msync mode"), std::string::npos);
  // Reads need no durability: msync mode offers sessions and read leases only.
  EXPECT_FALSE(DecideDirectAccess(msync).available());
  EXPECT_TRUE(DecideDirectAccess(msync).reads_available());
  EXPECT_EQ(DecideDirectAccess(msync).durability, lease::kDurabilityReadsOnly);
  EXPECT_FALSE(DecideDirectAccess(ro).reads_available());
  DirectAccessInputs msync_stampless = msync;
  msync_stampless.stamps_error = "memfd: ENOMEM";
  EXPECT_FALSE(DecideDirectAccess(msync_stampless).reads_available());
  DirectAccessInputs msync_cached = msync;
  msync_cached.page_cache = true;
  EXPECT_FALSE(DecideDirectAccess(msync_cached).reads_available());
  DirectAccessInputs cached = in;
  cached.page_cache = true;
  EXPECT_NE(DecideDirectAccess(cached).off_reason.find("page_cache"), std::string::npos);
  DirectAccessInputs stampless = in;
  stampless.stamps_error = "memfd: ENOMEM";
  EXPECT_EQ(DecideDirectAccess(stampless).off_reason, "no revocation stamps: memfd: ENOMEM");
}

lease::SessionRequest Request(const std::string& name) {
  lease::SessionRequest r{};
  r.magic = lease::kMagic;
  r.version = lease::kVersion;
  std::memcpy(r.name, name.data(), std::min(name.size(), sizeof(r.name)));
  return r;
}

TEST(SessionTest, RequestNeedsMagicVersionAndASessionName) {
  std::string name;
  EXPECT_EQ(CheckSessionRequest(Request(".walfs-direct.abc"), &name), 0);
  EXPECT_EQ(name, ".walfs-direct.abc");
  lease::SessionRequest r = Request(".walfs-direct.abc");
  r.magic = 0;
  EXPECT_EQ(CheckSessionRequest(r, &name), EINVAL);
  r = Request(".walfs-direct.abc");
  r.version = 2;
  EXPECT_EQ(CheckSessionRequest(r, &name), EINVAL);
  for (const std::string& bad :
       {std::string("seg"), std::string(".walfs-direct."), std::string(".walfs-direct.a/b"),
        std::string("../.walfs-direct.a"), std::string(".walfs-direct.") + std::string(41, 'x')}) {
    EXPECT_EQ(CheckSessionRequest(Request(bad), &name), EINVAL) << bad;
  }
  // No NUL within the field.
  r = Request(".walfs-direct.abc");
  std::memset(r.name, 'a', sizeof(r.name));
  std::memcpy(r.name, ".walfs-direct.", 14);
  EXPECT_EQ(CheckSessionRequest(r, &name), EINVAL);
}

TEST(SessionTest, HelloCarriesWhatTheClientChecks) {
  uint8_t uuid[16];
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(i * 7);
  lease::SessionHello h = MakeHello(lease::kDurabilityMapSync, lease::kHelloFlagImage, uuid, 99, 1234);
  EXPECT_EQ(h.magic, lease::kMagic);
  EXPECT_EQ(h.version, lease::kVersion);
  EXPECT_EQ(h.durability, lease::kDurabilityMapSync);
  EXPECT_EQ(h.flags, lease::kHelloFlagImage);
  EXPECT_EQ(std::memcmp(h.uuid, uuid, 16), 0);
  EXPECT_EQ(h.stamp_slots, 99u);
  EXPECT_EQ(h.stamps_id, 1234u);
  for (uint64_t r : h.reserved) EXPECT_EQ(r, 0u);
}

// Delivery into a directory that stands in for the mount: a client socket bound there,
// listening, and the daemon's SessionSender::Deliver connecting to it.
class DeliverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/walfs-session-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    pool_path_ = dir_ + "/pool";
    const int w = open(pool_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(w, 0);
    ASSERT_EQ(ftruncate(w, 1 << 20), 0);
    close(w);
    // The daemon's own descriptor is the pool lock's, O_RDONLY.
    pool_fd_ = open(pool_path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(pool_fd_, 0);
    auto stamps = LeaseStamps::Create(64);
    ASSERT_TRUE(stamps.ok());
    stamps_ = std::move(*stamps);
    uint8_t uuid[16] = {1, 2, 3};
    config_.mountpoint = dir_;
    config_.pool_fd = pool_fd_;
    config_.stamps_fd = stamps_->fd();
    config_.hello = MakeHello(lease::kDurabilityForced, 0, uuid, stamps_->slots(), stamps_->id());
  }
  void TearDown() override {
    if (listener_ >= 0) close(listener_);
    close(pool_fd_);
    std::string cmd = absl::StrCat("rm -rf '", dir_, "'");
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  // Binds and listens at <dir>/<name> as a client does.
  void Listen(const std::string& dir, const std::string& name) {
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    const int dfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dfd, 0);
    const std::string path = absl::StrCat("/proc/self/fd/", dfd, "/", name);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(dfd);
    ASSERT_EQ(listen(listener_, 1), 0);
  }

  // Accepts and receives the hello; the descriptors in *fds.
  ssize_t Receive(lease::SessionHello* hello, std::vector<int>* fds) {
    pollfd p{.fd = listener_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 1000) != 1) return -1;
    const int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return -1;
    iovec iov{hello, sizeof(*hello)};
    alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC);
    close(conn);
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds->push_back(fd);
      }
    }
    return n;
  }

  std::string dir_, pool_path_;
  int pool_fd_ = -1;
  int listener_ = -1;
  std::unique_ptr<LeaseStamps> stamps_;
  SessionSender::Config config_;
};

TEST_F(DeliverTest, HelloWithANewPoolDescriptionAndTheSealedStamps) {
  Listen(dir_, ".walfs-direct.t1");
  std::string why;
  ASSERT_EQ(SessionSender::Deliver(config_, ".walfs-direct.t1", geteuid(), &why), 0) << why;
  lease::SessionHello hello{};
  std::vector<int> fds;
  ASSERT_EQ(Receive(&hello, &fds), static_cast<ssize_t>(sizeof(hello)));
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_EQ(std::memcmp(&hello, &config_.hello, sizeof(hello)), 0);
  // [0]: the same inode, opened anew read-write: its own open file description.
  struct stat a, b;
  ASSERT_EQ(fstat(fds[0], &a), 0);
  ASSERT_EQ(fstat(pool_fd_, &b), 0);
  EXPECT_EQ(a.st_dev, b.st_dev);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(fcntl(fds[0], F_GETFL) & O_ACCMODE, O_RDWR);
  EXPECT_EQ(fcntl(pool_fd_, F_GETFL) & O_ACCMODE, O_RDONLY);
  ASSERT_EQ(lseek(fds[0], 4096, SEEK_SET), 4096);
  EXPECT_EQ(lseek(pool_fd_, 0, SEEK_CUR), 0);  // offsets are per description
  // [1]: the stamps memfd, sealed.
  EXPECT_EQ(fcntl(fds[1], F_GET_SEALS), LeaseStamps::kSeals);
  struct stat st;
  ASSERT_EQ(fstat(fds[1], &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), hello.stamp_slots * 8);
  for (int fd : fds) close(fd);
}

TEST_F(DeliverTest, ImageIsTheThirdDescriptorOnlyWithItsFlag) {
  Listen(dir_, ".walfs-direct.img");
  const int image = memfd_create("image", MFD_CLOEXEC);
  ASSERT_GE(image, 0);
  config_.image_fd = image;
  config_.hello.flags = lease::kHelloFlagImage;
  std::string why;
  ASSERT_EQ(SessionSender::Deliver(config_, ".walfs-direct.img", geteuid(), &why), 0) << why;
  lease::SessionHello hello{};
  std::vector<int> fds;
  ASSERT_EQ(Receive(&hello, &fds), static_cast<ssize_t>(sizeof(hello)));
  ASSERT_EQ(fds.size(), 3u);
  struct stat a, b;
  ASSERT_EQ(fstat(fds[2], &a), 0);
  ASSERT_EQ(fstat(image, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  for (int fd : fds) close(fd);
  close(image);
}

TEST_F(DeliverTest, ListenerOfAnotherUserGetsNothing) {  // L5
  Listen(dir_, ".walfs-direct.other");
  std::string why;
  EXPECT_EQ(SessionSender::Deliver(config_, ".walfs-direct.other", geteuid() + 1, &why), EPERM);
  EXPECT_NE(why.find("uid"), std::string::npos) << why;
  lease::SessionHello hello{};
  std::vector<int> fds;
  // The connection was made and closed without a byte or a descriptor.
  EXPECT_EQ(Receive(&hello, &fds), 0);
  EXPECT_TRUE(fds.empty());
}

TEST_F(DeliverTest, NoListenerIsAnErrorWithItsReason) {
  std::string why;
  EXPECT_NE(SessionSender::Deliver(config_, ".walfs-direct.none", geteuid(), &why), 0);
  EXPECT_NE(why.find("connect to"), std::string::npos) << why;
}

TEST_F(DeliverTest, AMountPointTooLongForSunPathIsReachedThroughProc) {
  std::string deep = dir_;
  while (deep.size() < 150) {
    deep += "/a-rather-long-directory-name";
    ASSERT_EQ(mkdir(deep.c_str(), 0700), 0);
  }
  Listen(deep, ".walfs-direct.deep");
  config_.mountpoint = deep;
  std::string why;
  ASSERT_EQ(SessionSender::Deliver(config_, ".walfs-direct.deep", geteuid(), &why), 0) << why;
  lease::SessionHello hello{};
  std::vector<int> fds;
  EXPECT_EQ(Receive(&hello, &fds), static_cast<ssize_t>(sizeof(hello)));
  EXPECT_EQ(fds.size(), 2u);
  for (int fd : fds) close(fd);
  // The O_PATH descriptor of the mount point is gone again (a held one keeps umount
  // busy): every descriptor of this process on `deep` is closed.
  const std::string proc = "/proc/self/fd";
  for (int fd = 0; fd < 1024; ++fd) {
    char target[PATH_MAX];
    const ssize_t n = readlink(absl::StrCat(proc, "/", fd).c_str(), target,
                               sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    EXPECT_NE(std::string(target), deep) << "descriptor " << fd << " left on the mount point";
  }
}

TEST_F(DeliverTest, SenderThreadCountsDeliveriesAndFailures) {
  std::atomic<uint64_t> granted{0}, refused{0};
  config_.granted = &granted;
  config_.refused = &refused;
  Listen(dir_, ".walfs-direct.q");
  {
    SessionSender sender(config_);
    EXPECT_TRUE(sender.Enqueue(".walfs-direct.q", geteuid()));
    EXPECT_TRUE(sender.Enqueue(".walfs-direct.missing", geteuid()));
    lease::SessionHello hello{};
    std::vector<int> fds;
    EXPECT_EQ(Receive(&hello, &fds), static_cast<ssize_t>(sizeof(hello)));
    for (int fd : fds) close(fd);
    for (int i = 0; i < 200 && granted.load() + refused.load() < 2; ++i) usleep(10000);
  }
  EXPECT_EQ(granted.load(), 1u);
  EXPECT_EQ(refused.load(), 1u);
}

}  // namespace
}  // namespace walfs::fs
