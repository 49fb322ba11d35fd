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

namespace ros2::control {
namespace {

TEST(ContainerPropertiesTest, RedundancyFactorMustBeMetByTheDefaultClass) {
  auto none = ParseContainerProperties({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->rd_fac(), 0u);
  auto rp = ParseContainerProperties({{"oclass", "rp_3gx"}, {"rd_fac", "2"}});
  ASSERT_TRUE(rp.ok()) << rp.status().ToString();
  EXPECT_EQ(rp->object_class(), "RP_3GX");
  EXPECT_EQ(rp->rd_fac(), 2u);
  // The default class (SX) survives no loss: rd_fac 1 alone is refused, naming both.
  auto weak = ParseContainerProperties({{"rd_fac", "1"}});
  ASSERT_FALSE(weak.ok());
  EXPECT_TRUE(weak.status().IsInvalidArgument());
  EXPECT_NE(weak.status().message().find("SX"), std::string::npos) << weak.status().ToString();
  EXPECT_NE(weak.status().message().find("rd_fac=1"), std::string::npos) << weak.status().ToString();
  auto two = ParseContainerProperties({{"oclass", "RP_2G1"}, {"rd_fac", "2"}});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("RP_2G1"), std::string::npos) << two.status().ToString();
  for (const char* bad : {"3", "-1", "x", "", "01"}) {
    auto r = ParseContainerProperties({{"oclass", "RP_3G1"}, {"rd_fac", bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("rd_fac="), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace ros2::control
