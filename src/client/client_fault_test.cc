// libros2 against a real control plane (in-process gRPC server on a Unix
// socket) and fault-injecting targets: transport workers on their own threads
// that answer the object protocol from memory and can corrupt or strip the
// checksums of what they return. Only the faults need a fake: everything the
// client does (session, placement, capability, checksums, async completion)
// runs for real. End-to-end I/O against ros2-engine is client_engine_test.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "common/hlc.h"
#include "control/control_channel.h"
#include "control/control_plane.h"
#include "control/control_server.h"
#include "control/management_client.h"
#include "object/obj_rpc.h"
#include "ros2/client.h"
#include "testing/client_fixture.h"
#include "testing/pattern.h"
#include "testing/temp_dir.h"
#include "transport/transport.h"

namespace ros2::client {
namespace {

using ros2::testing::Pattern;

std::span<const uint8_t> AsU8(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}

// A target that keeps values in memory, checks capabilities with the control
// plane's verifier and the client's update checksums, and injects faults into
// fetch replies on request. Its worker lives on its own thread.
class FaultyTarget {
 public:
  std::atomic<int> corrupt_fetches{0};       // flip a byte of the next N fetched payloads
  std::atomic<bool> strip_checksums{false};  // reply to fetches without checksums
  std::atomic<int> verify_stored_fetches{0};  // fetches that asked us to verify what we store
  std::atomic<int> updates_with_checksums{0};
  std::atomic<int> updates_without_checksums{0};

  FaultyTarget(control::CapabilityVerifier* verifier, uint32_t index) : verifier_(verifier), index_(index) {
    std::promise<std::string> address;
    auto ready = address.get_future();
    thread_ = std::thread([this, &address] { Run(address); });
    address_ = ready.get();
  }
  ~FaultyTarget() {
    stop_ = true;  // the target thread notices within one Wait (20 ms)
    thread_.join();
  }
  const std::string& address() const { return address_; }

 private:
  void Run(std::promise<std::string>& address) {
    transport::TransportOptions o;
    o.kind = transport::TransportKind::kTcp;
    auto ctx = transport::Context::Create(o);
    if (!ctx.ok()) {
      address.set_value("");
      return;
    }
    auto worker = (*ctx)->CreateWorker("faulty-target");
    if (!worker.ok()) {
      address.set_value("");
      return;
    }
    transport::Worker& w = **worker;
    // Sessions prove their keys as they do to an engine.
    w.SetSessionKeyLookup([this](const transport::SessionId& session) -> Result<transport::SessionKey> {
      return verifier_->SessionKeyFor(Uuid::FromBytes(session));
    });
    (void)w.RegisterHandler(static_cast<uint16_t>(obj::Opcode::kUpdate),
                            [this](transport::IncomingRequest r) { OnUpdate(std::move(r)); });
    (void)w.RegisterHandler(static_cast<uint16_t>(obj::Opcode::kFetch),
                            [this](transport::IncomingRequest r) { OnFetch(std::move(r)); });
    address.set_value(std::string(reinterpret_cast<const char*>(w.address().data()), w.address().size()));
    while (!stop_) w.Wait(std::chrono::milliseconds(20));
    worker->reset();
  }

  static std::string Key(const ObjectId& oid, const std::string& dkey, const std::string& akey) {
    return oid.ToString() + "/" + dkey + "/" + akey;
  }

  Status Check(const transport::IncomingRequest& r, const obj::RequestHeader& h, control::Rights rights) {
    if (h.target != index_) return Status::InvalidArgument("request for another target");
    auto cap = verifier_->Authorize(r.capability(), h.pool, h.container, rights);
    return cap.ok() ? Status::Ok() : cap.status();
  }

  void OnUpdate(transport::IncomingRequest r) {
    auto req = obj::DecodeUpdateRequest(r.payload());
    if (!req.ok()) return r.Reply(req.status());
    if (Status st = Check(r, req->header, control::kRightWrite); !st.ok()) return r.Reply(st);
    if (r.bulk_out_size() != req->length) return r.Reply(Status::InvalidArgument("length differs from the bulk"));
    (req->csum.type == ChecksumType::kNone ? updates_without_checksums : updates_with_checksums)++;
    auto data = std::make_shared<std::vector<std::byte>>(req->length);
    auto request = std::make_shared<obj::UpdateRequest>(std::move(*req));
    r.Pull(*data, [this, r, data, request](const Status& pulled) mutable {
      if (!pulled.ok()) return r.Reply(pulled);
      if (request->csum.type != ChecksumType::kNone) {
        Status st = VerifyChunkChecksums(request->csum.type, *data, request->csum.chunk_size, request->csum.values,
                                         "faulty target update");
        if (!st.ok()) return r.Reply(st);
      }
      std::vector<std::byte>& stored = values_[Key(request->oid, request->dkey, request->akey)];
      if (request->type == obj::ValueType::kSingle) {
        stored = *data;
      } else {
        uint64_t off = request->index * request->record_size;
        if (stored.size() < off + data->size()) stored.resize(off + data->size());
        std::copy(data->begin(), data->end(), stored.begin() + static_cast<ptrdiff_t>(off));
      }
      r.Reply(Status::Ok(), AsU8(obj::Encode(obj::UpdateReply{++epoch_})));
    });
  }

  void OnFetch(transport::IncomingRequest r) {
    auto req = obj::DecodeFetchRequest(r.payload());
    if (!req.ok()) return r.Reply(req.status());
    if (Status st = Check(r, req->header, control::kRightRead); !st.ok()) return r.Reply(st);
    if ((req->header.flags & obj::kFlagVerifyStored) != 0) verify_stored_fetches++;
    const std::vector<std::byte>& stored = values_[Key(req->oid, req->dkey, req->akey)];
    auto out = std::make_shared<std::vector<std::byte>>();
    obj::FetchReply reply;
    if (req->type == obj::ValueType::kSingle) {
      reply.size = stored.size();
      if (stored.size() <= r.bulk_in_capacity()) *out = stored;
    } else {
      uint64_t off = req->index * req->record_size;
      out->assign(req->count * req->record_size, std::byte{0});
      for (uint64_t i = 0; i < out->size() && off + i < stored.size(); ++i) (*out)[i] = stored[off + i];
      reply.size = out->size();
    }
    if (!strip_checksums && (req->type == obj::ValueType::kArray || stored.size() <= r.bulk_in_capacity())) {
      reply.csum.type = ChecksumType::kCrc32c;
      reply.csum.chunk_size = 4096;
      reply.csum.values = ComputeChunkChecksums(ChecksumType::kCrc32c, *out, 4096);
    }
    if (!out->empty() && corrupt_fetches.load() > 0) {
      corrupt_fetches--;
      (*out)[out->size() / 2] ^= std::byte{0x01};  // after the checksum: corrupted "in transit"
    }
    auto payload = std::make_shared<std::vector<uint8_t>>(obj::Encode(reply));
    if (out->empty()) return r.Reply(Status::Ok(), AsU8(*payload));
    r.Push(*out, [r, out, payload](const Status& pushed) mutable {
      if (!pushed.ok()) return r.Reply(pushed);
      r.Reply(Status::Ok(), AsU8(*payload));
    });
  }

  control::CapabilityVerifier* verifier_;
  uint32_t index_;
  std::thread thread_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::map<std::string, std::vector<std::byte>> values_;  // target thread only
  uint64_t epoch_ = 0;
};

class ClientFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    control::ControlPlaneOptions opts;
    opts.data_dir = dir_.path() + "/cp";
    opts.pbkdf2_iterations = 1000;
    auto cp = control::ControlPlane::Open(opts);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    plane_ = std::move(*cp);
    auto server = control::ControlServer::Start(plane_.get(), control::ListenOptions{});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);

    control::EngineRegistration reg;
    reg.engine = Uuid::Generate();
    reg.address = "faulty";
    for (uint32_t i = 0; i < 2; ++i) {
      targets_.push_back(std::make_unique<FaultyTarget>(&plane_->verifier(), i));
      ASSERT_FALSE(targets_.back()->address().empty());
      reg.targets.push_back(control::TargetRegistration{i, targets_.back()->address(), 1ull << 30});
    }
    reg.capacity_bytes = 2ull << 30;
    ASSERT_TRUE(plane_->RegisterLocalEngine(reg).ok());

    auto secret = control::ReadSecretFile(plane_->admin_secret_path());
    ASSERT_TRUE(secret.ok());
    auto channel = control::MakeControlChannel({.address = server_->address()});
    ASSERT_TRUE(channel.ok());
    control::ManagementClient mgmt(*channel, {"admin", *secret});
    ASSERT_TRUE(mgmt.CreatePool("p", 1ull << 30).ok());
    ASSERT_TRUE(mgmt.CreateContainer("p", "c", {}).ok());
    ASSERT_TRUE(mgmt.CreateContainer("p", "nocsum", {{"checksum", "off"}}).ok());

    ClientOptions co;
    co.control = server_->address();
    co.secret = *secret;
    co.transport = "tcp";
    co.io_timeout = std::chrono::seconds(10);
    auto connected = ros2::testing::ConnectContainer(co, "p", "c");
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    client_ = std::move(connected->client);
    pool_ = std::move(connected->pool);
    cont_ = std::move(connected->cont);
  }

  void TearDown() override {
    cont_.reset();
    pool_.reset();
    client_.reset();
    targets_.clear();
    server_.reset();
    plane_.reset();
  }

  Object Open(ObjectClass oc, uint64_t lo) {
    auto o = cont_->OpenObject(Container::MakeObjectId(oc, 0, lo));
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return *o;
  }

  ros2::testing::TempDir dir_;
  std::unique_ptr<control::ControlPlane> plane_;
  std::unique_ptr<control::ControlServer> server_;
  std::vector<std::unique_ptr<FaultyTarget>> targets_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Container> cont_;
};

TEST_F(ClientFaultTest, RoundTripsThroughPlacementCapabilityAndChecksums) {
  EXPECT_EQ(pool_->summary().target_count, 2u);
  EXPECT_EQ(cont_->summary().checksum, ChecksumType::kCrc32c);
  for (ObjectClass oc : {ObjectClass::kS1, ObjectClass::kSX}) {
    Object obj = Open(oc, 1);
    auto small = Pattern(100, 1);
    ASSERT_TRUE(obj.Put("d", "a", small).ok());
    auto got = obj.Get("d", "a", 16);  // smaller hint: Get grows its buffer
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, small);

    for (size_t size : {size_t{4096}, size_t{1} << 20}) {
      auto data = Pattern(size, size);
      UpdateArgs u{"array-" + std::to_string(size), "x", ValueType::kArray, 8, 1, data};
      ASSERT_TRUE(obj.Update(u).ok());
      std::vector<std::byte> back(size);
      FetchArgs f{u.dkey, "x", ValueType::kArray, 8, size, 1, back};
      auto r = obj.Fetch(f);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->size, size);
      EXPECT_EQ(back, data);
    }
  }
  // SX spreads dkeys over both targets; every update carried checksums.
  Object sx = Open(ObjectClass::kSX, 2);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(sx.Put("k" + std::to_string(i), "a", Pattern(10, i)).ok());
  EXPECT_GT(targets_[0]->updates_with_checksums.load(), 0);
  EXPECT_GT(targets_[1]->updates_with_checksums.load(), 0);
  EXPECT_EQ(targets_[0]->updates_without_checksums.load() + targets_[1]->updates_without_checksums.load(), 0);
}

TEST_F(ClientFaultTest, CorruptedFetchIsACorruptionErrorNeverData) {
  Object obj = Open(ObjectClass::kS1, 3);
  auto data = Pattern(64 * 1024, 3);
  ASSERT_TRUE(obj.Update({"d", "a", ValueType::kArray, 0, 1, data}).ok());
  auto asked_to_verify = [&] {
    int n = 0;
    for (auto& t : targets_) n += t->verify_stored_fetches.load();
    return n;
  };
  // Damaged on the way once: the client reads again, asking the engine to
  // verify what it stores, and gets the data whole.
  for (auto& t : targets_) t->corrupt_fetches = 1;
  std::vector<std::byte> back(data.size(), std::byte{0xEE});
  auto healed = obj.Fetch({"d", "a", ValueType::kArray, 0, data.size(), 1, back});
  ASSERT_TRUE(healed.ok()) << healed.status().ToString();
  EXPECT_EQ(back, data);
  EXPECT_EQ(asked_to_verify(), 1);
  // Damaged both times: a Corruption error, and no byte of it in the buffer.
  for (auto& t : targets_) t->corrupt_fetches = 2;
  std::fill(back.begin(), back.end(), std::byte{0xEE});
  auto r = obj.Fetch({"d", "a", ValueType::kArray, 0, data.size(), 1, back});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_EQ(asked_to_verify(), 2);
  // No unverified byte is left in the buffer (the engine passes stored
  // checksums through: the client's check is the one that refuses).
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_NE(r.status().message().find(obj.id().ToString()), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("dkey='d'"), std::string::npos) << r.status().message();
  // The next read (no fault) is fine, and asks for no verification.
  for (auto& t : targets_) t->corrupt_fetches = 0;
  auto again = obj.Fetch({"d", "a", ValueType::kArray, 0, data.size(), 1, back});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(back, data);
  EXPECT_EQ(asked_to_verify(), 2);
  // A single value corrupted in transit is refused the same way.
  ASSERT_TRUE(obj.Put("s", "a", Pattern(300, 4)).ok());
  for (auto& t : targets_) t->corrupt_fetches = 2;
  auto single = obj.Get("s", "a");
  EXPECT_TRUE(single.status().IsCorruption()) << single.status().ToString();
}

TEST_F(ClientFaultTest, FetchWithoutChecksumsIsRefusedWhenTheContainerHasThem) {
  Object obj = Open(ObjectClass::kS1, 4);
  ASSERT_TRUE(obj.Put("d", "a", Pattern(128, 5)).ok());
  for (auto& t : targets_) t->strip_checksums = true;
  auto got = obj.Get("d", "a");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kProtocol) << got.status().ToString();

  // A container with checksums off sends none and accepts none.
  auto nocsum = pool_->OpenContainer("nocsum");
  ASSERT_TRUE(nocsum.ok()) << nocsum.status().ToString();
  EXPECT_EQ((*nocsum)->summary().checksum, ChecksumType::kNone);
  auto o2 = (*nocsum)->OpenObject(Container::MakeObjectId(ObjectClass::kS1, 0, 4));
  ASSERT_TRUE(o2.ok());
  int without_before = targets_[0]->updates_without_checksums + targets_[1]->updates_without_checksums;
  ASSERT_TRUE(o2->Put("d", "a", Pattern(128, 6)).ok());
  EXPECT_EQ(targets_[0]->updates_without_checksums + targets_[1]->updates_without_checksums, without_before + 1);
  auto got2 = o2->Get("d", "a");
  ASSERT_TRUE(got2.ok()) << got2.status().ToString();
  EXPECT_EQ(*got2, Pattern(128, 6));
}

TEST_F(ClientFaultTest, AsyncBatchOfAThousandCompletesThroughTheEventQueue) {
  Object obj = Open(ObjectClass::kSX, 5);
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  constexpr uint32_t kOps = 1000;
  constexpr size_t kSize = 4096;
  std::vector<std::byte> data(kOps * kSize);
  for (uint32_t i = 0; i < kOps; ++i) {
    auto p = Pattern(kSize, i);
    std::copy(p.begin(), p.end(), data.begin() + i * kSize);
  }
  for (uint32_t i = 0; i < kOps; ++i) {
    UpdateArgs u{"dk" + std::to_string(i % 50),
                 "a",
                 ValueType::kArray,
                 (i / 50) * kSize,
                 1,
                 std::span<const std::byte>(data).subspan(i * kSize, kSize)};
    ASSERT_TRUE(obj.SubmitUpdate(**eq, u, i).ok());
  }
  // All submitted from one thread; a few may already have completed (connecting
  // the second target progresses the worker).
  EXPECT_EQ((*eq)->in_flight() + (*eq)->ready(), kOps);
  std::set<uint64_t> seen;
  std::vector<Event> events(64);
  while (seen.size() < kOps) {
    auto n = (*eq)->Wait(events, 1, std::chrono::seconds(20));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    for (size_t i = 0; i < *n; ++i) {
      ASSERT_TRUE(events[i].result.status.ok()) << events[i].result.status.ToString();
      EXPECT_EQ(events[i].result.size, kSize);
      EXPECT_TRUE(seen.insert(events[i].user_data).second);
    }
  }
  EXPECT_EQ(*seen.rbegin(), kOps - 1);

  // Read back with callbacks.
  std::vector<std::byte> back(data.size());
  uint32_t ok = 0, failed = 0;
  for (uint32_t i = 0; i < kOps; ++i) {
    FetchArgs f{"dk" + std::to_string(i % 50),
                "a",
                ValueType::kArray,
                (i / 50) * kSize,
                kSize,
                1,
                std::span(back).subspan(i * kSize, kSize)};
    ASSERT_TRUE(obj.SubmitFetch(**eq, f, [&](const IoResult& r) { (r.status.ok() ? ok : failed)++; }).ok());
  }
  while ((*eq)->in_flight() > 0) ASSERT_TRUE((*eq)->Wait(events, 1, std::chrono::seconds(20)).ok());
  EXPECT_EQ(ok, kOps);
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ((*eq)->ready(), 0u);  // callbacks produce no events
  EXPECT_EQ(back, data);
}

TEST_F(ClientFaultTest, BadArgumentsFailAtSubmissionAndQueueNothing) {
  Object obj = Open(ObjectClass::kS1, 6);
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  std::vector<std::byte> buf(100);
  EXPECT_TRUE(obj.SubmitUpdate(**eq, UpdateArgs{"", "a", ValueType::kSingle, 0, 1, buf}, 1).IsInvalidArgument());
  EXPECT_TRUE(obj.SubmitUpdate(**eq, UpdateArgs{"d", "", ValueType::kSingle, 0, 1, buf}, 1).IsInvalidArgument());
  Status rs = obj.SubmitUpdate(**eq, UpdateArgs{"d", "a", ValueType::kArray, 0, 3, buf}, 1);
  EXPECT_TRUE(rs.IsInvalidArgument());
  EXPECT_NE(rs.message().find("3-byte records"), std::string::npos) << rs.message();
  EXPECT_TRUE(obj.SubmitFetch(**eq, FetchArgs{"d", "a", ValueType::kArray, 0, 200, 1, buf}, 1).IsInvalidArgument());
  EXPECT_TRUE(obj.SubmitFetch(**eq, FetchArgs{"d", "a", ValueType::kArray, 0, 0, 1, buf}, 1).IsInvalidArgument());
  EXPECT_TRUE(obj.SubmitUpdate(**eq, UpdateArgs{"d", "a"}, IoCallback{}).IsInvalidArgument());
  EXPECT_TRUE(obj.SubmitUpdate(**eq, UpdateArgs{std::string(2000, 'k'), "a"}, 1).IsInvalidArgument());
  EXPECT_EQ((*eq)->in_flight(), 0u);

  auto unknown = cont_->OpenObject(Container::MakeObjectId(static_cast<ObjectClass>(77), 0, 1));
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.status().IsInvalidArgument()) << unknown.status().ToString();
}

TEST_F(ClientFaultTest, UnknownPoolAndContainerAreClearErrors) {
  auto pool = client_->ConnectPool("no-such-pool");
  ASSERT_FALSE(pool.ok());
  EXPECT_TRUE(pool.status().IsNotFound()) << pool.status().ToString();
  EXPECT_NE(pool.status().message().find("no-such-pool"), std::string::npos);
  auto cont = pool_->OpenContainer("no-such-cont");
  ASSERT_FALSE(cont.ok());
  EXPECT_TRUE(cont.status().IsNotFound()) << cont.status().ToString();
  EXPECT_NE(cont.status().message().find("no-such-cont"), std::string::npos);
}

}  // namespace
}  // namespace ros2::client
