// TLS on the control channel: a server configured with a certificate and key
// (a self-signed one made here with OpenSSL) serves a client that trusts it,
// and refuses a client that speaks plaintext.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <gtest/gtest.h>

#include <fstream>

#include "control/control_channel.h"
#include "control/control_plane.h"
#include "control/control_server.h"
#include "control/management_client.h"
#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

struct Pem {
  std::string cert;
  std::string key;
};

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

bool AddExtension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A self-signed certificate for "localhost" with its P-256 key, in PEM.
std::optional<Pem> MakeSelfSigned() {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  if (!key || !cert) return std::nullopt;
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (!AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExtension(cert.get(), NID_subject_alt_name, "DNS:localhost")) {
    return std::nullopt;
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return std::nullopt;
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(BIO_new(BIO_s_mem()), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new(BIO_s_mem()), BIO_free);
  if (PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return std::nullopt;
  }
  return Pem{BioToString(cert_bio.get()), BioToString(key_bio.get())};
}

TEST(ControlTlsTest, TrustedClientIsServedPlaintextClientIsNot) {
  ros2::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto pem = MakeSelfSigned();
  ASSERT_TRUE(pem.has_value());
  std::string cert_path = dir.path() + "/control.crt";
  std::string key_path = dir.path() + "/control.key";
  std::ofstream(cert_path) << pem->cert;
  std::ofstream(key_path) << pem->key;

  ControlPlaneOptions opts;
  opts.data_dir = dir.path() + "/engine";
  opts.pbkdf2_iterations = 1000;
  auto plane = ControlPlane::Open(opts);
  ASSERT_TRUE(plane.ok()) << plane.status().ToString();
  auto server = ControlServer::Start(plane->get(), ListenOptions{"127.0.0.1:0", cert_path, key_path});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_NE((*server)->address(), "127.0.0.1:0");
  auto secret = ReadSecretFile((*plane)->admin_secret_path());
  ASSERT_TRUE(secret.ok());
  Credentials admin{"admin", *secret};

  auto tls = MakeControlChannel(ChannelOptions{(*server)->address(), cert_path, "localhost"});
  ASSERT_TRUE(tls.ok());
  ManagementClient secure(*tls, admin);
  auto created = secure.CreatePool("over-tls", 64 << 20);
  ASSERT_TRUE(created.ok()) << created.status().ToString();

  auto plain = MakeControlChannel(ChannelOptions{(*server)->address(), "", ""});
  ASSERT_TRUE(plain.ok());
  ManagementClient insecure(*plain, admin, std::chrono::seconds(3));
  auto refused = insecure.ListPools();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().code() == Status::Code::kDisconnected ||
              refused.status().code() == Status::Code::kTimedOut)
      << refused.status().ToString();
}

}  // namespace
}  // namespace ros2::control
