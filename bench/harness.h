// The names the benchmark suites use from the harness they share with the
// tests (src/testing, docs/testing.md): processes, temporary directories, the
// local cluster and the FUSE mount. Suite code only.
#pragma once

#include "testing/fuse_mount.h"
#include "testing/local_cluster.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::bench {

using testing::BuildTreeBinaryPath;
using testing::ChildProcess;
using testing::FindOnPath;
using testing::FuseMount;
using testing::IsFuseMountpoint;
using testing::LocalCluster;
using testing::LocalClusterOptions;
using testing::PinProcess;
using testing::ProcessCpuSeconds;
using testing::ReadFileOrError;
using testing::SpawnOptions;
using testing::TempDir;

}  // namespace ros2::bench
