// The one authenticated channel between mrcheck processes on different nodes (docs/DESIGN.md, "The channel
// between nodes"): every message is a MUNGE credential (libmunge, the site's munged: Slurm's own authentication,
// no key of mrcheck's own) whose payload binds the purpose, the cluster, the job and step, the sender's role and
// nonce, the receiver's role and nonce, and a sequence number; the receiver checks the credential's uid and gid
// against who may speak, the payload against all of that, and its age. munged refuses a credential it decoded
// before (its replay cache) and one past its TTL; the nonces and the sequence refuse one from another connection.
//
// A session is one side of one connection. The joining side sends its nonce in the plain hello; the serving side
// answers with its first sealed message, which names the joiner's nonce and carries its own; from then on each
// message names both. The payload is encrypted by munged (its default cipher), so a body (the NCCL unique id, a
// node record) is neither readable nor changeable on the wire.
#pragma once

#include <mrcheck/status.h>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace mrcheck {

// Where munged is and which cluster this is: slurm.conf's AuthInfo socket= (Slurm's own choice of munged) and
// ClusterName, read from $SLURM_CONF (the caller's own environment: slurmstepd's, or the user's for the user's
// own probe) or /etc/slurm/slurm.conf; MRCHECK_MUNGE_SOCKET overrides the socket (tests). Empty socket: libmunge's
// default (/run/munge/munge.socket.2).
struct munge_settings {
  std::string socket;
  std::string cluster;
  std::chrono::seconds max_age{60};  // the credential's TTL, and the most its encode time may differ from now
};
munge_settings munge_settings_from_slurm_conf();

// What every credential of a session is about.
struct munge_binding {
  std::string purpose;  // "nccl-pair", "admin-handoff"
  std::string cluster;
  std::uint64_t job = 0;
  std::uint64_t step = 0;
};

// Who may speak to this side.
struct munge_speaker {
  uid_t uid = 0;
  gid_t gid = 0;
};

class munge_session {
 public:
  // `role` is this side ("serve"/"join", "listener"/"collector"), `peer_role` the other's.
  munge_session(munge_binding b, std::string role, std::string peer_role, munge_speaker peer, munge_settings s);

  const std::string& nonce() const { return nonce_; }
  // The joining side's nonce as its plain hello gave it (serving side, before its first seal).
  void set_peer_nonce(std::string n) { peer_nonce_ = std::move(n); }

  // A credential (one line of base64, no newline) that carries `body` (at most 64 KiB). Error: munged
  // unreachable or refusing ("could not authenticate: ...").
  result<std::string> seal(std::string_view body);
  // The body of the peer's next credential, or why it is refused: not decodable (forged, another key),
  // replayed, expired, from another uid/gid, of another purpose/cluster/job/step/role, another connection's
  // nonce, out of sequence, or munged unreachable.
  result<std::string> open(std::string_view credential);

 private:
  std::string header(std::string_view from, std::string_view from_nonce, std::string_view to, std::string_view to_nonce,
                     std::uint64_t seq) const;

  munge_binding b_;
  std::string role_;
  std::string peer_role_;
  munge_speaker peer_;
  munge_settings s_;
  std::string nonce_;
  std::string peer_nonce_;
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
};

// A fresh random nonce (32 hex digits, getrandom).
std::string munge_nonce();

}  // namespace mrcheck
