// The encryption properties of a container: values, the key id and its rules.
#include "control/container_properties.h"

#include <gtest/gtest.h>

namespace ros2::control {
namespace {

TEST(ContainerPropertiesTest, EncryptionIsAes256GcmOrOffWithAKeyId) {
  auto off = ParseContainerProperties({});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->encryption());
  EXPECT_TRUE(off->encryption_key_id().empty());

  auto on = ParseContainerProperties({{"encryption", "aes-256-gcm"}, {"encryption_key_id", "tenant-a.2026:1"}});
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->encryption());
  EXPECT_EQ(on->encryption_key_id(), "tenant-a.2026:1");
  auto alias = ParseContainerProperties({{"encryption", "on"}});
  ASSERT_TRUE(alias.ok());
  EXPECT_TRUE(alias->encryption());
  auto explicit_off = ParseContainerProperties({{"encryption", "off"}});
  ASSERT_TRUE(explicit_off.ok());
  EXPECT_FALSE(explicit_off->encryption());

  auto bad = ParseContainerProperties({{"encryption", "aes-128-cbc"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("encryption='aes-128-cbc'"), std::string::npos);
  // A key id needs encryption, and is a name (no spaces, not empty, not too long).
  auto lone = ParseContainerProperties({{"encryption_key_id", "k"}});
  ASSERT_FALSE(lone.ok());
  EXPECT_NE(lone.status().message().find("needs encryption=aes-256-gcm"), std::string::npos);
  for (const std::string& id : {std::string(), std::string("a b"), std::string(129, 'k'), std::string("k/1")}) {
    auto r = ParseContainerProperties({{"encryption", "aes-256-gcm"}, {"encryption_key_id", id}});
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << "'" << id << "'";
  }
}

}  // namespace
}  // namespace ros2::control
