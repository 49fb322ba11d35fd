// Unit tests of the wire codec: round trips and every validation rule.
#include <gtest/gtest.h>
