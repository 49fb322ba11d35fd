// OpCall and the operation table: how ros2-agent runs one submission entry.
//
// Every opcode of the ring (offload/ring.h, docs/agent.md "Opcodes") has one
// row in kOps (op_table.cc): its name, its argument layout and its handler.
// Session::Execute validates what every entry shares (the arena ranges, the
// opcode, the mount a layout names, the entry's name at the head of the
// argument block), builds an OpCall and runs the row's handler, which parses
// the rest of the block, calls the mount's dfs::Filesystem and writes the
// result. Adding an operation is one row and one handler.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "offload/wire.h"
#include "ros2/dfs.h"

namespace ros2::agent {

class Session;

// What the head of an entry's argument block and its mount field mean.
enum class ArgLayout : uint8_t {
  kSession,    // no mount (nop, mount): the handler reads the whole block
  kMount,      // a mount this session holds; no entry name (lookup_path, mkdir_all, statfs, unmount)
  kEntry,      // a held mount; the block starts with the entry's name (sqe.entry + name = the entry)
  kEntryData,  // as kEntry, plus sqe.buf is the payload of a read or write (bounded chunk count)
};

// One entry in execution (the agent's private copy of it).
struct OpCall {
  Session& session;
  const SubmitEntry& sqe;
  CompleteEntry& cqe;
  dfs::Filesystem* fs = nullptr;  // the named mount's (null for kSession)
  dfs::Entry entry;               // sqe.entry with its name (kEntry, kEntryData)
  ArgReader args;                 // the block after the entry's name
  std::span<std::byte> buf;       // the result area, or the payload of a read or write

  // Completes with -errno of `status` (EIO when it has none) and its message.
  void Fail(const Status& status);
  void Fail(int err, const Status& status);
  // Completes with EINVAL: the argument block does not parse.
  void BadArgs();
  // A path or name argument (at most dfs::kMaxPathLength bytes).
  bool Str(std::string* s);
  // Copies `bytes` to the result area; false (and an ERANGE completion) when they do not fit.
  bool Put(const std::vector<std::byte>& bytes);
  // The entry (WireEntry + name) as the result, or the failure.
  void PutEntry(const Result<dfs::Entry>& e);
  // Completes with `st` when it failed (an operation with no result).
  void Done(const Status& st) {
    if (!st.ok()) Fail(st);
  }

  // The session-level operations (session.cc).
  void MountContainer();     // a new mount of the session's tenant
  void UnmountMount();       // drops the named mount
  void SubmitIo(bool read);  // in flight on the session's event queue; its callback completes it
};

using OpHandler = void (*)(OpCall&);

struct OpSpec {
  RingOp op;
  const char* name;
  ArgLayout layout;
  OpHandler handler;
};

// The row of opcode `op`; null for an opcode the agent does not know.
const OpSpec* FindOp(uint8_t op);
// Its name for messages ("unknown" when there is none).
const char* OpName(uint8_t op);

}  // namespace ros2::agent
