#include "ipc/segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/gc.h"
#include "ipc/names.h"
#include "tests/util/status_matchers.h"

namespace qr::ipc {
namespace {

using ::qr::testing::StatusIs;
using ::testing::Contains;
using ::testing::Not;

// Unique across concurrently running tests, even in PID namespaces where
// every sandbox's test has the same pid.
std::string Unique(const std::string& base) {
  static const std::string tag = [] {
    std::random_device rd;
    return std::to_string(rd() % 1000000000u);
  }();
  static int n = 0;
  return base + "-" + tag + "-" + std::to_string(++n);
}

GroupSegment::CreateParams Params(const std::string& group, uint64_t gen,
                                  uint32_t uid = ::getuid()) {
  GroupSegment::CreateParams p;
  p.group = group;
  p.name = SegmentName(uid, group, gen, 0x0123456789abcdefull + gen);
  p.world_size = 4;
  p.generation = gen;
  p.buffer_bytes = 4096;
  return p;
}

void CreateDataObject(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
}

bool Exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

TEST(SegmentTest, CreateOpenRoundTripAndMode0600) {
  auto p = Params(Unique("seg"), 1);
  ASSERT_OK_AND_ASSIGN(auto seg, GroupSegment::Create(p));
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + p.name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), GroupSegmentBytes(4));
  ASSERT_OK_AND_ASSIGN(auto again, GroupSegment::Open(p.name));
  EXPECT_EQ(again->world_size(), 4);
  EXPECT_EQ(again->header()->generation, 1u);
  EXPECT_EQ(ReadField(again->header()->group, 64), p.group);
  // Both mappings see one memory.
  seg->slot(2)->pid = 77;
  EXPECT_EQ(again->slot(2)->pid, 77);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->abort_page()) % kPageBytes, 0u);
  ASSERT_OK(GroupSegment::Remove(p.name));
  EXPECT_FALSE(Exists(p.name));
}

TEST(SegmentTest, CreateRefusesATakenName) {
  auto p = Params(Unique("taken"), 1);
  ASSERT_OK_AND_ASSIGN(auto seg, GroupSegment::Create(p));
  EXPECT_THAT(GroupSegment::Create(p), StatusIs(StatusCode::kAlreadyExists));
  ASSERT_OK(GroupSegment::Remove(p.name));
}

TEST(SegmentTest, OpenRefusesMissingAndForeignObjects) {
  EXPECT_THAT(GroupSegment::Open("/quickreduce-nonexistent-xyz"),
              StatusIs(StatusCode::kUnavailable));
  std::string junk = UserPrefix(::getuid()) + Unique("junk");
  int fd = ::shm_open(junk.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 16384), 0);
  ::close(fd);
  EXPECT_THAT(GroupSegment::Open(junk), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_OK(GroupSegment::Remove(junk));
  EXPECT_OK(GroupSegment::Remove(junk));  // removing twice is fine
}

TEST(SegmentTest, LocksTellLiveOwnersAcrossDescriptors) {
  auto p = Params(Unique("owners"), 1);
  ASSERT_OK_AND_ASSIGN(auto broker, GroupSegment::Create(p));  // holds the broker lock
  ASSERT_OK_AND_ASSIGN(auto member, GroupSegment::Open(p.name));
  ASSERT_OK_AND_ASSIGN(auto observer, GroupSegment::Open(p.name));
  EXPECT_TRUE(observer->BrokerHeld());
  EXPECT_TRUE(observer->InUse());
  EXPECT_FALSE(observer->SlotHeld(1));
  ASSERT_OK(member->LockSlot(1));
  EXPECT_TRUE(observer->SlotHeld(1));
  // One holder per slot.
  EXPECT_THAT(observer->LockSlot(1), StatusIs(StatusCode::kAlreadyExists));
  EXPECT_THAT(observer->LockBroker(), StatusIs(StatusCode::kAlreadyExists));
  broker.reset();
  EXPECT_FALSE(observer->BrokerHeld());
  EXPECT_TRUE(observer->InUse());
  member.reset();  // a member exiting or leaving drops its lock
  EXPECT_FALSE(observer->SlotHeld(1));
  EXPECT_FALSE(observer->InUse());
  // A process that dies drops its locks too. The child says over a pipe when
  // it holds the lock: a loaded machine may take seconds to get it there, and
  // a deadline on the lock itself would turn that delay into a failure.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    auto seg = GroupSegment::Open(p.name);
    const char said = seg.ok() && (*seg)->LockSlot(3).ok() ? 'y' : 'n';
    if (::write(ready[1], &said, 1) != 1 || said != 'y') ::_exit(1);
    ::pause();
  }
  ::close(ready[1]);
  char said = 0;
  ssize_t got;
  do {
    got = ::read(ready[0], &said, 1);
  } while (got < 0 && errno == EINTR);
  ::close(ready[0]);
  EXPECT_EQ(said, 'y') << "the child could not open the segment or take slot 3";
  EXPECT_TRUE(observer->SlotHeld(3));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(observer->SlotHeld(3));
  EXPECT_FALSE(observer->InUse());
  ASSERT_OK(GroupSegment::Remove(p.name));
}

TEST(SegmentTest, SweepRemovesStaleSegmentsWithTheirDataObjectsOnly) {
  // A made-up uid: brokers of tests running beside this one sweep only their
  // own uid's objects.
  const uint32_t uid = 3000000000u + static_cast<uint32_t>(std::random_device()() % 100000000u);
  std::string a = Unique("sweep");
  // Group "a" generation 1 is stale; group "a-1-x" generation 2 is live and
  // its name starts with "a"'s segment name: ownership must not be confused.
  auto pa = Params(a, 1, uid);
  auto pb = Params(a + "-1-x", 2, uid);
  ASSERT_OK_AND_ASSIGN(auto sa, GroupSegment::Create(pa));
  ASSERT_OK_AND_ASSIGN(auto sb, GroupSegment::Create(pb));
  sa.reset();  // its broker is gone and it has no members: stale
  CreateDataObject(pa.name + "-rank0");
  CreateDataObject(pb.name + "-rank0");
  SweepResult dry = SweepStale(uid, /*dry_run=*/true);
  EXPECT_THAT(dry.removed, Contains(pa.name));
  EXPECT_THAT(dry.removed, Contains(pa.name + "-rank0"));
  EXPECT_TRUE(Exists(pa.name));
  SweepResult r = SweepStale(uid, /*dry_run=*/false);
  EXPECT_THAT(r.removed, Contains(pa.name));
  EXPECT_THAT(r.removed, Not(Contains(pb.name)));
  EXPECT_THAT(r.removed, Not(Contains(pb.name + "-rank0")));
  EXPECT_THAT(r.live_segments, Contains(pb.name));
  EXPECT_FALSE(Exists(pa.name));
  EXPECT_FALSE(Exists(pa.name + "-rank0"));
  EXPECT_TRUE(Exists(pb.name + "-rank0"));
  ASSERT_OK(RemoveGroupObjects(pb.name));
  EXPECT_FALSE(Exists(pb.name));
  EXPECT_FALSE(Exists(pb.name + "-rank0"));
}

TEST(SegmentTest, KeptSegmentsAreNotSwept) {
  const uint32_t uid = 3000000000u + static_cast<uint32_t>(std::random_device()() % 100000000u);
  auto p = Params(Unique("kept"), 1, uid);
  ASSERT_OK_AND_ASSIGN(auto seg, GroupSegment::Create(p));
  seg.reset();  // unused, but kept
  SweepResult r = SweepStale(uid, false, {p.name});
  EXPECT_THAT(r.removed, Not(Contains(p.name)));
  EXPECT_TRUE(Exists(p.name));
  ASSERT_OK(GroupSegment::Remove(p.name));
}

}  // namespace
}  // namespace qr::ipc
