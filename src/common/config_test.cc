#include "common/config.h"

#include <gtest/gtest.h>

namespace ros2 {
namespace {

TEST(ConfigTest, ParsesSizes) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("1MiB"), 1u << 20);
  EXPECT_EQ(*ParseSize("2G"), 2ull << 30);
  EXPECT_FALSE(ParseSize("12 parsecs").ok());
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("99999999999999999999T").ok());
}

TEST(ConfigTest, ParsesDurations) {
  EXPECT_EQ(ParseDuration("250ms")->count(), 250);
  EXPECT_EQ(ParseDuration("3s")->count(), 3000);
  EXPECT_FALSE(ParseDuration("3 fortnights").ok());
}

TEST(ConfigTest, FormatsSizes) {
  EXPECT_EQ(FormatSize(4096), "4 KiB");
  EXPECT_EQ(FormatSize(1572864), "1.5 MiB");
  EXPECT_EQ(FormatSize(12), "12 B");
}

TEST(ConfigTest, TypedReadsNameTheKey) {
  auto node = ParseYaml("threshold: 8KiB\ntargets: lots\nname: t0\n", "test.yaml");
  ASSERT_TRUE(node.ok());
  uint64_t threshold = 0, targets = 4;
  std::string name;
  EXPECT_TRUE(ReadSize(*node, "vos", "threshold", &threshold).ok());
  EXPECT_EQ(threshold, 8192u);
  Status bad = ReadUint(*node, "engine", "targets", &targets);
  EXPECT_TRUE(bad.IsInvalidArgument());
  EXPECT_NE(bad.message().find("engine.targets"), std::string::npos);
  EXPECT_EQ(targets, 4u);  // unchanged on error
  EXPECT_TRUE(ReadString(*node, "x", "missing", &name).ok());
  EXPECT_TRUE(name.empty());
}

TEST(ConfigTest, BadYamlNamesTheOrigin) {
  auto node = ParseYaml("a: [1, 2", "broken.yaml");
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("broken.yaml"), std::string::npos);
}

}  // namespace
}  // namespace ros2
