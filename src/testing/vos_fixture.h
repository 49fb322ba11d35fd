// VosFixture: the fixture of the VOS tests: a store in a fresh temporary
// directory, opened by SetUp and reopened (closed, then opened again with the
// same options) by Reopen(), as a test does to see what survives a restart.
// Options() gives the options of every open: a small store
// (vos::testing::SmallOptions) of the test's storage class, the parameter of a
// TestWithParam<StorageClass> and nvme otherwise; a test overrides it to
// change them. Test-only, header-only (the test links ros2_vos and
// vos_test_util.cc); test thread only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <type_traits>

#include "testing/temp_dir.h"
#include "vos/vos.h"
#include "vos/vos_test_util.h"

namespace ros2::testing {

template <typename Base = ::testing::Test>
class VosFixture : public Base {
 protected:
  void SetUp() override { Reopen(); }

  // The storage class of this test (its parameter, or nvme).
  vos::StorageClass Class() const {
    if constexpr (std::is_base_of_v<::testing::WithParamInterface<vos::StorageClass>, Base>) {
      return this->GetParam();
    } else {
      return vos::StorageClass::kNvme;
    }
  }
  virtual vos::VosOptions Options() { return vos::testing::SmallOptions(dir_.path(), Class()); }

  // Closes the store (when open) and opens it again with Options().
  void Reopen() {
    vos_.reset();
    auto v = vos::Vos::Open(Options());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vos_ = std::move(*v);
  }

  TempDir dir_;
  std::unique_ptr<vos::Vos> vos_;
};

}  // namespace ros2::testing
