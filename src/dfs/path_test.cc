// Entry names and path splitting.
#include "dfs/path.h"

#include <gtest/gtest.h>

#include "ros2/dfs.h"

namespace ros2::dfs {
namespace {

TEST(ValidateName, AcceptsOrdinaryNamesAndRefusesTheRest) {
  EXPECT_TRUE(ValidateName("a").ok());
  EXPECT_TRUE(ValidateName("file.txt").ok());
  EXPECT_TRUE(ValidateName("...").ok());
  EXPECT_TRUE(ValidateName(std::string(kMaxNameLength, 'x')).ok());
  EXPECT_EQ(ValidateName(std::string(kMaxNameLength + 1, 'x')).code(), Status::Code::kNameTooLong);
  EXPECT_TRUE(ValidateName("").IsInvalidArgument());
  EXPECT_TRUE(ValidateName(".").IsInvalidArgument());
  EXPECT_TRUE(ValidateName("..").IsInvalidArgument());
  EXPECT_TRUE(ValidateName("a/b").IsInvalidArgument());
  EXPECT_TRUE(ValidateName(std::string_view("a\0b", 3)).IsInvalidArgument());
}

TEST(SplitPath, DropsEmptyAndDotComponentsKeepsDotDot) {
  auto parts = SplitPath("/a//b/./c/");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string_view>{"a", "b", "c"}));
  parts = SplitPath("/");
  ASSERT_TRUE(parts.ok());
  EXPECT_TRUE(parts->empty());
  parts = SplitPath("/a/../b");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string_view>{"a", "..", "b"}));
}

TEST(SplitPath, RefusesRelativeEmptyAndOverlongPaths) {
  EXPECT_TRUE(SplitPath("").status().IsInvalidArgument());
  EXPECT_TRUE(SplitPath("a/b").status().IsInvalidArgument());
  EXPECT_EQ(SplitPath("/" + std::string(kMaxNameLength + 1, 'x')).status().code(), Status::Code::kNameTooLong);
  std::string deep;
  while (deep.size() <= kMaxPathLength) deep += "/abc";
  EXPECT_EQ(SplitPath(deep).status().code(), Status::Code::kNameTooLong);
}

}  // namespace
}  // namespace ros2::dfs
