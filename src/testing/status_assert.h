// ROS2_ASSERT_OK(expr): asserts (GoogleTest) that a Status or a Result<T> is
// OK, printing the status otherwise. Test code only.
#pragma once

#include <gtest/gtest.h>

#include "common/status.h"

namespace ros2::testing {

inline Status StatusOf(const Status& s) {
  return s;
}
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace ros2::testing

#define ROS2_ASSERT_OK(expr)                                                                  \
  do {                                                                                        \
    const auto& ros2_assert_r_ = (expr);                                                      \
    ASSERT_TRUE(ros2_assert_r_.ok()) << ::ros2::testing::StatusOf(ros2_assert_r_).ToString(); \
  } while (0)
