#include <mrcheck/munge_auth.h>

#include <mrcheck/slurm_conf.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <mrcheck/build_config.h>

#include <fmt/format.h>

#if MRCHECK_HAVE_MUNGE
#include <munge.h>
#endif
#include <sys/random.h>

#include <cstdlib>
#include <ctime>
#include <memory>

namespace mrcheck {

namespace {

constexpr std::size_t k_body_max = 64 * 1024;

#if MRCHECK_HAVE_MUNGE
struct ctx_deleter {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using ctx_ptr = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, ctx_deleter>;

result<ctx_ptr> make_ctx(const munge_settings& s) {
  ctx_ptr ctx(munge_ctx_create());
  if (!ctx) return status::error("could not authenticate: munge_ctx_create failed");
  if (!s.socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, s.socket.c_str()) != EMUNGE_SUCCESS) {
    return status::error(fmt::format("could not authenticate: munge socket {}: {}", escape_line(s.socket, 128),
                                     munge_ctx_strerror(ctx.get())));
  }
  return ctx;
}

#endif

// AuthInfo=socket=PATH[,ttl=...]: the socket part, as Slurm's auth/munge plugin reads it.
std::string auth_info_socket(std::string_view v) {
  while (!v.empty()) {
    auto comma = v.find(',');
    std::string_view item = v.substr(0, comma);
    if (item.starts_with("socket=")) return std::string(item.substr(7));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return "";
}

}  // namespace

munge_settings munge_settings_from_slurm_conf() {
  munge_settings s;
  if (auto c = read_slurm_conf_settings(sysroot(), slurm_conf_path(sysroot()))) {
    if (const auto* a = c->find("AuthInfo")) s.socket = auth_info_socket(a->value);
    if (const auto* n = c->find("ClusterName")) s.cluster = n->value;
  }
  if (const char* e = std::getenv("MRCHECK_MUNGE_SOCKET"); e && *e == '/') s.socket = e;
  return s;
}

std::string munge_nonce() {
  unsigned char raw[16] = {};
  std::size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  std::string out;
  for (unsigned char c : raw) out += fmt::format("{:02x}", c);
  return out;
}

munge_session::munge_session(munge_binding b, std::string role, std::string peer_role, munge_speaker peer,
                             munge_settings s)
    : b_(std::move(b)),
      role_(std::move(role)),
      peer_role_(std::move(peer_role)),
      peer_(peer),
      s_(std::move(s)),
      nonce_(munge_nonce()) {}

std::string munge_session::header(std::string_view from, std::string_view from_nonce, std::string_view to,
                                  std::string_view to_nonce, std::uint64_t seq) const {
  return fmt::format("mrcheck-auth 1\npurpose {}\ncluster {}\nstep {}.{}\nfrom {} {}\nto {} {}\nseq {}\n\n", b_.purpose,
                     b_.cluster, b_.job, b_.step, from, from_nonce, to, to_nonce, seq);
}

#if MRCHECK_HAVE_MUNGE
result<std::string> munge_session::seal(std::string_view body) {
  if (body.size() > k_body_max) return status::error("munge channel: message too long");
  auto ctx = make_ctx(s_);
  if (!ctx) return ctx.error();
  // Only the peer's uid may decode it (munged refuses anyone else), and only within max_age.
  munge_ctx_set(ctx->get(), MUNGE_OPT_UID_RESTRICTION, peer_.uid);
  munge_ctx_set(ctx->get(), MUNGE_OPT_TTL, static_cast<int>(s_.max_age.count()));
  std::string payload = header(role_, nonce_, peer_role_, peer_nonce_.empty() ? "-" : peer_nonce_, sent_);
  payload.append(body);
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx->get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::string why = munge_ctx_strerror(ctx->get()) ? munge_ctx_strerror(ctx->get()) : munge_strerror(e);
    std::free(cred);
    return status::error("could not authenticate: munge: " + escape_line(why, 200));
  }
  std::string out(cred);
  std::free(cred);
  ++sent_;
  return out;
}

result<std::string> munge_session::open(std::string_view credential) {
  auto ctx = make_ctx(s_);
  if (!ctx) return ctx.error();
  std::string cred(credential);
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(cred.c_str(), ctx->get(), &buf, &len, &uid, &gid);
  std::unique_ptr<void, decltype(&std::free)> owner(buf, &std::free);
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(ctx->get());
    std::string text = escape_line(why ? why : munge_strerror(e), 200);
    if (e == EMUNGE_SOCKET) return status::error("could not authenticate: munge: " + text);
    return status::error("refused credential: " + text);
  }
  if (uid != peer_.uid || gid != peer_.gid) {
    return status::error(fmt::format("refused credential of uid {} gid {} (only uid {} gid {} may speak)", uid, gid,
                                     peer_.uid, peer_.gid));
  }
  time_t encoded = 0;
  munge_ctx_get(ctx->get(), MUNGE_OPT_ENCODE_TIME, &encoded);
  long long age = static_cast<long long>(std::time(nullptr)) - static_cast<long long>(encoded);
  if (age > s_.max_age.count() || -age > s_.max_age.count()) {
    return status::error(fmt::format("refused credential encoded {} s from now (at most {} s)", age,
                                     static_cast<long long>(s_.max_age.count())));
  }
  std::string_view payload(static_cast<const char*>(buf), static_cast<std::size_t>(len > 0 ? len : 0));
  // The joiner learns the server's nonce from the server's first credential; every other is named already.
  std::string from_nonce = peer_nonce_;
  if (from_nonce.empty() && received_ == 0) {
    auto at = payload.find(fmt::format("\nfrom {} ", peer_role_));
    if (at != std::string_view::npos) {
      auto start = at + 7 + peer_role_.size();
      from_nonce = std::string(payload.substr(start, std::min<std::size_t>(32, payload.size() - start)));
    }
  }
  std::string want = header(peer_role_, from_nonce, role_, nonce_, received_);
  if (from_nonce.size() != 32 || !payload.starts_with(want)) {
    auto first = payload.substr(0, std::min(payload.find("\n\n"), payload.size()));
    return status::error(fmt::format("refused credential of another purpose, cluster, step or connection ('{}')",
                                     escape_line(first, 200)));
  }
  peer_nonce_ = from_nonce;
  ++received_;
  return std::string(payload.substr(want.size()));
}

#else  // MRCHECK_HAVE_MUNGE: built with -DMRCHECK_WITH_MUNGE=OFF (CMakeLists.txt): nothing between nodes is trusted

namespace {
const char* const k_no_munge =
    "could not authenticate: this mrcheck was built without libmunge (-DMRCHECK_WITH_MUNGE=OFF), so no message "
    "between nodes is accepted";
}  // namespace

result<std::string> munge_session::seal(std::string_view body) {
  if (body.size() > k_body_max) return status::error("munge channel: message too long");
  return status::error(k_no_munge);
}

result<std::string> munge_session::open(std::string_view) { return status::error(k_no_munge); }

#endif  // MRCHECK_HAVE_MUNGE

}  // namespace mrcheck
