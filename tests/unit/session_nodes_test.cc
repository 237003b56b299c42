// The virtual socket nodes of direct-access sessions (fs/session_nodes.h).
#include "fs/session_nodes.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "core/format.h"
#include "fs/lease_protocol.h"

namespace walfs::fs {
namespace {

constexpr mode_t kSocket = S_IFSOCK | 0755;

std::string Name(const std::string& token) { return lease::kSessionPrefix + token; }

// A clock and a set of live pids the test controls.
struct World {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::set<pid_t> dead;
  SessionNodes nodes{[this] { return now; }, [this](pid_t p) { return dead.count(p) == 0; }};
};

TEST(SessionNodesTest, NamesArePrefixAndAShortPlainToken) {
  EXPECT_TRUE(SessionNodes::IsReserved(Name("")));
  EXPECT_TRUE(SessionNodes::IsReserved(Name("x/y")));
  EXPECT_FALSE(SessionNodes::IsReserved(".walfs-direct"));
  EXPECT_FALSE(SessionNodes::IsReserved("000000010000000000000001"));
  EXPECT_TRUE(SessionNodes::IsValidName(Name("a")));
  EXPECT_TRUE(SessionNodes::IsValidName(Name("Az09_.-")));
  EXPECT_TRUE(SessionNodes::IsValidName(Name(std::string(40, 'k'))));
  EXPECT_FALSE(SessionNodes::IsValidName(Name("")));
  EXPECT_FALSE(SessionNodes::IsValidName(Name(std::string(41, 'k'))));
  for (const char* bad : {"a/b", "a b", "a\n", "\xc3\xa9", "a:b", "*"}) {
    EXPECT_FALSE(SessionNodes::IsValidName(Name(bad))) << bad;
  }
  EXPECT_FALSE(SessionNodes::IsValidName("probe1"));
  EXPECT_LT(Name(std::string(40, 'k')).size(), lease::kSessionNameBytes);
}

TEST(SessionNodesTest, NodeIdsNeverMeetPoolInodes) {
  // Pool inode ids are table indexes below inode_count <= 2^32 (core/validate.cc);
  // FUSE_ROOT_ID (1) is the pool's root.
  EXPECT_GT(SessionNodes::kFirstNodeId, uint64_t{1} << 32);
  EXPECT_FALSE(SessionNodes::IsNodeId(core::format::kRootInode));
  EXPECT_FALSE(SessionNodes::IsNodeId((uint64_t{1} << 32) - 1));
  World w;
  SessionNodes::Node a, b;
  ASSERT_EQ(w.nodes.Create(Name("a"), kSocket, 26, 27, 100, &a), 0);
  ASSERT_EQ(w.nodes.Create(Name("b"), kSocket, 26, 27, 100, &b), 0);
  EXPECT_TRUE(SessionNodes::IsNodeId(a.nodeid));
  EXPECT_TRUE(SessionNodes::IsNodeId(b.nodeid));
  EXPECT_NE(a.nodeid, b.nodeid);
  EXPECT_EQ(a.uid, 26u);
  EXPECT_EQ(a.gid, 27u);
  EXPECT_EQ(a.pid, 100);
}

TEST(SessionNodesTest, OnlyASocketWithAValidNameAndAKnownCreator) {
  World w;
  SessionNodes::Node n;
  EXPECT_EQ(w.nodes.Create(Name("a"), S_IFREG | 0600, 0, 0, 100, &n), EPERM);
  EXPECT_EQ(w.nodes.Create(Name("a"), S_IFIFO | 0600, 0, 0, 100, &n), EPERM);
  EXPECT_EQ(w.nodes.Create(Name("a"), S_IFCHR | 0600, 0, 0, 100, &n), EPERM);
  EXPECT_EQ(w.nodes.Create(Name("a/b"), kSocket, 0, 0, 100, &n), EPERM);
  EXPECT_EQ(w.nodes.Create("plain", kSocket, 0, 0, 100, &n), EPERM);
  EXPECT_EQ(w.nodes.Create(Name("a"), kSocket, 0, 0, 0, &n), EPERM);  // pid unknown
  EXPECT_EQ(w.nodes.size(), 0u);
  ASSERT_EQ(w.nodes.Create(Name("a"), kSocket, 0, 0, 100, &n), 0);
  EXPECT_EQ(w.nodes.Create(Name("a"), kSocket, 0, 0, 100, &n), EEXIST);
}

TEST(SessionNodesTest, LookupFindsTheSameNodeUntilRemovedAndIdsAreNotReused) {
  World w;
  SessionNodes::Node made;
  ASSERT_EQ(w.nodes.Create(Name("t"), kSocket, 5, 6, 100, &made), 0);
  std::optional<SessionNodes::Node> found = w.nodes.Lookup(Name("t"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->nodeid, made.nodeid);
  ASSERT_TRUE(w.nodes.Get(made.nodeid));
  EXPECT_EQ(w.nodes.Get(made.nodeid)->uid, 5u);
  EXPECT_FALSE(w.nodes.Lookup(Name("u")));
  EXPECT_FALSE(w.nodes.Get(made.nodeid + 1));
  EXPECT_FALSE(w.nodes.Get(core::format::kRootInode));
  EXPECT_EQ(w.nodes.Remove(Name("t")), 0);
  EXPECT_EQ(w.nodes.Remove(Name("t")), ENOENT);
  EXPECT_FALSE(w.nodes.Lookup(Name("t")));
  EXPECT_FALSE(w.nodes.Get(made.nodeid));  // a late GETATTR or FORGET finds nothing
  SessionNodes::Node again;
  ASSERT_EQ(w.nodes.Create(Name("t"), kSocket, 5, 6, 100, &again), 0);
  EXPECT_NE(again.nodeid, made.nodeid);
}

TEST(SessionNodesTest, CreatorIsThePidThatMadeIt) {
  World w;
  SessionNodes::Node n;
  ASSERT_EQ(w.nodes.Create(Name("c"), kSocket, 0, 0, 100, &n), 0);
  EXPECT_EQ(w.nodes.CheckCreator(Name("c"), 100), 0);
  EXPECT_EQ(w.nodes.CheckCreator(Name("c"), 101), ENOENT);
  EXPECT_EQ(w.nodes.CheckCreator(Name("c"), 0), ENOENT);
  EXPECT_EQ(w.nodes.CheckCreator(Name("d"), 100), ENOENT);
}

TEST(SessionNodesTest, FullTableDropsAbandonedNodesElseEmfile) {
  World w;
  SessionNodes::Node n;
  for (size_t i = 0; i < SessionNodes::kMaxNodes; ++i) {
    ASSERT_EQ(w.nodes.Create(Name(absl::StrCat("n", i)), kSocket, 0, 0,
                             static_cast<pid_t>(1000 + i), &n),
              0);
  }
  EXPECT_EQ(w.nodes.Create(Name("x"), kSocket, 0, 0, 99, &n), EMFILE);
  // Young nodes of live creators stay, however long it takes to fill up.
  w.now += SessionNodes::kMaxAge;
  EXPECT_EQ(w.nodes.Create(Name("x"), kSocket, 0, 0, 99, &n), EMFILE);
  EXPECT_EQ(w.nodes.size(), SessionNodes::kMaxNodes);
  // One creator died: its node goes, the new one comes.
  w.dead.insert(1003);
  ASSERT_EQ(w.nodes.Create(Name("x"), kSocket, 0, 0, 99, &n), 0);
  EXPECT_FALSE(w.nodes.Lookup(Name("n3")));
  EXPECT_TRUE(w.nodes.Lookup(Name("n4")));
  EXPECT_EQ(w.nodes.size(), SessionNodes::kMaxNodes);
  // Past kMaxAge every old node goes; the youngest (x) stays.
  w.now += std::chrono::seconds(1);
  ASSERT_EQ(w.nodes.Create(Name("y"), kSocket, 0, 0, 99, &n), 0);
  EXPECT_EQ(w.nodes.size(), 2u);
  EXPECT_TRUE(w.nodes.Lookup(Name("x")));
  EXPECT_TRUE(w.nodes.Lookup(Name("y")));
}

TEST(SessionNodesTest, DefaultLivenessIsTheRealProcessTable) {
  SessionNodes nodes;
  SessionNodes::Node n;
  for (size_t i = 0; i < SessionNodes::kMaxNodes; ++i) {
    // pid_max is at most 2^22: these pids never exist.
    ASSERT_EQ(nodes.Create(Name(absl::StrCat("g", i)), kSocket, 0, 0,
                           static_cast<pid_t>((1 << 22) + 10 + i), &n),
              0);
  }
  ASSERT_EQ(nodes.Create(Name("mine"), kSocket, 0, 0, getpid(), &n), 0);
  EXPECT_EQ(nodes.size(), 1u);
}

TEST(SessionNodesTest, ConcurrentCreatesStayWithinTheLimit) {
  World w;
  std::mutex mu;
  std::set<uint64_t> ids;
  int emfile = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        SessionNodes::Node n;
        const int e = w.nodes.Create(Name(absl::StrCat(t, "_", i)),
                                     kSocket, 0, 0, 100, &n);
        std::lock_guard<std::mutex> l(mu);
        if (e == 0) {
          EXPECT_TRUE(ids.insert(n.nodeid).second);
        } else {
          EXPECT_EQ(e, EMFILE);
          ++emfile;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ids.size(), SessionNodes::kMaxNodes);
  EXPECT_EQ(emfile, 4 * 40 - static_cast<int>(SessionNodes::kMaxNodes));
  EXPECT_EQ(w.nodes.size(), SessionNodes::kMaxNodes);
}

}  // namespace
}  // namespace walfs::fs
