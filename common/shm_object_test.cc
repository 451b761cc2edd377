#include "common/shm_object.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;

std::string UniqueName(const char* tag) {
  return "/quickreduce-test-" + std::to_string(::getpid()) + "-" + tag;
}

bool Exists(const std::string& name) { return ::access(("/dev/shm" + name).c_str(), F_OK) == 0; }

TEST(ShmMappingTest, PeerSeesCreatorWritesAndOnlyCreatorUnlinks) {
  const std::string name = UniqueName("share");
  {
    ASSERT_OK_AND_ASSIGN(ShmMapping created, ShmMapping::Create(name, 8192));
    EXPECT_TRUE(created.owner());
    static_cast<char*>(created.data())[100] = 42;
    {
      ASSERT_OK_AND_ASSIGN(ShmMapping opened, ShmMapping::Open(name, 8192));
      EXPECT_FALSE(opened.owner());
      EXPECT_EQ(static_cast<char*>(opened.data())[100], 42);
    }
    EXPECT_TRUE(Exists(name)) << "a peer's unmap must not unlink";
  }
  EXPECT_FALSE(Exists(name));
}

TEST(ShmMappingTest, CreatedWithMode0600AndZeroFilled) {
  const std::string name = UniqueName("mode");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 4096));
  struct stat st;
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const char* p = static_cast<const char*>(m.data());
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(p[i], 0);
}

TEST(ShmMappingTest, CreateFailsWhenNameTaken) {
  const std::string name = UniqueName("taken");
  ASSERT_OK_AND_ASSIGN(ShmMapping first, ShmMapping::Create(name, 4096));
  EXPECT_THAT(ShmMapping::Create(name, 4096), StatusIs(StatusCode::kAlreadyExists));
  EXPECT_TRUE(Exists(name)) << "the failed create must not unlink the first one";
}

TEST(ShmMappingTest, OpenMissingIsUnavailable) {
  EXPECT_THAT(ShmMapping::Open(UniqueName("missing"), 4096), StatusIs(StatusCode::kUnavailable));
}

TEST(ShmMappingTest, OpenTooSmallIsUnavailable) {
  const std::string name = UniqueName("small");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 4096));
  EXPECT_THAT(ShmMapping::Open(name, 8192),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("4096")));
}

// A peer's buffer that was truncated (or replaced) before we map it is
// refused instead of faulting on first touch.
TEST(ShmMappingTest, OpenRefusesATruncatedBuffer) {
  const std::string name = UniqueName("trunc");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 8192));
  int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 100), 0);
  ::close(fd);
  EXPECT_THAT(ShmMapping::Open(name, 8192),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("100 bytes")));
}

TEST(ShmMappingTest, OpenRefusesObjectsOthersCanWrite) {
  const std::string name = UniqueName("mode666");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 4096));
  ASSERT_EQ(::chmod(("/dev/shm" + name).c_str(), 0666), 0);
  EXPECT_THAT(ShmMapping::Open(name, 4096),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("mode 0666")));
}

TEST(ShmMappingTest, CreateReservesThePages) {
  const std::string name = UniqueName("reserve");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 1 << 20));
  struct stat st;
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  // ftruncate alone leaves a sparse file (0 blocks); fallocate allocates.
  EXPECT_GE(static_cast<int64_t>(st.st_blocks) * 512, int64_t{1} << 20);
}

TEST(ShmMappingTest, BadNamesAreRejected) {
  EXPECT_THAT(ShmMapping::Create("noslash", 64), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ShmMapping::Create("/a/b", 64), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ShmMappingTest, MoveTransfersOwnership) {
  const std::string name = UniqueName("move");
  ASSERT_OK_AND_ASSIGN(ShmMapping a, ShmMapping::Create(name, 4096));
  ShmMapping b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(b.owner());
  a.Reset();
  EXPECT_TRUE(Exists(name));
  b.Reset();
  EXPECT_FALSE(Exists(name));
}

TEST(ShmMappingTest, DisownedNamesOutliveTheMapping) {
  const std::string name = UniqueName("disown");
  {
    ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 4096));
    m.Disown();
    EXPECT_FALSE(m.owner());
  }
  EXPECT_TRUE(Exists(name));
  ::shm_unlink(name.c_str());
}

TEST(ShmMappingTest, OpenWholeMapsTheObjectsSizeAndKeepsItsDescriptor) {
  const std::string name = UniqueName("whole");
  ASSERT_OK_AND_ASSIGN(ShmMapping m, ShmMapping::Create(name, 3 * 4096));
  static_cast<char*>(m.data())[3 * 4096 - 1] = 7;
  ASSERT_OK_AND_ASSIGN(ShmMapping whole, ShmMapping::OpenWhole(name, 4096));
  EXPECT_EQ(whole.size(), 3u * 4096);
  EXPECT_EQ(static_cast<char*>(whole.data())[3 * 4096 - 1], 7);
  struct stat st;
  ASSERT_EQ(::fstat(whole.fd(), &st), 0);
  EXPECT_EQ(st.st_size, 3 * 4096);
  EXPECT_THAT(ShmMapping::OpenWhole(name, 4 * 4096), StatusIs(StatusCode::kUnavailable));
}

}  // namespace
}  // namespace qr
